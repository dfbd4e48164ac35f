package controller

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fleetcast/autoscaler/agent/report"
	"github.com/fleetcast/autoscaler/fleet"
	"github.com/fleetcast/autoscaler/internal/slurmtest"
	"github.com/fleetcast/autoscaler/planner"
	"github.com/fleetcast/autoscaler/slurm"
	"github.com/fleetcast/autoscaler/state"
)

// trainPool is a pool of 8-GPU A100 nodes serving Slurm's partition
// train.
func trainPool(name string) fleet.Pool {
	p := simPool(name, 10)
	p.GPUModel, p.Partitions = "A100", []string{"train"}
	return p
}

// newSlurmLoop is a cycler whose controller reads Slurm as set says, on
// the cycler's clock, or on now where it is set (a source read in the
// background, as Run does, must not read the test's clock while the test
// moves it).
func newSlurmLoop(t *testing.T, set fleet.SlurmSettings, now func() time.Time, pools ...fleet.Pool) (*cycler, *SlurmSource) {
	t.Helper()
	var src *SlurmSource
	l := newLoopWith(t, false, nil, func(l *cycler, o *Options) {
		if now == nil {
			now = o.Now
		}
		var err error
		if src, err = NewSlurmSource(SlurmOptions{Settings: set, Pools: pools, Pending: o.Pending, Now: now}); err != nil {
			t.Fatal(err)
		}
		o.Slurm = src
	}, pools...)
	return l, src
}

