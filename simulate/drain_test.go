package simulate

import (
	"container/heap"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/fleetcast/autoscaler/fleet"
	"github.com/fleetcast/autoscaler/providers/registry"
	"github.com/fleetcast/autoscaler/trace"
)

// brief is a result's figures without its samples, for failure messages.
func brief(r Result) string {
	return fmt.Sprintf("%s: cost %.2f, used %.3f GPU-h, lost %.3f (scale-in %.3f, reclaim %.3f), %d unsafe, %d launches, %d drains",
		r.Policy, r.CostUSD, r.UsedGPUHours, r.LostGPUHours, r.LostScaleInGPUHours, r.LostReclaimGPUHours, r.UnsafeTerminations, r.Launches, r.Drains)
}

// script is a policy that does, at given minutes, what a test says.
type script map[int64]func(e *engine)

func (s script) start(*engine) {}
func (s script) tick(e *engine) error {
	if f := s[e.now/60]; f != nil && e.now%60 == 0 {
		f(e)
	}
	return nil
}
func (script) notice(*engine, *node) {}

// TestDrainCheckpoints follows two 4-GPU jobs on one node, checkpointing
// every 30 minutes, through a drain at minute 70: job 0 does as the drain
// asks, job 1 ignores it.
func TestDrainCheckpoints(t *testing.T) {
	const gpus = 4
	lostMin := func(jobs, minutes int) float64 { return float64(jobs * minutes * 60 * gpus) }
	tests := []struct {
		name    string
		ckptDur time.Duration
		steps   func(t *testing.T) script
		// the losses, in GPU-seconds, and unsafe terminations at the end
		scaleIn, reclaim float64
		unsafe           int
	}{
		{"the drain waits for the checkpoint", 5 * time.Minute, func(t *testing.T) script {
			return script{
				74: func(e *engine) { wantOnNode(t, e, 0, 1) },
				75: func(e *engine) { wantOnNode(t, e, 1) }, // job 0 checkpointed and left; job 1 runs on
				95: func(e *engine) { wantOnNode(t, e, 1); e.undrain(e.live[0]) },
			}
		}, 0, 0, 0},
		{"at once", 0, func(t *testing.T) script {
			return script{
				70: func(e *engine) { wantOnNode(t, e, 1) },
				95: func(e *engine) { e.undrain(e.live[0]) },
			}
		}, 0, 0, 0},
		{"reclaimed before the checkpoint is durable", 5 * time.Minute, func(t *testing.T) script {
			return script{
				70: func(e *engine) { interruptAt(e, 73*60) },
				80: func(e *engine) { mustLaunch(t, e) },
			}
		}, 0, lostMin(2, 13), 0},
		{"reclaimed as the checkpoint is durable", 3 * time.Minute, func(t *testing.T) script {
			return script{
				70: func(e *engine) { interruptAt(e, 73*60) },
				80: func(e *engine) { mustLaunch(t, e) },
			}
		}, 0, lostMin(1, 13), 0},
		{"terminated under a checkpoint", 5 * time.Minute, func(t *testing.T) script {
			return script{
				72: func(e *engine) { e.terminate(e.live[0]); mustLaunch(t, e) },
			}
		}, lostMin(2, 12), 0, 1},
		{"terminated once the responsive job left", 5 * time.Minute, func(t *testing.T) script {
			return script{
				76: func(e *engine) { e.terminate(e.live[0]); mustLaunch(t, e) },
			}
		}, lostMin(1, 16), 0, 1},
		{"a cancelled drain's checkpoint completes", 30 * time.Minute, func(t *testing.T) script {
			return script{
				90: func(e *engine) { e.undrain(e.live[0]); wantOnNode(t, e, 0, 1) },
				99: func(e *engine) {
					if j := &e.jobs[0]; j.start != 0 || j.remaining != 3*3600 {
						t.Errorf("minute 99: job 0 started at %d with %ds left; want its first run, all 3h left", j.start, j.remaining)
					}
				},
				100: func(e *engine) {
					// Stopped with its 100 minutes saved, then restarted on
					// the node, back in service.
					if j := &e.jobs[0]; j.start != 100*60 || j.remaining != 3*3600-100*60 {
						t.Errorf("minute 100: job 0 started at %d with %ds left; want restarted at 6000 with 80m left", j.start, j.remaining)
					}
					wantOnNode(t, e, 0, 1)
				},
			}
		}, 0, 0, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tr := jobsTrace(trace.Job{GPUs: gpus, Duration: 3 * time.Hour}, trace.Job{GPUs: gpus, Duration: 3 * time.Hour})
			steps := tt.steps(t)
			steps[0] = func(e *engine) { mustLaunch(t, e) }
			if steps[70] == nil {
				steps[70] = func(*engine) {}
			}
			before := steps[70]
			steps[70] = func(e *engine) { e.drain(e.live[0]); before(e) }
			opt := Options{Interval: time.Minute, CheckpointInterval: 30 * time.Minute, CheckpointDuration: tt.ckptDur}
			e, err := newEngine(tr, onePool().Pools, opt, steps)
			if err != nil {
				t.Fatal(err)
			}
			e.jobs[1].unresponsive = true
			if err := e.run(); err != nil {
				t.Fatal(err)
			}
			if e.st.lostScaleIn != tt.scaleIn || e.st.lostReclaim != tt.reclaim || e.st.unsafe != tt.unsafe {
				t.Errorf("lost %v GPU-s to scale-in and %v to reclaim, %d unsafe; want %v, %v, %d",
					e.st.lostScaleIn, e.st.lostReclaim, e.st.unsafe, tt.scaleIn, tt.reclaim, tt.unsafe)
			}
			if e.st.usedGPUs != 2*3*3600*gpus {
				t.Errorf("used %v GPU-s, want the trace's %d", e.st.usedGPUs, 2*3*3600*gpus)
			}
		})
	}
}

