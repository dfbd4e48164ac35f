// Package agent is the in-instance daemon: it keeps the jobs that run on
// its node and their checkpoints, reads the GPUs, reports both to the
// controller, and carries out the controller's drains safely: mark the
// node draining and refuse new jobs, ask every job to checkpoint, and
// report the node safe to terminate only once they all have (or exited)
// since the agent received the drain, by its own clock, and no GPU
// process it cannot account for runs; on the drain's deadline, report it
// failed and clear the mark, so the node stays. The controller terminates
// a node on that report only: the agent's confirmation is the one clock
// the drain is decided on (docs/design.md rule 1).
package agent

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
	"unicode/utf8"

	"github.com/fleetcast/autoscaler/agent/report"
)

// GPUReader reads the node's GPUs (agent/gpu.Reader on a GPU machine).
type GPUReader interface {
	Read() ([]report.GPU, error)
}

// Signaller sends a signal to a process (syscall.Kill in production).
type Signaller func(pid int, sig syscall.Signal) error

// Config sets an agent up.
type Config struct {
	// Node is the node's name, as the controller knows it.
	Node string
	// GPUs reads the GPUs; nil runs without GPU data (tests, CPU nodes).
	GPUs GPUReader
	// LongRunningAfter: a job older than this is reported long-running,
	// a label for reports and reasons: every job, long-running or not,
	// must checkpoint or exit before its node may go.
	LongRunningAfter time.Duration
	// MarkerFile, when set, exists while the node is draining, so a local
	// scheduler stops placing work.
	MarkerFile string
	// DrainHook, when set, is run (with FLEETCAST_DRAIN=start, or =stop
	// when a drain fails or is cancelled, and FLEETCAST_DRAIN_ID) so a local
	// scheduler can stop and resume placing work.
	DrainHook []string
	// NoticeSignal is sent to every job on a warning from the cloud (a
	// spot interruption notice, a rebalance recommendation): SIGUSR1 when
	// empty.
	NoticeSignal string
	// StateFile, when set, keeps the registered jobs and their checkpoints
	// across restarts of the agent (see savedJobs); its directory must
	// exist.
	StateFile string
	// Now is the clock (time.Now when nil); Signal sends signals
	// (syscall.Kill when nil).
	Now    func() time.Time
	Signal Signaller
	// ProcOwner is the user ID owning a process (its /proc entry's when
	// nil): a caller other than root registers only its own processes.
	ProcOwner func(pid int) (int, error)
}

// job is a registered job.
type job struct {
	report.Job
	// owner is the user ID that registered the job: a caller other than
	// root or the agent's user may act only on its own jobs.
	owner int
	// signalled is the drain the job was last asked to checkpoint for.
	signalled string
	// checkpoints, when set, is a glob of the job's checkpoint files: a
	// newer file counts as a checkpoint, made at its modification time or
	// when the agent first saw it, whichever is earlier.
	checkpoints string
	// started are the processes' start times (from /proc), so a PID the
	// kernel has since given to another process is not signalled.
	started map[int]uint64
	// newest is the newest checkpoint file taken; pending a newer one
	// seen once, taken when its size holds still for a tick.
	newest  fileSeen
	pending fileSeen
	// scanned is when the last scan of its checkpoint files began, by the
	// agent's clock.
	scanned time.Time
}

// fileSeen is a checkpoint file as last seen; seen is the latest time it
// can have been written by, on the agent's clock: the scan before the one
// that first saw it so (or that one, for the first scan of its job).
type fileSeen struct {
	path  string
	mtime time.Time
	size  int64
	seen  time.Time
}

// same reports whether two sightings are of the same file, unchanged.
func (f fileSeen) same(g fileSeen) bool {
	return f.path == g.path && f.mtime.Equal(g.mtime) && f.size == g.size
}

