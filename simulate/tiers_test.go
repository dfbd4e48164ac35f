package simulate

import (
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/fleetcast/autoscaler/fleet"
	"github.com/fleetcast/autoscaler/loop"
	"github.com/fleetcast/autoscaler/planner"
	"github.com/fleetcast/autoscaler/trace"
)

// threeTiers are the examples' tiers: best_effort runs on the capacity
// types given (any when none).
func threeTiers(beOn ...fleet.CapacityType) []fleet.Tier {
	return []fleet.Tier{
		{Name: "critical", Rank: 1, WaitValuePerGPUHour: 500},
		{Name: "standard", Rank: 2, WaitValuePerGPUHour: 50, Default: true},
		{Name: "best_effort", Rank: 3, CapacityTypes: beOn},
	}
}

// tierWaits are a result's waited GPU-hours by tier.
func tierWaits(t *testing.T, r Result) map[string]float64 {
	t.Helper()
	m := map[string]float64{}
	for _, x := range r.Tiers {
		if x.Team != "" {
			t.Errorf("tier row %+v names a team", x)
		}
		m[x.Tier] = x.WaitGPUHours
	}
	return m
}

// TestTiersOrderTheQueue: a higher tier's queued job starts before a lower
// tier's that came first; without tiers, first come first served.
func TestTiersOrderTheQueue(t *testing.T) {
	tr := jobsTrace(
		trace.Job{GPUs: 8, Duration: time.Hour, Tier: "standard"},
		trace.Job{Submit: time.Minute, GPUs: 8, Duration: time.Hour, Tier: "best_effort"},
		trace.Job{Submit: 2 * time.Minute, GPUs: 8, Duration: time.Hour, Tier: "critical"},
	)
	set := onePool()
	set.Pools[0].Max = 1
	set.Tiers = threeTiers()
	set.Tiers[2].WaitValuePerGPUHour = 1 // not preempted: this test is of the order alone
	rep, err := Run(set, tr, Options{Policies: []string{"static"}, UnresponsiveJobs: -1})
	if err != nil {
		t.Fatal(err)
	}
	// One node: the standard job runs first, an hour; then the critical
	// job (58 minutes queued), then the best-effort one (119 minutes).
	got := tierWaits(t, byPolicy(t, rep)["static"])
	want := map[string]float64{"critical": 8 * 58.0 / 60, "standard": 0, "best_effort": 8 * 119.0 / 60}
	for k, w := range want {
		if !near(got[k], w) {
			t.Errorf("%s waited %v GPU-h, want %v", k, got[k], w)
		}
	}
	set.Tiers = nil
	rep, err = Run(set, tr, Options{Policies: []string{"static"}, UnresponsiveJobs: -1})
	if err != nil {
		t.Fatal(err)
	}
	if r := byPolicy(t, rep)["static"]; r.Tiers != nil || !near(r.WaitGPUHours, 8*(59.0+118.0)/60) {
		t.Errorf("without tiers: tiers %+v, %v GPU-h waited; want none, and first come first served (%v)", r.Tiers, r.WaitGPUHours, 8*(59.0+118.0)/60)
	}
}

// TestTiersPreemptBestEffort: a critical job that does not fit makes a
// best-effort job checkpoint and leave (2 minutes), and runs; the
// best-effort job resumes when it ends, having lost nothing.
func TestTiersPreemptBestEffort(t *testing.T) {
	tr := jobsTrace(
		trace.Job{GPUs: 8, Duration: 2 * time.Hour, Tier: "best_effort"},
		trace.Job{Submit: 30 * time.Minute, GPUs: 8, Duration: time.Hour, Tier: "critical"},
	)
	set := onePool()
	set.Pools[0].Max = 1
	set.Tiers = threeTiers()
	rep, err := Run(set, tr, Options{Policies: []string{"static"}, UnresponsiveJobs: -1})
	if err != nil {
		t.Fatal(err)
	}
	r := byPolicy(t, rep)["static"]
	got := tierWaits(t, r)
	if r.Preempted != 1 || r.MovedJobs != 1 || r.LostGPUHours != 0 {
		t.Errorf("preempted %d, moved %d, lost %v GPU-h; want 1, 1 and none", r.Preempted, r.MovedJobs, r.LostGPUHours)
	}
	// The critical job waits for the checkpoint (2 minutes); the
	// best-effort job queues again from then until the critical job ends.
	if !near(got["critical"], 8*2.0/60) || !near(got["best_effort"], 8*60.0/60) {
		t.Errorf("waits %v; want critical %v, best_effort 8 GPU-h", got, 8*2.0/60)
	}
	if !near(r.UsedGPUHours, 8*3) {
		t.Errorf("used %v GPU-h; want 24: the best-effort job's work kept", r.UsedGPUHours)
	}
}

