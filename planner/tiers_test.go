package planner

import (
	"strings"
	"testing"
	"time"

	"github.com/fleetcast/autoscaler/fleet"
	"github.com/fleetcast/autoscaler/forecast"
)

// tieredSettings are a reservation of one 8-GPU node and an on-demand pool,
// with the examples' tiers: critical ($500), standard ($50, the default),
// best_effort ($0, on reserved and spot capacity only).
func tieredSettings() fleet.Settings {
	set := fleet.DefaultSettings()
	set.Pools = []fleet.Pool{pool("res", fleet.Reserved, 20, 10*time.Minute, 1, 1), pool("od", fleet.OnDemand, 55, 10*time.Minute, 0, 10)}
	set.Tiers = []fleet.Tier{
		{Name: "critical", Rank: 1, WaitValuePerGPUHour: 500},
		{Name: "standard", Rank: 2, WaitValuePerGPUHour: 50, Default: true},
		{Name: "best_effort", Rank: 3, CapacityTypes: []fleet.CapacityType{fleet.Reserved, fleet.Spot}},
	}
	return set
}

// levelled is a forecast of v GPUs at each of set's levels, for 3 hours.
func levelled(set *fleet.Settings, v float64) forecast.Forecast {
	f := flat(v)
	f.Levels = set.Quantiles()
	f.Values = make([][]float64, len(f.Levels))
	for k := range f.Values {
		f.Values[k] = flat(v).Values[0]
	}
	return f
}

// TestTieredLaunch: each tier is bought for at its own level, on the
// capacity it may buy, on what the tiers below hold; a best-effort job's
// GPUs are free for the others, and its demand buys nothing.
func TestTieredLaunch(t *testing.T) {
	job := func(gpus int, tier string) fleet.Job {
		return fleet.Job{ID: tier, GPUs: gpus, Start: t0.Add(-time.Hour), Tier: tier}
	}
	onRes := func(jobs ...fleet.Job) []fleet.Node {
		n := ready("r1", "res")
		n.Jobs, n.IdleSince = jobs, time.Time{}
		return []fleet.Node{n}
	}
	tests := []struct {
		name    string
		nodes   []fleet.Node
		pending []fleet.TierGPUs
		// the cumulative forecasts: critical, critical and standard, all
		crit, upToStd, all float64
		untiered           bool
		want               int    // on-demand nodes launched
		why                string // in the launch's reason, when set
	}{
		{name: "critical pending", nodes: onRes(job(8, "standard")), pending: []fleet.TierGPUs{{Tier: "critical", GPUs: 8}}, want: 1},
		{name: "best-effort pending buys nothing", nodes: onRes(job(8, "standard")), pending: []fleet.TierGPUs{{Tier: "best_effort", GPUs: 16}}, want: 0},
		{name: "best-effort job's GPUs are free", nodes: onRes(job(1, "best_effort")), pending: []fleet.TierGPUs{{Tier: "critical", GPUs: 8}}, want: 0},
		{name: "a lower tier's job holds its GPUs", nodes: onRes(job(1, "standard")), pending: []fleet.TierGPUs{{Tier: "critical", GPUs: 8}}, want: 1},
		{name: "best-effort forecast buys nothing", nodes: onRes(), crit: 16, upToStd: 16, all: 40, want: 1, why: "tier critical's forecast p94.8 needs 16 GPUs"},
		{name: "untiered, all of it", nodes: onRes(), crit: 16, upToStd: 16, all: 40, untiered: true, want: 4, why: "forecast p94.8 needs 40 GPUs"},
		{name: "critical forecast on what standard holds", nodes: onRes(job(8, "standard")), crit: 8, upToStd: 8, all: 8, want: 1, why: "tier critical's forecast"},
		{name: "standard's forecast, with critical's", nodes: onRes(), crit: 4, upToStd: 24, all: 24, want: 2, why: "tier standard's forecast p64.5 (with the tiers above) needs 24 GPUs"},
		{name: "pending without a tier is the default's", nodes: onRes(job(8, "standard")), pending: []fleet.TierGPUs{{Tier: "", GPUs: 8}}, want: 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			set := tieredSettings()
			st := &fleet.State{CapturedAt: t0, Nodes: tt.nodes}
			for _, p := range tt.pending {
				st.PendingGPUs += p.GPUs
				if p.Tier != "" {
					st.PendingTiers = append(st.PendingTiers, p)
				}
			}
			in := Input{Settings: set, State: st, Now: t0, Forecast: levelled(&set, tt.all),
				TierForecasts: []forecast.Forecast{levelled(&set, tt.crit), levelled(&set, tt.upToStd)}}
			if tt.untiered {
				in.Settings.Tiers, in.TierForecasts = nil, nil
			}
			got := 0
			for _, a := range actions(Make(in), Launch) {
				if a.Pool != "od" {
					t.Errorf("launched %d in %s", a.Count, a.Pool)
				}
				got += a.Count
				if !strings.Contains(a.Reason, tt.why) {
					t.Errorf("reason %q, want %q in it", a.Reason, tt.why)
				}
			}
			if got != tt.want {
				t.Errorf("launched %d on-demand nodes, want %d", got, tt.want)
			}
		})
	}
}

