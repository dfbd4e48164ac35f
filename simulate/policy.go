package simulate

import (
	"errors"
	"slices"

	"github.com/fleetcast/autoscaler/fleet"
)

// policy decides a simulated fleet's size.
type policy interface {
	// start sets up the fleet at time 0.
	start(e *engine)
	// tick runs one control cycle.
	tick(e *engine) error
	// notice tells the policy the cloud will reclaim a spot node soon.
	notice(e *engine, n *node)
}

// ignoreNotices is for policies that do nothing on a spot interruption
// notice: Cluster Autoscaler does not act on one, and the jobs die with
// the node, losing their work since their last checkpoint.
type ignoreNotices struct{}

func (ignoreNotices) notice(*engine, *node) {}

// burstOrder returns the indexes of the non-reserved pools, cheapest per
// GPU-hour first; with onDemandOnly, only on-demand pools.
func burstOrder(pools []simPool, onDemandOnly bool) []int {
	var out []int
	for i := range pools {
		c := pools[i].spec.Capacity
		if c == fleet.Reserved || (onDemandOnly && c != fleet.OnDemand) {
			continue
		}
		out = append(out, i)
	}
	slices.SortStableFunc(out, func(a, b int) int { return fleet.CompareForLaunch(&pools[a].spec, &pools[b].spec) })
	return out
}

// launchAcross launches up to want nodes in the pools in order, each within
// its max and the fleet's limits, falling over to the next pool when one is
// full or refuses. A launch a fleet limit held back counts in the stats.
func launchAcross(e *engine, order []int, want int, lead func(pi int) int64) int {
	got, limited := 0, false
	for _, pi := range order {
		if want-got <= 0 {
			break
		}
		room, lim := e.room(pi)
		if lim && room < want-got {
			limited = true
		}
		n, _ := e.launch(pi, min(want-got, room), lead(pi))
		got += n
	}
	if limited && got < want {
		e.limitedNow = true
	}
	return got
}

// leadTime is each pool's own lead time, for launchAcross.
func leadTime(e *engine) func(pi int) int64 {
	return func(pi int) int64 { return secs(e.pools[pi].spec.LeadTime) }
}

// fillMins relaunches what reserved pools lack of their reservation and
// other pools of their min (as Cluster Autoscaler's
// --enforce-node-group-min-size does), one lead time away.
func fillMins(e *engine) {
	for i := range e.pools {
		p := &e.pools[i]
		target := p.spec.Min
		if p.spec.Capacity == fleet.Reserved {
			target = max(target, p.reserved)
		}
		if want := target - p.count; want > 0 {
			launchAcross(e, []int{i}, want, leadTime(e))
		}
	}
}

// reservedGPUs is the GPUs of the reservations the fleet holds.
func reservedGPUs(e *engine) int {
	g := 0
	for i := range e.pools {
		g += e.pools[i].reserved * e.pools[i].spec.GPUsPerNode
	}
	return g
}

// static is a fixed fleet sized for the trace's peak demand, ready from the
// start: the reservations, and on-demand nodes for the rest of the peak.
type static struct {
	ignoreNotices
	peakGPUs int
	// typed are, when some jobs accept some GPU types only, the peak of
	// each set's demand: the fleet holds that much of those types too.
	typed []typedPeak
}

func (s static) start(e *engine) { s.fill(e, 0) }

// tick replaces nodes the cloud took (spot interruptions, refused
// launches), one lead time away.
func (s static) tick(e *engine) error {
	s.fill(e, -1)
	return nil
}

// fill brings the fleet to its size, the new nodes ready after lead (-1:
// each pool's lead time).
func (s static) fill(e *engine, lead int64) {
	if lead < 0 {
		fillMins(e)
	}
	order := burstOrder(e.pools, true)
	if len(order) == 0 {
		order = burstOrder(e.pools, false)
	}
	if len(order) == 0 {
		return
	}
	burst := 0
	for _, pi := range order {
		burst += e.pools[pi].count
	}
	gpn := e.pools[order[0]].spec.GPUsPerNode
	want := (max(0, s.peakGPUs-reservedGPUs(e))+gpn-1)/gpn - burst
	leads := func(pi int) int64 {
		if lead >= 0 {
			return lead
		}
		return secs(e.pools[pi].spec.LeadTime)
	}
	if want > 0 {
		launchAcross(e, order, want, leads)
	}
	s.fillTyped(e, order, leads)
}

// reactive is the Kubernetes Cluster Autoscaler with its published
// defaults, holding the configured reservations as Karpenter's reserved
// capacity type does (running from the start, never scaled in; the
// scheduler fills them first): it adds nodes when jobs are pending
// (counting nodes already booting, and empty nodes a job wider than a node
// can still use), from every burst pool, spot included, cheapest per
// GPU-hour first (the least-cost expander), only in pools whose nodes can
// hold the pending job where widths differ (scaleUp); it removes a node
// that has been under 50% GPU allocation for 10 minutes
// (scale-down-unneeded-time) when its jobs fit on other nodes, empty
// nodes up to 10 at a time (max-empty-bulk-delete) and
// one busy node a cycle, but not within 10 minutes of a scale-up
// (scale-down-delay-after-add). It moves the jobs of a removed node, so
// their work since the last checkpoint is lost. No forecast.
//
// With a buffer it is the headroom policy, the "overprovisioning" practice:
// placeholder pods of the lowest priority, as wide as a node or of one GPU
// each, that real jobs preempt. It keeps buffer GPUs of placeholders placed on ready
// or booting nodes, launching when they hold fewer, and never removes a
// node, nor moves a removed node's jobs onto placeholders, when that would
// take them below it. Placeholders as wide as a node (the default) keep
// the buffer as whole empty nodes, which wide jobs can use; 1-GPU ones
// also fill the fragments of busy nodes.
type reactive struct {
	ignoreNotices
	buffer int
	// gpuPlaceholders: 1-GPU placeholders; otherwise each as wide as a node.
	gpuPlaceholders bool
	lastUp          int64
}