// TestTiersRunOnTheirCapacity: a tier with capacity types runs only on
// nodes of those types: best-effort on the reservation, never on the
// on-demand node beside it, which the standard job takes.
func TestTiersRunOnTheirCapacity(t *testing.T) {
	tr := jobsTrace(
		trace.Job{GPUs: 8, Duration: time.Hour, Tier: "critical"},
		trace.Job{Submit: time.Minute, GPUs: 8, Duration: time.Hour, Tier: "best_effort"},
		trace.Job{Submit: 2 * time.Minute, GPUs: 8, Duration: time.Hour, Tier: "standard"},
	)
	set := onePool()
	set.Pools[0].Max = 1
	res := set.Pools[0]
	res.Name, res.Capacity, res.Min, res.Max, res.PricePerHour = "res", fleet.Reserved, 1, 1, 4
	set.Pools = append([]fleet.Pool{res}, set.Pools...)
	set.Tiers = threeTiers(fleet.Reserved, fleet.Spot)
	set.Tiers[2].WaitValuePerGPUHour = 1 // not preempted
	rep, err := Run(set, tr, Options{Policies: []string{"static"}, UnresponsiveJobs: -1})
	if err != nil {
		t.Fatal(err)
	}
	// critical takes the reservation at 0; best_effort waits for it (59
	// minutes) though the on-demand node is free until standard takes
	// it at 2 minutes... which it does at once.
	got := tierWaits(t, byPolicy(t, rep)["static"])
	if !near(got["best_effort"], 8*59.0/60) || got["standard"] != 0 || got["critical"] != 0 {
		t.Errorf("waits %v; want best_effort %v, the others none", got, 8*59.0/60)
	}
}

// TestLabelTiers: jobs without a tier are labelled from the seed in about
// the shares asked, the same for every run; labels must name the config's
// tiers, and add up to 1.
func TestLabelTiers(t *testing.T) {
	jobs := make([]trace.Job, 20000)
	for i := range jobs {
		jobs[i] = trace.Job{GPUs: 1, Duration: time.Hour}
	}
	jobs[0].Tier = "critical"
	tr := jobsTrace(jobs...)
	tiers := threeTiers()
	a := newTierTable(tr, tiers, DefaultLabelTiers, 1)
	b := newTierTable(tr, tiers, DefaultLabelTiers, 1)
	if !slices.Equal(a.of, b.of) || !slices.Equal(a.names, []string{"critical", "standard", "best_effort"}) {
		t.Fatalf("labels differ between runs of a seed, or names %v", a.names)
	}
	counts := make([]int, 3)
	for _, k := range a.of[1:] {
		counts[k]++
	}
	for k, s := range DefaultLabelTiers {
		if share := float64(counts[k]) / float64(len(jobs)-1); share < s.Share-0.01 || share > s.Share+0.01 {
			t.Errorf("%s: share %.3f, want %.2f", s.Tier, share, s.Share)
		}
	}
	if a.of[0] != 0 {
		t.Errorf("a job's own tier relabelled")
	}
	for _, bad := range [][]TierShare{
		{{"critical", 0.5}, {"standard", 0.4}},
		{{"critical", 0.5}, {"gold", 0.5}},
		{{"critical", 0.5}, {"critical", 0.5}},
		{{"critical", 0}, {"standard", 1}},
	} {
		if err := checkLabelTiers(bad, tiers); err == nil {
			t.Errorf("label tiers %v accepted", bad)
		}
	}
	if err := checkLabelTiers(DefaultLabelTiers, nil); err == nil {
		t.Error("label tiers without tiers accepted")
	}
	if got, err := ParseLabelTiers("critical=0.2,standard=0.5,best_effort=0.3"); err != nil || !slices.Equal(got, DefaultLabelTiers) {
		t.Errorf("ParseLabelTiers: %v, %v", got, err)
	}
	for _, bad := range []string{"critical", "critical=x", ""} {
		if _, err := ParseLabelTiers(bad); err == nil {
			t.Errorf("ParseLabelTiers(%q) accepted", bad)
		}
	}
}

