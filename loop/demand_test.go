package loop

import (
	"context"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/fleetcast/autoscaler/fleet"
	"github.com/fleetcast/autoscaler/planner"
)

// TestDemand: the demand recorded to forecast from counts, while GPUs have
// been pending for any pool since an earlier cycle, the free GPUs of busy
// ready nodes, which no pending job fits, at most 7 (a node's GPUs less
// one) for each GPU pending; not those of empty, booting, draining or
// interrupted nodes, none at all while nothing is pending, nor in a
// pending stretch's first cycle, nor for GPUs pending for one pool or
// GPU model only (of several), nor in whole nodes. GPUs in use as another
// source reads them count as held if they are more than the jobs' with
// those free GPUs.
func TestDemand(t *testing.T) {
	cfg := testSettings()
	spare := cfg.Pools[0]
	spare.Name = "spare"
	cfg.Pools = append(cfg.Pools, spare)
	jobs := func(gpus ...int) []fleet.Job {
		var out []fleet.Job
		for i, g := range gpus {
			out = append(out, fleet.Job{ID: string(rune('a' + i)), GPUs: g, Start: t0})
		}
		return out
	}
	node := func(s fleet.NodeState, gpus ...int) fleet.Node {
		return fleet.Node{ID: "n", Pool: "od", State: s, Jobs: jobs(gpus...)}
	}
	interrupted := node(fleet.Ready, 2)
	interrupted.InterruptAt = t0.Add(time.Minute)
	busy := []fleet.Node{node(fleet.Ready, 1), node(fleet.Ready, 1), node(fleet.Ready, 1)} // 21 free GPUs
	noStretch := time.Unix(1, 0)                                                           // stands for a zero PendingSince
	for _, c := range []struct {
		name    string
		nodes   []fleet.Node
		pending int
		inUse   float64
		want    float64
		since   time.Time // PendingSince; t0 - 1m unless set
		scoped  int
		// scope, if set, is the scoped GPUs' scope (default pool od).
		scope fleet.ScopedDemand
	}{
		{"nothing pending: held GPUs only", []fleet.Node{node(fleet.Ready, 3)}, 0, 0, 3, time.Time{}, 0, fleet.ScopedDemand{}},
		{"pending: a busy node's free GPUs count", []fleet.Node{node(fleet.Ready, 3)}, 8, 0, 3 + 8 + 5, time.Time{}, 0, fleet.ScopedDemand{}},
		{"two busy nodes", []fleet.Node{node(fleet.Ready, 1, 2), node(fleet.Ready, 6)}, 4, 0, 9 + 4 + 5 + 2, time.Time{}, 0, fleet.ScopedDemand{}},
		{"a full node has none", []fleet.Node{node(fleet.Ready, 8)}, 8, 0, 16, time.Time{}, 0, fleet.ScopedDemand{}},
		{"an empty node serves a pending job", []fleet.Node{node(fleet.Ready)}, 8, 0, 8, time.Time{}, 0, fleet.ScopedDemand{}},
		{"a booting node's jobs are not fragments", []fleet.Node{node(fleet.Pending, 2)}, 8, 0, 10, time.Time{}, 0, fleet.ScopedDemand{}},
		{"nor a draining node's", []fleet.Node{node(fleet.Draining, 2)}, 8, 0, 10, time.Time{}, 0, fleet.ScopedDemand{}},
		{"nor an interrupted node's", []fleet.Node{interrupted}, 8, 0, 10, time.Time{}, 0, fleet.ScopedDemand{}},
		{"a node over-reported counts its GPUs", []fleet.Node{node(fleet.Ready, 12)}, 8, 0, 16, time.Time{}, 0, fleet.ScopedDemand{}},
		{"GPUs in use within the jobs' and the free GPUs count once", []fleet.Node{node(fleet.Ready, 3)}, 8, 6, 3 + 5 + 8, time.Time{}, 0, fleet.ScopedDemand{}},
		{"GPUs in use beyond them count as held", []fleet.Node{node(fleet.Ready, 3)}, 8, 10, 10 + 8, time.Time{}, 0, fleet.ScopedDemand{}},
		{"nor a terminating node's jobs (the planner's count)", []fleet.Node{node(fleet.Terminating, 2)}, 8, 0, 8, time.Time{}, 0, fleet.ScopedDemand{}},
		{"a node of no pool counts nothing", []fleet.Node{{ID: "x", Pool: "gone", State: fleet.Ready, Jobs: jobs(3)}}, 8, 0, 8, time.Time{}, 0, fleet.ScopedDemand{}},
		{"a pending GPU counts at most 7 free GPUs", busy, 1, 0, 3 + 1 + 7, time.Time{}, 0, fleet.ScopedDemand{}},
		{"three count 21", busy, 3, 0, 3 + 3 + 21, time.Time{}, 0, fleet.ScopedDemand{}},
		{"none in a pending stretch's first cycle", busy, 3, 0, 3 + 3, t0, 0, fleet.ScopedDemand{}},
		{"none with no stretch on record", busy, 3, 0, 3 + 3, noStretch, 0, fleet.ScopedDemand{}},
		{"none for GPUs pending for one pool only", busy, 3, 0, 3 + 3, time.Time{}, 3, fleet.ScopedDemand{}},
		{"those pending for any pool count", busy, 3, 0, 3 + 3 + 7, time.Time{}, 2, fleet.ScopedDemand{}},
		{"a scope every pool serves is any pool's", busy, 3, 0, 3 + 3 + 21, time.Time{}, 3, fleet.ScopedDemand{MinGPUsPerNode: 2}},
		{"none for whole nodes", busy, 3, 0, 3 + 3 + 7, time.Time{}, 2, fleet.ScopedDemand{Nodes: 1}},
	} {
		since := c.since
		switch {
		case since.IsZero():
			since = t0.Add(-time.Minute)
		case since.Equal(noStretch):
			since = time.Time{}
		}
		st := fleet.State{PendingGPUs: c.pending, Nodes: c.nodes, PendingSince: since}
		if c.scoped > 0 {
			sc := c.scope
			if sc == (fleet.ScopedDemand{}) {
				sc.Pool = "od"
			}
			sc.GPUs = c.scoped
			st.Scoped = []fleet.ScopedDemand{sc}
		}
		if got := Demand(cfg.Pools, &st, c.inUse, t0); got != c.want {
			t.Errorf("%s: demand %v; want %v", c.name, got, c.want)
		}
	}
}

