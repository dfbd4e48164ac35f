// Package registry is the one list of the providers this build knows: for
// each, its name, its pool block's decoder and its factory. `validate`,
// `plan` and `run` consult it, so that what the config accepts, what
// `validate` passes and what `run` drives are the same.
package registry

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"slices"
	"strings"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/hcl/v2"

	"github.com/fleetcast/autoscaler/config"
	"github.com/fleetcast/autoscaler/fleet"
	"github.com/fleetcast/autoscaler/internal/checksum"
	"github.com/fleetcast/autoscaler/providers"
	"github.com/fleetcast/autoscaler/providers/aws"
	"github.com/fleetcast/autoscaler/providers/aws/awsconfig"
	"github.com/fleetcast/autoscaler/providers/gcp"
	"github.com/fleetcast/autoscaler/providers/gcp/gcpconfig"
	"github.com/fleetcast/autoscaler/providers/plugin"
	"github.com/fleetcast/autoscaler/providers/plugin/pluginconfig"
	"github.com/fleetcast/autoscaler/providers/sim/simconfig"
)

// Provider is one provider this build knows.
type Provider struct {
	// ProviderBlock names the provider and decodes its pools' blocks.
	config.ProviderBlock
	// Simulated says the provider's pools are the simulated cloud, which
	// `plan` and `run` drive in process, on its own clock and workload.
	Simulated bool
	// Open makes the provider that drives the config's pools of this
	// provider (pools holds them all; it leaves the others as they are);
	// it may check their GPU facts and fill in, in place, what the cloud
	// knows (a GPU model, a spot price). Nil when this build cannot drive
	// the provider's pools yet, and for the simulated cloud.
	Open func(ctx context.Context, env Env, pools []fleet.Pool) (providers.Provider, error)
}

// Env is what the factories are given beyond their pools.
type Env struct {
	// Log receives the providers' logs, each named for its provider.
	Log hclog.Logger
	// Fleet is the controller's fleet name; DefaultFleet says it was left
	// at its default.
	Fleet        string
	DefaultFleet bool
	// Plugins are the config's plugin blocks.
	Plugins []config.Plugin
	// Origin is where the config's blocks and attributes are, for the
	// errors' places; nil for none.
	Origin *config.Origin
}

// Providers are the providers this build knows, by name.
func Providers() []Provider {
	return []Provider{
		{ProviderBlock: awsconfig.Block, Open: openAWS},
		{ProviderBlock: gcpconfig.Block, Open: openGCP},
		{ProviderBlock: pluginconfig.Block, Open: openPlugins},
		{ProviderBlock: simconfig.Block, Simulated: true},
	}
}

// Blocks are the providers' block decoders, for config.Load and Parse.
func Blocks() []config.ProviderBlock {
	var out []config.ProviderBlock
	for _, p := range Providers() {
		out = append(out, p.ProviderBlock)
	}
	return out
}

// OpenConfig makes the providers of a config's real pools, by pool name,
// through the factories (Open): AWS pools get their GPU facts checked and
// filled in from EC2, and, with spot_price_lookup, their price from the
// current spot price.
func OpenConfig(ctx context.Context, log hclog.Logger, cfg *config.Config) (map[string]providers.Provider, error) {
	env := Env{Log: log, Fleet: cfg.Controller.Fleet, DefaultFleet: cfg.Controller.Fleet == fleet.DefaultControllerSettings().Fleet, Plugins: cfg.Plugins, Origin: cfg.Origin}
	return Open(ctx, env, cfg.Pools)
}

// Load loads the config file at path with this build's providers.
func Load(path string) (*config.Config, hcl.Diagnostics) { return config.Load(path, Blocks()) }

// lookup returns the named provider.
func lookup(name string) (Provider, bool) {
	for _, p := range Providers() {
		if p.Name == name {
			return p, true
		}
	}
	return Provider{}, false
}

// drivable reports whether this build drives the provider's pools.
func (p Provider) drivable() bool { return p.Simulated || p.Open != nil }

