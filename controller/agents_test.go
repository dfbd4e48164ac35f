package controller

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/fleetcast/autoscaler/agent/report"
	"github.com/fleetcast/autoscaler/controller/reports"
	"github.com/fleetcast/autoscaler/fleet"
	"github.com/fleetcast/autoscaler/nodeauth/nodeauthtest"
)

// agentsRig serves the real report receiver over the Agents view.
type agentsRig struct {
	now    time.Time
	agents *Agents
	tokens *nodeauthtest.Tokens
	h      http.Handler
}

func newAgentsRig(t *testing.T) *agentsRig {
	r := &agentsRig{now: t0}
	r.agents = NewAgents(func() time.Time { return r.now })
	tok := nodeauthtest.New(t)
	r.tokens = tok
	r.h = (&reports.Receiver{Credentials: tok, Store: r.agents, Now: func() time.Time { return r.now }}).Handler()
	return r
}

// send posts a report made by an agent whose clock reads agentNow.
func (r *agentsRig) send(t *testing.T, node string, agentNow time.Time, healthy bool, jobs ...report.Job) report.Answer {
	t.Helper()
	rep := report.Report{Node: node, SentAt: agentNow, Healthy: healthy, Jobs: jobs, Drain: report.DrainStatus{State: report.NotDraining}}
	if healthy {
		rep.GPUs = []report.GPU{{Index: 0, UUID: "GPU-0", Name: "NVIDIA H100", MemoryTotal: 80 << 30}}
	}
	body, _ := json.Marshal(rep)
	req := httptest.NewRequest(http.MethodPost, fmt.Sprintf("/v1/agents/%s/report", node), bytes.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+r.tokens.For(node))
	req.Header.Set("Content-Type", "application/json")
	w := httptest.NewRecorder()
	r.h.ServeHTTP(w, req)
	if w.Code != http.StatusOK {
		t.Fatalf("report from %s: %d %s", node, w.Code, w.Body)
	}
	var ans report.Answer
	if err := json.Unmarshal(w.Body.Bytes(), &ans); err != nil {
		t.Fatal(err)
	}
	return ans
}

