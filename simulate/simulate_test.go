package simulate

import (
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"testing"
	"time"

	"github.com/fleetcast/autoscaler/fleet"
	"github.com/fleetcast/autoscaler/trace"
)

// onePool is a config with one on-demand pool of 8-GPU nodes at $8/h
// ($1 per GPU-hour) with a 10-minute lead time.
func onePool() *fleet.Settings {
	cfg := fleet.DefaultSettings()
	cfg.Pools = []fleet.Pool{{Name: "od", Provider: "sim", InstanceType: "gpu8", GPUsPerNode: 8, Capacity: fleet.OnDemand,
		PricePerHour: 8, LeadTime: 10 * time.Minute, ProvisionTimeout: 30 * time.Minute, Max: 10}}
	return &cfg
}

func jobsTrace(jobs ...trace.Job) *trace.Trace {
	for i := range jobs {
		if jobs[i].ID == "" {
			jobs[i].ID = fmt.Sprint(i)
		}
	}
	return &trace.Trace{Name: "test", Format: "jobs", Jobs: jobs}
}

func byPolicy(t *testing.T, rep *Report) map[string]Result {
	t.Helper()
	m := map[string]Result{}
	for _, r := range rep.Policies {
		m[r.Policy] = r
	}
	return m
}

func near(a, b float64) bool { return math.Abs(a-b) < 1e-6*max(1, math.Abs(b)) }

// squareWave is two bursts of two 8-GPU, 2-hour jobs, four hours apart.
func squareWave() *trace.Trace {
	return jobsTrace(
		trace.Job{Submit: 0, GPUs: 8, Duration: 2 * time.Hour}, trace.Job{Submit: 0, GPUs: 8, Duration: 2 * time.Hour},
		trace.Job{Submit: 4 * time.Hour, GPUs: 8, Duration: 2 * time.Hour}, trace.Job{Submit: 4 * time.Hour, GPUs: 8, Duration: 2 * time.Hour},
	)
}

// TestSquareWave replays two bursts of two 8-GPU, 2-hour jobs, four hours
// apart, where every figure is known by hand.
func TestSquareWave(t *testing.T) {
	tr := squareWave()
	rep, err := Run(onePool(), tr, Options{Policies: []string{"static", "reactive", "oracle"}})
	if err != nil {
		t.Fatal(err)
	}
	got := byPolicy(t, rep)
	tests := []struct {
		policy                string
		cost, bought, waitP50 float64
		launches, drains      int
	}{
		// Two nodes from 0 until the last job ends at 6h.
		{"static", 2 * 8 * 6, 2 * 8 * 6, 0, 2, 0},
		// Two nodes launched at 0, ready at 10m, jobs end at 2h10m, nodes
		// removed 10 minutes later (2h20m); again at 4h, jobs end at 6h10m,
		// when the run ends. Every job waits one lead time.
		{"reactive", 2 * 8 * (140.0/60 + 130.0/60), 2 * 8 * (140.0/60 + 130.0/60), 600, 4, 2},
		// Exactly the demand: the first two nodes are there at the start
		// (as the static fleet's are), released at 2h and launched again
		// one lead time before 4h (a gap longer than the lead time).
		{"oracle", 2*8*4 + 2*8.0/6, 2*8*4 + 2*8.0/6, 0, 2, 2},
	}
	for _, tt := range tests {
		r := got[tt.policy]
		if !near(r.CostUSD, tt.cost) || !near(r.ProvisionedGPUHours, tt.bought) || r.WaitP50 != tt.waitP50 ||
			r.Launches != tt.launches || r.Drains != tt.drains || r.LostGPUHours != 0 || r.UsedGPUHours != 64 {
			t.Errorf("%s: %+v\nwant cost %.4f, bought %.4f, wait p50 %v, %d launches, %d drains, no loss, 64 GPU-h used",
				tt.policy, r, tt.cost, tt.bought, tt.waitP50, tt.launches, tt.drains)
		}
	}
	if r := got["reactive"]; !near(r.CostVsOracle, r.CostUSD/got["oracle"].CostUSD) {
		t.Errorf("cost_vs_oracle = %v", r.CostVsOracle)
	}
}

// TestOracleKeepsNodesThroughShortGaps: demand that dips for less than a
// lead time keeps its nodes (paid through the gap), so the oracle is no
// dearer than a fleet that simply stays.
func TestOracleKeepsNodesThroughShortGaps(t *testing.T) {
	var jobs []trace.Job
	for i := range 40 { // 13 minutes of work every 15 minutes
		jobs = append(jobs, trace.Job{Submit: time.Duration(i) * 15 * time.Minute, GPUs: 8, Duration: 13 * time.Minute})
	}
	rep, err := Run(onePool(), jobsTrace(jobs...), Options{Policies: []string{"static", "oracle"}})
	if err != nil {
		t.Fatal(err)
	}
	got := byPolicy(t, rep)
	// One node from the start to the last job's end, never relaunched.
	end := 39*15.0 + 13
	if o := got["oracle"]; !near(o.CostUSD, 8*end/60) || o.Launches != 0 || o.CostUSD > got["static"].CostUSD+1e-9 {
		t.Fatalf("oracle %+v, static %+v", o, got["static"])
	}
}

