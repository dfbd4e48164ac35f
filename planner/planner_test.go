package planner

import (
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/fleetcast/autoscaler/config"
	"github.com/fleetcast/autoscaler/fleet"
	"github.com/fleetcast/autoscaler/forecast"
)

func testConfig(pools ...fleet.Pool) *config.Config {
	cfg := config.Defaults()
	cfg.Forecast.Quantile = 0.9 // the reasons' words say p90; TestQuantileByCost tests the default
	cfg.Pools = pools
	return &cfg
}

// withLimits changes a config's limits.
func withLimits(cfg *config.Config, f func(*fleet.Limits)) *config.Config {
	f(&cfg.Limits)
	return cfg
}

func pool(name string, c fleet.CapacityType, price float64, lead time.Duration, mn, mx int) fleet.Pool {
	return fleet.Pool{Name: name, Provider: "sim", InstanceType: "p4d.24xlarge", GPUsPerNode: 8, Capacity: c,
		PricePerHour: price, LeadTime: lead, ProvisionTimeout: 3 * lead, Min: mn, Max: mx}
}

// ready makes a ready node that reported a minute ago, with one-GPU jobs
// whose checkpoints are the given ages (a negative age: never checkpointed).
func ready(id, pool string, ckAges ...time.Duration) fleet.Node {
	n := fleet.Node{ID: id, Pool: pool, State: fleet.Ready, LaunchedAt: t0.Add(-5 * time.Hour), LastReport: t0.Add(-time.Minute)}
	for i, a := range ckAges {
		j := fleet.Job{ID: fmt.Sprintf("%s-job%d", id, i), GPUs: 1, Start: t0.Add(-3 * time.Hour), LongRunning: true}
		if a >= 0 {
			j.LastCheckpoint = t0.Add(-a)
		}
		n.Jobs = append(n.Jobs, j)
	}
	if len(ckAges) == 0 {
		n.IdleSince = t0.Add(-35 * time.Minute)
	}
	return n
}

// flat is a forecast of v GPUs at every level for 3 hours, in 10-minute steps.
func flat(v float64) forecast.Forecast {
	return ramp(v, v)
}

// ramp is a forecast going linearly from a to b over 3 hours.
func ramp(a, b float64) forecast.Forecast {
	f := forecast.Forecast{Origin: t0, Step: 10 * time.Minute, Model: "test", Levels: []float64{0.5, 0.9}}
	row := make([]float64, 18)
	for h := range row {
		row[h] = a + (b-a)*float64(h)/float64(len(row)-1)
	}
	f.Values = [][]float64{row, row}
	return f
}

func actions(p Plan, kind ActionKind) []Action {
	var out []Action
	for _, a := range p.Actions {
		if a.Kind == kind {
			out = append(out, a)
		}
	}
	return out
}

// planScenario is a plan TestPlanScenarios checks the behaviour of, by
// codes and numbers; TestReasonTexts shows its words.
type planScenario struct {
	name  string
	cfg   *config.Config
	state fleet.State
	fc    forecast.Forecast
	check func(t *testing.T, p Plan)
}

// input is the scenario's planner input, at t0.
func (s planScenario) input() Input {
	return Input{Settings: s.cfg.Settings(), State: &s.state, Forecast: s.fc, Now: t0}
}

