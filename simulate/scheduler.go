package simulate

import (
	"cmp"
	"container/heap"
	"slices"

	"github.com/fleetcast/autoscaler/fleet"
)

// orderHeap is a queue of jobs by tier (the higher first), then trace
// order.
type orderHeap struct {
	ids  []int32
	jobs []job
}

func (h *orderHeap) Len() int           { return len(h.ids) }
func (h *orderHeap) Less(i, j int) bool { return h.jobs[h.ids[i]].before(&h.jobs[h.ids[j]]) }

// before reports whether the scheduler starts j before k, both queued and
// fitting: the higher tier first (with tiers: Options.tiers), then the
// earlier in the trace.
func (j *job) before(k *job) bool {
	if a, b := j.group[byTier], k.group[byTier]; a != b {
		return a < b
	}
	return j.order < k.order
}
func (h *orderHeap) Swap(i, j int) { h.ids[i], h.ids[j] = h.ids[j], h.ids[i] }
func (h *orderHeap) Push(x any)    { h.ids = append(h.ids, x.(int32)) }
func (h *orderHeap) Pop() any {
	x := h.ids[len(h.ids)-1]
	h.ids = h.ids[:len(h.ids)-1]
	return x
}

// classKey is a queue of the scheduler's: the queued jobs of one width
// (and share of one GPU: milli) and of the same GPU types, and, where
// teams are held to budgets or shares of the reservation, of one such
// team (slot: its index plus 1; 0 for the other teams).
type classKey struct {
	gpus  int
	milli int32
	slot  int32
	types uint64
}

// classOf is job j's queue.
func (e *engine) classOf(j *job) classKey {
	k := classKey{gpus: j.gpus, milli: j.milli, types: j.types}
	if e.slots != nil {
		k.slot = e.slots[j.group[byTeam]]
	}
	return k
}

// enqueue puts a job in the queue.
func (e *engine) enqueue(id int32) {
	j := &e.jobs[id]
	k := e.classOf(j)
	h := e.classes[k]
	if h == nil {
		h = &orderHeap{jobs: e.jobs}
		e.classes[k] = h
		e.keys = append(e.keys, k)
		slices.SortFunc(e.keys, func(a, b classKey) int {
			return cmp.Or(cmp.Compare(a.gpus, b.gpus), cmp.Compare(a.milli, b.milli), cmp.Compare(a.types, b.types), cmp.Compare(a.slot, b.slot))
		})
	}
	heap.Push(h, id)
	e.queue(j, j.gpus)
	j.queuedAt = e.now
}

// schedule starts queued jobs, first come first served within each tier,
// the higher tiers first, with backfill: the first such job that fits
// starts, until none fits.
func (e *engine) schedule() {
	e.enforceBudgets()
	if e.queuedGPUs > 0 {
		e.reclaim()
	}
	for e.queuedGPUs > 0 {
		best := int32(-1)
		for _, k := range e.keys {
			h := e.classes[k]
			if h.Len() == 0 || !e.fitsJob(&e.jobs[h.ids[0]]) {
				continue
			}
			if id := h.ids[0]; best < 0 || e.jobs[id].before(&e.jobs[best]) {
				best = id
			}
		}
		if best < 0 {
			if e.preempt() {
				continue // room made at once: the head starts
			}
			return
		}
		heap.Pop(e.classes[e.classOf(&e.jobs[best])])
		e.queue(&e.jobs[best], -e.jobs[best].gpus)
		e.start(best)
	}
}

