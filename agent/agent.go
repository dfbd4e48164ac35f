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
	"errors"
	"fmt"
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
