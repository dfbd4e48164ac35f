// Package daemon is the running controller: what `autoscaler run` starts.
// Start assembles the parts from a decoded config, each given the typed
// settings it reads: the state, the API tokens and node credentials, the
// clouds (or, for simulated pools, the simulated world: a clock running
// ahead of real time, the simulated cloud saved beside the state, and the
// synthetic workload's jobs), the controller, and its HTTP API; Run drives
// the control cycles until the context ends; Close stops them all. The
// command parses flags and prints; this package prints nothing.
package daemon

import (
	"cmp"
	"context"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"time"

	"github.com/hashicorp/go-hclog"
	"google.golang.org/api/idtoken"

	"github.com/fleetcast/autoscaler/apiauth"
	"github.com/fleetcast/autoscaler/config"
	"github.com/fleetcast/autoscaler/controller"
	"github.com/fleetcast/autoscaler/fleet"
	"github.com/fleetcast/autoscaler/internal/secretfile"
	"github.com/fleetcast/autoscaler/loop"
	"github.com/fleetcast/autoscaler/nodeauth"
	"github.com/fleetcast/autoscaler/providers"
	"github.com/fleetcast/autoscaler/providers/registry"
	"github.com/fleetcast/autoscaler/simfleet"
	"github.com/fleetcast/autoscaler/state"
)

// Options are what Start needs beyond the config.
type Options struct {
	// Config is the decoded config; Start checks that its pools can be
	// driven (registry.Check) and passes each part its own settings.
	Config *config.Config
	Log    hclog.Logger
	// DryRun plans every cycle and changes nothing.
	DryRun bool
	// Speed is simulated seconds per real second, for simulated pools
	// (above 0); SimStart is when simulated time starts (zero: now; a
	// restarted run resumes after the last demand it recorded).
	Speed    float64
	SimStart time.Time
	// Listen is the API's address; StateDir the directory of the state
	// and secrets. Empty: the config's controller.listen and state_dir.
	Listen   string
	StateDir string
	// LoopbackReads serves the GET /v1/ reads without a token when Listen
	// is a loopback address.
	LoopbackReads bool
	// RootToken is the operator's API token (FLEETCAST_API_TOKEN); empty:
	// the one in the state directory, created at first start. Replicas
	// run highly available must share one: it is required then.
	RootToken string
	// Clouds, if set, are the providers to drive, by pool, instead of
	// those the config opens: replicas in one test sharing one simulated
	// cloud.
	Clouds map[string]providers.Provider
	// CrashAfterJournal, if set, ends the process at once, as if killed,
	// as soon as an intent of this kind is journaled, before the cloud is
	// called: the end-to-end tests' fault hook
	// (FLEETCAST_CRASH_AFTER_JOURNAL).
	CrashAfterJournal state.IntentKind
}

// Info is what a started daemon tells its operator.
type Info struct {
	// Live is true for real clouds, false for the simulated one.
	Live bool
	// Pools is the number of pools; FirstPool the name of the first.
	Pools     int
	FirstPool string
	// Interval is the (simulated) time between cycles; Speed the
	// simulated seconds per real second (simulated pools only).
	Interval time.Duration
	Speed    float64
	// Scheme and Addr are the API's: "http" or "https", and the address
	// it listens on.
	Scheme, Addr string
	// StatePath is the state's file; RootTokenSource where the root
	// token came from (FLEETCAST_API_TOKEN, or its file).
	StatePath, RootTokenSource string
	// Replica is this replica's address among several (controller.ha),
	// empty for one replica.
	Replica string
}

// Daemon is a started controller with its API and, on the simulated
// cloud, its simulated world.
type Daemon struct {
	o        Options
	cfg      *config.Config
	ctl      fleet.ControllerSettings
	info     Info
	store    *state.Store
	clouds   map[string]providers.Provider
	clock    func() time.Time
	sim      *simMode
	jobs     *simfleet.Fleet
	started  time.Time
	closers  []func()
	backfill controller.Backfilled
	filled   bool
	// What the parts are built from.
	root        string
	rootSource  string
	awsRoots    []*x509.Certificate
	gcpIdentity *nodeauth.GCPVerifier
	agents      *controller.Agents
	pending     *controller.Pending
	source      controller.DemandSource
	// one are the parts of a single replica, built at Start; with
	// controller.ha, ha elects and builds them at each term's start.
	one *parts
	ha  *haMode
	srv *http.Server
}

// parts are what reads the state as it starts: the controller,
// recovered, the Slurm source, and the API's handler over them and the
// API tokens and node credentials.
type parts struct {
	c       *controller.Controller
	slurm   *controller.SlurmSource
	handler http.Handler
}