// newHeadroom is the headroom policy of opt.
func newHeadroom(opt Options) *reactive {
	return &reactive{buffer: max(0, opt.HeadroomGPUs), gpuPlaceholders: opt.HeadroomPlaceholders == fleet.PlaceholdersGPU}
}

const (
	caUnneeded      = 10 * 60
	caDelayAfterAdd = 10 * 60
	caEmptyBulk     = 10
)

func (r *reactive) start(*engine) { r.lastUp = -caDelayAfterAdd }

// held is the GPUs of placeholders that free GPUs of a gpn-GPU node hold:
// every free GPU with 1-GPU placeholders, else only a whole empty node's.
func (r *reactive) held(free, gpn int) int {
	if r.gpuPlaceholders || free == gpn {
		return free
	}
	return 0
}

func (r *reactive) tick(e *engine) error {
	order := burstOrder(e.pools, false)
	if len(order) == 0 {
		return errors.New("reactive: no on-demand or spot pool to scale")
	}
	fillMins(e)
	// empty is the GPUs of whole empty nodes, booting ones included: what
	// the queue (a job wider than a node needs them) and the buffer can
	// count on; frag is what placeholders hold on busy nodes.
	empty, frag := 0, 0
	for _, n := range e.live {
		switch {
		case n.state == booting || (n.state == up && n.free == n.gpn):
			empty += n.gpn
		case n.state == up && r.buffer > 0:
			frag += r.held(n.free, n.gpn)
		}
	}
	queued := e.queuedBought()
	// The jobs of some GPU types first: the empty nodes of their types
	// they count on are not the others'.
	typedUp, typedOn, typedGPUs := r.scaleUpTyped(e, order)
	if r.scaleUp(e, order, empty-typedGPUs, max(0, r.buffer-max(0, empty-typedGPUs-queued)-frag), typedOn) || typedUp {
		return nil
	}
	if e.now-r.lastUp < caDelayAfterAdd {
		return nil
	}
	// Empty nodes first (up to max-empty-bulk-delete), then at most one
	// busy node whose jobs fit on the nodes that stay; spare is the
	// placeholders' GPUs beyond the buffer and beyond what queued jobs
	// (wide ones, waiting for more empty nodes) will take, which removals
	// may take.
	spare := max(0, empty-queued) + frag - r.buffer
	remove := map[int32]bool{}
	var victims []*node
	for _, n := range e.live {
		if len(victims) < caEmptyBulk && n.free == n.gpn && spare >= n.gpn && r.unneeded(e, n) {
			remove[n.idx] = true
			victims = append(victims, n)
			spare -= n.gpn
		}
	}
	for _, n := range e.live {
		if n.free < n.gpn && r.unneeded(e, n) && r.fitsElsewhere(e, n, remove, spare-r.held(n.free, n.gpn)) {
			remove[n.idx] = true
			victims = append(victims, n)
			break
		}
	}
	for _, n := range victims {
		e.terminate(n)
	}
	return nil
}

// unneeded reports whether Cluster Autoscaler would consider n for removal:
// an up, non-reserved node under half allocated for scale-down-unneeded-time.
func (r *reactive) unneeded(e *engine, n *node) bool {
	p := &e.pools[n.pool]
	return n.state == up && p.spec.Capacity != fleet.Reserved && p.count > p.spec.Min && n.lowSince >= 0 && e.now-n.lowSince >= caUnneeded
}

// fitsElsewhere reports whether every job on n fits in the free GPUs of
// the other up nodes that are not being removed, of a GPU type it accepts
// (first fit, as the scheduler would place the moved jobs; a share of one
// GPU on a free GPU), displacing at most spare GPUs of placeholders (with
// no buffer every free GPU is spare).
func (r *reactive) fitsElsewhere(e *engine, n *node, removed map[int32]bool, spare int) bool {
	taken := map[int32]int{}
	for _, jid := range n.jobs {
		j := &e.jobs[jid]
		if len(j.nodes) > 1 {
			return false // a multi-node job does not move
		}
		placed := false
		for f := j.gpus; f <= e.maxGPN && !placed; f++ {
			for t := 0; t < len(e.buckets) && !placed; t++ { // reserved nodes first, as the scheduler
				for _, m := range e.buckets[t][f] {
					free := m.free - taken[m.idx]
					if m == n || removed[m.idx] || free < j.gpus || !e.accepts(j, m, 0) {
						continue
					}
					if r.buffer > 0 {
						lost := r.held(free, m.gpn) - r.held(free-j.gpus, m.gpn)
						if lost > spare {
							continue // placeholders the buffer keeps
						}
						spare -= lost
					}
					taken[m.idx] += j.gpus
					placed = true
					break
				}
			}
		}
		if !placed {
			return false
		}
	}
	return true
}
