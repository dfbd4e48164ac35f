package simulate

import (
	"container/heap"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"sort"
	"time"

	"github.com/fleetcast/autoscaler/fleet"
	"github.com/fleetcast/autoscaler/providers/sim"
	"github.com/fleetcast/autoscaler/trace"
)

// Times in the engine are whole seconds from the trace start.

// job is a trace job as the engine runs it.
type job struct {
	id        string
	gpus      int
	order     int   // position in the trace: the FIFO order
	submit    int64 // when it arrives
	remaining int64 // seconds of work left (since its last checkpoint)
	ckpt      int64 // checkpoint interval
	start     int64 // start of the current run; -1 while queued
	first     int64 // first start; -1 before
	nodes     []int32
	gen       uint32 // bumped when a run ends early, to drop its pending events
	done      bool
	// unresponsive jobs ignore drains: they checkpoint only every ckpt.
	unresponsive bool
	// announced jobs are announced Options.AnnounceAhead before submit;
	// duration is the trace's, which the announcement gives.
	announced bool
	duration  int64
	// exact says the scheduler knows each run's true end; limit, when
	// above 0, is the job's time limit in seconds, which each run gets
	// anew (Options.RuntimeEstimates).
	exact bool
	limit int64
	// saveAt is when the checkpoint a drain asked for is durable; -1 when
	// none is being written.
	saveAt int64
	// queuedAt is when the job last joined the queue: on submission, and
	// again when a drain or a reclaim requeues it.
	queuedAt int64
}

// checkpointed is the work of the current run saved by its periodic
// checkpoints at now.
func (j *job) checkpointed(now int64) int64 {
	run := now - j.start
	if j.ckpt <= 0 {
		return 0
	}
	return run - run%j.ckpt
}

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
}

// event kinds, in the order they happen within a second: a checkpoint that
// is durable when the cloud reclaims its node is saved.
const (
	evFinish     = iota
	evCheckpoint // a checkpoint a drain asked for is durable
	evReady
	evNotice    // a spot interruption notice
	evInterrupt // the cloud reclaims a spot node
)

type event struct {
	t    int64
	kind uint8
	id   int32
	gen  uint32
}

type eventHeap []event

func (h eventHeap) Len() int { return len(h) }
func (h eventHeap) Less(i, j int) bool {
	a, b := &h[i], &h[j]
	switch {
	case a.t != b.t:
		return a.t < b.t
	case a.kind != b.kind:
		return a.kind < b.kind
	case a.id != b.id:
		// Ties in a fixed order (nodes that come up together, in launch
		// order), whatever the order events were pushed in.
		return a.id < b.id
	}
	return a.gen < b.gen
}
func (h eventHeap) Swap(i, j int) { h[i], h[j] = h[j], h[i] }
func (h *eventHeap) Push(x any)   { *h = append(*h, x.(event)) }
func (h *eventHeap) Pop() any {
	old := *h
	e := old[len(old)-1]
	*h = old[:len(old)-1]
	return e
}

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

// simPool is a pool as the engine runs it.
type simPool struct {
	spec     fleet.Pool
	settings sim.Settings
	count    int // live nodes (booting, up, draining)
	// reserved is the reservation size in nodes (reserved pools): billed
	// whether used or not.
	reserved int
	// cost and gpuSeconds are what the pool was billed and bought.
	cost, gpuSeconds float64
}

// stats are what a run measures.
type stats struct {
	cost             float64
	provisionedGPUs  float64 // GPU-seconds bought
	usedGPUs         float64 // GPU-seconds of useful work
	lostScaleIn      float64 // GPU-seconds of work lost to the policy's terminations
	lostReclaim      float64 // GPU-seconds of work lost to the cloud's (spot reclaims)
	unsafe           int     // terminations that lost work
	launches, drains int
	interruptions    int // spot nodes reclaimed by the cloud
	// completed counts the jobs done, saved the runs a checkpoint asked
	// for (by a drain or a spot notice) ended (the job requeued with
	// nothing lost).
	completed, saved int
	waits            []float64
	// waitGPUs is GPU-seconds spent queued: every interval a job waits,
	// first or again after a requeue, times its GPUs.
	waitGPUs float64
	// limitedCycles counts the control cycles in which a fleet limit
	// (limits.max_gpus, limits.max_spend_per_hour) held a launch back.
	limitedCycles int
	end           int64
}

