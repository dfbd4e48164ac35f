package main

import (
	"context"
	"crypto/rand"
	"crypto/tls"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
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
	"github.com/fleetcast/autoscaler/planner"
	"github.com/fleetcast/autoscaler/providers"
	"github.com/fleetcast/autoscaler/providers/registry"
	"github.com/fleetcast/autoscaler/providers/sim"
	"github.com/fleetcast/autoscaler/simfleet"
	"github.com/fleetcast/autoscaler/state"
)

// defaultSimSpeed runs a simulated day in two minutes.
const defaultSimSpeed = 720

func runRun(e *env, args []string) int {
	fs := newFlagSet(e, "run", "run -config FILE [-dry-run] [-sim-speed N] [-sim-start TIME] [-for DURATION] [-listen ADDR] [-state-dir DIR] [-loopback-reads=false]")
	path := fs.String("config", "", "fleet config file (HCL)")
	dryRun := fs.Bool("dry-run", false, "plan every cycle and serve the plan, but change nothing")
	speed := fs.Float64("sim-speed", defaultSimSpeed, "simulated seconds per real second, for a simulated cloud")
	simStart := fs.String("sim-start", "", "simulated time to start at, RFC 3339, for a simulated cloud (default: now; a restarted run resumes where it stopped)")
	var runFor durationFlag
	fs.Var(&runFor, "for", "stop after this much (simulated) time; default: run until SIGINT or SIGTERM")
	listen := fs.String("listen", "", "address of the HTTP API (default: controller.listen)")
	stateDir := fs.String("state-dir", "", "directory of the durable state and secrets (default: controller.state_dir)")
	loopbackReads := fs.Bool("loopback-reads", true, "on a loopback listen address, serve the GET /v1/ reads without a token (false: a token of scope read is needed there too)")
	log, code, ok := setup(e, fs, args)
	if !ok {
		return code
	}
	if *speed <= 0 {
		fmt.Fprintf(e.stderr, "run: -sim-speed %v: want a number above 0\n", *speed)
		return exitUsage
	}
	var start time.Time
	if *simStart != "" {
		var err error
		if start, err = time.Parse(time.RFC3339, *simStart); err != nil {
			fmt.Fprintf(e.stderr, "run: -sim-start %q: want an RFC 3339 time such as 2026-11-30T09:00:00Z\n", *simStart)
			return exitUsage
		}
	}
	cfg, ok := loadConfig(e, log, *path)
	if !ok {
		return exitError
	}
	if err := registry.Check(cfg); err != nil {
		reportError(e, "run", cfg.Origin, err)
		return exitError
	}
	if *listen == "" {
		*listen = cfg.Controller.Listen
	}
	if *stateDir != "" {
		cfg.Controller.StateDir = *stateDir
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := runController(ctx, e, log, cfg, runOptions{dryRun: *dryRun, speed: *speed, simStart: start, runFor: runFor.d, listen: *listen, loopbackReads: *loopbackReads, configPath: *path}); err != nil {
		reportError(e, "run", cfg.Origin, err)
		return exitError
	}
	return exitOK
}

type runOptions struct {
	dryRun bool
	speed  float64
	// simStart is when simulated time starts (zero: now).
	simStart time.Time
	runFor   time.Duration
	listen   string
	// loopbackReads serves the /v1/ reads without a token when listen is
	// a loopback address.
	loopbackReads bool
	// configPath is the config's file, for the hints printed at start.
	configPath string
}

// simClock is simulated time: it moves only when the loop advances it,
// and the API's goroutines read it.
type simClock struct{ ns atomic.Int64 }

func (c *simClock) Now() time.Time      { return time.Unix(0, c.ns.Load()).UTC() }
func (c *simClock) Set(t time.Time)     { c.ns.Store(t.UnixNano()) }
func (c *simClock) Add(d time.Duration) { c.ns.Add(int64(d)) }

func runController(ctx context.Context, e *env, log hclog.Logger, cfg *config.Config, o runOptions) error {
	store, err := state.Open(cfg.Controller.StateDir)
	if err != nil {
		return err
	}
	defer store.Close()
	if err := cfg.Controller.CheckListen(o.listen); err != nil {
		return err
	}
	// The root token, an operator's: FLEETCAST_API_TOKEN, else the one in
	// the state directory. Schedulers and monitoring get tokens of their
	// own scopes (`api-token create`).
	tokenPath := filepath.Join(cfg.Controller.StateDir, "api-token")
	rootToken, rootSource := os.Getenv("FLEETCAST_API_TOKEN"), "FLEETCAST_API_TOKEN"
	if rootToken == "" {
		if rootToken, err = secretFile(tokenPath, 24); err != nil {
			return err
		}
		rootSource = tokenPath
	}
	tokens, err := apiauth.NewTokens(store, nil, log.Named("api-tokens"))
	if err != nil {
		return err
	}
	if err := tokens.SetRoot(rootToken, rootSource); err != nil {
		return err
	}

	live := !registry.Simulated(cfg.Pools)
	var (
		clock    func() time.Time
		clouds   map[string]providers.Provider
		sm       *simMode
		workload sim.Workload
	)
	if live {
		clock = func() time.Time { return time.Now().UTC() }
		if clouds, err = liveClouds(ctx, log, cfg); err != nil {
			return err
		}
		defer registry.Close(clouds) // the plugins stopped, with their processes
	} else {
		if sm, err = newSimMode(cfg, store, o.simStart); err != nil {
			return err
		}
		clock, clouds, workload = sm.clock.Now, sm.clouds, sm.workload
	}
	creds, err := nodeauth.NewRegistry(store, nil, log.Named("credentials"))
	if err != nil {
		return err
	}
	awsRoots, certs, err := loadStartFiles(cfg, log)
	if err != nil {
		return err
	}
	var gcpIdentity *nodeauth.GCPVerifier
	if aud := cfg.Controller.GCPIdentityAudience; aud != "" {
		// Google's keys, fetched when first needed and cached as long as
		// Google says.
		v, err := idtoken.NewValidator(ctx)
		if err != nil {
			return fmt.Errorf("controller.gcp_identity_audience: %w", err)
		}
		gcpIdentity = &nodeauth.GCPVerifier{Audience: aud, Validator: v}
	}
	agents, pending := controller.NewAgents(clock), &controller.Pending{}
	var source controller.DemandSource
	if d := cfg.Demand; d.PrometheusURL != "" {
		if source, err = controller.NewPrometheusDemand(d.PrometheusURL, d.PrometheusQuery, d.PrometheusTimeout); err != nil {
			return err
		}
		log.Info("demand source", "prometheus", d.PrometheusURL, "query", d.PrometheusQuery)
	}
	c, err := controller.New(controller.Options{Config: cfg, Store: store, Clouds: clouds, Agents: agents, Pending: pending,
		Demand: source, Now: clock, Log: log, DryRun: o.dryRun, Credentials: creds})
	if err != nil {
		return err
	}
	if err := c.Recover(ctx); err != nil {
		return err
	}
	if b, ok := c.Backfilled(); ok && b.Err == nil && len(b.Added) > 0 {
		// A failure, or a source with nothing to say, is logged as a warning.
		fmt.Fprintln(e.stdout, b)
	}
	var jobs *simfleet.Fleet
	if sm != nil {
		jobs, err = simfleet.New(simfleet.Options{Pools: cfg.Pools, Cloud: sm.cloud, Workload: workload, Start: clock(), CheckpointDuration: cfg.Simulate.CheckpointDuration,
			CheckpointEvery: cfg.Simulate.CheckpointInterval, Reports: agents, Pending: pendingTo(pending), Seed: cfg.Synthetic.Seed})
		if err != nil {
			return err
		}
	}

	ln, err := net.Listen("tcp", o.listen)
	if err != nil {
		return fmt.Errorf("HTTP API on %s: %w (set controller.listen or -listen)", o.listen, err)
	}
	api := controller.APIOptions{Credentials: creds, Tokens: tokens, OpenReads: o.loopbackReads && config.Loopback(o.listen),
		Auth: &nodeauth.Server{Registry: creds, BootstrapFile: cfg.Controller.BootstrapTokenFile, AWSRoots: awsRoots, GCP: gcpIdentity,
			Live: c.LivePool, Machine: c.MachineOf, Log: log.Named("credentials")},
		Demand: &controller.DemandReceiver{Pools: cfg.Pools, Pending: pending, Now: clock, Log: log}}
	if set := registry.Plugins(clouds); set != nil {
		api.Plugins, api.Auth.Plugins = set, set
	}
	// Bounded reads and idle connections: a peer that opens connections
	// and sends nothing cannot hold them (or the process's files).
	srv := &http.Server{Handler: c.Handler(api), ReadHeaderTimeout: 10 * time.Second, ReadTimeout: 30 * time.Second,
		WriteTimeout: time.Minute, IdleTimeout: 2 * time.Minute, MaxHeaderBytes: 64 << 10}
	scheme := "http"
	if certs != nil {
		scheme = "https"
		ln = tls.NewListener(ln, certs.config())
	} else if !config.Loopback(o.listen) {
		log.Warn("serving plain HTTP off loopback (controller.insecure): node credentials and the API token cross the network in the clear", "listen", o.listen)
	}
	go srv.Serve(ln)
	defer func() {
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		srv.Shutdown(sctx)
	}()

	mode := ""
	if o.dryRun {
		mode = " (dry run: planning only)"
	}
	pools := fmt.Sprintf("%d pools", len(cfg.Pools))
	if len(cfg.Pools) == 1 {
		pools = "1 pool"
	}
	where := fmt.Sprintf("on the simulated cloud: %s, a cycle every %s, %gx speed", pools, fleet.FormatDuration(cfg.Controller.Interval), o.speed)
	if live {
		where = fmt.Sprintf("on %s, a cycle every %s", pools, fleet.FormatDuration(cfg.Controller.Interval))
	}
	fmt.Fprintf(e.stdout, "Fleetcast controller%s %s; API on %s://%s; state in %s\n", mode, where, scheme, ln.Addr(), store.Path())
	fmt.Fprintf(e.stdout, "A scheduler's token: TOKEN=$(autoscaler api-token create -config %s -scope demand me) (the root token, an operator's, is in %s)\n", o.configPath, rootSource)
	fmt.Fprintf(e.stdout, "Push pending demand: curl -H \"Authorization: Bearer $TOKEN\" -H 'Content-Type: application/json' -d '{\"source\": \"me\", \"pending\": [{\"pool\": \"%s\", \"gpus\": 8}]}' %s://%s/v1/demand\n\n",
		cfg.Pools[0].Name, scheme, ln.Addr())

	ro := controller.RunOptions{For: o.runFor, Immediately: live}
	if !live {
		ro.Every = max(time.Millisecond, time.Duration(float64(cfg.Controller.Interval)/o.speed))
	}
	start := clock()
	var cost float64
	var churn churnCount
	nextHour := start.Truncate(time.Hour).Add(time.Hour)
	if sm != nil {
		// Each cycle, simulated time moves on an interval and the
		// workload with it.
		ro.Before = func(ctx context.Context) error {
			sm.clock.Add(cfg.Controller.Interval)
			return jobs.Step(ctx, clock())
		}
	}
	ro.After = func(now time.Time, r loop.CycleResult, _ error) {
		cost += r.Plan.CostPerHourBefore * cfg.Controller.Interval.Hours()
		printActions(e, now, &r)
		churn.add(&r)
		if !now.Before(nextHour) {
			var s *simfleet.Stats
			if jobs != nil {
				st := jobs.Stats()
				s = &st
			}
			printStatus(e, now, &r.Plan, s, cost)
			nextHour = nextHour.Add(time.Hour)
		}
	}
	if err := c.Run(ctx, ro); err != nil {
		return err
	}
	if ctx.Err() != nil {
		fmt.Fprintln(e.stdout, "\nstopping: the cycle in progress finished; state flushed")
	}
	if jobs != nil {
		summary(e, clock().Sub(start), cost, churn, jobs.Stats())
	}
	return nil
}

// simMode is the local default's simulated world: a clock that runs
// ahead of real time, a simulated cloud saved in the state directory, and
// the synthetic workload.
type simMode struct {
	clock    *simClock
	cloud    *sim.Cloud
	clouds   map[string]providers.Provider
	workload sim.Workload
}

func newSimMode(cfg *config.Config, store *state.Store, start time.Time) (*simMode, error) {
	// Simulated time runs ahead of real time, from start (or now); a
	// restarted run resumes after the last demand it recorded, so its
	// history never lies in the future.
	if start.IsZero() {
		start = time.Now()
	}
	clock := &simClock{}
	clock.Set(start.UTC().Truncate(time.Minute))
	if last, ok, err := store.LatestDemand(loop.DemandSeries); err != nil {
		return nil, err
	} else if ok && !last.Time.Before(clock.Now()) {
		clock.Set(last.Time.Truncate(time.Minute).Add(cfg.Controller.Interval))
	}
	// The simulated cloud outlives the controller, as a real one does: it
	// is saved in the state directory after every change.
	cloudPath := filepath.Join(cfg.Controller.StateDir, "sim-cloud.json")
	cloud, err := sim.Load(cloudPath, cfg.Pools, clock.Now)
	if errors.Is(err, os.ErrNotExist) {
		cloud, _ = sim.Generate(cfg, clock.Now())
		// Generated at the start time; from here the simulated clock
		// drives it.
		cloud.SetClock(clock.Now)
		err = cloud.SaveTo(cloudPath)
	}
	if err != nil {
		return nil, err
	}
	m := &simMode{clock: clock, cloud: cloud, clouds: map[string]providers.Provider{}, workload: sim.NewWorkload(cfg)}
	for _, p := range cfg.Pools {
		m.clouds[p.Name] = cloud
	}
	if err := simfleet.SeedHistory(store, m.workload, clock.Now(), cfg.Forecast.Step, cfg.Forecast.History); err != nil {
		return nil, err
	}
	return m, nil
}

// printActions prints the cycle's launches, drains, terminations and
// cancelled drains, one line each, as what became of them: done (the
// action and its reason), "would ..." in a dry run, or refused or failed
// with the error.
func printActions(e *env, now time.Time, r *loop.CycleResult) {
	for i, a := range r.Plan.Actions {
		if a.Kind == planner.Hold {
			continue
		}
		what := fmt.Sprintf("%-10s %s in %s", a.Kind, a.Node, a.Pool)
		if a.Kind == planner.Launch {
			what = fmt.Sprintf("%-10s %d x %s in %s", a.Kind, a.Count, a.InstanceType, a.Pool)
		}
		o := loop.Outcome{Result: loop.Done}
		if i < len(r.Outcomes) {
			o = r.Outcomes[i]
		}
		at := now.Format("Mon 15:04")
		switch o.Result {
		case loop.DryRun:
			fmt.Fprintf(e.stdout, "%s  would %s: %s\n", at, what, a.Reason)
		case loop.Refused:
			fmt.Fprintf(e.stdout, "%s  %s REFUSED by the cloud, pool backed off: %s (planned because: %s)\n", at, what, oneLine(o.Err), a.Reason)
		case loop.Failed:
			fmt.Fprintf(e.stdout, "%s  %s FAILED: %s (planned because: %s)\n", at, what, oneLine(o.Err), a.Reason)
		default:
			fmt.Fprintf(e.stdout, "%s  %s: %s\n", at, what, a.Reason)
		}
	}
}

// oneLine is err's message on one line.
func oneLine(err error) string {
	if err == nil {
		return "unknown error"
	}
	return strings.Join(strings.Fields(strings.ReplaceAll(err.Error(), "\n", "; ")), " ")
}

// printStatus prints the hourly status line. Demand is the plan's, the
// one the controller planned for: the GPUs jobs hold plus those waiting.
// s is the simulated fleet's score, nil on a real cloud (whose lost work
// the controller cannot know).
func printStatus(e *env, now time.Time, p *planner.Plan, s *simfleet.Stats, cost float64) {
	lost := ""
	if s != nil {
		lost = fmt.Sprintf("; work lost %.1f GPU-h", s.LostGPUHours)
	}
	fmt.Fprintf(e.stdout, "%s  ---- demand %d GPUs (running %d, waiting %d); fleet %d ready + %d launching + %d draining GPUs; $%.0f/h; spent $%.0f%s\n",
		now.Format("Mon 15:04"), p.Demand.Total(), p.Demand.RunningGPUs, p.Demand.PendingGPUs, p.Capacity.ReadyGPUs, p.Capacity.LaunchingGPUs, p.Capacity.DrainingGPUs,
		p.CostPerHourBefore, cost, lost)
}

// churnCount counts the nodes a run launched and the drains it began, as
// done (or, in a dry run, as it would have): the churn its summary shows
// per simulated day.
type churnCount struct{ launched, drained int }

// add counts a cycle's launches and drains that were carried out (or
// planned, in a dry run); refused and failed ones are not.
func (c *churnCount) add(r *loop.CycleResult) {
	for i, a := range r.Plan.Actions {
		if i < len(r.Outcomes) && r.Outcomes[i].Result != loop.Done && r.Outcomes[i].Result != loop.DryRun {
			continue
		}
		switch a.Kind {
		case planner.Launch:
			c.launched += a.Count
		case planner.Drain:
			c.drained++
		}
	}
}

// summary prints what a run on the simulated cloud came to, over d of
// simulated time.
func summary(e *env, d time.Duration, cost float64, c churnCount, s simfleet.Stats) {
	perDay := func(n int) float64 {
		if d <= 0 {
			return 0
		}
		return float64(n) / d.Hours() * 24
	}
	fmt.Fprintf(e.stdout, "\n%s simulated: spent $%.0f; jobs started %d, completed %d, moved by drains %d; waited %.1f GPU-h; work lost %.1f GPU-h\n",
		fleet.FormatDuration(d), cost, s.Started, s.Completed, s.Moved, s.WaitGPUHours, s.LostGPUHours)
	fmt.Fprintf(e.stdout, "nodes launched %d, drained %d: %.1f and %.1f per simulated day\n", c.launched, c.drained, perDay(c.launched), perDay(c.drained))
}

// pendingTo returns the simulated fleet's Pending function: it pushes the
// queued GPUs to the controller as the scheduler "simfleet" would, for any
// pool, as its jobs run on any.
func pendingTo(p *controller.Pending) func(time.Time, int) {
	var line controller.PendingDemand
	return func(now time.Time, gpus int) {
		line.GPUs = gpus
		p.Set(now, controller.DemandPush{Source: "simfleet", Pending: []controller.PendingDemand{line}})
	}
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