// planScenarios are TestPlanScenarios' cases, made afresh on each call.
func planScenarios() []planScenario {
	od := pool("od", fleet.OnDemand, 32, 9*time.Minute, 0, 10)
	res := pool("res", fleet.Reserved, 19, 8*time.Minute, 0, 2)
	// Two idle reserved nodes give slack, so that scale-in reaches past the
	// nodes it can drain.
	res1, res2 := ready("res1", "res"), ready("res2", "res")
	return []planScenario{{
		name: "launch ahead by the lead time for the forecast",
		cfg: func() *config.Config {
			c := testConfig(od)
			c.Pools[0].LeadTime = 25 * time.Minute
			return c
		}(),
		state: fleet.State{Nodes: []fleet.Node{ready("a", "od", 5*time.Minute)}},
		// 8 GPUs now, rising to 48: the step holding 14:25 forecasts 12.7.
		fc: ramp(8, 48),
		check: func(t *testing.T, p Plan) {
			l := actions(p, Launch)
			// The step holding 14:25 needs 13 GPUs at p90; 8 are ready.
			if len(l) != 1 || l[0].Count != 1 || l[0].Code != ReasonForecast || p.Quantile != 0.9 || p.Capacity.ReadyGPUs != 8 {
				t.Fatalf("launches = %+v, quantile %v, capacity %+v", l, p.Quantile, p.Capacity)
			}
		},
	}, {
		name: "reserved first, then the cheapest pool, skipping a backed-off one",
		cfg: testConfig(pool("spot", fleet.Spot, 12, 8*time.Minute, 0, 10), od,
			pool("gcp", fleet.OnDemand, 29, 12*time.Minute, 0, 10), pool("res", fleet.Reserved, 19, 8*time.Minute, 0, 2)),
		state: fleet.State{PendingGPUs: 40, Pools: []fleet.PoolStatus{{Name: "spot", BackoffUntil: t0.Add(10 * time.Minute), BackoffReason: "InsufficientInstanceCapacity"}}},
		fc:    flat(0),
		check: func(t *testing.T, p Plan) {
			l := actions(p, Launch)
			if len(l) != 2 || l[0].Pool != "res" || l[0].Count != 2 || l[1].Pool != "gcp" || l[1].Count != 3 {
				t.Fatalf("launches = %+v", l)
			}
			// Spot, backed off, is skipped for the 24 GPUs res does not hold.
			if n := notesCoded(p, ReasonBackedOff); len(n) != 1 {
				t.Fatalf("notes = %+v", p.Notes)
			}
		},
	}, {
		name: "drain idle nodes first, then fresh checkpoints; hold one whose job has an old checkpoint",
		cfg:  withLimits(testConfig(od, res), func(l *fleet.Limits) { l.ScaleInShare = 1 }),
		state: fleet.State{Nodes: []fleet.Node{ready("busy-old", "od", 47*time.Minute), ready("busy-2m", "od", 2*time.Minute),
			ready("idle", "od"), ready("busy-1m", "od", time.Minute), res1, res2}},
		fc: flat(8),
		check: func(t *testing.T, p Plan) {
			d := actions(p, Drain)
			if len(d) != 3 || d[0].Node != "idle" || d[1].Node != "busy-1m" || d[2].Node != "busy-2m" ||
				d[0].Code != ReasonIdle || d[1].Code != ReasonCheckpointed || d[2].Code != ReasonCheckpointed ||
				p.Quantile != 0.9 || p.Capacity.ReadyGPUs != 48 {
				// p90 needs 8 GPUs of the 48 ready: the share and the
				// checkpoints, not the demand, stop the drains.
				t.Fatalf("drains = %+v, quantile %v, capacity %+v", d, p.Quantile, p.Capacity)
			}
			h := actions(p, Hold)
			if len(h) != 1 || h[0].Node != "busy-old" || h[0].Code != ReasonCheckpointTooOld {
				t.Fatalf("holds = %+v", h)
			}
		},
	}, {
		name: "a silent node is never treated as idle",
		cfg:  testConfig(od, res),
		state: fleet.State{Nodes: []fleet.Node{
			func() fleet.Node { n := ready("quiet", "od"); n.LastReport = t0.Add(-7 * time.Minute); return n }(),
			ready("busy", "od", time.Minute), res1, res2}},
		fc: flat(0),
		check: func(t *testing.T, p Plan) {
			h := actions(p, Hold)
			if len(h) != 1 || h[0].Node != "quiet" || h[0].Code != ReasonAgentSilent || p.Capacity.SilentNodes != 1 {
				t.Fatalf("holds = %+v, capacity %+v", h, p.Capacity)
			}
		},
	}, {
		name: "scale-in keeps to a share of the pool per window, counting drains begun lately",
		cfg:  withLimits(testConfig(od, res), func(l *fleet.Limits) { l.ScaleInShare = 0.5; l.ScaleInWindow = 10 * time.Minute }),
		// Six od nodes: a budget of three drains per 10 minutes. One is
		// draining (begun 2m ago) and one drain ended 5m ago; the drain
		// 20m ago is outside the window. Room for one more.
		state: fleet.State{
			Pools: []fleet.PoolStatus{{Name: "od", RecentDrains: []time.Time{t0.Add(-20 * time.Minute), t0.Add(-5 * time.Minute), t0.Add(-2 * time.Minute)}}},
			Nodes: []fleet.Node{ready("a", "od"), ready("b", "od"), ready("c", "od"), ready("d", "od"), ready("e", "od", time.Minute),
				draining("f", 2*time.Minute, time.Minute), res1, res2}},
		fc: flat(0),
		check: func(t *testing.T, p Plan) {
			if d := actions(p, Drain); len(d) != 1 || d[0].Node != "a" {
				t.Fatalf("drains = %+v", d)
			}
			// A budget of 3 drains per window for 6 nodes: 2 spent, 1 drain.
			budget := ScaleInBudget(fleet.Limits{ScaleInShare: 0.5, ScaleInWindow: 10 * time.Minute}, 6)
			if n := notesCoded(p, ReasonScaleInShare); len(n) != 1 || budget != 3 {
				t.Fatalf("notes = %+v, budget %d", p.Notes, budget)
			}
		},
	}, {
		name: "a pool whose group could not be read is left as it is",
		cfg:  testConfig(od, res),
		state: fleet.State{PendingGPUs: 64,
			Pools: []fleet.PoolStatus{{Name: "od", Unobserved: fleet.Unobserved{Code: fleet.UnobservedReadFailed, Err: "Throttling: rate exceeded"}}},
			Nodes: []fleet.Node{ready("a", "od"), draining("f", 2*time.Minute, time.Second),
				func() fleet.Node {
					n := ready("late", "od")
					n.State, n.LaunchedAt = fleet.Pending, t0.Add(-time.Hour)
					return n
				}()}},
		fc: flat(0),
		check: func(t *testing.T, p Plan) {
			for _, a := range p.Actions {
				if a.Pool == "od" && a.Kind != Hold {
					t.Fatalf("%s in an unobserved pool: %+v", a.Kind, a)
				}
			}
			h := actions(p, Hold)
			if len(h) != 2 || h[0].Node != "f" || h[1].Node != "late" || h[0].Code != ReasonPoolUnobserved || h[1].Code != ReasonPoolUnobserved ||
				len(actions(p, Terminate)) != 0 {
				t.Fatalf("holds = %+v", h)
			}
			if n := notesCoded(p, ReasonPoolUnobserved); len(n) == 0 {
				t.Fatalf("notes = %+v, want one for the unread pool", p.Notes)
			}
		},
	}, {
		name: "scale-in halts when many agents are silent",
		cfg:  testConfig(od),
		state: fleet.State{Nodes: []fleet.Node{ready("a", "od"), ready("b", "od"),
			func() fleet.Node { n := ready("c", "od"); n.LastReport = time.Time{}; return n }()}},
		fc: flat(0),
		check: func(t *testing.T, p Plan) {
			// 1 silent of 3 ready is over limits.silent_share_halt (30%).
			if n := notesCoded(p, ReasonScaleInHalted); len(actions(p, Drain)) != 0 || len(n) != 1 || p.ScaleInHalt == "" || p.Capacity.SilentNodes != 1 {
				t.Fatalf("plan = %+v, want scale-in halted, noted once", p)
			}
		},
	}, {
		name: "drained nodes are terminated, stuck drains wait or are cancelled",
		cfg:  testConfig(od),
		state: fleet.State{Nodes: []fleet.Node{
			draining("done", 10*time.Minute, 2*time.Minute), draining("waiting", 5*time.Minute, 9*time.Minute),
			draining("stuck", 25*time.Minute, 40*time.Minute), draining("empty", time.Minute),
			// Drained a minute ago, not yet confirmed by its agent: a job
			// placed since (its "checkpoint" is its start) must not be lost.
			func() fleet.Node {
				n := draining("uncordoned", time.Minute, 30*time.Second)
				n.DrainAcked = false
				return n
			}()}},
		fc: flat(100),
		check: func(t *testing.T, p Plan) {
			type kindCode struct {
				kind ActionKind
				code Reason
			}
			got := map[string]kindCode{}
			for _, a := range p.Actions {
				got[a.Node] = kindCode{a.Kind, a.Code}
			}
			want := map[string]kindCode{
				"done":    {Terminate, ReasonDrainedCheckpointed},
				"waiting": {Hold, ReasonDrainNotConfirmed},
				"stuck":   {CancelDrain, ReasonDrainTimeout},
				"empty":   {Terminate, ReasonDrainedEmpty},
				// Its agent has not confirmed the drain: it may still take work.
				"uncordoned": {Hold, ReasonDrainNotAcked},
				"":           {Launch, ReasonForecast},
			}
			if fmt.Sprint(got) != fmt.Sprint(want) {
				t.Fatalf("actions = %v, want %v", got, want)
			}
		},
	}, {
		name: "a launch that misses its deadline is terminated and the pool backed off",
		cfg:  testConfig(od, pool("gcp", fleet.OnDemand, 40, 12*time.Minute, 0, 10)),
		state: fleet.State{PendingGPUs: 8, Nodes: []fleet.Node{
			{ID: "late", Pool: "od", State: fleet.Pending, LaunchedAt: t0.Add(-28 * time.Minute)}}},
		fc: flat(0),
		check: func(t *testing.T, p Plan) {
			if p.Actions[0].Kind != Terminate || p.Actions[0].Code != ReasonProvisionTimeout || !p.Actions[0].BackOff ||
				p.Actions[1].Pool != "gcp" || p.Actions[1].Code != ReasonDemandNow {
				t.Fatalf("actions = %+v", p.Actions)
			}
		},
	}, {
		name: "a launch the cloud is failing to create is terminated at once and the pool backed off; another's is left",
		cfg:  testConfig(od, pool("gcp", fleet.OnDemand, 40, 12*time.Minute, 0, 10)),
		state: fleet.State{PendingGPUs: 16, Nodes: []fleet.Node{
			{ID: "failing", Pool: "od", State: fleet.Pending, LaunchedAt: t0.Add(-2 * time.Minute), LaunchFailing: "ZONE_RESOURCE_POOL_EXHAUSTED"},
			{ID: "theirs", Pool: "od", State: fleet.Pending, LaunchedAt: t0.Add(-2 * time.Minute), LaunchFailing: "ZONE_RESOURCE_POOL_EXHAUSTED", Unknown: true}}},
		fc: flat(0),
		check: func(t *testing.T, p Plan) {
			a := p.Actions
			if len(a) != 2 || a[0].Kind != Terminate || a[0].Node != "failing" || a[0].Code != ReasonLaunchFailing || !a[0].BackOff ||
				a[1].Kind != Launch || a[1].Pool != "gcp" || a[1].Count != 1 || a[1].Code != ReasonDemandNow {
				t.Fatalf("actions = %+v; want the failing launch terminated, and one node (the other launch still counted) bought in gcp", a)
			}
		},
	}, {
		name: "an idle orphan is reaped, within the cycle's scale-in budget",
		cfg:  func() *config.Config { c := testConfig(od); c.Limits.MaxScaleInPerCycle = 1; return c }(),
		state: fleet.State{Nodes: []fleet.Node{ready("a", "od"), ready("b", "od"),
			func() fleet.Node { n := ready("gone-1", "gone"); n.Orphan = true; return n }()}},
		fc: flat(0),
		check: func(t *testing.T, p Plan) {
			if d := actions(p, Drain); len(d) != 1 || d[0].Code != ReasonIdle || fmt.Sprint(p.Orphans) != "[gone-1]" {
				t.Fatalf("drains %+v, orphans %v: want one drain in all (max_scale_in_per_cycle 1)", d, p.Orphans)
			}
			again := Make(Input{Settings: func() fleet.Settings { c := testConfig(od); c.Limits.MaxScaleInPerCycle = 3; return c.Settings() }(),
				State: &fleet.State{Nodes: []fleet.Node{func() fleet.Node { n := ready("gone-1", "gone"); n.Orphan = true; return n }()}}, Forecast: flat(0), Now: t0})
			if d := actions(again, Drain); len(d) != 1 || d[0].Code != ReasonReap || d[0].Node != "gone-1" || d[0].Pool != "gone" {
				t.Fatalf("the orphan alone: drains %+v", d)
			}
		},
	}, {
		name:  "limits hold launches back",
		cfg:   func() *config.Config { c := testConfig(od); c.Limits.MaxGPUs = 24; return c }(),
		state: fleet.State{PendingGPUs: 80},
		fc:    flat(0),
		check: func(t *testing.T, p Plan) {
			l := actions(p, Launch)
			// 10 nodes wanted for 80 GPUs; 3 within max_gpus; the rest unmet.
			if n := notesCoded(p, ReasonMaxGPUs); len(l) != 1 || l[0].Count != 3 || len(n) != 1 || len(notesCoded(p, ReasonUnmetDemand)) != 1 || p.LimitedBy != "limits.max_gpus" {
				t.Fatalf("plan = %+v", p)
			}
		},
	}, {
		name:  "a forecast that is not a number falls back to current demand",
		cfg:   testConfig(od),
		state: fleet.State{PendingGPUs: 8},
		fc:    flat(nan()),
		check: func(t *testing.T, p Plan) {
			l := actions(p, Launch)
			if len(l) != 1 || l[0].Count != 1 || l[0].Code != ReasonDemandNow || len(notesCoded(p, ReasonForecastNotANumber)) != 1 {
				t.Fatalf("plan = %+v", p)
			}
		},
	}, {
		name: "a drained node is terminated only on a report made since the drain began",
		cfg:  testConfig(od),
		state: fleet.State{Nodes: []fleet.Node{func() fleet.Node {
			n := draining("quiet-since", 30*time.Second)
			n.LastReport = t0.Add(-2 * time.Minute) // before the drain: a job may have landed since
			return n
		}()}},
		fc: flat(0),
		check: func(t *testing.T, p Plan) {
			h := actions(p, Hold)
			if len(h) != 1 || h[0].Code != ReasonDrainNoReport || len(actions(p, Terminate)) != 0 {
				t.Fatalf("actions = %+v", p.Actions)
			}
		},
	}, {
		name: "a faster pool covers what a slow cheap pool cannot bring in time",
		cfg: testConfig(pool("slow-cheap", fleet.OnDemand, 16, 30*time.Minute, 0, 10),
			pool("fast", fleet.OnDemand, 32, 5*time.Minute, 0, 10)),
		state: fleet.State{Nodes: []fleet.Node{ready("a", "fast", time.Minute), ready("b", "fast", time.Minute)}},
		fc:    ramp(24, 75), // 24 GPUs at 14:05, 48 at 14:30
		check: func(t *testing.T, p Plan) {
			l := actions(p, Launch)
			if len(l) != 2 || l[0].Pool != "slow-cheap" || l[1].Pool != "fast" || l[1].Count != 1 {
				t.Fatalf("launches = %+v", l)
			}
		},
	}, {
		name: "capacity on silent nodes is not counted on for scale-in",
		cfg:  testConfig(od),
		state: fleet.State{Nodes: []fleet.Node{
			func() fleet.Node { n := ready("quiet", "od"); n.LastReport = t0.Add(-10 * time.Minute); return n }(),
			ready("a", "od"), ready("b", "od"), ready("c", "od")}},
		fc: flat(17), // three live nodes (24 GPUs) are needed; the silent one may be dead
		check: func(t *testing.T, p Plan) {
			if d := actions(p, Drain); len(d) != 0 {
				t.Fatalf("drains = %+v", d)
			}
		},
	}, {
		name: "a node whose drain was cancelled is not drained again until its jobs checkpoint",
		cfg:  testConfig(od, res),
		state: fleet.State{Nodes: []fleet.Node{func() fleet.Node {
			n := ready("flappy", "od", 10*time.Minute)
			n.DrainCancelledAt = t0.Add(-2 * time.Minute)
			return n
		}(), res1, res2}},
		fc: flat(0),
		check: func(t *testing.T, p Plan) {
			h := actions(p, Hold)
			if len(h) != 1 || h[0].Node != "flappy" || h[0].Code != ReasonNoCheckpointSinceCancel || len(actions(p, Drain)) != 0 {
				t.Fatalf("actions = %+v", p.Actions)
			}
		},
	}}
}