// wantOnNode checks that the first live node holds exactly the jobs given.
func wantOnNode(t *testing.T, e *engine, jobs ...int32) {
	t.Helper()
	if got := e.live[0].jobs; !slices.Equal(slices.Sorted(slices.Values(got)), jobs) {
		t.Errorf("minute %d: node holds jobs %v, want %v", e.now/60, got, jobs)
	}
}

func mustLaunch(t *testing.T, e *engine) {
	t.Helper()
	if n, err := e.launch(0, 1, 0); n != 1 || err != nil {
		t.Fatalf("launch: %d, %v", n, err)
	}
}

// interruptAt has the cloud reclaim the first live node at s.
func interruptAt(e *engine, s int64) {
	heap.Push(&e.events, event{t: s, kind: evInterrupt, id: e.live[0].idx})
}

// watched wraps a policy and counts, before each of its cycles, the
// draining nodes still holding jobs, and those holding a job that ignores
// the drain: what the drain rule has to wait for.
type watched struct {
	policy
	waiting, unresponsive int
}

func (w *watched) tick(e *engine) error {
	for _, n := range e.live {
		if n.state == draining && len(n.jobs) > 0 {
			w.waiting++
			if slices.ContainsFunc(n.jobs, func(id int32) bool { return e.jobs[id].unresponsive }) {
				w.unresponsive++
			}
		}
	}
	return w.policy.tick(e)
}

// hasty wraps a policy and terminates every draining node at the end of
// its cycle, without waiting for the agent's confirmation: the drain rule
// broken.
type hasty struct{ policy }

func (h hasty) tick(e *engine) error {
	if err := h.policy.tick(e); err != nil {
		return err
	}
	for _, n := range slices.Clone(e.live) {
		if n.state == draining {
			e.terminate(n)
		}
	}
	return nil
}

