package main

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/hashicorp/go-hclog"

	"github.com/fleetcast/autoscaler/config"
	"github.com/fleetcast/autoscaler/fleet"
	"github.com/fleetcast/autoscaler/providers"
	"github.com/fleetcast/autoscaler/providers/aws"
)

// sameKind checks that the pools are all simulated or all real: the
// simulated cloud runs on its own clock and workload, and does not mix
// with real clouds in one fleet.
func sameKind(cfg *config.Config) error {
	sim := cfg.Pools[0].Provider == fleet.ProviderSim
	for _, p := range cfg.Pools[1:] {
		if (p.Provider == fleet.ProviderSim) != sim {
			return fmt.Errorf("pool %s uses provider %q and pool %s %q: a config's pools are all simulated or all real",
				cfg.Pools[0].Name, cfg.Pools[0].Provider, p.Name, p.Provider)
		}
	}
	return nil
}

// driven are the providers this build drives: the one list that
// validate, plan and run consult. The config accepts the others' pools
// (gcp, plugin), which their providers will drive.
var driven = []string{fleet.ProviderAWS, fleet.ProviderSim}

// drivable checks that this build can drive every pool of cfg, all
// simulated or all real, and names the first pool it cannot.
func drivable(cfg *config.Config) error {
	for _, p := range cfg.Pools {
		if !slices.Contains(driven, p.Provider) {
			return fmt.Errorf("pool %s uses provider %q, which this build cannot drive yet (it drives %s pools)", p.Name, p.Provider, strings.Join(driven, " and "))
		}
	}
	return sameKind(cfg)
}

// liveClouds makes the providers of a config's real pools, by pool name.
// AWS pools get their GPU facts checked and filled in from EC2, and, with
// spot_price_lookup, their price from the current spot price.
func liveClouds(ctx context.Context, log hclog.Logger, cfg *config.Config) (map[string]providers.Provider, error) {
	out := map[string]providers.Provider{}
	var awsp *aws.Provider
	for i := range cfg.Pools {
		p := &cfg.Pools[i]
		switch p.Provider {
		case fleet.ProviderAWS:
			if awsp == nil {
				awsp = aws.New(aws.Options{Log: log.Named("aws")})
			}
			out[p.Name] = awsp
		default:
			return nil, drivable(cfg)
		}
	}
	if awsp == nil {
		return out, nil
	}
	for _, p := range cfg.Pools {
		if p.Provider == fleet.ProviderAWS && p.Target["launch_template"] != "" && cfg.Controller.Fleet == config.Defaults().Controller.Fleet {
			log.Warn("controller.fleet is left at its default: every controller so left tags its instances alike, and cannot tell another's from its own; name each fleet (staging, prod)",
				"fleet", cfg.Controller.Fleet, "pool", p.Name)
			break
		}
	}
	if err := awsp.Resolve(ctx, cfg.Pools); err != nil {
		return nil, err
	}
	for i := range cfg.Pools {
		p := &cfg.Pools[i]
		if p.Provider != fleet.ProviderAWS || p.Target["spot_price_lookup"] != "true" {
			continue
		}
		price, err := awsp.SpotPrice(ctx, *p)
		if err != nil {
			return nil, err
		}
		log.Info("spot price", "pool", p.Name, "configured", p.PricePerHour, "now", price)
		p.PricePerHour = price
	}
	return out, nil
}
