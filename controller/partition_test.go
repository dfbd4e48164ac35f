package controller

import (
	"context"
	"testing"
	"time"

	"github.com/fleetcast/autoscaler/planner"
)

// TestPartitionHoldsBootedLaunches: a network partition cuts every agent
// off (scale-in halts) while launches of the controller's boot. Their
// cloud says they run, so a scheduler may already have put jobs on them:
// past their provisioning deadline they are held, not terminated, and
// their pool is not backed off (before, they were terminated without a
// drain and the pool backed off as if out of capacity). After the
// partition, a launch whose agent still has not reported is terminated
// once a provisioning deadline has passed since the halt ended.
func TestPartitionHoldsBootedLaunches(t *testing.T) {
	p := gpuPool("g5", 8, 20, 5*time.Minute) // provisioning deadline 15m
	l := newLoop(t, false, p)
	ctx := context.Background()
	if err := l.c.act.Launch(ctx, "g5", 4); err != nil {
		t.Fatal(err)
	}
	g, _ := l.cloud.Describe(ctx, p)
	old := map[string]bool{}
	for _, in := range g.Instances {
		l.busy[in.ID], old[in.ID] = true, true
	}
	l.now = l.now.Add(5 * time.Minute)
	l.cycle(t)
	// The partition: no agent gets through, the four busy nodes' nor any
	// launched from now on.
	cut := func() {
		g, _ := l.cloud.Describe(ctx, p)
		for _, in := range g.Instances {
			l.silent[in.ID] = true
		}
	}
	cut()
	for plan := l.cycle(t); plan.ScaleInHalt == ""; plan = l.cycle(t) {
		if l.now.Sub(t0) > time.Hour {
			t.Fatal("scale-in never halted with every agent cut off")
		}
	}
	l.pending.Set(l.now, DemandPush{Source: "slurm", Pending: []PendingDemand{{Pool: "g5", GPUs: 16}}})
	plan := l.cycle(t)
	if plan.ScaleInHalt == "" || plan.Counts()[planner.Launch] < 2 {
		t.Fatalf("halt %q, launches %v: want scale-in halted and nodes launched for the 16 pending GPUs", plan.ScaleInHalt, plan.Counts())
	}
	g, _ = l.cloud.Describe(ctx, p)
	var fresh []string
	for _, in := range g.Instances {
		if !old[in.ID] {
			fresh = append(fresh, in.ID)
		}
	}
	cut()
	held := 0
	for range 30 { // twice the provisioning deadline
		l.pending.Set(l.now, DemandPush{Source: "slurm", Pending: []PendingDemand{{Pool: "g5", GPUs: 16}}})
		plan := l.cycle(t)
		for _, a := range plan.Actions {
			if a.Kind == planner.Terminate || a.Kind == planner.Drain {
				t.Fatalf("%s of %s during the partition: %s", a.Kind, a.Node, a.Reason)
			}
			if a.Kind == planner.Hold && a.Code == planner.ReasonBootedWhileHalted {
				held++
			}
		}
		// Held launches are not capacity, but the pool buys nothing
		// more while it holds them: a long partition does not fill it.
		if n := plan.Counts()[planner.Launch]; n != 0 {
			t.Fatalf("launched %d more during the partition, the pool holding booted launches: %+v", n, plan.Actions)
		}
	}
	if held == 0 {
		t.Fatal("the booted launches were never held for the partition")
	}
	if b, _ := l.store.Backoffs(); len(b) != 0 {
		t.Fatalf("pool backed off during the partition: %+v", b)
	}
	// The partition ends; one of the two launches' agents never reports.
	for id := range l.silent {
		l.silent[id] = false
	}
	l.silent[fresh[1]] = true
	l.pending.Set(l.now, DemandPush{Source: "slurm"})
	ended := l.now.Add(time.Minute)
	var terminated time.Time
	for range 30 {
		plan := l.cycle(t)
		for _, a := range plan.Actions {
			if a.Kind == planner.Terminate && a.Node == fresh[1] {
				terminated = l.now
			}
			if a.Code == planner.ReasonProvisionTimeout && a.Node != fresh[1] {
				t.Fatalf("terminated %s at its deadline after the partition, its agent reporting: %s", a.Node, a.Reason)
			}
		}
		if !terminated.IsZero() {
			break
		}
	}
	if terminated.IsZero() || terminated.Sub(ended) < 14*time.Minute {
		t.Errorf("the launch whose agent never reported was terminated at %v, %v after the partition ended; want a provisioning deadline (15m) after", terminated, terminated.Sub(ended))
	}
}
