package simulate

import (
	"math"
	"slices"
	"testing"
	"time"

	"github.com/fleetcast/autoscaler/fleet"
)

// TestCluster: the cluster model a driver runs jobs on (the demo's):
// jobs queue and start where they fit, a wide job on whole empty nodes; a
// job finished while queued never starts; a drained node's jobs requeue
// once their checkpoint is durable, with nothing lost, and run elsewhere;
// an undrained node takes work again; a node removed under a job loses the
// job's work since its last checkpoint; waiting is counted in GPU-hours.
func TestCluster(t *testing.T) {
	c, start := testCluster(t)
	at := func(m int) time.Time { return start.Add(time.Duration(m) * time.Minute) }
	for _, bad := range []ClusterJob{{ID: "none", GPUs: 0}, {ID: "odd", GPUs: 12}} {
		if _, err := c.Submit(bad); err == nil {
			t.Fatalf("job of %d GPUs: want an error", bad.GPUs)
		}
	}
	if c.AddNode("x", "nope", start) == nil {
		t.Fatal("a node of a pool the cluster lacks: want an error")
	}
	submit := func(id string, gpus int, work time.Duration) Job {
		t.Helper()
		j, err := c.Submit(ClusterJob{ID: id, GPUs: gpus, Work: work})
		if err != nil {
			t.Fatal(err)
		}
		return j
	}
	on := func(node string) (ids []string) {
		for _, j := range c.Jobs(node) {
			ids = append(ids, j.ID)
		}
		return ids
	}
	for _, id := range []string{"a", "b"} {
		if err := c.AddNode(id, "od", start); err != nil {
			t.Fatal(err)
		}
	}
	if c.AddNode("a", "od", start) == nil {
		t.Fatal("a node added twice: want an error")
	}
	wide := submit("wide", 16, 10*time.Minute)
	gone := submit("gone", 4, 0) // queued behind the wide job, then finished
	c.Advance(start)
	if !c.Running(wide) || c.Running(gone) || c.Stats().QueuedGPUs != 4 {
		t.Fatalf("wide running %v, gone running %v, %d GPUs queued; want the wide job on both nodes, 4 queued", c.Running(wide), c.Running(gone), c.Stats().QueuedGPUs)
	}
	c.Advance(at(5))
	c.Finish(gone)
	if s := c.Stats(); s.QueuedGPUs != 0 || !c.Done(gone) || math.Abs(s.WaitGPUHours-4*5.0/60) > 1e-9 {
		t.Fatalf("after finishing the queued job: %+v; want none queued, 20 GPU-minutes waited", s)
	}
	c.Advance(at(10)) // the wide job ends
	if c.Running(wide) || c.Running(gone) || len(on("a")) != 0 {
		t.Fatalf("at 10m: the wide job running %v, the finished one %v, on a %v; want neither", c.Running(wide), c.Running(gone), on("a"))
	}

	long := submit("long", 8, 0)
	c.Advance(at(11))
	node := "a"
	if len(on("a")) == 0 {
		node = "b"
	}
	other := map[string]string{"a": "b", "b": "a"}[node]
	c.Drain(node)
	c.Advance(at(12)) // the checkpoint takes 2 minutes
	if !slices.Equal(on(node), []string{"long"}) || !c.Draining(node) {
		t.Fatalf("a minute into the drain: %v on %s; want the job still there, writing its checkpoint", on(node), node)
	}
	c.Advance(at(13))
	if len(on(node)) != 0 || !slices.Equal(on(other), []string{"long"}) || c.Stats().Moved != 1 {
		t.Fatalf("once the checkpoint is durable: %v on %s, %v on %s, %d moved; want the job moved to %s", on(node), node, on(other), other, c.Stats().Moved, other)
	}
	c.Undrain(node)
	next := submit("next", 8, 0)
	c.Advance(at(14))
	if !c.Running(next) || !slices.Equal(on(node), []string{"next"}) {
		t.Fatalf("after the undrain: %v on %s; want the new job there", on(node), node)
	}

	c.Advance(at(43)) // the moved job last checkpointed at 13m + 30m = 43m
	c.Advance(at(53))
	c.RemoveNode(other)
	if s := c.Stats(); math.Abs(s.LostGPUHours-8*10.0/60) > 1e-9 || c.Has(other) || c.Running(long) {
		t.Fatalf("a node removed 10 minutes after its job's checkpoint: %+v; want 80 GPU-minutes lost, the job requeued", s)
	}
	if s := c.Stats(); s.Started != 3 || s.Completed != 2 || s.QueuedGPUs != 8 || s.RunningGPUs != 8 {
		t.Fatalf("stats %+v; want 3 started, 2 completed, 8 GPUs queued and 8 running", s)
	}

	if _, err := NewCluster(ClusterOptions{Pools: nil, CheckpointInterval: time.Minute}); err == nil {
		t.Fatal("a cluster with no pools: want an error")
	}
	if _, err := NewCluster(ClusterOptions{Pools: []fleet.Pool{onePool().Pools[0]}}); err == nil {
		t.Fatal("a cluster with no checkpoint interval: want an error")
	}
}

// testCluster is a cluster of onePool's pool from 2026-11-30 09:00 UTC:
// jobs checkpoint every 30 minutes, a drain's checkpoint takes 2.
func testCluster(t *testing.T) (*Cluster, time.Time) {
	t.Helper()
	start := time.Date(2026, 11, 30, 9, 0, 0, 0, time.UTC)
	c, err := NewCluster(ClusterOptions{Pools: onePool().Pools, Start: start, CheckpointInterval: 30 * time.Minute, CheckpointDuration: 2 * time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	return c, start
}