// TestDemandIsThePlannersDemandNow: over generated fleets (silent agents,
// unreadable GPUs, interruptions, nodes of no pool, reserved pools, GPUs
// pending for one pool, a source reading GPUs in use), the demand the
// loop records is the demand the planner provisions for now, running and
// pending GPUs and the free GPUs of busy nodes it counts as held while
// jobs are pending, but for the bound on those: at most 7 for each GPU
// pending for any pool, and only once pending since an earlier cycle;
// and GPUs in use as another source reads them when that is more. A
// forecast made from the record is one of what the planner buys for.
func TestDemandIsThePlannersDemandNow(t *testing.T) {
	cfg := testSettings()
	cfg.Pools = append(cfg.Pools, fleet.Pool{Name: "res", Provider: "sim", InstanceType: "y", GPUsPerNode: 4, Capacity: fleet.Reserved,
		PricePerHour: 2, LeadTime: 5 * time.Minute, ProvisionTimeout: 15 * time.Minute, Min: 2, Max: 6})
	states := []fleet.NodeState{fleet.Pending, fleet.Ready, fleet.Ready, fleet.Ready, fleet.Draining, fleet.Terminating}
	rng := rand.New(rand.NewPCG(19, 3))
	for i := range 1000 {
		st := fleet.State{Pools: []fleet.PoolStatus{{Name: "od"}, {Name: "res"}}, PendingGPUs: rng.IntN(3) * rng.IntN(20)}
		if st.PendingGPUs > 0 {
			st.PendingSince = t0.Add(-time.Duration(rng.IntN(2)) * time.Minute)
			if s := rng.IntN(st.PendingGPUs + 1); rng.IntN(3) == 0 {
				st.Scoped = []fleet.ScopedDemand{{Pool: "od", GPUs: s}}
			}
		}
		for k := range rng.IntN(12) {
			pool, gpn := "od", 8
			switch rng.IntN(5) {
			case 0:
				pool, gpn = "res", 4
			case 1:
				pool = "gone"
			}
			n := fleet.Node{ID: string(rune('A' + k)), Pool: pool, State: states[rng.IntN(len(states))], LaunchedAt: t0.Add(-time.Hour),
				LastReport: t0.Add(-time.Duration(rng.IntN(2)) * time.Hour), Unknown: rng.IntN(4) == 0}
			for range rng.IntN(4) {
				n.Jobs = append(n.Jobs, fleet.Job{ID: "j", GPUs: 1 + rng.IntN(gpn), Start: t0.Add(-time.Hour)})
			}
			if rng.IntN(6) == 0 {
				n.InterruptAt = t0.Add(time.Duration(rng.IntN(40)-20) * time.Minute)
			}
			if rng.IntN(8) == 0 {
				n.GPUFault, n.GPUFaultSince = "nvml: unknown error", t0.Add(-time.Minute)
			}
			st.Nodes = append(st.Nodes, n)
		}
		inUse := float64(rng.IntN(2) * rng.IntN(60))
		p := planner.Make(planner.Input{Settings: *cfg, State: &st, Now: t0})
		held, anyPool := p.Demand.RunningGPUs, p.Demand.PendingGPUs
		for _, d := range st.Scoped {
			anyPool -= d.GPUs
		}
		if anyPool > 0 && st.PendingSince.Before(t0) {
			held += min(p.Capacity.FragmentGPUs, 7*anyPool)
		}
		want := max(float64(held), inUse) + float64(p.Demand.PendingGPUs)
		if got := Demand(cfg.Pools, &st, inUse, t0); got != want {
			t.Fatalf("fleet %d: recorded demand %v; want %v from the planner's demand now (%+v, fragments %d, in use %v)\n%+v", i, got, want, p.Demand, p.Capacity.FragmentGPUs, inUse, st.Nodes)
		}
	}
}

