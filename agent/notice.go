package agent

import (
	"fmt"
	"time"

	"github.com/fleetcast/autoscaler/agent/report"
)

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