// TestTierQuantiles: each tier's level in each pool comes from its own wait
// value; a tier that may not buy a pool's capacity, or whose waiting is
// worth nothing, has none there.
func TestTierQuantiles(t *testing.T) {
	set := tieredSettings()
	od := &set.Pools[1]
	spot := *od
	spot.Capacity = fleet.Spot
	crit, std, be := &set.Tiers[0], &set.Tiers[1], &set.Tiers[2]
	f := &set.Forecast
	g := *f
	g.WaitValuePerGPUHour = 50
	if q := f.TierQuantile(crit, od); q != f.QuantileFor(od) {
		t.Errorf("critical on demand: %v, want %v", q, f.QuantileFor(od))
	}
	if q := f.TierQuantile(std, od); q != g.QuantileFor(od) || !(q < f.TierQuantile(crit, od)) {
		t.Errorf("standard on demand: %v, want %v, below critical's", q, g.QuantileFor(od))
	}
	be.WaitValuePerGPUHour = 10
	if q := f.TierQuantile(be, od); q != 0 {
		t.Errorf("best_effort on demand: %v, want none", q)
	}
	if q := f.TierQuantile(be, &spot); !(q > 0) {
		t.Errorf("best_effort at $10 on spot: %v, want a level", q)
	}
	be.WaitValuePerGPUHour = 0
	if q := f.TierQuantile(be, &spot); q != 0 {
		t.Errorf("best_effort at $0 on spot: %v, want none", q)
	}
}

// TestTierCapacityTypes: capacity a tier may not run on does not serve
// it, nor is its launch left to such a pool; and a pool no tier may buy
// buys nothing, even for announced demand.
func TestTierCapacityTypes(t *testing.T) {
	set := tieredSettings()
	spot := pool("spot", fleet.Spot, 20, 5*time.Minute, 0, 10)
	set.Pools = append(set.Pools, spot)
	set.Tiers[0].CapacityTypes = []fleet.CapacityType{fleet.OnDemand}
	st := &fleet.State{CapturedAt: t0, PendingGPUs: 8, PendingTiers: []fleet.TierGPUs{{Tier: "critical", GPUs: 8}},
		Nodes: []fleet.Node{ready("r1", "res", time.Minute), ready("s1", "spot")}}
	st.Nodes[0].Jobs[0].GPUs, st.Nodes[0].Jobs[0].Tier = 8, "standard"
	// An idle spot node, and a forecast of 16 critical GPUs that a
	// cheaper, faster spot pool could buy were critical allowed there.
	in := Input{Settings: set, State: st, Now: t0, Forecast: levelled(&set, 16),
		TierForecasts: []forecast.Forecast{levelled(&set, 16), levelled(&set, 16)}}
	od := 0
	for _, a := range actions(Make(in), Launch) {
		if a.Pool == "od" {
			od += a.Count
		}
	}
	if od != 2 {
		t.Errorf("launched %d on-demand nodes for 16 critical GPUs with only spot idle, want 2", od)
	}
	// Only a tier worth nothing: nothing bought, announced or not.
	set = tieredSettings()
	set.Tiers = set.Tiers[2:]
	set.Tiers[0].Default, set.Tiers[0].CapacityTypes = true, nil
	st = &fleet.State{CapturedAt: t0, Nodes: []fleet.Node{ready("r1", "res")},
		Announced: []fleet.Announcement{{ID: "a", StartAt: t0.Add(5 * time.Minute), GPUs: 16}}}
	if l := actions(Make(Input{Settings: set, State: st, Now: t0, Forecast: levelled(&set, 16)}), Launch); len(l) != 0 {
		t.Errorf("launched %+v for a tier worth nothing", l)
	}
}

