package simulate

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/fleetcast/autoscaler/fleet"
	"github.com/fleetcast/autoscaler/trace"
)

// oneReservedNode is a fleet of one reserved node of gpn GPUs.
func oneReservedNode(gpn int) *fleet.Settings {
	set := fleet.DefaultSettings()
	set.Pools = []fleet.Pool{teamPool("res", fleet.Reserved, gpn, 2, 1, 1)}
	return &set
}

// TestSharesPackOnOneGPU: on one node of two GPUs, two half shares start
// on one GPU, a 0.3 share on the other, and a whole-GPU job waits for a
// GPU no share holds; rounded up to whole GPUs, the second half share
// takes the second GPU and the 0.3 share waits too. Work and waiting
// count each share at its share.
func TestSharesPackOnOneGPU(t *testing.T) {
	tr := jobsTrace(
		trace.Job{GPUs: 1, Milli: 500, Duration: time.Hour},
		trace.Job{GPUs: 1, Milli: 500, Duration: time.Hour},
		trace.Job{GPUs: 1, Milli: 300, Duration: time.Hour},
		trace.Job{GPUs: 1, Duration: time.Hour},
	)
	for _, tt := range []struct {
		name                  string
		whole                 bool
		wait, stranded, hours float64
		used                  []int // the node's GPUs held, as its agent reports them, after each start
	}{
		{"shared", false, 1, 0.7, 2, []int{1, 1, 2, 1}},
		{"whole GPUs", true, 0.3 + 1, 0, 2, []int{1, 2, 1, 2}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var used []int
			opt := Options{Policies: []string{"static"}, WholeGPUs: tt.whole}
			opt.started = func(e *engine, id int32) {
				n := e.nodes[e.jobs[id].nodes[0]]
				fn := fleet.Node{ID: n.id, Pool: "res", State: fleet.Ready, Jobs: slices.Clone(e.reported(n))}
				used = append(used, fn.UsedGPUs())
			}
			rep, err := Run(oneReservedNode(2), tr, opt)
			if err != nil {
				t.Fatal(err)
			}
			r := byPolicy(t, rep)["static"]
			if !near(r.WaitGPUHours, tt.wait) || !near(r.StrandedGPUHours, tt.stranded) || !near(r.UsedGPUHours, 2.3) || !near(r.ProvisionedGPUHours, 2*tt.hours) {
				t.Errorf("waited %v, stranded %v, used %v, bought %v GPU-hours; want %v, %v, 2.3, %v",
					r.WaitGPUHours, r.StrandedGPUHours, r.UsedGPUHours, r.ProvisionedGPUHours, tt.wait, tt.stranded, 2*tt.hours)
			}
			if !slices.Equal(used, tt.used) {
				t.Errorf("GPUs held after each start %v, want %v", used, tt.used)
			}
		})
	}
}

// TestShareQueuePacked: the GPUs queued shares need, first fit decreasing.
func TestShareQueuePacked(t *testing.T) {
	for _, tt := range []struct {
		shares []int32
		want   int
	}{
		{nil, 0},
		{[]int32{250, 250, 250, 250}, 1},
		{[]int32{250, 250, 250, 250, 1}, 2},
		{[]int32{810, 810, 810}, 3},
		{[]int32{810, 190, 810, 190}, 2},
		{[]int32{600, 500, 400, 300, 200}, 2}, // 600+400, 500+300+200
		{[]int32{470, 470, 470, 320, 230}, 3}, // 470+470, 470+320, 230 on the second
		{[]int32{999, 1, 998, 2, 997}, 3},
	} {
		var q shareQueue
		for _, m := range tt.shares {
			q.add(m, 1)
		}
		if got := q.packed(); got != tt.want {
			t.Errorf("%v: packed %d GPUs, want %d", tt.shares, got, tt.want)
		}
		if len(tt.shares) > 0 {
			q.add(tt.shares[0], -1)
			var r shareQueue
			for _, m := range tt.shares[1:] {
				r.add(m, 1)
			}
			if got, want := q.packed(), r.packed(); got != want {
				t.Errorf("%v less its first: packed %d GPUs, want %d (the cache kept a stale answer)", tt.shares, got, want)
			}
		}
	}
}

// mixedFleet is two GPU types: A in nodes of 4 (and a reserved node of
// them), B in nodes of 2, cheaper per GPU.
func mixedFleet() *fleet.Settings {
	set := fleet.DefaultSettings()
	a, b, r := teamPool("a", fleet.OnDemand, 4, 16, 0, 6), teamPool("b", fleet.OnDemand, 2, 6, 0, 8), teamPool("res", fleet.Reserved, 4, 8, 1, 1)
	a.GPUModel, b.GPUModel, r.GPUModel = "A", "B", "a"
	set.Pools = []fleet.Pool{r, a, b}
	return &set
}

// mixedJobs are n generated jobs: shares of one GPU, whole-GPU jobs of 1
// to 4 GPUs, and jobs wider than a node, some of them of one GPU type or
// both.
func mixedJobs(r *rand.Rand, n int) *trace.Trace {
	types := []string{"", "", "", "A", "B", "A|B"}
	var jobs []trace.Job
	at := time.Duration(0)
	for i := range n {
		at += time.Duration(r.IntN(600)) * time.Second
		j := trace.Job{ID: fmt.Sprint(i), Submit: at, GPUs: 1 + r.IntN(4), Duration: time.Duration(300+r.IntN(3*3600)) * time.Second,
			GPUTypes: types[r.IntN(len(types))]}
		switch k := r.IntN(10); {
		case k < 4:
			j.GPUs, j.Milli = 1, 1+r.IntN(999)
		case k == 9:
			j.GPUs, j.GPUTypes = 8, "A"
		}
		if j.GPUs > 2 && strings.Contains(j.GPUTypes, "B") {
			j.GPUTypes = "A|B" // B's nodes are of 2
		}
		jobs = append(jobs, j)
	}
	return &trace.Trace{Name: "mixed", Format: "jobs", Jobs: jobs}
}