// TestSlurmSourceCapture: a read of the cluster (the commands stand-ins
// printing a capture of Slurm 22.05's JSON) becomes pending demand scoped
// to the partition's pools, the plan shows the queue, and the running
// job's end is an expected end; a failing read leaves the last whole
// read's demand, says the source is degraded and counts the error, until
// that read is older than a push counts; a whole read again ends it.
func TestSlurmSourceCapture(t *testing.T) {
	dir := t.TempDir()
	script := func(name, body string) string { return slurmtest.Script(t, dir, name, body) }
	// The queue: job 1 pending, too wide for its partition
	// (PartitionNodeLimit); job 2 running, 30 minutes' limit; 3 and 4
	// blocked by limits; 5 waiting for priority, one A100 (an edited live
	// capture: slurm.TestDemandLimits).
	flag, queue := filepath.Join(dir, "fail"), filepath.Join(dir, "queue.json")
	capture, err := os.ReadFile(slurmtest.Capture(t, "squeue-22.05-limits.json"))
	if err != nil {
		t.Fatal(err)
	}
	// Job 5, the last, of QOS critical: its tier.
	i := bytes.LastIndex(capture, []byte(`"qos": ""`))
	capture = slices.Concat(capture[:i], []byte(`"qos": "critical"`), capture[i+len(`"qos": ""`):])
	if err := os.WriteFile(queue, capture, 0o644); err != nil {
		t.Fatal(err)
	}
	set := fleet.DefaultSlurmSettings()
	set.Squeue = script("squeue", `[ -e `+flag+` ] && { sleep 0.2; echo "slurm_load_jobs error: Unable to contact slurm controller (connect failure)" >&2; exit 1; }; cat `+queue)
	set.Sinfo = script("sinfo", "cat "+slurmtest.Capture(t, "sinfo-22.05.json"))
	l, src := newSlurmLoop(t, set, nil, trainPool("train-od"), simPool("other", 10))

	p := l.cycle(t)
	if q := p.Queue; q == nil || q.Degraded != "not read yet" || !hasCode(p.Notes, planner.ReasonQueueDegraded) || p.Demand.PendingGPUs != 0 {
		t.Fatalf("before a read: queue %+v, notes %+v, pending %d", q, p.Notes, p.Demand.PendingGPUs)
	}
	if err := src.Read(context.Background()); err != nil {
		t.Fatal(err)
	}
	p = l.cycle(t)
	st := l.c.Last().State
	if want := []fleet.ScopedDemand{{Partition: "train", GPUModel: "A100", GPUs: 1, Tier: "critical"}}; p.Demand.PendingGPUs != 1 || !slices.Equal(st.Scoped, want) {
		t.Errorf("pending %d, scoped %+v; want 1, %+v", p.Demand.PendingGPUs, st.Scoped, want)
	}
	if launched := launchesIn(p); launched["train-od"] != 1 || len(launched) != 1 || hasCode(p.Notes, planner.ReasonQueueDegraded) {
		t.Errorf("launches %v, notes %+v; want one node in train-od", launched, p.Notes)
	}
	q := p.Queue
	reasons := map[string]fleet.QueueLine{}
	for _, l := range q.Pending {
		reasons[l.Reason] = l
	}
	if q.Version != "22.05.8" || q.RunningJobs != 1 || q.RunningGPUs != 4 || len(q.Nodes) == 0 || !reasons["Priority"].Bought ||
		reasons["AssocGrpGRES"].Jobs != 1 || reasons["QOSMaxGRESPerUser"].Jobs != 1 || reasons["AssocGrpGRES"].Bought {
		t.Errorf("queue %+v", q)
	}

	// The running job, 2, reported by a node's agent: its end is the
	// start Slurm gives plus its 30 minutes.
	l.cycle(t) // the launch listed
	node := l.c.Last().State.Nodes[0].ID
	if _, err := l.agents.Accept(context.Background(), &report.Report{Node: node, SentAt: l.now, Healthy: true,
		GPUs: []report.GPU{{Index: 0, UUID: "GPU-0"}}, Jobs: []report.Job{{ID: "2", GPUs: []int{0}, Start: l.now}}}); err != nil {
		t.Fatal(err)
	}
	if _, err := l.c.Cycle(context.Background()); err != nil {
		t.Fatal(err)
	}
	if end := jobEnd(l.c.Last().State, node, "2"); !end.Equal(time.Unix(1796563889, 0).Add(30 * time.Minute)) {
		t.Errorf("job 2's expected end %v", end)
	}
	// An administrator raises its limit to 90 minutes: its end moves on.
	if err := os.WriteFile(queue, bytes.Replace(capture, []byte(`"time_limit": 30,`), []byte(`"time_limit": 90,`), 1), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := src.Read(context.Background()); err != nil {
		t.Fatal(err)
	}
	if _, err := l.c.Cycle(context.Background()); err != nil {
		t.Fatal(err)
	}
	if end := jobEnd(l.c.Last().State, node, "2"); !end.Equal(time.Unix(1796563889, 0).Add(90 * time.Minute)) {
		t.Errorf("job 2's expected end %v after its limit was raised to 90 minutes", end)
	}

	// squeue fails: the last read's demand stands, the plan says why.
	if err := os.WriteFile(flag, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := src.Read(context.Background()); err == nil || !strings.Contains(err.Error(), "Unable to contact slurm controller") {
		t.Fatalf("read: %v", err)
	}
	p = l.cycle(t)
	if q := p.Queue; !strings.Contains(q.Degraded, "Unable to contact") || q.Expired || p.Demand.PendingGPUs != 1 || !hasCode(p.Notes, planner.ReasonQueueDegraded) {
		t.Errorf("degraded: queue %+v, pending %d, notes %+v", q, p.Demand.PendingGPUs, p.Notes)
	}
	scrape(t, l.c).want(t, "fleetcast_slurm_degraded", 1)
	if sum := readSeconds(t, l.c); sum < 0.2 {
		t.Errorf("reads took %vs in all, as fleetcast_slurm_read_seconds has it; the failed one alone took 0.2s", sum)
	}
	// Past a push's TTL the last read's demand no longer counts.
	l.now = l.now.Add(11 * time.Minute)
	p = l.cycle(t)
	if q := p.Queue; !q.Expired || p.Demand.PendingGPUs != 0 {
		t.Errorf("expired: queue %+v, pending %d", q, p.Demand.PendingGPUs)
	}
	// A whole read again.
	if err := os.Remove(flag); err != nil {
		t.Fatal(err)
	}
	if err := src.Read(context.Background()); err != nil {
		t.Fatal(err)
	}
	p = l.cycle(t)
	if q := p.Queue; q.Degraded != "" || q.Expired || p.Demand.PendingGPUs != 1 || hasCode(p.Notes, planner.ReasonQueueDegraded) {
		t.Errorf("read again: queue %+v, pending %d, notes %+v", q, p.Demand.PendingGPUs, p.Notes)
	}
	m := scrape(t, l.c)
	m.want(t, "fleetcast_slurm_degraded", 0)
	m.want(t, "fleetcast_slurm_reads_total", 4)
	m.want(t, "fleetcast_slurm_read_errors_total", 1)
	m.want(t, "fleetcast_slurm_read_seconds", 4)
}

// TestSlurmLive: on a real Slurm 22.05 (two nodes of eight A100s in
// partition train), jobs submitted with sbatch show up as pending demand
// of their shape in the partition's pool at the first cycle after a read;
// a held job and one waiting on another buy nothing and the plan counts
// them by reason; the running job's time limit is its expected end; with
// slurmctld killed, a read fails within its timeout, a cycle in the
// meantime does not wait for it, and the plan says the source is
// degraded.
func TestSlurmLive(t *testing.T) {
	c := slurmtest.Start(t, slurmtest.Options{Nodes: []string{"gpu-1", "gpu-2"}})
	set := fleet.DefaultSlurmSettings()
	set.Conf, set.Timeout, set.Interval = c.Conf, 3*time.Second, time.Second
	// The source reads in the background on a copy of the test's clock,
	// set as the test moves it (cycle).
	var clock atomic.Int64
	clock.Store(t0.UnixNano())
	l, src := newSlurmLoop(t, set, func() time.Time { return time.Unix(0, clock.Load()).UTC() }, trainPool("train-od"), simPool("other", 10))
	cycle := func() planner.Plan {
		p := l.cycle(t)
		clock.Store(l.now.UnixNano())
		return p
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); src.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })

	running := c.Submit(t, "--gres=gpu:8", "-N", "2", "-t", "30", "-A", "team-b", "-p", "train")
	wide := c.Submit(t, "--gres=gpu:4", "-N", "2", "-A", "team-a", "-p", "train")
	typed := c.Submit(t, "--gres=gpu:a100:2", "-A", "team-a", "-p", "train")
	held := c.Submit(t, "-H", "--gres=gpu:2", "-A", "team-c")
	after := c.Submit(t, "--dependency=afterok:"+running, "--gres=gpu:1", "-A", "team-c")

	// Slurm gives each job its reason at its next scheduling pass.
	var jobs map[string]slurm.Job
	deadline := time.Now().Add(30 * time.Second)
	for {
		s, err := (&slurm.Reader{Conf: c.Conf}).Read(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		jobs = map[string]slurm.Job{}
		for _, j := range s.Jobs {
			jobs[j.ID] = j
		}
		if r := jobs[running]; r.Running() && jobs[held].Reason == "JobHeldUser" && jobs[after].Reason == "Dependency" &&
			slurm.Waiting(jobs[wide].Reason) && slurm.Waiting(jobs[typed].Reason) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("jobs not placed as expected within 30 s: %+v", jobs)
		}
		time.Sleep(500 * time.Millisecond)
	}
	// A read of the source's begun since, and the first cycle after it.
	for n := src.Reads(); src.Reads() < n+2; {
		if time.Now().After(deadline.Add(30 * time.Second)) {
			t.Fatal("the source has not read for 30 s")
		}
		time.Sleep(100 * time.Millisecond)
	}
	p := cycle()
	st := l.c.Last().State
	// Two whole nodes for the two-node job, two GPUs of an A100 node for
	// the typed one: three nodes of the partition's pool, none elsewhere.
	want := []fleet.ScopedDemand{{Partition: "train", Nodes: 2, GPUs: 16}, {Partition: "train", GPUModel: "A100", GPUs: 2}}
	if p.Demand.PendingGPUs != 18 || !slices.Equal(st.Scoped, want) {
		t.Errorf("pending %d, scoped %+v; want 18, %+v", p.Demand.PendingGPUs, st.Scoped, want)
	}
	if launched := launchesIn(p); launched["train-od"] != 3 || len(launched) != 1 {
		t.Errorf("launched %v; want 3 nodes of train-od", launched)
	}
	got := map[string]fleet.QueueLine{}
	for _, l := range p.Queue.Pending {
		got[l.Reason] = l
	}
	for reason, gpus := range map[string]int{"JobHeldUser": 2, "Dependency": 1} {
		if l := got[reason]; l.Jobs != 1 || l.GPUs != gpus || l.Bought || l.Partition != "train" {
			t.Errorf("pending for %s: %+v; want 1 job of %d GPUs in train, not bought for (all %+v)", reason, l, gpus, p.Queue.Pending)
		}
	}
	if q := p.Queue; q.RunningJobs != 1 || q.RunningGPUs != 16 || q.Degraded != "" || q.Version == "" {
		t.Errorf("queue %+v", q)
	}

	// The running job on a node its agent reports: its end is Slurm's
	// start plus 30 minutes.
	cycle() // the launches listed
	node := l.c.Last().State.Nodes[0].ID
	if _, err := l.agents.Accept(context.Background(), &report.Report{Node: node, SentAt: l.now, Healthy: true,
		GPUs: []report.GPU{{Index: 0, UUID: "GPU-0"}}, Jobs: []report.Job{{ID: running, GPUs: []int{0}, Start: l.now}}}); err != nil {
		t.Fatal(err)
	}
	if _, err := l.c.Cycle(context.Background()); err != nil {
		t.Fatal(err)
	}
	if end, want := jobEnd(l.c.Last().State, node, running), jobs[running].Start.Add(30*time.Minute); end.IsZero() || !end.Equal(want) {
		t.Errorf("the running job's expected end %v; want %v", end, want)
	}

	// Whose work it is, as Slurm says: the waiting jobs by account (the
	// held job and the one on a dependency wait for no capacity), and the
	// running job's account and submission filled in for its agent.
	live := l.c.usage.Live()
	waiting := map[string]int{}
	for _, w := range live.Waiting {
		waiting[w.Team] += w.GPUs
	}
	if waiting["team-a"] != 10 || len(waiting) != 1 {
		t.Errorf("waiting by team %v; want team-a's 10 GPUs alone", waiting)
	}
	if i := slices.IndexFunc(live.Running, func(j state.UsageJob) bool { return j.ID == running }); i < 0 ||
		live.Running[i].Team != "team-b" || !live.Running[i].Submitted.Equal(jobs[running].Submit) {
		t.Errorf("the running job's record %+v; want team-b's, submitted %v", live.Running, jobs[running].Submit)
	}

	// slurmctld killed: the source's next read fails within its
	// timeouts, and the cycles run meanwhile do not wait for it.
	c.KillController()
	killed, cycles := time.Now(), 0
	for src.Queue(l.now).Degraded == "" {
		cycleStart := time.Now()
		if _, err := l.c.Cycle(context.Background()); err != nil { // on the clock as it is: the read's demand counts
			t.Fatal(err)
		}
		if took := time.Since(cycleStart); took > time.Second {
			t.Errorf("a cycle took %v while Slurm was being read", took)
		}
		cycles++
		if time.Since(killed) > set.Interval+2*set.Timeout+5*time.Second {
			t.Fatalf("not degraded %v after slurmctld was killed", time.Since(killed))
		}
		time.Sleep(100 * time.Millisecond)
	}
	if cycles < 3 {
		t.Errorf("%d cycles ran while the failing read was under way; the test shows little", cycles)
	}
	p, err := l.c.Cycle(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if q := p.Queue; q.Degraded == "" || !hasCode(p.Notes, planner.ReasonQueueDegraded) || p.Demand.PendingGPUs != 18 {
		t.Errorf("slurmctld down: queue %+v, notes %+v, pending %d", q, p.Notes, p.Demand.PendingGPUs)
	}
	m := scrape(t, l.c)
	m.want(t, "fleetcast_slurm_degraded", 1)
	if n := m.value["fleetcast_slurm_read_errors_total"]; n < 1 {
		t.Errorf("%v failed reads counted; want at least 1", n)
	}
}

// hasCode reports whether a note of the code is among notes.
func hasCode(notes []planner.Note, code planner.Reason) bool {
	return slices.ContainsFunc(notes, func(n planner.Note) bool { return n.Code == code })
}

// launchesIn is the nodes a plan launches, by pool.
func launchesIn(p planner.Plan) map[string]int {
	out := map[string]int{}
	for _, a := range p.Actions {
		if a.Kind == planner.Launch {
			out[a.Pool] += a.Count
		}
	}
	return out
}

// jobEnd is the expected end of the job on the node, as st has it.
func jobEnd(st *fleet.State, node, job string) time.Time {
	for _, n := range st.Nodes {
		for _, j := range n.Jobs {
			if n.ID == node && j.ID == job {
				return j.ExpectedEnd
			}
		}
	}
	return time.Time{}
}

// readSeconds is the sum of fleetcast_slurm_read_seconds.
func readSeconds(t *testing.T, c *Controller) float64 {
	t.Helper()
	mfs, err := c.metrics.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == "fleetcast_slurm_read_seconds" {
			return mf.GetMetric()[0].GetHistogram().GetSampleSum()
		}
	}
	t.Fatal("no fleetcast_slurm_read_seconds")
	return 0
}