// Agent holds the node's state. It is safe for concurrent use: the local
// API, the reporter and drains share it.
type Agent struct {
	cfg Config

	mu   sync.Mutex
	jobs map[string]*job
	// saveMu orders writes of the state file, outside mu: seq numbers the
	// snapshots taken (under mu), saved the last one written.
	saveMu     sync.Mutex
	seq, saved uint64
	// boot is the machine's boot ID, for the state file.
	boot  string
	drain *report.DrainRequest
	// since and deadline are the drain's start and end by the agent's own
	// clock: its checkpoints are on that clock, not the controller's. round
	// counts the times the drain was asked again (SafeFor), since when it
	// runs; safeSince is when it was last found safe.
	since, deadline time.Time
	round           int
	safeSince       time.Time
	// notice is set for a drain the agent started on a spot interruption
	// notice: the controller's routine answers do not cancel it.
	notice bool
	// warning is the cloud's latest warning (an interruption outranks a
	// rebalance recommendation), reported with every report.
	warning *report.Notice
	state   report.DrainState
	// unknown counts the GPU processes no job claims, at the last healthy
	// reading: work whose checkpoints nobody can vouch for, so no drain is
	// safe. gpusRead is set while the last reading succeeded: while the
	// GPUs cannot be read (or never could be) nobody knows what runs on
	// them now, and no drain is safe, however few unknown processes the
	// last good reading saw.
	unknown  int
	gpusRead bool
	// changed is closed (and replaced) on every state change, so the
	// reporter sends at once.
	changed chan struct{}
	// link is how the reports are going (noteReport), under linkMu.
	linkMu sync.Mutex
	link   Link
}