// TestScaleInDrainsBestEffortFirst: of two busy nodes scale-in may drain,
// the one that holds only a best-effort job goes first, though the other's
// job checkpointed more recently.
func TestScaleInDrainsBestEffortFirst(t *testing.T) {
	set := tieredSettings()
	res := ready("r1", "res")
	a, b := ready("a", "od", 5*time.Minute), ready("b", "od", 20*time.Minute)
	a.Jobs[0].Tier, b.Jobs[0].Tier = "standard", "best_effort"
	st := &fleet.State{CapturedAt: t0, Nodes: []fleet.Node{res, a, b}}
	in := Input{Settings: set, State: st, Now: t0, Forecast: levelled(&set, 0),
		TierForecasts: []forecast.Forecast{levelled(&set, 0), levelled(&set, 0)}}
	drains := actions(Make(in), Drain)
	if len(drains) != 1 || drains[0].Node != "b" {
		t.Errorf("drains %+v, want b's alone", drains)
	}
	in.Settings.Tiers, in.TierForecasts = nil, nil
	if drains := actions(Make(in), Drain); len(drains) != 1 || drains[0].Node != "a" {
		t.Errorf("without tiers, drains %+v, want a's (the fresher checkpoint)", drains)
	}
}

// TestScopedTiers: demand served apart for one pool counts against its own
// tier's fleet-wide need only, not another tier's: critical jobs that may
// run on on-demand capacity only and batch jobs on spot only, each pending
// fleet-wide or for one pool, are bought for exactly, counted here by hand.
func TestScopedTiers(t *testing.T) {
	set := fleet.DefaultSettings()
	set.Pools = []fleet.Pool{pool("od", fleet.OnDemand, 55, 10*time.Minute, 0, 10), pool("spot", fleet.Spot, 20, 10*time.Minute, 0, 10)}
	set.Tiers = []fleet.Tier{{Name: "critical", Rank: 1, WaitValuePerGPUHour: 500, CapacityTypes: []fleet.CapacityType{fleet.OnDemand}},
		{Name: "batch", Rank: 2, WaitValuePerGPUHour: 50, Default: true, CapacityTypes: []fleet.CapacityType{fleet.Spot}}}
	for _, tt := range []struct {
		name     string
		pending  []fleet.TierGPUs
		scoped   []fleet.ScopedDemand
		od, spot int // nodes launched
	}{
		{"16 critical GPUs anywhere, 16 batch ones for od, which batch may not buy",
			[]fleet.TierGPUs{{Tier: "critical", GPUs: 16}, {Tier: "batch", GPUs: 16}}, []fleet.ScopedDemand{{Pool: "od", GPUs: 16, Tier: "batch"}}, 2, 0},
		{"8 critical GPUs for od, 16 batch ones anywhere",
			[]fleet.TierGPUs{{Tier: "critical", GPUs: 8}, {Tier: "batch", GPUs: 16}}, []fleet.ScopedDemand{{Pool: "od", GPUs: 8, Tier: "critical"}}, 1, 2},
		{"8 batch GPUs for spot, 8 more anywhere, 8 critical anywhere",
			[]fleet.TierGPUs{{Tier: "critical", GPUs: 8}, {Tier: "batch", GPUs: 16}}, []fleet.ScopedDemand{{Pool: "spot", GPUs: 8, Tier: "batch"}}, 1, 2},
	} {
		st := &fleet.State{CapturedAt: t0, Scoped: tt.scoped, PendingTiers: tt.pending}
		for _, p := range tt.pending {
			st.PendingGPUs += p.GPUs
		}
		p := Make(Input{Settings: set, State: st, Now: t0})
		got := map[string]int{}
		for _, a := range actions(p, Launch) {
			got[a.Pool] += a.Count
		}
		if got["od"] != tt.od || got["spot"] != tt.spot {
			t.Errorf("%s: launched %v, want od %d, spot %d\n%s", tt.name, got, tt.od, tt.spot, describe(p))
		}
	}
}

