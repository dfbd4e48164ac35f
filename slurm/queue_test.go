package slurm

import "testing"

// TestNodeGPUs: what a job needs bought on 8-GPU nodes.
func TestNodeGPUs(t *testing.T) {
	for _, tt := range []struct {
		job  Job
		gpn  int
		want int
	}{
		{Job{Nodes: 1, GPUsPerNode: 2}, 8, 2},            // shares a node
		{Job{Nodes: 3, GPUsPerNode: 8}, 8, 24},           // three whole nodes
		{Job{Nodes: 3, GPUsPerNode: 4}, 8, 24},           // three nodes, half used: whole nodes all the same
		{Job{Nodes: 1, GPUsPerNode: 16}, 8, 0},           // no 8-GPU node holds it
		{Job{Nodes: 1, GPUsPerJob: 6}, 8, 6},             // --gpus=6 on one node
		{Job{Nodes: 2, GPUsPerJob: 12}, 8, 16},           // --gpus=12 over two nodes: two whole nodes
		{Job{Nodes: 1, GPUsPerJob: 12}, 8, 0},            // --gpus=12 on one node: no 8-GPU node holds it
		{Job{Nodes: 2, GPUsPerJob: 9}, 4, 0},             // 5 of a node, rounded up: no 4-GPU node holds it
		{Job{Nodes: 2, GPUsPerJob: 9}, 5, 10},            // two whole 5-GPU nodes
		{Job{Nodes: 1, GPUsPerNode: 1, Tasks: 4}, 8, 4},  // an array of four one-GPU tasks
		{Job{Nodes: 2, GPUsPerNode: 4, Tasks: 3}, 8, 48}, // three tasks of two whole nodes
		{Job{Nodes: 1, GPUsPerNode: 8}, 0, 0},            // no pool
		{Job{Nodes: 2, GPUsPerNode: 0}, 8, 0},            // no GPUs asked: no GPU demand
	} {
		if got := tt.job.NodeGPUs(tt.gpn); got != tt.want {
			t.Errorf("%+v on %d-GPU nodes: %d, want %d", tt.job, tt.gpn, got, tt.want)
		}
	}
}

// TestArrayTasks: the tasks of a pending array's index list.
func TestArrayTasks(t *testing.T) {
	for s, want := range map[string]int{
		"0-9": 10, "1,3,5-7": 5, "0-15:4": 4, "0-99%10": 100, "7": 1, "": 1, "x": 1, "3-1": 1, "0-2000000": maxTasks,
	} {
		if got := arrayTasks(s); got != want {
			t.Errorf("arrayTasks(%q) = %d, want %d", s, got, want)
		}
	}
}
