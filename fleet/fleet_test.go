package fleet

import (
	"os"
	"strings"
	"testing"
	"time"
)

var testPools = []Pool{
	{Name: "aws-ondemand-a100", GPUsPerNode: 8, PricePerHour: 32, Capacity: OnDemand},
	{Name: "reserved-a100", GPUsPerNode: 8, PricePerHour: 19, Capacity: Reserved},
	{Name: "aws-spot-a100", GPUsPerNode: 8, PricePerHour: 12, Capacity: Spot},
}

func TestParseState(t *testing.T) {
	src, err := os.ReadFile("../examples/state.json")
	if err != nil {
		t.Fatal(err)
	}
	st, err := ParseState(src)
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Validate(testPools); err != nil {
		t.Fatal(err)
	}
	if len(st.Nodes) != 4 || st.Nodes[1].Jobs[0].ID != "train-7" || st.Nodes[1].UsedGPUs() != 8 ||
		st.History.Step != 10*time.Minute || !st.History.End().Equal(st.CapturedAt) {
		t.Fatalf("state = %+v", st)
	}
}

func TestParseStateErrors(t *testing.T) {
	tests := []struct {
		name, src, want string
	}{
		{"empty", "", "empty input"},
		{"syntax", "{\n  \"nodes\": [,]\n}", "line 2, column 13: invalid character ','"},
		{"type", "{\n\"pending_gpus\": \"many\"}", "line 2, column 22: field pending_gpus: got JSON string, want int"},
		{"unknown field", `{"nodez": []}`, `unknown field "nodez"`},
		{"trailing data", `{} {}`, "line 1, column 4: unexpected data after the JSON object"},
		{"bad time", `{"captured_at": "yesterday"}`, "line 1, column"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := ParseState([]byte(tt.src))
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("err = %v, want %q", err, tt.want)
			}
		})
	}
}

func TestValidate(t *testing.T) {
	node := func(mod func(*Node)) State {
		n := Node{ID: "i-1", Pool: "reserved-a100", State: Ready}
		mod(&n)
		return State{Nodes: []Node{n}}
	}
	tests := []struct {
		name string
		st   State
		want string
	}{
		{"ok", node(func(*Node) {}), ""},
		{"unknown pool status", State{Pools: []PoolStatus{{Name: "x"}}}, `pools[0].name: unknown pool "x"`},
		{"negative pending", State{PendingGPUs: -1}, "pending_gpus: -1 is negative"},
		{"scoped", State{PendingGPUs: 9, Scoped: []ScopedDemand{{Pool: "reserved-a100", GPUs: 8}, {GPUModel: "a100", GPUs: 1}}}, ""},
		{"scoped beyond pending", State{PendingGPUs: 4, Scoped: []ScopedDemand{{Pool: "reserved-a100", GPUs: 8}}}, "scoped: 8 GPUs, more than pending_gpus (4)"},
		{"scoped to nothing", State{PendingGPUs: 4, Scoped: []ScopedDemand{{GPUs: 4}}}, "scoped[0]: want exactly one of pool and gpu_model"},
		{"scoped to both", State{PendingGPUs: 4, Scoped: []ScopedDemand{{Pool: "reserved-a100", GPUModel: "A100", GPUs: 4}}}, "scoped[0]: want exactly one"},
		{"scoped to an unknown pool", State{PendingGPUs: 4, Scoped: []ScopedDemand{{Pool: "x", GPUs: 4}}}, `scoped[0].pool: unknown pool "x"`},
		{"scoped negative", State{PendingGPUs: 4, Scoped: []ScopedDemand{{Pool: "reserved-a100", GPUs: -1}}}, "scoped[0].gpus: -1 is negative"},
		{"history without step", State{History: Series{Values: []float64{1}}}, "history.step"},
		{"no id", node(func(n *Node) { n.ID = "" }), "nodes[0].id: empty"},
		{"unknown pool", node(func(n *Node) { n.Pool = "x" }), `nodes[0].pool: node i-1 names unknown pool "x"`},
		{"orphan", node(func(n *Node) { n.Pool, n.Orphan = "gone", true }), ""},
		{"orphan of a configured pool", node(func(n *Node) { n.Orphan = true }), `nodes[0].pool: orphan i-1 names pool "reserved-a100": an orphan's pool is one the config no longer has`},
		{"orphan of no pool", node(func(n *Node) { n.Pool, n.Orphan = "", true }), `nodes[0].pool: orphan i-1 names pool ""`},
		{"bad state", node(func(n *Node) { n.State = "running" }), `nodes[0].state: node i-1 has state "running"`},
		{"drain without start", node(func(n *Node) { n.State = Draining }), "nodes[0].drain_started_at"},
		{"negative GPUs", node(func(n *Node) { n.Jobs = []Job{{ID: "j", GPUs: -2}} }), "nodes[0].jobs[0].gpus: job j has -2 GPUs"},
		{"duplicate", State{Nodes: []Node{{ID: "a", Pool: "reserved-a100", State: Ready}, {ID: "a", Pool: "reserved-a100", State: Ready}}}, `nodes[1].id: duplicate node "a"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.st.Validate(testPools)
			if (tt.want == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), tt.want)) {
				t.Fatalf("err = %v, want %q", err, tt.want)
			}
		})
	}
}

func TestCompareForLaunch(t *testing.T) {
	a := Pool{Name: "a", Capacity: OnDemand, PricePerHour: 16, GPUsPerNode: 8}
	b := Pool{Name: "b", Capacity: Spot, PricePerHour: 8, GPUsPerNode: 8}
	r := Pool{Name: "r", Capacity: Reserved, PricePerHour: 40, GPUsPerNode: 8}
	hi := Pool{Name: "z", Capacity: OnDemand, PricePerHour: 16, GPUsPerNode: 8, Priority: 5}
	for _, tt := range []struct {
		x, y *Pool
		want int
	}{{&r, &b, -1}, {&b, &a, -1}, {&a, &b, 1}, {&hi, &a, -1}, {&a, &a, 0}} {
		if got := CompareForLaunch(tt.x, tt.y); got != tt.want {
			t.Errorf("CompareForLaunch(%s, %s) = %d, want %d", tt.x.Name, tt.y.Name, got, tt.want)
		}
	}
}

// FuzzParseState checks that no input crashes the snapshot parser, and
// that what it accepts either validates or fails validation with an error
// naming a field.
func FuzzParseState(f *testing.F) {
	if src, err := os.ReadFile("../examples/state.json"); err == nil {
		f.Add(src)
	}
	f.Add([]byte(`{"nodes": [{"id": "x", "pool": "reserved-a100", "state": "draining"}]}`))
	f.Add([]byte(`{"history": {"step": -1, "values": [1e309]}}`))
	f.Fuzz(func(t *testing.T, src []byte) {
		st, err := ParseState(src)
		if err != nil {
			if !strings.HasPrefix(err.Error(), "line ") && !strings.HasPrefix(err.Error(), "empty input") {
				t.Fatalf("error without a position: %v", err)
			}
			return
		}
		if err := st.Validate(testPools); err != nil && !strings.Contains(err.Error(), ":") {
			t.Fatalf("validation error without a field: %v", err)
		}
	})
}