func TestPlanScenarios(t *testing.T) {
	for _, tt := range planScenarios() {
		t.Run(tt.name, func(t *testing.T) {
			tt.check(t, Make(tt.input()))
		})
	}
}

func nan() float64 { var z float64; return z / z }

// draining makes a draining node in pool od whose drain began `since` ago,
// with one job per checkpoint age; its agent confirms the drain when every
// job checkpointed since it began, as a real agent would.
func draining(id string, since time.Duration, ckAges ...time.Duration) fleet.Node {
	n := ready(id, "od", ckAges...)
	n.State, n.DrainStartedAt, n.LastReport, n.DrainAcked = fleet.Draining, t0.Add(-since), t0.Add(-10*time.Second), true
	n.DrainConfirmed = true
	for _, ck := range ckAges {
		n.DrainConfirmed = n.DrainConfirmed && ck < since
	}
	return n
}

func TestCost(t *testing.T) {
	cfg := testConfig(pool("res", fleet.Reserved, 20, time.Minute, 0, 2), pool("od", fleet.OnDemand, 30, time.Minute, 0, 10))
	st := fleet.State{Nodes: []fleet.Node{ready("r1", "res", time.Minute), ready("o1", "od"), ready("o2", "od", time.Minute)}}
	p := Make(Input{Settings: cfg.Settings(), State: &st, Forecast: flat(16), Now: t0})
	// Before: reservation 2 x 20 + 2 on-demand x 30. After: o1 drained.
	if p.CostPerHourBefore != 100 || p.CostPerHourAfter != 70 {
		t.Fatalf("cost %v -> %v, want 100 -> 70 (actions %+v)", p.CostPerHourBefore, p.CostPerHourAfter, p.Actions)
	}
}