// runPredictive simulates the predictive policy, wrapped by wrap, over tr.
func runPredictive(t *testing.T, cfg *fleet.Settings, tr *trace.Trace, opt Options, wrap func(*predictive) policy) Result {
	t.Helper()
	opt, err := opt.resolve(cfg, tr)
	if err != nil {
		t.Fatal(err)
	}
	p, err := newPredictive(cfg, opt)
	if err != nil {
		t.Fatal(err)
	}
	r, err := simulatePolicy(cfg, tr, opt, "predictive", wrap(p))
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func exampleConfig(t *testing.T) *fleet.Settings {
	t.Helper()
	return loadSettings(t, "../examples/local.hcl")
}

// loadSettings are the settings of the config file at path, whose
// controller block must leave the interval that Options take by default.
func loadSettings(t testing.TB, path string) *fleet.Settings {
	t.Helper()
	cfg, diags := registry.Load(path)
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	if got, want := cfg.Controller.Interval, fleet.DefaultControllerSettings().Interval; got != want {
		t.Fatalf("%s: controller.interval %v; the tests run at the default, %v", path, got, want)
	}
	s := cfg.Settings()
	return &s
}

// advising grows the reservation after 12 hours: capacity then moves from
// the burst pools to the reserved one, so busy burst nodes are drained, and
// the drain rule is put to the test.
const advising = 12 * time.Hour

// TestPredictiveNeverLosesWorkToScaleIn: with a fifth of the jobs ignoring
// drains and checkpoints that take 5 minutes, the predictive policy's
// drains wait (or are cancelled at drain.timeout) and it never terminates
// a node with work on it.
func TestPredictiveNeverLosesWorkToScaleIn(t *testing.T) {
	cfg := exampleConfig(t)
	unresponsive := 0
	for seed := uint64(1); seed <= 3; seed++ {
		tr := randomTrace(seed, 400)
		w := &watched{}
		r := runPredictive(t, cfg, tr, Options{Seed: int64(seed), UnresponsiveJobs: 0.2, CheckpointDuration: 5 * time.Minute,
			Reservations: Advised, AdviceAfter: advising},
			func(p *predictive) policy { w.policy = p; return w })
		if r.LostScaleInGPUHours != 0 || r.LostGPUHours != 0 || r.UnsafeTerminations != 0 || !near(r.UsedGPUHours, tr.GPUHours()) {
			t.Errorf("seed %d: %s", seed, brief(r))
		}
		// The rule was put to the test: drains waited for jobs (in every
		// run), some of which ignored them (in some).
		if w.waiting == 0 {
			t.Errorf("seed %d: no cycle saw a draining node with jobs", seed)
		}
		// The jobs that left their drained nodes are counted.
		if r.MovedJobs == 0 {
			t.Errorf("seed %d: drains with jobs, and no job moved: %s", seed, brief(r))
		}
		unresponsive += w.unresponsive
	}
	if unresponsive == 0 {
		t.Error("no cycle saw a draining node with a job that ignores the drain")
	}
}

// TestBrokenDrainRuleLosesWork: the simulator sees a break of the drain
// rule. An agent that confirms a drain while jobs remain, or a policy that
// terminates draining nodes without waiting, loses work to scale-in: to
// checkpoints still being written, and to jobs that ignore drains.
func TestBrokenDrainRuleLosesWork(t *testing.T) {
	cfg := exampleConfig(t)
	tr := randomTrace(1, 400)
	early := func(p *predictive) policy { p.confirms = func(*node) bool { return true }; return p }
	atOnce := func(p *predictive) policy { return hasty{p} }
	tests := []struct {
		name   string
		opt    Options
		broken func(*predictive) policy
	}{
		{"confirmed early, checkpoints take time", Options{CheckpointDuration: 5 * time.Minute, UnresponsiveJobs: -1}, early},
		{"confirmed early, jobs ignore drains", Options{CheckpointDuration: -1, UnresponsiveJobs: 0.2}, early},
		{"terminated at once, checkpoints take time", Options{CheckpointDuration: 5 * time.Minute, UnresponsiveJobs: -1}, atOnce},
		{"terminated at once, jobs ignore drains", Options{CheckpointDuration: -1, UnresponsiveJobs: 0.2}, atOnce},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.opt.Seed, tt.opt.Reservations, tt.opt.AdviceAfter = 1, Advised, advising
			r := runPredictive(t, cfg, tr, tt.opt, tt.broken)
			if r.LostScaleInGPUHours <= 0 || r.UnsafeTerminations == 0 || r.LostReclaimGPUHours != 0 ||
				!near(r.LostGPUHours, r.LostScaleInGPUHours) || !near(r.UsedGPUHours, tr.GPUHours()) {
				t.Errorf("%s; want work lost to scale-in only", brief(r))
			}
			// The same fleet with the rule kept loses nothing.
			if r := runPredictive(t, cfg, tr, tt.opt, func(p *predictive) policy { return p }); r.LostGPUHours != 0 {
				t.Errorf("with the rule kept: %s", brief(r))
			}
		})
	}
}

