package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/fleetcast/autoscaler/config"
	"github.com/fleetcast/autoscaler/controller"
	"github.com/fleetcast/autoscaler/fleet"
	"github.com/fleetcast/autoscaler/forecast"
	"github.com/fleetcast/autoscaler/internal/cli"
	"github.com/fleetcast/autoscaler/planner"
	"github.com/fleetcast/autoscaler/providers"
	"github.com/fleetcast/autoscaler/providers/registry"
	"github.com/fleetcast/autoscaler/providers/sim"
)

func runPlan(e *env, args []string) int {
	fs := cli.NewFlagSet(e.stderr, "autoscaler", "plan", "plan -config FILE [-state FILE] [-json] [-at TIME]")
	path := fs.String("config", "", "fleet config file (HCL)")
	statePath := fs.String("state", "", "fleet state snapshot (JSON); default: read the pools' providers (the simulated cloud generates its fleet) and, with a slurm block, Slurm's queue")
	asJSON := fs.Bool("json", false, "print the plan as JSON")
	at := fs.String("at", "", "plan as of this RFC 3339 time (default: the snapshot's captured_at, else now)")
	log, code, ok := cli.Setup(e.stderr, fs, args)
	if !ok {
		return code
	}
	var now time.Time
	var err error
	if *at != "" {
		if now, err = time.Parse(time.RFC3339, *at); err != nil {
			fmt.Fprintf(e.stderr, "plan: -at %q: want an RFC 3339 time such as 2026-11-30T14:00:00Z\n", *at)
			return cli.ExitUsage
		}
	}
	cfg, ok := loadConfig(e, log, *path)
	if !ok {
		return cli.ExitError
	}

	var state fleet.State
	if *statePath != "" {
		if state, err = readState(*statePath, cfg); err != nil {
			fmt.Fprintln(e.stderr, "plan:", err)
			return cli.ExitError
		}
		if now.IsZero() {
			now = state.CapturedAt
		}
	}
	if now.IsZero() {
		now = time.Now().UTC()
	}
	if *statePath == "" {
		if err := registry.Check(cfg); err != nil {
			reportError(e, "plan", cfg.Origin, err)
			return cli.ExitError
		}
		if state, err = observe(context.Background(), log, cfg, now); err != nil {
			reportError(e, "plan", cfg.Origin, err)
			return cli.ExitError
		}
		log.Debug("state read from the pools' providers", "nodes", len(state.Nodes), "pending_gpus", state.PendingGPUs)
		if cfg.Slurm != nil {
			if err := readQueue(context.Background(), log, cfg, &state, now); err != nil {
				reportError(e, "plan", cfg.Origin, err)
				return cli.ExitError
			}
		}
	}

	fc, err := makeForecast(cfg, state.History)
	if err != nil {
		// The plan is still made, reactively; the planner says so.
		log.Warn("no forecast; planning on current demand", "error", err)
	}
	// The history, as the controller records it, is of the demand not
	// announced: the planner adds the announcements to its forecast.
	p := planner.Make(planner.Input{Settings: cfg.Settings(), State: &state, Forecast: fc, Now: now, Unannounced: true})
	log.Debug("plan made", "actions", len(p.Actions), "cost_before", p.CostPerHourBefore, "cost_after", p.CostPerHourAfter)

	if *asJSON {
		enc := json.NewEncoder(e.stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(controller.NewPlanView(&p)); err != nil {
			fmt.Fprintln(e.stderr, "plan:", err)
			return cli.ExitError
		}
		return cli.ExitOK
	}
	writePlan(e.stdout, cfg, &p)
	return cli.ExitOK
}

// makeForecast forecasts demand from history over the config's horizon,
// with the quantile levels the planner needs.
func makeForecast(cfg *config.Config, history fleet.Series) (forecast.Forecast, error) {
	settings := cfg.Settings()
	levels, err := forecast.Levels(settings.Quantiles()...)
	if err != nil {
		return forecast.Forecast{}, err
	}
	return forecast.Auto(history, cfg.Forecast.Horizon, levels)
}

// observe reads the fleet from the pools' providers. The simulated cloud
// generates a whole fleet, jobs and history included. Real clouds give
// their groups' instances only: with no agent reports nor launch records
// at hand, every instance is unknown (a running one ready with a silent
// agent, so nothing is drained on its account, and none terminated at a
// provisioning deadline) and there is no demand history (so the plan is
// reactive). A pool that cannot be read (its cloud unreachable) is left
// alone and counted at its max, as the controller does, so that the
// others are planned for; orphans that cannot be listed are not shown.
func observe(ctx context.Context, log hclog.Logger, cfg *config.Config, now time.Time) (fleet.State, error) {
	if registry.Simulated(cfg.Pools) {
		_, st := sim.Generate(cfg.Settings(), cfg.Synthetic, now)
		return st, nil
	}
	clouds, err := registry.OpenConfig(ctx, log, cfg)
	if err != nil {
		return fleet.State{}, err
	}
	defer registry.Close(clouds)
	log.Warn("plan reads the clouds only: agents' reports and the demand history are the running controller's (its plan: GET /v1/plan); running instances are shown with silent agents")
	st := fleet.State{CapturedAt: now}
	for _, p := range cfg.Pools {
		g, err := clouds[p.Name].Describe(ctx, p)
		if err != nil {
			if ctx.Err() != nil {
				return fleet.State{}, err
			}
			log.Warn("pool not read: left alone, and counted at its max against the limits", "pool", p.Name, "error", err)
			st.Pools = append(st.Pools, fleet.PoolStatus{Name: p.Name, Unobserved: fleet.Unobserved{Code: fleet.UnobservedNeverRead, Err: err.Error()}})
			continue
		}
		for _, in := range g.Instances {
			if !in.OfFleet(cfg.Controller.Fleet) {
				continue // another fleet's
			}
			n := fleet.Node{ID: in.ID, Pool: p.Name, LaunchedAt: now, State: fleet.Ready, Unknown: true}
			switch {
			case in.State == providers.InstancePending || in.Owed:
				n.State = fleet.Pending
			case in.State == providers.InstanceTerminating:
				n.State, n.Stopped = fleet.Terminating, in.Stopped
			}
			st.Nodes = append(st.Nodes, n)
		}
	}
	for _, l := range providers.ListOrphans(ctx, cfg.Controller.Fleet, cfg.Pools, clouds) {
		if l.Err != nil {
			if ctx.Err() != nil {
				return fleet.State{}, l.Err
			}
			// As the controller does: orphans unlisted are not reaped.
			log.Warn("orphans not listed: none are shown", "error", l.Err)
			continue
		}
		for _, o := range l.Orphans {
			// Silent as every node here: shown, never reaped on this view.
			n := fleet.Node{ID: o.ID, Pool: o.Pool, LaunchedAt: now, State: fleet.Ready, Orphan: true}
			switch o.State {
			case providers.InstancePending:
				n.State = fleet.Pending
			case providers.InstanceTerminating:
				n.State, n.Stopped = fleet.Terminating, o.Stopped
			}
			st.Nodes = append(st.Nodes, n)
		}
	}
	return st, nil
}

// readState reads a JSON state snapshot and checks it against the config.
// Errors name the file and the line, column or field.
func readState(path string, cfg *config.Config) (fleet.State, error) {
	src, err := os.ReadFile(path)
	if err != nil {
		return fleet.State{}, fmt.Errorf("state: %w", err)
	}
	st, err := fleet.ParseState(src)
	if err == nil {
		err = st.Validate(cfg.Pools)
	}
	if err != nil {
		return fleet.State{}, fmt.Errorf("state %s: %w", path, err)
	}
	return st, nil
}

// writePlan prints a plan the way `terraform plan` does: one line per
// action with a sign, then a summary.
func writePlan(w io.Writer, cfg *config.Config, p *planner.Plan) {
	fmt.Fprintf(w, "Fleetcast plan at %s\n\n", p.At.UTC().Format("2006-01-02 15:04 MST"))
	d, c := p.Demand, p.Capacity
	fmt.Fprintf(w, "  demand now:  %d GPUs (%d running, %d pending)\n", d.Total(), d.RunningGPUs, d.PendingGPUs)
	fmt.Fprintf(w, "  capacity:    %d GPUs ready, %d launching, %d draining", c.ReadyGPUs, c.LaunchingGPUs, c.DrainingGPUs)
	if c.FragmentGPUs > 0 {
		fmt.Fprintf(w, "; %d GPUs free on busy nodes", c.FragmentGPUs)
		if d.PendingGPUs > 0 {
			fmt.Fprint(w, " (no pending job fits there)")
		}
	}
	if c.InterruptedGPUs > 0 {
		fmt.Fprintf(w, "; %d GPUs the cloud is reclaiming (spot notices)", c.InterruptedGPUs)
	}
	if c.SilentNodes > 0 {
		fmt.Fprintf(w, "; %d node(s) with silent agents", c.SilentNodes)
	}
	fmt.Fprintln(w)
	if u := p.UnknownNodes; len(u) > 0 {
		fmt.Fprintf(w, "  unknown:     %d instance(s) not launched by this controller, agents never reported healthy GPUs: %s\n", len(u), planner.ListIDs(u, 10))
		fmt.Fprintln(w, "               (never terminated at a provisioning deadline nor drained; known once their agents report)")
	}
	if u := p.Orphans; len(u) > 0 {
		fmt.Fprintf(w, "  orphans:     %d instance(s) of this fleet in pools the config no longer has (reaped once idle): %s\n", len(u), planner.ListIDs(u, 10))
	}
	if u := p.GPUFaultNodes; len(u) > 0 {
		fmt.Fprintf(w, "  gpu faults:  %d node(s) whose agents cannot read their GPUs (never taken for idle): %s\n", len(u), planner.ListIDs(u, 10))
	}
	if f := p.Forecast; f != nil {
		qs := f.Quantile(p.Quantile)
		lo, hi := qs[0], qs[0]
		for _, v := range qs {
			lo, hi = min(lo, v), max(hi, v)
		}
		// Each pool's quantile by cost, unless forecast.quantile sets one.
		levels, settings := "", cfg.Settings()
		if v, qs := cfg.Forecast.WaitValuePerGPUHour, settings.Quantiles(); cfg.Forecast.Quantile == 0 && len(qs) > 0 {
			levels = fmt.Sprintf(" (by cost at $%g a waiting GPU-hour)", v)
			if len(qs) > 1 {
				levels = fmt.Sprintf(" (each pool's by cost at $%g a waiting GPU-hour: p%.3g-p%.3g", v, qs[0]*100, qs[len(qs)-1]*100)
				if p.Quantile < qs[len(qs)-1] {
					// planner.keepQuantile: refused pools do not count.
					levels += "; kept for the highest of the pools not backed off or failing"
				}
				levels += ")"
			}
		}
		fmt.Fprintf(w, "  forecast:    %s p%.3g%s, %.0f-%.0f GPUs over the next %s\n", f.Model, p.Quantile*100, levels, lo, hi, fleet.FormatDuration(f.End().Sub(f.Origin)))
		if f.Note != "" {
			fmt.Fprintf(w, "               (%s)\n", f.Note)
		}
	}
	fmt.Fprintln(w)
	if q := p.Queue; q != nil {
		writeQueue(w, q)
		fmt.Fprintln(w)
	}

	if len(p.Actions) == 0 {
		fmt.Fprintln(w, "No changes. The fleet matches the forecast.")
	} else {
		fmt.Fprintln(w, "Fleetcast would perform these actions:")
		fmt.Fprintln(w)
		for _, a := range p.Actions {
			fmt.Fprintln(w, "  "+actionLine(a))
		}
	}
	if len(p.Notes) > 0 {
		fmt.Fprintln(w, "\nNotes:")
		for _, n := range p.Notes {
			fmt.Fprintln(w, "  ! "+n.Text)
		}
	}
	if b := p.Baseline; b != nil {
		fmt.Fprintf(w, "\nReserved baseline (advice only, nothing is bought):\n  %s\n", b.Reason())
	}

	n := p.Counts()
	var parts []string
	for _, k := range []struct {
		kind planner.ActionKind
		word string
	}{{planner.Launch, "to launch"}, {planner.Drain, "to drain"}, {planner.Terminate, "to terminate"},
		{planner.CancelDrain, "drain(s) to cancel"}, {planner.Hold, "held"}} {
		parts = append(parts, fmt.Sprintf("%d %s", n[k.kind], k.word))
	}
	delta := p.CostPerHourAfter - p.CostPerHourBefore
	fmt.Fprintf(w, "\nPlan: %s. Cost per hour: $%.2f -> $%.2f (%+.2f).\n",
		strings.Join(parts, ", "), p.CostPerHourBefore, p.CostPerHourAfter, delta)
}

// actionLine formats one action.
func actionLine(a planner.Action) string {
	switch a.Kind {
	case planner.Launch:
		return fmt.Sprintf("+ launch %d x %s in %s (%s)", a.Count, a.InstanceType, a.Pool, a.Reason)
	case planner.Drain:
		return fmt.Sprintf("- drain %s in %s (%s)", a.Node, a.Pool, a.Reason)
	case planner.Terminate:
		return fmt.Sprintf("- terminate %s in %s (%s)", a.Node, a.Pool, a.Reason)
	case planner.CancelDrain:
		return fmt.Sprintf("~ cancel drain of %s in %s: %s", a.Node, a.Pool, a.Reason)
	default:
		return fmt.Sprintf("~ hold %s in %s: %s", a.Node, a.Pool, a.Reason)
	}
}