// Check checks that this build can drive every pool of cfg, and that
// the pools are all simulated or all real (the simulated cloud runs on
// its own clock and workload, and does not mix with real clouds in one
// fleet). What it refuses is a *DiagnosticsError, each error at a pool's
// provider attribute, naming the pool and its provider.
func Check(cfg *config.Config) error { return check(cfg.Pools, cfg.Origin) }

// check is Check of pools, whose places in the file origin gives (none
// when it is nil).
func check(pools []fleet.Pool, origin *config.Origin) error {
	var driven []string
	for _, p := range Providers() {
		if p.drivable() {
			driven = append(driven, p.Name)
		}
	}
	var diags hcl.Diagnostics
	refuse := func(pool fleet.Pool, summary, format string, args ...any) {
		diags = append(diags, &hcl.Diagnostic{Severity: hcl.DiagError, Summary: summary, Detail: fmt.Sprintf(format, args...),
			Subject: subject(origin.Where("pool", pool.Name, "provider"))})
	}
	for _, p := range pools {
		if kind, ok := lookup(p.Provider); !ok || !kind.drivable() {
			refuse(p, "Provider not driven", "pool %s uses provider %q, which this build cannot drive yet (it drives %s pools).", p.Name, p.Provider, strings.Join(driven, " and "))
		}
	}
	if len(diags) == 0 && len(pools) > 0 {
		simulated := Simulated(pools)
		for _, p := range pools[1:] {
			if kind, _ := lookup(p.Provider); kind.Simulated != simulated {
				first := ""
				if at := origin.Where("pool", pools[0].Name, "provider"); at.Filename != "" {
					first = fmt.Sprintf(" (pool %s's provider is at line %d)", pools[0].Name, at.Start.Line)
				}
				refuse(p, "Simulated and real pools mixed", "pool %s uses provider %q and pool %s %q: a config's pools are all simulated or all real%s.",
					pools[0].Name, pools[0].Provider, p.Name, p.Provider, first)
				break
			}
		}
	}
	if len(diags) > 0 {
		return &DiagnosticsError{Diags: diags}
	}
	return nil
}

// placed is err with each *providers.ConfigError in it (alone, or among
// joined errors) made a diagnostic at the attribute it names (at its
// pool's block when the file leaves that attribute to its default), in a
// *DiagnosticsError joined with the other errors; err itself when it
// holds none.
func placed(err error, origin *config.Origin) error {
	var diags hcl.Diagnostics
	var rest []error
	var split func(err error)
	split = func(err error) {
		if j, ok := err.(interface{ Unwrap() []error }); ok {
			for _, e := range j.Unwrap() {
				split(e)
			}
			return
		}
		var ce *providers.ConfigError
		if !errors.As(err, &ce) {
			rest = append(rest, err)
			return
		}
		at := origin.Where(append([]string{"pool", ce.Pool}, strings.Split(ce.Attr, ".")...)...)
		if at.Filename == "" {
			at = origin.Where("pool", ce.Pool)
		}
		diags = append(diags, &hcl.Diagnostic{Severity: hcl.DiagError, Summary: "Not what the cloud has", Detail: err.Error() + ".", Subject: subject(at)})
	}
	split(err)
	if len(diags) == 0 {
		return err
	}
	return errors.Join(append(rest, &DiagnosticsError{Diags: diags})...)
}

// subject is r as a diagnostic's subject: nil for the zero Range (a
// config not read from a file).
func subject(r hcl.Range) *hcl.Range {
	if r.Filename == "" {
		return nil
	}
	return r.Ptr()
}

// Simulated reports whether the pools are the simulated cloud's (those
// Check passes are all simulated or all real; the first one says).
func Simulated(pools []fleet.Pool) bool {
	if len(pools) == 0 {
		return false
	}
	kind, _ := lookup(pools[0].Provider)
	return kind.Simulated
}

