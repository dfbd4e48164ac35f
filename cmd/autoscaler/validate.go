package main

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/fleetcast/autoscaler/config"
	"github.com/fleetcast/autoscaler/providers/registry"
)

func runValidate(e *env, args []string) int {
	fs := newFlagSet(e, "validate", "validate -config FILE")
	path := fs.String("config", "", "fleet config file (HCL)")
	skipPlugins := fs.Bool("skip-plugins", false, "do not start the config's plugins to have them check their config and pools' targets (where their executables are not at hand)")
	pluginTimeout := durationFlag{d: 30 * time.Second, positive: true}
	fs.Var(&pluginTimeout, "plugin-timeout", "how long the plugins have to start and check the config, all told")
	log, code, ok := setup(e, fs, args)
	if !ok {
		return code
	}
	cfg, ok := loadConfig(e, log, *path)
	if !ok {
		return exitError
	}
	// Valid means `run` can drive it: a pool of a provider this build
	// does not drive is refused here, not at start.
	if err := registry.Check(cfg.Pools); err != nil {
		fmt.Fprintf(e.stderr, "%s: %v\n", *path, err)
		return exitError
	}
	// The plugins check their own config and their pools' targets: each
	// is started (its checksum checked first), asked, and stopped.
	if !*skipPlugins {
		ctx, cancel := context.WithTimeout(context.Background(), pluginTimeout.d)
		defer cancel()
		env := registry.Env{Log: log, Fleet: cfg.Controller.Fleet, Plugins: cfg.Plugins}
		if err := registry.CheckPlugins(ctx, env, cfg.Pools); err != nil {
			n := 0 // the diagnostics, and each plugin that would not start
			errs := []error{err}
			if j, ok := err.(interface{ Unwrap() []error }); ok {
				errs = j.Unwrap()
			}
			for _, e := range errs {
				if de := (*registry.DiagnosticsError)(nil); errors.As(e, &de) {
					n += config.ErrorCount(de.Diags)
				} else {
					n++
				}
			}
			fmt.Fprintln(e.stderr, err)
			fmt.Fprintf(e.stderr, "%s: %d error(s) from its plugins\n", *path, n)
			return exitError
		}
	}
	fmt.Fprintf(e.stdout, "%s: valid: %d pool(s), up to %d GPUs\n", *path, len(cfg.Pools), cfg.MaxFleetGPUs())
	return exitOK
}

// loadConfig loads and validates the config at path, printing the
// diagnostics to stderr (at most config.MaxDiagnostics, then a line that
// counts the rest) and the number of errors; ok is false if there was an
// error.
func loadConfig(e *env, log hclog.Logger, path string) (*config.Config, bool) {
	if path == "" {
		fmt.Fprintln(e.stderr, "autoscaler: -config FILE is required (try examples/local.hcl)")
		return nil, false
	}
	cfg, diags := registry.Load(path)
	if len(diags) > 0 {
		_ = config.WriteDiagnostics(e.stderr, diags)
	}
	if diags.HasErrors() {
		fmt.Fprintf(e.stderr, "%s: %d error(s)\n", path, config.ErrorCount(diags))
		return nil, false
	}
	log.Debug("config loaded", "path", path, "pools", len(cfg.Pools))
	return cfg, true
}
