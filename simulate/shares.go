package simulate

import (
	"math"

	"github.com/fleetcast/autoscaler/fleet"
)

// noCapacity is a mask of no capacity type (job.runsOn is 0 for any): a
// job that may run on reserved capacity only, kept off it (maskFor).
const noCapacity uint8 = 1 << 7

// shareBook keeps, when teams have shares of the reservation
// (fleet.Team.ReservedShare) and the jobs have teams, what the simulated
// scheduler needs to honour them, as a quota with borrowing does (Kueue's
// nominal quota, lent while unused and reclaimed): each team's share of
// the reserved GPUs is guaranteed to it and lent to the others while it
// leaves it idle; no other team's job starts on it while the team has
// jobs queued, and a borrower gives it back at its next checkpoint
// (reclaim).
type shareBook struct {
	// share is each team's share, by team index (0: none).
	share []float64
	// onRes is the GPUs each team's running jobs hold on reserved nodes;
	// queued the GPUs each team's jobs wait for.
	onRes, queued []int
	// reclaimAt is when reclaim may next look.
	reclaimAt int64
}

// newShareBook is the book for a run: nil unless some team of names (the
// jobs' teams, by index) has a share.
func newShareBook(teams []fleet.Team, names []string) *shareBook {
	b := &shareBook{share: make([]float64, len(names))}
	any := false
	for k, name := range names {
		if t := fleet.TeamByName(teams, name); t != nil && t.ReservedShare > 0 {
			b.share[k], any = t.ReservedShare, true
		}
	}
	if !any {
		return nil
	}
	b.onRes, b.queued = make([]int, len(names)), make([]int, len(names))
	return b
}

// shareGPUs is team k's share of the reserved GPUs now (the reservation
// may grow in a run), rounded down as fleet.Team.ShareGPUs does.
func (e *engine) shareGPUs(k int) int {
	s := e.shares.share[k]
	if s <= 0 {
		return 0
	}
	return int(math.Floor(s*float64(reservedGPUs(e)) + 1e-9))
}

// unusedShare is the part of team k's share its jobs do not hold.
func (e *engine) unusedShare(k int) int { return max(e.shareGPUs(k)-e.shares.onRes[k], 0) }

// keptFrom is the reserved GPUs kept for the other teams than k: each
// one's unused share while it has jobs queued.
func (e *engine) keptFrom(k int32) int {
	n := 0
	for x, q := range e.shares.queued {
		if int32(x) != k && q > 0 {
			n += e.unusedShare(x)
		}
	}
	return n
}

// reservedFree is the free GPUs of the up reserved nodes that take work.
func (e *engine) reservedFree() int {
	n := 0
	for f, b := range e.buckets[0] {
		n += f * len(b)
	}
	return n
}

// maskFor is the capacity types job j may start on now: its tier's
// (job.runsOn), less reserved capacity where its GPUs there would take
// what is kept for another team's share (keptFrom); noCapacity when that
// leaves none.
//
// With budgets, a job whose run on the dearest burst capacity would bring
// its team to its budget (overBudget) starts on reserved capacity only.
func (e *engine) maskFor(j *job) uint8 {
	m := j.runsOn
	if e.budget != nil && e.overBudget(j.group[byTeam], e.burstRate(j.gpus), secs(fleet.BudgetWindow)) {
		m = without(m, onDemand|onSpot)
	}
	if e.shares == nil || m == noCapacity || e.reservedFree()-j.gpus >= e.keptFrom(j.group[byTeam]) {
		return m
	}
	return without(m, onReserved)
}

// without is mask m (0: any) less the capacity types in drop;
// noCapacity when none is left.
func without(m, drop uint8) uint8 {
	if m == 0 {
		m = onAny
	}
	if m &^= drop; m == 0 {
		return noCapacity
	}
	if m == onAny {
		return 0
	}
	return m
}

// holdShare counts what running job j holds on reserved nodes into its
// team's (sign 1, as it starts) or out of it (-1, as it stops).
func (e *engine) holdShare(j *job, sign int) {
	if e.shares == nil {
		return
	}
	left := j.gpus
	for _, ni := range j.nodes {
		n := e.nodes[ni]
		g := left
		if len(j.nodes) > 1 {
			g = min(left, n.gpn)
		}
		left -= g
		if n.tier == 0 {
			e.shares.onRes[j.group[byTeam]] += sign * g
		}
	}
}

// reclaim gives the teams with jobs queued their shares back: for as many
// GPUs as their queued jobs ask of their unused shares beyond the free
// reserved GPUs (and those already being given back), it asks the jobs of
// teams holding more of the reservation than their shares (borrowers) to
// checkpoint and stop, as a drain does (askCheckpoint: they requeue with
// nothing lost once their checkpoint is durable), never taking a borrower
// below its own share. It runs at most every preemptEvery seconds, and
// reports whether room was made at once.
func (e *engine) reclaim() bool {
	b := e.shares
	if b == nil || e.now < b.reclaimAt {
		return false
	}
	b.reclaimAt = e.now + preemptEvery
	want := 0
	for k, q := range b.queued {
		if q > 0 {
			want += min(q, e.unusedShare(k))
		}
	}
	if want == 0 {
		return false
	}
	// Over is how far each team's jobs hold more than its share: what it
	// may be asked to give back; returning what its asked jobs will.
	over := make([]int, len(b.share))
	for k := range over {
		over[k] = b.onRes[k] - e.shareGPUs(k)
	}
	need := want - e.reservedFree()
	for _, n := range e.live {
		if n.tier != 0 || n.state != up {
			continue
		}
		for _, id := range n.jobs {
			if v := &e.jobs[id]; v.preempted || v.saveAt >= 0 {
				need -= min(v.gpus, n.gpn) // being given back already
			}
		}
	}
	asked, now := false, false
	for _, n := range e.live {
		if need <= 0 {
			break
		}
		if n.tier != 0 || n.state != up {
			continue
		}
		for i := 0; i < len(n.jobs) && need > 0; i++ {
			v := &e.jobs[n.jobs[i]]
			g := min(v.gpus, n.gpn)
			k := v.group[byTeam]
			if v.preempted || v.saveAt >= 0 || v.unresponsive || over[k] < g {
				continue
			}
			over[k] -= g
			need -= g
			e.st.reclaimed++
			asked = true
			if e.askCheckpoint(n.jobs[i]) {
				now = true
				i-- // it left the node's jobs
				continue
			}
			v.preempted = true
		}
	}
	if asked {
		b.reclaimAt = e.now + max(preemptEvery, e.ckptDur)
	}
	return now
}