// TestLossByCause: work the cloud takes is lost to reclaim, work a policy's
// terminations take to scale-in.
func TestLossByCause(t *testing.T) {
	spot, wide, wideSpot := onePool(), onePool(), onePool()
	spot.Pools[0].Capacity = fleet.Spot
	wide.Pools[0].Max = 100 // room for Cluster Autoscaler to scale in busy nodes
	wideSpot.Pools[0].Max, wideSpot.Pools[0].Capacity = 100, fleet.Spot
	tr := randomTrace(4, 300)
	tests := []struct {
		name   string
		cfg    *fleet.Settings
		policy string
		opt    Options
		// whether work is lost to scale-in and to reclaim
		scaleIn, reclaim bool
	}{
		// The notice is shorter than a checkpoint: the drain it starts
		// cannot save the work.
		{"notice shorter than a checkpoint", spot, "predictive",
			Options{SpotNotice: time.Minute, CheckpointDuration: 5 * time.Minute, UnresponsiveJobs: -1}, false, true},
		{"notice long enough", spot, "predictive",
			Options{SpotNotice: 10 * time.Minute, CheckpointDuration: 2 * time.Minute, UnresponsiveJobs: -1}, false, false},
		// Jobs that ignore the notice lose their work whatever its length.
		{"jobs ignore the notice", spot, "predictive",
			Options{SpotNotice: 10 * time.Minute, CheckpointDuration: 2 * time.Minute, UnresponsiveJobs: 0.2}, false, true},
		// Cluster Autoscaler ignores notices, and evicts from the nodes it
		// removes.
		{"reactive on spot", wideSpot, "reactive", Options{}, true, true},
		{"reactive on demand", wide, "reactive", Options{}, true, false},
		{"static on spot", spot, "static", Options{}, false, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.opt.Seed, tt.opt.Policies = 2, []string{tt.policy}
			if tt.cfg.Pools[0].Capacity == fleet.Spot {
				tt.opt.SpotInterruptionsPerHour = 0.5
			}
			rep, err := Run(tt.cfg, tr, tt.opt)
			if err != nil {
				t.Fatal(err)
			}
			r := byPolicy(t, rep)[tt.policy]
			if (r.LostScaleInGPUHours > 0) != tt.scaleIn || (r.LostReclaimGPUHours > 0) != tt.reclaim ||
				!near(r.LostGPUHours, r.LostScaleInGPUHours+r.LostReclaimGPUHours) || !near(r.UsedGPUHours, tr.GPUHours()) {
				t.Errorf("%s; want loss to scale-in %v, to reclaim %v", brief(r), tt.scaleIn, tt.reclaim)
			}
			if (r.UnsafeTerminations > 0) != tt.scaleIn {
				t.Errorf("%d unsafe terminations: only the policy's own count", r.UnsafeTerminations)
			}
		})
	}
}

// TestUnresponsiveJobsDrawn: which jobs ignore drains follows the seed and
// the share, and is the same for every policy's engine.
func TestUnresponsiveJobsDrawn(t *testing.T) {
	tr := randomTrace(1, 2000)
	picked := func(seed int64, share float64) []bool {
		e, err := newEngine(tr, onePool().Pools, Options{Seed: seed, UnresponsiveJobs: share}, nil)
		if err != nil {
			t.Fatal(err)
		}
		out := make([]bool, len(e.jobs))
		for i := range e.jobs {
			out[i] = e.jobs[i].unresponsive
		}
		return out
	}
	count := func(xs []bool) (n int) {
		for _, x := range xs {
			if x {
				n++
			}
		}
		return n
	}
	a := picked(1, 0.2)
	if !slices.Equal(a, picked(1, 0.2)) {
		t.Error("the same seed picks different jobs")
	}
	if slices.Equal(a, picked(2, 0.2)) {
		t.Error("another seed picks the same jobs")
	}
	if n := count(a); n < 300 || n > 500 {
		t.Errorf("%d of 2000 jobs picked at 20%%", n)
	}
	if n := count(picked(1, -1)); n != 0 {
		t.Errorf("%d jobs picked at none", n)
	}
	if n := count(picked(1, 1)); n != len(tr.Jobs) {
		t.Errorf("%d of %d jobs picked at 1", n, len(tr.Jobs))
	}
	if _, err := Run(onePool(), tr, Options{UnresponsiveJobs: 1.5}); err == nil {
		t.Error("a share of 1.5: want an error")
	}
}

// TestDrainModelIsDeterministic: with slow checkpoints, jobs that ignore
// drains and spot interruptions, the same seed gives the same report (and
// another seed another, so the report does show what the seed draws).
func TestDrainModelIsDeterministic(t *testing.T) {
	spot := onePool()
	spot.Pools[0].Max, spot.Pools[0].Capacity = 100, fleet.Spot
	tests := []struct {
		name string
		cfg  *fleet.Settings
		rate float64
	}{
		{"example", exampleConfig(t), 0.3},
		{"spot", spot, 0.5},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tr := randomTrace(5, 300)
			opt := Options{Seed: 7, UnresponsiveJobs: 0.2, CheckpointDuration: 5 * time.Minute, SpotInterruptionsPerHour: tt.rate}
			var reports []string
			for _, seed := range []int64{7, 7, 8} {
				opt.Seed = seed
				rep, err := Run(tt.cfg, tr, opt)
				if err != nil {
					t.Fatal(err)
				}
				reports = append(reports, fmt.Sprint(rep.Policies))
			}
			if reports[0] != reports[1] {
				t.Errorf("two runs with one seed differ:\n%v\n%v", reports[0], reports[1])
			}
			if reports[0] == reports[2] {
				t.Error("two seeds give the same report")
			}
		})
	}
}