// TestOracleLeavesUnservedWhatNothingCanHold: demand beyond what the pools
// can hold goes unserved, and is reported so (the used GPU-hours are what
// was served); with advised reservations the oracle does not buy a
// reservation for a spike that the other policies queue, so it stays the
// cheapest.
func TestOracleLeavesUnservedWhatNothingCanHold(t *testing.T) {
	cfg := onePool()
	cfg.Pools[0].Max = 1
	cfg.Pools = append(cfg.Pools, fleet.Pool{Name: "res", Provider: "sim", InstanceType: "gpu8", GPUsPerNode: 8,
		Capacity: fleet.Reserved, PricePerHour: 4, LeadTime: 10 * time.Minute, ProvisionTimeout: 30 * time.Minute, Min: 1, Max: 1})
	tr := jobsTrace(trace.Job{GPUs: 8, Duration: 48 * time.Hour}, trace.Job{GPUs: 8, Duration: 48 * time.Hour}, trace.Job{GPUs: 8, Duration: 48 * time.Hour})
	rep, err := Run(cfg, tr, Options{Policies: []string{"oracle"}})
	if err != nil {
		t.Fatal(err)
	}
	if o := rep.Policies[0]; !near(o.UnservedGPUHours, 8*48) || !near(o.UsedGPUHours, 16*48) || o.Utilization > 1+1e-9 || !near(o.CostUSD, (4+8)*48) {
		t.Fatalf("oracle %s, unserved %.1f GPU-h, utilisation %.3f; want 384 GPU-h unserved, 768 used, $576", brief(o), o.UnservedGPUHours, o.Utilization)
	}

	// A 1-hour spike at day 40 beyond the burst pool: the policies queue
	// it; the oracle must not buy a reservation to the end for it.
	cfg.Pools[0].Max = 2
	cfg.Forecast.History = 4 * 24 * time.Hour
	jobs := []trace.Job{{GPUs: 8, Duration: 60 * 24 * time.Hour}}
	for range 3 {
		jobs = append(jobs, trace.Job{Submit: 40 * 24 * time.Hour, GPUs: 8, Duration: time.Hour})
	}
	for _, mode := range []string{Configured, Advised} {
		rep, err := Run(cfg, jobsTrace(jobs...), Options{Reservations: mode, AdviceAfter: 2 * 24 * time.Hour, Interval: 10 * time.Minute,
			Policies: []string{"static", "reactive", "predictive"}})
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range rep.Policies {
			if r.CostVsOracle < 1-1e-9 {
				t.Errorf("%s: %s costs %.3fx the oracle", mode, r.Policy, r.CostVsOracle)
			}
		}
	}
}

