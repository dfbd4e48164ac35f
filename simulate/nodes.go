package simulate

import (
	"container/heap"
	"fmt"
	"math"
	"slices"

	"github.com/fleetcast/autoscaler/fleet"
)

// nodeState is where a simulated node is in its life.
type nodeState uint8

const (
	booting nodeState = iota
	up
	draining
	gone
)

// node is one simulated instance.
type node struct {
	id       string
	idx      int32
	pool     int
	gpn      int
	free     int
	state    nodeState
	launched int64
	readyAt  int64
	// idleSince is when the node last had no jobs; lowSince when its
	// allocation last fell under half (the reactive policy's timer); -1
	// while busy / at or over half.
	idleSince, lowSince int64
	// drainRec is when the controller decided the node's drain (its
	// drain record), heardAt when its agent took it up, cancelledAt when
	// the controller last cancelled one; -1: none.
	drainRec, heardAt, cancelledAt int64
	// idleSeen is when the node's agent first reported it without jobs
	// (a report every cycle); -1 while it reports jobs.
	idleSeen int64
	// interruptAt is when the cloud reclaims a spot node; noticed is set
	// once its agent has had the notice.
	interruptAt int64
	noticed     bool
	// key is the key of the launch of this controller that made the node
	// (through engineCloud); "" for one it did not launch.
	key       string
	jobs      []int32
	jobsVer   uint32 // bumped whenever jobs changes
	bucketPos int    // index in its free-GPU bucket; -1 when in none
	tier      uint8  // its buckets' tier: 0 reserved, 1 the others
	kind      uint8  // its capacity type's bit (onReserved, onDemand, onSpot)
	// parts are the thousandths of a GPU left on each of its GPUs that
	// shares hold (gpushare.go), by slot; noPart for a slot that is none.
	// shared counts those GPUs (they are not in free); sharedPos is the
	// node's index in engine.sharedNodes while shared > 0.
	parts     []int32
	shared    int
	sharedPos int
}

// holdReservations commits every reserved pool to its configured
// reservation (its max) for the whole run, its nodes running from the
// start: every policy holds the same reservations, paid whether used or
// not, as Karpenter's reserved capacity type and a Cluster Autoscaler node
// group sized to the reservation do. A policy may grow a reservation
// later (the baseline advice), never shrink it.
func (e *engine) holdReservations() {
	for i := range e.pools {
		p := &e.pools[i]
		if p.spec.Capacity != fleet.Reserved {
			continue
		}
		p.reserved = p.spec.Max
		p.spec.Min = p.spec.Max
		if want := p.reserved - p.count; want > 0 {
			e.launch(i, want, 0) //nolint:errcheck // a node refused here is relaunched by the policy
		}
	}
}

// reserve grows reserved pool pi's reservation to nodes (never shrinks it),
// billed from now to the end of the run, and returns whether it grew.
func (e *engine) reserve(pi, nodes int) bool {
	p := &e.pools[pi]
	if nodes <= p.reserved {
		return false
	}
	p.reserved = nodes
	p.spec.Min, p.spec.Max = nodes, nodes
	p.settings.Capacity = max(p.settings.Capacity, nodes)
	return true
}

// room is how many nodes pool pi may launch now: within its max and the
// fleet's limits (limits.max_gpus over every live node; limits.max_spend_per_hour
// over live nodes and each reservation counted whole, as the planner
// counts them). limited reports that a fleet limit, not the pool's max,
// is what bounds it.
func (e *engine) room(pi int) (n int, limited bool) {
	p := &e.pools[pi]
	n = max(0, p.spec.Max-p.count)
	if m := e.limits.MaxGPUs; m > 0 {
		gpus := 0
		for i := range e.pools {
			gpus += e.pools[i].count * e.pools[i].spec.GPUsPerNode
		}
		if r := max(0, (m-gpus)/p.spec.GPUsPerNode); r < n {
			n, limited = r, true
		}
	}
	if m := e.limits.MaxSpendPerHour; m > 0 && p.spec.PricePerHour > 0 {
		spend := 0.0
		for i := range e.pools {
			q := &e.pools[i]
			spend += float64(max(q.count, q.reserved)) * q.spec.PricePerHour
		}
		extra := p.spec.PricePerHour
		if p.spec.Capacity == fleet.Reserved && p.count < p.reserved {
			extra = 0 // launching into a paid reservation costs nothing more
		}
		if extra > 0 {
			if r := max(0, int(math.Floor((m-spend)/extra+1e-9))); r < n {
				n, limited = r, true
			}
		}
	}
	return n, limited
}

