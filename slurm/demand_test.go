package slurm

import (
	"os"
	"slices"
	"testing"
	"time"

	"github.com/fleetcast/autoscaler/fleet"
)

// TestDemand: what pending jobs ask of pools, by the scope that serves
// them, in whole nodes of their shape; what the rest wait for.
func TestDemand(t *testing.T) {
	t0 := time.Date(2026, 12, 6, 14, 0, 0, 0, time.UTC)
	a100 := func(name string, gpn int, parts ...string) fleet.Pool {
		return fleet.Pool{Name: name, GPUModel: "A100", GPUsPerNode: gpn, Partitions: parts}
	}
	h100 := func(parts ...string) fleet.Pool {
		return fleet.Pool{Name: "h100", GPUModel: "H100", GPUsPerNode: 8, Partitions: parts}
	}
	jobs := []Job{
		{ID: "1", State: "PENDING", Reason: "Resources", Partition: "train", Nodes: 2, GPUsPerNode: 4},
		{ID: "2", State: "PENDING", Reason: "Priority", Partition: "train", Nodes: 1, GPUsPerNode: 2},
		{ID: "3", State: "PENDING", Reason: "None", Partition: "train", Nodes: 1, GPUsPerNode: 1, GPUType: "h100"},
		{ID: "4", State: "PENDING", Reason: "JobHeldUser", Partition: "train", Nodes: 1, GPUsPerNode: 8},
		{ID: "5", State: "PENDING", Reason: "AssocGrpGRES", Partition: "train", Nodes: 4, GPUsPerNode: 8},
		{ID: "6", State: "PENDING", Reason: "Resources", Partition: "debug", Nodes: 1, GPUsPerNode: 2},
		{ID: "7", State: "PENDING", Reason: "Resources", Partition: "train", Nodes: 1, GPUsPerNode: 16},
		{ID: "8", State: "PENDING", Reason: "Resources", Partition: "train", Nodes: 1, GPUsPerNode: 1, GPUType: "b200"},
		{ID: "9", State: "PENDING", Reason: "Resources", Partition: "train", Nodes: 1},
		{ID: "10", State: "RUNNING", Partition: "train", Nodes: 2, GPUsPerNode: 8, Start: t0, TimeLimit: time.Hour},
		{ID: "11", State: "RUNNING", Partition: "train", Nodes: 1, GPUsPerNode: 2, Start: t0},
		{ID: "12", State: "PENDING", Reason: "Resources", Partition: "debug,train", Nodes: 1, GPUsPerJob: 3},
		{ID: "13", State: "COMPLETED", Partition: "train", Nodes: 1, GPUsPerNode: 8},
		{ID: "14", State: "PENDING", Reason: "Resources", Partition: "train", Nodes: 1, GPUsPerNode: 8},
		{ID: "15", State: "PENDING", Reason: "Priority", Partition: "train", Nodes: 1, GPUsPerNode: 1, Tasks: 3},
		{ID: "16", State: "SUSPENDED", Partition: "train", Nodes: 1, GPUsPerNode: 1, Start: t0, TimeLimit: time.Hour},
	}
	for _, tt := range []struct {
		name    string
		pools   []fleet.Pool
		pending []fleet.ScopedDemand
		lines   []fleet.QueueLine
	}{{
		name:  "no pool names a partition: every pool serves every partition",
		pools: []fleet.Pool{a100("a", 8), a100("b", 4), h100()},
		// Job 1 takes two whole nodes of any width, counted as the
		// narrowest pool's it fits (4 GPUs); job 14, asking 8 GPUs of a
		// node, pools of 8 and more; job 7 fits no node; job 8's type no
		// pool has; 2, 6, 12 and 15's three tasks any pool serves.
		pending: []fleet.ScopedDemand{{GPUs: 2 + 2 + 3 + 3}, {Nodes: 2, GPUs: 8}, {MinGPUsPerNode: 8, GPUs: 8}, {GPUModel: "H100", GPUs: 1}},
		lines: []fleet.QueueLine{
			{Partition: "train", Reason: "AssocGrpGRES", Jobs: 1, GPUs: 32},
			{Partition: "train", Reason: "Resources", Jobs: 2, GPUs: 16, Bought: true, DemandGPUs: 16},
			{Partition: "train", Reason: "Resources", Jobs: 1, GPUs: 16, Unserved: "asks 16 GPUs of a node; its pools' nodes have at most 8"},
			{Partition: "train", Reason: "JobHeldUser", Jobs: 1, GPUs: 8},
			{Partition: "train", Reason: "Priority", Jobs: 2, GPUs: 5, Bought: true, DemandGPUs: 5},
			{Partition: "debug,train", Reason: "Resources", Jobs: 1, GPUs: 3, Bought: true, DemandGPUs: 3},
			{Partition: "debug", Reason: "Resources", Jobs: 1, GPUs: 2, Bought: true, DemandGPUs: 2},
			{Partition: "train", Reason: "None", Jobs: 1, GPUs: 1, Bought: true, DemandGPUs: 1},
			{Partition: "train", Reason: "Resources", Jobs: 1, GPUs: 1, Unserved: "no pool has GPU type b200"},
		},
	}, {
		name:  "pools per partition",
		pools: []fleet.Pool{a100("a", 8, "train"), a100("b", 4, "train", "dev"), h100("train")},
		// Job 6's partition has no pool; job 12 pends in debug or train,
		// and train's pools serve it.
		pending: []fleet.ScopedDemand{{Partition: "debug,train", GPUs: 3}, {Partition: "train", GPUs: 2 + 3},
			{Partition: "train", Nodes: 2, GPUs: 8}, {Partition: "train", MinGPUsPerNode: 8, GPUs: 8},
			{Partition: "train", GPUModel: "H100", GPUs: 1}},
		lines: []fleet.QueueLine{
			{Partition: "train", Reason: "AssocGrpGRES", Jobs: 1, GPUs: 32},
			{Partition: "train", Reason: "Resources", Jobs: 2, GPUs: 16, Bought: true, DemandGPUs: 16},
			{Partition: "train", Reason: "Resources", Jobs: 1, GPUs: 16, Unserved: "asks 16 GPUs of a node; its pools' nodes have at most 8"},
			{Partition: "train", Reason: "JobHeldUser", Jobs: 1, GPUs: 8},
			{Partition: "train", Reason: "Priority", Jobs: 2, GPUs: 5, Bought: true, DemandGPUs: 5},
			{Partition: "debug,train", Reason: "Resources", Jobs: 1, GPUs: 3, Bought: true, DemandGPUs: 3},
			{Partition: "debug", Reason: "Resources", Jobs: 1, GPUs: 2, Unserved: "no pool serves partition debug"},
			{Partition: "train", Reason: "None", Jobs: 1, GPUs: 1, Bought: true, DemandGPUs: 1},
			{Partition: "train", Reason: "Resources", Jobs: 1, GPUs: 1, Unserved: "no pool of partition train has GPU type b200"},
		},
	}, {
		name:  "no pools",
		pools: nil,
		lines: []fleet.QueueLine{
			{Partition: "train", Reason: "AssocGrpGRES", Jobs: 1, GPUs: 32},
			{Partition: "train", Reason: "Resources", Jobs: 3, GPUs: 32, Unserved: "no pool serves it"},
			{Partition: "train", Reason: "JobHeldUser", Jobs: 1, GPUs: 8},
			{Partition: "train", Reason: "Priority", Jobs: 2, GPUs: 5, Unserved: "no pool serves it"},
			{Partition: "debug,train", Reason: "Resources", Jobs: 1, GPUs: 3, Unserved: "no pool serves it"},
			{Partition: "debug", Reason: "Resources", Jobs: 1, GPUs: 2, Unserved: "no pool serves it"},
			{Partition: "train", Reason: "None", Jobs: 1, GPUs: 1, Unserved: "no pool has GPU type h100"},
			{Partition: "train", Reason: "Resources", Jobs: 1, GPUs: 1, Unserved: "no pool has GPU type b200"},
		},
	}} {
		t.Run(tt.name, func(t *testing.T) {
			s := Snapshot{Jobs: jobs, Nodes: []Node{
				{Name: "n1", State: "MIXED", GPUs: 8}, {Name: "n2", State: "IDLE", Flags: []string{"CLOUD", "POWERED_DOWN"}, GPUs: 8},
				{Name: "n3", State: "IDLE", Flags: []string{"CLOUD", "POWERED_DOWN"}, GPUs: 8}, {Name: "n4", State: "IDLE", Flags: []string{"DRAIN"}, GPUs: 4},
			}}
			d := s.Demand(tt.pools, "")
			if !slices.Equal(d.Pending, tt.pending) {
				t.Errorf("pending %+v\nwant    %+v", d.Pending, tt.pending)
			}
			if !slices.Equal(d.Queue.Pending, tt.lines) {
				t.Errorf("lines:")
				for _, l := range d.Queue.Pending {
					t.Errorf("  %+v", l)
				}
			}
			if want := []End{{Job: "10", At: t0.Add(time.Hour)}}; !slices.Equal(d.Ends, want) {
				t.Errorf("ends %+v, want %+v", d.Ends, want)
			}
			// The suspended job holds its node, and has no end until it
			// resumes.
			if d.Queue.RunningJobs != 3 || d.Queue.RunningGPUs != 19 {
				t.Errorf("running %d jobs of %d GPUs; want 3 of 19", d.Queue.RunningJobs, d.Queue.RunningGPUs)
			}
			nodes := []fleet.NodeCount{{State: "IDLE+POWERED_DOWN", Nodes: 2, GPUs: 16}, {State: "IDLE+DRAIN", Nodes: 1, GPUs: 4}, {State: "MIXED", Nodes: 1, GPUs: 8}}
			if !slices.Equal(d.Queue.Nodes, nodes) {
				t.Errorf("nodes %+v, want %+v", d.Queue.Nodes, nodes)
			}
		})
	}
}

