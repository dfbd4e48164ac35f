package planner

import (
	"slices"

	"github.com/fleetcast/autoscaler/fleet"
)

// placement is the free GPUs of the fleet's ready nodes whose agents
// report, one slot per node, where scale-in places the jobs of a busy node
// before it drains it: a drained job is requeued, and it waits again
// unless the scheduler can start it at once on another node. Jobs are
// placed as the scheduler places them: each on one node, best fit, the
// widest first. A job wider than any node's free GPUs needs a whole empty
// node, which is why a fleet with many free GPUs in total may still have
// no room for a drained node's jobs.
type placement struct {
	slots []slot
	// byFree holds the slots by free GPUs (the last bucket: that many or
	// more), filed on the first placement (most plans place nothing). It
	// may hold stale entries, which are dropped when met.
	byFree [][]int
	// widest is the widest node's GPUs, which sizes byFree.
	widest int
	// jobs and moves are scratch for fits.
	jobs  []int
	moves []move
}

// slot is one node's room in a placement.
type slot struct {
	// pool is the node's, whose used GPUs a placed job adds to.
	pool *poolPlan
	free int
	// empty is set on a node that held no job when observed.
	empty bool
	// out is set on a node drained in this plan: it takes no job.
	out bool
	// given is set on a node that took a drained node's jobs: it is not
	// drained in this plan (its new jobs would have to move again).
	given bool
}

// move is a job's GPUs placed on a slot, undone if the rest find no room.
type move struct{ slot, gpus int }

// maxBucket caps placement's buckets, so that an absurd gpus_per_node
// does not size them.
const maxBucket = 256

// newPlacement is an empty placement for nodes of up to widest GPUs,
// with room for nodes slots.
func newPlacement(widest, nodes int) placement {
	return placement{widest: widest, slots: make([]slot, 0, nodes)}
}

// bucket is the bucket of a slot with free GPUs.
func (pl *placement) bucket(free int) int { return min(free, len(pl.byFree)-1) }

// add adds a node of pool pp with free of its gpn GPUs and returns its
// slot.
func (pl *placement) add(pp *poolPlan, free, gpn int) int {
	pl.slots = append(pl.slots, slot{pool: pp, free: free, empty: free == gpn})
	return len(pl.slots) - 1
}

// remove takes a drained node's slot out: it takes no job.
func (pl *placement) remove(slot int) {
	if slot >= 0 {
		pl.slots[slot].out = true
	}
}

// fits places jobs (each one's GPUs) on the other slots than own (with
// busyOnly, on nodes that held jobs only) and reports whether every one
// found room; only then are they placed (the slots that took them are
// given, their pools' used GPUs raised).
func (pl *placement) fits(own int, jobs []fleet.Job, busyOnly bool) bool {
	if pl.byFree == nil {
		pl.byFree = make([][]int, min(max(pl.widest, 1), maxBucket)+1)
		for s := range pl.slots {
			pl.put(s, pl.slots[s].free)
		}
	}
	pl.jobs = pl.jobs[:0]
	for i := range jobs {
		if g := fleet.Holds(jobs, i); g > 0 { // the GPU shares hold, once
			pl.jobs = append(pl.jobs, g)
		}
	}
	slices.SortFunc(pl.jobs, func(a, b int) int { return b - a })
	pl.moves = pl.moves[:0]
	ok := true
	for _, g := range pl.jobs {
		s := pl.take(own, g, busyOnly)
		if s < 0 {
			ok = false
			break
		}
		pl.moves = append(pl.moves, move{s, g})
	}
	for _, m := range pl.moves {
		if ok {
			sl := &pl.slots[m.slot]
			sl.given = true
			if pp := sl.pool; pp != nil {
				// The job holds the pool's GPUs now; on a busy node it
				// fills free GPUs that pending jobs could not use.
				pp.used += m.gpus
				if !sl.empty {
					pp.stranded -= min(m.gpus, pp.stranded)
				}
			}
			continue
		}
		pl.put(m.slot, pl.slots[m.slot].free+m.gpus)
	}
	return ok
}

// take takes g GPUs from the slot, other than own (and, with busyOnly,
// not an empty node), with the fewest free GPUs that has them, and
// returns it; -1 if none has.
func (pl *placement) take(own, g int, busyOnly bool) int {
	for b := pl.bucket(g); b < len(pl.byFree); b++ {
		q := pl.byFree[b]
		for k := len(q) - 1; k >= 0; k-- {
			s := q[k]
			if pl.slots[s].out || pl.bucket(pl.slots[s].free) != b {
				// Stale: moved to another bucket, or drained.
				q[k] = q[len(q)-1]
				q = q[:len(q)-1]
				continue
			}
			if s == own || pl.slots[s].free < g || busyOnly && pl.slots[s].empty {
				continue
			}
			q[k] = q[len(q)-1]
			pl.byFree[b] = q[:len(q)-1]
			pl.put(s, pl.slots[s].free-g)
			return s
		}
		pl.byFree[b] = q
	}
	return -1
}

// put sets a slot's free GPUs and files it under them.
func (pl *placement) put(s, free int) {
	pl.slots[s].free = free
	if free > 0 {
		b := pl.bucket(free)
		pl.byFree[b] = append(pl.byFree[b], s)
	}
}