// engine is one policy's discrete-event simulation over a trace.
type engine struct {
	opt   Options
	pools []simPool
	jobs  []job
	nodes []*node // every node ever launched, by idx
	// live are the nodes not gone, in launch order; liveByID finds them.
	live     []*node
	liveByID map[string]*node
	events   eventHeap
	now      int64
	rng      *rand.Rand
	// ckptDur is how long a checkpoint a drain asks for takes, in seconds.
	ckptDur int64

	// The FIFO queue with backfill: one heap per job width.
	classes     map[int]*orderHeap
	widths      []int
	queuedGPUs  int
	runningGPUs int
	// buckets[t][f] holds the up, non-draining nodes with f free GPUs,
	// reserved nodes in tier 0 and the others in tier 1: between nodes that
	// fit a job equally well the scheduler takes a reserved one (paid for
	// anyway), as a preferred node affinity for reserved capacity does.
	buckets [2][][]*node
	maxGPN  int
	nextArr int
	left    int // jobs not yet done

	st     stats
	policy policy
	// bought is the GPUs of live non-reserved nodes; with the reservations,
	// the capacity sampled every sampleStep for the report's picture.
	progress   func(done float64)
	bought     int
	sampleStep int64
	nextSample int64
	samples    []float64
	// limits are the fleet's limits, the same for every policy; zero
	// values bound nothing. limitedNow says a limit held a launch back in
	// this cycle.
	limits     fleet.Limits
	limitedNow bool
	// reports caches each node's jobs as its agent reports them, by node
	// index.
	reports []nodeJobs
	// poolVer counts each pool's changes the cloud lists (a node launched,
	// up, gone), for engineCloud's listings; gone are the nodes gone since
	// the policy last asked (forgotten).
	poolVer   []uint32
	trackGone bool
	gone      []string
}

func newEngine(tr *trace.Trace, pools []fleet.Pool, opt Options, pol policy) (*engine, error) {
	e := &engine{opt: opt, classes: map[int]*orderHeap{}, policy: pol, liveByID: map[string]*node{},
		rng: rand.New(rand.NewPCG(uint64(opt.Seed), 0x51a7e)), ckptDur: max(0, secs(opt.CheckpointDuration))}
	for _, p := range pools {
		e.pools = append(e.pools, simPool{spec: p, settings: sim.SettingsOf(p)})
		e.maxGPN = max(e.maxGPN, p.GPUsPerNode)
	}
	e.poolVer = make([]uint32, len(e.pools))
	for t := range e.buckets {
		e.buckets[t] = make([][]*node, e.maxGPN+1)
	}
	e.jobs = make([]job, len(tr.Jobs))
	// Which jobs ignore drains is drawn from the seed, one draw per job in
	// trace order, from a stream of its own: the same jobs for every policy,
	// whatever else draws from e.rng.
	// Which jobs are announced, from a stream of its own too.
	pick := rand.New(rand.NewPCG(uint64(opt.Seed), 0xdeaf))
	tell := rand.New(rand.NewPCG(uint64(opt.Seed), 0xa770))
	// And each job's runtime estimate, from a third.
	guess := rand.New(rand.NewPCG(uint64(opt.Seed), 0x7ee5))
	for i, tj := range tr.Jobs {
		ck := tj.CheckpointInterval
		if ck <= 0 {
			ck = opt.CheckpointInterval
		}
		e.jobs[i] = job{id: tj.ID, gpus: tj.GPUs, order: i, submit: secs(tj.Submit), remaining: secs(tj.Duration),
			ckpt: secs(ck), start: -1, first: -1, saveAt: -1, unresponsive: pick.Float64() < opt.UnresponsiveJobs,
			announced: tell.Float64() < opt.AnnounceShare, duration: secs(tj.Duration)}
		switch opt.RuntimeEstimates {
		case EstimatesExact:
			e.jobs[i].exact = true
		case EstimatesLimits:
			e.jobs[i].limit = int64(math.Ceil(float64(secs(tj.Duration)) * timeLimitFactor(guess)))
		}
	}
	e.left = len(e.jobs)
	e.st.waits = make([]float64, 0, len(e.jobs))
	return e, nil
}

