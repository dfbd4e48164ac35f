package agent

import (
	"fmt"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/fleetcast/autoscaler/agent/report"
)

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