// New makes an agent.
func New(cfg Config) (*Agent, error) {
	if cfg.Node == "" {
		return nil, errors.New("agent: the node's name is required")
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Signal == nil {
		cfg.Signal = syscall.Kill
	}
	if cfg.LongRunningAfter <= 0 {
		cfg.LongRunningAfter = time.Hour
	}
	if cfg.NoticeSignal == "" {
		cfg.NoticeSignal = "SIGUSR1"
	}
	if _, ok := signals[cfg.NoticeSignal]; !ok {
		return nil, fmt.Errorf("agent: notice signal %q, want one a job can catch: %s", cfg.NoticeSignal, signalNames())
	}
	a := &Agent{cfg: cfg, jobs: map[string]*job{}, state: report.NotDraining, changed: make(chan struct{})}
	if cfg.StateFile != "" {
		a.boot = bootID()
		if err := a.load(); err != nil {
			return nil, err
		}
	}
	a.unmark() // a marker left by an agent that died: no drain is under way
	return a, nil
}

// Limits on what jobs may register: those a report may carry.
const (
	maxJobs  = 4096
	maxIDLen = report.MaxIDLen
	maxGPU   = 63
	maxPIDs  = 4096
)

// jobIDs are the registered jobs' IDs, sorted; a.mu is held.
func (a *Agent) jobIDs() []string {
	ids := make([]string, 0, len(a.jobs))
	for id := range a.jobs {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	return ids
}

// Changed returns a channel closed at the next state change.
func (a *Agent) Changed() <-chan struct{} {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.changed
}

// notify wakes the reporter; a.mu is held.
func (a *Agent) notify() {
	close(a.changed)
	a.changed = make(chan struct{})
}

// Register adds (or replaces) a job: its ID, the GPUs it holds and its
// processes. A job is long-running once older than LongRunningAfter.
func (a *Agent) Register(id string, gpus, pids []int) error {
	return a.RegisterWatched(id, gpus, pids, "")
}

// RegisterWatched registers a job whose checkpoints the agent also sees as
// files: each newer file matching the glob counts as a checkpoint.
func (a *Agent) RegisterWatched(id string, gpus, pids []int, checkpoints string) error {
	return a.RegisterJob(JobRequest{ID: id, GPUs: gpus, PIDs: pids, Checkpoints: checkpoints})
}

// RegisterJob registers the job req describes (see JobRequest), as the
// local API does.
func (a *Agent) RegisterJob(req JobRequest) error {
	return a.registerJob(req, trusted)
}

// registerJob registers a job for caller c: a restricted caller only its
// own processes, and not over another user's job.
func (a *Agent) registerJob(req JobRequest, c caller) error {
	id, gpus, pids, checkpoints := req.ID, req.GPUs, req.PIDs, req.Checkpoints
	if checkpoints != "" {
		if _, err := filepath.Match(checkpoints, ""); err != nil {
			return fmt.Errorf("job %s: checkpoint pattern %q: %w", id, checkpoints, err)
		}
	}
	if id == "" {
		return errors.New("a job needs an ID")
	}
	for _, p := range pids {
		if p <= 0 {
			return fmt.Errorf("job %s: PID %d, want a process ID above 0", id, p)
		}
	}
	switch {
	case len(id) > maxIDLen:
		return fmt.Errorf("job ID of %d characters, at most %d", len(id), maxIDLen)
	case len(pids) > maxPIDs:
		return fmt.Errorf("job %s: %d PIDs, at most %d", id, len(pids), maxPIDs)
	}
	for _, g := range gpus {
		if g < 0 || g > maxGPU {
			return fmt.Errorf("job %s: GPU %d, want 0-%d", id, g, maxGPU)
		}
	}
	// A PID no process has is a mistake (a typo, a launcher that exited,
	// a container's own numbering): the job would look exited at once, and
	// its node could be drained under it.
	for _, p := range pids {
		if err := a.cfg.Signal(p, 0); errors.Is(err, syscall.ESRCH) {
			return fmt.Errorf("job %s: process %d does not exist: register the PIDs of the job's running processes as the node sees them (not a container's own numbering)", id, p)
		}
	}
	if err := a.mayUse(c, id, pids); err != nil {
		return err
	}
	started := make(map[int]uint64, len(pids))
	for _, p := range pids {
		started[p] = procStart(p)
	}
	return a.change(func() (string, error) {
		j := a.jobs[id]
		if j != nil {
			if err := mayTouch(c, j); err != nil {
				return "", err
			}
		}
		if j == nil && a.drain != nil && a.state != report.DrainFailed {
			return "", &DrainingError{Node: a.cfg.Node, Drain: a.drain.ID}
		}
		if j == nil {
			if len(a.jobs) >= maxJobs {
				return "", fmt.Errorf("%d jobs registered already, at most %d", len(a.jobs), maxJobs)
			}
			j = &job{Job: report.Job{ID: id, Start: a.cfg.Now()}, owner: c.uid}
			a.jobs[id] = j
		}
		// Registering again (more PIDs, a restarted launcher) keeps the
		// job's start, checkpoints and drain signal: a running job is not
		// made new. Its expected end is as it says now.
		j.GPUs, j.PIDs, j.started, j.checkpoints = slices.Clone(gpus), slices.Clone(pids), started, checkpoints
		j.ExpectedEnd = req.ExpectedEnd
		a.notify()
		return "job " + id + " registered", nil
	})
}

// change runs fn with a.mu held; when it changed the jobs (it says what
// it did), the state file is saved once the lock is released, so a slow
// disk holds no report nor drain answer up. A failed save is an error
// saying what was done all the same.
func (a *Agent) change(fn func() (done string, err error)) error {
	a.mu.Lock()
	done, err := fn()
	var snap []byte
	var seq uint64
	if err == nil && done != "" {
		snap, seq = a.snapshot()
	}
	a.mu.Unlock()
	if err != nil {
		return err
	}
	if err := a.persist(snap, seq); err != nil {
		return fmt.Errorf("%s, but that was not saved (a restarted agent would not know it): %w", done, err)
	}
	return nil
}

// DrainingError is the refusal of a new job on a draining node: the node
// takes no new work, and the job should go to another node. A job already
// running may register again (a launcher adding processes): it still has
// to checkpoint for the drain.
type DrainingError struct {
	Node, Drain string
}

func (e *DrainingError) Error() string {
	return fmt.Sprintf("node %s is draining (drain %s) and takes no new jobs: place the job on another node", e.Node, e.Drain)
}

// Unregister removes a job that ended.
func (a *Agent) Unregister(id string) error { return a.unregister(id, trusted) }

func (a *Agent) unregister(id string, c caller) error {
	return a.change(func() (string, error) {
		if a.jobs[id] == nil {
			return "", fmt.Errorf("no job %q", id)
		}
		if err := mayTouch(c, a.jobs[id]); err != nil {
			return "", err
		}
		delete(a.jobs, id)
		a.settle()
		a.notify()
		return "job " + id + " ended", nil
	})
}

// Checkpoint records that a job saved its state now.
func (a *Agent) Checkpoint(id string) error { return a.checkpoint(id, trusted) }

func (a *Agent) checkpoint(id string, c caller) error {
	return a.change(func() (string, error) {
		j := a.jobs[id]
		if j == nil {
			return "", fmt.Errorf("no job %q: register it first", id)
		}
		if err := mayTouch(c, j); err != nil {
			return "", err
		}
		j.LastCheckpoint = a.cfg.Now()
		a.settle()
		a.notify()
		return "job " + id + " checkpointed", nil
	})
}

// Drain carries out the controller's drain request (nil: none). A new
// request marks the node, new jobs are refused, and every job is sent the
// signal once; the state then moves to safe when they have all
// checkpointed since the agent received the drain (by its clock), or
// exited, or to failed at the deadline.
func (a *Agent) Drain(req *report.DrainRequest) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.startDrain(req, false)
}

func (a *Agent) startDrain(req *report.DrainRequest, notice bool) error {
	if req == nil {
		if a.drain != nil && !a.notice {
			// The controller cancelled the drain: back to work.
			if a.state != report.DrainFailed {
				a.hook("stop")
			}
			a.drain, a.state = nil, report.NotDraining
			a.unmark()
			a.notify()
		}
		return nil
	}
	if a.drain != nil && a.drain.ID == req.ID {
		a.settle()
		return nil
	}
	switch {
	case req.ID == "" || req.Since.IsZero() || req.Deadline.IsZero() || !req.Deadline.After(req.Since):
		return fmt.Errorf("drain %q: want an ID, a start and a later deadline", req.ID)
	case a.notice:
		return nil // the cloud takes the node anyway; the notice drain goes on
	}
	if _, ok := signals[req.Signal]; !ok {
		return fmt.Errorf("drain %s: unknown signal %q", req.ID, req.Signal)
	}
	prev := a.drain
	a.drain = req
	if err := a.mark(); err != nil {
		a.drain = prev
		return err
	}
	// The drain starts now by the agent's clock, and lasts as long as the
	// controller allowed: checkpoints before now do not count.
	a.since, a.deadline, a.notice, a.round = a.cfg.Now(), a.cfg.Now().Add(req.Deadline.Sub(req.Since)), notice, 0
	a.state = report.Draining
	a.hook("start")
	a.settle()
	a.notify()
	return nil
}

// Notice handles a spot interruption notice passed on through the local
// API (POST /v1/notice): Warn with an interruption at deadline.
func (a *Agent) Notice(deadline time.Time) error {
	return a.Warn(report.Notice{Kind: report.Interruption, Action: "terminate", Time: deadline})
}

// Warn takes a warning from the cloud (the metadata service's, see
// agent/spot, or the local API's) and reports it at once: the controller
// then counts the node as going and launches its replacement. On an
// interruption every job is asked to checkpoint now, as in a drain that
// the controller cannot cancel, timed to the cloud's deadline (a drain
// already under way goes on: its jobs were asked already). On a rebalance
// recommendation every job is asked once to checkpoint, and the node runs
// on: it may not be interrupted for long.
func (a *Agent) Warn(n report.Notice) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	now := a.cfg.Now()
	switch {
	case n.Kind != report.Interruption && n.Kind != report.Rebalance:
		return fmt.Errorf("notice: kind %q, want interruption or rebalance", n.Kind)
	case n.Kind == report.Interruption && n.Time.Sub(now) > 24*time.Hour:
		// Not reported either: the controller would refuse the reports.
		return fmt.Errorf("notice: an interruption at %s, more than a day ahead: not taken", n.Time.Format(time.RFC3339))
	}
	if a.warning == nil || n.Kind == report.Interruption || a.warning.Kind == report.Rebalance {
		a.warning = &n
	}
	a.notify()
	deadline := n.Time
	if !deadline.After(now) {
		deadline = now.Add(2 * time.Minute)
	}
	if a.drain != nil && a.state != report.DrainFailed {
		if n.Kind == report.Interruption && !a.notice {
			// A drain is under way, maybe safe on checkpoints made
			// minutes ago: the cloud's deadline now rules it, and every
			// job is asked again, from now. The controller cannot cancel
			// it any more.
			a.since, a.round, a.notice = now, a.round+1, true
			a.deadline = earlier(a.deadline, deadline)
			a.state = report.Draining
			a.settle()
		}
		return nil
	}
	switch n.Kind {
	case report.Interruption:
		return a.startDrain(&report.DrainRequest{ID: "spot-notice-" + now.UTC().Format("20060102T150405Z"), Since: now, Deadline: deadline, Signal: a.cfg.NoticeSignal}, true)
	default: // a rebalance recommendation
		tag := "rebalance-" + n.Time.UTC().Format("20060102T150405Z")
		for _, j := range a.jobs {
			a.ask(j, tag, signals[a.cfg.NoticeSignal])
		}
		return nil
	}
}

