package simulate

import (
	"testing"
	"time"

	"github.com/fleetcast/autoscaler/fleet"
	"github.com/fleetcast/autoscaler/trace"
)

// twoWidths are a cheap pool of 2-GPU nodes and a dearer one of 8-GPU
// nodes.
func twoWidths() *fleet.Settings {
	set := onePool()
	small, big := set.Pools[0], set.Pools[0]
	small.Name, small.GPUsPerNode, small.PricePerHour = "small", 2, 1.5
	big.Name = "big"
	set.Pools = []fleet.Pool{small, big}
	return set
}

// TestScaleUpByWidth: where nodes differ in width, the reactive policy
// buys each queued job's GPUs in the cheapest pool whose nodes can hold
// it, counted here by hand, and counts the nodes booting for them.
func TestScaleUpByWidth(t *testing.T) {
	tr := jobsTrace(
		trace.Job{GPUs: 1, Duration: time.Hour}, trace.Job{GPUs: 4, Duration: time.Hour}, trace.Job{GPUs: 4, Duration: time.Hour},
		trace.Job{GPUs: 8, Duration: time.Hour, Tier: "best_effort"}, trace.Job{GPUs: 16, Duration: time.Hour, Tier: "critical"},
	)
	set := twoWidths()
	set.Tiers = threeTiers()
	e := queuedEngine(t, set, tr)
	r := &reactive{}
	order := burstOrder(e.pools, false)
	// The 4- and 16-GPU jobs need 8-GPU nodes: 8 + 16 GPUs, 3 nodes; the
	// 1-GPU job one 2-GPU node; nothing for the best-effort job.
	if !r.scaleUp(e, order, 0, 0, nil) || e.pools[0].count != 1 || e.pools[1].count != 3 {
		t.Fatalf("small %d, big %d nodes; want 1 and 3", e.pools[0].count, e.pools[1].count)
	}
	// The same queue again: the booting nodes hold it.
	if r.scaleUp(e, order, 0, 0, nil) || e.pools[0].count != 1 || e.pools[1].count != 3 {
		t.Fatalf("again: small %d, big %d nodes; want 1 and 3", e.pools[0].count, e.pools[1].count)
	}
	// A buffer of 4 GPUs: two more of the cheapest nodes.
	if !r.scaleUp(e, order, 0, 4, nil) || e.pools[0].count != 3 || e.pools[1].count != 3 {
		t.Fatalf("a buffer: small %d, big %d nodes; want 3 and 3", e.pools[0].count, e.pools[1].count)
	}
}

// queuedEngine is an engine over tr's jobs with set's pools, every job
// queued.
func queuedEngine(t *testing.T, set *fleet.Settings, tr *trace.Trace) *engine {
	t.Helper()
	opt, err := prepare(set, tr, Options{})
	if err != nil {
		t.Fatal(err)
	}
	e, err := newEngine(tr, set.Pools, opt, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := range tr.Jobs {
		e.enqueue(int32(i))
	}
	return e
}

// TestScaleUpCarries: what a wider class does not use serves the narrower
// ones (an empty wide node, or the rest of a wide node bought for a
// narrower job), and a job wider than every node takes whole nodes, each
// counted here by hand.
func TestScaleUpCarries(t *testing.T) {
	one := trace.Job{GPUs: 1, Duration: time.Hour}
	for _, tt := range []struct {
		name       string
		jobs       []trace.Job
		bigBooting int
		small, big int // nodes after
	}{
		{"an empty 8-GPU node holds two 1-GPU jobs", []trace.Job{one, one}, 1, 0, 1},
		{"the 8-GPU node bought for a 4-GPU job holds two 1-GPU jobs", []trace.Job{{GPUs: 4, Duration: time.Hour}, one, one}, 0, 0, 1},
		{"and five 1-GPU jobs take it and one 2-GPU node", []trace.Job{{GPUs: 4, Duration: time.Hour}, one, one, one, one, one}, 0, 1, 1},
		{"a 12-GPU job takes two whole 8-GPU nodes", []trace.Job{{GPUs: 12, Duration: time.Hour}}, 0, 0, 2},
		{"and leaves nothing to a 1-GPU job", []trace.Job{{GPUs: 12, Duration: time.Hour}, one}, 0, 1, 2},
	} {
		e := queuedEngine(t, twoWidths(), jobsTrace(tt.jobs...))
		if tt.bigBooting > 0 {
			if n, err := e.launch(1, tt.bigBooting, 600); n != tt.bigBooting || err != nil {
				t.Fatalf("%s: launched %d, %v", tt.name, n, err)
			}
		}
		(&reactive{}).scaleUp(e, burstOrder(e.pools, false), 0, 0, nil)
		if e.pools[0].count != tt.small || e.pools[1].count != tt.big {
			t.Errorf("%s: small %d, big %d nodes; want %d and %d", tt.name, e.pools[0].count, e.pools[1].count, tt.small, tt.big)
		}
	}
	// An empty node narrower than every burst pool's holds nothing wider
	// queued: a 2-GPU job still buys.
	set := twoWidths()
	set.Pools[0].GPUsPerNode = 4
	res := set.Pools[0]
	res.Name, res.GPUsPerNode, res.Capacity, res.Max = "reserved", 1, fleet.Reserved, 2
	set.Pools = append(set.Pools, res)
	e := queuedEngine(t, set, jobsTrace(trace.Job{GPUs: 2, Duration: time.Hour}))
	if n, err := e.launch(2, 2, 0); n != 2 || err != nil {
		t.Fatalf("reserved: launched %d, %v", n, err)
	}
	if !(&reactive{}).scaleUp(e, burstOrder(e.pools, false), 0, 0, nil) || e.pools[0].count != 1 {
		t.Errorf("a 2-GPU job beside two empty 1-GPU nodes: %d 4-GPU nodes, want 1", e.pools[0].count)
	}
}

// TestReactiveServesWideJobs: with the cheapest nodes too narrow for some
// jobs, the reactive and headroom policies still serve every job.
func TestReactiveServesWideJobs(t *testing.T) {
	var jobs []trace.Job
	for i := range 40 {
		jobs = append(jobs, trace.Job{Submit: time.Duration(i) * 20 * time.Minute, GPUs: []int{1, 2, 8, 4}[i%4], Duration: 3 * time.Hour})
	}
	rep, err := Run(twoWidths(), jobsTrace(jobs...), Options{Seed: 1, Policies: []string{"reactive", "headroom"}, HeadroomGPUs: 8})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range rep.Policies {
		if r.UnservedGPUHours != 0 || r.WaitP99 > 3600 {
			t.Errorf("%s: %s", r.Policy, brief(r))
		}
	}
}
