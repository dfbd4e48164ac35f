// Package agent is the in-instance daemon: it keeps the jobs that run on
// its node and their checkpoints, reads the GPUs, reports both to the
// controller, and carries out the controller's drains safely: mark the
// node draining, ask every long-running job to checkpoint, and report the
// node safe to terminate only once they all have (or exited); on the
// drain's deadline, report it failed and clear the mark, so the node stays.
package agent

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"sync"
	"syscall"
	"time"

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
	// LongRunningAfter: a job older than this is long-running and must
	// checkpoint before its node may go.
	LongRunningAfter time.Duration
	// MarkerFile, when set, exists while the node is draining, so a local
	// scheduler stops placing work.
	MarkerFile string
	// DrainHook, when set, is run (with FLEETCAST_DRAIN=start, or =stop
	// when a drain fails or is cancelled, and FLEETCAST_DRAIN_ID) so a local
	// scheduler can stop and resume placing work.
	DrainHook []string
	// Now is the clock (time.Now when nil); Signal sends signals
	// (syscall.Kill when nil).
	Now    func() time.Time
	Signal Signaller
}

// job is a registered job.
type job struct {
	report.Job
	// signalled is the drain the job was last asked to checkpoint for.
	signalled string
	// checkpoints, when set, is a glob of the job's checkpoint files: a
	// newer file counts as a checkpoint.
	checkpoints string
}

// Agent holds the node's state. It is safe for concurrent use: the local
// API, the reporter and drains share it.
type Agent struct {
	cfg Config

	mu    sync.Mutex
	jobs  map[string]*job
	drain *report.DrainRequest
	state report.DrainState
	// changed is closed (and replaced) on every state change, so the
	// reporter sends at once.
	changed chan struct{}
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
	return &Agent{cfg: cfg, jobs: map[string]*job{}, state: report.NotDraining, changed: make(chan struct{})}, nil
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
	a.mu.Lock()
	defer a.mu.Unlock()
	a.jobs[id] = &job{Job: report.Job{ID: id, GPUs: slices.Clone(gpus), PIDs: slices.Clone(pids), Start: a.cfg.Now()}, checkpoints: checkpoints}
	a.notify()
	return nil
}

// Unregister removes a job that ended.
func (a *Agent) Unregister(id string) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.jobs[id] == nil {
		return fmt.Errorf("no job %q", id)
	}
	delete(a.jobs, id)
	a.settle()
	a.notify()
	return nil
}

// Checkpoint records that a job saved its state now.
func (a *Agent) Checkpoint(id string) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	j := a.jobs[id]
	if j == nil {
		return fmt.Errorf("no job %q: register it first", id)
	}
	j.LastCheckpoint = a.cfg.Now()
	a.settle()
	a.notify()
	return nil
}

// Drain carries out the controller's drain request (nil: none). A new
// request marks the node, and every long-running job is sent the signal
// once; the state then moves to safe when they have all checkpointed since
// the drain began, or to failed at the deadline.
func (a *Agent) Drain(req *report.DrainRequest) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	if req == nil {
		if a.drain != nil {
			// The controller cancelled the drain: back to work.
			a.hook("stop")
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
	if _, ok := signals[req.Signal]; !ok {
		return fmt.Errorf("drain %s: unknown signal %q", req.ID, req.Signal)
	}
	a.drain, a.state = req, report.Draining
	if err := a.mark(); err != nil {
		return err
	}
	a.hook("start")
	a.settle()
	a.notify()
	return nil
}

// Notice handles a spot interruption notice the provider passed on: the
// cloud will take the node at deadline, so every long-running job is asked
// to checkpoint at once, as in a drain (a drain already under way goes on).
func (a *Agent) Notice(deadline time.Time) error {
	a.mu.Lock()
	running := a.drain != nil
	a.mu.Unlock()
	if running {
		return nil
	}
	now := a.cfg.Now()
	return a.Drain(&report.DrainRequest{ID: "spot-notice-" + now.UTC().Format("20060102T150405Z"), Since: now, Deadline: deadline, Signal: "SIGUSR1"})
}

// Tick moves a drain on with the clock: it takes new checkpoint files as
// checkpoints, signals jobs that became long-running and fails the drain
// at its deadline.
func (a *Agent) Tick() {
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, j := range a.jobs {
		if j.checkpoints == "" {
			continue
		}
		files, _ := filepath.Glob(j.checkpoints)
		for _, f := range files {
			if st, err := os.Stat(f); err == nil && st.ModTime().After(j.LastCheckpoint) {
				j.LastCheckpoint = st.ModTime()
			}
		}
	}
	before := a.state
	a.settle()
	if a.state != before {
		a.notify()
	}
}

// settle updates the drain's state; a.mu is held.
func (a *Agent) settle() {
	if a.drain == nil || a.state == report.DrainFailed {
		return
	}
	now := a.cfg.Now()
	waiting := a.waiting(now)
	switch {
	case len(waiting) == 0:
		a.state = report.SafeToTerminate
	case now.After(a.drain.Deadline):
		a.state = report.DrainFailed
		a.unmark()
		a.hook("stop")
	default:
		a.state = report.Draining
		sig := signals[a.drain.Signal]
		for _, id := range waiting {
			j := a.jobs[id]
			if j.signalled == a.drain.ID {
				continue
			}
			j.signalled = a.drain.ID
			for _, pid := range j.PIDs {
				_ = a.cfg.Signal(pid, sig) // a process that exited is not waited for below
			}
		}
	}
}

// waiting lists the long-running jobs that have not checkpointed since the
// drain began, sorted; a.mu is held.
func (a *Agent) waiting(now time.Time) []string {
	var ids []string
	for id, j := range a.jobs {
		if !a.longRunning(j, now) || !j.LastCheckpoint.Before(a.drain.Since) || a.exited(j) {
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
		if err := a.cfg.Signal(pid, 0); !errors.Is(err, syscall.ESRCH) {
			return false
		}
	}
	return true
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

// signals are the signals a drain may ask for: those a job can catch.
var signals = map[string]syscall.Signal{
	"SIGUSR1": syscall.SIGUSR1, "SIGUSR2": syscall.SIGUSR2, "SIGTERM": syscall.SIGTERM,
	"SIGINT": syscall.SIGINT, "SIGHUP": syscall.SIGHUP, "SIGQUIT": syscall.SIGQUIT,
	"SIGALRM": syscall.SIGALRM, "SIGCONT": syscall.SIGCONT, "SIGWINCH": syscall.SIGWINCH,
}

// Report is the node's report now: GPUs (unhealthy when they cannot be
// read), jobs, GPU processes no job claims, and the drain's state.
func (a *Agent) Report() report.Report {
	var gpus []report.GPU
	healthy := a.cfg.GPUs != nil // without GPU data, nothing vouches for the GPUs
	if a.cfg.GPUs != nil {
		var err error
		if gpus, err = a.cfg.GPUs.Read(); err != nil {
			healthy, gpus = false, nil
		}
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	now := a.cfg.Now()
	r := report.Report{Node: a.cfg.Node, SentAt: now, Healthy: healthy, GPUs: gpus, Drain: report.DrainStatus{State: a.state}}
	claimed := map[int]bool{}
	ids := make([]string, 0, len(a.jobs))
	for id := range a.jobs {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	for _, id := range ids {
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
	if a.drain != nil {
		r.Drain.ID = a.drain.ID
		if a.state == report.Draining {
			r.Drain.Waiting = a.waiting(now)
		}
	}
	return r
}
