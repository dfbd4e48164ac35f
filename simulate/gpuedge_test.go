package simulate

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/fleetcast/autoscaler/fleet"
	"github.com/fleetcast/autoscaler/trace"
)

// TestTypedWiderThanItsNodesRefused: a job of GPU type B only, 4 GPUs
// wide, where B's nodes are of 2 and A's of 4, could never run: Run
// refuses it before the run, as it does a job of types no pool has.
func TestTypedWiderThanItsNodesRefused(t *testing.T) {
	for _, pol := range []string{"static", "reactive"} {
		_, err := Run(mixedFleet(), jobsTrace(trace.Job{GPUs: 4, Duration: time.Hour, GPUTypes: "B"}), Options{Policies: []string{pol}})
		if err == nil || strings.Contains(err.Error(), "4,000 days") {
			t.Errorf("%s: err = %v; want a refusal before the run", pol, err)
		}
	}
}

// TestStaticBuysATypeOnlyOnSpot: where a type comes only in a spot pool,
// the static fleet buys it there (it buys on demand first otherwise).
func TestStaticBuysATypeOnlyOnSpot(t *testing.T) {
	set := fleet.DefaultSettings()
	a, b := teamPool("a", fleet.OnDemand, 4, 16, 0, 4), teamPool("b", fleet.Spot, 4, 6, 0, 4)
	a.GPUModel, b.GPUModel = "A", "B"
	set.Pools = []fleet.Pool{a, b}
	_, err := Run(&set, jobsTrace(trace.Job{GPUs: 1, Duration: time.Hour, GPUTypes: "B"}), Options{Policies: []string{"static"}})
	if err != nil {
		t.Error(err)
	}
}

// TestReactiveCountsABootingNodeOnce: two 4-GPU jobs queued at once, one
// of any type, one of type A only: reactive buys two 4-GPU nodes in one
// go, not one that both count on.
func TestReactiveCountsABootingNodeOnce(t *testing.T) {
	set := mixedFleet()
	set.Pools = set.Pools[1:] // a (4 GPUs, A) and b (2 GPUs, B)
	tr := jobsTrace(trace.Job{GPUs: 4, Duration: 5 * time.Hour}, trace.Job{GPUs: 4, Duration: 5 * time.Hour, GPUTypes: "A"})
	starts := map[string]int64{}
	opt := Options{Policies: []string{"reactive"}}
	opt.started = func(e *engine, id int32) { starts[e.jobs[id].id] = e.now }
	if _, err := Run(set, tr, opt); err != nil {
		t.Fatal(err)
	}
	t.Logf("starts (s): %v", starts)
	for id, s := range starts {
		if s > 15*60 {
			t.Errorf("job %s started at %d s: a second lead time, its node was not bought with the first", id, s)
		}
	}
}

// TestPreemptOnlyForTheTypesAJobAccepts: a critical job of type A only
// waits for the A node; the best-effort job on the B node, where it could
// not run, is not preempted for it.
func TestPreemptOnlyForTheTypesAJobAccepts(t *testing.T) {
	set := fleet.DefaultSettings()
	a, b := teamPool("a", fleet.OnDemand, 8, 16, 0, 1), teamPool("b", fleet.OnDemand, 8, 16, 0, 1)
	a.GPUModel, b.GPUModel = "A", "B"
	set.Pools = []fleet.Pool{a, b}
	set.Tiers = threeTiers()
	tr := jobsTrace(
		trace.Job{GPUs: 8, Duration: 3 * time.Hour, Tier: "critical", GPUTypes: "A"},
		trace.Job{GPUs: 8, Duration: 3 * time.Hour, Tier: "best_effort", GPUTypes: "B"},
		trace.Job{Submit: 30 * time.Minute, GPUs: 8, Duration: time.Hour, Tier: "critical", GPUTypes: "A"},
	)
	rep, err := Run(&set, tr, Options{Policies: []string{"static"}, UnresponsiveJobs: -1})
	if err != nil {
		t.Fatal(err)
	}
	r := byPolicy(t, rep)["static"]
	if r.Preempted != 0 {
		t.Errorf("preempted %d best-effort runs on a node of a type the critical job does not accept", r.Preempted)
	}
}

