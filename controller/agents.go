package controller

import (
	"context"
	"slices"
	"sync"
	"time"

	"github.com/fleetcast/autoscaler/agent/report"
	"github.com/fleetcast/autoscaler/fleet"
)

// Agents is the controller's view of its agents: each node's latest report
// and the drain the controller wants of it. It is the report.Store behind
// the agents' endpoint and is safe for concurrent use.
//
// Times are the controller's: a report's arrival is read from the
// controller's clock (so a node is silent by the controller's clock, never
// the agent's). Job times are only ever moved back: a report stamped after
// its arrival (an agent clock ahead) has them moved back by the
// difference, and none may be later than the arrival. So neither a clock
// ahead nor a report delivered late makes a checkpoint look newer than it
// is; an agent clock behind makes checkpoints look older, which delays
// drains and never loses work (run NTP on the nodes). A report older than
// the last one taken from its node is answered but not taken.
type Agents struct {
	now func() time.Time

	mu     sync.Mutex
	nodes  map[string]*agentView
	drains map[string]report.DrainRequest
	// seq numbers the nodes' lists of jobs (agentView.jobsSeq).
	seq uint64
	// idlePct is the usage block's idle_threshold: a job whose every GPU
	// reads under it is idle (fleet.Job.IdleSince).
	idlePct int
}

// SetIdleThreshold sets the activity, in percent, under which a job's
// GPUs read as idle (the usage block's idle_threshold); 0: none does.
func (a *Agents) SetIdleThreshold(pct int) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.idlePct = pct
}

// sameJobs reports whether two reports' jobs are the same jobs, holding
// as many GPUs, of the same owners, in the same order, idle since the same
// time and seen busy or not; their checkpoints aside.
func sameJobs(a, b []fleet.Job) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		x, y := &a[i], &b[i]
		if x.ID != y.ID || x.GPUs != y.GPUs || x.Team != y.Team || x.Tier != y.Tier ||
			!x.IdleSince.Equal(y.IdleSince) || x.FirstBusy.IsZero() != y.FirstBusy.IsZero() {
			return false
		}
	}
	return true
}

type agentView struct {
	sentAt   time.Time // the agent's stamp on the report taken
	received time.Time
	healthy  bool
	// gpus is how many GPUs the agent last read (0 until it has).
	gpus int
	// gpuError is why the last report could not read the GPUs, and
	// faultSince when its streak of such reports began ("" and zero while
	// they read).
	gpuError   string
	faultSince time.Time
	// unknown are the GPU processes no job claimed at the last reading
	// that succeeded: a report that cannot read the GPUs cannot see them
	// end, so they are kept until one that can.
	unknown []report.Process
	jobs    []fleet.Job
	// jobsSeq is fleet.Node.JobsSeq: a new number (from Agents.seq)
	// whenever a report's jobs differ from the last one's in their IDs,
	// GPUs, owners or idleness (sameJobs).
	jobsSeq uint64
	// source is fleet.Node.ActivitySource, as last read; first is when
	// this view took the node's first report.
	source string
	first  time.Time
	// ends are the earliest expected end the agent reported for each of
	// its jobs (on the controller's clock): a node may not push one later
	// (a hint, docs/design.md rule 11: it delays a launch at most one lead time, and a
	// drain for the surplus at most scale-in's window; see the planner's
	// endingSoon).
	ends      map[string]time.Time
	idleSince time.Time // zero while the node holds jobs
	// notice is the cloud's latest warning the agent reported, if any.
	notice *report.Notice
	// drain is the drain the agent said it holds (its ID), if any; safe is
	// set when it also said that drain is safe: every job on the node
	// checkpointed after the agent received it, or exited, by the agent's
	// own clock.
	drain string
	safe  bool
}

// NewAgents makes an empty view reading time from now.
func NewAgents(now func() time.Time) *Agents {
	return &Agents{now: now, nodes: map[string]*agentView{}, drains: map[string]report.DrainRequest{}}
}

var _ report.Store = (*Agents)(nil)