func TestRecommendBaseline(t *testing.T) {
	pools := []fleet.Pool{pool("res", fleet.Reserved, 16, time.Minute, 0, 1), pool("od", fleet.OnDemand, 32, time.Minute, 0, 10)}
	// Break-even 0.5: 16 GPUs are busy all the time, 8 more 60% of the time,
	// 8 more 40%: reserve 24 GPUs = 3 nodes, when both halves of the
	// history look alike (the levels interleaved).
	var v []float64
	for i := range 100 {
		switch {
		case i%5 < 2:
			v = append(v, 32)
		case i%5 < 3:
			v = append(v, 24)
		default:
			v = append(v, 16)
		}
	}
	b := RecommendBaseline(fleet.Series{Start: t0, Step: time.Minute, Values: v}, pools, 0)
	if b == nil || b.Nodes != 3 || b.GPUs != 24 || b.WholeNodes != 3 || b.BreakEven != 0.5 || b.BusyShare != 0.6 {
		t.Fatalf("baseline = %+v", b)
	}
	// Grow from 1 to 3, weighed against od: $60.80/h expected, $80.00/h now.
	if b.Pool != "res" || b.BurstPool != "od" || b.CurrentNodes != 1 || b.CostPerHour != 60.80 || b.CurrentCostPerHour != 80 || b.HistorySteps != 100 || b.TooShort {
		t.Fatalf("baseline = %+v", b)
	}
	if RecommendBaseline(fleet.Series{}, pools, 0) != nil || RecommendBaseline(fleet.Series{Values: v}, pools[1:], 0) != nil {
		t.Fatal("want no recommendation without history or a reserved pool")
	}
	// A plan advises nothing on less than a week of history: 100 minutes
	// here, as 2 hours are after a controller's first start.
	short := RecommendBaseline(fleet.Series{Start: t0, Step: time.Minute, Values: v}, pools, MinAdviceHistory)
	// 100 steps, 1h40m, of the 7 days (168h) needed; the 1 reserved node kept.
	if short == nil || !short.TooShort || short.Nodes != short.CurrentNodes || short.CurrentNodes != 1 || short.Pool != "res" ||
		short.HistorySteps != 100 || math.Abs(short.HistoryHours-100.0/60) > 1e-9 || short.MinHistoryHours != 168 || short.CostPerHour != 0 {
		t.Fatalf("advice on 100 minutes of history: %+v; want none (too_short), the reservation kept", short)
	}
	// Through the planner: the plan's advice rests on its state's history.
	cfg := testConfig(pools...)
	st := fleet.State{History: fleet.Series{Start: t0.Add(-2 * time.Hour), Step: 10 * time.Minute, Values: slices.Repeat([]float64{32}, 12)}}
	if b := Make(Input{Settings: cfg.Settings(), State: &st, Now: t0}).Baseline; b == nil || !b.TooShort {
		t.Fatalf("a plan's advice on 2 hours of history: %+v; want none yet", b)
	}
	st.History.Values = slices.Repeat([]float64{32}, 7*24*6)
	if b := Make(Input{Settings: cfg.Settings(), State: &st, Now: t0}).Baseline; b == nil || b.TooShort || b.Nodes != 4 {
		t.Fatalf("a plan's advice on 7 days of 32 GPUs: %+v; want 4 nodes", b)
	}
}