// capacityGPUs is what the fleet has bought now: reservations and live
// non-reserved nodes.
func (e *engine) capacityGPUs() int { return e.bought + reservedGPUs(e) }

// closeBills bills the nodes still alive at the end.
func (e *engine) closeBills() {
	for _, n := range e.live {
		e.bill(n)
	}
}

// bill charges a non-reserved node from its launch to now.
func (e *engine) bill(n *node) {
	p := &e.pools[n.pool]
	if p.spec.Capacity == fleet.Reserved {
		return // billed as the reservation
	}
	dt := float64(e.now - n.launched)
	c, g := p.spec.PricePerHour*dt/3600, float64(n.gpn)*dt
	e.st.cost += c
	e.st.provisionedGPUs += g
	p.cost += c
	p.gpuSeconds += g
}

// launch asks the simulated region for want nodes in pool pi, ready after
// lead, and returns how many it got; a refusal is returned as the
// provider's typed error.
func (e *engine) launch(pi, want int, lead int64) (int, error) {
	p := &e.pools[pi]
	got, err := p.settings.Grant(p.spec.Name, "", p.count, want, e.rng)
	for range got {
		n := e.addNode(pi, fmt.Sprintf("n%07d-%s", len(e.nodes), p.spec.Name), lead)
		if rate := e.opt.SpotInterruptionsPerHour; rate > 0 && p.spec.Capacity == fleet.Spot {
			at := n.readyAt + int64(e.rng.ExpFloat64()/rate*3600)
			n.interruptAt = at
			heap.Push(&e.events, event{t: max(at-secs(e.opt.SpotNotice), n.readyAt), kind: evNotice, id: n.idx})
			heap.Push(&e.events, event{t: at, kind: evInterrupt, id: n.idx})
		}
	}
	return got, err
}

// addNode adds a node to pool pi, ready after lead.
func (e *engine) addNode(pi int, id string, lead int64) *node {
	p := &e.pools[pi]
	n := &node{id: id, idx: int32(len(e.nodes)), pool: pi, gpn: p.spec.GPUsPerNode,
		free: p.spec.GPUsPerNode, launched: e.now, readyAt: e.now + lead, idleSince: e.now, lowSince: e.now, bucketPos: -1, tier: 1,
		drainRec: -1, heardAt: -1, cancelledAt: -1, idleSeen: -1, interruptAt: -1}
	if p.spec.Capacity == fleet.Reserved {
		n.tier = 0
	}
	n.kind = kindBit(p.spec.Capacity)
	e.nodes = append(e.nodes, n)
	e.live = append(e.live, n)
	e.poolVer[pi]++
	e.liveByID[n.id] = n
	if p.spec.Capacity != fleet.Reserved {
		e.bought += n.gpn
	}
	p.count++
	e.st.launches++
	if n.readyAt <= e.now {
		n.state = up
		e.bucketAdd(n)
	} else {
		heap.Push(&e.events, event{t: n.readyAt, kind: evReady, id: n.idx})
	}
	return n
}

// wasUp reports whether the node id has come up (or is gone): its agent
// would have reported it ready.
func (e *engine) wasUp(id string) bool {
	n := e.liveByID[id]
	return n == nil || n.state != booting
}

// liveNode returns the live node with the given ID, or nil.
func (e *engine) liveNode(id string) *node { return e.liveByID[id] }

// drain stops new work on a node and asks its jobs to checkpoint. A
// responsive job's checkpoint is durable ckptDur later (at once for 0):
// then its run ends with no work lost and it requeues. An unresponsive job
// ignores the request and runs on, checkpointing on its own schedule.
func (e *engine) drain(n *node) {
	if n.state != up {
		return
	}
	e.bucketRemove(n)
	n.state = draining
	e.st.drains++
	for i := 0; i < len(n.jobs); {
		if !e.askCheckpoint(n.jobs[i]) {
			i++ // a job that stopped has left n.jobs
		}
	}
}