// TestSharesAndTypesProperty: over generated fleets of two GPU types and
// jobs of shares, whole GPUs and GPU types, under every policy that
// places jobs, at every start and stop: no GPU holds more than its whole,
// shares never share a GPU with a whole-GPU job, no node holds more GPUs
// than it has, and every job runs on a GPU type it accepts (read from the
// trace, compared with the node's pool's model). Every job ends, and
// the predictive policy loses no work.
func TestSharesAndTypesProperty(t *testing.T) {
	for seed := range uint64(6) {
		tr := mixedJobs(rand.New(rand.NewPCG(seed, 7)), 120)
		set := mixedFleet()
		// check runs on the engine's goroutine: it reports the first
		// breach with Errorf (Fatalf must be called on the test's).
		failed := false
		fail := func(format string, args ...any) {
			if !failed {
				failed = true
				t.Errorf(format, args...)
			}
		}
		check := func(e *engine, id int32, what string) {
			j := &e.jobs[id]
			tj := &tr.Jobs[j.order]
			for _, ni := range j.nodes {
				model := e.pools[e.nodes[ni].pool].spec.GPUModel
				if tj.GPUTypes != "" && !slices.ContainsFunc(strings.Split(tj.GPUTypes, "|"), func(s string) bool { return strings.EqualFold(s, model) }) {
					fail("seed %d: job %s of types %s %s on a node of %s", seed, j.id, tj.GPUTypes, what, model)
				}
			}
			for _, n := range e.live {
				whole, shares := 0, map[int32]int{}
				for _, k := range n.jobs {
					x := &e.jobs[k]
					tx := &tr.Jobs[x.order]
					switch {
					case len(x.nodes) > 1:
						whole += n.gpn
					case tx.Milli > 0 && !e.opt.WholeGPUs:
						shares[x.part] += tx.Milli
					default:
						whole += tx.GPUs
					}
				}
				for s, m := range shares {
					if m > 1000 {
						fail("seed %d, %s %s: node %s's shared GPU %d holds %d thousandths", seed, what, j.id, n.id, s, m)
					}
				}
				if whole+len(shares) > n.gpn {
					fail("seed %d, %s %s: node %s of %d GPUs holds %d whole and %d shared", seed, what, j.id, n.id, n.gpn, whole, len(shares))
				}
			}
		}
		// One policy a run: Run runs policies at once, and the hooks
		// must run on the test's goroutine.
		for _, whole := range []bool{false, true} {
			for _, pol := range []string{"reactive", "predictive"} {
				opt := Options{Policies: []string{pol}, WholeGPUs: whole, Seed: int64(seed)}
				opt.started = func(e *engine, id int32) { check(e, id, "started") }
				opt.stopped = func(e *engine, id int32) { check(e, id, "stopping") }
				rep, err := Run(set, tr, opt)
				if err != nil {
					t.Fatalf("seed %d: %v", seed, err)
				}
				r := rep.Policies[0]
				if r.Abandoned > 0 {
					t.Errorf("seed %d, %s: %d jobs abandoned", seed, r.Policy, r.Abandoned)
				}
				if pol == "predictive" && r.LostScaleInGPUHours != 0 {
					t.Errorf("seed %d: predictive lost %v GPU-hours to scale-in", seed, r.LostScaleInGPUHours)
				}
			}
		}
	}
}

// TestTypedJobsBuyTheirType: a job of GPU type A only, with B cheaper, is
// bought an A node by every policy that buys, and runs on it.
func TestTypedJobsBuyTheirType(t *testing.T) {
	set := mixedFleet()
	set.Pools = set.Pools[1:] // no reservation
	tr := jobsTrace(trace.Job{GPUs: 2, Duration: 2 * time.Hour, GPUTypes: "a"}, trace.Job{GPUs: 1, Milli: 400, Duration: 2 * time.Hour, GPUTypes: "A"})
	for _, pol := range []string{"reactive", "predictive"} { // one a run: the hook runs on the test's goroutine
		var on []string
		opt := Options{Policies: []string{pol}}
		opt.started = func(e *engine, id int32) { on = append(on, e.pools[e.nodes[e.jobs[id].nodes[0]].pool].spec.Name) }
		rep, err := Run(set, tr, opt)
		if err != nil {
			t.Fatal(err)
		}
		if want := []string{"a", "a"}; !slices.Equal(on, want) {
			t.Errorf("%s: the jobs ran on pools %v, want %v", pol, on, want)
		}
		if r := rep.Policies[0]; r.WaitP99 > 30*60 {
			t.Errorf("%s: a job waited %v s for its type's node", pol, r.WaitP99)
		}
	}
}

// TestTypesNoPoolHas: a job of GPU types no pool has is refused.
func TestTypesNoPoolHas(t *testing.T) {
	_, err := Run(mixedFleet(), jobsTrace(trace.Job{GPUs: 1, Duration: time.Hour, GPUTypes: "H100|A10"}), Options{Policies: []string{"reactive"}})
	const want = "simulate: job 0 accepts GPU types H100, A10, which no pool of the config has (their gpu_model: a, B): it could never run"
	if err == nil || err.Error() != want {
		t.Errorf("err = %v, want %s", err, want)
	}
}
