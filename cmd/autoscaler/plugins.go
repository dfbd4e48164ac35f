package main

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/fleetcast/autoscaler/config"
	"github.com/fleetcast/autoscaler/fleet"
	"github.com/fleetcast/autoscaler/internal/cli"
	"github.com/fleetcast/autoscaler/providers"
	"github.com/fleetcast/autoscaler/providers/plugin"
	"github.com/fleetcast/autoscaler/providers/plugin/pluginconfig"
	"github.com/fleetcast/autoscaler/providers/registry"
)

// runPlugins is `autoscaler plugins`: the configured provider plugins,
// their versions and health, as the running controller sees them (-addr),
// or by starting each briefly (-config alone).
func runPlugins(e *env, args []string) int {
	fs := cli.NewFlagSet(e.stderr, "autoscaler", "plugins", "plugins -config FILE | -addr URL [-config FILE] [-ca-file FILE] [-json]")
	path := fs.String("config", "", "the fleet config: without -addr, each of its plugins is started (its checksum checked), asked to check its config and describe its pools, and stopped; with -addr, it gives the controller's certificate and state directory (its API token)")
	addr := fs.String("addr", "", "the running controller's API URL, such as https://fleetcast.internal:8790: its plugins' health as it sees them (a token of scope read from FLEETCAST_API_TOKEN, else the root token in -config's state directory)")
	caFile := fs.String("ca-file", "", "PEM file of the CA(s) of the controller's certificate (default: controller.tls_cert_file itself)")
	asJSON := fs.Bool("json", false, "print JSON")
	timeout := cli.Duration{D: 30 * time.Second, Positive: true}
	fs.Var(&timeout, "timeout", "how long the answer may take, all told")
	log, code, ok := cli.Setup(e.stderr, fs, args)
	if !ok {
		return code
	}
	if *path == "" && *addr == "" {
		fmt.Fprintln(e.stderr, "plugins: want -addr URL (ask the running controller) or -config FILE (start each plugin briefly)")
		return cli.ExitUsage
	}
	cfg := &config.Config{Controller: config.Defaults().Controller}
	if *path != "" {
		if cfg, ok = loadConfig(e, log, *path); !ok {
			return cli.ExitError
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout.D)
	defer cancel()
	var status []pluginStatus
	if *addr != "" {
		body, code, err := callController(ctx, cfg.Controller, *addr, *caFile, "GET", "/v1/plugins", nil, false)
		if err != nil {
			fmt.Fprintln(e.stderr, "plugins:", err)
			return code
		}
		var list []plugin.Status
		if err := json.Unmarshal(body, &list); err != nil {
			fmt.Fprintln(e.stderr, "plugins: the controller's answer:", err)
			return cli.ExitError
		}
		for _, s := range list {
			status = append(status, pluginStatus{Status: s})
		}
	} else {
		status = probePlugins(ctx, cfg)
	}
	healthy := true
	for _, s := range status {
		healthy = healthy && s.Healthy
	}
	if *asJSON {
		enc := json.NewEncoder(e.stdout)
		enc.SetIndent("", "  ")
		if status == nil {
			status = []pluginStatus{}
		}
		if err := enc.Encode(status); err != nil {
			fmt.Fprintln(e.stderr, "plugins:", err)
			return cli.ExitError
		}
	} else {
		writePlugins(e, status)
	}
	if !healthy {
		return cli.ExitError
	}
	return cli.ExitOK
}

// pluginStatus is a plugin's health and, started briefly, its pools'.
type pluginStatus struct {
	plugin.Status
	PoolStatus []poolStatus `json:"pool_status,omitempty"`
}

// poolStatus is what a plugin said of one of its pools.
type poolStatus struct {
	Pool      string `json:"pool"`
	Target    int    `json:"target"`
	Instances int    `json:"instances"`
	Running   int    `json:"running"`
	Error     string `json:"error,omitempty"`
}

// probePlugins starts each plugin of the config, checksum first, has it
// check its config and its pools' targets, asks it for each pool's
// group, and stops it.
func probePlugins(ctx context.Context, cfg *config.Config) []pluginStatus {
	var out []pluginStatus
	for _, spec := range cfg.Plugins {
		var pools []fleet.Pool
		s := pluginStatus{Status: plugin.Status{Name: spec.Name, Path: spec.Path, Pools: []string{}}}
		for _, p := range cfg.Pools {
			if p.Provider == fleet.ProviderPlugin && plugin.SettingsOf(p).Plugin == spec.Name {
				pools = append(pools, p)
				s.Pools = append(s.Pools, p.Name)
			}
		}
		out = append(out, probePlugin(ctx, cfg, spec, pools, s))
	}
	return out
}

func probePlugin(ctx context.Context, cfg *config.Config, spec config.Plugin, pools []fleet.Pool, s pluginStatus) pluginStatus {
	c, err := plugin.Start(ctx, registry.SpecOf(spec), nil)
	if err != nil {
		s.Error = err.Error()
		return s
	}
	defer c.Close()
	s.Plugin, s.Version, _, _ = c.Info()
	s.Protocol = c.Protocol()
	diags, err := c.Configure(ctx, pools, cfg.Controller.Fleet)
	switch {
	case err != nil:
		s.Error = err.Error()
		return s
	case len(diags) > 0:
		var msgs []string
		for _, d := range diags {
			at := pluginconfig.Where(d, spec, pools)
			msgs = append(msgs, fmt.Sprintf("%s:%d:%d: %s: %s (%s)", at.Filename, at.Start.Line, at.Start.Column, d.Summary, d.Detail, d.Path))
		}
		s.Error = "it refuses its config: " + strings.Join(msgs, "; ")
		return s
	}
	s.Healthy = true
	for _, p := range pools {
		ps := poolStatus{Pool: p.Name}
		g, err := c.Describe(ctx, p)
		if err != nil {
			ps.Error, s.Healthy = err.Error(), false
			s.Error = "pool " + p.Name + " cannot be read"
		} else {
			ps.Target, ps.Instances = g.Target, len(g.Instances)
			for _, in := range g.Instances {
				if in.State == providers.InstanceRunning {
					ps.Running++
				}
			}
		}
		s.PoolStatus = append(s.PoolStatus, ps)
	}
	return s
}

// writePlugins prints the plugins as a table, each pool's group below its
// plugin where there is one.
func writePlugins(e *env, status []pluginStatus) {
	if len(status) == 0 {
		fmt.Fprintln(e.stdout, "no plugins configured")
		return
	}
	tw := tabwriter.NewWriter(e.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "PLUGIN\tIS\tPROTOCOL\tPOOLS\tHEALTH")
	for _, s := range status {
		is, protocol := strings.TrimSpace(s.Plugin+" "+s.Version), "-"
		if is == "" {
			is = "-"
		}
		if s.Protocol > 0 {
			protocol = fmt.Sprint(s.Protocol)
		}
		pools := strings.Join(s.Pools, ",")
		if pools == "" {
			pools = "-"
		}
		health := "ok"
		if !s.Healthy {
			health = "DOWN: " + s.Error
			if s.NextStart != nil {
				health += "; started again at " + s.NextStart.UTC().Format(time.RFC3339)
			}
		}
		if s.Restarts > 0 {
			health += fmt.Sprintf(" (restarted %d time(s))", s.Restarts)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", s.Name, is, protocol, pools, health)
	}
	tw.Flush()
	for _, s := range status {
		for _, p := range s.PoolStatus {
			if p.Error != "" {
				fmt.Fprintf(e.stdout, "  pool %s (plugin %s): %s\n", p.Pool, s.Name, p.Error)
				continue
			}
			fmt.Fprintf(e.stdout, "  pool %s (plugin %s): target %d, %d instance(s), %d running\n", p.Pool, s.Name, p.Target, p.Instances, p.Running)
		}
	}
}