// Open makes the providers of real pools, by pool name, with one provider
// per kind for all its pools. The factories may fill in pools' facts (a
// GPU model, a spot price), in place. Pools this build cannot drive are
// refused, as Check refuses them; what a cloud says the config got wrong
// (a *providers.ConfigError) is a *DiagnosticsError, at its place in
// env.Origin's file.
func Open(ctx context.Context, env Env, pools []fleet.Pool) (map[string]providers.Provider, error) {
	if err := check(pools, env.Origin); err != nil {
		return nil, err
	}
	out := map[string]providers.Provider{}
	for _, kind := range Providers() {
		if kind.Open == nil {
			continue
		}
		if !slices.ContainsFunc(pools, func(p fleet.Pool) bool { return p.Provider == kind.Name }) {
			continue
		}
		p, err := kind.Open(ctx, env, pools)
		if err != nil {
			Close(out) // those opened already: the plugins started, the GCP clients
			return nil, placed(err, env.Origin)
		}
		for _, pool := range pools {
			if pool.Provider == kind.Name {
				out[pool.Name] = p
			}
		}
	}
	return out, nil
}

// openAWS makes the AWS provider of the config's AWS pools: it checks
// their GPU facts against EC2's and fills in what the config left out,
// and, with spot_price_lookup, takes a pool's price from the current spot
// price.
func openAWS(ctx context.Context, env Env, pools []fleet.Pool) (providers.Provider, error) {
	log := env.Log
	if log == nil {
		log = hclog.NewNullLogger()
	}
	p := aws.New(aws.Options{Log: log.Named(fleet.ProviderAWS)})
	for _, pool := range pools {
		if pool.Provider == fleet.ProviderAWS && aws.SettingsOf(pool).LaunchTemplate != "" && env.DefaultFleet {
			log.Warn("controller.fleet is left at its default: every controller so left tags its instances alike, and cannot tell another's from its own; name each fleet (staging, prod)",
				"fleet", env.Fleet, "pool", pool.Name)
			break
		}
	}
	if err := p.Resolve(ctx, pools); err != nil { // AWS pools only
		return nil, err
	}
	for i := range pools {
		pool := &pools[i]
		if pool.Provider != fleet.ProviderAWS || !aws.SettingsOf(*pool).SpotPriceLookup {
			continue
		}
		price, err := p.SpotPrice(ctx, *pool)
		if err != nil {
			return nil, err
		}
		log.Info("spot price", "pool", pool.Name, "configured", pool.PricePerHour, "now", price)
		pool.PricePerHour = price
	}
	return p, nil
}

// openGCP makes the GCP provider of the config's GCP pools, with
// Application Default Credentials, and checks their GPU facts against
// Compute Engine's.
func openGCP(ctx context.Context, env Env, pools []fleet.Pool) (providers.Provider, error) {
	log := env.Log
	if log == nil {
		log = hclog.NewNullLogger()
	}
	p := gcp.New(gcp.Options{Log: log.Named(fleet.ProviderGCP), Fleet: env.Fleet})
	if err := p.Resolve(ctx, pools); err != nil { // GCP pools only
		return nil, errors.Join(err, p.Close())
	}
	return p, nil
}

// openPlugins starts the plugins the config's plugin pools name, each
// checked against its SHA-256, and configures each with its pools: what
// a plugin finds wrong in its config or a pool's target, and a plugin
// that does not start, is a *DiagnosticsError, at the place in the
// config file (env.Origin's, for a start's). The plugins are
// kept running, started again when they exit (plugin.Supervise).
func openPlugins(ctx context.Context, env Env, pools []fleet.Pool) (providers.Provider, error) {
	log := env.Log
	if log == nil {
		log = hclog.NewNullLogger()
	}
	by := map[string][]fleet.Pool{}
	var names []string
	for _, p := range pools {
		if p.Provider != fleet.ProviderPlugin {
			continue
		}
		name := plugin.SettingsOf(p).Plugin
		if _, ok := by[name]; !ok {
			names = append(names, name)
		}
		by[name] = append(by[name], p)
	}
	set := &plugin.Set{}
	var errs []error
	var diags hcl.Diagnostics
	for _, name := range names {
		spec, ok := specNamed(env.Plugins, name)
		if !ok {
			errs = append(errs, fmt.Errorf("plugin %q: no plugin block", name))
			continue
		}
		sup, found, err := plugin.Supervise(ctx, SpecOf(spec), by[name], env.Fleet, log.Named("plugin"))
		switch {
		case err != nil:
			diags = append(diags, notStarted(env.Origin, spec, err))
		case len(found) > 0:
			for _, d := range found {
				at := pluginconfig.Where(d, spec, by[name])
				diags = append(diags, &hcl.Diagnostic{Severity: hcl.DiagError, Summary: d.Summary,
					Detail: fmt.Sprintf("%s (plugin %s, %s)", d.Detail, name, d.Path), Subject: &at})
			}
		default:
			set.Add(name, sup)
		}
	}
	if len(diags) > 0 {
		errs = append(errs, &DiagnosticsError{Diags: diags})
	}
	if len(errs) > 0 {
		set.Close()
		return nil, errors.Join(errs...)
	}
	return set, nil
}