// run simulates until every job has finished, with a control tick every
// interval while work remains.
func (e *engine) run() error {
	tick := secs(e.opt.Interval)
	nextTick := int64(0)
	e.holdReservations()
	e.policy.start(e)
	for e.left > 0 {
		t := nextTick
		if e.nextArr < len(e.jobs) {
			t = min(t, e.jobs[e.nextArr].submit)
		}
		if len(e.events) > 0 {
			t = min(t, e.events[0].t)
		}
		e.advance(t)
		for e.nextArr < len(e.jobs) && e.jobs[e.nextArr].submit == t {
			if j := &e.jobs[e.nextArr]; j.remaining == 0 {
				// A job that runs for no time (Philly has ten) holds no
				// GPUs, as the demand curve says: done when submitted,
				// without waiting for capacity nobody needs.
				j.first, j.done = t, true
				e.st.waits = append(e.st.waits, 0)
				e.left--
			} else {
				e.enqueue(int32(e.nextArr))
			}
			e.nextArr++
		}
		for len(e.events) > 0 && e.events[0].t == t {
			e.handle(heap.Pop(&e.events).(event))
		}
		e.schedule()
		if t == nextTick {
			if err := e.policy.tick(e); err != nil {
				return err
			}
			if e.limitedNow {
				e.st.limitedCycles++
				e.limitedNow = false
			}
			if e.progress != nil && (t/tick)%1440 == 0 { // daily
				e.progress(1 - float64(e.left)/float64(len(e.jobs)))
			}
			e.schedule()
			nextTick += tick
		}
		if t > 400*24*3600*10 {
			return fmt.Errorf("simulation did not finish within 4,000 days (%d jobs left): the policy stopped serving the trace, or the pools cannot", e.left)
		}
	}
	if e.progress != nil {
		e.progress(1)
	}
	e.st.end = e.now
	e.closeBills()
	return nil
}