// ask sends a job's processes the signal asking it to checkpoint, once
// for each request (tag: a drain's round, a rebalance recommendation);
// a.mu is held. A process the kernel has since given to another is left
// alone, and one that exited is not waited for.
func (a *Agent) ask(j *job, tag string, sig syscall.Signal) {
	if j.signalled == tag {
		return
	}
	j.signalled = tag
	for _, pid := range j.PIDs {
		if a.same(j, pid) {
			_ = a.cfg.Signal(pid, sig)
		}
	}
}

// Withdraw forgets the cloud's warning of that kind, which the metadata
// service no longer announces: the controller then counts the node as it
// is. A drain it started runs on to its end (its jobs were asked already).
func (a *Agent) Withdraw(kind report.NoticeKind) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.warning != nil && a.warning.Kind == kind {
		a.warning = nil
		a.notify()
	}
}

// Tick moves a drain on with the clock: it takes new checkpoint files as
// checkpoints, signals jobs that became long-running and fails the drain
// at its deadline.
func (a *Agent) Tick() {
	// The file system is read without the lock: a hung checkpoint volume
	// must not stop reports or the drain's deadline.
	a.mu.Lock()
	patterns := map[string]string{}
	for id, j := range a.jobs {
		if j.checkpoints != "" {
			patterns[id] = j.checkpoints
		}
	}
	scanAt := a.cfg.Now()
	a.mu.Unlock()
	newest := map[string]fileSeen{}
	for id, pat := range patterns {
		files, _ := filepath.Glob(pat)
		for _, f := range files {
			if st, err := os.Stat(f); err == nil && st.Mode().IsRegular() && st.ModTime().After(newest[id].mtime) {
				newest[id] = fileSeen{path: f, mtime: st.ModTime(), size: st.Size()}
			}
		}
	}
	a.mu.Lock()
	now := a.cfg.Now()
	taken := false
	for id, f := range newest {
		j := a.jobs[id]
		switch {
		case j == nil || !f.mtime.After(j.newest.mtime):
			// gone, or nothing new
		case !f.same(j.pending):
			// First sight of this file as it is: it was written after the
			// previous scan, and no later than this one, by the agent's
			// clock; the previous scan bounds it (this one, if none).
			f.seen = j.scanned
			if f.seen.IsZero() {
				f.seen = scanAt
				if a.drain != nil && a.since.Before(f.seen) {
					// The job's first scan, during a drain (the agent
					// restarted, or the job gained a pattern): what is
					// there may predate the drain, so it does not count,
					// and the job is asked again for one that does.
					f.seen = a.since
					j.signalled = ""
				}
			}
			j.pending = f
		case f.mtime.After(now):
			// Dated in the future: not trusted until the agent's clock
			// passes it.
		default:
			// The same file, the same size, a tick later: written. It was
			// made at its own time, bounded by the agent's clock: no later
			// than the scan before the one that first saw it. So a file
			// written before a drain never counts as a checkpoint after it,
			// however late the agent takes it, even from a file system
			// whose clock is ahead (the agent scans as a drain arrives).
			j.newest, j.pending = j.pending, fileSeen{}
			j.LastCheckpoint = earlier(f.mtime, j.newest.seen)
			taken = true
		}
	}
	for id := range patterns {
		if j := a.jobs[id]; j != nil {
			j.scanned = scanAt
		}
	}
	before := a.state
	a.settle()
	if a.state != before {
		a.notify()
	}
	var snap []byte
	var seq uint64
	if taken {
		snap, seq = a.snapshot()
	}
	a.mu.Unlock()
	// A failed save is as the next change's: a checkpoint file is seen
	// again after a restart.
	_ = a.persist(snap, seq)
}