// TestBestEffortInvisible: what the zero-value tier's jobs hold and what
// they have pending change no plan for the others, where scoped demand
// counts free GPUs and fragments, and where nodes expected to empty stand
// in for launches: each plan is the same re-made without them.
func TestBestEffortInvisible(t *testing.T) {
	set := fleet.DefaultSettings()
	set.Pools = []fleet.Pool{pool("od", fleet.OnDemand, 55, 10*time.Minute, 0, 10), pool("od2", fleet.OnDemand, 60, 10*time.Minute, 0, 10)}
	set.Tiers = []fleet.Tier{{Name: "critical", Rank: 1, WaitValuePerGPUHour: 500}, {Name: "standard", Rank: 2, WaitValuePerGPUHour: 50, Default: true},
		{Name: "best_effort", Rank: 3}}
	idle := func(id string) fleet.Node {
		n := ready(id, "od")
		n.IdleSince = t0.Add(-time.Hour)
		return n
	}
	busy := func(id string, jobs ...fleet.Job) fleet.Node {
		n := ready(id, "od")
		n.Jobs = jobs
		return n
	}
	crit := fleet.Job{ID: "c", GPUs: 4, Tier: "critical", Start: t0.Add(-time.Hour)}
	be := fleet.Job{ID: "b", GPUs: 2, Tier: "best_effort", Start: t0.Add(-time.Hour)}
	full := fleet.Job{ID: "f", GPUs: 8, Tier: "critical", Start: t0.Add(-time.Hour), ExpectedEnd: t0.Add(5 * time.Minute)}
	for _, tt := range []struct {
		name      string
		with, not fleet.State // with the best-effort demand, and without
		fc        float64
	}{
		{"a best-effort job beside a critical one, 8 critical GPUs for od",
			fleet.State{Nodes: []fleet.Node{busy("n1", crit, be), idle("n2"), idle("n3"), idle("n4")}, PendingGPUs: 8,
				PendingTiers: []fleet.TierGPUs{{Tier: "critical", GPUs: 8}}, Scoped: []fleet.ScopedDemand{{Pool: "od", GPUs: 8, Tier: "critical"}}},
			fleet.State{Nodes: []fleet.Node{busy("n1", crit), idle("n2"), idle("n3"), idle("n4")}, PendingGPUs: 8,
				PendingTiers: []fleet.TierGPUs{{Tier: "critical", GPUs: 8}}, Scoped: []fleet.ScopedDemand{{Pool: "od", GPUs: 8, Tier: "critical"}}},
			8},
		{"16 best-effort GPUs pending beside a node about to empty",
			fleet.State{Nodes: []fleet.Node{busy("n1", full)}, PendingGPUs: 24,
				PendingTiers: []fleet.TierGPUs{{Tier: "critical", GPUs: 8}, {Tier: "best_effort", GPUs: 16}}, Scoped: []fleet.ScopedDemand{{Pool: "od", GPUs: 8, Tier: "critical"}}},
			fleet.State{Nodes: []fleet.Node{busy("n1", full)}, PendingGPUs: 8,
				PendingTiers: []fleet.TierGPUs{{Tier: "critical", GPUs: 8}}, Scoped: []fleet.ScopedDemand{{Pool: "od", GPUs: 8, Tier: "critical"}}},
			1},
		{"and 8 critical GPUs pending anywhere",
			fleet.State{Nodes: []fleet.Node{busy("n1", full)}, PendingGPUs: 32,
				PendingTiers: []fleet.TierGPUs{{Tier: "critical", GPUs: 16}, {Tier: "best_effort", GPUs: 16}}, Scoped: []fleet.ScopedDemand{{Pool: "od", GPUs: 8, Tier: "critical"}}},
			fleet.State{Nodes: []fleet.Node{busy("n1", full)}, PendingGPUs: 16,
				PendingTiers: []fleet.TierGPUs{{Tier: "critical", GPUs: 16}}, Scoped: []fleet.ScopedDemand{{Pool: "od", GPUs: 8, Tier: "critical"}}},
			1},
	} {
		count := func(st fleet.State) map[ActionKind]int {
			st.CapturedAt = t0
			p := Make(Input{Settings: set, State: &st, Forecast: flat(tt.fc), Now: t0})
			return p.Counts()
		}
		if with, not := count(tt.with), count(tt.not); with[Launch] != not[Launch] || with[Drain] != not[Drain] {
			t.Errorf("%s: %v with the best-effort demand, %v without", tt.name, with, not)
		}
	}
}

