package planner

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/fleetcast/autoscaler/config"
	"github.com/fleetcast/autoscaler/fleet"
	"github.com/fleetcast/autoscaler/forecast"
	"github.com/fleetcast/autoscaler/internal/golden"
)

// reasonsGolden pins the words of the plan's reasons, notes, halts and
// baseline advice; TestReasonTexts rewrites it with -update.
const reasonsGolden = "testdata/reasons.golden"

// wordsScenario is a plan whose words TestReasonTexts shows.
type wordsScenario struct {
	name string
	plan func() Plan
}

// at plans cfg's fleet st with forecast fc at t0.
func at(cfg *config.Config, st fleet.State, fc forecast.Forecast) func() Plan {
	return func() Plan { return Make(Input{Settings: cfg.Settings(), State: &st, Forecast: fc, Now: t0}) }
}

// TestReasonTexts renders, for a fixed set of scenarios, each action's
// kind, pool, node or count and code with its reason, each note's code
// with its words, the scale-in halt and the baseline advice, and compares
// them with testdata/reasons.golden: the one place the planner's words
// are pinned. Behaviour tests assert codes and numbers. Every reason code
// must appear in some scenario. After a rewording:
//
//	go test ./planner -run '^TestReasonTexts$' -update
//
// and read the diff.
func TestReasonTexts(t *testing.T) {
	var b strings.Builder
	seen := map[Reason]bool{}
	for _, s := range reasonScenarios() {
		p := s.plan()
		fmt.Fprintf(&b, "== %s\n", s.name)
		lines := 0
		for _, a := range p.Actions {
			seen[a.Code] = true
			if a.Kind == Launch {
				fmt.Fprintf(&b, "%s %s x%d [%s]: %s\n", a.Kind, a.Pool, a.Count, a.Code, a.Reason)
			} else {
				fmt.Fprintf(&b, "%s %s/%s [%s]: %s\n", a.Kind, a.Pool, a.Node, a.Code, a.Reason)
			}
			lines++
		}
		for _, n := range p.Notes {
			seen[n.Code] = true
			fmt.Fprintf(&b, "note [%s]: %s\n", n.Code, n.Text)
			lines++
		}
		if p.ScaleInHalt != "" {
			fmt.Fprintf(&b, "scale-in halt: %s\n", p.ScaleInHalt)
			lines++
		}
		if p.Baseline != nil {
			fmt.Fprintf(&b, "baseline: %s\n", p.Baseline.Reason())
			lines++
		}
		if lines == 0 {
			b.WriteString("(no actions, no notes)\n")
			if !strings.HasPrefix(s.name, "TestPlanScenarios: ") {
				t.Errorf("scenario %q shows no words", s.name)
			}
		}
		b.WriteString("\n")
	}
	for r := Reason(1); r.Known(); r++ {
		if !seen[r] {
			t.Errorf("reason %s: no scenario of TestReasonTexts shows its words; add one to reasonScenarios", r)
		}
	}
	golden.CheckString(t, reasonsGolden, b.String())
}