// SafeFor is how long a drain's confirmation stands: a job asked to
// checkpoint goes on working after it has, so once the node has been safe
// this long without being terminated (the controller could not, or has
// not yet), the agent asks every job to checkpoint again and reports the
// drain unconfirmed until they have. So the work a termination loses is
// bounded, however late it comes.
const SafeFor = 5 * time.Minute

// settle updates the drain's state; a.mu is held.
func (a *Agent) settle() {
	if a.drain == nil || a.state == report.DrainFailed {
		return
	}
	now := a.cfg.Now()
	if a.state == report.SafeToTerminate && now.Sub(a.safeSince) > SafeFor {
		// Stale: a new round, from now, by the agent's clock (past the
		// deadline, it fails at once and the node stays).
		a.since, a.round = now, a.round+1
	}
	waiting := a.waiting(now)
	switch {
	case len(waiting) == 0 && a.unknown == 0 && (a.cfg.GPUs == nil || a.gpusRead):
		if a.state != report.SafeToTerminate {
			a.safeSince = now
		}
		a.state = report.SafeToTerminate
	case now.After(a.deadline):
		a.state = report.DrainFailed
		a.notice = false // the controller's drains are carried out again
		a.unmark()
		a.hook("stop")
	default:
		a.state = report.Draining
		sig := signals[a.drain.Signal]
		round := a.drain.ID + "#" + strconv.Itoa(a.round)
		for _, id := range waiting {
			a.ask(a.jobs[id], round, sig)
		}
	}
}

