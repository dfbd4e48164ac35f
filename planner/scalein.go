package planner

import (
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/fleetcast/autoscaler/fleet"
)

// decideHalt halts scale-in when too many ready nodes' agents are silent
// at once (limits.silent_share_halt): a network fault, not idleness
// (docs/design.md rule 9). Observe calls it once it has the candidates, before it settles the
// overdue launches, which a halt holds.
func (p *planner) decideHalt() {
	readyNodes, silent := 0, 0
	for _, pp := range p.pools {
		readyNodes += len(pp.candidates)
		for _, c := range pp.candidates {
			if c.silentFor > 0 {
				silent++
			}
		}
	}
	if share := p.cfg.Limits.SilentShareHalt; readyNodes > 0 && float64(silent) > share*float64(readyNodes) {
		p.plan.ScaleInHalt = scaleInHaltText(silent, readyNodes, share)
		p.note(ReasonScaleInHalted, "scale-in halted: "+p.plan.ScaleInHalt)
	}
}

// scaleInPass is what one scale-in shares between the pools it drains.
type scaleInPass struct {
	t *tally
	// avail is the capacity scale-in counts on: the supply less what is
	// on silent nodes, counted down by each drain.
	avail int
	// decided are the nodes drained or held to bring a pool back to its
	// max: they are not listed again for demand.
	decided map[string]bool
}

// scaleIn drains what the forecast says will not be needed within the
// longest burst lead time plus the hysteresis (so nothing drained now has to
// be bought back before it could arrive, from whichever pool): most expensive
// pools first, idle nodes first, then busy nodes whose jobs all end within
// that window (held, planned to leave then: endingSoon), then nodes whose
// jobs checkpointed most recently. Capacity on silent nodes is not counted
// on, and reserved pools are never scaled in: they are paid for anyway.
// Its drains spend t.scaleInLeft.
func (p *planner) scaleIn(t *tally) {
	if p.plan.ScaleInHalt != "" {
		return
	}
	// Scoped demand and the free GPUs set aside for it are its pools'
	// business (kept by more, below), as they are launch's.
	s := &scaleInPass{t: t, avail: t.supply - t.silentGPUs - t.scopedFree, decided: map[string]bool{}}
	order := p.launchOrder()
	slices.Reverse(order)
	// Pools above their max first (after max was lowered, or a reservation
	// shrank): brought back to it by safe drains, whatever the forecast.
	for _, pp := range order {
		floor := max(pp.spec.Max, pp.spec.Min, pp.status.MinNodes)
		if pp.active > floor && len(pp.candidates) > 0 {
			why := aboveMaxText(pp)
			back := func() string { return fmt.Sprintf("brought back to %d", floor) }
			if !p.drainPool(s, pp, why, func(*poolPlan) bool { return pp.active > floor }, back) {
				return
			}
		}
	}
	until := p.now.Add(p.window)
	keep, src := p.needOver(p.now, until)
	if peak := p.recentPeak(); peak > keep {
		keep, src = peak, ReasonUnneededTime
	}
	keep = max(keep-p.scopedFor(p.keep), 0)
	for _, pp := range order {
		if pp.spec.Capacity == fleet.Reserved {
			continue
		}
		gpn := pp.spec.GPUsPerNode
		floor := max(pp.spec.Min, pp.status.MinNodes)
		// A pool keeps the free GPUs that demand scoped to it counts on.
		more := func(pp *poolPlan) bool {
			return s.avail-keep >= gpn && pp.active > floor && (pp.claimed == 0 || pp.free() >= gpn)
		}
		if !more(pp) || len(pp.candidates) == 0 {
			continue
		}
		if why := p.scaleInDelay(pp); why != "" {
			// Noted only when there is something to scale in, so
			// that the note says what it holds back. The surplus it
			// holds waits for it (counted as gone), so no cheaper pool
			// drains in its place.
			p.note(ReasonScaleInDelay, why)
			for _, c := range pp.candidates {
				if !more(pp) {
					break
				}
				if c.silentFor == 0 {
					s.gone(pp, drainCandidate{candidate: c})
				}
			}
			continue
		}
		why := func() string { return fmt.Sprintf("%s, fleet has %d", p.keepReason(src, keep, until), s.avail) }
		if !p.drainPool(s, pp, "", more, why) {
			return
		}
	}
}

// gone takes c's node, of pool pp, out of what the pass counts on: a drain,
// or a node planned to leave once its jobs end.
func (s *scaleInPass) gone(pp *poolPlan, c drainCandidate) {
	gpn := pp.spec.GPUsPerNode
	s.avail -= gpn
	s.t.placement.remove(c.slot)
	pp.supply -= gpn
	pp.used -= min(c.node.UsedGPUs(), gpn)
	pp.yielding -= min(c.yielding, pp.yielding)
	pp.active--
}

