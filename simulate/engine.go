package simulate

import (
	"container/heap"
	"fmt"
	"math"
	"math/rand/v2"
	"time"

	"github.com/fleetcast/autoscaler/fleet"
	"github.com/fleetcast/autoscaler/planner"
	"github.com/fleetcast/autoscaler/providers/sim"
	"github.com/fleetcast/autoscaler/trace"
)

// Times in the engine are whole seconds from the trace start.

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
	// preempted counts the runs of best-effort jobs asked to checkpoint
	// and stop for another tier's job (preempt); abandoned the jobs left
	// queued at the end that nothing would ever run (stranded), and
	// abandonedGPUs their work left, in GPU-seconds.
	preempted, abandoned int
	// reclaimed counts the runs asked to checkpoint and stop to give a
	// team's share of the reservation back (reclaim).
	reclaimed int
	// budgetStops counts the runs on burst capacity asked to checkpoint
	// and stop because their team had spent its budget (enforceBudgets).
	budgetStops   int
	abandonedGPUs float64
	waits         []float64
	// waitGPUs is GPU-seconds spent queued: every interval a job waits,
	// first or again after a requeue, times its GPUs (a share's: its
	// share).
	waitGPUs float64
	// strandedGPUs is GPU-seconds the GPUs that shares hold left unused:
	// what is left on each, over time (engine.strandedNow).
	strandedGPUs float64
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
	classes map[classKey]*orderHeap
	keys    []classKey
	// slots are each team's queue slot (classKey), by team index; nil
	// when every job queues by its width alone.
	slots       []int32
	queuedGPUs  int
	runningGPUs int
	// queuedTier is the queued GPUs of each tier (with tiers: Options.tiers),
	// and buysFor whether the reactive policies buy for a tier's queue
	// (queuedBought).
	queuedTier []int
	// boughtWidth is the queued GPUs of the jobs the reactive policies
	// buy for (queuedBought), by the jobs' width.
	boughtWidth map[int]int
	buysFor     []bool
	// yields says which tiers' jobs are preempted for the others'
	// (preemptible); preemptAt is when preempt may next look.
	yields    []bool
	preemptAt int64
	// buckets[t][f] holds the up, non-draining nodes with f free GPUs,
	// reserved nodes in tier 0 and the others in tier 1: between nodes that
	// fit a job equally well the scheduler takes a reserved one (paid for
	// anyway), as a preferred node affinity for reserved capacity does.
	buckets [2][][]*node
	// others[f] counts the on-demand ([0]) and spot ([1]) nodes of
	// buckets[1][f], for jobs whose tier runs on some capacity types only
	// (job.runsOn).
	others [][2]int
	maxGPN int
	// minGPN is the narrowest pool's GPUs per node.
	minGPN  int
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
	// groups are the books of the jobs' teams and tiers (byTeam, byTier).
	groups [groupKinds]groupBooks
	// budget is what the teams with budgets spend on burst capacity, and
	// shares what the teams with shares of the reservation hold and wait
	// for; each nil without.
	budget *budgetBook
	shares *shareBook
	// reports caches each node's jobs as its agent reports them, by node
	// index.
	reports []nodeJobs
	// poolVer counts each pool's changes the cloud lists (a node launched,
	// up, gone), for engineCloud's listings; gone are the nodes gone since
	// the policy last asked (forgotten).
	poolVer   []uint32
	trackGone bool
	gone      []string
	// models are the pools' GPU types (gpushare.go). sharedNodes are the
	// nodes whose GPUs shares hold; partFree[m][f] counts the shared GPUs
	// of up, non-draining nodes of type m with f thousandths left, and
	// freeModel[m][f] those nodes of type m with f free GPUs; maxPartAt[m]
	// is the most one of type m has left, while maxPartOK[m]. strandedNow
	// is the thousandths of a GPU the shared GPUs leave, now.
	models      *modelTable
	sharedNodes []*node
	partFree    [][shareMilli]int32
	freeModel   [][]int32
	maxPartAt   []int32
	maxPartOK   []bool
	strandedNow int64
	// fragCost is the fragmentation of a shared GPU by what it has left,
	// for fragmentation-aware placement of shares (fragCosts); nil for
	// best fit.
	fragCost []float64
	// shareQ are the queued shares of one GPU of any GPU type, by tier
	// (one without); queuedShares counts every queued share. typed is the
	// queued demand of the jobs of some GPU types only (gputypes.go), by
	// types and tier, typedKeys its keys in order.
	shareQ       []shareQueue
	queuedShares int
	typed        map[typedKey]*typedDemand
	typedKeys    []typedKey
}

