package simfleet

import (
	"context"
	"fmt"
	"math/rand/v2"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/fleetcast/autoscaler/config"
	"github.com/fleetcast/autoscaler/fleet"
	"github.com/fleetcast/autoscaler/loop"
	"github.com/fleetcast/autoscaler/planner"
	"github.com/fleetcast/autoscaler/providers/sim"
	"github.com/fleetcast/autoscaler/simulate"
	"github.com/fleetcast/autoscaler/trace"
)

// parityConfig is two on-demand pools of 8-GPU nodes, the cheaper one
// short of capacity (so launches are refused, the pool backs off and the
// planner falls back), a cycle a minute.
func parityConfig() *config.Config {
	cfg := config.Defaults()
	pool := func(name string, price float64, capacity int) fleet.Pool {
		return fleet.Pool{Name: name, Provider: "sim", Region: "r1", InstanceType: "p4d.24xlarge", GPUModel: "A100", GPUsPerNode: 8,
			Capacity: fleet.OnDemand, PricePerHour: price, LeadTime: 5 * time.Minute, ProvisionTimeout: 15 * time.Minute, Max: 40,
			Settings: sim.Settings{Capacity: capacity}}
	}
	cfg.Pools = []fleet.Pool{pool("cheap", 30, 6), pool("dear", 40, 40)}
	cfg.Limits.MaxGPUs = 1000
	// One quantile for both pools, as these traces were made for: with
	// each pool's by cost no drain of the long jobs times out.
	cfg.Forecast.Quantile = 0.9
	return &cfg
}

// parityTrace is jobs of 1 to 16 GPUs over 8 hours, each submitted and
// each running a whole number of minutes, so that both runs see every
// event at a cycle: about busy jobs a minute in the middle four hours, a
// quarter of that before and after; with waves, busy and quiet by turns
// every wave instead.
func parityTrace(busy float64, shortest, longest, waves time.Duration) *trace.Trace {
	rng := rand.New(rand.NewPCG(7, 11))
	minutes := int((longest - shortest) / time.Minute)
	tr := &trace.Trace{}
	widths := []int{1, 2, 4, 8, 8, 16}
	for m := 0; m < 8*60; m++ {
		rate := busy / 4
		if waves > 0 && (time.Duration(m)*time.Minute/waves)%2 == 0 || waves == 0 && m >= 2*60 && m < 6*60 {
			rate = busy
		}
		for n := rate; rng.Float64() < n; n-- {
			tr.Jobs = append(tr.Jobs, trace.Job{ID: fmt.Sprint("j", len(tr.Jobs)), Submit: time.Duration(m) * time.Minute,
				GPUs: widths[rng.IntN(len(widths))], Duration: shortest + time.Duration(rng.IntN(minutes+1))*time.Minute})
		}
	}
	return tr
}

// decision is one cycle's plan, with node IDs written as the order the
// nodes were launched in (the engine's and the simulated cloud's IDs
// differ, but both count launches fleet-wide).
type decision struct {
	demand   planner.Demand
	capacity planner.Capacity
	actions  []string
	nodes    []string
}

func (d decision) String() string {
	return fmt.Sprintf("demand %+v, capacity %+v, actions:\n    %s\n  nodes:\n    %s", d.demand, d.capacity,
		strings.Join(d.actions, "\n    "), strings.Join(d.nodes, "\n    "))
}

var (
	engineID = regexp.MustCompile(`\bn(\d{7})-[a-z]+\b`)
	cloudID  = regexp.MustCompile(`\bsim-[a-z]+-(\d{5})\b`)
)

// ordinal writes an ID as its launch's number, from 0.
func ordinal(s string) string {
	s = engineID.ReplaceAllStringFunc(s, func(id string) string {
		n, _ := strconv.Atoi(engineID.FindStringSubmatch(id)[1])
		return fmt.Sprint("#", n)
	})
	return cloudID.ReplaceAllStringFunc(s, func(id string) string {
		n, _ := strconv.Atoi(cloudID.FindStringSubmatch(id)[1])
		return fmt.Sprint("#", n-1)
	})
}

func decide(p *planner.Plan, st *fleet.State) decision {
	d := decision{demand: p.Demand, capacity: p.Capacity}
	for _, n := range st.Nodes {
		var jobs []string
		for _, j := range n.Jobs {
			jobs = append(jobs, fmt.Sprintf("%s:%d@%s/%s", j.ID, j.GPUs, j.Start.Format("15:04"), j.LastCheckpoint.Format("15:04")))
		}
		slices.Sort(jobs)
		d.nodes = append(d.nodes, ordinal(fmt.Sprintf("%s %s %v idle %s", n.ID, n.State, jobs, n.IdleSince.Format("15:04"))))
	}
	slices.Sort(d.nodes)
	for _, a := range p.Actions {
		d.actions = append(d.actions, ordinal(fmt.Sprintf("%s %s %s x%d: %s", a.Kind, a.Pool, a.Node, a.Count, a.Reason)))
	}
	return d
}

