package simfleet

import (
	"context"
	"testing"
	"time"

	"github.com/fleetcast/autoscaler/config"
	"github.com/fleetcast/autoscaler/controller"
	"github.com/fleetcast/autoscaler/fleet"
	"github.com/fleetcast/autoscaler/providers"
	"github.com/fleetcast/autoscaler/providers/registry"
	"github.com/fleetcast/autoscaler/providers/sim"
	"github.com/fleetcast/autoscaler/state"
)

// demo is the controller on the simulated cloud of a config's pools,
// recovered and ready for its first cycle, as `run` wires it.
type demo struct {
	cloud   *sim.Cloud
	store   *state.Store
	agents  *controller.Agents
	pending *controller.Pending
	c       *controller.Controller
}

// settingsOf is a copy of cfg's settings, for the controller.
func settingsOf(cfg *config.Config) *fleet.Settings {
	s := cfg.Settings()
	return &s
}

func newDemo(t *testing.T, cfg *config.Config, seed int64, clock func() time.Time) *demo {
	t.Helper()
	cloud := sim.New(cfg.Pools, seed, clock)
	store, err := state.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	clouds := map[string]providers.Provider{}
	for _, p := range cfg.Pools {
		clouds[p.Name] = cloud
	}
	d := &demo{cloud: cloud, store: store, agents: controller.NewAgents(clock), pending: &controller.Pending{}}
	if d.c, err = controller.New(controller.Options{Settings: settingsOf(cfg), Controller: cfg.Controller, Store: store, Clouds: clouds, Agents: d.agents, Pending: d.pending, Now: clock}); err != nil {
		t.Fatal(err)
	}
	if err := d.c.Recover(context.Background()); err != nil {
		t.Fatal(err)
	}
	return d
}

// TestControllerFollowsADay runs the controller on the local example's
// simulated cloud and workload for a simulated day, a cycle a minute: the
// fleet follows demand, no work is lost, and nothing is left half done.
func TestControllerFollowsADay(t *testing.T) {
	cfg, diags := registry.Load("../examples/local.hcl")
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	now := time.Date(2026, 11, 30, 0, 0, 0, 0, time.UTC) // a Monday
	clock := func() time.Time { return now }
	d := newDemo(t, cfg, cfg.Synthetic.Seed, clock)
	cloud, agents, pending, c := d.cloud, d.agents, d.pending, d.c
	w := sim.NewWorkload(cfg.Settings(), cfg.Synthetic)
	if err := SeedHistory(d.store, w, now, cfg.Forecast.Step, cfg.Forecast.History); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	f, err := New(Options{Pools: cfg.Pools, Cloud: cloud, Workload: w, Start: now, CheckpointEvery: cfg.Simulate.CheckpointInterval, CheckpointDuration: cfg.Simulate.CheckpointDuration,
		Reports: agents, Pending: pendingTo(pending), Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	var demandHours, unmetHours, cost float64
	launches, drains := 0, 0
	for range 24 * 60 {
		now = now.Add(time.Minute)
		if err := f.Step(ctx, now); err != nil {
			t.Fatal(err)
		}
		plan, err := c.Cycle(ctx)
		if err != nil {
			t.Logf("%v: %v", now, err) // capacity errors are expected: the example's spot pool runs out
		}
		counts := plan.Counts()
		launches += counts["launch"]
		drains += counts["drain"]
		cost += plan.CostPerHourBefore / 60
		s := f.Stats()
		demandHours += float64(s.DemandGPUs) / 60
		unmetHours += float64(s.DemandGPUs-s.RunningGPUs) / 60
	}
	s := f.Stats()
	t.Logf("a day: demand %.0f GPU-hours, unmet %.1f (%.2f%%), waited %.1f GPU-hours, lost %.2f, cost $%.0f; %d nodes launched, %d drained; jobs started %d, completed %d, moved by drains %d",
		demandHours, unmetHours, 100*unmetHours/demandHours, s.WaitGPUHours, s.LostGPUHours, cost, launches, drains, s.Started, s.Completed, s.Moved)
	if s.LostGPUHours != 0 {
		t.Errorf("lost %.2f GPU-hours of work", s.LostGPUHours)
	}
	if unmetHours > 0.03*demandHours {
		t.Errorf("unmet demand %.1f GPU-hours of %.0f: the fleet did not follow demand", unmetHours, demandHours)
	}
	if launches == 0 || drains == 0 {
		t.Errorf("%d launches and %d drains in a day of a daily cycle; want both", launches, drains)
	}
	if in, _ := d.store.Intents(); len(in) != 0 {
		t.Errorf("intents left: %+v", in)
	}
}

// pendingTo pushes the queued GPUs to the controller as the scheduler
// "simfleet" would, for any pool, as cmd/autoscaler wires the local default.
func pendingTo(p *controller.Pending) func(time.Time, int) {
	var line controller.PendingDemand
	return func(now time.Time, gpus int) {
		line.GPUs = gpus
		p.Set(now, controller.DemandPush{Source: "simfleet", Pending: []controller.PendingDemand{line}})
	}
}