// queue counts gpus more queued (fewer, negative) for job j: in all, in
// its tier, and, where the reactive policies buy for its tier, by its
// width; a share of one GPU counts 1 in all, and in its tier's shares
// (shareQ), which count what it needs by packing.
func (e *engine) queue(j *job, gpus int) {
	e.queuedGPUs += gpus
	e.queueTeam(j, gpus)
	if j.types != 0 {
		e.queueTyped(j, gpus) // bought for apart, in the pools of its types
	}
	if j.isShare() {
		e.queuedShares += gpus
		if j.types == 0 {
			e.shareQ[j.group[byTier]].add(j.milli, gpus)
		}
		return
	}
	if e.queuedTier != nil {
		e.queuedTier[j.group[byTier]] += gpus
	}
	if j.types == 0 && (e.buysFor == nil || e.buysFor[j.group[byTier]]) {
		e.boughtWidth[j.gpus] += gpus
	}
}

// pendingTiers are the queued GPUs by tier (fleet.State.PendingTiers),
// written over out; none without tiers.
func (e *engine) pendingTiers(out []fleet.TierGPUs) []fleet.TierGPUs {
	out = out[:0]
	for k, g := range e.queuedTier {
		if g += e.sharesOfTier(k); g > 0 {
			out = append(out, fleet.TierGPUs{Tier: e.groups[byTier].table.names[k], GPUs: g})
		}
	}
	return out
}

// pendingGPUs is what the simulated scheduler reports as pending, in
// `simulate` and in the `run` demo alike: the queued GPUs, as a real
// scheduler reports its queue, its shares of one GPU as the GPUs they need
// (shareQueue.packed). (The planner itself counts the free GPUs
// of busy nodes as held while jobs are pending.)
func (e *engine) pendingGPUs() int {
	n := e.queuedGPUs - e.queuedShares
	for k := range e.shareQ {
		n += e.sharesOfTier(k)
	}
	return n
}

// fits reports whether a job of w GPUs can start now.
func (e *engine) fits(w int) bool {
	if w <= e.maxGPN {
		for f := w; f <= e.maxGPN; f++ {
			if e.bucketLen(f) > 0 {
				return true
			}
		}
		return false
	}
	return e.bucketLen(e.maxGPN)*e.maxGPN >= w
}

// bucketLen is how many up, non-draining nodes have f free GPUs.
func (e *engine) bucketLen(f int) int { return len(e.buckets[0][f]) + len(e.buckets[1][f]) }

// pick is a node with f free GPUs, a reserved one if there is one; nil if
// none.
func (e *engine) pick(f int) *node {
	for t := range e.buckets {
		if b := e.buckets[t][f]; len(b) > 0 {
			return b[len(b)-1]
		}
	}
	return nil
}

// leaveQueue counts job j's wait since it joined the queue, now that it
// leaves it: in all and for its team and tier, and, the first time, its
// wait from submission.
func (e *engine) leaveQueue(j *job) {
	e.st.waitGPUs += j.eqSeconds(e.now - j.queuedAt)
	for g := range e.groups {
		if w := e.groups[g].wait; w != nil {
			w[j.group[g]] += (e.now - j.queuedAt) * int64(j.ask)
		}
	}
	if j.first < 0 {
		j.first = e.now
		e.st.waits = append(e.st.waits, float64(e.now-j.submit))
	}
}

// start places a job: best fit on one node, or whole empty nodes for a job
// wider than a node.
func (e *engine) start(id int32) {
	j := &e.jobs[id]
	mask := e.maskFor(j)
	j.start = e.now
	e.leaveQueue(j)
	switch {
	case j.isShare():
		e.startShare(id, mask) // counts the GPU it shares as running, if new
	case j.gpus <= e.maxGPN:
		e.runningGPUs += j.gpus
		for f := j.gpus; f <= e.maxGPN; f++ {
			if n := e.pickOf(j, f, mask); n != nil {
				j.nodes = append(j.nodes, n.idx)
				n.jobs = append(n.jobs, id)
				n.jobsVer++
				e.setFree(n, n.free-j.gpus)
				break
			}
		}
	default:
		e.runningGPUs += j.gpus
		for need := j.gpus; need > 0; need -= e.maxGPN {
			n := e.pickOf(j, e.maxGPN, mask)
			j.nodes = append(j.nodes, n.idx)
			n.jobs = append(n.jobs, id)
			n.jobsVer++
			e.setFree(n, 0)
		}
	}
	e.chargeRate(j, 1)
	e.holdShare(j, 1)
	if e.opt.started != nil {
		e.opt.started(e, id)
	}
	heap.Push(&e.events, event{t: e.now + j.remaining, kind: evFinish, id: id, gen: j.gen})
}