// firstRead bounds the read of the Slurm cluster Start makes, so that a
// cluster that does not answer delays the controller's start by no more.
const firstRead = 10 * time.Second

// Start opens the state, the clouds and the credentials, makes the
// controller and recovers its journal, and serves the API. With
// controller.ha it opens the state on etcd and serves the API, and the
// controller is made when this replica is elected (Run). Close it.
func Start(ctx context.Context, o Options) (_ *Daemon, err error) {
	cfg := o.Config
	if cfg == nil || len(cfg.Pools) == 0 {
		return nil, errors.New("daemon: no config, or a config without pools")
	}
	if o.Clouds == nil {
		if err := registry.Check(cfg); err != nil {
			return nil, err
		}
	}
	if o.Log == nil {
		o.Log = hclog.NewNullLogger()
	}
	ctl := cfg.Controller
	if o.Listen == "" {
		o.Listen = ctl.Listen
	}
	if o.StateDir != "" {
		ctl.StateDir = o.StateDir
	}
	live := !registry.Simulated(cfg.Pools) || o.Clouds != nil
	if live {
		o.Speed = 0 // real clouds run on real time
	} else if !(o.Speed > 0) {
		return nil, fmt.Errorf("simulated speed %v: want a number above 0", o.Speed)
	}
	d := &Daemon{o: o, cfg: cfg, ctl: ctl}
	defer func() {
		if err != nil {
			d.Close()
		}
	}()
	log := o.Log
	if ctl.HA != nil {
		if err := d.openHA(ctx, live); err != nil {
			return nil, err
		}
	} else {
		if d.store, err = state.Open(ctl.StateDir); err != nil {
			return nil, err
		}
		d.closers = append(d.closers, func() { d.store.Close() })
	}
	if err := ctl.CheckListen(o.Listen); err != nil {
		return nil, err
	}
	// The root token, an operator's: Options.RootToken, else the one in
	// the state directory. Schedulers and monitoring get tokens of their
	// own scopes (`api-token create`).
	d.root, d.rootSource = o.RootToken, "FLEETCAST_API_TOKEN"
	if d.root == "" {
		d.rootSource = filepath.Join(ctl.StateDir, "api-token")
		if d.root, err = secretFile(d.rootSource, 24); err != nil {
			return nil, err
		}
	}

	switch {
	case o.Clouds != nil:
		d.clock, d.clouds = func() time.Time { return time.Now().UTC() }, o.Clouds
	case live:
		d.clock = func() time.Time { return time.Now().UTC() }
		if d.clouds, err = registry.OpenConfig(ctx, log, cfg); err != nil {
			return nil, err
		}
		d.closers = append(d.closers, func() { registry.Close(d.clouds) }) // the plugins stopped, with their processes
	default:
		if d.sim, err = newSimMode(cfg, ctl, d.store, o.SimStart); err != nil {
			return nil, err
		}
		d.clock, d.clouds = d.sim.clock.Now, d.sim.clouds
	}
	awsRoots, certs, err := loadStartFiles(cfg, log)
	if err != nil {
		return nil, err
	}
	d.awsRoots = awsRoots
	if aud := ctl.GCPIdentityAudience; aud != "" {
		// Google's keys, fetched when first needed and cached as long as
		// Google says.
		v, err := idtoken.NewValidator(ctx)
		if err != nil {
			return nil, fmt.Errorf("controller.gcp_identity_audience: %w", err)
		}
		d.gcpIdentity = &nodeauth.GCPVerifier{Audience: aud, Validator: v}
	}
	d.agents, d.pending = controller.NewAgents(d.clock), &controller.Pending{Budgeted: fleet.BudgetedTeams(cfg.Teams)}
	if dm := cfg.Demand; dm.PrometheusURL != "" {
		if d.source, err = controller.NewPrometheusDemand(dm.PrometheusURL, dm.PrometheusQuery, dm.PrometheusTimeout); err != nil {
			return nil, err
		}
		log.Info("demand source", "prometheus", dm.PrometheusURL, "query", dm.PrometheusQuery)
	}
	if d.ha == nil {
		if d.one, err = d.build(ctx, d.store, d.agents, d.pending, nil); err != nil {
			return nil, err
		}
		d.backfill, d.filled = d.one.c.Backfilled()
	}
	if d.sim != nil {
		d.jobs, err = simfleet.New(simfleet.Options{Pools: cfg.Pools, Cloud: d.sim.cloud, Workload: d.sim.workload, Start: d.clock(),
			CheckpointDuration: cfg.Simulate.CheckpointDuration, CheckpointEvery: cfg.Simulate.CheckpointInterval,
			Reports: d.agents, Pending: pendingTo(d.pending), Seed: cfg.Synthetic.Seed})
		if err != nil {
			return nil, err
		}
	}

	ln, err := net.Listen("tcp", o.Listen)
	if err != nil {
		return nil, fmt.Errorf("HTTP API on %s: %w (set controller.listen or -listen)", o.Listen, err)
	}
	// Bounded reads and idle connections: a peer that opens connections
	// and sends nothing cannot hold them (or the process's files).
	d.srv = &http.Server{Handler: d.handler(), ReadHeaderTimeout: 10 * time.Second, ReadTimeout: 30 * time.Second,
		WriteTimeout: time.Minute, IdleTimeout: 2 * time.Minute, MaxHeaderBytes: 64 << 10}
	scheme := "http"
	if certs != nil {
		scheme = "https"
		ln = tls.NewListener(ln, certs.config())
	} else if !fleet.Loopback(o.Listen) {
		log.Warn("serving plain HTTP off loopback (controller.insecure): node credentials and the API token cross the network in the clear", "listen", o.Listen)
	}
	go d.srv.Serve(ln)
	d.closers = append(d.closers, func() {
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		d.srv.Shutdown(sctx)
	})
	d.started = d.clock()
	d.info = Info{Live: live, Pools: len(cfg.Pools), FirstPool: cfg.Pools[0].Name, Interval: ctl.Interval, Speed: o.Speed,
		Scheme: scheme, Addr: ln.Addr().String(), StatePath: d.store.Path(), RootTokenSource: d.rootSource}
	if ctl.HA != nil {
		d.info.Replica = ctl.HA.Advertise
	}
	return d, nil
}