// TestDemandLimits: jobs blocked by an account's or a QOS's limit buy
// nothing and are counted by reason. Slurm gives these reasons only with
// its accounting daemon and a database, which the test cluster has not:
// testdata/squeue-22.05-limits.json is the live capture
// testdata/squeue-22.05.json with three reasons edited (job 3's
// JobHeldUser to AssocGrpGRES, job 4's BeginTime to QOSMaxGRESPerUser,
// job 5's Dependency to Priority).
func TestDemandLimits(t *testing.T) {
	b, err := os.ReadFile("testdata/squeue-22.05-limits.json")
	if err != nil {
		t.Fatal(err)
	}
	doc, err := Decode(b)
	if err != nil {
		t.Fatal(err)
	}
	s := Snapshot{Jobs: doc.Jobs}
	d := s.Demand([]fleet.Pool{{Name: "a100", GPUModel: "A100", GPUsPerNode: 8, Partitions: []string{"train"}}}, "")
	want := []fleet.QueueLine{
		{Partition: "train", Reason: "PartitionNodeLimit", Jobs: 1, GPUs: 24},
		{Partition: "train", Reason: "AssocGrpGRES", Jobs: 1, GPUs: 2},
		{Partition: "train", Reason: "QOSMaxGRESPerUser", Jobs: 1, GPUs: 2},
		{Partition: "train", Reason: "Priority", Jobs: 1, GPUs: 1, Bought: true, DemandGPUs: 1},
	}
	if !slices.Equal(d.Queue.Pending, want) {
		t.Errorf("lines %+v\nwant  %+v", d.Queue.Pending, want)
	}
	if pend := []fleet.ScopedDemand{{Partition: "train", GPUModel: "A100", GPUs: 1}}; !slices.Equal(d.Pending, pend) {
		t.Errorf("pending %+v, want %+v", d.Pending, pend)
	}
	if len(d.Ends) != 1 || d.Ends[0].Job != "2" || d.Queue.RunningGPUs != 4 {
		t.Errorf("ends %+v, running GPUs %d; want job 2's, 4", d.Ends, d.Queue.RunningGPUs)
	}
}

