package planner

import (
	"fmt"
	"math"
	"time"

	"github.com/fleetcast/autoscaler/fleet"
)

// The words of the plan's reasons and notes. Their codes are chosen where
// the decision is made; the words are made here, and the docs' examples
// and the golden files (planner/testdata/reasons.golden, and
// cmd/autoscaler/testdata's for the commands' output) pin them, so they
// change only on purpose, in one place.

func unknownPoolNote(n *fleet.Node) string {
	return fmt.Sprintf("node %s names pool %q, which the config does not have; left alone", n.ID, n.Pool)
}

func unknownNotReadyReason(since time.Duration) string {
	return fmt.Sprintf("unknown instance (not launched by this controller, or not provably), not ready %s after it was first seen; not counted as capacity, and never terminated for it: is its agent installed and reporting?",
		age(since))
}

func provisionTimeoutReason(since, timeout time.Duration) string {
	return fmt.Sprintf("launched %s ago and not ready by its provisioning deadline (%s); pool backed off", age(since), age(timeout))
}

func bootedWhileHaltedReason(since time.Duration, halt string, haltedAt time.Time, until time.Time) string {
	if halt != "" {
		return fmt.Sprintf("launched %s ago, booted (its cloud says it runs), agent not heard from; held, not terminated, while scale-in is halted: %s", age(since), halt)
	}
	return fmt.Sprintf("launched %s ago, booted (its cloud says it runs), agent not heard from; held until %s, a provisioning deadline after scale-in was last halted (%s)", age(since), clock(until), clock(haltedAt))
}

func holdingText(n int) string {
	return fmt.Sprintf("it holds %d launch(es) its cloud booted whose agents have not reported while scale-in is halted: nothing more is bought in it until they report or go", n)
}

func launchFailingReason(since time.Duration, why string) string {
	return fmt.Sprintf("launched %s ago, and the cloud is failing to create it (%s); terminated, pool backed off", age(since), why)
}

func interruptedReason(at time.Time) string {
	return fmt.Sprintf("spot interruption notice: the cloud takes it at %s; its agent asked its jobs to checkpoint; not counted as capacity (replaced)", clock(at))
}

func overSpendNote(spend, limit float64) string {
	return fmt.Sprintf("the fleet costs $%.2f/h (reservations included), over limits.max_spend_per_hour ($%.2f): nothing is launched", spend, limit)
}

func drainedEmptyReason(since time.Duration) string {
	return fmt.Sprintf("drained: no jobs left, as its agent confirmed (draining for %s)", age(since))
}

func drainedCheckpointedReason(jobs int, since time.Duration) string {
	return fmt.Sprintf("drained: its agent confirmed all %d job(s) checkpointed since it received the drain, begun %s ago", jobs, age(since))
}

func drainTimeoutReason(since time.Duration, blocker cause) string {
	return fmt.Sprintf("drain timed out after %s: %s; node kept", age(since), blocker.text)
}

func drainWaitReason(since time.Duration, blocker cause, timeout time.Duration) string {
	return fmt.Sprintf("draining for %s: %s (timeout in %s)", age(since), blocker.text, age(timeout-since))
}

func notConfirmedJobText(j *fleet.Job) string {
	return fmt.Sprintf("job %s shows no checkpoint since the drain began, and its agent has not confirmed the drain safe", j.ID)
}

func noForecastNote(why string) string {
	return "no usable forecast (" + why + "): planning on current demand only"
}

func neverReadNote(pp *poolPlan) string {
	return fmt.Sprintf("pool %s has never been read (%s): nothing is launched or drained in it, and it is counted at its max of %d node(s) against the fleet's limits, so that the other pools still serve within what is left",
		pp.spec.Name, pp.status.Unobserved.String(), pp.spec.Max)
}

func belowMinReason(pp *poolPlan) string {
	return fmt.Sprintf("pool is below its min of %d (%d active)", pp.spec.Min, pp.active)
}

func reservedBaselineReason(pp *poolPlan) string {
	return fmt.Sprintf("keep the reserved baseline full: the reservation of %d nodes is paid whether used or not (%d in the pool)", pp.spec.Max, pp.size)
}

// demandReason says why a launch is made for demand: src is
// ReasonForecast, ReasonDemandNow or ReasonAnnounced, as needAt said.
func (p *planner) demandReason(src Reason, by tierLevel, need int, at time.Time, lead time.Duration, have int) string {
	e := p.endingFor(at)
	why := p.sourceReason(src, by, need+e, at, lead, have) // need is less the ends
	if e > 0 {
		why += fmt.Sprintf("; %d of the pending start on nodes whose jobs are expected to end by %s", e, clock(p.endsBy(at)))
	}
	return why
}