// waiting lists the jobs that have not checkpointed since the agent
// received the drain, nor exited, sorted; a.mu is held. Every job counts,
// long-running or not: the controller waits for the same set, and a young
// job's work is lost as surely as an old one's.
func (a *Agent) waiting(now time.Time) []string {
	var ids []string
	for id, j := range a.jobs {
		if j.LastCheckpoint.After(a.since) || a.exited(j) {
			continue
		}
		ids = append(ids, id)
	}
	sort.Strings(ids)
	return ids
}

// exited reports whether every process of a job is gone (signal 0 finds
// none): a job that exited has nothing left to lose.
func (a *Agent) exited(j *job) bool {
	if len(j.PIDs) == 0 {
		return false
	}
	for _, pid := range j.PIDs {
		if err := a.cfg.Signal(pid, 0); !errors.Is(err, syscall.ESRCH) && a.same(j, pid) {
			return false
		}
	}
	return true
}

// same reports whether pid is still the process registered (its start time
// unchanged), not another that the kernel gave the number since. Without
// /proc it cannot tell, and takes the PID as the job's.
func (a *Agent) same(j *job, pid int) bool {
	want := j.started[pid]
	return want == 0 || procStart(pid) == want
}

// procStart is a process's start time in clock ticks since boot (field 22
// of /proc/PID/stat); 0 when it cannot be read.
func procStart(pid int) uint64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	// The command name (field 2) may hold spaces: fields count from the
	// last ')'.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 20 {
		return 0
	}
	v, _ := strconv.ParseUint(f[19], 10, 64)
	return v
}

