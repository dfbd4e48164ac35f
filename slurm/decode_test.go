package slurm

import (
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/fleetcast/autoscaler/fleet"
)

func readFixture(t testing.TB, name string) []byte {
	t.Helper()
	b, err := os.ReadFile("testdata/" + name)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestDecodeQueue2205: the queue as Slurm 22.05's squeue --json printed it
// (testdata/squeue-22.05.json, captured from the test cluster: five jobs
// submitted with sbatch), each job's shape, account, partition, state,
// reason and times.
func TestDecodeQueue2205(t *testing.T) {
	d, err := Decode(readFixture(t, "squeue-22.05.json"))
	if err != nil {
		t.Fatal(err)
	}
	if d.Version != "22.05.8" || d.Plugin != "openapi/v0.0.38" || len(d.Missing) != 0 || len(d.Errors) != 0 {
		t.Fatalf("version %q, plugin %q, missing %v, errors %v", d.Version, d.Plugin, d.Missing, d.Errors)
	}
	submit := time.Unix(1796563889, 0).UTC()
	want := []Job{
		{ID: "1", State: "PENDING", Reason: "PartitionNodeLimit", Account: "team-a", Partition: "train", Nodes: 3, GPUsPerNode: 8},
		{ID: "2", State: "RUNNING", Reason: "None", Partition: "train", Nodes: 1, GPUsPerNode: 4, TimeLimit: 30 * time.Minute, Start: submit, NodeList: "gpu-1"},
		{ID: "3", State: "PENDING", Reason: "JobHeldUser", Partition: "train", Nodes: 1, GPUsPerNode: 2},
		{ID: "4", State: "PENDING", Reason: "BeginTime", Partition: "train", Nodes: 1, GPUsPerNode: 2, Start: submit.Add(time.Hour)},
		{ID: "5", State: "PENDING", Reason: "Dependency", Partition: "train", Nodes: 1, GPUsPerNode: 1, GPUType: "a100"},
	}
	got := map[string]Job{}
	for _, j := range d.Jobs {
		got[j.ID] = j
	}
	for _, w := range want {
		g, ok := got[w.ID]
		if !ok {
			t.Errorf("job %s missing", w.ID)
			continue
		}
		if g.State != w.State || g.Reason != w.Reason || g.Account != w.Account || g.Partition != w.Partition || g.Nodes != w.Nodes ||
			g.GPUsPerNode != w.GPUsPerNode || g.GPUType != w.GPUType || g.TimeLimit != w.TimeLimit || g.NodeList != w.NodeList ||
			(!w.Start.IsZero() && !g.Start.Equal(w.Start)) || !g.Submit.Equal(submit) || g.User != "root" || g.Name != "wrap" {
			t.Errorf("job %s: got %+v\nwant %+v", w.ID, g, w)
		}
	}
	if j := got["2"]; !j.Running() || j.Pending() || !j.End().Equal(submit.Add(30*time.Minute)) || j.GPUs() != 4 {
		t.Errorf("job 2: running %v, end %v, GPUs %d", j.Running(), j.End(), j.GPUs())
	}
	if j := got["1"]; !j.Pending() || !j.End().IsZero() || j.GPUs() != 24 {
		t.Errorf("job 1: pending %v, end %v, GPUs %d", j.Pending(), j.End(), j.GPUs())
	}
}

// TestDecodeNodes2205: sinfo --json of the same cluster: two 8-GPU nodes,
// one with four GPUs allocated.
func TestDecodeNodes2205(t *testing.T) {
	d, err := Decode(readFixture(t, "sinfo-22.05.json"))
	if err != nil {
		t.Fatal(err)
	}
	if len(d.Nodes) != 2 || len(d.Missing) != 0 {
		t.Fatalf("nodes %+v, missing %v", d.Nodes, d.Missing)
	}
	for i, w := range []Node{{Name: "gpu-1", State: "MIXED", GPUs: 8, GPUsUsed: 4, GPUType: "a100"}, {Name: "gpu-2", State: "IDLE", GPUs: 8, GPUType: "a100"}} {
		g := d.Nodes[i]
		if g.Name != w.Name || g.State != w.State || g.GPUs != w.GPUs || g.GPUsUsed != w.GPUsUsed || g.GPUType != w.GPUType || !slices.Equal(g.Partitions, []string{"train"}) {
			t.Errorf("node %d: got %+v, want %+v", i, g, w)
		}
	}
}

// TestDecodeLaterReleases: what Slurm 23.02 and later print: numbers as
// {"set", "infinite", "number"}, states as lists of flags, gres as
// "gres/gpu:TYPE=N", fields renamed; unknown fields are ignored, and a
// field no job has is reported once.
func TestDecodeLaterReleases(t *testing.T) {
	doc := `{"meta": {"plugin": {"type": "openapi/slurmctld", "data_parser": "data_parser/v0.0.40"}, "slurm": {"release": "23.11.4"}},
	 "errors": [{"description": "something odd", "error_number": 1}], "warnings": [],
	 "jobs": [
	  {"job_id": 7, "name": "llm", "job_state": ["PENDING"], "state_reason": "Priority", "account": "nlp", "partition": "h100",
	   "qos": "high", "user_name": "ana", "priority": {"set": true, "infinite": false, "number": 4000},
	   "node_count": {"set": true, "infinite": false, "number": 4}, "tres_per_node": "gres/gpu:h100=8",
	   "submit_time": {"set": true, "infinite": false, "number": 1796563889}, "eligible_time": {"set": true, "number": 1796563890},
	   "start_time": {"set": false, "infinite": false, "number": 0}, "time_limit": {"set": true, "infinite": true, "number": 0},
	   "nodes": "", "brand_new_field": {"x": [1, 2]}},
	  {"job_id": 8, "job_state": ["RUNNING", "COMPLETING"], "state_reason": "None", "partition": "h100", "account": "cv", "qos": "",
	   "user_name": "bo", "priority": 1, "node_count": 1, "tres_per_job": "cpu=4,gres/gpu=2", "submit_time": 1796563000,
	   "eligible_time": 1796563000, "start_time": 1796563100, "time_limit": {"set": true, "infinite": false, "number": 60}, "nodes": "h-3",
	   "array_job_id": {"set": true, "number": 5}, "array_task_id": {"set": true, "number": 3}, "batch_flag": false}
	 ]}`
	d, err := Decode([]byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	if d.Version != "23.11.4" || !slices.Equal(d.Errors, []string{"something odd"}) {
		t.Fatalf("version %q, errors %v", d.Version, d.Errors)
	}
	if !slices.Equal(d.Missing, []string{"jobs[].name"}) {
		t.Errorf("missing %v; want jobs[].name once", d.Missing)
	}
	a, b := d.Jobs[0], d.Jobs[1]
	if a.ID != "7" || a.State != "PENDING" || a.Priority != 4000 || a.Nodes != 4 || a.GPUsPerNode != 8 || a.GPUType != "h100" ||
		a.TimeLimit != 0 || !a.Start.IsZero() || a.QOS != "high" || a.GPUs() != 32 || !a.Eligible.Equal(time.Unix(1796563890, 0).UTC()) {
		t.Errorf("job 7: %+v", a)
	}
	if a.NotBatch || !b.NotBatch {
		t.Errorf("not batch: job 7 %v (batch_flag not given), job 8 %v (false); want false, true", a.NotBatch, b.NotBatch)
	}
	if b.ID != "8" || b.Array != "5_3" || b.State != "RUNNING" || b.GPUsPerJob != 2 || b.GPUs() != 2 || b.TimeLimit != time.Hour || !b.End().Equal(time.Unix(1796563100, 0).UTC().Add(time.Hour)) {
		t.Errorf("job 8: %+v", b)
	}
}

// TestDecodeRefuses: what is not Slurm's JSON is an error naming why.
func TestDecodeRefuses(t *testing.T) {
	for _, tt := range []struct{ in, want string }{
		{"", "not JSON"},
		{"squeue: error: Invalid user", "not JSON"},
		{`{"meta": {}}`, "no jobs or nodes list"},
		{`[1, 2]`, "not JSON"},
		{`{"jobs": 5}`, "not JSON"},
	} {
		if _, err := Decode([]byte(tt.in)); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("Decode(%q): %v; want %q", tt.in, err, tt.want)
		}
	}
	// A job that is no object is counted as missing, and the rest read.
	d, err := Decode([]byte(`{"jobs": [3, {"job_id": 4, "job_state": "PENDING"}]}`))
	if err != nil || len(d.Jobs) != 1 || d.Jobs[0].ID != "4" || !slices.Contains(d.Missing, "jobs[]") {
		t.Errorf("%+v, %v", d, err)
	}
}

// TestGPURequest: the GPU requests every release writes.
func TestGPURequest(t *testing.T) {
	for _, tt := range []struct {
		in  string
		n   int
		typ string
	}{
		{"", 0, ""}, {"gres:gpu:8", 8, ""}, {"gres:gpu:a100:2", 2, "a100"}, {"gres/gpu:4", 4, ""}, {"gres/gpu=4", 4, ""},
		{"gres/gpu:h100=8", 8, "h100"}, {"gpu:a100:8(S:0-1)", 8, "a100"}, {"gpu:a100:4(IDX:0-3)", 4, "a100"},
		{"cpu=4,mem=1G,gres/gpu=8", 8, ""}, {"gres:gpu", 1, ""}, {"gres:gpu:a100", 1, "a100"}, {"gres:mps:100", 0, ""},
		{"gpu:a100:0(IDX:N/A)", 0, "a100"}, {"gres:gpu:-3", 0, ""}, {"gres:gpu:99999999999", 0, ""},
		{"gres:gpu:a100:2,gres:gpu:h100:1", 3, "a100"},
	} {
		if n, typ := gpuRequest(tt.in); n != tt.n || typ != tt.typ {
			t.Errorf("gpuRequest(%q) = %d, %q; want %d, %q", tt.in, n, typ, tt.n, tt.typ)
		}
	}
}

// FuzzDecode: no document crashes the decoder, and what it decodes keeps
// its bounds.
func FuzzDecode(f *testing.F) {
	f.Add(readFixture(f, "squeue-22.05.json"))
	f.Add(readFixture(f, "sinfo-22.05.json"))
	f.Add([]byte(`{"jobs": [{"job_id": {"set": true, "number": 1e300}, "node_count": -5, "tres_per_node": "gres/gpu:x=9"}]}`))
	f.Add([]byte(`{"nodes": [{"state": ["IDLE", "CLOUD", "POWERED_DOWN"], "gres": "gpu:8"}]}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		d, err := Decode(data)
		if err != nil {
			return
		}
		for _, j := range d.Jobs {
			if j.Nodes < 1 || j.Nodes > 1<<20 || j.GPUsPerNode < 0 || j.GPUsPerNode > 1<<20 || j.GPUsPerJob < 0 || j.TimeLimit < 0 || j.Tasks < 1 || j.Tasks > maxTasks {
				t.Fatalf("job out of bounds: %+v", j)
			}
		}
		for _, n := range d.Nodes {
			if n.GPUs < 0 || n.GPUs > 1<<20 || n.GPUsUsed < 0 {
				t.Fatalf("node out of bounds: %+v", n)
			}
		}
		// Whatever the queue, its demand is bounded and served by a pool.
		pools := []fleet.Pool{{Name: "a", GPUModel: "A100", GPUsPerNode: 8, Partitions: []string{"train"}}, {Name: "b", GPUsPerNode: 4, Partitions: []string{"train", "dev"}}}
		s := Snapshot{Jobs: d.Jobs, Nodes: d.Nodes}
		dm := s.Demand(pools, "")
		for _, l := range dm.Pending {
			anyPool := l == fleet.ScopedDemand{GPUs: l.GPUs}
			if l.GPUs <= 0 || l.GPUs > fleet.MaxDemandGPUs || !anyPool && !slices.ContainsFunc(pools, func(p fleet.Pool) bool { return l.Serves(&p) }) {
				t.Fatalf("pending line %+v", l)
			}
		}
		for _, l := range dm.Queue.Pending {
			if l.Jobs <= 0 || l.GPUs < 0 || l.DemandGPUs < 0 || l.DemandGPUs > fleet.MaxDemandGPUs || l.Bought != (l.DemandGPUs > 0) {
				t.Fatalf("queue line %+v", l)
			}
		}
	})
}
