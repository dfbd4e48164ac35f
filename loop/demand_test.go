package loop

import (
	"context"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/fleetcast/autoscaler/fleet"
	"github.com/fleetcast/autoscaler/planner"
)

// TestDemand: the demand recorded to forecast from counts, while GPUs are
// pending, the free GPUs of busy ready nodes, which no pending job fits;
// not those of empty, booting, draining or interrupted nodes, and none at
// all while nothing is pending.
func TestDemand(t *testing.T) {
	cfg := testConfig()
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
	for _, c := range []struct {
		name    string
		nodes   []fleet.Node
		pending int
		inUse   float64
		want    float64
	}{
		{"nothing pending: held GPUs only", []fleet.Node{node(fleet.Ready, 3)}, 0, 0, 3},
		{"pending: a busy node's free GPUs count", []fleet.Node{node(fleet.Ready, 3)}, 8, 0, 3 + 8 + 5},
		{"two busy nodes", []fleet.Node{node(fleet.Ready, 1, 2), node(fleet.Ready, 6)}, 4, 0, 9 + 4 + 5 + 2},
		{"a full node has none", []fleet.Node{node(fleet.Ready, 8)}, 8, 0, 16},
		{"an empty node serves a pending job", []fleet.Node{node(fleet.Ready)}, 8, 0, 8},
		{"a booting node's jobs are not fragments", []fleet.Node{node(fleet.Pending, 2)}, 8, 0, 10},
		{"nor a draining node's", []fleet.Node{node(fleet.Draining, 2)}, 8, 0, 10},
		{"nor an interrupted node's", []fleet.Node{interrupted}, 8, 0, 10},
		{"a node over-reported counts its GPUs", []fleet.Node{node(fleet.Ready, 12)}, 8, 0, 16},
		{"GPUs in use beyond the jobs' raise held, not fragments", []fleet.Node{node(fleet.Ready, 3)}, 8, 6, 6 + 8 + 5},
		{"nor a terminating node's jobs (the planner's count)", []fleet.Node{node(fleet.Terminating, 2)}, 8, 0, 8},
		{"a node of no pool counts nothing", []fleet.Node{{ID: "x", Pool: "gone", State: fleet.Ready, Jobs: jobs(3)}}, 8, 0, 8},
	} {
		st := fleet.State{PendingGPUs: c.pending, Nodes: c.nodes}
		if got := Demand(cfg.Pools, &st, c.inUse, t0); got != c.want {
			t.Errorf("%s: demand %v; want %v", c.name, got, c.want)
		}
	}
}

// TestDemandIsThePlannersDemandNow: over generated fleets, the demand the
// loop records is the demand the planner provisions for now: running and
// pending GPUs, and while jobs are pending the free GPUs of busy nodes it
// counts as held. A forecast made from the record is one of what the
// planner buys for.
func TestDemandIsThePlannersDemandNow(t *testing.T) {
	cfg := testConfig()
	cfg.Pools = append(cfg.Pools, fleet.Pool{Name: "res", Provider: "sim", InstanceType: "y", GPUsPerNode: 4, Capacity: fleet.Reserved,
		PricePerHour: 2, LeadTime: 5 * time.Minute, ProvisionTimeout: 15 * time.Minute, Min: 2, Max: 6})
	states := []fleet.NodeState{fleet.Pending, fleet.Ready, fleet.Ready, fleet.Ready, fleet.Draining, fleet.Terminating}
	rng := rand.New(rand.NewPCG(19, 3))
	for i := range 500 {
		st := fleet.State{Pools: []fleet.PoolStatus{{Name: "od"}, {Name: "res"}}, PendingGPUs: rng.IntN(3) * rng.IntN(20)}
		for k := range rng.IntN(12) {
			pool, gpn := "od", 8
			switch rng.IntN(5) {
			case 0:
				pool, gpn = "res", 4
			case 1:
				pool = "gone"
			}
			n := fleet.Node{ID: string(rune('A' + k)), Pool: pool, State: states[rng.IntN(len(states))], LaunchedAt: t0.Add(-time.Hour),
				LastReport: t0, Unknown: rng.IntN(4) == 0}
			for range rng.IntN(4) {
				n.Jobs = append(n.Jobs, fleet.Job{ID: "j", GPUs: 1 + rng.IntN(gpn), Start: t0.Add(-time.Hour)})
			}
			if rng.IntN(6) == 0 {
				n.InterruptAt = t0.Add(time.Duration(rng.IntN(40)-20) * time.Minute)
			}
			st.Nodes = append(st.Nodes, n)
		}
		p := planner.Make(planner.Input{Settings: cfg.Settings(), State: &st, Now: t0})
		want := p.Demand.Total()
		if p.Demand.PendingGPUs > 0 {
			want += p.Capacity.FragmentGPUs
		}
		if got := Demand(cfg.Pools, &st, 0, t0); got != float64(want) {
			t.Fatalf("fleet %d: recorded demand %v; the planner's demand now is %d (%+v, fragments %d)\n%+v", i, got, want, p.Demand, p.Capacity.FragmentGPUs, st.Nodes)
		}
	}
}

// TestRecordedDemandCountsFragments: a cycle with jobs pending records, in
// the books and in the history forecast from, the free GPUs of busy nodes
// with the demand.
func TestRecordedDemandCountsFragments(t *testing.T) {
	l, f := newScripted(t, true)
	f.st.Nodes = []fleet.Node{{ID: "a", Pool: "od", State: fleet.Ready, LastReport: t0, Jobs: []fleet.Job{{ID: "j", GPUs: 2, Start: t0}}}}
	f.st.PendingGPUs = 8
	if _, err := l.Cycle(context.Background(), f, t0); err != nil {
		t.Fatal(err)
	}
	got, _ := f.books.Demand(DemandSeries, time.Time{})
	if len(got) != 1 || got[0].Value != 2+8+6 {
		t.Fatalf("demand in the books: %v; want 16: 2 held, 8 pending and the busy node's 6 free GPUs, which no pending job fits", got)
	}
	if l.hist.curMax != 16 {
		t.Fatalf("history's step in progress peaks at %v; want 16", l.hist.curMax)
	}
}