// undrain returns a draining node to service. A checkpoint its drain asked
// for and that is still being written is not called back (the job was
// signalled; nothing un-signals it): it completes, and the job stops with
// nothing lost and requeues, as it would have on the drained node.
func (e *engine) undrain(n *node) {
	if n.state == draining {
		n.state = up
		e.bucketAdd(n)
	}
}

// terminate removes a node. Jobs still on it lose their work since their
// last checkpoint and requeue; such a termination is unsafe.
func (e *engine) terminate(n *node) { e.remove(n, true) }

// remove takes a node away, by the policy (byUs: a termination with work on
// it is unsafe) or by the cloud (a spot interruption). Jobs still on it lose
// their work since their last checkpoint and requeue.
func (e *engine) remove(n *node, byUs bool) {
	if n.state == gone {
		return
	}
	if len(n.jobs) > 0 {
		why := stopReclaim
		if byUs {
			e.st.unsafe++
			why = stopScaleIn
		}
		for len(n.jobs) > 0 {
			e.stop(n.jobs[0], why)
		}
	}
	if n.state == up {
		e.bucketRemove(n)
	}
	if byUs && n.state != draining {
		e.st.drains++ // a removal without a drain still counts; the cloud's do not
	}
	n.state = gone
	e.poolVer[n.pool]++
	if e.trackGone {
		e.gone = append(e.gone, n.id)
	}
	e.pools[n.pool].count--
	if e.pools[n.pool].spec.Capacity != fleet.Reserved {
		e.bought -= n.gpn
	}
	e.bill(n)
	if i := slices.Index(e.live, n); i >= 0 {
		e.live = slices.Delete(e.live, i, i+1)
	}
	delete(e.liveByID, n.id)
}

// nodeJobs are a node's jobs as its agent last reported them.
type nodeJobs struct {
	ver   uint32 // the node's jobsVer when they were made, plus one (0: never)
	until int64  // when the first of them passes its next checkpoint
	jobs  []fleet.Job
}

// reported is n's jobs as its agent reports them (a wide job holding
// whole nodes), made again only when the node's jobs change or one of them
// passes a checkpoint: agents report every cycle, but most reports repeat
// the last one. The slice is the cache's: do not modify it.
func (e *engine) reported(n *node) []fleet.Job {
	if need := int(n.idx) + 1; need > len(e.reports) {
		e.reports = append(e.reports, make([]nodeJobs, max(need, len(e.nodes))-len(e.reports))...)
	}
	c := &e.reports[n.idx]
	if c.ver == n.jobsVer+1 && e.now < c.until {
		return c.jobs[:len(c.jobs):len(c.jobs)]
	}
	c.jobs, c.until, c.ver = c.jobs[:0], math.MaxInt64, n.jobsVer+1
	for _, jid := range n.jobs {
		j := &e.jobs[jid]
		fj := fleet.Job{ID: j.id, GPUs: j.gpus, Start: e.at(j.start)}
		if j.isShare() {
			fj.GPUs, fj.GPUMilli, fj.SharedGPU = 0, int(j.milli), sharedGPUName(j.part)
		}
		if t := e.groups[byTier].table; t != nil {
			fj.Tier = t.names[j.group[byTier]]
		}
		switch {
		case j.exact: // the run's true end: the work left at its start
			fj.ExpectedEnd = e.at(j.start + j.remaining)
		case j.limit > 0: // its time limit, which a requeued run gets anew
			fj.ExpectedEnd = e.at(j.start + j.limit)
		}
		if len(j.nodes) > 1 {
			fj.GPUs = n.gpn // a wide job holds whole nodes
		}
		ck := j.checkpointed(e.now)
		if ck > 0 {
			fj.LastCheckpoint = e.at(j.start + ck)
		}
		if j.ckpt > 0 {
			c.until = min(c.until, j.start+ck+j.ckpt)
		}
		c.jobs = append(c.jobs, fj)
	}
	return c.jobs[:len(c.jobs):len(c.jobs)]
}