// TestBaselineBurstyStart: a level the history holds only in a burst (a
// bursty first week, then calm) is not reserved, though the whole history
// would justify it: a reservation cannot shrink once the burst is over.
// One held in both halves is.
func TestBaselineBurstyStart(t *testing.T) {
	pools := []fleet.Pool{pool("res", fleet.Reserved, 16, time.Minute, 0, 1), pool("od", fleet.OnDemand, 32, time.Minute, 0, 10)}
	series := func(levels ...[2]int) fleet.Series { // {GPUs, steps}, in order
		var v []float64
		for _, l := range levels {
			for range l[1] {
				v = append(v, float64(l[0]))
			}
		}
		return fleet.Series{Start: t0, Step: time.Hour, Values: v}
	}
	for _, tc := range []struct {
		name         string
		history      fleet.Series
		reserved     int // now
		nodes, whole int
	}{
		// 64 GPUs 70% of the time, all in the first 10 of 14 days: the
		// second half holds it only 3 days in 7.
		{"burst first", series([2]int{64, 240}, [2]int{16, 96}), 1, 2, 8},
		// The same share spread over both halves.
		{"steady", series([2]int{64, 120}, [2]int{16, 48}, [2]int{64, 120}, [2]int{16, 48}), 1, 8, 8},
		// Growing demand: the first half holds less, so the advice waits
		// for a later review to grow (the price of not overshooting).
		{"growing", series([2]int{16, 96}, [2]int{64, 240}), 1, 2, 8},
		// Shrinking waits for both halves too: a calm first week and a busy
		// second keep the reservation the second holds.
		{"shrink on one calm half", series([2]int{16, 168}, [2]int{64, 150}, [2]int{16, 18}), 8, 8, 2},
		{"shrink on both", series([2]int{16, 336}), 8, 2, 2},
		// Halves shorter than a week would split the weekly cycle: the
		// whole history alone.
		{"under two weeks", series([2]int{64, 200}, [2]int{16, 90}), 1, 8, 8},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pools := slices.Clone(pools)
			pools[0].Min, pools[0].Max = tc.reserved, tc.reserved
			b := RecommendBaseline(tc.history, pools, 0)
			// Where the halves disagree, Nodes and WholeNodes differ (and
			// the advice's words say so: TestReasonTexts).
			if b == nil || b.Nodes != tc.nodes || b.WholeNodes != tc.whole {
				t.Fatalf("baseline = %+v, want %d nodes (whole history %d)", b, tc.nodes, tc.whole)
			}
		})
	}
}