// TestBestEffortBuysNoOnDemand: over runs of generated traces, no plan of
// the predictive policy launches more on-demand nodes than the same plan
// re-made without the best-effort tier's demand (its pending GPUs and its
// running jobs): best-effort demand never causes an on-demand launch.
func TestBestEffortBuysNoOnDemand(t *testing.T) {
	for seed := uint64(1); seed <= 3; seed++ {
		rng := rand.New(rand.NewPCG(seed, 7))
		var jobs []trace.Job
		for i := range 400 {
			tier := []string{"critical", "standard", "standard", "best_effort", "best_effort"}[rng.IntN(5)]
			jobs = append(jobs, trace.Job{Submit: time.Duration(i)*3*time.Minute + time.Duration(rng.IntN(180))*time.Second,
				GPUs: []int{1, 2, 4, 8, 16}[rng.IntN(5)], Duration: time.Duration(rng.IntN(300)+10) * time.Minute, Tier: tier})
		}
		slices.SortStableFunc(jobs, func(a, b trace.Job) int { return int(a.Submit - b.Submit) })
		tr := jobsTrace(jobs...)
		set := fleet.DefaultSettings()
		pool := func(name string, c fleet.CapacityType, price float64, lo, hi int) fleet.Pool {
			return fleet.Pool{Name: name, Provider: "sim", InstanceType: "gpu8", GPUsPerNode: 8, Capacity: c,
				PricePerHour: price, LeadTime: 10 * time.Minute, ProvisionTimeout: 30 * time.Minute, Min: lo, Max: hi}
		}
		set.Pools = []fleet.Pool{pool("res", fleet.Reserved, 20, 2, 2), pool("od", fleet.OnDemand, 55, 0, 30), pool("spot", fleet.Spot, 25, 0, 3)}
		set.Tiers = threeTiers(fleet.Reserved, fleet.Spot)
		// Seeds 2 and 3: on-demand nodes of another width, so that wide
		// jobs are pending in their shape (fleet.State.Scoped), a line
		// per tier; seed 3's best-effort jobs run anywhere, so that only
		// their tier's worth keeps them from buying.
		switch seed {
		case 2:
			set.Pools[1].GPUsPerNode, set.Pools[1].PricePerHour = 4, 27.5
		case 3:
			set.Pools[1].GPUsPerNode, set.Pools[1].PricePerHour = 16, 110
			set.Tiers = threeTiers()
		}
		cycles, checked := 0, 0
		opt := Options{Policies: []string{"predictive"}, Seed: int64(seed), Cycles: func(_ string, r loop.CycleResult) {
			cycles++
			with := onDemandLaunches(r.Plan)
			if with == 0 {
				return
			}
			checked++
			st := withoutTier(r.State, "best_effort")
			again := planner.Make(planner.Input{Settings: set, State: st, Forecast: r.Forecast, TierForecasts: r.TierForecasts,
				Now: r.State.CapturedAt, Unannounced: true})
			if without := onDemandLaunches(again); with > without {
				t.Errorf("seed %d, %s: %d on-demand nodes launched, %d without best-effort demand", seed, r.State.CapturedAt.Format(time.DateTime), with, without)
			}
		}}
		if _, err := Run(&set, tr, opt); err != nil {
			t.Fatal(err)
		}
		if checked == 0 {
			t.Fatalf("seed %d: no cycle of %d launched on demand: the property was not exercised", seed, cycles)
		}
	}
}

// onDemandLaunches counts a plan's on-demand nodes launched (pool "od").
func onDemandLaunches(p planner.Plan) int {
	n := 0
	for _, a := range p.Actions {
		if a.Kind == planner.Launch && a.Pool == "od" {
			n += a.Count
		}
	}
	return n
}