// build makes the parts that read the state as they start, over store,
// the agents' reports and the pending demand, and recovers the
// controller's journal; term, if set, is the leader's.
func (d *Daemon) build(ctx context.Context, store *state.Store, agents *controller.Agents, pending *controller.Pending, term func() int64) (*parts, error) {
	cfg, ctl, log := d.cfg, d.ctl, d.o.Log
	tokens, err := apiauth.NewTokens(store, nil, log.Named("api-tokens"))
	if err != nil {
		return nil, err
	}
	if err := tokens.SetRoot(d.root, d.rootSource); err != nil {
		return nil, err
	}
	creds, err := nodeauth.NewRegistry(store, nil, log.Named("credentials"))
	if err != nil {
		return nil, err
	}
	p := &parts{}
	set := cfg.Settings()
	if cfg.Slurm != nil {
		if p.slurm, err = controller.NewSlurmSource(controller.SlurmOptions{Settings: *cfg.Slurm, Pools: cfg.Pools, Pending: pending,
			Now: d.clock, Log: log.Named("slurm"), Act: !d.o.DryRun}); err != nil {
			return nil, err
		}
		// The first plan has the queue: a read now, of at most
		// firstRead; one that fails or is cut short leaves the source
		// degraded, and Run reads again.
		rctx, cancel := context.WithTimeout(ctx, firstRead)
		err := p.slurm.Read(rctx)
		cancel()
		log.Info("demand source", "slurm", cmp.Or(cfg.Slurm.Conf, "the commands' default slurm.conf"), "read", err == nil)
	}
	p.c, err = controller.New(controller.Options{Settings: &set, Controller: ctl, Backfill: cfg.Demand.Backfill, Store: store,
		Clouds: d.clouds, Agents: agents, Pending: pending, Demand: d.source, Slurm: p.slurm, Now: d.clock, Log: log, DryRun: d.o.DryRun,
		Credentials: creds, Usage: cfg.Usage, Term: term, Journaled: d.crashHook(), ShareViews: d.ha != nil})
	if err != nil {
		return nil, err
	}
	if err := p.c.Recover(ctx); err != nil {
		return nil, err
	}
	api := controller.APIOptions{Credentials: creds, Tokens: tokens, OpenReads: d.o.LoopbackReads && fleet.Loopback(d.o.Listen),
		Auth: &nodeauth.Server{Registry: creds, BootstrapFile: ctl.BootstrapTokenFile, AWSRoots: d.awsRoots, GCP: d.gcpIdentity,
			Live: p.c.LivePool, Machine: p.c.MachineOf, Log: log.Named("credentials")},
		Demand: &controller.DemandReceiver{Pools: cfg.Pools, Pending: pending, Now: d.clock, Log: log}}
	if plugins := registry.Plugins(d.clouds); plugins != nil {
		api.Plugins, api.Auth.Plugins = plugins, plugins
	}
	p.handler = p.c.Handler(api)
	return p, nil
}