// BenchmarkPlan is one planning cycle for 10,000 nodes, 100,000 jobs and
// 50 pools: the target is at most 50 ms and 256 MB per cycle.
func BenchmarkPlan(b *testing.B) {
	in := bigInput(10000, 100000, 50)
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		Make(in)
	}
}

// BenchmarkPlanShares is BenchmarkPlan with a third of the jobs shares of
// one GPU (up to four on a GPU): the target is at most twice
// BenchmarkPlan's time, measured side by side.
func BenchmarkPlanShares(b *testing.B) {
	in := bigInput(10000, 100000, 50)
	k := 0
	for i := range in.State.Nodes {
		jobs, shares := in.State.Nodes[i].Jobs, 0
		for j := range jobs {
			if k++; k%3 == 0 { // a quarter of a GPU, four to one
				jobs[j].GPUs, jobs[j].GPUMilli, jobs[j].SharedGPU = 0, 250, "s"+strconv.Itoa(shares/4)
				shares++
			}
		}
	}
	if err := in.State.Validate(in.Settings.Pools); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		Make(in)
	}
}

func bigInput(nodes, jobs, pools int) Input {
	cfg := config.Defaults()
	caps := []fleet.CapacityType{fleet.Reserved, fleet.OnDemand, fleet.OnDemand, fleet.Spot}
	for i := range pools {
		p := pool(fmt.Sprintf("pool-%02d", i), caps[i%len(caps)], 10+float64(i), time.Duration(5+i%10)*time.Minute, 0, 2*nodes/pools)
		p.GPUsPerNode = 16 // up to 16 one-GPU jobs a node: 100,000 jobs fit
		cfg.Pools = append(cfg.Pools, p)
	}
	st := &fleet.State{}
	for i := range nodes {
		n := fleet.Node{ID: fmt.Sprintf("i-%07d", i), Pool: cfg.Pools[i%pools].Name, State: fleet.Ready,
			LaunchedAt: t0.Add(-time.Hour), LastReport: t0.Add(-time.Duration(i%200) * time.Second)} // 10% silent
		switch i % 20 {
		case 0:
			n.State, n.DrainStartedAt = fleet.Draining, t0.Add(-time.Duration(i%30)*time.Minute)
		case 1:
			n.State = fleet.Pending
		}
		st.Nodes = append(st.Nodes, n)
	}
	for j := range jobs {
		n := &st.Nodes[j%nodes]
		if n.State == fleet.Pending {
			n = &st.Nodes[(j+1)%nodes]
		}
		n.Jobs = append(n.Jobs, fleet.Job{ID: fmt.Sprintf("job-%d", j), GPUs: 1, Start: t0.Add(-time.Duration(j%600) * time.Minute),
			LastCheckpoint: t0.Add(-time.Duration(j%50) * time.Minute)})
	}
	cfg.Limits.MaxScaleInPerCycle = 1000
	return Input{Settings: cfg.Settings(), State: st, Forecast: ramp(30000, 20000), Now: t0}
}

