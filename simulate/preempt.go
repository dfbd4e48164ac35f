package simulate

import (
	"slices"
)

// preemptEvery is how often the simulated scheduler looks for best-effort
// jobs to preempt, in seconds (as a scheduler's preemption pass runs on
// an interval, not on every event).
const preemptEvery = 10

// preemptBatch bounds the queued jobs one preemption pass makes room for.
const preemptBatch = 256

// preempt, with tiers, makes room for the queued jobs of the tiers that
// are not preemptible, in order (by tier, then arrival), up to
// preemptBatch of them: for each, on the node of the capacity types its
// tier runs on where it fits with the fewest GPUs to spare once the
// preemptible tiers' jobs there leave, it asks as many of those jobs as it
// needs to checkpoint and stop, as a drain does (askCheckpoint: they
// requeue with nothing lost once their checkpoint is durable); for a job
// wider than a node, on as many of the widest nodes, emptied, as it needs
// with the empty ones there are. It runs at most every
// preemptEvery seconds, and after a pass that asked, not before its
// checkpoints are durable. It reports whether room was made at once
// (checkpoints that take no time).
func (e *engine) preempt() bool {
	if e.queuedTier == nil || e.now < e.preemptAt {
		return false
	}
	e.preemptAt = e.now + preemptEvery
	var queued []int32
	for _, k := range e.keys {
		for _, id := range e.classes[k].ids {
			if !e.yields[e.jobs[id].group[byTier]] {
				queued = append(queued, id)
			}
		}
	}
	if len(queued) == 0 {
		return false
	}
	slices.SortFunc(queued, func(a, b int32) int {
		if e.jobs[a].before(&e.jobs[b]) {
			return -1
		}
		return 1
	})
	queued = queued[:min(len(queued), preemptBatch)]
	// The nodes preemptible jobs hold GPUs on, and how many each could
	// give (room: its free GPUs with theirs).
	type cand struct {
		n    *node
		room int
	}
	var cands []cand
	for _, n := range e.live {
		if n.state != up || n.bucketPos < 0 {
			continue
		}
		room := e.yieldingParts(n, nil) // each shared GPU all of whose shares yield
		for _, id := range n.jobs {
			if v := &e.jobs[id]; e.yielding(v) && !v.isShare() {
				room += min(e.jobs[id].gpus, n.gpn) // a wide job holds the whole node
			}
		}
		if room > 0 {
			cands = append(cands, cand{n, room + n.free})
		}
	}
	asked, now := false, false
	for _, id := range queued {
		j := &e.jobs[id]
		if j.gpus > e.maxGPN {
			// Whole nodes of the widest size, each emptied.
			var whole []int
			for i := range cands {
				if c := &cands[i]; c.n.gpn == e.maxGPN && c.room == e.maxGPN && e.accepts(j, c.n, j.runsOn) && len(whole)*e.maxGPN < j.gpus {
					whole = append(whole, i)
				}
			}
			if len(whole)*e.maxGPN+e.freeNodesFor(j, e.maxGPN, j.runsOn)*e.maxGPN < j.gpus {
				continue
			}
			for _, i := range whole {
				cands[i].room = 0
				a, n := e.evict(cands[i].n, e.maxGPN)
				asked, now = asked || a, now || n
			}
			continue
		}
		best := -1
		for i := range cands {
			c := &cands[i]
			if c.room >= j.gpus && e.accepts(j, c.n, j.runsOn) && (best < 0 || c.room < cands[best].room) {
				best = i
			}
		}
		if best < 0 {
			continue
		}
		c := &cands[best]
		c.room -= j.gpus
		a, n := e.evict(c.n, j.gpus)
		asked, now = asked || a, now || n
	}
	if asked {
		e.preemptAt = e.now + max(preemptEvery, e.ckptDur)
	}
	return now
}

// evict asks preemptible jobs on node n to leave until it has gpus free
// GPUs, or will once their checkpoints are durable: jobs of whole GPUs
// first, then the shares of each GPU all of whose shares yield (a share's
// leaving frees no GPU while another share holds it); it reports whether
// it asked any, and whether one left at once.
func (e *engine) evict(n *node, gpus int) (asked, now bool) {
	need := gpus - n.free
	ask := func(id int32) {
		e.st.preempted++
		asked = true
		if e.askToLeave(id) {
			now = true
		}
	}
	var leave []int32
	for _, id := range n.jobs {
		if v := &e.jobs[id]; need > 0 && e.yielding(v) && !v.isShare() {
			need -= min(v.gpus, n.gpn)
			leave = append(leave, id)
		}
	}
	if need > 0 {
		var parts []int32
		e.yieldingParts(n, func(s int32) {
			if need > 0 {
				parts = append(parts, s)
				need--
			}
		})
		for _, id := range n.jobs {
			if v := &e.jobs[id]; v.isShare() && slices.Contains(parts, v.part) {
				leave = append(leave, id)
			}
		}
	}
	for _, id := range leave { // n.jobs changes as they leave
		ask(id)
	}
	return asked, now
}

// yieldingParts is how many of node n's shared GPUs would be freed by a
// preemption: every share on it yields (yielding). It calls each, when
// not nil, with each such GPU's slot.
func (e *engine) yieldingParts(n *node, each func(slot int32)) int {
	if n.shared == 0 {
		return 0
	}
	count := 0
	for s, left := range n.parts {
		if left < 0 {
			continue
		}
		all := true
		for _, id := range n.jobs {
			if v := &e.jobs[id]; v.isShare() && v.part == int32(s) && !e.yielding(v) {
				all = false
				break
			}
		}
		if all {
			count++
			if each != nil {
				each(int32(s))
			}
		}
	}
	return count
}

// yielding reports whether running job j would leave for a preemption: its
// tier is preemptible, and it is not writing a checkpoint already nor one
// that ignores such asks.
func (e *engine) yielding(j *job) bool {
	return e.yields[j.group[byTier]] && j.saveAt < 0 && !j.unresponsive && !j.preempted
}

// unpreempt ends job j's preemption, if it was asked for: its run ended.
func (e *engine) unpreempt(j *job) { j.preempted = false }

// stranded, with tiers, ends a run that could not end: when every job has
// arrived, none runs, the fleet holds no node (up or booting), and the
// jobs still queued are all of tiers the policies buy nothing for
// (queuedBought), nothing would ever run them. They are abandoned: their
// waiting counted to now, their work left counted apart. It reports
// whether it ended the run.
func (e *engine) stranded() bool {
	if e.queuedTier == nil || e.nextArr < len(e.jobs) || e.runningGPUs > 0 || e.queuedGPUs == 0 || e.queuedBought() > 0 || e.typedBought() > 0 {
		return false
	}
	for _, n := range e.live {
		if n.state == up || n.state == booting {
			return false
		}
	}
	for _, k := range e.keys {
		for _, id := range e.classes[k].ids {
			j := &e.jobs[id]
			e.leaveQueue(j)
			e.st.abandoned++
			e.st.abandonedGPUs += j.eqSeconds(j.remaining)
			e.left--
		}
		e.classes[k].ids = e.classes[k].ids[:0]
	}
	e.queuedGPUs, e.queuedShares = 0, 0
	clear(e.queuedTier)
	clear(e.shareQ)
	clear(e.typed)
	e.typedKeys = e.typedKeys[:0]
	return true
}