// reasonScenarios are TestPlanScenarios' cases, then more, so that every
// code and every form of its words shows. (Read the file for the words'
// sense: a share is written as a percentage, "more than 30% of them",
// never as "p30", which reads as a percentile.)
func reasonScenarios() []wordsScenario {
	var out []wordsScenario
	for _, s := range planScenarios() {
		out = append(out, wordsScenario{"TestPlanScenarios: " + s.name, func() Plan { return Make(s.input()) }})
	}
	od := pool("od", fleet.OnDemand, 32, 9*time.Minute, 0, 10)
	spot := pool("spot", fleet.Spot, 12, 8*time.Minute, 0, 10)
	res := pool("res", fleet.Reserved, 19, 8*time.Minute, 0, 2)
	res1, res2 := ready("res1", "res"), ready("res2", "res")
	orphan := func(id string, f func(*fleet.Node)) fleet.Node {
		n := ready(id, "gone")
		n.Orphan = true
		f(&n)
		return n
	}
	silentFor := func(n fleet.Node, d time.Duration) fleet.Node {
		n.LastReport = t0.Add(-d)
		if d == 0 {
			n.LastReport = time.Time{}
		}
		return n
	}
	idleFor := func(n fleet.Node, d time.Duration) fleet.Node { n.IdleSince = t0.Add(-d); return n }
	withMax := func(p fleet.Pool, mx int) fleet.Pool { p.Max = mx; return p }
	withMin := func(p fleet.Pool, mn int) fleet.Pool { p.Min = mn; return p }
	healthy := func(n int) []fleet.Node {
		var out []fleet.Node
		for i := range n {
			out = append(out, ready(fmt.Sprint("h", i), "od", time.Minute))
		}
		return out
	}
	// Forecasts of every shape the planner refuses or repairs.
	badStep, badRows, badLevels, ragged, short, negative := flat(8), flat(8), flat(8), flat(8), flat(8), flat(-5)
	badStep.Step = 0
	badRows.Values = badRows.Values[:1]
	badLevels.Levels = []float64{0.9, 0.5}
	ragged.Values[0] = ragged.Values[0][:5]
	short.Values = [][]float64{short.Values[0][:2], short.Values[1][:2]}
	crossing := flat(60)
	crossing.Levels = []float64{0.9, 0.99}
	crossing.Values[1] = slices.Repeat([]float64{10}, len(crossing.Values[0]))
	byCost := flat(8) // median 8, p99 108
	byCost.Levels = []float64{0.5, 0.99}
	byCost.Values[1] = slices.Repeat([]float64{108}, len(byCost.Values[0]))
	costed := func(pools ...fleet.Pool) *config.Config {
		c := withLimits(testConfig(pools...), func(l *fleet.Limits) { l.ScaleInShare, l.MaxScaleInPerCycle = 1, 20 })
		c.Forecast.Quantile = 0
		return c
	}
	dearOD := pool("od", fleet.OnDemand, 55.04, 10*time.Minute, 0, 100)
	cheapSpot := pool("spot", fleet.Spot, 12.50, 8*time.Minute, 0, 100)
	var twenty []fleet.Node
	for i := range 20 {
		twenty = append(twenty, ready(fmt.Sprintf("od-%02d", i), "od"))
	}
	// full is a node of od whose 8 one-GPU jobs all end in 5 minutes.
	full := func(id string) fleet.Node {
		n := ready(id, "od", 0, 0, 0, 0, 0, 0, 0, 0)
		for i := range n.Jobs {
			n.Jobs[i].ExpectedEnd = t0.Add(5 * time.Minute)
		}
		return n
	}
	busyGPUs := func(id string, gpus int) fleet.Node {
		n := ready(id, "od")
		n.IdleSince = time.Time{}
		n.Jobs = []fleet.Job{{ID: id + "-0", GPUs: gpus, Start: t0.Add(-time.Hour), LastCheckpoint: t0.Add(-time.Minute)}}
		return n
	}
	announce := func(start time.Duration, gpus int) fleet.Announcement {
		return fleet.Announcement{ID: fmt.Sprint("run-", start), StartAt: t0.Add(start), GPUs: gpus, Duration: time.Hour}
	}
	history := func(vals ...float64) fleet.Series {
		return fleet.Series{Start: t0.Add(-time.Duration(len(vals)) * 10 * time.Minute), Step: 10 * time.Minute, Values: vals}
	}
	// Booted launches past their deadline beside four silent nodes.
	halted := func(silent bool) fleet.State {
		var nodes []fleet.Node
		for i := range 4 {
			n := ready(fmt.Sprint("r", i), "od", time.Minute)
			if silent {
				n.LastReport = t0.Add(-time.Hour)
			}
			nodes = append(nodes, n)
		}
		st := fleet.State{PendingGPUs: 64, Nodes: append(nodes,
			fleet.Node{ID: "booted", Pool: "od", State: fleet.Pending, LaunchedAt: t0.Add(-40 * time.Minute), Booted: true})}
		if !silent {
			st.HaltedAt = t0.Add(-5 * time.Minute)
		}
		return st
	}
	base := []fleet.Pool{pool("res", fleet.Reserved, 16, time.Minute, 0, 1), pool("od", fleet.OnDemand, 32, time.Minute, 0, 10)}
	levels := func(levels ...[2]int) fleet.Series { // {GPUs, steps}, in order, hourly
		var v []float64
		for _, l := range levels {
			for range l[1] {
				v = append(v, float64(l[0]))
			}
		}
		return fleet.Series{Start: t0, Step: time.Hour, Values: v}
	}
	interleaved := func() fleet.Series {
		var v []float64
		for i := range 100 {
			v = append(v, []float64{32, 32, 24, 16, 16}[i%5])
		}
		return fleet.Series{Start: t0, Step: time.Minute, Values: v}
	}
	baseline := func(h fleet.Series, pools []fleet.Pool, minHistory time.Duration) func() Plan {
		return func() Plan { return Plan{Baseline: RecommendBaseline(h, pools, minHistory)} }
	}
	resAt := func(n int) []fleet.Pool {
		p := slices.Clone(base)
		p[0].Min, p[0].Max = n, n
		return p
	}
	return append(out, []wordsScenario{
		// Launches.
		{"below its min", at(testConfig(withMin(od, 2)), fleet.State{}, flat(0))},
		{"demand now, with GPUs free on busy nodes that no pending job fits", at(testConfig(od),
			fleet.State{PendingGPUs: 8, Nodes: []fleet.Node{busyGPUs("a", 4), busyGPUs("b", 4)}}, forecast.Forecast{})},
		{"each pool to its own quantile by cost: the cheap one high", at(costed(cheapSpot, dearOD), fleet.State{}, byCost)},
		{"each pool to its own quantile by cost: the dear one lower", at(costed(cheapSpot, dearOD),
			fleet.State{Pools: []fleet.PoolStatus{{Name: "spot", BackoffUntil: t0.Add(time.Hour)}}}, byCost)},
		{"scale-in keeps for the cheap pool's quantile", at(costed(cheapSpot, dearOD), fleet.State{Nodes: twenty}, byCost)},
		{"announced within the lead time", at(testConfig(od), fleet.State{Announced: []fleet.Announcement{announce(5*time.Minute, 16)}}, forecast.Forecast{})},
		{"announced on top of a forecast of the demand not announced", func() Plan {
			st := fleet.State{Announced: []fleet.Announcement{announce(5*time.Minute, 16)}}
			return Make(Input{Settings: testConfig(od).Settings(), State: &st, Forecast: flat(24), Now: t0, Unannounced: true})
		}},
		{"announced, kept from scale-in", at(testConfig(od),
			fleet.State{Nodes: []fleet.Node{ready("a", "od"), ready("b", "od"), ready("c", "od")}, Announced: []fleet.Announcement{announce(30*time.Minute, 16)}}, forecast.Forecast{})},
		{"demand scoped to a pool", at(testConfig(spot, od),
			fleet.State{PendingGPUs: 16, Scoped: []fleet.ScopedDemand{{Pool: "od", GPUs: 16}}}, forecast.Forecast{})},
		{"demand scoped to a GPU model beyond its pools' max", func() Plan {
			h100 := pool("h100", fleet.OnDemand, 60, 9*time.Minute, 0, 4)
			h100.GPUModel = "H100"
			st := fleet.State{PendingGPUs: 48, Scoped: []fleet.ScopedDemand{{GPUModel: "H100", GPUs: 48}}}
			return Make(Input{Settings: testConfig(spot, h100).Settings(), State: &st, Now: t0})
		}},
		{"demand scoped to a partition's pools of a GPU model", func() Plan {
			train := pool("h100", fleet.OnDemand, 60, 9*time.Minute, 0, 4)
			train.GPUModel, train.Partitions = "H100", []string{"train"}
			st := fleet.State{PendingGPUs: 16, Scoped: []fleet.ScopedDemand{{Partition: "train", GPUModel: "H100", GPUs: 16}}}
			return Make(Input{Settings: testConfig(spot, train).Settings(), State: &st, Now: t0})
		}},
		{"demand scoped to pools, of tiers nothing is bought for there", func() Plan {
			set := testConfig(spot, od).Settings()
			set.Tiers = []fleet.Tier{{Name: "critical", Rank: 1, WaitValuePerGPUHour: 500},
				{Name: "batch", Rank: 2, WaitValuePerGPUHour: 50, Default: true, CapacityTypes: []fleet.CapacityType{fleet.Spot}},
				{Name: "best_effort", Rank: 3}}
			st := fleet.State{PendingGPUs: 40, PendingTiers: []fleet.TierGPUs{{Tier: "best_effort", GPUs: 8}, {Tier: "batch", GPUs: 16}},
				Scoped: []fleet.ScopedDemand{{Pool: "od", GPUs: 8, Tier: "best_effort"},
					{Pool: "od", GPUs: 16, Tier: "batch"}, {Pool: "spot", GPUs: 16}}}
			return Make(Input{Settings: set, State: &st, Now: t0})
		}},
		{"teams over their burst budgets", func() Plan {
			set := testConfig(res, od).Settings()
			set.Teams = []fleet.Team{{Name: "vision", Budgeted: true, BurstBudgetPerDay: 2400, ReservedShare: 0.5},
				{Name: "nlp", Budgeted: true, BurstBudgetPerDay: 50}, {Name: "speech", Budgeted: true, BurstBudgetPerDay: 500, ReservedShare: 0.5},
				{Name: "ads", Budgeted: true, BurstBudgetPerDay: 10}}
			st := fleet.State{PendingGPUs: 36, Nodes: []fleet.Node{res1, res2},
				PendingTeams: []fleet.TeamGPUs{{Team: "vision", GPUs: 24}, {Team: "nlp", GPUs: 8}, {Team: "speech", GPUs: 4}},
				BurstSpend:   []fleet.TeamSpend{{Team: "vision", USD: 2512.4}, {Team: "nlp", USD: 61.5}, {Team: "speech", USD: 500}, {Team: "ads", USD: 12}}}
			return Make(Input{Settings: set, State: &st, Now: t0})
		}},
		{"the scheduler's queue read last at 13:57, and not since", at(testConfig(od), fleet.State{PendingGPUs: 8,
			Queue: &fleet.Queue{Source: "slurm", ReadAt: t0.Add(-3 * time.Minute), Degraded: "squeue: ran past its timeout of 10s"}}, forecast.Forecast{})},
		{"the scheduler's queue never read", at(testConfig(od), fleet.State{
			Queue: &fleet.Queue{Source: "slurm", Degraded: "squeue: exit status 1: slurm_load_jobs error: Unable to contact slurm controller (connect failure)"}}, forecast.Forecast{})},
		{"the scheduler's queue read too long ago", at(testConfig(od), fleet.State{
			Queue: &fleet.Queue{Source: "slurm", ReadAt: t0.Add(-15 * time.Minute), Expired: true, Degraded: "sinfo: exit status 1"}}, forecast.Forecast{})},
		{"the scheduler's queue read whole too long ago", at(testConfig(od), fleet.State{
			Queue: &fleet.Queue{Source: "slurm", ReadAt: t0.Add(-15 * time.Minute), Expired: true}}, forecast.Forecast{})},
		{"demand scoped to a partition's pools of 8-GPU nodes", func() Plan {
			a, b := pool("narrow", fleet.OnDemand, 10, 9*time.Minute, 0, 4), pool("wide", fleet.OnDemand, 40, 9*time.Minute, 0, 4)
			a.GPUsPerNode, a.Partitions, b.Partitions = 4, []string{"train"}, []string{"train"}
			st := fleet.State{PendingGPUs: 8, Scoped: []fleet.ScopedDemand{{Partition: "train", MinGPUsPerNode: 8, GPUs: 8}}}
			return Make(Input{Settings: testConfig(a, b).Settings(), State: &st, Now: t0})
		}},
		{"left to a cheaper pool that boots sooner", at(testConfig(spot, pool("gcp", fleet.OnDemand, 29, 12*time.Minute, 0, 40)), fleet.State{}, step(16))},
		{"pending jobs wait for nodes whose jobs end", at(testConfig(pool("od", fleet.OnDemand, 32, 10*time.Minute, 0, 10)),
			fleet.State{PendingGPUs: 8, Nodes: []fleet.Node{full("a")}}, forecast.Forecast{})},
		{"a launch for the rest of the pending, beside the ends", at(testConfig(pool("od", fleet.OnDemand, 32, 10*time.Minute, 0, 10)),
			fleet.State{PendingGPUs: 24, Nodes: []fleet.Node{full("a")}}, forecast.Forecast{})},

		// Limits and pools held back.
		{"a pool at its max", at(testConfig(withMax(od, 1), pool("gcp", fleet.OnDemand, 40, 12*time.Minute, 0, 1)), fleet.State{PendingGPUs: 32}, forecast.Forecast{})},
		{"max_spend_per_hour holds a launch back", at(withLimits(testConfig(od), func(l *fleet.Limits) { l.MaxSpendPerHour = 70 }), fleet.State{PendingGPUs: 80}, forecast.Forecast{})},
		{"the fleet already costs more than max_spend_per_hour", at(withLimits(testConfig(res, od), func(l *fleet.Limits) { l.MaxSpendPerHour = 30 }),
			fleet.State{PendingGPUs: 64, Nodes: []fleet.Node{ready("r1", "res", time.Minute), ready("r2", "res", time.Minute)}}, flat(0))},
		{"a pool never read", at(testConfig(pool("gcp", fleet.OnDemand, 29, 12*time.Minute, 0, 10), pool("aws", fleet.OnDemand, 32, 9*time.Minute, 0, 40)),
			fleet.State{PendingGPUs: 64, Pools: []fleet.PoolStatus{{Name: "gcp", Unobserved: fleet.Unobserved{Code: fleet.UnobservedNeverRead, Err: "connection refused"}}}}, forecast.Forecast{})},
		{"a node in a pool the config does not have", at(testConfig(od), fleet.State{Nodes: []fleet.Node{ready("stray", "nope", time.Minute)}}, flat(8))},

		// Nodes: launches, notices, faults, silence.
		{"an instance not launched here, not ready past its deadline", at(testConfig(od),
			fleet.State{Nodes: []fleet.Node{{ID: "u1", Pool: "od", State: fleet.Pending, LaunchedAt: t0.Add(-2 * time.Hour), Unknown: true}}}, flat(0))},
		{"an instance not launched here whose agent never reported", at(testConfig(od), fleet.State{Nodes: append(healthy(6),
			fleet.Node{ID: "u2", Pool: "od", State: fleet.Ready, LaunchedAt: t0.Add(-time.Hour), Unknown: true})}, flat(0))},
		{"a spot interruption notice", at(testConfig(spot), fleet.State{Nodes: []fleet.Node{func() fleet.Node {
			n := ready("s-1", "spot", time.Minute)
			n.InterruptAt = t0.Add(2 * time.Minute)
			return n
		}()}}, forecast.Forecast{})},
		{"a node whose agent cannot read its GPUs", at(testConfig(od), fleet.State{Nodes: append(healthy(3), func() fleet.Node {
			n := ready("f1", "od")
			n.GPUFault, n.GPUFaultSince = "NVML device count: GPU is lost", t0.Add(-6*time.Hour)
			return n
		}())}, flat(0))},
		{"a drained node whose agent cannot read its GPUs", at(testConfig(od), fleet.State{Nodes: []fleet.Node{{ID: "d1", Pool: "od", State: fleet.Draining,
			LaunchedAt: t0.Add(-5 * time.Hour), DrainStartedAt: t0.Add(-5 * time.Minute), LastReport: t0.Add(-time.Minute), DrainAcked: true, DrainConfirmed: true,
			GPUFault: "NVML device count: GPU is lost", GPUFaultSince: t0.Add(-6 * time.Hour)}}}, flat(0))},
		{"a draining node whose agent is silent", at(testConfig(od), fleet.State{Nodes: []fleet.Node{silentFor(draining("quiet", 5*time.Minute, time.Minute), 4*time.Minute)}}, flat(0))},
		{"a launch booted while scale-in is halted", at(testConfig(withMax(od, 6)), halted(true), flat(96))},
		{"a launch booted within a deadline of the halt's end, its pool below its max", at(testConfig(withMax(od, 20), pool("spot", fleet.Spot, 40, 5*time.Minute, 0, 10)), halted(false), flat(96))},

		// Scale-in.
		{"a pool above its max", at(withLimits(testConfig(withMax(res, 2), withMax(pool("od", fleet.OnDemand, 30, 9*time.Minute, 0, 2), 2)), func(l *fleet.Limits) { l.ScaleInShare, l.MaxScaleInPerCycle = 1, 10 }),
			fleet.State{Nodes: []fleet.Node{ready("r1", "res"), ready("r2", "res"), ready("r3", "res", time.Minute), ready("r4", "res"),
				ready("o1", "od"), ready("o2", "od", 3*time.Hour), ready("o3", "od", 2*time.Minute, -1), ready("o4", "od", 4*time.Hour)}}, flat(56))},
		{"scale-in's share of the pool already spent", at(withLimits(testConfig(od, res), func(l *fleet.Limits) { l.ScaleInShare, l.ScaleInWindow = 0.5, 10*time.Minute }),
			fleet.State{Pools: []fleet.PoolStatus{{Name: "od", RecentDrains: []time.Time{t0.Add(-5 * time.Minute), t0.Add(-3 * time.Minute), t0.Add(-2 * time.Minute)}}},
				Nodes: []fleet.Node{ready("a", "od"), ready("b", "od"), ready("c", "od"), ready("d", "od"), ready("e", "od"), ready("f", "od"), res1, res2}}, flat(0))},
		{"scale-in stops at max_scale_in_per_cycle", at(withLimits(testConfig(od, res), func(l *fleet.Limits) { l.ScaleInShare, l.MaxScaleInPerCycle = 1, 1 }),
			fleet.State{Nodes: []fleet.Node{ready("a", "od"), ready("b", "od"), res1, res2}}, flat(0))},
		{"busy nodes whose jobs fit nowhere else", at(withLimits(testConfig(od), func(l *fleet.Limits) { l.ScaleInShare, l.MaxScaleInPerCycle = 1, 10 }),
			fleet.State{Nodes: []fleet.Node{busyGPUs("a", 4), busyGPUs("b", 6), busyGPUs("d", 6)}}, flat(1))},
		{"a busy node whose jobs end soon", at(withLimits(testConfig(pool("od", fleet.OnDemand, 32, 10*time.Minute, 0, 10)), func(l *fleet.Limits) { l.ScaleInShare = 1 }),
			fleet.State{Nodes: []fleet.Node{func() fleet.Node {
				n := ready("a", "od", time.Minute)
				n.Jobs[0].ExpectedEnd = t0.Add(5 * time.Minute)
				return n
			}(), ready("b", "od", time.Minute), ready("c", "od", 2*time.Minute)}}, flat(10))},
		{"a pool's latest launch within scale_in_delay_after_launch", at(testConfig(pool("od", fleet.OnDemand, 30, 10*time.Minute, 0, 10)),
			fleet.State{Nodes: []fleet.Node{idleFor(ready("o1", "od"), time.Hour), idleFor(ready("o2", "od"), time.Hour), func() fleet.Node {
				n := idleFor(ready("o5", "od"), time.Minute)
				n.LaunchedAt = t0.Add(-5 * time.Minute)
				return n
			}()}}, flat(8))},
		{"a pool's launch still booting", at(testConfig(pool("od", fleet.OnDemand, 30, 10*time.Minute, 0, 10)),
			fleet.State{Nodes: []fleet.Node{idleFor(ready("o1", "od"), time.Hour), idleFor(ready("o2", "od"), time.Hour),
				{ID: "o5", Pool: "od", State: fleet.Pending, LaunchedAt: t0.Add(-15 * time.Minute)}}}, flat(8))},
		{"idle nodes not yet unneeded long enough", at(testConfig(pool("od", fleet.OnDemand, 30, 10*time.Minute, 0, 10)),
			fleet.State{Nodes: []fleet.Node{idleFor(ready("o1", "od"), 5*time.Minute), idleFor(ready("o2", "od"), 5*time.Minute),
				func() fleet.Node { n := ready("o0", "od"); n.IdleSince = time.Time{}; return n }()}}, flat(8))},
		{"demand's recent peak keeps capacity", at(testConfig(pool("od", fleet.OnDemand, 30, 10*time.Minute, 0, 10)),
			fleet.State{Nodes: []fleet.Node{idleFor(ready("o1", "od"), time.Hour), idleFor(ready("o2", "od"), time.Hour), idleFor(ready("o3", "od"), time.Hour),
				idleFor(ready("o4", "od"), time.Hour)}, History: history(8, 8, 8, 24)}, flat(8))},

		// Orphans.
		{"an idle orphan reaped", at(testConfig(od), fleet.State{Nodes: []fleet.Node{orphan("gone-1", func(*fleet.Node) {})}}, flat(0))},
		{"orphans not reaped yet", at(testConfig(od), fleet.State{Nodes: []fleet.Node{
			orphan("booting", func(n *fleet.Node) { n.State = fleet.Pending }),
			orphan("busy", func(n *fleet.Node) {
				n.IdleSince = time.Time{}
				n.Jobs = []fleet.Job{{ID: "j", GPUs: 1, Start: t0.Add(-time.Hour)}}
			}),
			orphan("fresh", func(n *fleet.Node) { n.IdleSince = t0.Add(-5 * time.Minute) }),
			orphan("quiet", func(n *fleet.Node) { n.LastReport = t0.Add(-10 * time.Minute) }),
			orphan("faulty", func(n *fleet.Node) { n.GPUFault = "NVML: GPU is lost" }),
			orphan("noticed", func(n *fleet.Node) { n.InterruptAt = t0.Add(2 * time.Minute) }),
			orphan("drained", func(n *fleet.Node) {
				n.State, n.DrainStartedAt, n.LastReport, n.DrainAcked, n.DrainConfirmed = fleet.Draining, t0.Add(-5*time.Minute), t0.Add(-10*time.Second), true, true
			}),
			orphan("stuck", func(n *fleet.Node) {
				n.State, n.DrainStartedAt, n.LastReport, n.DrainAcked = fleet.Draining, t0.Add(-2*time.Hour), t0.Add(-10*time.Second), true
				n.Jobs = []fleet.Job{{ID: "j", GPUs: 1, Start: t0.Add(-3 * time.Hour)}}
			}),
		}}, flat(0))},
		{"an idle orphan while scale-in is halted", at(testConfig(od), fleet.State{Nodes: []fleet.Node{silentFor(ready("a", "od"), 0), silentFor(ready("b", "od"), 0),
			ready("c", "od", time.Minute), orphan("gone-1", func(*fleet.Node) {})}}, flat(8))},

		// Forecasts.
		{"a forecast with no steps", at(testConfig(od), fleet.State{PendingGPUs: 8}, forecast.Forecast{})},
		{"a forecast whose step is not positive", at(testConfig(od), fleet.State{PendingGPUs: 8}, badStep)},
		{"a forecast with fewer rows than levels", at(testConfig(od), fleet.State{PendingGPUs: 8}, badRows)},
		{"a forecast whose levels are not ascending", at(testConfig(od), fleet.State{PendingGPUs: 8}, badLevels)},
		{"a forecast whose rows differ in length", at(testConfig(od), fleet.State{PendingGPUs: 8}, ragged)},
		{"an absurd forecast", at(testConfig(od), fleet.State{}, flat(1e308))},
		{"a negative forecast", at(testConfig(od), fleet.State{PendingGPUs: 8}, negative)},
		{"a forecast shorter than the longest lead time and the hysteresis", at(testConfig(od), fleet.State{}, short)},
		{"a forecast whose quantiles cross", at(costed(pool("spot", fleet.Spot, 12.5, 8*time.Minute, 0, 100), dearOD),
			fleet.State{Nodes: []fleet.Node{ready("od-0", "od"), ready("od-1", "od"), ready("od-2", "od"), ready("od-3", "od")}}, crossing)},

		// The reserved baseline's advice.
		{"baseline: grow", baseline(interleaved(), base, 0)},
		{"baseline: too little history", baseline(interleaved(), base, MinAdviceHistory)},
		{"baseline: keep", baseline(levels([2]int{64, 120}, [2]int{16, 48}, [2]int{64, 120}, [2]int{16, 48}), resAt(8), 0)},
		{"baseline: shrink", baseline(levels([2]int{16, 336}), resAt(8), 0)},
		{"baseline: the halves of the history disagree", baseline(levels([2]int{64, 240}, [2]int{16, 96}), resAt(1), 0)},
	}...)
}