// sourceReason is demandReason's words for src alone.
func (p *planner) sourceReason(src Reason, by tierLevel, need int, at time.Time, lead time.Duration, have int) string {
	if src == ReasonForecast {
		return fmt.Sprintf("%s needs %d GPUs at %s%s, lead time %s; have %d", p.forecastText(by), need, clock(at), p.announcedText(at, at), age(lead), have)
	}
	if src == ReasonAnnounced {
		return fmt.Sprintf("%d GPUs in use, pending or announced for %s (%d pending%s, %d announced); have %d", need, clock(at),
			p.plan.Demand.PendingGPUs, p.strandedText(), p.announcedMax(false, at, at), have)
	}
	return fmt.Sprintf("%d GPUs in use or pending now (%d pending%s); have %d", need, p.plan.Demand.PendingGPUs, p.strandedText(), have)
}

// expectedEndsNote says that pending jobs wait for nodes expected to be
// empty within pool pp's lead time, instead of a launch there.
func expectedEndsNote(pp *poolPlan, gpus int, at time.Time) string { // at: by when (endsBy)
	return fmt.Sprintf("pool %s: no launch for %d pending GPUs: nodes whose jobs are expected to end by %s free them first (a hint: once an expected end passes, it counts no more)",
		pp.spec.Name, gpus, clock(at))
}

// leftToFasterNote says how much of a pool's gap at was left to cheaper
// pools that boot sooner.
func leftToFasterNote(pp *poolPlan, left, gap int, at time.Time) string {
	return fmt.Sprintf("pool %s: %d of the %d GPUs needed at %s left to cheaper pools that boot sooner, which launch for them when their lead time reaches it",
		pp.spec.Name, left, gap, clock(at))
}

// announcedText says, when the forecast is of the demand not announced
// (Input.Unannounced) and announcements cover part of [from, to], that
// the need counts them; "" when it does not.
func (p *planner) announcedText(from, to time.Time) string {
	if !p.in.Unannounced {
		return ""
	}
	if n := p.announcedMax(true, from, to); n > 0 {
		return fmt.Sprintf(" (with up to %d GPUs announced, under way or ahead, on top of the demand not announced)", n)
	}
	return ""
}

// strandedText says, when need counts the free GPUs of busy nodes as held
// (jobs are pending), how many; "" when it does not.
func (p *planner) strandedText() string {
	n := p.stranded()
	if n == 0 {
		return ""
	}
	return fmt.Sprintf(", and %d free on busy nodes, which no pending job fits", n)
}

// jobsWouldNotFitNote says that scale-in keeps a pool's busy nodes whose
// jobs would fit nowhere else.
func jobsWouldNotFitNote(pp *poolPlan) string {
	return fmt.Sprintf("pool %s: busy nodes kept whose jobs would not fit on the other nodes' free GPUs (drained, they would wait for capacity again)", pp.spec.Name)
}

// scopedReason is a scoped launch's reason: the GPUs pending for its
// scope, and how many of the scope's GPUs were free.
func scopedReason(d fleet.ScopedDemand, free int) string {
	if d.Nodes > 0 {
		return fmt.Sprintf("%d whole nodes (%d GPUs) pending for %s, jobs on several nodes, which empty nodes serve; %d GPUs free", d.Nodes, d.GPUs, d, free)
	}
	return fmt.Sprintf("%d GPUs pending for %s, which has %d free; only it serves them", d.GPUs, d, free)
}

// unmetScopedNote says that GPUs pending for a scope cannot be bought
// there.
func unmetScopedNote(short int, what string, d fleet.ScopedDemand) string {
	return fmt.Sprintf("%d %s pending for %s cannot be bought there: each of its pools is at its max, backed off or over a limit", short, what, d)
}

func unmetNote(short int, at time.Time) string {
	return fmt.Sprintf("%d GPUs needed at %s cannot be bought: every pool that could serve is at its max, backed off or over a limit", short, clock(at))
}

func backedOffText(st fleet.PoolStatus) string {
	r := "backed off until " + clock(st.BackoffUntil)
	if st.BackoffReason != "" {
		r += " after " + st.BackoffReason
	}
	return r
}

// unobserved says why nothing is changed in a pool that was not observed
// this cycle.
func unobserved(pp *poolPlan) string {
	return "its group could not be read (" + pp.status.Unobserved.String() + "), so nothing in it is changed"
}

func scaleInHaltText(silent, ready int, halt float64) string {
	return fmt.Sprintf("%d of %d nodes have silent agents (more than %s of them): a network fault, not idleness", silent, ready, share(halt))
}

func aboveMaxText(pp *poolPlan) string {
	return fmt.Sprintf("pool is above its max of %d (%d active)", pp.spec.Max, pp.active)
}