// TestPreemptNoShareForAWholeGPU: one GPU, shared by a critical share and
// a best-effort share; a critical whole-GPU job waits. Evicting the
// best-effort share would free no GPU (the critical share still holds
// it): it is not preempted.
func TestPreemptNoShareForAWholeGPU(t *testing.T) {
	set := oneReservedNode(1)
	set.Tiers = threeTiers()
	tr := jobsTrace(
		trace.Job{GPUs: 1, Milli: 500, Duration: 3 * time.Hour, Tier: "critical"},
		trace.Job{GPUs: 1, Milli: 300, Duration: 3 * time.Hour, Tier: "best_effort"},
		trace.Job{Submit: 30 * time.Minute, GPUs: 1, Duration: time.Hour, Tier: "critical"},
	)
	rep, err := Run(set, tr, Options{Policies: []string{"static"}, UnresponsiveJobs: -1})
	if err != nil {
		t.Fatal(err)
	}
	if r := byPolicy(t, rep)["static"]; r.Preempted != 0 {
		t.Errorf("preempted %d best-effort share runs, none of which could free the GPU", r.Preempted)
	}
}

// TestPreemptSharesThatFreeAGPU: one GPU, shared by two best-effort
// shares; a critical whole-GPU job waits. Both shares yield, so both are
// preempted and the critical job starts once their checkpoints are durable.
func TestPreemptSharesThatFreeAGPU(t *testing.T) {
	set := oneReservedNode(1)
	set.Tiers = threeTiers()
	tr := jobsTrace(
		trace.Job{GPUs: 1, Milli: 500, Duration: 3 * time.Hour, Tier: "best_effort"},
		trace.Job{GPUs: 1, Milli: 300, Duration: 3 * time.Hour, Tier: "best_effort"},
		trace.Job{Submit: 30 * time.Minute, GPUs: 1, Duration: time.Hour, Tier: "critical"},
	)
	var started []string
	opt := Options{Policies: []string{"static"}, UnresponsiveJobs: -1, CheckpointDuration: 2 * time.Minute}
	opt.started = func(e *engine, id int32) { started = append(started, fmt.Sprintf("%s@%d", e.jobs[id].id, e.now)) }
	rep, err := Run(set, tr, opt)
	if err != nil {
		t.Fatal(err)
	}
	if r := byPolicy(t, rep)["static"]; r.Preempted != 2 || started[2] != "2@1920" {
		t.Errorf("preempted %d, starts %v; want 2, the critical job at 1920 s (30 minutes and a 2-minute checkpoint)", r.Preempted, started)
	}
}