func TestAgentsTimesAreTheControllers(t *testing.T) {
	r := newAgentsRig(t)
	// An agent an hour behind: its times are kept as they are, so its
	// checkpoints look older than they are (drains wait; no work lost).
	agent := t0.Add(-time.Hour)
	// Its team, tier, name and submission come across as it registered them.
	r.send(t, "i-1", agent, true, report.Job{ID: "train", GPUs: []int{0}, Start: agent.Add(-2 * time.Hour), LastCheckpoint: agent.Add(-time.Minute), LongRunning: true,
		Team: "ml-research", Tier: "batch", Name: "llama-ft.7", Submitted: agent.Add(-3 * time.Hour)})
	n := fleet.Node{ID: "i-1"}
	if !r.agents.Observe(&n) {
		t.Error("healthy report not seen as healthy")
	}
	want := fleet.Job{ID: "train", GPUs: 1, Start: agent.Add(-2 * time.Hour), LastCheckpoint: agent.Add(-time.Minute), LongRunning: true,
		Team: "ml-research", Tier: "batch", Name: "llama-ft.7", Submitted: agent.Add(-3 * time.Hour)}
	if len(n.Jobs) != 1 || n.Jobs[0] != want {
		t.Errorf("jobs = %+v, want %+v", n.Jobs, want)
	}
	if !n.LastReport.Equal(t0) || !n.IdleSince.IsZero() {
		t.Errorf("last report %v (want %v), idle since %v (want zero: it holds a job)", n.LastReport, t0, n.IdleSince)
	}
	// An agent two minutes ahead cannot make a checkpoint look newer.
	r.now = t0.Add(time.Minute)
	agent = r.now.Add(2 * time.Minute)
	r.send(t, "i-1", agent, true, report.Job{ID: "train", GPUs: []int{0}, Start: agent.Add(-2 * time.Hour), LastCheckpoint: agent})
	r.agents.Observe(&n)
	if !n.Jobs[0].LastCheckpoint.Equal(r.now) {
		t.Errorf("checkpoint from an agent 2m ahead at %v, want the controller's %v", n.Jobs[0].LastCheckpoint, r.now)
	}
	// Its times are moved back by the 2 minutes it is ahead, not only
	// capped at the arrival: a checkpoint 30 s before its stamp was made 30
	// s before the controller heard of it.
	r.now = r.now.Add(time.Minute)
	agent = r.now.Add(2 * time.Minute)
	r.send(t, "i-1", agent, true, report.Job{ID: "train", GPUs: []int{0}, Start: agent.Add(-2 * time.Hour), LastCheckpoint: agent.Add(-30 * time.Second), Submitted: agent.Add(-3 * time.Hour)})
	r.agents.Observe(&n)
	if want := r.now.Add(-30 * time.Second); !n.Jobs[0].LastCheckpoint.Equal(want) || !n.Jobs[0].Start.Equal(r.now.Add(-2*time.Hour)) {
		t.Errorf("checkpoint %v, start %v from an agent 2m ahead; want %v and %v, on the controller's clock", n.Jobs[0].LastCheckpoint, n.Jobs[0].Start, want, r.now.Add(-2*time.Hour))
	}
	// Its submission moves with its start: the queue time is as the agent saw it.
	if q, ok := n.Jobs[0].QueueTime(); !n.Jobs[0].Submitted.Equal(r.now.Add(-3*time.Hour)) || !ok || q != time.Hour {
		t.Errorf("submitted %v (queue time %v, %v) from an agent 2m ahead; want %v (1h), on the controller's clock", n.Jobs[0].Submitted, q, ok, r.now.Add(-3*time.Hour))
	}
	// A report made earlier but delivered late (a retry) is not taken over
	// the newer one, and its times never pass its arrival.
	r.now = t0.Add(5 * time.Minute)
	r.send(t, "i-1", t0.Add(2*time.Minute), true)
	r.agents.Observe(&n)
	if len(n.Jobs) != 1 || !n.LastReport.Equal(t0.Add(2*time.Minute)) {
		t.Errorf("an out-of-order report was taken: jobs %+v, last report %v", n.Jobs, n.LastReport)
	}
}

// TestAgentsExpectedEnds: a job's expected end is moved onto the
// controller's clock, as its other times are; a node cannot push it later
// than it first said (a hint delays a launch at most once), but may bring
// it forward; one before the job's start says nothing; and a job gone and
// back starts afresh.
func TestAgentsExpectedEnds(t *testing.T) {
	r := newAgentsRig(t)
	agent := t0.Add(2 * time.Minute) // two minutes ahead
	job := func(end time.Duration) report.Job {
		return report.Job{ID: "train", GPUs: []int{0}, Start: agent.Add(-time.Hour), ExpectedEnd: agent.Add(end)}
	}
	n := fleet.Node{ID: "i-1"}
	end := func() time.Time {
		t.Helper()
		r.agents.Observe(&n)
		if len(n.Jobs) != 1 {
			t.Fatalf("jobs %+v", n.Jobs)
		}
		return n.Jobs[0].ExpectedEnd
	}
	r.send(t, "i-1", agent, true, job(time.Hour))
	if got := end(); !got.Equal(t0.Add(time.Hour)) {
		t.Fatalf("expected end %v; want %v, on the controller's clock", got, t0.Add(time.Hour))
	}
	r.now, agent = r.now.Add(time.Minute), agent.Add(time.Minute)
	r.send(t, "i-1", agent, true, job(3*time.Hour))
	if got := end(); !got.Equal(t0.Add(time.Hour)) {
		t.Errorf("expected end pushed to %v; want the first, %v", got, t0.Add(time.Hour))
	}
	r.now, agent = r.now.Add(time.Minute), agent.Add(time.Minute)
	r.send(t, "i-1", agent, true, job(10*time.Minute))
	if got, want := end(), r.now.Add(10*time.Minute); !got.Equal(want) {
		t.Errorf("expected end brought forward to %v; want %v", got, want)
	}
	r.now, agent = r.now.Add(time.Minute), agent.Add(time.Minute)
	r.send(t, "i-1", agent, true, job(-2*time.Hour)) // before the start
	if got := end(); !got.IsZero() {
		t.Errorf("an expected end before the job's start: %v; want none", got)
	}
	r.now, agent = r.now.Add(time.Minute), agent.Add(time.Minute)
	r.send(t, "i-1", agent, true, job(4*time.Hour)) // nor does it clear the bound
	if got, want := end(), r.now.Add(8*time.Minute); !got.Equal(want) {
		t.Errorf("expected end after a report without one: %v; want the earlier bound, %v", got, want)
	}
	r.now, agent = r.now.Add(time.Minute), agent.Add(time.Minute)
	r.send(t, "i-1", agent, true) // the job ended
	r.now, agent = r.now.Add(time.Minute), agent.Add(time.Minute)
	r.send(t, "i-1", agent, true, job(5*time.Hour)) // a new run of it
	if got, want := end(), r.now.Add(5*time.Hour); !got.Equal(want) {
		t.Errorf("a job back after it ended: expected end %v; want %v", got, want)
	}
}

