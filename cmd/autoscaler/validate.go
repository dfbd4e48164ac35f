package main

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/hcl/v2"

	"github.com/fleetcast/autoscaler/config"
	"github.com/fleetcast/autoscaler/daemon"
	"github.com/fleetcast/autoscaler/fleet"
	"github.com/fleetcast/autoscaler/internal/cli"
	"github.com/fleetcast/autoscaler/providers/plugin"
	"github.com/fleetcast/autoscaler/providers/registry"
)

func runValidate(e *env, args []string) int {
	fs := cli.NewFlagSet(e.stderr, "autoscaler", "validate", "validate -config FILE [-files] [-json] [-skip-plugins] [-plugin-timeout DURATION]")
	path := fs.String("config", "", "fleet config file (HCL)")
	files := fs.Bool("files", false, "also check that each file the config names for run to read exists and can be read: the TLS certificate and key, the bootstrap secrets, the AWS identity certificates, the plugins' executables (and their checksums)")
	asJSON := fs.Bool("json", false, "print one JSON object (valid, error_count, warning_count and the diagnostics with their ranges), for editors and CI")
	skipPlugins := fs.Bool("skip-plugins", false, "do not start the config's plugins to have them check their config and pools' targets (where their executables are not at hand)")
	pluginTimeout := cli.Duration{D: 30 * time.Second, Positive: true}
	fs.Var(&pluginTimeout, "plugin-timeout", "how long the plugins have to start and check the config, all told")
	log, code, ok := cli.Setup(e.stderr, fs, args)
	if !ok {
		return code
	}
	if *path == "" {
		fmt.Fprintln(e.stderr, "autoscaler: -config FILE is required (try examples/local.hcl)")
		return cli.ExitError
	}
	cfg, src, diags := readConfig(*path)
	var checked, unchecked []config.InputFile
	if cfg != nil {
		var more hcl.Diagnostics
		more, checked, unchecked = validateConfig(log, cfg, validateOptions{files: *files, plugins: !*skipPlugins, pluginTimeout: pluginTimeout.D})
		config.SortDiagnostics(more)
		diags = append(diags, more...)
	}
	if *asJSON {
		enc := json.NewEncoder(e.stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(newValidateJSON(diags)); err != nil {
			fmt.Fprintln(e.stderr, "validate:", err)
			return cli.ExitError
		}
		if diags.HasErrors() {
			return cli.ExitError
		}
		return cli.ExitOK
	}
	writeDiagnostics(e.stderr, src, diags)
	if diags.HasErrors() {
		fmt.Fprintf(e.stderr, "%s: %d error(s)\n", *path, config.ErrorCount(diags))
		return cli.ExitError
	}
	fmt.Fprintf(e.stdout, "%s: valid: %d pool(s), up to %d GPUs\n", *path, len(cfg.Pools), cfg.MaxFleetGPUs())
	if *files && len(checked) > 0 {
		fmt.Fprintf(e.stdout, "%s: %d file(s) checked: each exists and can be read as run reads it\n", *path, len(checked))
	}
	if len(unchecked) > 0 {
		fields := make([]string, len(unchecked))
		for i, f := range unchecked {
			fields[i] = f.Field
		}
		fmt.Fprintf(e.stdout, "%s: %d file(s) not checked (%s): run validate -files to check that they exist and can be read\n",
			*path, len(unchecked), strings.Join(fields, ", "))
	}
	return cli.ExitOK
}

// validateOptions are what validate checks beyond the config's text.
type validateOptions struct {
	// files checks the files the config names for run to read.
	files bool
	// plugins starts the plugins to have them check their config and
	// their pools' targets, within pluginTimeout.
	plugins       bool
	pluginTimeout time.Duration
}

// validateConfig checks what parsing cannot: that `run` can drive the
// pools (registry.Check), with -files that the files the config names
// exist and can be read (and that those run loads at start load, with
// daemon.LoadStartFiles, as run reads them), and, unless the plugins are skipped, what each
// plugin finds wrong with its config and its pools' targets (a plugin
// whose executable -files refused is not started). It returns the
// errors, each at its place, and the input files checked and those not
// (a plugin's executable counts as checked when the plugin is started).
func validateConfig(log hclog.Logger, cfg *config.Config, o validateOptions) (diags hcl.Diagnostics, checked, unchecked []config.InputFile) {
	if err := registry.Check(cfg); err != nil {
		diags = append(diags, errorDiagnostics(err)...)
	}
	refused := map[string]bool{} // plugins whose executable -files refused
	readable := true             // the files run loads at start
	for _, f := range cfg.InputFiles() {
		switch {
		case o.files:
			found := config.CheckInputFiles([]config.InputFile{f})
			if len(found) > 0 && f.Plugin != "" {
				refused[f.Plugin] = true
			}
			readable = readable && (len(found) == 0 || f.Plugin != "")
			diags = append(diags, found...)
			checked = append(checked, f)
		case f.Plugin != "" && o.plugins:
			checked = append(checked, f) // started below
		default:
			unchecked = append(unchecked, f)
		}
	}
	if o.files && readable {
		// What run makes of them at start: certificates that parse, a
		// key that is the certificate's.
		if err := daemon.LoadStartFiles(cfg, log); err != nil {
			diags = append(diags, errorDiagnostics(err)...)
		}
	}
	if !o.plugins {
		return diags, checked, unchecked
	}
	var pools []fleet.Pool
	for _, p := range cfg.Pools {
		if p.Provider != fleet.ProviderPlugin || !refused[pluginOf(p)] {
			pools = append(pools, p)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), o.pluginTimeout)
	defer cancel()
	env := registry.Env{Log: log, Fleet: cfg.Controller.Fleet, Plugins: cfg.Plugins, Origin: cfg.Origin}
	if err := registry.CheckPlugins(ctx, env, pools); err != nil {
		diags = append(diags, errorDiagnostics(err)...)
	}
	return diags, checked, unchecked
}

// errorDiagnostics is err as diagnostics: those it holds (see
// diagnosticsOf), and each other error as one about no place.
func errorDiagnostics(err error) hcl.Diagnostics {
	diags, rest := diagnosticsOf(err)
	for _, r := range rest {
		diags = append(diags, &hcl.Diagnostic{Severity: hcl.DiagError, Summary: "Error", Detail: r.Error()})
	}
	return diags
}

// pluginOf is the plugin that drives a plugin pool.
func pluginOf(p fleet.Pool) string { return plugin.SettingsOf(p).Plugin }

// loadConfig loads and validates the config at path, printing the
// diagnostics to stderr, each with its source line (at most
// config.MaxDiagnostics, then a line that counts the rest), and the
// number of errors; ok is false if there was an error.
func loadConfig(e *env, log hclog.Logger, path string) (*config.Config, bool) {
	if path == "" {
		fmt.Fprintln(e.stderr, "autoscaler: -config FILE is required (try examples/local.hcl)")
		return nil, false
	}
	cfg, src, diags := readConfig(path)
	writeDiagnostics(e.stderr, src, diags)
	if diags.HasErrors() {
		fmt.Fprintf(e.stderr, "%s: %d error(s)\n", path, config.ErrorCount(diags))
		return nil, false
	}
	log.Debug("config loaded", "path", path, "pools", len(cfg.Pools))
	return cfg, true
}