// Accept takes a validated report and answers with the node's drain, if
// the controller wants one.
func (a *Agents) Accept(_ context.Context, r *report.Report) (report.Answer, error) {
	now := a.now()
	shift := min(0, now.Sub(r.SentAt))
	a.mu.Lock()
	defer a.mu.Unlock()
	var ans report.Answer
	if d, ok := a.drains[r.Node]; ok {
		ans.Drain = &d
	}
	v := a.nodes[r.Node]
	if v == nil {
		v = &agentView{first: now}
		a.nodes[r.Node] = v
	} else if !r.SentAt.After(v.sentAt) {
		return ans, nil // out of order: a newer report was taken
	}
	if r.Healthy {
		v.unknown, v.gpuError, v.faultSince = slices.Clone(r.Unknown), "", time.Time{}
		v.gpus = len(r.GPUs)
	} else {
		// The GPUs could not be read: what ran on them unclaimed when
		// they last could is still there, as far as anyone knows.
		rr := *r
		rr.Unknown = v.unknown
		r = &rr
		// A fault only when NVML failed: an agent run without GPU data
		// (-no-gpu) has none by design, and is never idle either.
		v.gpuError = r.GPUError
		if v.gpuError == "" {
			v.faultSince = time.Time{}
		} else if v.faultSince.IsZero() {
			v.faultSince = now
		}
	}
	jobs := r.FleetJobs()
	var ends map[string]time.Time // made for the first end: most nodes report none
	for i := range jobs {
		j := &jobs[i]
		j.Start = earlier(j.Start.Add(shift), now)
		if !j.LastCheckpoint.IsZero() {
			j.LastCheckpoint = earlier(j.LastCheckpoint.Add(shift), now)
		}
		// Moved as the start is, so the queue time is as the agent saw
		// it; never after the start (Validate holds the report to that).
		if !j.Submitted.IsZero() {
			j.Submitted = earlier(j.Submitted.Add(shift), j.Start)
		}
		first, seen := v.ends[j.ID]
		if !j.ExpectedEnd.IsZero() {
			j.ExpectedEnd = j.ExpectedEnd.Add(shift)
			if seen {
				j.ExpectedEnd = earlier(j.ExpectedEnd, first)
			}
			first, seen = j.ExpectedEnd, true
		}
		// With no end this time (none, or one that says nothing), the
		// first still bounds a later one, while the job runs.
		if seen {
			if ends == nil {
				ends = map[string]time.Time{}
			}
			ends[j.ID] = first
		}
	}
	v.ends = ends
	v.sentAt = r.SentAt
	if r.Healthy {
		v.source = a.activity(r, jobs, v.jobs, v.first, now)
	} else {
		keepActivity(jobs, v.jobs)
	}
	// Idle time runs from the first healthy report without jobs: a report
	// that could not read the GPUs could not see unknown work on them
	// either, so it restarts the count.
	switch {
	case len(jobs) > 0 || !r.Healthy:
		v.idleSince = time.Time{}
	case v.idleSince.IsZero():
		v.idleSince = now
	}
	if v.jobsSeq == 0 || !sameJobs(v.jobs, jobs) {
		a.seq++
		v.jobsSeq = a.seq
	}

	v.received, v.healthy, v.jobs = now, r.Healthy, jobs
	// The warning is as the latest report says: one the agent no longer
	// reports (the instance survived a stop or hibernation) is gone.
	v.notice = nil
	if r.Notice != nil {
		n := *r.Notice
		v.notice = &n
	}
	v.drain, v.safe = "", r.Drain.State == report.SafeToTerminate
	if r.Drain.State == report.Draining || r.Drain.State == report.SafeToTerminate {
		v.drain = r.Drain.ID
	}
	return ans, nil
}

// activity reads how busy each job's GPUs are in r, a report that read
// its GPUs, and sets the jobs' IdleSince and FirstBusy (r's jobs first in
// jobs, as report.FleetJobs lists them), going on from what the node's
// last report said of the same jobs (prev): a job is idle while every GPU
// it holds reads under the threshold, since its start if it was never
// seen busy, else since now. A job that started before the view's first
// report of the node (first: a controller restarted, a node forgotten)
// may have worked unseen: it is taken to have, from its start, so its
// idle is stalled, from now. It returns the node's activity source. The
// jobs standing for unclaimed processes, and GPUs that read no activity
// (MIG-enabled without SM activity), are never idle.
func (a *Agents) activity(r *report.Report, jobs, prev []fleet.Job, first, now time.Time) string {
	// By GPU index: a report's are under 64 (report.Validate).
	var act [64]int
	var have [64]bool
	sm, util := false, false
	for i := range r.GPUs {
		pct, src := r.GPUs[i].Activity()
		if g := r.GPUs[i].Index; src != "" && g >= 0 && g < len(act) {
			act[g], have[g] = pct, true
		}
		sm, util = sm || src == report.ActivitySM, util || src == report.ActivityUtil
	}
	find := jobFinder(prev)
	for i := range r.Jobs {
		j := &jobs[i]
		was := find(i, j.ID)
		if was != nil {
			j.IdleSince, j.FirstBusy = was.IdleSince, was.FirstBusy
		}
		busiest, read := 0, false
		for _, g := range r.Jobs[i].GPUs {
			if g >= 0 && g < len(act) && have[g] {
				busiest, read = max(busiest, act[g]), true
			}
		}
		switch {
		case !read || a.idlePct <= 0:
			// It holds no GPU read, or no GPU counts as idle.
		case busiest >= a.idlePct:
			j.IdleSince = time.Time{}
			if j.FirstBusy.IsZero() {
				j.FirstBusy = now
			}
		case j.IdleSince.IsZero() && j.FirstBusy.IsZero() && was == nil && j.Start.Before(first.Add(-unseenSlack)):
			j.FirstBusy, j.IdleSince = j.Start, now // it may have worked unseen
		case j.IdleSince.IsZero() && j.FirstBusy.IsZero():
			j.IdleSince = j.Start // idle since it began
		case j.IdleSince.IsZero():
			j.IdleSince = now
		}
	}
	switch {
	case sm && util:
		return "mixed"
	case sm:
		return report.ActivitySM
	case util:
		return report.ActivityUtil
	}
	return ""
}

