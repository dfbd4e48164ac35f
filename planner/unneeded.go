package planner

import (
	"fmt"
	"math"

	"github.com/fleetcast/autoscaler/fleet"
)

// scaleInDelay says why scale-in for demand waits in pool pp this
// cycle, or "": while the pool's launches boot (capacity on its way
// because the fleet was short; an instance this controller did not
// launch is not waited for), and for
// limits.scale_in_delay_after_launch after its latest launch, this
// plan's included (Cluster Autoscaler's scale-down-delay-after-add, per
// pool). A node launched for pending work is not drained before that work
// could reach it, nor a node of its pool drained while it boots. Drains to
// bring a pool back to its max, and the reaping of orphans, do not wait.
// A launch in another pool does not hold this one's surplus: scoped
// demand and a reservation kept full launch while other pools scale in.
func (p *planner) scaleInDelay(pp *poolPlan) string {
	delay := p.cfg.Limits.ScaleInDelayAfterLaunch
	if delay <= 0 {
		return ""
	}
	launches := 0
	for _, a := range p.plan.Actions {
		if a.Kind == Launch && a.Pool == pp.spec.Name {
			launches += a.Count
		}
	}
	latest := pp.lastLaunch
	switch {
	case launches > 0:
		return fmt.Sprintf("pool %s is not scaled in: this plan launches %d node(s) in it; scale-in may resume %s after (limits.scale_in_delay_after_launch)", pp.spec.Name, launches, age(delay))
	case pp.booting > 0:
		return fmt.Sprintf("pool %s is not scaled in: %d of its launches still booting, then limits.scale_in_delay_after_launch (%s) after the latest", pp.spec.Name, pp.booting, age(delay))
	case !latest.IsZero() && p.now.Sub(latest) < delay:
		return fmt.Sprintf("pool %s is not scaled in until %s: its latest launch was %s ago, within limits.scale_in_delay_after_launch (%s)", pp.spec.Name, clock(latest.Add(delay)), age(p.now.Sub(latest)), age(delay))
	}
	return ""
}

// idleTooShort reports whether an idle node has not yet been idle for
// limits.scale_in_unneeded_time (Cluster Autoscaler's
// scale-down-unneeded-time): scale-in for demand holds it until it has,
// planned to leave then if still not needed. A node whose idle start is
// unknown has not been seen idle long enough.
func (p *planner) idleTooShort(n *fleet.Node) bool {
	u := p.cfg.Limits.ScaleInUnneededTime
	if u <= 0 || len(n.Jobs) > 0 {
		return false
	}
	return n.IdleSince.IsZero() || p.now.Sub(n.IdleSince) < u
}

// idleTooShortText says why an idle node is held: idle for less than
// limits.scale_in_unneeded_time.
func (p *planner) idleTooShortText(n *fleet.Node) string {
	u := p.cfg.Limits.ScaleInUnneededTime
	if n.IdleSince.IsZero() {
		return fmt.Sprintf("idle, since an unknown time: scaled in once seen idle for %s (limits.scale_in_unneeded_time) if not needed then", age(u))
	}
	return fmt.Sprintf("idle %s: scaled in at %s, once idle for %s (limits.scale_in_unneeded_time), if not needed then",
		age(p.now.Sub(n.IdleSince)), clock(n.IdleSince.Add(u)), age(u))
}

// recentPeak is the most GPUs the fleet's recorded demand
// (fleet.State.History; with tiers, Input.PeakHistory where it covers
// the window: the tiers worth something) held within the last
// limits.scale_in_unneeded_time, rounded up: scale-in for demand keeps
// that many, so that capacity is removed only once it has been unneeded
// that long, not on a dip of a cycle or two. Zero when the setting is off
// or nothing is recorded then.
func (p *planner) recentPeak() int {
	u := p.cfg.Limits.ScaleInUnneededTime
	h := p.in.State.History
	if ph := p.in.PeakHistory; len(p.cfg.Tiers) > 0 && ph.Step > 0 && !ph.Start.After(p.now.Add(-u)) {
		h = ph // it covers the window: a tier's history started afresh does not
	}
	if u <= 0 || h.Step <= 0 || p.now.Before(h.Start) {
		return 0
	}
	// The samples that stand for a time in [now-u, now]: sample i holds
	// [start+i*step, start+(i+1)*step), so from the one holding now-u to
	// the one holding now.
	first := max(0, int(p.now.Add(-u).Sub(h.Start)/h.Step))
	last := min(len(h.Values)-1, int(p.now.Sub(h.Start)/h.Step))
	peak := 0.0
	for _, v := range h.Values[min(first, len(h.Values)):max(last+1, 0)] {
		if !math.IsNaN(v) && !math.IsInf(v, 0) {
			peak = max(peak, v)
		}
	}
	return int(math.Ceil(peak - 1e-9))
}
