package simulate

import (
	"container/heap"
	"sort"
)

// orderHeap is a queue of jobs by trace order.
type orderHeap struct {
	ids  []int32
	jobs []job
}

func (h *orderHeap) Len() int           { return len(h.ids) }
func (h *orderHeap) Less(i, j int) bool { return h.jobs[h.ids[i]].order < h.jobs[h.ids[j]].order }
func (h *orderHeap) Swap(i, j int)      { h.ids[i], h.ids[j] = h.ids[j], h.ids[i] }
func (h *orderHeap) Push(x any)         { h.ids = append(h.ids, x.(int32)) }
func (h *orderHeap) Pop() any {
	x := h.ids[len(h.ids)-1]
	h.ids = h.ids[:len(h.ids)-1]
	return x
}

// enqueue puts a job in the queue.
func (e *engine) enqueue(id int32) {
	j := &e.jobs[id]
	h := e.classes[j.gpus]
	if h == nil {
		h = &orderHeap{jobs: e.jobs}
		e.classes[j.gpus] = h
		e.widths = append(e.widths, j.gpus)
		sort.Ints(e.widths)
	}
	heap.Push(h, id)
	e.queuedGPUs += j.gpus
	j.queuedAt = e.now
}

// schedule starts queued jobs, first come first served with backfill: the
// earliest job that fits starts, until none fits.
func (e *engine) schedule() {
	for e.queuedGPUs > 0 {
		best := int32(-1)
		for _, w := range e.widths {
			h := e.classes[w]
			if h.Len() == 0 || !e.fits(w) {
				continue
			}
			if id := h.ids[0]; best < 0 || e.jobs[id].order < e.jobs[best].order {
				best = id
			}
		}
		if best < 0 {
			return
		}
		heap.Pop(e.classes[e.jobs[best].gpus])
		e.queuedGPUs -= e.jobs[best].gpus
		e.start(best)
	}
}

// pendingGPUs is what the simulated scheduler reports as pending, in
// `simulate` and in the `run` demo alike: the queued GPUs, as a real
// scheduler reports its queue. (The planner itself counts the free GPUs
// of busy nodes as held while jobs are pending.)
func (e *engine) pendingGPUs() int { return e.queuedGPUs }

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

// start places a job: best fit on one node, or whole empty nodes for a job
// wider than a node.
func (e *engine) start(id int32) {
	j := &e.jobs[id]
	j.start = e.now
	e.st.waitGPUs += float64((e.now - j.queuedAt) * int64(j.gpus))
	if e.teamWait != nil {
		e.teamWait[j.team] += (e.now - j.queuedAt) * int64(j.gpus)
	}
	if j.first < 0 {
		j.first = e.now
		e.st.waits = append(e.st.waits, float64(e.now-j.submit))
	}
	if j.gpus <= e.maxGPN {
		for f := j.gpus; f <= e.maxGPN; f++ {
			if n := e.pick(f); n != nil {
				j.nodes = append(j.nodes, n.idx)
				n.jobs = append(n.jobs, id)
				n.jobsVer++
				e.setFree(n, n.free-j.gpus)
				break
			}
		}
	} else {
		for need := j.gpus; need > 0; need -= e.maxGPN {
			n := e.pick(e.maxGPN)
			j.nodes = append(j.nodes, n.idx)
			n.jobs = append(n.jobs, id)
			n.jobsVer++
			e.setFree(n, 0)
		}
	}
	e.runningGPUs += j.gpus
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
}