// TestReservedShareHeldOncePerGPU: team a (half of an 8-GPU reservation:
// 4 GPUs) holds one GPU, as four shares of it or as one whole-GPU job; c
// borrows the other 7. When a queues a 2-GPU job, its unused share (3)
// holds it: c's job is reclaimed either way (a team's shares of one GPU
// hold it once).
func TestReservedShareHeldOncePerGPU(t *testing.T) {
	for _, tc := range []struct {
		name string
		a    []trace.Job
	}{
		{"one whole GPU", []trace.Job{{GPUs: 1, Duration: 10 * time.Hour, Team: "a"}}},
		{"four shares of one GPU", []trace.Job{
			{GPUs: 1, Milli: 250, Duration: 10 * time.Hour, Team: "a"}, {GPUs: 1, Milli: 250, Duration: 10 * time.Hour, Team: "a"},
			{GPUs: 1, Milli: 250, Duration: 10 * time.Hour, Team: "a"}, {GPUs: 1, Milli: 250, Duration: 10 * time.Hour, Team: "a"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			jobs := append(tc.a, trace.Job{GPUs: 7, Duration: 10 * time.Hour, Team: "c"},
				trace.Job{Submit: time.Hour, GPUs: 2, Duration: time.Hour, Team: "a"})
			var onRes []int
			opt := Options{Policies: []string{"reactive"}, CheckpointDuration: 2 * time.Minute}
			opt.started = func(e *engine, id int32) { onRes = append(onRes, e.shares.onRes[e.jobs[id].group[byTeam]]) }
			rep, err := Run(sharedFleet(1), jobsTrace(jobs...), opt)
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("team's reserved GPUs held after each start: %v", onRes)
			if r := rep.Policies[0]; r.Reclaimed != 1 {
				t.Errorf("reclaimed %d, want 1: a holds 1 GPU of its 4-GPU share", r.Reclaimed)
			}
		})
	}
}

// TestReclaimOnlyForTheTypesAJobAccepts: two reserved nodes, of GPU types
// A and B; team a has half (8 GPUs) and holds 4 on A. c borrows A's other
// 4, d all of B. a queues a 4-GPU job of type B: reclaim asks d (on B) to
// leave, not c, on A, where the job cannot run.
func TestReclaimOnlyForTheTypesAJobAccepts(t *testing.T) {
	set := fleet.DefaultSettings()
	ra, rb, od := teamPool("resA", fleet.Reserved, 8, 20, 1, 1), teamPool("resB", fleet.Reserved, 8, 20, 1, 1), teamPool("od", fleet.OnDemand, 8, 55, 0, 30)
	ra.GPUModel, rb.GPUModel, od.GPUModel = "A", "B", "A"
	set.Pools = []fleet.Pool{ra, rb, od}
	set.Teams = []fleet.Team{{Name: "a", ReservedShare: 0.5}}
	tr := jobsTrace(
		trace.Job{GPUs: 4, Duration: 10 * time.Hour, Team: "a", GPUTypes: "A"},
		trace.Job{GPUs: 4, Duration: 10 * time.Hour, Team: "c", GPUTypes: "A"},
		trace.Job{GPUs: 8, Duration: 10 * time.Hour, Team: "d", GPUTypes: "B"},
		trace.Job{Submit: time.Hour, GPUs: 4, Duration: time.Hour, Team: "a", GPUTypes: "B"},
	)
	var evicted []string
	opt := Options{Policies: []string{"reactive"}, CheckpointDuration: 2 * time.Minute}
	opt.stopped = func(e *engine, id int32) {
		if j := &e.jobs[id]; e.now < 5*3600 {
			evicted = append(evicted, j.id)
		}
	}
	rep, err := Run(&set, tr, opt)
	if err != nil {
		t.Fatal(err)
	}
	r := rep.Policies[0]
	t.Logf("reclaimed %d; runs ended before 5h: %v; wait p99 %v s", r.Reclaimed, evicted, r.WaitP99)
	if len(evicted) == 0 || evicted[0] != "2" {
		t.Errorf("runs ended early %v; want d's (2), on the B node a's job can use", evicted)
	}
}

// TestTypedLaunchNotSpareForUntyped: one reactive tick with a 4-GPU job of
// any type and a 4-GPU job of type A queued, pools of two widths (a: 4
// GPUs, A; b: 2 GPUs, B): the A node launched for the typed job is not
// counted as spare for the other, which gets a node of its own.
func TestTypedLaunchNotSpareForUntyped(t *testing.T) {
	set := mixedFleet()
	set.Pools = set.Pools[1:] // a (4 GPUs, A), b (2 GPUs, B)
	tr := jobsTrace(trace.Job{GPUs: 4, Duration: 5 * time.Hour}, trace.Job{GPUs: 4, Duration: 5 * time.Hour, GPUTypes: "A"})
	e := queuedEngine(t, set, tr)
	r := &reactive{}
	r.start(e)
	if err := r.tick(e); err != nil {
		t.Fatal(err)
	}
	if e.pools[0].count != 2 {
		t.Errorf("one tick with two 4-GPU jobs queued (one typed A): %d a-nodes and %d b-nodes launched, want 2 a-nodes", e.pools[0].count, e.pools[1].count)
	}
}
