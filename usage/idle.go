package usage

import (
	"time"

	"github.com/fleetcast/autoscaler/fleet"
)

// Allocated-idle: the part of a job's used cost its GPUs held idle for at
// least the window (Options.IdleWindow), as its node's agent read them
// (fleet.Job.IdleSince, FirstBusy).

// slotIdle is a job's idleness on a node: idle since (zero while busy or
// unread), before its execution (never seen busy) or stalled; and what
// its GPUs there were charged in the idle run so far while the run was
// shorter than the window, by hour and team and tier, counted
// allocated-idle once it is that long, Used alone if it ends sooner.
type slotIdle struct {
	since     time.Time
	before    bool
	tentative []idlePiece
}

// idlePiece is what an idle run was charged in one hour, to one team and
// tier, before it was as long as the window.
type idlePiece struct {
	hour time.Time
	tt   teamTier
	Amount
}

// idleOf is j's idleness on a node, going on from what it was (was, nil
// for a job new there): the charges of an idle run carried while it goes
// on.
func idleOf(j *fleet.Job, was *slotIdle) slotIdle {
	st := slotIdle{since: j.IdleSince, before: j.FirstBusy.IsZero()}
	if was != nil && !st.since.IsZero() && st.since.Equal(was.since) && st.before == was.before {
		st.tentative = was.tentative
	}
	return st
}

// chargeIdle counts am, what a job's GPUs on a node were just charged in
// the hour hour while idle, as allocated-idle once the idle run is as
// long as the window, with what the run was charged before, each piece
// in the book of its own hour (held open for it, heldFrom; the hour now,
// should it have closed all the same) and its own team and tier; until
// then it is kept aside (tentative).
func (a *Accountant) chargeIdle(jb *jobBook, st *slotIdle, pool string, hour time.Time, am Amount) {
	if a.splitAt.Sub(st.since) < a.window {
		if n := len(st.tentative); n > 0 && st.tentative[n-1].hour.Equal(hour) && st.tentative[n-1].tt == jb.tt {
			st.tentative[n-1].Add(am)
		} else {
			st.tentative = append(st.tentative, idlePiece{hour: hour, tt: jb.tt, Amount: am})
		}
		return
	}
	kind := Stalled
	if st.before {
		kind = IdleBeforeExecution
	}
	a.idleCharge(jb, kind, pool, jb.hb, am)
	for _, p := range st.tentative {
		h := p.hour
		if a.hours[h.UTC()] == nil {
			h = hour // its hour closed: written, never written again
		}
		a.idleCharge(jb, kind, pool, a.hour(h, p.tt), p.Amount)
	}
	st.tentative = nil
}

// heldFrom is cutoff, or the earliest hour before it that an idle run's
// charges kept aside are in (chargeIdle): no hour from there closes while
// they may yet be counted in it. They are kept for at most the window.
func (a *Accountant) heldFrom(cutoff time.Time) time.Time {
	for _, nb := range a.order {
		for i := range nb.idle {
			for _, p := range nb.idle[i].tentative {
				if p.hour.Before(cutoff) {
					cutoff = p.hour
				}
			}
		}
	}
	return cutoff
}

// idleCharge adds am, of kind, to the job's record and to b.
func (a *Accountant) idleCharge(jb *jobBook, kind Kind, pool string, b *hourBook, am Amount) {
	if kind == IdleBeforeExecution {
		jb.rec.IdleBeforeMicros += int64(am.Micros)
		jb.rec.IdleBeforeGPUHours += am.GPUHours
	} else {
		jb.rec.StalledMicros += int64(am.Micros)
		jb.rec.StalledGPUHours += am.GPUHours
	}
	b.add(pool, kind, am)
}