// TestDemandArrays: a pending array asks for its tasks not started, as
// many as its throttle allows beside those of it running (as squeue 22.05
// prints an array of ten, throttled to four, with three running).
func TestDemandArrays(t *testing.T) {
	doc := `{"jobs": [
	 {"job_id": 7, "array_job_id": 7, "array_task_id": null, "array_task_string": "3-9%4", "array_max_tasks": 4,
	  "job_state": "PENDING", "state_reason": "Resources", "partition": "train", "node_count": 1, "tres_per_node": "gres:gpu:2"},
	 {"job_id": 8, "array_job_id": 7, "array_task_id": 0, "job_state": "RUNNING", "state_reason": "None", "partition": "train", "node_count": 1, "tres_per_node": "gres:gpu:2"},
	 {"job_id": 9, "array_job_id": 7, "array_task_id": 1, "job_state": "RUNNING", "state_reason": "None", "partition": "train", "node_count": 1, "tres_per_node": "gres:gpu:2"},
	 {"job_id": 10, "array_job_id": 7, "array_task_id": 2, "job_state": "RUNNING", "state_reason": "None", "partition": "train", "node_count": 1, "tres_per_node": "gres:gpu:2"},
	 {"job_id": 20, "array_job_id": 20, "array_task_id": null, "array_task_string": "0-15:5,20", "array_max_tasks": 0,
	  "job_state": "PENDING", "state_reason": "Priority", "partition": "train", "node_count": 1, "tres_per_node": "gres:gpu:1"},
	 {"job_id": 30, "array_job_id": 30, "array_task_id": null, "array_task_string": "0-3%2", "array_max_tasks": 2,
	  "job_state": "PENDING", "state_reason": "Resources", "partition": "train", "node_count": 1, "tres_per_node": "gres:gpu:1"},
	 {"job_id": 31, "array_job_id": 30, "array_task_id": 4, "job_state": "RUNNING", "state_reason": "None", "partition": "train", "node_count": 1, "tres_per_node": "gres:gpu:1"},
	 {"job_id": 32, "array_job_id": 30, "array_task_id": 5, "job_state": "RUNNING", "state_reason": "None", "partition": "train", "node_count": 1, "tres_per_node": "gres:gpu:1"}
	]}`
	dec, err := Decode([]byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	if j := dec.Jobs[0]; j.ID != "7" || j.Array != "7_[3-9%4]" || j.Tasks != 4 || j.Throttle != 4 || j.GPUs() != 8 {
		t.Errorf("the throttled array: %+v", j)
	}
	if j := dec.Jobs[1]; j.ID != "8" || j.Array != "7_0" || j.Tasks != 1 {
		t.Errorf("a task of it: %+v", j)
	}
	s := Snapshot{Jobs: dec.Jobs}
	d := s.Demand([]fleet.Pool{{Name: "a", GPUsPerNode: 8}}, "")
	// Array 7: one more task may start, of 2 GPUs; array 20: its five
	// tasks (0, 5, 10, 15, 20), of 1; array 30: none, its two running.
	if want := []fleet.ScopedDemand{{GPUs: 2 + 5}}; !slices.Equal(d.Pending, want) {
		t.Errorf("pending %+v, want %+v", d.Pending, want)
	}
	want := []fleet.QueueLine{
		{Partition: "train", Reason: "Resources", Jobs: 1, GPUs: 8, Bought: true, DemandGPUs: 2},
		{Partition: "train", Reason: "Priority", Jobs: 1, GPUs: 5, Bought: true, DemandGPUs: 5},
		{Partition: "train", Reason: "Resources", Jobs: 1, GPUs: 2, Unserved: "its array runs as many tasks as its throttle allows (2)"},
	}
	if !slices.Equal(d.Queue.Pending, want) {
		t.Errorf("lines %+v\nwant  %+v", d.Queue.Pending, want)
	}
}

// TestDemandTiers: each scoped line is of one tier, the jobs' QOS (by
// default) or partition as tierFrom says; none for a name no report could
// carry.
func TestDemandTiers(t *testing.T) {
	jobs := []Job{
		{ID: "1", State: "PENDING", Reason: "Resources", Partition: "train", QOS: "critical", Nodes: 1, GPUsPerNode: 8},
		{ID: "2", State: "PENDING", Reason: "Resources", Partition: "train", QOS: "best_effort", Nodes: 1, GPUsPerNode: 8},
		{ID: "3", State: "PENDING", Reason: "Resources", Partition: "train", QOS: "best_effort", Nodes: 1, GPUsPerNode: 2},
		{ID: "4", State: "PENDING", Reason: "Resources", Partition: "train", QOS: "bad label", Nodes: 1, GPUsPerNode: 1},
	}
	pools := []fleet.Pool{{Name: "a", GPUsPerNode: 8, Partitions: []string{"train"}}}
	s := Snapshot{Jobs: jobs}
	for _, tt := range []struct {
		tierFrom string
		want     []fleet.ScopedDemand
	}{
		{"", []fleet.ScopedDemand{{Partition: "train", GPUs: 1}, {Partition: "train", GPUs: 10, Tier: "best_effort"}, {Partition: "train", GPUs: 8, Tier: "critical"}}},
		{"qos", []fleet.ScopedDemand{{Partition: "train", GPUs: 1}, {Partition: "train", GPUs: 10, Tier: "best_effort"}, {Partition: "train", GPUs: 8, Tier: "critical"}}},
		{"partition", []fleet.ScopedDemand{{Partition: "train", GPUs: 19, Tier: "train"}}},
	} {
		if got := s.Demand(pools, tt.tierFrom).Pending; !slices.Equal(got, tt.want) {
			t.Errorf("tier from %q: %+v, want %+v", tt.tierFrom, got, tt.want)
		}
	}
}

// TestDemandTeams: each scoped line is of one team too, the jobs' account
// (none for a name no report could carry), for the controller to keep the
// lines of teams with budgets apart.
func TestDemandTeams(t *testing.T) {
	jobs := []Job{
		{ID: "1", State: "PENDING", Reason: "Resources", Partition: "train", Account: "vision", Nodes: 1, GPUsPerNode: 8},
		{ID: "2", State: "PENDING", Reason: "Resources", Partition: "train", Account: "nlp", Nodes: 1, GPUsPerNode: 2},
		{ID: "3", State: "PENDING", Reason: "Resources", Partition: "train", Account: "vision", Nodes: 1, GPUsPerNode: 1},
		{ID: "4", State: "PENDING", Reason: "Resources", Partition: "train", Account: "bad label", Nodes: 1, GPUsPerNode: 4},
	}
	pools := []fleet.Pool{{Name: "a", GPUsPerNode: 8, Partitions: []string{"train"}}}
	want := []fleet.ScopedDemand{{Partition: "train", GPUs: 4}, {Partition: "train", GPUs: 2, Team: "nlp"}, {Partition: "train", GPUs: 9, Team: "vision"}}
	if got := (&Snapshot{Jobs: jobs}).Demand(pools, "").Pending; !slices.Equal(got, want) {
		t.Errorf("%+v, want %+v", got, want)
	}
}