// TestLostWork checks the accounting of a node removed under a job: the
// work since its last checkpoint is lost and redone, the rest is kept.
func TestLostWork(t *testing.T) {
	tr := jobsTrace(trace.Job{Submit: 0, GPUs: 4, Duration: 3 * time.Hour})
	e, err := newEngine(tr, onePool().Pools, Options{CheckpointInterval: 30 * time.Minute}, static{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.launch(0, 1, 0); err != nil {
		t.Fatal(err)
	}
	e.enqueue(0)
	e.schedule()
	e.advance(70 * 60) // 70 minutes in: checkpoints at 30 and 60
	e.terminate(e.live[0])
	j := &e.jobs[0]
	if e.st.unsafe != 1 || e.st.lostScaleIn != 10*60*4 || e.st.lostReclaim != 0 || e.st.usedGPUs != 60*60*4 || j.remaining != 2*3600 || j.start != -1 {
		t.Fatalf("stats %+v, job %+v: want 10 minutes x 4 GPUs lost, 60 minutes kept, 2h left, requeued", e.st, j)
	}
	// A drain checkpoints first (at once: the engine's checkpoint duration
	// is 0 here): nothing is lost.
	if _, err := e.launch(0, 1, 0); err != nil {
		t.Fatal(err)
	}
	e.schedule()
	e.advance(100 * 60)
	e.drain(e.live[0])
	if e.st.lostScaleIn != 10*60*4 || j.remaining != 2*3600-30*60 {
		t.Fatalf("after a drain: lost %v, remaining %v", e.st.lostScaleIn, j.remaining)
	}
}

// randomTrace is a day of jobs of 1-16 GPUs, minutes to hours long.
func randomTrace(seed uint64, n int) *trace.Trace {
	r := rand.New(rand.NewPCG(seed, 1))
	var jobs []trace.Job
	at := time.Duration(0)
	for range n {
		at += time.Duration(r.ExpFloat64() * float64(24*time.Hour) / float64(n))
		jobs = append(jobs, trace.Job{Submit: at.Round(time.Second), GPUs: []int{1, 1, 2, 4, 8, 16}[r.IntN(6)],
			Duration: time.Duration(60+r.IntN(4*3600)) * time.Second})
	}
	return jobsTrace(jobs...)
}

// TestInvariants checks, over random traces and the example config, what
// must hold for every policy: every job finishes, the useful work is the
// trace's, utilisation is at most 1, and the oracle is cheapest; for the
// predictive policy (2% of jobs ignoring drains, 2-minute checkpoints: the
// defaults), no work is lost and no node is terminated under a job.
func TestInvariants(t *testing.T) {
	cfg := loadSettings(t, "../examples/local.hcl")
	for seed := uint64(1); seed <= 3; seed++ {
		tr := randomTrace(seed, 400)
		rep, err := Run(cfg, tr, Options{Seed: int64(seed)})
		if err != nil {
			t.Fatal(err)
		}
		got := byPolicy(t, rep)
		oracleCost := got["oracle"].CostUSD
		for _, r := range rep.Policies {
			if !near(r.UsedGPUHours, tr.GPUHours()) || r.Utilization > 1+1e-9 {
				t.Errorf("seed %d %s: used %.3f GPU-h of %.3f, utilisation %.3f", seed, r.Policy, r.UsedGPUHours, tr.GPUHours(), r.Utilization)
			}
			if r.Policy != "oracle" && r.CostUSD < oracleCost {
				t.Errorf("seed %d: %s costs %.2f, less than the oracle's %.2f", seed, r.Policy, r.CostUSD, oracleCost)
			}
			// The pools' shares add up to the whole (the oracle's bound
			// is not split by pool).
			cost, bought := 0.0, 0.0
			for _, u := range r.Pools {
				cost, bought = cost+u.CostUSD, bought+u.ProvisionedGPUHours
			}
			if r.Policy != "oracle" && (len(r.Pools) != len(cfg.Pools) || !near(cost, r.CostUSD) || !near(bought, r.ProvisionedGPUHours)) {
				t.Errorf("seed %d %s: %d pools cost $%.2f for %.2f GPU-h; want %d, $%.2f, %.2f", seed, r.Policy, len(r.Pools), cost, bought, len(cfg.Pools), r.CostUSD, r.ProvisionedGPUHours)
			}
		}
		if p := got["predictive"]; p.LostGPUHours != 0 || p.LostScaleInGPUHours != 0 || p.UnsafeTerminations != 0 {
			t.Errorf("seed %d: predictive lost %.3f GPU-h in %d unsafe terminations", seed, p.LostGPUHours, p.UnsafeTerminations)
		}
		if len(got) != len(DefaultPolicies) || rep.Jobs != 400 {
			t.Errorf("seed %d: %d policies, %d jobs; want %d and 400", seed, len(got), rep.Jobs, len(DefaultPolicies))
		}
		// With the advice evaluated, the oracle is still the cheapest.
		rep, err = Run(cfg, tr, Options{Seed: int64(seed), Reservations: Advised, AdviceAfter: 6 * time.Hour})
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range rep.Policies {
			if r.CostVsOracle < 1-1e-9 {
				t.Errorf("seed %d, advised: %s costs %.3fx the oracle", seed, r.Policy, r.CostVsOracle)
			}
		}
	}
}

// TestRunIsDeterministic checks that the same seed gives the same report.
func TestRunIsDeterministic(t *testing.T) {
	cfg := loadSettings(t, "../examples/local.hcl")
	tr := randomTrace(9, 200)
	a, err := Run(cfg, tr, Options{Seed: 3})
	if err != nil {
		t.Fatal(err)
	}
	b, _ := Run(cfg, tr, Options{Seed: 3})
	if fmt.Sprint(a.Policies) != fmt.Sprint(b.Policies) {
		t.Fatalf("two runs differ:\n%v\n%v", a.Policies, b.Policies)
	}
}

func TestRunErrors(t *testing.T) {
	if _, err := Run(onePool(), jobsTrace(), Options{}); err == nil {
		t.Fatal("an empty trace: want an error")
	}
	if _, err := Run(onePool(), randomTrace(1, 5), Options{Policies: []string{"psychic"}}); err == nil {
		t.Fatal("an unknown policy: want an error")
	}
	if w := CapacityWarning(onePool(), jobsTrace(trace.Job{GPUs: 100, Duration: time.Hour})); w == "" {
		t.Fatal("a trace wider than the pools: want a warning")
	}
	if _, err := Run(onePool(), randomTrace(1, 5), Options{Interval: 400 * time.Millisecond}); err == nil {
		t.Fatal("a sub-second interval: want an error")
	}
	// A 12-GPU job needs two whole 8-GPU nodes; the pool has one.
	narrow := onePool()
	narrow.Pools[0].Max = 1
	narrow.Pools = append(narrow.Pools, fleet.Pool{Name: "small", Provider: "sim", InstanceType: "gpu4", GPUsPerNode: 4,
		Capacity: fleet.OnDemand, PricePerHour: 4, LeadTime: time.Minute, ProvisionTimeout: 3 * time.Minute, Max: 10})
	if _, err := Run(narrow, jobsTrace(trace.Job{GPUs: 12, Duration: time.Hour}), Options{}); err == nil {
		t.Fatal("a job wider than the widest nodes can hold: want an error")
	}
}

// sharedTrace returns the path of a shared trace, or skips.
func sharedTrace(t testing.TB, rel string) string {
	path := "../../shared/traces/" + rel
	if _, err := os.Stat(path); err != nil {
		t.Skipf("shared trace %s not found; it lives in ../shared/traces beside the repository", rel)
	}
	return path
}

// BenchmarkSimulatePhilly simulates the whole Philly trace (111,549 jobs,
// 129 days) with examples/philly-fair.hcl under the default policies
// (static, reactive, headroom at 128 GPUs, predictive, oracle),
// concurrently; the target is 10 s on 2 cores (-cpu 2) and 1 GB.
func BenchmarkSimulatePhilly(b *testing.B) {
	path := sharedTrace(b, "philly_rfold/philly_trace.csv")
	cfg := loadSettings(b, "../examples/philly-fair.hcl")
	b.ReportAllocs()
	for b.Loop() {
		tr, err := trace.Open(path, trace.Options{})
		if err != nil {
			b.Fatal(err)
		}
		if _, err := Run(cfg, tr, Options{Seed: 1}); err != nil {
			b.Fatal(err)
		}
	}
}

// TestSpotInterruptions: with the cloud reclaiming spot nodes, the
// predictive policy checkpoints on the notice and loses nothing to
// scale-in, and nothing at all when every job heeds the notice (the
// default 2-minute checkpoint is durable as the 2-minute notice ends);
// Cluster Autoscaler ignores notices and loses work.
func TestSpotInterruptions(t *testing.T) {
	cfg := onePool()
	cfg.Pools[0].Capacity = fleet.Spot
	tr := randomTrace(4, 300)
	rep, err := Run(cfg, tr, Options{Seed: 2, SpotInterruptionsPerHour: 0.5, Policies: []string{"reactive", "predictive"}})
	if err != nil {
		t.Fatal(err)
	}
	got := byPolicy(t, rep)
	if p := got["predictive"]; p.LostScaleInGPUHours != 0 || p.UnsafeTerminations != 0 || !near(p.UsedGPUHours, tr.GPUHours()) {
		t.Errorf("predictive: %s", brief(p))
	}
	if r := got["reactive"]; r.LostGPUHours == 0 {
		t.Errorf("reactive lost nothing to interruptions: %s", brief(r))
	}
	rep, err = Run(cfg, tr, Options{Seed: 2, SpotInterruptionsPerHour: 0.5, UnresponsiveJobs: -1, Policies: []string{"predictive"}})
	if p := byPolicy(t, rep)["predictive"]; err != nil || p.LostGPUHours != 0 {
		t.Errorf("predictive, every job heeding notices: %v %s", err, brief(p))
	}
	// The static fleet replaces reclaimed nodes and finishes too.
	rep, err = Run(cfg, tr, Options{Seed: 2, SpotInterruptionsPerHour: 0.5, Policies: []string{"static"}})
	if err != nil || !near(byPolicy(t, rep)["static"].UsedGPUHours, tr.GPUHours()) {
		t.Fatalf("static under interruptions: %v %+v", err, rep)
	}
}

// TestZeroLengthJobs: a job that runs for no time holds no GPUs (the demand
// curve gives it none): every policy completes it when it is submitted,
// even when it is wider than the fleet sized for the demand.
func TestZeroLengthJobs(t *testing.T) {
	tr := jobsTrace(trace.Job{GPUs: 16}, trace.Job{Submit: 10 * time.Second, GPUs: 1, Duration: 10 * time.Minute})
	rep, err := Run(onePool(), tr, Options{})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range rep.Policies {
		if r.WaitP50 != 0 {
			t.Errorf("%s: median wait %vs; want 0 (the zero-length job is done at once)", r.Policy, r.WaitP50)
		}
	}
}
