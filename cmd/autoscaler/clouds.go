package main

import (
	"context"
	"fmt"

	"github.com/hashicorp/go-hclog"

	"github.com/fleetcast/autoscaler/config"
	"github.com/fleetcast/autoscaler/providers"
	"github.com/fleetcast/autoscaler/providers/aws"
)

// sameKind checks that the pools are all simulated or all real: the
// simulated cloud runs on its own clock and workload, and does not mix
// with real clouds in one fleet.
func sameKind(cfg *config.Config) error {
	sim := cfg.Pools[0].Provider == "sim"
	for _, p := range cfg.Pools[1:] {
		if (p.Provider == "sim") != sim {
			return fmt.Errorf("pool %s uses provider %q and pool %s %q: a config's pools are all simulated or all real",
				cfg.Pools[0].Name, cfg.Pools[0].Provider, p.Name, p.Provider)
		}
	}
	return nil
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
		case "aws":
			if awsp == nil {
				awsp = aws.New(aws.Options{Log: log.Named("aws")})
			}
			out[p.Name] = awsp
		default:
			return nil, fmt.Errorf("pool %s uses provider %q, which this build cannot drive yet (aws and sim pools can)", p.Name, p.Provider)
		}
	}
	if awsp == nil {
		return out, nil
	}
	for _, p := range cfg.Pools {
		if p.Provider == "aws" && p.Target["launch_template"] != "" && cfg.Controller.Fleet == config.Defaults().Controller.Fleet {
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
		if p.Provider != "aws" || p.Target["spot_price_lookup"] != "true" {
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