// TestOneLoopTwoWorlds runs the one decision loop on the same fleet and
// the same jobs twice: under `simulate`'s engine (its predictive policy)
// and under the demo's simulated cloud (the controller, with its
// actuator, journal and agents' view, over providers/sim, the agents fed
// by this package on the same cluster model), and checks that they take
// the same decisions, cycle by cycle: what they observed (demand,
// capacity and every node) and every action with its reason. Launches are
// refused and fall back; idle nodes drain (their agents taking the drain
// up with the answer to a report) and terminate; with long jobs, busy
// nodes drain once their jobs have checkpointed, the jobs move, and
// drains are cancelled when demand comes back.
func TestOneLoopTwoWorlds(t *testing.T) {
	for _, tt := range []struct {
		name string
		// busy is the jobs a minute at the busiest; waves, if set, the
		// time between busy and quiet.
		busy                     float64
		shortest, longest, waves time.Duration
		// every is the jobs' checkpoint interval, save how long a
		// checkpoint a drain asks for takes (negative: at once).
		every, save time.Duration
		want        []planner.ActionKind
	}{
		{"short jobs", 1.5, 5 * time.Minute, 65 * time.Minute, 0, 30 * time.Minute, 2 * time.Minute,
			[]planner.ActionKind{planner.Launch, planner.Drain, planner.Hold, planner.Terminate}},
		{"long jobs, checkpoints slower than the drain timeout", 0.3, time.Hour, 4 * time.Hour, 0, 10 * time.Minute, 25 * time.Minute,
			[]planner.ActionKind{planner.Launch, planner.Drain, planner.Hold, planner.Terminate, planner.CancelDrain}},
		{"long jobs, checkpoints at once", 0.3, time.Hour, 4 * time.Hour, 0, 10 * time.Minute, -1,
			[]planner.ActionKind{planner.Launch, planner.Drain, planner.Hold, planner.Terminate}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			kinds := twoWorlds(t, parityTrace(tt.busy, tt.shortest, tt.longest, tt.waves), tt.every, tt.save)
			for _, k := range tt.want {
				if kinds[k] == 0 {
					t.Errorf("no %s among %v: the worlds were not compared on it", k, kinds)
				}
			}
		})
	}
}

// twoWorlds runs tr in both worlds, fails at the first cycle they
// differ, and returns how many actions of each kind they took; a refused
// launch counts as "refused".
func twoWorlds(t *testing.T, tr *trace.Trace, every, save time.Duration) map[planner.ActionKind]int {
	t.Helper()
	cfg := parityConfig()
	start := time.Date(2026, 11, 30, 6, 0, 0, 0, time.UTC)
	opt := simulate.Options{Policies: []string{"predictive"}, Start: start, UnresponsiveJobs: -1,
		CheckpointInterval: every, CheckpointDuration: save}

	var engine []decision
	opt.Cycles = func(policy string, r loop.CycleResult) { engine = append(engine, decide(&r.Plan, r.State)) }
	if _, err := simulate.Run(settingsOf(cfg), tr, opt); err != nil {
		t.Fatal(err)
	}
	if len(engine) < 8*60 {
		t.Fatalf("simulate ran %d cycles; want one a minute for 8 hours", len(engine))
	}

	now := start
	d := newDemo(t, cfg, 1, func() time.Time { return now })
	c, ctx := d.c, context.Background()
	f, err := New(Options{Pools: cfg.Pools, Cloud: d.cloud, Trace: tr, Start: start, CheckpointEvery: every,
		CheckpointDuration: save, Reports: d.agents, Pending: pendingTo(d.pending)})
	if err != nil {
		t.Fatal(err)
	}
	kinds := map[planner.ActionKind]int{}
	for k := range engine {
		now = start.Add(time.Duration(k) * cfg.Controller.Interval)
		if err := f.Step(ctx, now); err != nil {
			t.Fatal(err)
		}
		r, err := c.RunCycle(ctx)
		if err != nil {
			t.Fatalf("cycle %d: %v", k, err) // a refused launch is an outcome, not an error
		}
		got := decide(&r.Plan, c.Last().State)
		if want := engine[k]; got.String() != want.String() {
			t.Fatalf("cycle %d (%s): the controller on the simulated cloud decided\n  %v\nsimulate's engine\n  %v", k, now.Format("15:04"), got, want)
		}
		for i, a := range r.Plan.Actions {
			kinds[a.Kind]++
			if r.Outcomes[i].Result == loop.Refused {
				kinds["refused"]++
			}
		}
	}
	t.Logf("%d cycles alike: %v; lost %.1f GPU-h, moved %d jobs", len(engine), kinds, f.Stats().LostGPUHours, f.Stats().Moved)
	if kinds["refused"] == 0 {
		t.Errorf("no launch refused among %v: the worlds were not compared on back-offs", kinds)
	}
	return kinds
}