func newEngine(tr *trace.Trace, pools []fleet.Pool, opt Options, pol policy) (*engine, error) {
	e := &engine{opt: opt, classes: map[classKey]*orderHeap{}, boughtWidth: map[int]int{}, policy: pol, liveByID: map[string]*node{},
		rng: rand.New(rand.NewPCG(uint64(opt.Seed), 0x51a7e)), ckptDur: max(0, secs(opt.CheckpointDuration))}
	for _, p := range pools {
		e.pools = append(e.pools, simPool{spec: p, settings: sim.SettingsOf(p)})
		e.maxGPN = max(e.maxGPN, p.GPUsPerNode)
		if e.minGPN == 0 || p.GPUsPerNode < e.minGPN {
			e.minGPN = p.GPUsPerNode
		}
	}
	e.poolVer = make([]uint32, len(e.pools))
	for t := range e.buckets {
		e.buckets[t] = make([][]*node, e.maxGPN+1)
	}
	e.others = make([][2]int, e.maxGPN+1)
	models := newModelTable(pools)
	var err error
	e.models = models
	e.partFree = make([][shareMilli]int32, len(models.names))
	e.freeModel = make([][]int32, len(models.names))
	for m := range e.freeModel {
		e.freeModel[m] = make([]int32, e.maxGPN+1)
	}
	e.maxPartAt, e.maxPartOK = make([]int32, len(models.names)), make([]bool, len(models.names))
	typeMasks := map[string]uint64{}
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
		jobAsk(&e.jobs[i], &tr.Jobs[i], opt.WholeGPUs)
		if !opt.IgnoreGPUTypes {
			if e.jobs[i].types, err = models.maskOf(tj.GPUTypes, typeMasks); err != nil {
				return nil, fmt.Errorf("simulate: job %s %w", tj.ID, err)
			}
		}
		switch opt.RuntimeEstimates {
		case EstimatesExact:
			e.jobs[i].exact = true
		case EstimatesLimits:
			e.jobs[i].limit = int64(math.Ceil(float64(secs(tj.Duration)) * timeLimitFactor(guess)))
		}
	}
	for g, t := range [groupKinds]*teamTable{byTeam: opt.teams, byTier: opt.tiers, byType: opt.types} {
		if t == nil || len(t.of) != len(e.jobs) {
			continue
		}
		e.groups[g] = groupBooks{table: t, used: make([]int64, len(t.names)*len(e.pools)), wait: make([]int64, len(t.names))}
		if groupKind(g) == byTier {
			e.queuedTier, e.buysFor, e.yields = make([]int, len(t.names)), make([]bool, len(t.names)), make([]bool, len(t.names))
			for k := range e.buysFor {
				e.buysFor[k] = k >= len(opt.tierSpecs) || boughtFor(&opt.tierSpecs[k])
				e.yields[k] = k < len(opt.tierSpecs) && planner.Preemptible(&opt.tierSpecs[k])
			}
		}
		for i, k := range t.of {
			e.jobs[i].group[g] = k
			if groupKind(g) == byTier && int(k) < len(opt.tierSpecs) && !opt.Untiered {
				e.jobs[i].runsOn = runsOn(&opt.tierSpecs[k])
			}
		}
	}
	if t := e.groups[byTeam].table; t != nil {
		tiers := 0
		if tt := e.groups[byTier].table; tt != nil {
			tiers = len(tt.names)
		}
		e.budget = newBudgetBook(opt.teamSpecs, t.names, tiers, opt.Start)
		e.shares = newShareBook(opt.teamSpecs, t.names)
		if e.budget != nil || e.shares != nil {
			// The teams held to a budget or a share queue apart, so that
			// the head of a queue its team may not start does not hold
			// back another team's jobs of its width.
			e.slots = make([]int32, len(t.names))
			for k := range t.names {
				if (e.budget != nil && e.budget.spec[k] != nil) || (e.shares != nil && e.shares.spec[k] != nil) {
					e.slots[k] = int32(k) + 1
				}
			}
		}
	}
	e.typed = map[typedKey]*typedDemand{}
	if opt.SharePlacement == PlaceFragmentation {
		e.fragCost = fragCosts(e.jobs)
	}
	e.shareQ = make([]shareQueue, 1)
	if t := e.groups[byTier].table; t != nil {
		e.shareQ = make([]shareQueue, max(len(t.names), 1))
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
			if e.opt.ticked != nil {
				e.opt.ticked(e)
			}
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
			if e.stranded() {
				break
			}
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
	e.st.strandedGPUs += float64(e.strandedNow) * dt / shareMilli
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

// at is the time of s seconds into the run.
func (e *engine) at(s int64) time.Time { return e.opt.Start.Add(time.Duration(s) * time.Second) }

// secs converts a duration to whole seconds, rounding.
func secs[D ~int64](d D) int64 { return int64(math.Round(float64(d) / 1e9)) }