// drainPool drains the pool's ready nodes while more says the pool should
// lose another, within the cycle's budget (limits.max_scale_in_per_cycle,
// counted down in s.t) and the pool's (limits.scale_in_share per
// limits.scale_in_window): idle nodes first, then, for demand, busy nodes
// whose jobs all end within the window, held as planned to leave (counted
// down from s.avail and the pool's share, not the cycle's budget), then
// those whose jobs checkpointed most recently; silent and blocked nodes
// are held, with the reason. s.avail is counted down by each drain. prefix, when set, says
// the pool is above its max (ReasonAboveMax) and starts each reason;
// suffix ends each drain's. It returns false when the cycle's budget is
// spent.
func (p *planner) drainPool(s *scaleInPass, pp *poolPlan, prefix string, more func(*poolPlan) bool, suffix func() string) bool {
	lim := p.cfg.Limits
	gpn := pp.spec.GPUsPerNode
	budget := &s.t.scaleInLeft
	if pp.status.IsUnobserved() {
		p.note(ReasonPoolUnobserved, fmt.Sprintf("pool %s is not scaled in: %s", pp.spec.Name, unobserved(pp)))
		return true
	}
	size := pp.size - pp.stuck
	left := ScaleInBudget(lim, size) - pp.drainsInWindow
	if left <= 0 {
		p.note(ReasonScaleInShare, shareSpentNote(pp, lim, size))
		return true
	}
	cands := make([]drainCandidate, 0, len(pp.candidates))
	for _, c := range pp.candidates {
		if !s.decided[c.node.ID] {
			dc := drainCandidate{candidate: c, yields: p.onlyPreemptible(c.node)}
			dc.blocker, dc.oldestCheckpoint = p.drainBlocker(c.node)
			if prefix == "" && c.silentFor == 0 && dc.blocker.none() && !c.node.Rebalance {
				// A node the cloud may take soon (rebalance) goes
				// first as ever; a blocked one is held for its block.
				dc.endsBy = p.endingSoon(c.node)
			}
			cands = append(cands, dc)
		}
	}
	sortCandidates(cands)
	for _, c := range cands {
		if !more(pp) {
			break
		}
		if prefix == "" && c.silentFor == 0 && c.blocker.none() && !c.node.Rebalance && p.idleTooShort(c.node) {
			// Not unneeded for long enough: planned to leave once it
			// is, counted as gone in this pass (as an ending node is),
			// so that no busy node's jobs are moved for the surplus it
			// will take.
			p.add(Action{Kind: Hold, Pool: pp.spec.Name, Node: c.node.ID, InstanceType: pp.spec.InstanceType, GPUs: gpn,
				Code: ReasonUnneededTime, Reason: p.idleTooShortText(c.node) + "; " + suffix()})
			s.gone(pp, c)
			continue
		}
		if *budget == 0 {
			p.note(ReasonMaxScaleInPerCycle, fmt.Sprintf("scale-in stopped at limits.max_scale_in_per_cycle (%d); more may drain next cycle", lim.MaxScaleInPerCycle))
			return false
		}
		n := c.node
		if !c.endsBy.IsZero() && left > 0 && (c.slot < 0 || !s.t.placement.slots[c.slot].given) {
			// Its jobs' ends free it without moving them: planned to
			// leave then, not drained now. It counts as gone in this
			// pass, and against the pool's share (scale_in_share), as a
			// drain would, so that no other node's jobs are moved for
			// the same surplus; not against the cycle's budget, which a
			// drain spends once and a hold would spend every cycle. A
			// node that took another's jobs in this plan is not held:
			// it will not be empty by then.
			p.add(Action{Kind: Hold, Pool: pp.spec.Name, Node: n.ID, InstanceType: pp.spec.InstanceType, GPUs: gpn,
				Code: ReasonEndsSoon, Reason: endsSoonText(n, c.endsBy, p.now) + "; " + suffix()})
			left--
			s.gone(pp, c)
			continue
		}
		if left == 0 && c.silentFor == 0 && c.blocker.none() {
			// Blocked nodes are still listed with their holds.
			p.note(ReasonScaleInShare, shareReachedNote(pp, lim, size))
			continue
		}
		if prefix == "" && c.silentFor == 0 && c.blocker.none() && !p.placeElsewhere(s.t, pp, c) {
			continue
		}
		if prefix != "" {
			// Decided above the max: not listed again for demand.
			s.decided[n.ID] = true
		}
		a := Action{Pool: pp.spec.Name, Node: n.ID, InstanceType: pp.spec.InstanceType, GPUs: gpn}
		switch {
		case c.silentFor > 0:
			why := silentReason(n, c.silentFor)
			a.Kind, a.Code, a.Reason = Hold, why.code, why.text
		case !c.blocker.none():
			a.Kind, a.Code, a.Reason = Hold, c.blocker.code, c.blocker.text
		default:
			a.Kind = Drain
			if len(n.Jobs) == 0 {
				a.Code, a.Reason = ReasonIdle, idleText(n, p.now)
			} else {
				a.Code, a.Reason = ReasonCheckpointed, fmt.Sprintf("%d job(s), oldest checkpoint %s ago", len(n.Jobs), age(p.now.Sub(c.oldestCheckpoint)))
			}
			if prefix != "" {
				a.Code, a.Reason = ReasonAboveMax, prefix+": "+a.Reason
			}
			a.Reason += "; " + suffix()
			s.gone(pp, c)
			pp.drainsInWindow++
			*budget--
			left--
		}
		if a.Kind == Hold && prefix != "" {
			a.Reason = prefix + ", but " + a.Reason
		}
		p.add(a)
	}
	return true
}