func (a *Agent) longRunning(j *job, now time.Time) bool {
	return now.Sub(j.Start) >= a.cfg.LongRunningAfter
}

func (a *Agent) mark() error {
	if a.cfg.MarkerFile == "" {
		return nil
	}
	if err := os.WriteFile(a.cfg.MarkerFile, []byte(a.drain.ID+"\n"), 0o644); err != nil {
		return fmt.Errorf("drain marker: %w", err)
	}
	return nil
}

// hook runs the drain hook, without waiting for it (at most a minute);
// a.mu is held and a.drain set.
func (a *Agent) hook(what string) {
	if len(a.cfg.DrainHook) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	cmd := exec.CommandContext(ctx, a.cfg.DrainHook[0], a.cfg.DrainHook[1:]...)
	cmd.Env = append(os.Environ(), "FLEETCAST_DRAIN="+what, "FLEETCAST_DRAIN_ID="+a.drain.ID)
	if err := cmd.Start(); err != nil {
		cancel()
		return
	}
	go func() { _ = cmd.Wait(); cancel() }()
}

func (a *Agent) unmark() {
	if a.cfg.MarkerFile != "" {
		_ = os.Remove(a.cfg.MarkerFile)
	}
}

// signalNames lists the signals a drain or notice may ask for, sorted.
func signalNames() string {
	names := make([]string, 0, len(signals))
	for s := range signals {
		names = append(names, s)
	}
	sort.Strings(names)
	return strings.Join(names, ", ")
}

// signals are the signals a drain may ask for: those a job can catch.
var signals = map[string]syscall.Signal{
	"SIGUSR1": syscall.SIGUSR1, "SIGUSR2": syscall.SIGUSR2, "SIGTERM": syscall.SIGTERM,
	"SIGINT": syscall.SIGINT, "SIGHUP": syscall.SIGHUP, "SIGQUIT": syscall.SIGQUIT,
	"SIGALRM": syscall.SIGALRM, "SIGCONT": syscall.SIGCONT, "SIGWINCH": syscall.SIGWINCH,
}

// Report is the node's report now: GPUs (unhealthy, with the reason, when
// they cannot be read), jobs, GPU processes no job claims, and the drain's
// state.
func (a *Agent) Report() report.Report {
	var gpus []report.GPU
	var gpuErr string
	healthy := a.cfg.GPUs != nil // without GPU data, nothing vouches for the GPUs
	if a.cfg.GPUs != nil {
		var err error
		if gpus, err = a.cfg.GPUs.Read(); err != nil {
			healthy, gpus, gpuErr = false, nil, truncate(err.Error(), report.MaxGPUErrorLen)
		}
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	now := a.cfg.Now()
	r := report.Report{Node: a.cfg.Node, SentAt: now, Healthy: healthy, GPUError: gpuErr, GPUs: gpus, Drain: report.DrainStatus{State: a.state}}
	if a.warning != nil {
		w := *a.warning
		r.Notice = &w
	}
	claimed := map[int]bool{}
	for _, id := range a.jobIDs() {
		j := a.jobs[id]
		rj := j.Job
		rj.LongRunning = a.longRunning(j, now)
		r.Jobs = append(r.Jobs, rj)
		for _, p := range j.PIDs {
			claimed[p] = true
		}
	}
	for _, g := range gpus {
		for _, p := range g.Processes {
			if !claimed[p.PID] {
				r.Unknown = append(r.Unknown, p)
			}
		}
	}
	if healthy {
		a.unknown = len(r.Unknown)
	}
	a.gpusRead = healthy
	if a.drain != nil {
		r.Drain.ID = a.drain.ID
		if a.state == report.Draining {
			r.Drain.Waiting = a.waiting(now)
		}
		if a.state == report.Draining || a.state == report.SafeToTerminate {
			a.settle() // the unknown processes may have changed
			r.Drain.State = a.state
		}
	}
	return r
}

// earlier returns the earlier of two times.
func earlier(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}

// truncate cuts s to at most n bytes, on a rune boundary.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}