// TestRequestedNodes: a node the scheduler has given its jobs and asks to
// power up is bought whatever their tier; a line scoped the same way that
// is not a request buys nothing for a tier worth nothing.
func TestRequestedNodes(t *testing.T) {
	set := fleet.DefaultSettings()
	set.Pools = []fleet.Pool{pool("od", fleet.OnDemand, 55, 10*time.Minute, 0, 10), pool("od2", fleet.OnDemand, 60, 10*time.Minute, 0, 10)}
	set.Tiers = []fleet.Tier{{Name: "critical", Rank: 1, WaitValuePerGPUHour: 500}, {Name: "best_effort", Rank: 2, Default: true}}
	for _, requested := range []bool{true, false} {
		st := &fleet.State{CapturedAt: t0, PendingGPUs: 8, Scoped: []fleet.ScopedDemand{{Pool: "od", Nodes: 1, GPUs: 8, Requested: requested}}}
		p := Make(Input{Settings: set, State: st, Now: t0})
		if got, want := len(actions(p, Launch)), map[bool]int{true: 1, false: 0}[requested]; got != want {
			t.Errorf("requested %v: %d launches, want %d\n%s", requested, got, want, describe(p))
		}
	}
}

// TestScopedRankOrder: with tiers, the higher tier's scoped line claims
// free GPUs first, whatever the lines' order or scope: gold's jobs (any
// node of 8 GPUs) take the one free node of the full cheap pool, and
// bronze's (that pool only) wait for it, rather than gold's buying a node
// of the dear pool.
func TestScopedRankOrder(t *testing.T) {
	set := fleet.DefaultSettings()
	set.Pools = []fleet.Pool{pool("od", fleet.OnDemand, 55, 10*time.Minute, 0, 1), pool("od2", fleet.OnDemand, 60, 10*time.Minute, 0, 10)}
	set.Tiers = []fleet.Tier{{Name: "gold", Rank: 1, WaitValuePerGPUHour: 500}, {Name: "bronze", Rank: 2, WaitValuePerGPUHour: 50, Default: true}}
	n := ready("n1", "od")
	n.IdleSince = t0.Add(-time.Minute)
	st := &fleet.State{CapturedAt: t0, Nodes: []fleet.Node{n}, PendingGPUs: 16,
		PendingTiers: []fleet.TierGPUs{{Tier: "bronze", GPUs: 8}, {Tier: "gold", GPUs: 8}},
		Scoped:       []fleet.ScopedDemand{{Pool: "od", GPUs: 8, Tier: "bronze"}, {MinGPUsPerNode: 8, Nodes: 1, GPUs: 8, Tier: "gold"}}}
	p := Make(Input{Settings: set, State: st, Now: t0})
	if got := actions(p, Launch); len(got) != 0 {
		t.Errorf("launches %+v, want none: gold takes the free node\n%s", got, describe(p))
	}
	if notes := notesCoded(p, ReasonUnmetDemand); len(notes) != 1 || !strings.Contains(notes[0], "pool od") {
		t.Errorf("unmet notes %+v, want bronze's, waiting for od\n%s", notes, describe(p))
	}
}
