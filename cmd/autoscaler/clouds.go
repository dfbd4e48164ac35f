package main

import (
	"context"

	"github.com/hashicorp/go-hclog"

	"github.com/fleetcast/autoscaler/config"
	"github.com/fleetcast/autoscaler/providers"
	"github.com/fleetcast/autoscaler/providers/registry"
)

// liveClouds makes the providers of a config's real pools, by pool name,
// through the registry's factories: AWS pools get their GPU facts checked
// and filled in from EC2, and, with spot_price_lookup, their price from
// the current spot price.
func liveClouds(ctx context.Context, log hclog.Logger, cfg *config.Config) (map[string]providers.Provider, error) {
	env := registry.Env{Log: log, Fleet: cfg.Controller.Fleet, DefaultFleet: cfg.Controller.Fleet == config.Defaults().Controller.Fleet, Plugins: cfg.Plugins, Origin: cfg.Origin}
	return registry.Open(ctx, env, cfg.Pools)
}