func TestAgentsIdleSince(t *testing.T) {
	r := newAgentsRig(t)
	n := fleet.Node{ID: "i-2"}
	if r.agents.Observe(&n) || !n.LastReport.IsZero() {
		t.Fatal("a node that never reported must look silent")
	}
	step := func(d time.Duration, healthy bool, jobs ...report.Job) {
		r.now = r.now.Add(d)
		r.send(t, "i-2", r.now, healthy, jobs...)
		r.agents.Observe(&n)
	}
	job := report.Job{ID: "j", GPUs: []int{0}, Start: t0}
	tests := []struct {
		name      string
		d         time.Duration
		healthy   bool
		jobs      []report.Job
		idleSince time.Time
	}{
		{"first empty report", 0, true, nil, t0},
		{"still empty", time.Minute, true, nil, t0},
		{"a job arrives", time.Minute, true, []report.Job{job}, time.Time{}},
		{"it leaves", time.Minute, true, nil, t0.Add(3 * time.Minute)},
		{"GPUs unreadable: never idle", time.Minute, false, nil, time.Time{}},
		{"readable again: idle from now", time.Minute, true, nil, t0.Add(5 * time.Minute)},
	}
	for _, tt := range tests {
		step(tt.d, tt.healthy, tt.jobs...)
		if !n.IdleSince.Equal(tt.idleSince) {
			t.Errorf("%s: idle since %v, want %v", tt.name, n.IdleSince, tt.idleSince)
		}
	}
}

func TestAgentsAnswerWithTheControllersDrain(t *testing.T) {
	r := newAgentsRig(t)
	d := report.DrainRequest{ID: "drain-1", Since: t0, Deadline: t0.Add(30 * time.Minute), Signal: "SIGUSR1"}
	r.agents.SetDrain("i-3", &d)
	if ans := r.send(t, "i-3", t0, true); ans.Drain == nil || *ans.Drain != d {
		t.Errorf("answer %+v, want drain %+v", ans, d)
	}
	if ans := r.send(t, "i-4", t0, true); ans.Drain != nil {
		t.Errorf("another node was asked to drain: %+v", ans)
	}
	r.agents.SetDrain("i-3", nil)
	if ans := r.send(t, "i-3", t0, true); ans.Drain != nil {
		t.Errorf("drain still asked after it was cleared: %+v", ans)
	}
	r.agents.SetDrain("i-3", &d)
	r.agents.Forget("i-3")
	n := fleet.Node{ID: "i-3"}
	if r.agents.Observe(&n) {
		t.Error("a forgotten node still has a report")
	}
	if ans := r.send(t, "i-3", t0, true); ans.Drain != nil {
		t.Errorf("a forgotten node's drain survived: %+v", ans)
	}
}

func TestAgentsConcurrent(t *testing.T) {
	r := newAgentsRig(t)
	var wg sync.WaitGroup
	for i := range 8 {
		node := fmt.Sprint("i-", i)
		wg.Go(func() {
			for range 50 {
				r.send(t, node, t0, true, report.Job{ID: "j", GPUs: []int{0}, Start: t0})
				n := fleet.Node{ID: node}
				r.agents.Observe(&n)
				r.agents.SetDrain(node, &report.DrainRequest{ID: "d"})
			}
		})
	}
	wg.Wait()
}

