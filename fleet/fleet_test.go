package fleet

import (
	"math"
	"os"
	"slices"
	"strings"
	"testing"
	"time"
)

var testPools = []Pool{
	{Name: "aws-ondemand-a100", GPUModel: "A100", GPUsPerNode: 8, PricePerHour: 32, Capacity: OnDemand},
	{Name: "reserved-a100", GPUModel: "A100", GPUsPerNode: 8, PricePerHour: 19, Capacity: Reserved, Partitions: []string{"train"}},
	{Name: "aws-spot-a100", GPUModel: "A100", GPUsPerNode: 8, PricePerHour: 12, Capacity: Spot, Partitions: []string{"debug", "train"}, SlurmNodes: []string{"dgx-1", "dgx-2"}},
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
		{"unobserved of the wrong type", "{\"pools\": [{\"name\": \"a\",\n \"unobserved\": {\"code\": 3}}]}",
			"line 2, column 25: field pools.unobserved.code: got JSON number, want fleet.UnobservedCode"},
		{"unobserved object beside the old form", "{\"pools\": [{\"name\": \"a\", \"unobserved\": \"x\"},\n {\"name\": \"b\", \"unobserved\": {\"cod\": \"x\"}}]}",
			`line 2, column 30: pools[1].unobserved: json: unknown field "cod"`},
		{"old form beside an unknown field", "{\"pools\": [{\"name\": \"a\", \"unobserved\": \"x\"}],\n \"nodez\": []}", `unknown field "nodez"`},
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

// TestUnobserved: a pool's unobserved state reads from its JSON object,
// and from the words older snapshots held (Unobserved.String), which say
// it again word for word.
func TestUnobserved(t *testing.T) {
	read := time.Date(2026, 11, 30, 13, 59, 0, 0, time.UTC)
	for _, tt := range []struct {
		json  string
		want  Unobserved
		words string
	}{
		{`{"code": "read_failed", "error": "Throttling", "last_read": "2026-11-30T13:59:00Z"}`,
			Unobserved{Code: UnobservedReadFailed, Err: "Throttling", LastRead: read}, "Throttling; nodes as last read at 2026-11-30T13:59:00Z"},
		{`{"code": "never_read", "error": "Throttling"}`, Unobserved{Code: UnobservedNeverRead, Err: "Throttling"}, "Throttling"},
		{`"Throttling: rate exceeded; nodes as last read at 2026-11-30T13:59:00Z"`,
			Unobserved{Code: UnobservedReadFailed, Err: "Throttling: rate exceeded", LastRead: read}, "Throttling: rate exceeded; nodes as last read at 2026-11-30T13:59:00Z"},
		{`"Throttling"`, Unobserved{Code: UnobservedReadFailed, Err: "Throttling"}, "Throttling"},
		{`"an earlier change is not settled yet: launch l-1: no answer"`,
			Unobserved{Code: UnobservedUnsettled, Err: "launch l-1: no answer"}, "an earlier change is not settled yet: launch l-1: no answer"},
		{`""`, Unobserved{}, ""},
		// The old form's flag beside its words (found by review).
		{`"Throttling", "never_read": true`, Unobserved{Code: UnobservedNeverRead, Err: "Throttling"}, "Throttling"},
	} {
		st, err := ParseState([]byte(`{"pools": [{"name": "reserved-a100"}, {"name": "aws-spot-a100", "unobserved": ` + tt.json + `}], "nodes": []}`))
		if err != nil {
			t.Fatalf("%s: %v", tt.json, err)
		}
		ps := st.Pools[1]
		if ps.Unobserved != tt.want || ps.Unobserved.String() != tt.words || ps.IsUnobserved() != (tt.want.Code != "") ||
			ps.NeverRead() != (tt.want.Code == UnobservedNeverRead) || st.Pools[0].IsUnobserved() {
			t.Errorf("%s: %+v, %q", tt.json, st.Pools, ps.Unobserved.String())
		}
		if err := st.Validate(testPools); err != nil {
			t.Errorf("%s: %v", tt.json, err)
		}
	}
	bad := State{Pools: []PoolStatus{{Name: "aws-spot-a100", Unobserved: Unobserved{Code: "gone", Err: "x"}}}}
	if err := bad.Validate(testPools); err == nil || !strings.Contains(err.Error(), "pools[0].unobserved.code") {
		t.Errorf("unknown code: %v", err)
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
		{"scoped to nothing", State{PendingGPUs: 4, Scoped: []ScopedDemand{{GPUs: 4}}}, "scoped[0]: want a pool, a gpu_model, a partition, a slurm_node, GPUs per node, nodes or a MIG profile"},
		{"scoped to a Slurm node", State{PendingGPUs: 8, Scoped: []ScopedDemand{{SlurmNode: "dgx-2", Nodes: 1, GPUs: 8}}}, ""},
		{"scoped to an unknown Slurm node", State{PendingGPUs: 8, Scoped: []ScopedDemand{{SlurmNode: "dgx-9", GPUs: 8}}}, `scoped[0].slurm_node: no pool has Slurm node "dgx-9"`},
		{"scoped to a pool and its model", State{PendingGPUs: 4, Scoped: []ScopedDemand{{Pool: "reserved-a100", GPUModel: "A100", GPUs: 4}}}, ""},
		{"scoped to a partition", State{PendingGPUs: 4, Scoped: []ScopedDemand{{Partition: "train", GPUs: 2}, {Partition: "x,debug", GPUModel: "a100", GPUs: 2}}}, ""},
		{"scoped to wide nodes", State{PendingGPUs: 4, Scoped: []ScopedDemand{{MinGPUsPerNode: 16, GPUs: 4}}}, "scoped[0]: no pool serves nodes of 16+ GPUs"},
		{"scoped to negative nodes", State{PendingGPUs: 4, Scoped: []ScopedDemand{{Partition: "train", Nodes: -1, GPUs: 4}}}, "scoped[0].nodes: -1 is negative"},
		{"whole nodes anywhere", State{PendingGPUs: 16, Scoped: []ScopedDemand{{Nodes: 2, GPUs: 16}}}, ""},
		{"scoped to an unknown partition", State{PendingGPUs: 4, Scoped: []ScopedDemand{{Partition: "x", GPUs: 4}}}, `scoped[0].partition: no pool serves partition "x"`},
		{"scoped to a pool outside the partition", State{PendingGPUs: 4, Scoped: []ScopedDemand{{Pool: "reserved-a100", Partition: "debug", GPUs: 4}}}, "scoped[0]: no pool serves pool reserved-a100, partition debug"},
		{"scoped to an unknown model", State{PendingGPUs: 4, Scoped: []ScopedDemand{{GPUModel: "B200", GPUs: 4}}}, `scoped[0].gpu_model: no pool has GPU model "B200"`},
		{"scoped to an unknown pool", State{PendingGPUs: 4, Scoped: []ScopedDemand{{Pool: "x", GPUs: 4}}}, `scoped[0].pool: unknown pool "x"`},
		{"scoped negative", State{PendingGPUs: 4, Scoped: []ScopedDemand{{Pool: "reserved-a100", GPUs: -1}}}, "scoped[0].gpus: -1 is negative"},
		{"teams pending", State{PendingGPUs: 8, PendingTeams: []TeamGPUs{{Team: "a", GPUs: 4}, {Team: "b", Tier: "critical", GPUs: 4}}}, ""},
		{"teams pending beyond pending", State{PendingGPUs: 4, PendingTeams: []TeamGPUs{{Team: "a", GPUs: 8}}}, "pending_teams: 8 GPUs, more than the 4 pending"},
		{"a team pending less than nothing", State{PendingGPUs: 4, PendingTeams: []TeamGPUs{{Team: "a", GPUs: -1}}}, "pending_teams[0].gpus: -1 is negative"},
		{"burst spend", State{BurstSpend: []TeamSpend{{Team: "a", USD: 12.5}}}, ""},
		{"burst spend negative", State{BurstSpend: []TeamSpend{{Team: "a", USD: 1}, {Team: "b", USD: -1}}}, "burst_spend[1].usd: -1, want a finite amount of 0 or more"},
		{"burst spend not a number", State{BurstSpend: []TeamSpend{{Team: "a", USD: math.NaN()}}}, "burst_spend[0].usd: NaN"},
		{"announced without id", State{Announced: []Announcement{{GPUs: 8}}}, "announced[0].id: empty"},
		{"under way negative", State{UnderWay: []Announcement{{ID: "a"}, {ID: "b", GPUs: -8}}}, "under_way[1].gpus: -8 is negative"},
		{"under way for less than nothing", State{UnderWay: []Announcement{{ID: "a", GPUs: 8, Duration: -time.Hour}}}, "under_way[0].duration: -1h0m0s is negative"},
		{"history without step", State{History: Series{Values: []float64{1}}}, "history.step"},
		{"no id", node(func(n *Node) { n.ID = "" }), "nodes[0].id: empty"},
		{"unknown pool", node(func(n *Node) { n.Pool = "x" }), `nodes[0].pool: node i-1 names unknown pool "x"`},
		{"orphan", node(func(n *Node) { n.Pool, n.Orphan = "gone", true }), ""},
		{"orphan of a configured pool", node(func(n *Node) { n.Orphan = true }), `nodes[0].pool: orphan i-1 names pool "reserved-a100": an orphan's pool is one the config no longer has`},
		{"orphan of no pool", node(func(n *Node) { n.Pool, n.Orphan = "", true }), `nodes[0].pool: orphan i-1 names pool ""`},
		{"bad state", node(func(n *Node) { n.State = "running" }), `nodes[0].state: node i-1 has state "running"`},
		{"drain without start", node(func(n *Node) { n.State = Draining }), "nodes[0].drain_started_at"},
		{"negative GPUs", node(func(n *Node) { n.Jobs = []Job{{ID: "j", GPUs: -2}} }), "nodes[0].jobs[0].gpus: job j has -2 GPUs"},
		{"a whole share", node(func(n *Node) { n.Jobs = []Job{{ID: "j", GPUMilli: 1000, SharedGPU: "0"}} }),
			"nodes[0].jobs[0].gpu_milli: job j has 1000, want 1 to 999 thousandths of one GPU (0: whole GPUs)"},
		{"a share and GPUs", node(func(n *Node) { n.Jobs = []Job{{ID: "j", GPUs: 1, GPUMilli: 250, SharedGPU: "0"}} }),
			"nodes[0].jobs[0]: job j holds a share of a GPU (gpu_milli 250): want gpus 0 and the shared GPU named (shared_gpu)"},
		{"a share of no GPU", node(func(n *Node) { n.Jobs = []Job{{ID: "j", GPUMilli: 250}} }),
			"nodes[0].jobs[0]: job j holds a share of a GPU (gpu_milli 250): want gpus 0 and the shared GPU named (shared_gpu)"},
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

// TestQuantileFor: each burst pool is bought to the quantile that
// balances a GPU idle until scale-in against a job waiting one lead time,
// unless forecast.quantile sets one for all.
func TestQuantileFor(t *testing.T) {
	pool := func(c CapacityType, price float64, lead time.Duration) Pool {
		return Pool{Name: "p", GPUsPerNode: 8, Capacity: c, PricePerHour: price, LeadTime: lead}
	}
	fc := ForecastSettings{WaitValuePerGPUHour: 500, Hysteresis: 30 * time.Minute}
	tests := []struct {
		name string
		fc   ForecastSettings
		pool Pool
		want float64
	}{
		// 500*(10/60) / (500*(10/60) + 6.88*(40/60)) = 83.33 / 87.92
		{"on-demand H100", fc, pool(OnDemand, 55.04, 10*time.Minute), 0.9478},
		// 500*(8/60) / (500*(8/60) + 1.5625*(38/60))
		{"spot A100", fc, pool(Spot, 12.50, 8*time.Minute), 0.9854},
		{"a slower pool is bought higher", fc, pool(OnDemand, 55.04, 30*time.Minute), 0.9732},
		{"free capacity: as high as the forecast goes", fc, pool(OnDemand, 0, 10*time.Minute), MaxCostQuantile},
		{"waiting costs nothing much: as low", ForecastSettings{WaitValuePerGPUHour: 0.01, Hysteresis: time.Hour}, pool(OnDemand, 55.04, 10*time.Minute), MinCostQuantile},
		{"the override", ForecastSettings{Quantile: 0.8, WaitValuePerGPUHour: 500}, pool(Spot, 1, time.Minute), 0.8},
		{"a price that is not a number", fc, pool(Spot, math.NaN(), 8*time.Minute), MaxCostQuantile},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.fc.QuantileFor(&tt.pool); math.Abs(got-tt.want) > 5e-5 {
				t.Errorf("QuantileFor = %.5f, want %.4f", got, tt.want)
			}
		})
	}
	s := Settings{Forecast: fc, Pools: []Pool{pool(Reserved, 19, time.Minute), pool(Spot, 12.50, 8*time.Minute),
		pool(OnDemand, 55.04, 10*time.Minute), pool(OnDemand, 55.04, 10*time.Minute)}}
	if got := s.Quantiles(); len(got) != 2 || math.Abs(got[0]-0.9478) > 5e-5 || math.Abs(got[1]-0.9854) > 5e-5 {
		t.Errorf("Quantiles = %v, want the two burst pools' quantiles, ascending, once each", got)
	}
}

// TestUsedGPUsShares: shares of one GPU hold it once, whoever holds the
// rest; Holds gives it to the first of them, so the jobs' Holds add up to
// UsedGPUs.
func TestUsedGPUsShares(t *testing.T) {
	n := Node{Jobs: []Job{
		{ID: "a", GPUMilli: 500, SharedGPU: "0"},
		{ID: "b", GPUs: 2},
		{ID: "c", GPUMilli: 250, SharedGPU: "0"},
		{ID: "d", GPUMilli: 250, SharedGPU: "GPU-3f"},
	}}
	var holds []int
	for i := range n.Jobs {
		holds = append(holds, n.Holds(i))
	}
	if got := n.UsedGPUs(); got != 4 || !slices.Equal(holds, []int{1, 2, 0, 1}) {
		t.Errorf("UsedGPUs %d, Holds %v; want 4, [1 2 0 1]", got, holds)
	}
	if e := n.Jobs[2].Equivalents(); e != 0.25 {
		t.Errorf("a share's Equivalents = %v, want 0.25", e)
	}
}

func TestScopedDemandServes(t *testing.T) {
	for _, tt := range []struct {
		scope ScopedDemand
		pools string // the names of the testPools it serves
		words string
	}{
		{ScopedDemand{}, "", ""},
		{ScopedDemand{Pool: "reserved-a100"}, "reserved-a100", "pool reserved-a100"},
		{ScopedDemand{GPUModel: "a100"}, "aws-ondemand-a100 reserved-a100 aws-spot-a100", "GPU model a100"},
		{ScopedDemand{Partition: "train"}, "reserved-a100 aws-spot-a100", "partition train"},
		{ScopedDemand{Partition: "debug"}, "aws-spot-a100", "partition debug"},
		{ScopedDemand{Partition: "gpu,debug"}, "aws-spot-a100", "partition gpu,debug"},
		{ScopedDemand{Partition: "gpu"}, "", "partition gpu"},
		{ScopedDemand{Partition: "train", GPUModel: "A100"}, "reserved-a100 aws-spot-a100", "partition train, GPU model A100"},
		{ScopedDemand{Partition: "train", GPUModel: "H100"}, "", "partition train, GPU model H100"},
		{ScopedDemand{Partition: "train", GPUModel: "H100|a100"}, "reserved-a100 aws-spot-a100", "partition train, GPU model H100|a100"},
		{ScopedDemand{GPUModel: "H100|V100"}, "", "GPU model H100|V100"},
		{ScopedDemand{Pool: "aws-ondemand-a100", Partition: "train"}, "", "pool aws-ondemand-a100, partition train"},
		{ScopedDemand{Partition: "train", MinGPUsPerNode: 8}, "reserved-a100 aws-spot-a100", "partition train, nodes of 8+ GPUs"},
		{ScopedDemand{Partition: "train", MinGPUsPerNode: 9}, "", "partition train, nodes of 9+ GPUs"},
		{ScopedDemand{MinGPUsPerNode: 4}, "aws-ondemand-a100 reserved-a100 aws-spot-a100", "nodes of 4+ GPUs"},
		{ScopedDemand{Nodes: 2}, "aws-ondemand-a100 reserved-a100 aws-spot-a100", "any pool"},
		{ScopedDemand{Partition: "debug", Nodes: 2}, "aws-spot-a100", "partition debug"},
		{ScopedDemand{SlurmNode: "dgx-2", Nodes: 1}, "aws-spot-a100", "Slurm node dgx-2"},
		{ScopedDemand{SlurmNode: "dgx-3", Nodes: 1}, "", "Slurm node dgx-3"},
	} {
		var got []string
		for i := range testPools {
			if tt.scope.Serves(&testPools[i]) {
				got = append(got, testPools[i].Name)
			}
		}
		if strings.Join(got, " ") != tt.pools || tt.scope.String() != tt.words {
			t.Errorf("%+v serves %q, says %q; want %q, %q", tt.scope, got, tt.scope.String(), tt.pools, tt.words)
		}
	}
}

// TestScopedMIG: a line of MIG instances is served by the pools whose
// layout has its profile (without regard to case), never fleet-wide, and
// counts instances.
func TestScopedMIG(t *testing.T) {
	a := Pool{Name: "a", GPUModel: "A100-80GB", GPUsPerNode: 8, MIG: []string{"3g.40gb", "3g.40gb"}}
	b := Pool{Name: "b", GPUModel: "A100-80GB", GPUsPerNode: 8}
	d := ScopedDemand{MIG: "3G.40GB", Instances: 3, GPUs: 2}
	if !d.Serves(&a) || d.Serves(&b) || d.ServesAll([]Pool{a}) || a.MIGInstances("3g.40gb") != 2 || d.String() != "MIG 3G.40GB" {
		t.Errorf("serves a %v, b %v, all %v; %d instances a GPU; says %q", d.Serves(&a), d.Serves(&b), d.ServesAll([]Pool{a}), a.MIGInstances("3g.40gb"), d)
	}
	// A partitioned GPU runs no whole-GPU job: whole-GPU demand is not
	// the MIG pool's.
	if whole := (ScopedDemand{GPUModel: "A100-80GB", GPUs: 8}); whole.Serves(&a) || !whole.Serves(&b) {
		t.Errorf("whole-GPU demand served by the MIG pool %v, by the whole one %v; want false, true", whole.Serves(&a), whole.Serves(&b))
	}
	// Unless it names the pool (or one of its Slurm nodes): what its
	// scheduler asks of it.
	if named := (ScopedDemand{Pool: "a", GPUs: 8}); !named.Serves(&a) {
		t.Error("a line naming the MIG pool is not served by it")
	}
	pools := []Pool{{Name: "a", Provider: "sim", GPUModel: "A100-80GB", GPUsPerNode: 8, Max: 1, MIG: []string{"3g.40gb", "3g.40gb"}}}
	for _, tt := range []struct {
		d   ScopedDemand
		err string
	}{
		{ScopedDemand{MIG: "3g.40gb", Instances: 3, GPUs: 2}, ""},
		{ScopedDemand{MIG: "1g.10gb", Instances: 3, GPUs: 1}, ""}, // no layout has it: the planner says so
		{ScopedDemand{MIG: "3g.40gb", GPUs: 2}, "scoped[0].instances: 0; a line for a MIG profile counts its instances, 1 to 1000000"},
		{ScopedDemand{MIG: "3g.40gb", Instances: 3}, "scoped[0].gpus: 0; a line of MIG instances counts the GPUs they need at least, 1 or more"},
		{ScopedDemand{Pool: "a", Instances: 3, GPUs: 2}, "scoped[0].instances: 3, but no MIG profile is named (mig)"},
		{ScopedDemand{MIG: "3g.40gb", Instances: 3, Nodes: 1, GPUs: 8}, "scoped[0].nodes: a line for a MIG profile counts instances, not whole nodes"},
	} {
		st := State{PendingGPUs: tt.d.GPUs, Scoped: []ScopedDemand{tt.d}}
		if err := st.Validate(pools); errString(err) != tt.err {
			t.Errorf("%+v: %v, want %q", tt.d, err, tt.err)
		}
	}
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// TestServesModelEmptyElement: a model list's empty element names no pool,
// not the pools without a GPU model.
func TestServesModelEmptyElement(t *testing.T) {
	p := Pool{Name: "cpuish"} // no gpu_model
	if p.ServesModel("H100|") {
		t.Errorf(`pool without gpu_model serves "H100|"`)
	}
	st := State{Scoped: []ScopedDemand{{GPUModel: "H100|", GPUs: 8}}}
	if err := st.Validate([]Pool{{Name: "p", Provider: "sim", GPUsPerNode: 8, Max: 1}}); err == nil {
		t.Errorf(`Validate accepts gpu_model "H100|" though no pool has H100`)
	}
}

// TestValidateOvercommittedShare: shares of one GPU adding up to more than
// it are refused.
func TestValidateOvercommittedShare(t *testing.T) {
	st := State{Nodes: []Node{{ID: "n", Pool: "p", State: Ready, Jobs: []Job{
		{ID: "a", GPUMilli: 900, SharedGPU: "0"}, {ID: "b", GPUMilli: 600, SharedGPU: "0"}}}}}
	if err := st.Validate([]Pool{{Name: "p", Provider: "sim", GPUsPerNode: 8, Max: 1}}); err == nil {
		t.Errorf("Validate accepts 1500 thousandths on one shared GPU")
	}
}
