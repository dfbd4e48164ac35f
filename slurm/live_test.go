package slurm

import (
	"context"
	"testing"
	"time"

	"github.com/fleetcast/autoscaler/fleet"
	"github.com/fleetcast/autoscaler/internal/slurmtest"
)

// TestReadLiveCluster: a real Slurm 22.05 on loopback (two nodes of eight
// A100s): a job too wide for the partition, one running with a time
// limit, one held, one waiting on another and one on a begin time are
// read with their shape, account, partition, state, reason and end, and
// the held, dependent and begin-time ones counted by reason; with
// slurmctld killed a read fails within its timeout, and reads again once
// it is back.
func TestReadLiveCluster(t *testing.T) {
	c := slurmtest.Start(t, slurmtest.Options{Nodes: []string{"gpu-1", "gpu-2"}})
	wide := c.Submit(t, "--gres=gpu:8", "-N", "3", "-A", "team-a", "-p", "train")
	running := c.Submit(t, "--gres=gpu:4", "-N", "1", "-t", "30", "-A", "team-b")
	held := c.Submit(t, "-H", "--gres=gpu:2")
	after := c.Submit(t, "--dependency=afterok:"+wide, "--gres=gpu:a100:1")
	later := c.Submit(t, "--begin=now+1hour", "--gres=gpu:2")
	array := c.Submit(t, "--array=0-9%4", "--gres=gpu:1", "-H")

	r := &Reader{Conf: c.Conf, Timeout: 5 * time.Second}
	var s Snapshot
	byID := map[string]Job{}
	deadline := time.Now().Add(30 * time.Second)
	for {
		var err error
		if s, err = r.Read(context.Background()); err != nil {
			t.Fatal(err)
		}
		for _, j := range s.Jobs {
			byID[j.ID] = j
		}
		if j := byID[running]; j.Running() || time.Now().After(deadline) {
			break
		}
		time.Sleep(500 * time.Millisecond)
	}
	if len(s.Missing) != 0 || s.Version == "" {
		t.Errorf("version %q, missing %v", s.Version, s.Missing)
	}
	for _, tt := range []struct {
		id, state, reason string
		nodes, gpus       int
		typ, account      string
	}{
		{wide, "PENDING", "", 3, 8, "", "team-a"},
		{running, "RUNNING", "None", 1, 4, "", "team-b"},
		{held, "PENDING", "JobHeldUser", 1, 2, "", ""},
		{after, "PENDING", "Dependency", 1, 1, "a100", ""},
		{later, "PENDING", "BeginTime", 1, 2, "", ""},
	} {
		j, ok := byID[tt.id]
		switch {
		case !ok:
			t.Errorf("job %s not read", tt.id)
		case j.State != tt.state || (tt.reason != "" && j.Reason != tt.reason) || j.Nodes != tt.nodes || j.GPUsPerNode != tt.gpus ||
			j.GPUType != tt.typ || j.Account != tt.account || j.Partition != "train" || j.Submit.IsZero():
			t.Errorf("job %s: %+v; want %+v", tt.id, j, tt)
		}
	}
	// A pending array is one record of its tasks not started, at most
	// its throttle.
	if j := byID[array]; j.Tasks != 4 || j.GPUs() != 4 || j.Array != array+"_[0-9%4]" {
		t.Errorf("the array: %d tasks, %d GPUs, %q; want 4, 4, %s_[0-9%%4]", j.Tasks, j.GPUs(), j.Array, array)
	}
	if j := byID[running]; j.TimeLimit != 30*time.Minute || j.End().Sub(j.Start) != 30*time.Minute || j.NodeList == "" {
		t.Errorf("the running job: limit %v, start %v, end %v, nodes %q", j.TimeLimit, j.Start, j.End(), j.NodeList)
	}
	used := 0
	for _, n := range s.Nodes {
		if n.GPUs != 8 || n.GPUType != "a100" || len(n.Partitions) != 1 || n.Partitions[0] != "train" {
			t.Errorf("node %+v", n)
		}
		used += n.GPUsUsed
	}
	if len(s.Nodes) != 2 || used != 4 {
		t.Errorf("%d nodes, %d GPUs used; want 2 and 4", len(s.Nodes), used)
	}

	// The held job, the one waiting on another and the one waiting for
	// its begin time buy nothing: each counted by its reason.
	d := s.Demand(nil, "")
	reasons := map[string]fleet.QueueLine{}
	for _, l := range d.Queue.Pending {
		reasons[l.Reason] = l
	}
	for reason, want := range map[string][2]int{"JobHeldUser": {2, 2 + 4}, "Dependency": {1, 1}, "BeginTime": {1, 2}} {
		if l := reasons[reason]; l.Jobs != want[0] || l.GPUs != want[1] || l.Bought {
			t.Errorf("pending for %s: %+v; want %d jobs of %d GPUs, not bought for (all: %+v)", reason, l, want[0], want[1], d.Queue.Pending)
		}
	}

	// slurmctld gone: the read fails, bounded by its timeout.
	c.KillController()
	start := time.Now()
	if _, err := r.Read(context.Background()); err == nil {
		t.Fatal("a read with slurmctld down succeeded")
	} else if took := time.Since(start); took > r.Timeout+3*time.Second {
		t.Errorf("a read with slurmctld down took %v; its timeout is %v (%v)", took, r.Timeout, err)
	}
	if err := c.StartController(); err != nil {
		t.Fatal(err)
	}
	deadline = time.Now().Add(30 * time.Second)
	for {
		if _, err := r.Read(context.Background()); err == nil {
			break
		} else if time.Now().After(deadline) {
			t.Fatalf("no read 30 s after slurmctld restarted: %v", err)
		}
		time.Sleep(500 * time.Millisecond)
	}
}