// TestAgentsNoticeAndFault: a notice or a GPU fault is as the latest
// report says: a notice no longer reported is gone, and a report without
// GPU data by design (-no-gpu) is no fault.
func TestAgentsNoticeAndFault(t *testing.T) {
	r := newAgentsRig(t)
	send := func(notice *report.Notice, healthy bool, gpuErr string) fleet.Node {
		t.Helper()
		r.now = r.now.Add(time.Minute)
		rep := &report.Report{Node: "i-1", SentAt: r.now, Healthy: healthy, GPUError: gpuErr, Notice: notice, Drain: report.DrainStatus{State: report.NotDraining}}
		if _, err := r.agents.Accept(context.Background(), rep); err != nil {
			t.Fatal(err)
		}
		n := fleet.Node{ID: "i-1"}
		r.agents.Observe(&n)
		return n
	}
	at := t0.Add(3 * time.Minute)
	if n := send(&report.Notice{Kind: report.Interruption, Action: "stop", Time: at}, true, ""); !n.InterruptAt.Equal(at) || n.Rebalance {
		t.Errorf("interruption reported: %+v", n)
	}
	if n := send(nil, true, ""); !n.InterruptAt.IsZero() {
		t.Errorf("a notice no longer reported still counts: %+v", n)
	}
	if n := send(&report.Notice{Kind: report.Rebalance, Time: at}, true, ""); !n.Rebalance || !n.InterruptAt.IsZero() {
		t.Errorf("rebalance reported: %+v", n)
	}
	if n := send(nil, false, ""); n.GPUFault != "" || !n.IdleSince.IsZero() {
		t.Errorf("an agent without GPU data: fault %q, idle since %v; want no fault and not idle", n.GPUFault, n.IdleSince)
	}
	if n := send(nil, false, "NVML: timeout"); n.GPUFault != "NVML: timeout" || !n.GPUFaultSince.Equal(r.now) {
		t.Errorf("an NVML failure: %+v", n)
	}
	if n := send(nil, true, ""); n.GPUFault != "" || !n.GPUFaultSince.IsZero() {
		t.Errorf("GPUs read again: %+v", n)
	}
}