// endingSoon is when busy node n's jobs are all expected to end
// (expectedEmpty), when that is within scale-in's window and every job
// started at least a window ago; zero otherwise. Scale-in for demand
// plans such a node to leave then instead of draining it, or another
// node, for the same surplus now: no job is moved (a checkpoint, a restart
// elsewhere) for capacity that frees by itself within the window, and the
// node is scaled in once empty, if it is still not needed then.
//
// An expected end is a hint (it may be wrong, or a lie of the node's): it
// never causes a launch, nor a drain of its node, only puts drains off,
// and for a bounded time. An end that has passed counts no more, so one
// hold lasts at most the window; and a node with a job started within the
// window is not held, so a scheduler that keeps placing short jobs on a
// held node (the hold does not cordon it) cannot keep it, and the surplus,
// for ever: a node is held for at most one window in two. (A node that
// lies about its jobs can keep capacity as it always could, by reporting
// its GPUs busy.)
func (p *planner) endingSoon(n *fleet.Node) time.Time {
	if len(n.Jobs) == 0 {
		return time.Time{}
	}
	for i := range n.Jobs {
		if n.Jobs[i].Start.After(p.now.Add(-p.window)) {
			return time.Time{}
		}
	}
	if at, ok := expectedEmpty(n, p.now); ok && !at.After(p.now.Add(p.window)) {
		return at
	}
	return time.Time{}
}

// placeElsewhere reports whether the node of c may drain for demand as
// far as its jobs go: it holds none, or they all fit on other nodes' free
// GPUs (while jobs are pending, on busy nodes only), where the scheduler
// would start them at once (they are then placed there, in t.placement);
// a drained job that fits nowhere waits for capacity again, so its node
// stays. A node that took another drained node's jobs in this plan stays
// too.
func (p *planner) placeElsewhere(t *tally, pp *poolPlan, c drainCandidate) bool {
	pl := &t.placement
	switch {
	case c.slot >= 0 && pl.slots[c.slot].given:
		return false
	case len(c.node.Jobs) == 0:
		return true
	case c.slot >= 0 && pl.fits(c.slot, c.node.Jobs, p.plan.Demand.PendingGPUs > 0):
		// While jobs are pending, empty nodes are theirs: the moved jobs
		// go to busy nodes' free GPUs only.
		return true
	}
	p.note(ReasonJobsWouldNotFit, jobsWouldNotFitNote(pp))
	return false
}

// ScaleInBudget is how many of a pool's size nodes may start draining
// within one limits.scale_in_window: the scale_in_share of them, rounded
// down, but at least one (docs/design.md rule 9).
func ScaleInBudget(lim fleet.Limits, size int) int {
	return max(1, int(math.Floor(lim.ScaleInShare*float64(size)+1e-9)))
}

// worstJob returns, among the jobs that match, the one with the oldest last
// checkpoint (never is oldest), then the smallest ID; nil if none match.
// Reasons name it, so they do not depend on the order jobs were listed in.
func worstJob(jobs []fleet.Job, match func(*fleet.Job) bool) *fleet.Job {
	var worst *fleet.Job
	for i := range jobs {
		j := &jobs[i]
		if !match(j) {
			continue
		}
		if worst == nil || j.LastCheckpoint.Before(worst.LastCheckpoint) ||
			(j.LastCheckpoint.Equal(worst.LastCheckpoint) && j.ID < worst.ID) {
			worst = j
		}
	}
	return worst
}

