package simulate

import (
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
	// spec is each team's block, by team index; nil for a team without a
	// share.
	spec []*fleet.Team
	// onRes is the GPUs each team's running jobs hold on reserved nodes;
	// queued the GPUs each team's jobs that may run there wait for; over
	// how far each team holds more than its share, in a reclaim pass.
	onRes, queued, over []int
	// teams are the teams with a share, by index.
	teams []int
	// reclaimAt is when reclaim may next look.
	reclaimAt int64
}

// newShareBook is the book for a run: nil unless some team of names (the
// jobs' teams, by index) has a share.
func newShareBook(teams []fleet.Team, names []string) *shareBook {
	b := &shareBook{spec: make([]*fleet.Team, len(names))}
	for k, name := range names {
		if t := fleet.TeamByName(teams, name); t != nil && t.ReservedShare > 0 {
			b.spec[k] = t
			b.teams = append(b.teams, k)
		}
	}
	if len(b.teams) == 0 {
		return nil
	}
	b.onRes, b.queued = make([]int, len(names)), make([]int, len(names))
	return b
}

// shareGPUs is team k's share of the reserved GPUs now (the reservation
// may grow in a run).
func (e *engine) shareGPUs(k int) int { return e.shares.spec[k].ShareGPUs(reservedGPUs(e)) }

// unusedShare is the part of team k's share its jobs do not hold.
func (e *engine) unusedShare(k int) int { return max(e.shareGPUs(k)-e.shares.onRes[k], 0) }