// handle carries out an event that is due now.
func (e *engine) handle(ev event) {
	switch ev.kind {
	case evFinish:
		if j := &e.jobs[ev.id]; !j.done && j.gen == ev.gen && j.start >= 0 {
			e.finish(ev.id)
		}
	case evCheckpoint:
		if j := &e.jobs[ev.id]; !j.done && j.gen == ev.gen && j.start >= 0 {
			e.stop(ev.id, stopSaved)
		}
	case evReady:
		if n := e.nodes[ev.id]; n.state == booting {
			n.state = up
			e.poolVer[n.pool]++
			n.idleSince, n.lowSince = e.now, e.now
			e.bucketAdd(n)
		}
	case evNotice:
		if n := e.nodes[ev.id]; n.state != gone {
			e.policy.notice(e, n)
		}
	case evInterrupt:
		if n := e.nodes[ev.id]; n.state != gone {
			e.st.interruptions++
			e.remove(n, false)
		}
	}
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

// advance moves the clock to t, billing reserved capacity for the time passed.
func (e *engine) advance(t int64) {
	if t <= e.now {
		return
	}
	for e.sampleStep > 0 && e.nextSample < t {
		e.samples = append(e.samples, float64(e.capacityGPUs()))
		e.nextSample += e.sampleStep
	}
	dt := float64(t - e.now)
	for i := range e.pools {
		p := &e.pools[i]
		if p.reserved > 0 {
			c, g := float64(p.reserved)*p.spec.PricePerHour*dt/3600, float64(p.reserved*p.spec.GPUsPerNode)*dt
			e.st.cost += c
			e.st.provisionedGPUs += g
			p.cost += c
			p.gpuSeconds += g
		}
	}
	e.now = t
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

// askCheckpoint asks a running job to checkpoint and stop, and reports
// whether it stopped at once. A job already writing such a checkpoint
// (for another of its nodes) goes on writing it.
func (e *engine) askCheckpoint(id int32) bool {
	j := &e.jobs[id]
	switch {
	case j.unresponsive || j.saveAt >= 0:
		return false
	case e.ckptDur == 0:
		e.stop(id, stopSaved)
		return true
	}
	j.saveAt = e.now + e.ckptDur
	heap.Push(&e.events, event{t: j.saveAt, kind: evCheckpoint, id: id, gen: j.gen})
	return false
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

// stopCause is why a job's run ends early.
type stopCause uint8

const (
	// stopSaved: it checkpointed just now, as a drain asked.
	stopSaved stopCause = iota
	// stopScaleIn: the policy terminated its node under it.
	stopScaleIn
	// stopReclaim: the cloud reclaimed its (spot) node.
	stopReclaim
)

// stop ends a job's current run early. With stopSaved nothing is lost;
// otherwise the work since its last periodic checkpoint is, to the cause.
// It requeues.
func (e *engine) stop(id int32, why stopCause) {
	j := &e.jobs[id]
	run := e.now - j.start
	kept := run
	if why == stopSaved {
		e.st.saved++
	} else {
		kept = j.checkpointed(e.now)
		lost := float64((run - kept) * int64(j.gpus))
		if why == stopScaleIn {
			e.st.lostScaleIn += lost
		} else {
			e.st.lostReclaim += lost
		}
	}
	e.st.usedGPUs += float64(kept * int64(j.gpus))
	j.remaining -= kept
	e.release(id)
	j.start = -1
	j.gen++
	j.saveAt = -1
	e.enqueue(id)
}

// finish ends a job's run at its end of work.
func (e *engine) finish(id int32) {
	j := &e.jobs[id]
	e.st.usedGPUs += float64((e.now - j.start) * int64(j.gpus))
	j.remaining = 0
	e.release(id)
	j.done = true
	e.st.completed++
	j.saveAt = -1
	e.left--
}

// release frees a running job's GPUs.
func (e *engine) release(id int32) {
	j := &e.jobs[id]
	per := j.gpus
	if len(j.nodes) > 1 {
		per = 0 // a wide job holds whole nodes
	}
	for _, ni := range j.nodes {
		n := e.nodes[ni]
		used := per
		if per == 0 {
			used = n.gpn
		}
		n.jobs = slices.DeleteFunc(n.jobs, func(x int32) bool { return x == id })
		n.jobsVer++
		e.setFree(n, n.free+used)
	}
	e.runningGPUs -= j.gpus
	j.nodes = j.nodes[:0]
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

// timeLimitFactor draws a job's time limit as a multiple of its true
// runtime: 1 + e^N(0,1), so at least 1 (a scheduler ends a job at its
// limit: none outruns it), 2 at the median, and a long tail of limits far
// above the need, as users' requested time limits are known to be.
func timeLimitFactor(r *rand.Rand) float64 { return 1 + math.Exp(r.NormFloat64()) }

// at is the time of s seconds into the run.
func (e *engine) at(s int64) time.Time { return e.opt.Start.Add(time.Duration(s) * time.Second) }

// secs converts a duration to whole seconds, rounding.
func secs[D ~int64](d D) int64 { return int64(math.Round(float64(d) / 1e9)) }