// TestAboveMaxNodesListedOnce: a pool above its max whose nodes cannot
// drain (jobs never checkpointed) lists each node once, held for the
// max, not again by the demand pass that follows.
func TestAboveMaxNodesListedOnce(t *testing.T) {
	od := pool("od", fleet.OnDemand, 32, 9*time.Minute, 0, 1)
	st := fleet.State{Nodes: []fleet.Node{ready("a", "od", -1), ready("b", "od", -1), ready("c", "od", -1), ready("d", "od", -1)}}
	p := Make(Input{Settings: testConfig(od).Settings(), State: &st, Forecast: flat(0), Now: t0})
	seen := map[string]int{}
	for _, a := range p.Actions {
		if a.Node != "" {
			seen[a.Node]++
		}
	}
	for node, n := range seen {
		if n > 1 {
			t.Errorf("node %s has %d actions: %+v", node, n, p.Actions)
		}
	}
	if len(seen) == 0 {
		t.Fatalf("no node listed: %+v", p.Actions)
	}
}

// notesCoded are the words of a plan's notes with that code.
func notesCoded(p Plan, code Reason) []string {
	var out []string
	for _, n := range p.Notes {
		if n.Code == code {
			out = append(out, n.Text)
		}
	}
	return out
}

// TestReasonNames: every code has a name of its own, which JSON shows and
// reads back.
func TestReasonNames(t *testing.T) {
	seen := map[string]Reason{}
	for r := Reason(1); r.Known(); r++ {
		name := r.String()
		if name == "" || seen[name] != 0 {
			t.Fatalf("reason %d: name %q is empty or also %d's", r, name, seen[name])
		}
		seen[name] = r
		b, err := json.Marshal(Note{Code: r, Text: "x"})
		var back Note
		if err != nil || json.Unmarshal(b, &back) != nil || back.Code != r {
			t.Fatalf("reason %s: JSON %s (%v) reads back as %s", r, b, err, back.Code)
		}
	}
	if len(seen) != int(numReasons)-1 {
		t.Fatalf("%d names for %d reasons", len(seen), numReasons-1)
	}
	var r Reason
	if err := r.UnmarshalText([]byte("no_such_reason")); err == nil {
		t.Fatal("an unknown name read as a reason")
	}
	if b, _ := json.Marshal(Action{Kind: Launch, Code: ReasonForecast}); !json.Valid(b) || string(b) != `{"kind":"launch","pool":"","instance_type":"","gpus":0,"code":"forecast","reason":""}` {
		t.Fatalf("action JSON %s", b)
	}
}

// TestSpotNotices: a node under a spot interruption notice is not counted
// on (its replacement is bought now), unless the notice is past by more
// than StaleNotice: the node survived it and is capacity again.
func TestSpotNotices(t *testing.T) {
	spot := pool("spot", fleet.Spot, 12, 8*time.Minute, 0, 10)
	for _, tt := range []struct {
		name   string
		in     time.Duration // until the notice's deadline; negative: past
		launch int
	}{
		{"due in two minutes", 2 * time.Minute, 1},
		{"just past", -time.Minute, 1},
		{"long past", -StaleNotice - time.Minute, 0},
	} {
		t.Run(tt.name, func(t *testing.T) {
			n := ready("s-1", spot.Name, time.Minute) // one job: the node is needed
			n.InterruptAt = t0.Add(tt.in)
			st := fleet.State{Nodes: []fleet.Node{n}}
			p := Make(Input{Settings: testConfig(spot).Settings(), State: &st, Now: t0})
			launched := 0
			for _, a := range actions(p, Launch) {
				launched += a.Count
			}
			if launched != tt.launch {
				t.Errorf("launched %d, want %d\n%s", launched, tt.launch, describe(p))
			}
		})
	}
}