// keptFrom is the reserved GPUs kept for the other teams than k: each
// one's unused share while it has jobs queued.
func (e *engine) keptFrom(k int32) int {
	n, reserved := 0, -1
	for _, x := range e.shares.teams {
		if int32(x) != k && e.shares.queued[x] > 0 {
			if reserved < 0 {
				reserved = reservedGPUs(e)
			}
			n += max(e.shares.spec[x].ShareGPUs(reserved)-e.shares.onRes[x], 0)
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
	if e.budget != nil && (m == 0 || m&(onDemand|onSpot) != 0) && e.overBudget(j.group[byTeam], e.burstRate(j.gpus), secs(fleet.BudgetWindow)) {
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
// A team's shares of one GPU hold it once: the first to start on it counts
// it, the last to leave gives it back.
func (e *engine) holdShare(j *job, sign int) {
	if e.shares == nil {
		return
	}
	if j.isShare() {
		n := e.nodes[j.nodes[0]]
		if n.tier == 0 && !e.teamSharesGPU(j, n) {
			e.shares.onRes[j.group[byTeam]] += sign
		}
		return
	}
	e.onNodes(j, func(n *node, m int) {
		if n.tier == 0 {
			e.shares.onRes[j.group[byTeam]] += sign * m / shareMilli
		}
	})
}

// teamSharesGPU reports whether another share of job j's team holds part
// of the GPU share j holds on node n.
func (e *engine) teamSharesGPU(j *job, n *node) bool {
	for _, id := range n.jobs {
		if v := &e.jobs[id]; v != j && v.isShare() && v.part == j.part && v.group[byTeam] == j.group[byTeam] {
			return true
		}
	}
	return false
}

// reclaim gives the teams with jobs queued their shares back: for each
// team with a share whose first queued job that fits its unused share on
// one reserved node (and may run there) cannot start, it takes the up
// reserved node where that job fits once the fewest GPUs are given back,
// and asks the jobs there of teams holding more of the reservation than
// their shares (borrowers) to checkpoint and stop, as a drain does
// (askCheckpoint: they requeue with nothing lost once their checkpoint is
// durable), never taking a borrower below its own share (a job on several
// nodes counts all it holds there). Jobs already writing a checkpoint
// count as leaving. It runs at most every preemptEvery seconds, and
// reports whether room was made at once. A job wider than a node waits
// for whole reserved nodes to free as they do.
func (e *engine) reclaim() bool {
	b := e.shares
	if b == nil || e.now < b.reclaimAt {
		return false
	}
	b.reclaimAt = e.now + preemptEvery
	if b.over == nil {
		b.over = make([]int, len(b.spec))
	}
	// Over is how far each team's jobs hold more than its share: what it
	// may be asked to give back.
	overSet := false
	asked, now := false, false
	for _, k := range b.teams {
		if b.queued[k] == 0 {
			continue
		}
		unused := e.unusedShare(k)
		j := e.firstFitting(k, unused)
		if j == nil || e.fitsReservedSomewhere(j) {
			continue
		}
		if !overSet {
			for x := range b.over {
				b.over[x] = b.onRes[x] - e.shareGPUs(x)
			}
			overSet = true
		}
		n := e.reclaimNode(j)
		if n == nil {
			continue
		}
		room := n.free
		for i := 0; i < len(n.jobs) && room < j.gpus; i++ {
			v := &e.jobs[n.jobs[i]]
			if v.isShare() {
				continue // its leaving frees no GPU while another share holds it
			}
			if v.preempted || v.saveAt >= 0 {
				room += min(v.gpus, n.gpn) // leaving already
				continue
			}
			x, held := v.group[byTeam], e.reservedHeld(v)
			if v.unresponsive || b.over[x] < held {
				continue
			}
			b.over[x] -= held
			room += min(v.gpus, n.gpn)
			e.st.reclaimed++
			asked = true
			if e.askToLeave(n.jobs[i]) {
				now = true
				i-- // it left the node's jobs
			}
		}
	}
	if asked {
		b.reclaimAt = e.now + max(preemptEvery, e.ckptDur)
	}
	return now
}

// firstFitting is team k's first queued job (by the scheduler's order)
// that may run on reserved capacity and fits on one node within gpus (its
// unused share); nil for none.
func (e *engine) firstFitting(k int, gpus int) *job {
	var best *job
	for _, ck := range e.keys {
		if ck.slot != e.slots[k] || ck.gpus > gpus || ck.gpus > e.maxGPN {
			continue
		}
		for _, id := range e.classes[ck].ids {
			j := &e.jobs[id]
			if int(j.group[byTeam]) == k && (j.runsOn == 0 || j.runsOn&onReserved != 0) && (best == nil || j.before(best)) {
				best = j
			}
		}
	}
	return best
}

// fitsReservedSomewhere reports whether job j fits on an up reserved node
// of a GPU type it accepts now.
func (e *engine) fitsReservedSomewhere(j *job) bool {
	for f := j.gpus; f < len(e.buckets[0]); f++ {
		for _, n := range e.buckets[0][f] {
			if e.accepts(j, n, 0) {
				return true
			}
		}
	}
	return false
}

// reclaimNode is the up reserved node (taking work) of a GPU type job j
// accepts where it fits once the borrowers there give back the fewest
// GPUs: its free GPUs, those of its jobs leaving already, and those of its
// borrowers' jobs (teams over their shares, by what they hold there; a
// share of a GPU frees none); nil for none.
func (e *engine) reclaimNode(j *job) *node {
	gpus := j.gpus
	var best *node
	bestAsk := 0
	for f, b := range e.buckets[0] {
		for _, n := range b {
			if !e.accepts(j, n, 0) {
				continue
			}
			room, ask := f, 0
			for _, id := range n.jobs {
				v := &e.jobs[id]
				g := min(v.gpus, n.gpn)
				switch {
				case v.isShare():
				case v.preempted || v.saveAt >= 0:
					room += g
				case !v.unresponsive && e.shares.over[v.group[byTeam]] >= e.reservedHeld(v):
					if room < gpus {
						room += g
						ask += g
					}
				}
			}
			if room >= gpus && (best == nil || ask < bestAsk) {
				best, bestAsk = n, ask
			}
		}
	}
	return best
}

// reservedHeld is what running job v holds on reserved nodes.
func (e *engine) reservedHeld(v *job) int {
	if len(v.nodes) == 1 {
		if e.nodes[v.nodes[0]].tier == 0 {
			return v.gpus
		}
		return 0
	}
	n := 0
	for _, ni := range v.nodes {
		if e.nodes[ni].tier == 0 {
			n += e.nodes[ni].gpn
		}
	}
	return min(n, v.gpus)
}