// TestAgentsJobIdleness: report by report, a job is idle while every GPU
// it holds reads under the threshold (SM activity where a GPU gives it,
// else its utilisation): since its start if it was never busy, else since
// the report that found it idle; a report that cannot read the GPUs
// changes nothing; each change is a new list of jobs (JobsSeq); and the
// node says which activity it read. A job older than the controller's
// view of its node is taken to have worked; a MIG GPU reads nothing.
func TestAgentsJobIdleness(t *testing.T) {
	pct := func(v int) *int { return &v }
	start := t0.Add(-time.Minute) // registered just before the node's first report
	steps := []struct {
		name      string
		healthy   bool
		gpus      []report.GPU // GPUs 0 and 1; the job holds both
		idleSince time.Time    // zero: not idle
		firstBusy time.Time
		newSeq    bool
		source    string
	}{
		{"idle from its start", true, []report.GPU{{Index: 0, UtilGPU: 0}, {Index: 1, UtilGPU: 4}}, start, time.Time{}, true, "utilization"},
		{"still idle", true, []report.GPU{{Index: 0, UtilGPU: 1}, {Index: 1, UtilGPU: 0}}, start, time.Time{}, false, "utilization"},
		{"one GPU busy: the job works", true, []report.GPU{{Index: 0, UtilGPU: 0}, {Index: 1, UtilGPU: 5}}, time.Time{}, t0.Add(2 * time.Minute), true, "utilization"},
		{"stalls", true, []report.GPU{{Index: 0, UtilGPU: 0, SMActive: pct(2)}, {Index: 1, UtilGPU: 90, SMActive: pct(3)}}, t0.Add(3 * time.Minute), t0.Add(2 * time.Minute), true, "sm_active"},
		{"GPUs unread: as it was", false, nil, t0.Add(3 * time.Minute), t0.Add(2 * time.Minute), false, "sm_active"},
		{"SM activity over utilisation", true, []report.GPU{{Index: 0, UtilGPU: 0, SMActive: pct(40)}, {Index: 1, UtilGPU: 0}}, time.Time{}, t0.Add(2 * time.Minute), true, "mixed"},
	}
	r := newAgentsRig(t)
	r.agents.SetIdleThreshold(5)
	var seq uint64
	for i, s := range steps {
		r.now = t0.Add(time.Duration(i) * time.Minute)
		rep := &report.Report{Node: "i-1", SentAt: r.now, Healthy: s.healthy, GPUs: s.gpus, Drain: report.DrainStatus{State: report.NotDraining},
			Jobs: []report.Job{{ID: "etl", GPUs: []int{0, 1}, Start: start}}}
		if !s.healthy {
			rep.GPUError = "GPU is lost"
		}
		if _, err := r.agents.Accept(context.Background(), rep); err != nil {
			t.Fatal(err)
		}
		n := fleet.Node{ID: "i-1"}
		r.agents.Observe(&n)
		j := n.Jobs[0]
		if !j.IdleSince.Equal(s.idleSince) || !j.FirstBusy.Equal(s.firstBusy) || n.ActivitySource != s.source {
			t.Errorf("%s: idle since %v, first busy %v, source %q; want %v, %v, %q", s.name, j.IdleSince, j.FirstBusy, n.ActivitySource, s.idleSince, s.firstBusy, s.source)
		}
		if got := n.JobsSeq != seq; got != s.newSeq {
			t.Errorf("%s: a new list of jobs %v, want %v", s.name, got, s.newSeq)
		}
		seq = n.JobsSeq
	}
	// A job that started before the controller first heard of its node (a
	// controller restarted) may have worked unseen: its idle is stalled,
	// from now. A MIG-enabled GPU without SM activity reads nothing: its
	// job is not idle, and the node reads no activity.
	r.now = r.now.Add(time.Minute)
	for _, tc := range []struct {
		node      string
		gpu       report.GPU
		idleSince time.Time
		firstBusy time.Time
		source    string
	}{
		{"i-old", report.GPU{Index: 0, UtilGPU: 0}, r.now, t0.Add(-5 * time.Hour), "utilization"},
		{"i-mig", report.GPU{Index: 0, MIG: true, Instances: 2}, time.Time{}, time.Time{}, ""},
	} {
		if _, err := r.agents.Accept(context.Background(), &report.Report{Node: tc.node, SentAt: r.now, Healthy: true, GPUs: []report.GPU{tc.gpu},
			Jobs: []report.Job{{ID: "x", GPUs: []int{0}, Start: t0.Add(-5 * time.Hour)}}, Drain: report.DrainStatus{State: report.NotDraining}}); err != nil {
			t.Fatal(err)
		}
		n := fleet.Node{ID: tc.node}
		r.agents.Observe(&n)
		if j := n.Jobs[0]; !j.IdleSince.Equal(tc.idleSince) || !j.FirstBusy.Equal(tc.firstBusy) || n.ActivitySource != tc.source {
			t.Errorf("%s: idle since %v, first busy %v, source %q; want %v, %v, %q", tc.node, j.IdleSince, j.FirstBusy, n.ActivitySource, tc.idleSince, tc.firstBusy, tc.source)
		}
	}
	// With no threshold, nothing is idle.
	r.agents.SetIdleThreshold(0)
	r.now = r.now.Add(time.Minute)
	if _, err := r.agents.Accept(context.Background(), &report.Report{Node: "i-2", SentAt: r.now, Healthy: true, GPUs: []report.GPU{{Index: 0}},
		Jobs: []report.Job{{ID: "x", GPUs: []int{0}, Start: start}}, Drain: report.DrainStatus{State: report.NotDraining}}); err != nil {
		t.Fatal(err)
	}
	n := fleet.Node{ID: "i-2"}
	r.agents.Observe(&n)
	if j := n.Jobs[0]; !j.IdleSince.IsZero() || !j.FirstBusy.IsZero() {
		t.Errorf("idle_threshold 0: idle since %v, first busy %v; want neither", j.IdleSince, j.FirstBusy)
	}
}