// setFree changes a node's free GPUs, keeping its bucket and timers.
func (e *engine) setFree(n *node, free int) {
	inBucket := n.bucketPos >= 0
	if inBucket {
		e.bucketRemove(n)
	}
	n.free = free
	switch {
	case free == n.gpn:
		if n.idleSince < 0 {
			n.idleSince = e.now
		}
	default:
		n.idleSince = -1
	}
	if 2*(n.gpn-free) < n.gpn {
		if n.lowSince < 0 {
			n.lowSince = e.now
		}
	} else {
		n.lowSince = -1
	}
	if inBucket || n.state == up {
		e.bucketAdd(n)
	}
}

func (e *engine) bucketAdd(n *node) {
	if n.bucketPos >= 0 || n.state != up {
		return
	}
	b := e.buckets[n.tier][n.free]
	n.bucketPos = len(b)
	e.buckets[n.tier][n.free] = append(b, n)
	e.countOther(n, 1)
	e.countParts(n, 1)
}

func (e *engine) bucketRemove(n *node) {
	if n.bucketPos < 0 {
		return
	}
	b := e.buckets[n.tier][n.free]
	last := b[len(b)-1]
	b[n.bucketPos] = last
	last.bucketPos = n.bucketPos
	e.buckets[n.tier][n.free] = b[:len(b)-1]
	n.bucketPos = -1
	e.countOther(n, -1)
	e.countParts(n, -1)
}

// The capacity types as bits: of a node (node.kind), and of the types a
// job's tier runs on (job.runsOn).
const (
	onReserved uint8 = 1 << iota
	onDemand
	onSpot
	onAny = onReserved | onDemand | onSpot
)

// kindBit is capacity type c's bit.
func kindBit(c fleet.CapacityType) uint8 {
	switch c {
	case fleet.Reserved:
		return onReserved
	case fleet.Spot:
		return onSpot
	}
	return onDemand
}

// runsOn is the bits of the capacity types tier t's jobs run on (its
// capacity_types: what may be bought for it is what it may run on); 0
// when any.
func runsOn(t *fleet.Tier) uint8 {
	var m uint8
	for _, c := range t.CapacityTypes {
		m |= kindBit(c)
	}
	if m == onAny {
		return 0
	}
	return m
}

// countOther counts node n, of the others' buckets, in or out of others.
func (e *engine) countOther(n *node, d int) {
	switch n.kind {
	case onDemand:
		e.others[n.free][0] += d
	case onSpot:
		e.others[n.free][1] += d
	}
}

// freeOn is how many up, non-draining nodes with f free GPUs are of the
// capacity types in mask (0: any).
func (e *engine) freeOn(f int, mask uint8) int {
	if mask == 0 {
		return e.bucketLen(f)
	}
	n := 0
	if mask&onReserved != 0 {
		n += len(e.buckets[0][f])
	}
	if mask&onDemand != 0 {
		n += e.others[f][0]
	}
	if mask&onSpot != 0 {
		n += e.others[f][1]
	}
	return n
}

// fitsJob reports whether job j can start now, on the capacity types its
// tier runs on and the GPU types it accepts.
func (e *engine) fitsJob(j *job) bool {
	m := e.maskFor(j)
	if j.isShare() {
		return e.fitsShare(j, m)
	}
	if j.types != 0 {
		return e.fitsTyped(j, m)
	}
	if m == 0 {
		return e.fits(j.gpus)
	}
	w := j.gpus
	if w <= e.maxGPN {
		for f := w; f <= e.maxGPN; f++ {
			if e.freeOn(f, m) > 0 {
				return true
			}
		}
		return false
	}
	return e.freeOn(e.maxGPN, m)*e.maxGPN >= w
}