// unseenSlack is how long before a node's first report a job may have
// started and still be taken as seen from its start: a job registered
// just before its new node's agent first reported.
const unseenSlack = 2 * time.Minute

// keepActivity carries what the last report said of the jobs' idleness
// over a report that could not read the GPUs.
func keepActivity(jobs, prev []fleet.Job) {
	find := jobFinder(prev)
	for i := range jobs {
		if was := find(i, jobs[i].ID); was != nil {
			jobs[i].IdleSince, jobs[i].FirstBusy = was.IdleSince, was.FirstBusy
		}
	}
}

// jobFinder finds the job of jobs with an ID: at the index asked first
// (a node's jobs are listed in the same order report after report), else
// by an index of them made once.
func jobFinder(jobs []fleet.Job) func(i int, id string) *fleet.Job {
	var byID map[string]int
	return func(i int, id string) *fleet.Job {
		if i < len(jobs) && jobs[i].ID == id {
			return &jobs[i]
		}
		if byID == nil {
			byID = make(map[string]int, len(jobs))
			for k := range jobs {
				byID[jobs[k].ID] = k
			}
		}
		if k, ok := byID[id]; ok {
			return &jobs[k]
		}
		return nil
	}
}

func earlier(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}

// SetDrain asks the node's agent to drain at its next report; nil stops
// asking (the drain finished or was cancelled).
func (a *Agents) SetDrain(node string, d *report.DrainRequest) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if d == nil {
		delete(a.drains, node)
		return
	}
	a.drains[node] = *d
}

// Forget drops a node that left the fleet.
func (a *Agents) Forget(node string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	delete(a.nodes, node)
	delete(a.drains, node)
}

// Retain forgets every node for which keep is false (nodes the clouds no
// longer have), and returns, by node forgotten, the work its agent's last
// report shows its jobs had not saved (unsaved), in GPU-hours.
func (a *Agents) Retain(keep func(node string) bool) map[string]float64 {
	a.mu.Lock()
	defer a.mu.Unlock()
	var gone map[string]float64
	for id, v := range a.nodes {
		if !keep(id) {
			if gone == nil {
				gone = map[string]float64{}
			}
			gone[id] = unsaved(v.jobs, v.received)
			delete(a.nodes, id)
		}
	}
	for id := range a.drains {
		if !keep(id) {
			delete(a.drains, id)
		}
	}
	return gone
}

// unsaved is the work jobs had not saved at at, in GPU-hours: each job's
// GPUs times the time from its last checkpoint, or its start if it never
// checkpointed, to at. The times are the controller's, never later than
// the report's arrival (Accept), so an agent clock ahead cannot hide work.
func unsaved(jobs []fleet.Job, at time.Time) float64 {
	total := 0.0
	for i := range jobs {
		j := &jobs[i]
		from := j.Start
		if j.LastCheckpoint.After(from) {
			from = j.LastCheckpoint
		}
		if d := at.Sub(from); !from.IsZero() && d > 0 {
			total += float64(j.GPUs) * d.Hours()
		}
	}
	return total
}

// Holds reports whether the node's last report taken says its agent holds
// the drain with this ID (draining, or safe to terminate).
func (a *Agents) Holds(node, drainID string) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	v := a.nodes[node]
	return v != nil && drainID != "" && v.drain == drainID
}

// Confirmed reports whether the node's last report taken says the drain
// with this ID is safe: the agent's own verdict, on its own clock, that
// every job on the node checkpointed after it received the drain, or
// exited. It is what a draining node's termination waits for.
func (a *Agents) Confirmed(node, drainID string) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	v := a.nodes[node]
	return v != nil && drainID != "" && v.drain == drainID && v.safe
}

// GPUs is how many GPUs node's agent last read; 0 if it never has.
func (a *Agents) GPUs(node string) int {
	a.mu.Lock()
	defer a.mu.Unlock()
	if v := a.nodes[node]; v != nil {
		return v.gpus
	}
	return 0
}

// Observe fills a node's agent fields (LastReport, Jobs, IdleSince,
// GPUFault) from its latest report; a node that never reported keeps them
// zero, and a node whose last report could not read its GPUs keeps its
// jobs and the unclaimed GPU processes last seen, is not idle (its idle
// time restarts once they read again), and has GPUFault set.
// It reports whether the agent has reported healthy GPUs, which is when
// a launching node becomes ready.
func (a *Agents) Observe(n *fleet.Node) (healthy bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	v := a.nodes[n.ID]
	if v == nil {
		return false
	}
	n.LastReport = v.received
	n.Jobs = append(n.Jobs[:0], v.jobs...)
	n.JobsSeq = v.jobsSeq
	n.IdleSince = v.idleSince
	n.GPUFault, n.GPUFaultSince = v.gpuError, v.faultSince
	n.ActivitySource = v.source
	n.InterruptAt, n.Rebalance = time.Time{}, false
	if w := v.notice; w != nil {
		switch w.Kind {
		case report.Interruption:
			n.InterruptAt = w.Time
		case report.Rebalance:
			n.Rebalance = true
		}
	}
	return v.healthy
}