// TestRecordedDemandCountsFragments: a cycle with jobs pending since the
// cycle before records, in the books and in the history forecast from, the
// free GPUs of busy nodes with the demand; the first cycle of the stretch
// does not (the loop's own reckoning of the stretch, whatever the
// observation says), nor the free GPUs of a node under a spot notice.
func TestRecordedDemandCountsFragments(t *testing.T) {
	l, f := newScripted(t, true)
	interrupted := fleet.Node{ID: "b", Pool: "od", State: fleet.Ready, LastReport: t0, InterruptAt: t0.Add(2 * time.Minute),
		Jobs: []fleet.Job{{ID: "k", GPUs: 1, Start: t0}}}
	f.st.Nodes = []fleet.Node{{ID: "a", Pool: "od", State: fleet.Ready, LastReport: t0, Jobs: []fleet.Job{{ID: "j", GPUs: 2, Start: t0}}}, interrupted}
	f.st.PendingGPUs, f.st.PendingSince = 8, t0.Add(-time.Hour)
	for _, now := range []time.Time{t0, t0.Add(time.Minute)} {
		if _, err := l.Cycle(context.Background(), f, now); err != nil {
			t.Fatal(err)
		}
	}
	got, _ := f.books.Demand(DemandSeries, time.Time{})
	if len(got) != 2 || got[0].Value != 3+8 || got[1].Value != 3+8+6 {
		t.Fatalf("demand in the books: %v; want 11 (3 held, 8 pending: the stretch's first cycle), then 17 with node a's 6 free GPUs, which no pending job fits", got)
	}
	if l.hist.curMax != 17 {
		t.Fatalf("history's step in progress peaks at %v; want 17", l.hist.curMax)
	}
}
