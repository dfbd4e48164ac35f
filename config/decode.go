package config

import (
	"maps"
	"slices"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"
)

// poolResult is a decoded pool and what cross-checks need to know about it.
type poolResult struct {
	body *poolBody
	ok   bool // decoded without error
}

func (d *decoder) decodeFile(body hcl.Body) *Config {
	cfg := Defaults()
	content, diags := body.Content(rootSchema)
	d.decoded(diags)

	var (
		pools                []poolResult
		first                = map[string]*poolBody{}
		seen                 = map[string]*hcl.Block{}
		forecast             *forecastBody
		limits               *limitsBody
		forecastOK, limitsOK = true, true
		partitions           []partition
	)
	plugins := map[string]*hcl.Block{}
	var tiers []tierBlock
	var teams []teamBlock
	for _, b := range content.Blocks {
		before := d.errors
		if b.Type == "tier" {
			tiers = append(tiers, d.decodeTier(b))
			continue
		}
		if b.Type == "team" {
			teams = append(teams, d.decodeTeam(b))
			continue
		}
		if b.Type == "plugin" {
			if prev, dup := plugins[b.Labels[0]]; dup {
				d.errorf(b.LabelRanges[0], "Duplicate plugin name",
					"A plugin named %q was already defined at %s; plugin names must be unique.", b.Labels[0], defPos(prev.DefRange))
				continue
			}
			plugins[b.Labels[0]] = b
			cfg.Plugins = append(cfg.Plugins, d.decodePlugin(b))
			continue
		}
		if b.Type == "pool" {
			pb := d.decodePoolBlock(b)
			p := d.decodePool(pb)
			if prev, dup := first[pb.Name]; dup {
				d.errorf(pb.NameRange, "Duplicate pool name",
					"A pool named %q was already defined at %s; pool names must be unique.", pb.Name, defPos(prev.DefRange))
				continue
			}
			first[pb.Name] = pb
			cfg.Pools = append(cfg.Pools, p)
			pools = append(pools, poolResult{body: pb, ok: d.errors == before})
			continue
		}
		if prev, dup := seen[b.Type]; dup {
			d.errorf(b.DefRange, "Duplicate "+b.Type+" block",
				"A %s block was already defined at %s; there can be only one.", b.Type, defPos(prev.DefRange))
			continue
		}
		seen[b.Type] = b
		switch b.Type {
		case "forecast":
			forecast = &forecastBody{}
			d.decode(b.Body, forecast)
			forecast.Validate(d, &cfg.Forecast)
			forecastOK = d.errors == before
		case "drain":
			var v drainBody
			d.decode(b.Body, &v)
			v.Validate(d, &cfg.Drain)
		case "limits":
			limits = &limitsBody{}
			d.decode(b.Body, limits)
			limits.Validate(d, &cfg.Limits)
			limitsOK = d.errors == before
		case "controller":
			var v controllerBody
			d.decode(b.Body, &v)
			v.Validate(d, &cfg.Controller, &cfg.AgentTimeout)
		case "demand":
			var v demandBody
			d.decode(b.Body, &v)
			v.Validate(d, &cfg.Demand)
		case "synthetic":
			var v syntheticBody
			d.decode(b.Body, &v)
			v.Validate(d, &cfg.Synthetic)
		case "simulate":
			var v simulateBody
			d.decode(b.Body, &v)
			v.Validate(d, &cfg.Simulate)
		case "slurm":
			cfg.Slurm, partitions = d.decodeSlurm(b)
		case "usage":
			var v usageBody
			d.decode(b.Body, &v)
			v.Validate(d, &cfg.Usage)
		}
	}
	cfg.Tiers = d.checkTiers(tiers)
	cfg.Teams = d.checkTeams(teams, cfg.Usage.MaxTeams)
	// Each partition names pools the config has.
	d.assignPartitions(cfg.Pools, partitions)
	d.checkSlurmNodes(&cfg, pools)
	// Each plugin pool names a plugin block.
	for _, p := range cfg.Pools {
		if u, ok := p.Settings.(PluginUser); ok {
			if name, at := u.PluginName(); name != "" && plugins[name] == nil { // "": refused already
				d.errorf(at, "Unknown plugin", "Pool %q names plugin %q, which the config has no plugin %q block for.%s",
					p.Name, name, name, didYouMean(name, slices.Sorted(maps.Keys(plugins))))
			}
		}
	}
	if len(first) == 0 && !hasPoolBlock(body) {
		d.errorf(body.MissingItemRange(), "No pools", `The config must define at least one pool block, e.g. pool "gpu" { ... }.`)
	}

	for _, p := range pools {
		if !p.ok {
			return &cfg
		}
	}
	if limits != nil && limitsOK {
		checkMinimums(d, &cfg, limits)
	}
	if forecastOK {
		checkHorizon(d, &cfg, forecast, pools)
	}
	return &cfg
}

// hasPoolBlock reports whether body has a pool block, even one that gohcl
// dropped for having the wrong number of labels (already an error).
func hasPoolBlock(body hcl.Body) bool {
	if sb, ok := body.(*hclsyntax.Body); ok {
		for _, b := range sb.Blocks {
			if b.Type == "pool" {
				return true
			}
		}
	}
	return false
}