func shareSpentNote(pp *poolPlan, lim fleet.Limits, size int) string {
	return fmt.Sprintf("pool %s is not scaled in: %d drain(s) began within limits.scale_in_window (%s), its budget at limits.scale_in_share (%s of %d nodes)",
		pp.spec.Name, pp.drainsInWindow, age(lim.ScaleInWindow), share(lim.ScaleInShare), size)
}

func shareReachedNote(pp *poolPlan, lim fleet.Limits, size int) string {
	return fmt.Sprintf("pool %s: scale-in stopped at its budget of %d drain(s) per %s (limits.scale_in_share: %s of %d nodes); more may drain later",
		pp.spec.Name, ScaleInBudget(lim, size), age(lim.ScaleInWindow), share(lim.ScaleInShare), size)
}

func idleText(n *fleet.Node, now time.Time) string {
	if n.IdleSince.IsZero() {
		return "idle"
	}
	return "idle " + age(now.Sub(n.IdleSince))
}

func endsSoonText(n *fleet.Node, at, now time.Time) string {
	return fmt.Sprintf("%d job(s) expected to end by %s (in %s): scaled in once empty if not needed then, no job moved now", len(n.Jobs), clock(at), age(at.Sub(now)))
}

func gpuFaultText(n *fleet.Node, now time.Time) string {
	return fmt.Sprintf("its agent cannot read its GPUs (for %s: %s), so what runs on them is unknown and the node is never taken for idle", age(now.Sub(n.GPUFaultSince)), n.GPUFault)
}

// drainGPUFaultText says why a draining node whose GPUs cannot be read is
// not terminated.
func drainGPUFaultText(n *fleet.Node) string {
	return fmt.Sprintf("its agent cannot read its GPUs (%s), so what runs on them cannot be confirmed", n.GPUFault)
}

// silentReason says why a node whose agent is silent (for d) is held.
func silentReason(n *fleet.Node, d time.Duration) cause {
	if n.Unknown {
		return cause{ReasonUnknownSilent, "unknown instance (not launched by this controller) whose agent has never reported healthy GPUs; a silent node is never treated as idle"}
	}
	return cause{ReasonAgentSilent, silence(d) + "; a silent node is never treated as idle"}
}

// silence describes an agent's silence: "agent silent for 7m" or "agent never reported".
func silence(d time.Duration) string {
	if d == neverReported {
		return "agent never reported"
	}
	return "agent silent for " + age(d)
}

// keepReason says how much capacity scale-in keeps, and why, until a time:
// src is ReasonForecast, ReasonDemandNow or ReasonAnnounced, as needOver said.
func (p *planner) keepReason(src Reason, keep int, until time.Time) string {
	if src == ReasonUnneededTime {
		return fmt.Sprintf("demand reached %d GPUs within the last %s (limits.scale_in_unneeded_time), forecast %s no higher until %s", keep, age(p.cfg.Limits.ScaleInUnneededTime), pct(p.q), clock(until))
	}
	if src == ReasonForecast {
		return fmt.Sprintf("forecast %s needs at most %d GPUs until %s%s", pct(p.q), keep, clock(until), p.announcedText(p.now, until))
	}
	if src == ReasonAnnounced {
		return fmt.Sprintf("%d GPUs in use, pending or announced until %s%s, forecast %s no higher", keep, clock(until), p.strandedText(), pct(p.q))
	}
	return fmt.Sprintf("%d GPUs in use or pending now%s, forecast %s no higher until %s", keep, p.strandedText(), pct(p.q), clock(until))
}

// age formats a duration the way a person reads it: 35m, 2h5m, 45s.
func age(d time.Duration) string { return fleet.FormatDuration(d) }

// cents rounds dollars to cents.
func cents(usd float64) float64 { return math.Round(usd*100) / 100 }

// clock formats a time of day in UTC.
func clock(t time.Time) string { return t.UTC().Format("15:04") }

// share formats a share as a percentage: 50%.
func share(x float64) string { return fmt.Sprintf("%g%%", math.Round(x*1000)/10) }

// pct formats a quantile as p90.
func pct(q float64) string { return fmt.Sprintf("p%g", math.Round(q*1000)/10) }

// queueDegradedNote says that the latest read of a scheduler's queue
// failed, or that the last whole one is too old, and what of its demand
// counts.
func queueDegradedNote(q *fleet.Queue) string {
	what := "its demand is the last whole read's, at " + clock(q.ReadAt)
	switch {
	case q.ReadAt.IsZero():
		what = "no whole read yet: none of its demand counts"
	case q.Expired:
		what = "its last whole read, at " + clock(q.ReadAt) + ", is too old to count: none of its demand does"
	}
	if q.Degraded == "" {
		// Read whole, and long ago: a read under way for longer than
		// demand counts.
		return fmt.Sprintf("%s source: %s", q.Source, what)
	}
	return fmt.Sprintf("%s source degraded (%s); %s", q.Source, q.Degraded, what)
}