// drainBlocker says why a ready node cannot be drained now (none if it
// can), and returns the oldest last checkpoint among its jobs. Every job
// must have checkpointed within drain.checkpoint_max_age
// (docs/design.md rule 1, of every job, not only long-running ones: a
// young job that never checkpointed would lose all its work) and, after a cancelled
// drain, since the cancel (so a job that ignores the signal does not flap
// its node between drains).
func (p *planner) drainBlocker(n *fleet.Node) (cause, time.Time) {
	if n.GPUFault != "" && len(n.Jobs) == 0 {
		// Empty as far as the agent knows, but nobody can see what runs
		// on the GPUs: not idle.
		return cause{ReasonGPUFault, gpuFaultText(n, p.now)}, time.Time{}
	}
	maxAge := p.cfg.Drain.CheckpointMaxAge
	stale := func(j *fleet.Job) bool {
		return j.LastCheckpoint.IsZero() || p.now.Sub(j.LastCheckpoint) > maxAge || j.LastCheckpoint.Before(n.DrainCancelledAt)
	}
	oldest := worstJob(n.Jobs, func(*fleet.Job) bool { return true })
	j := worstJob(n.Jobs, stale)
	switch {
	case oldest == nil:
		return cause{}, time.Time{}
	case j == nil:
		return cause{}, oldest.LastCheckpoint
	}
	kind := "job"
	if j.LongRunning || p.now.Sub(j.Start) >= p.cfg.Drain.LongRunningAfter {
		kind = "long-running job"
	}
	var why cause
	switch {
	case j.LastCheckpoint.IsZero():
		why = cause{ReasonNeverCheckpointed, fmt.Sprintf("%s %s has never checkpointed (started %s ago)", kind, j.ID, age(p.now.Sub(j.Start)))}
	case p.now.Sub(j.LastCheckpoint) > maxAge:
		why = cause{ReasonCheckpointTooOld, fmt.Sprintf("%s %s last checkpoint %s ago > %s", kind, j.ID, age(p.now.Sub(j.LastCheckpoint)), age(maxAge))}
	default:
		why = cause{ReasonNoCheckpointSinceCancel, fmt.Sprintf("drain cancelled %s ago and %s %s has not checkpointed since", age(p.now.Sub(n.DrainCancelledAt)), kind, j.ID)}
	}
	return why, oldest.LastCheckpoint
}

// sortCandidates orders scale-in candidates: drainable before blocked,
// then nodes the cloud recommends moving work off (a rebalance
// recommendation), then idle before busy (longest idle first), then busy
// nodes of preemptible tiers' jobs only (their work worth nothing
// waiting: asked to checkpoint and leave first), then freshest oldest
// checkpoint, then by ID, so the order is total and the plan
// deterministic.
func sortCandidates(cs []drainCandidate) {
	slices.SortFunc(cs, func(a, b drainCandidate) int {
		ab, bb := a.silentFor > 0 || !a.blocker.none(), b.silentFor > 0 || !b.blocker.none()
		if ab != bb {
			if ab {
				return 1
			}
			return -1
		}
		if a.node.Rebalance != b.node.Rebalance {
			if a.node.Rebalance {
				return -1
			}
			return 1
		}
		ai, bi := len(a.node.Jobs) == 0, len(b.node.Jobs) == 0
		if ai != bi {
			if ai {
				return -1
			}
			return 1
		}
		if !ai && a.yields != b.yields {
			if a.yields {
				return -1
			}
			return 1
		}
		// Busy nodes whose jobs end within the window, soonest first:
		// planned to leave then, before any job is moved.
		if ae, be := !a.endsBy.IsZero(), !b.endsBy.IsZero(); ae != be {
			if ae {
				return -1
			}
			return 1
		} else if ae {
			if c := a.endsBy.Compare(b.endsBy); c != 0 {
				return c
			}
		}
		if ai {
			// Longest idle first; an unknown idle start last (held
			// until seen idle long enough: unneeded.go).
			if az, bz := a.node.IdleSince.IsZero(), b.node.IdleSince.IsZero(); az != bz {
				if az {
					return 1
				}
				return -1
			}
			if c := a.node.IdleSince.Compare(b.node.IdleSince); c != 0 {
				return c
			}
		} else if c := b.oldestCheckpoint.Compare(a.oldestCheckpoint); c != 0 {
			return c
		}
		return strings.Compare(a.node.ID, b.node.ID)
	})
}