// pickFor is a node with f free GPUs of the capacity types in mask (0:
// any, pick), a reserved one if there is one; nil if none.
func (e *engine) pickFor(f int, mask uint8) *node {
	if mask == 0 {
		return e.pick(f)
	}
	if b := e.buckets[0][f]; mask&onReserved != 0 && len(b) > 0 {
		return b[len(b)-1]
	}
	if e.freeOn(f, mask&^onReserved) == 0 {
		return nil
	}
	b := e.buckets[1][f]
	for i := len(b) - 1; i >= 0; i-- {
		if b[i].kind&mask != 0 {
			return b[i]
		}
	}
	return nil
}

// pendingShapes are, where the pools' nodes differ in width, the queued
// jobs wider than the narrowest node, as a scheduler reports their shape
// (fleet.State.Scoped): for each width and tier, the GPUs of its jobs that
// fit on one node, in nodes at least that wide, and for each tier those of
// the jobs wider than any node as that many whole nodes of the widest.
// Each line names its tier (with tiers): the planner buys nothing for a
// tier whose waiting is worth nothing, and the others' only in pools of
// their capacity types; and, for a team with a budget, its team (a line
// of its own): nothing is bought for it while the team is over budget.
// Written over out; none when every node is as wide.
func (e *engine) pendingShapes(out []fleet.ScopedDemand) []fleet.ScopedDemand {
	out = e.pendingTyped(out[:0])
	if e.minGPN == e.maxGPN {
		return out
	}
	var names []string // by tier, with tiers
	if e.queuedTier != nil {
		names = e.groups[byTier].table.names
	}
	// A line per tier and budgeted team (slot 0: the other teams').
	var budgeted, slot []int32 // slot-1 -> team index; team index -> slot
	if b := e.budget; b != nil {
		budgeted, slot = b.teams, b.slot
	}
	slots := len(budgeted) + 1
	n := max(len(names), 1) * slots
	gpus, jobs, wideGPUs, wideNodes := make([]int, n), make([]int, n), make([]int, n), make([]int, n)
	line := func(k int, d fleet.ScopedDemand) fleet.ScopedDemand {
		if names != nil {
			d.Tier = names[k/slots]
		}
		if s := k % slots; s > 0 {
			d.Team = e.budget.spec[budgeted[s-1]].Name
		}
		return d
	}
	for i := 0; i < len(e.keys); {
		w := e.keys[i].gpus
		end := i
		for end < len(e.keys) && e.keys[end].gpus == w {
			end++
		}
		keys := e.keys[i:end] // the width's queues (sorted by width)
		i = end
		if w <= e.minGPN {
			continue
		}
		clear(gpus)
		clear(jobs)
		for _, ck := range keys {
			if ck.types != 0 {
				continue // pendingTyped's
			}
			for _, id := range e.classes[ck].ids {
				k := 0
				if names != nil {
					k = int(e.jobs[id].group[byTier]) * slots
				}
				if len(budgeted) > 0 {
					k += int(slot[e.jobs[id].group[byTeam]])
				}
				gpus[k] += w
				jobs[k]++
			}
		}
		for k := range gpus {
			switch {
			case gpus[k] == 0:
			case w <= e.maxGPN:
				out = append(out, line(k, fleet.ScopedDemand{MinGPUsPerNode: w, GPUs: gpus[k]}))
			default:
				wideGPUs[k] += gpus[k]
				wideNodes[k] += jobs[k] * ((w + e.maxGPN - 1) / e.maxGPN)
			}
		}
	}
	for k := range wideGPUs {
		if wideGPUs[k] > 0 {
			out = append(out, line(k, fleet.ScopedDemand{MinGPUsPerNode: e.maxGPN, Nodes: wideNodes[k], GPUs: wideGPUs[k]}))
		}
	}
	return out
}
