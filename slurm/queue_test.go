package slurm

import (
	"slices"
	"testing"
)

// TestQueue: pending jobs waiting for resources or priority are demand;
// held, dependent, begin-time and limited ones are counted by reason,
// most GPUs first; running jobs are neither.
func TestQueue(t *testing.T) {
	jobs := []Job{
		{ID: "1", State: "PENDING", Reason: "Resources", Nodes: 2, GPUsPerNode: 8},
		{ID: "2", State: "RUNNING", Reason: "None", Nodes: 1, GPUsPerNode: 4},
		{ID: "3", State: "PENDING", Reason: "JobHeldUser", Nodes: 1, GPUsPerNode: 2},
		{ID: "4", State: "PENDING", Reason: "Priority", Nodes: 1, GPUsPerNode: 1},
		{ID: "5", State: "PENDING", Reason: "Dependency", Nodes: 1, GPUsPerNode: 1},
		{ID: "6", State: "PENDING", Reason: "AssocGrpGRES", Nodes: 4, GPUsPerNode: 8},
		{ID: "7", State: "PENDING", Reason: "JobHeldUser", Nodes: 1, GPUsPerNode: 8},
		{ID: "8", State: "PENDING", Reason: "", Nodes: 1, GPUsPerJob: 3},
		{ID: "9", State: "PENDING", Reason: "QOSMaxGRESPerUser", Nodes: 1, GPUsPerNode: 8},
		{ID: "10", State: "PENDING", Reason: "BeginTime", Nodes: 1, GPUsPerNode: 2},
	}
	waiting, blocked := Queue(jobs)
	var ids []string
	for _, j := range waiting {
		ids = append(ids, j.ID)
	}
	if !slices.Equal(ids, []string{"1", "4", "8"}) {
		t.Errorf("waiting %v; want 1, 4, 8", ids)
	}
	want := []Blocked{{"AssocGrpGRES", 1, 32}, {"JobHeldUser", 2, 10}, {"QOSMaxGRESPerUser", 1, 8}, {"BeginTime", 1, 2}, {"Dependency", 1, 1}}
	if !slices.Equal(blocked, want) {
		t.Errorf("blocked %+v\nwant %+v", blocked, want)
	}
}

// TestNodeGPUs: what a job needs bought on 8-GPU nodes.
func TestNodeGPUs(t *testing.T) {
	for _, tt := range []struct {
		job  Job
		gpn  int
		want int
	}{
		{Job{Nodes: 1, GPUsPerNode: 2}, 8, 2},  // shares a node
		{Job{Nodes: 3, GPUsPerNode: 8}, 8, 24}, // three whole nodes
		{Job{Nodes: 3, GPUsPerNode: 4}, 8, 24}, // three nodes, half used: whole nodes all the same
		{Job{Nodes: 1, GPUsPerNode: 16}, 8, 0}, // no 8-GPU node holds it
		{Job{Nodes: 2, GPUsPerJob: 12}, 8, 12}, // --gpus=12 over the job
		{Job{Nodes: 1, GPUsPerNode: 8}, 0, 0},  // no pool
		{Job{Nodes: 2, GPUsPerNode: 0}, 8, 0},  // no GPUs asked: no GPU demand
	} {
		if got := tt.job.NodeGPUs(tt.gpn); got != tt.want {
			t.Errorf("%+v on %d-GPU nodes: %d, want %d", tt.job, tt.gpn, got, tt.want)
		}
	}
}