// notStarted is the error of a plugin that did not start, at its place
// in the config: a checksum that is not its executable's at its sha256
// (with the checksum found), a missing executable at its path, and
// anything else at its block.
func notStarted(origin *config.Origin, spec config.Plugin, err error) *hcl.Diagnostic {
	diag := &hcl.Diagnostic{Severity: hcl.DiagError, Summary: "Plugin did not start", Detail: err.Error() + ".", Subject: spec.DefRange.Ptr()}
	if spec.DefRange.Filename == "" {
		diag.Subject = nil
	}
	var at hcl.Range
	switch ce := (*checksum.Error)(nil); {
	case errors.As(err, &ce):
		diag.Summary = "Checksum mismatch"
		diag.Detail = fmt.Sprintf("plugin %s: %s has SHA-256 %s, but sha256 expects %s: it does not run (if this is the executable to run, set sha256 to what sha256sum prints).",
			spec.Name, ce.Path, ce.Got, ce.Want)
		at = origin.Where("plugin", spec.Name, "sha256")
	case errors.Is(err, fs.ErrNotExist):
		diag.Summary = "Missing plugin executable"
		at = origin.Where("plugin", spec.Name, "path")
	}
	if at.Filename != "" {
		diag.Subject = at.Ptr()
	}
	return diag
}

// SpecOf is how to start a config's plugin.
func SpecOf(p config.Plugin) plugin.Spec {
	return plugin.Spec{Name: p.Name, Path: p.Path, SHA256: p.SHA256, Args: p.Args, Config: p.Config, Env: p.Env}
}

// DiagnosticsError is what plugins found wrong in the config, each at its
// place in the file.
type DiagnosticsError struct {
	Diags hcl.Diagnostics
}

// Error is the diagnostics, one FILE:LINE:COLUMN line each.
func (e *DiagnosticsError) Error() string {
	lines := make([]string, len(e.Diags))
	for i, d := range e.Diags {
		lines[i] = config.FormatDiagnostic(d)
	}
	return strings.Join(lines, "\n")
}

// CheckPlugins starts the plugins the pools name (each checked against
// its SHA-256), has each check its config and its pools' targets, and
// stops them: `validate`'s check, within ctx. What the plugins find
// wrong, and each plugin that would not start, is a *DiagnosticsError.
func CheckPlugins(ctx context.Context, env Env, pools []fleet.Pool) error {
	if !slices.ContainsFunc(pools, func(p fleet.Pool) bool { return p.Provider == fleet.ProviderPlugin }) {
		return nil
	}
	p, err := openPlugins(ctx, env, pools)
	if err != nil {
		return err
	}
	p.(*plugin.Set).Close()
	return nil
}

func specNamed(specs []config.Plugin, name string) (config.Plugin, bool) {
	for _, s := range specs {
		if s.Name == name {
			return s, true
		}
	}
	return config.Plugin{}, false
}

// Plugins is the plugins Open started, for their health (the API's
// GET /v1/plugins); nil when the config has none.
func Plugins(clouds map[string]providers.Provider) *plugin.Set {
	for _, p := range clouds {
		if set, ok := p.(*plugin.Set); ok {
			return set
		}
	}
	return nil
}

// Close closes the providers Open made that hold something open (the GCP
// clients, the plugins' processes), each once.
func Close(clouds map[string]providers.Provider) {
	done := map[providers.Provider]bool{}
	for _, p := range clouds {
		if done[p] {
			continue
		}
		done[p] = true
		switch c := p.(type) {
		case interface{ Close() }:
			c.Close()
		case interface{ Close() error }:
			c.Close() //nolint:errcheck // closing at exit
		}
	}
}