// withoutTier is a copy of st without tier's demand: its running jobs,
// its pending GPUs and its scoped lines.
func withoutTier(st *fleet.State, tier string) *fleet.State {
	out := *st
	out.Nodes = make([]fleet.Node, len(st.Nodes))
	for i, n := range st.Nodes {
		n.Jobs = slices.DeleteFunc(slices.Clone(n.Jobs), func(j fleet.Job) bool { return j.Tier == tier })
		out.Nodes[i] = n
	}
	out.Scoped = slices.DeleteFunc(slices.Clone(st.Scoped), func(d fleet.ScopedDemand) bool { return d.Tier == tier })
	out.PendingTiers = nil
	for _, l := range st.PendingTiers {
		if l.Tier == tier {
			out.PendingGPUs -= l.GPUs
		} else {
			out.PendingTiers = append(out.PendingTiers, l)
		}
	}
	return &out
}

// TestTiersThatCannotRun: a tier whose jobs run on capacity no pool has is
// refused before the run, which would never end.
func TestTiersThatCannotRun(t *testing.T) {
	set := onePool()
	set.Tiers = threeTiers(fleet.Reserved, fleet.Spot)
	tr := jobsTrace(trace.Job{GPUs: 1, Duration: time.Hour, Tier: "best_effort"})
	_, err := Run(set, tr, Options{Policies: []string{"reactive"}})
	if err == nil || !strings.Contains(err.Error(), `tier "best_effort" runs on reserved or spot capacity, which no pool of the config is: its 1 job(s) could never run`) {
		t.Errorf("got %v", err)
	}
	// Untiered, it may run on demand, but its waiting is worth nothing:
	// nothing is bought for it, and the run ends with it abandoned, its
	// hour's wait counted.
	rep, err := Run(set, tr, Options{Policies: []string{"reactive"}, Untiered: true})
	if err != nil {
		t.Fatal(err)
	}
	if r := rep.Policies[0]; r.Abandoned != 1 || r.AbandonedGPUHours != 1 || r.UsedGPUHours != 0 {
		t.Errorf("abandoned %d (%v GPU-h), used %v; want the one job, 1 GPU-h, none used", r.Abandoned, r.AbandonedGPUHours, r.UsedGPUHours)
	}
}

// TestPendingShapes: where nodes differ in width, queued jobs wider than
// the narrowest node are reported in their shape (nodes at least that
// wide; whole widest nodes for one wider than any), a line per tier (a
// job of no tier the default's); where every node is as wide, none is.
func TestPendingShapes(t *testing.T) {
	small, big := onePool().Pools[0], onePool().Pools[0]
	small.Name, small.GPUsPerNode = "small", 2
	tr := jobsTrace(
		trace.Job{GPUs: 1, Duration: time.Hour}, trace.Job{GPUs: 4, Duration: time.Hour}, trace.Job{GPUs: 4, Duration: time.Hour},
		trace.Job{GPUs: 8, Duration: time.Hour, Tier: "best_effort"}, trace.Job{GPUs: 16, Duration: time.Hour, Tier: "critical"},
	)
	set := onePool()
	set.Pools = []fleet.Pool{small, big}
	set.Tiers = threeTiers()
	e := queuedEngine(t, set, tr)
	got := e.pendingShapes(nil)
	want := []fleet.ScopedDemand{{MinGPUsPerNode: 4, GPUs: 8, Tier: "standard"}, {MinGPUsPerNode: 8, GPUs: 8, Tier: "best_effort"},
		{MinGPUsPerNode: 8, Nodes: 2, GPUs: 16, Tier: "critical"}}
	if !slices.Equal(got, want) {
		t.Errorf("shapes %+v, want %+v", got, want)
	}
	if e.queuedBought() != 1+8+16 {
		t.Errorf("bought for %d queued GPUs, want all but the best-effort job's", e.queuedBought())
	}
	set.Pools = []fleet.Pool{big}
	e = queuedEngine(t, set, tr)
	if got := e.pendingShapes(nil); len(got) != 0 {
		t.Errorf("shapes %v where every node is as wide", got)
	}
}

// FuzzParseLabelTiers: any text is read or refused, never a panic, and
// what is read has a tier and a number for each part.
func FuzzParseLabelTiers(f *testing.F) {
	for _, s := range []string{"critical=0.2,standard=0.5,best_effort=0.3", "a=1", "=", ",", "a=1e400", "a=NaN"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		got, err := ParseLabelTiers(s)
		if err == nil && len(got) != strings.Count(s, ",")+1 {
			t.Errorf("%q: %d shares for %d parts", s, len(got), strings.Count(s, ",")+1)
		}
	})
}