// crashHook is the controller's Journaled hook: with CrashAfterJournal,
// the process exits at once (status 137, as if killed: nothing deferred
// runs, the lease is left to lapse) once such an intent is journaled. Not
// a signal: a container's first process ignores its own SIGKILL.
func (d *Daemon) crashHook() func(state.Intent) {
	kind := d.o.CrashAfterJournal
	if kind == "" {
		return nil
	}
	return func(in state.Intent) {
		if in.Kind == kind {
			d.o.Log.Warn("killing the process after journaling, as FLEETCAST_CRASH_AFTER_JOURNAL asks", "intent", in.Key)
			os.Exit(137)
		}
	}
}

// handler serves the API: a single replica's parts', or, with
// controller.ha, the leader's own or, on a follower, forwarded to the
// leader.
func (d *Daemon) handler() http.Handler {
	if d.ha == nil {
		return d.one.handler
	}
	return http.HandlerFunc(d.ha.serve)
}

// Info is what the daemon tells its operator at start.
func (d *Daemon) Info() Info { return d.info }

// Backfilled is what the controller's start did to fill the demand
// history from the demand source (controller.Controller.Backfilled).
func (d *Daemon) Backfilled() (controller.Backfilled, bool) { return d.backfill, d.filled }

// Run runs control cycles until ctx ends or, with runFor above 0, that
// much (simulated) time has passed: on real clouds one at once and then
// every interval; on the simulated cloud every interval divided by the
// speed, each moving simulated time on by an interval and the workload's
// jobs with it. With controller.ha it campaigns, and runs cycles while
// this replica leads. After, if set, is given every cycle's result.
func (d *Daemon) Run(ctx context.Context, runFor time.Duration, after func(now time.Time, r loop.CycleResult)) error {
	if d.ha != nil {
		return d.ha.run(ctx, runFor, after)
	}
	return d.cycles(ctx, d.one, runFor, after, false)
}

// cycles runs the control cycles of p's controller (see Run); stopAtOnce
// ends a cycle in progress when ctx ends.
func (d *Daemon) cycles(ctx context.Context, p *parts, runFor time.Duration, after func(now time.Time, r loop.CycleResult), stopAtOnce bool) error {
	ro := controller.RunOptions{For: runFor, Immediately: d.sim == nil, StopAtOnce: stopAtOnce}
	if d.sim != nil {
		ro.Every = max(time.Millisecond, time.Duration(float64(d.ctl.Interval)/d.o.Speed))
		ro.Before = func(ctx context.Context) error {
			d.sim.clock.Add(d.ctl.Interval)
			return d.jobs.Step(ctx, d.clock())
		}
	}
	if after != nil {
		ro.After = func(now time.Time, r loop.CycleResult, _ error) { after(now, r) }
	}
	if p.slurm != nil {
		// Read in the background, never waited for by a cycle.
		sctx, cancel := context.WithCancel(ctx)
		done := make(chan struct{})
		go func() { defer close(done); p.slurm.Run(sctx) }()
		defer func() { cancel(); <-done }()
	}
	return p.c.Run(ctx, ro)
}

// Started is the (simulated) time Start finished at; Elapsed the time
// since.
func (d *Daemon) Started() time.Time { return d.started }

// Elapsed is the (simulated) time since Start.
func (d *Daemon) Elapsed() time.Duration { return d.clock().Sub(d.started) }

// Stats is the simulated fleet's score so far; ok is false on real
// clouds, whose lost work the controller cannot know.
func (d *Daemon) Stats() (s simfleet.Stats, ok bool) {
	if d.jobs == nil {
		return simfleet.Stats{}, false
	}
	return d.jobs.Stats(), true
}

// Close stops the API, the plugins' processes and the state, in the
// reverse of the order Start opened them.
func (d *Daemon) Close() {
	for i := len(d.closers) - 1; i >= 0; i-- {
		d.closers[i]()
	}
	d.closers = nil
}

// secretFile returns the secret in path: n random bytes as hex text,
// created (mode 0600) if the file does not exist. A secret file others can
// read, or a short one, is refused.
func secretFile(path string, n int) (string, error) {
	secret, err := secretfile.Read(path)
	if errors.Is(err, os.ErrNotExist) {
		raw := make([]byte, n)
		rand.Read(raw)
		secret = hex.EncodeToString(raw)
		if err := secretfile.Write(path, secret); err != nil {
			return "", fmt.Errorf("creating secret: %w", err)
		}
		return secret, nil
	}
	if err != nil {
		return "", fmt.Errorf("secret: %w", err)
	}
	if len(secret) < 2*n {
		return "", fmt.Errorf("secret %s: %d characters, want at least %d", path, len(secret), 2*n)
	}
	return secret, nil
}
