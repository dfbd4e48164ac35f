package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/fleetcast/autoscaler/daemon"
	"github.com/fleetcast/autoscaler/fleet"
	"github.com/fleetcast/autoscaler/internal/cli"
	"github.com/fleetcast/autoscaler/loop"
	"github.com/fleetcast/autoscaler/planner"
	"github.com/fleetcast/autoscaler/simfleet"
	"github.com/fleetcast/autoscaler/state"
)

// defaultSimSpeed runs a simulated day in two minutes.
const defaultSimSpeed = 720

func runRun(e *env, args []string) int {
	fs := cli.NewFlagSet(e.stderr, "autoscaler", "run", "run -config FILE [-dry-run] [-sim-speed N] [-sim-start TIME] [-for DURATION] [-listen ADDR] [-state-dir DIR] [-loopback-reads=false]")
	path := fs.String("config", "", "fleet config file (HCL)")
	dryRun := fs.Bool("dry-run", false, "plan every cycle and serve the plan, but change nothing")
	speed := fs.Float64("sim-speed", defaultSimSpeed, "simulated seconds per real second, for a simulated cloud")
	simStart := fs.String("sim-start", "", "simulated time to start at, RFC 3339, for a simulated cloud (default: now; a restarted run resumes where it stopped)")
	var runFor cli.Duration
	fs.Var(&runFor, "for", "stop after this much (simulated) time; default: run until SIGINT or SIGTERM")
	listen := fs.String("listen", "", "address of the HTTP API (default: controller.listen)")
	stateDir := fs.String("state-dir", "", "directory of the durable state and secrets (default: controller.state_dir)")
	loopbackReads := fs.Bool("loopback-reads", true, "on a loopback listen address, serve the GET /v1/ reads without a token (false: a token of scope read is needed there too)")
	log, code, ok := cli.Setup(e.stderr, fs, args)
	if !ok {
		return code
	}
	if !(*speed > 0) {
		fmt.Fprintf(e.stderr, "run: -sim-speed %v: want a number above 0\n", *speed)
		return cli.ExitUsage
	}
	var start time.Time
	if *simStart != "" {
		var err error
		if start, err = time.Parse(time.RFC3339, *simStart); err != nil {
			fmt.Fprintf(e.stderr, "run: -sim-start %q: want an RFC 3339 time such as 2026-11-30T09:00:00Z\n", *simStart)
			return cli.ExitUsage
		}
	}
	crash := state.IntentKind(os.Getenv("FLEETCAST_CRASH_AFTER_JOURNAL"))
	switch crash {
	case "":
	case state.IntentLaunch, state.IntentTerminate, state.IntentReap:
		log.Warn("FLEETCAST_CRASH_AFTER_JOURNAL is set: this process exits at once after journaling its first such change, as the end-to-end tests ask; unset it", "kind", crash)
	default:
		fmt.Fprintf(e.stderr, "run: FLEETCAST_CRASH_AFTER_JOURNAL=%q: a test's fault hook, one of launch, terminate or reap; unset it\n", crash)
		return cli.ExitUsage
	}
	cfg, ok := loadConfig(e, log, *path)
	if !ok {
		return cli.ExitError
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	d, err := daemon.Start(ctx, daemon.Options{Config: cfg, Log: log, DryRun: *dryRun, Speed: *speed, SimStart: start,
		Listen: *listen, StateDir: *stateDir, LoopbackReads: *loopbackReads, RootToken: os.Getenv("FLEETCAST_API_TOKEN"),
		CrashAfterJournal: crash})
	if err != nil {
		reportError(e, "run", cfg.Origin, err)
		return cli.ExitError
	}
	defer d.Close()
	if err := runDaemon(ctx, e, d, *dryRun, runFor.D, *path); err != nil {
		reportError(e, "run", cfg.Origin, err)
		return cli.ExitError
	}
	return cli.ExitOK
}

// runDaemon prints what the started daemon d serves and where, runs it
// for runFor (0: until ctx ends), printing each cycle's actions and an
// hourly status line, and, on the simulated cloud, a summary.
func runDaemon(ctx context.Context, e *env, d *daemon.Daemon, dryRun bool, runFor time.Duration, configPath string) error {
	if b, ok := d.Backfilled(); ok && b.Err == nil && len(b.Added) > 0 {
		// A failure, or a source with nothing to say, is logged as a warning.
		fmt.Fprintln(e.stdout, b)
	}
	in := d.Info()
	mode := ""
	if dryRun {
		mode = " (dry run: planning only)"
	}
	pools := fmt.Sprintf("%d pools", in.Pools)
	if in.Pools == 1 {
		pools = "1 pool"
	}
	where := fmt.Sprintf("on the simulated cloud: %s, a cycle every %s, %gx speed", pools, fleet.FormatDuration(in.Interval), in.Speed)
	if in.Live {
		where = fmt.Sprintf("on %s, a cycle every %s", pools, fleet.FormatDuration(in.Interval))
	}
	fmt.Fprintf(e.stdout, "Fleetcast controller%s %s; API on %s://%s; state in %s\n", mode, where, in.Scheme, in.Addr, in.StatePath)
	fmt.Fprintf(e.stdout, "A scheduler's token: TOKEN=$(autoscaler api-token create -config %s -scope demand me) (the root token, an operator's, is in %s)\n", configPath, in.RootTokenSource)
	fmt.Fprintf(e.stdout, "Push pending demand: curl -H \"Authorization: Bearer $TOKEN\" -H 'Content-Type: application/json' -d '{\"source\": \"me\", \"pending\": [{\"pool\": \"%s\", \"gpus\": 8}]}' %s://%s/v1/demand\n\n",
		in.FirstPool, in.Scheme, in.Addr)

	var cost float64
	var churn churnCount
	nextHour := d.Started().Truncate(time.Hour).Add(time.Hour)
	err := d.Run(ctx, runFor, func(now time.Time, r loop.CycleResult) {
		cost += r.Plan.CostPerHourBefore * in.Interval.Hours()
		printActions(e, now, &r)
		churn.add(&r)
		if !now.Before(nextHour) {
			var s *simfleet.Stats
			if st, ok := d.Stats(); ok {
				s = &st
			}
			printStatus(e, now, &r.Plan, s, cost)
			nextHour = nextHour.Add(time.Hour)
		}
	})
	if err != nil {
		return err
	}
	if ctx.Err() != nil {
		fmt.Fprintln(e.stdout, "\nstopping: the cycle in progress finished; state flushed")
	}
	if st, ok := d.Stats(); ok {
		summary(e, d.Elapsed(), cost, churn, st)
	}
	return nil
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
