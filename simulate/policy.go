package simulate

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/fleetcast/autoscaler/actuator"
	"github.com/fleetcast/autoscaler/config"
	"github.com/fleetcast/autoscaler/fleet"
	"github.com/fleetcast/autoscaler/forecast"
	"github.com/fleetcast/autoscaler/loop"
	"github.com/fleetcast/autoscaler/planner"
	"github.com/fleetcast/autoscaler/providers"
	"github.com/fleetcast/autoscaler/state"
	"github.com/fleetcast/autoscaler/trace"
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
	if want > 0 {
		launchAcross(e, order, want, func(pi int) int64 {
			if lead >= 0 {
				return lead
			}
			return secs(e.pools[pi].spec.LeadTime)
		})
	}
}

// reactive is the Kubernetes Cluster Autoscaler with its published
// defaults, holding the configured reservations as Karpenter's reserved
// capacity type does (running from the start, never scaled in; the
// scheduler fills them first): it adds nodes when jobs are pending
// (counting nodes already booting, and empty nodes a job wider than a node
// can still use), from every burst pool, spot included, cheapest per
// GPU-hour first (the least-cost expander); it removes a node that has been under 50% GPU
// allocation for 10 minutes (scale-down-unneeded-time) when its jobs fit on
// other nodes, empty nodes up to 10 at a time (max-empty-bulk-delete) and
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
	return &reactive{buffer: max(0, opt.HeadroomGPUs), gpuPlaceholders: opt.HeadroomPlaceholders == config.PlaceholdersGPU}
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
	queue := max(0, e.queuedGPUs-empty)
	if need := queue + max(0, r.buffer-max(0, empty-e.queuedGPUs)-frag); need > 0 {
		gpn := e.pools[order[0]].spec.GPUsPerNode
		if launchAcross(e, order, (need+gpn-1)/gpn, leadTime(e)) > 0 {
			r.lastUp = e.now
		}
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
	spare := max(0, empty-e.queuedGPUs) + frag - r.buffer
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
// the other up nodes that are not being removed (first fit, as the
// scheduler would place the moved jobs), displacing at most spare GPUs of
// placeholders (with no buffer every free GPU is spare).
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
					if m == n || removed[m.idx] || free < j.gpus {
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

// predictive is this project's controller: the decision loop (package
// loop: record demand, forecast, plan, act, keep the books) driven every
// control interval over the simulated nodes, with its books in memory,
// holding the configured reservations. It reads and changes the simulated
// region through the controller's own actuator (package actuator: which
// instances are its own launches, every change journaled), with the
// journal in the same memory, as `run` does its clouds. With advice (the "advised"
// reservations), the cheapest reserved pool grows to the baseline the
// planner recommends from what the loop saw the fleet hold (loop.Held),
// as the controller's plan advises: first after
// adviceAfter, then at most every adviceEvery; never shrunk (a
// reservation is a commitment).
//
// With truth set it is the perfect policy, an ablation: the same loop fed
// the trace's true future demand (each forecast step's peak, times
// 1 + margin) instead of the forecaster's, so the gap to the oracle splits
// into forecast error and the planner's own decisions.
type predictive struct {
	cfg      *config.Config
	base     time.Time
	reserved int // index of the reserved pool, -1 if none
	statuses []fleet.PoolStatus
	state    fleet.State
	// advise, when set, grows the reservation: first at nextBase, then
	// every adviceEvery seconds.
	advise      bool
	nextBase    int64
	adviceEvery int64
	// fixed, when >= 0, replaces the advice (the advice check): the
	// reservation is committed to fixed nodes at the first commitment and
	// never grown. commits are the commitments made, in order.
	fixed   int
	commits []Commitment
	// truth, when set, is the true demand's peak in each forecast step
	// from the trace start (the perfect policy), with margin added; fc is
	// the forecast made of it.
	truth  []float64
	margin float64
	fc     forecast.Forecast
	// run is the config the loop plans with: the pools as simulated (the
	// reservation as recommended).
	run   config.Config
	loop  *loop.Loop
	books state.Memory
	// clouds is the actuator over cloud, the simulated region; reading
	// the cycle's read of it, and cursor observe's scratch. listLag is
	// how long a launched node takes to be listed (Options.listLag), and
	// keyedCloud whether the region's groups are keyed
	// (Options.keyedCloud).
	clouds     *actuator.Clouds
	cloud      *engineCloud
	reading    *actuator.Reading
	cursor     []int
	listLag    time.Duration
	keyedCloud bool
	// byName is each pool's index.
	byName map[string]int
	// told are the nodes whose drain was decided or cancelled since the
	// agents last reported.
	told []*node
	// started is how many jobs (in submission order) announce has looked
	// at once submitted: the announced ones among them are under way
	// (state.UnderWay) until their duration has passed.
	started int
	// cycles, if set, is given every cycle's result (Options.Cycles).
	cycles func(loop.CycleResult)
	// confirms, when set, replaces the simulated agent's drain
	// confirmation (no job left on the node); tests break the drain rule
	// with it.
	confirms func(n *node) bool
}

// adviceEvery is how often the advised reservation may grow: a
// commitment is reviewed monthly, not on every wiggle of demand.
const adviceEvery = 30 * day

func newPredictive(cfg *config.Config, opt Options) (*predictive, error) {
	p := newLoopPolicy(cfg, opt, "predictive")
	var err error
	p.loop, err = loop.New(loop.Options{Config: &p.run, Books: &p.books})
	return p, err
}

// newPerfect is the predictive policy fed the true future demand of tr.
func newPerfect(cfg *config.Config, tr *trace.Trace, opt Options) (*predictive, error) {
	p := newLoopPolicy(cfg, opt, "perfect")
	p.truth, p.margin = stepPeaks(demandSegments(tr), secs(cfg.Forecast.Step)), opt.PerfectMargin
	var err error
	p.loop, err = loop.New(loop.Options{Config: &p.run, Books: &p.books, Forecast: p.perfectForecast})
	return p, err
}

// newLoopPolicy is the predictive policy (named name) of cfg and opt, but
// its loop.
func newLoopPolicy(cfg *config.Config, opt Options, name string) *predictive {
	p := &predictive{cfg: cfg, base: opt.Start, reserved: -1, run: *cfg, fixed: -1, listLag: opt.listLag, keyedCloud: opt.keyedCloud}
	p.run.Pools = nil // its own: the simulated pools are written into it
	if opt.Reservations == Advised {
		p.advise, p.nextBase, p.adviceEvery = true, secs(opt.AdviceAfter), adviceEvery
		if opt.fixedCommit {
			p.fixed = opt.fixedNodes
		}
	}
	if opt.Cycles != nil {
		p.cycles = func(r loop.CycleResult) { opt.Cycles(name, r) }
	}
	return p
}

// stepPeaks is the peak of the demand segments in each step of step
// seconds from 0.
func stepPeaks(segs []segment, step int64) []float64 {
	if len(segs) == 0 || step <= 0 {
		return nil
	}
	out := make([]float64, (segs[len(segs)-1].to+step-1)/step)
	for _, s := range segs {
		for k := s.from / step; k*step < s.to && k < int64(len(out)); k++ {
			out[k] = max(out[k], float64(s.gpus))
		}
	}
	return out
}

// day and week in seconds.
const (
	day  = 24 * 3600
	week = 7 * day
)

// notice: the agent passes a spot interruption notice on as a drain, so
// the node's jobs checkpoint and requeue before the node goes, if their
// checkpoints are durable by then; work the cloud takes first is lost to
// reclaim.
func (p *predictive) notice(e *engine, n *node) {
	n.noticed = true
	e.drain(n) // only an up node drains: a draining one's jobs were asked already
}

func (p *predictive) start(e *engine) {
	p.statuses = make([]fleet.PoolStatus, len(e.pools))
	p.byName = make(map[string]int, len(e.pools))
	pools := make([]fleet.Pool, len(e.pools))
	providers := make(map[string]providers.Provider, len(e.pools))
	p.cloud = newEngineCloud(e, secs(p.listLag), p.keyedCloud)
	for i := range e.pools {
		p.statuses[i].Name = e.pools[i].spec.Name
		p.byName[e.pools[i].spec.Name] = i
		if e.pools[i].spec.Capacity == fleet.Reserved && (p.reserved < 0 || fleet.CompareForLaunch(&e.pools[i].spec, &e.pools[p.reserved].spec) < 0) {
			p.reserved = i
		}
		pools[i], providers[e.pools[i].spec.Name] = e.pools[i].spec, p.cloud
	}
	e.trackGone = true
	// The launches' keys from the run's seed: a run is a function of it.
	var seed [32]byte
	binary.LittleEndian.PutUint64(seed[:], uint64(e.opt.Seed))
	var err error
	p.clouds, err = actuator.New(actuator.Options{Journal: &p.books, Pools: pools, Providers: providers, Fleet: p.cfg.Controller.Fleet,
		Now: p.cloud.at, Serial: true, Rand: rand.NewChaCha8(seed)})
	if err != nil {
		panic(fmt.Sprintf("simulate: the actuator over the simulated region: %v", err)) // every pool has its provider
	}
}

// tick runs one cycle of the loop over the simulated fleet.
func (p *predictive) tick(e *engine) error {
	if p.advise {
		if e.now >= p.nextBase && p.reserved >= 0 {
			p.rebase(e)
			p.nextBase += p.adviceEvery
			if p.fixed >= 0 {
				p.advise = false // committed once, never grown
			}
		}
	}
	p.run.Pools = p.run.Pools[:0]
	for i := range e.pools {
		p.run.Pools = append(p.run.Pools, e.pools[i].spec)
	}
	// As the controller does before each cycle: the journal settled
	// against the region (in the simulation every change is answered, so
	// nothing is left to settle unless the actuator has a defect).
	ctx := context.Background()
	settled, err := p.clouds.Recover(ctx)
	if err == nil {
		err = settled.Err()
	}
	if err != nil {
		return fmt.Errorf("simulate: settling the journal: %w", err)
	}
	r, err := p.loop.Cycle(ctx, engineFleet{p, e}, p.at(e.now))
	if r.Plan.LimitedBy != "" {
		e.limitedNow = true
	}
	if p.cycles != nil {
		p.cycles(r)
	}
	return err
}

// engineFleet is the simulated fleet as the loop observes and acts on it:
// its nodes, their agents (which report every cycle) and the scheduler's
// queue.
type engineFleet struct {
	p *predictive
	e *engine
}

// Observe reads the region through the actuator, which says which nodes
// are this controller's own, and the agents' reports (see
// predictive.observe).
func (f engineFleet) Observe(ctx context.Context, now time.Time) (loop.Observation, error) {
	rd, err := f.p.clouds.Read(ctx, now, nil, f.e.wasUp)
	if err != nil {
		return loop.Observation{}, err
	}
	f.p.reading = rd
	return loop.Observation{State: f.p.observe(f.e, rd), Err: rd.Err}, nil
}

// Commit writes what the cycle's read implies (sightings, claims), and
// forgets the nodes gone since: their sightings here, their drains in the
// loop.
func (f engineFleet) Commit(context.Context, time.Time) ([]string, error) {
	if err := f.p.clouds.Commit(f.p.reading); err != nil {
		return nil, err
	}
	gone := f.e.gone
	if len(gone) == 0 {
		return nil, nil
	}
	set := make(map[string]bool, len(gone))
	for _, id := range gone {
		set[id] = true
	}
	if _, err := f.p.clouds.Forget(func(id string) bool { return set[id] }); err != nil {
		return nil, err
	}
	f.e.gone = nil
	return gone, nil
}

// Launch launches in the pool through the actuator, the nodes ready one
// lead time away; a partial grant is an insufficient capacity error, as a
// cloud's.
func (f engineFleet) Launch(ctx context.Context, pool string, count int) error {
	return f.p.clouds.Launch(ctx, pool, count)
}

// Terminate removes the node through the actuator (the loop forgets its
// drain); a stand-in's unit of its launch is given up.
func (f engineFleet) Terminate(ctx context.Context, _ time.Time, a *planner.Action) error {
	if err := f.p.clouds.Terminate(ctx, a.Pool, a.Node); err != nil {
		return err
	}
	if err := f.p.clouds.Spend(a.Node); err != nil {
		return &loop.FollowUpError{Err: err}
	}
	return nil
}

// Drain records the drain, as the controller's drain record: the node's
// agent takes it up with the answer to its next report (deliver).
func (f engineFleet) Drain(_ context.Context, d state.Drain) error {
	if n := f.e.liveNode(d.Node); n != nil && n.drainRec < 0 {
		n.drainRec = f.e.now
		f.p.told = append(f.p.told, n)
	}
	return nil
}

// CancelDrain drops the drain record and records when (the planner does
// not drain the node again until its jobs checkpoint since); the node's
// agent hears of it with the answer to its next report.
func (f engineFleet) CancelDrain(_ context.Context, _ time.Time, a *planner.Action) error {
	if n := f.e.liveNode(a.Node); n != nil && n.drainRec >= 0 {
		n.drainRec, n.cancelledAt = -1, f.e.now
		f.p.told = append(f.p.told, n)
	}
	return nil
}

// announce lists, as the scheduler would announce them, the announced
// jobs not submitted yet that will be within Options.AnnounceAhead, and,
// as the controller keeps them, those submitted whose duration (from
// their submission, as announced) has not passed: under way.
func (p *predictive) announce(e *engine) {
	st := &p.state
	st.Announced = st.Announced[:0]
	if e.opt.AnnounceShare <= 0 {
		return
	}
	now := p.at(e.now)
	under := st.UnderWay[:0]
	for _, a := range st.UnderWay {
		if a.Covers(now) {
			under = append(under, a)
		}
	}
	for ; p.started < e.nextArr; p.started++ {
		if a, ok := p.announcement(&e.jobs[p.started]); ok && a.Covers(now) {
			under = append(under, a)
		}
	}
	st.UnderWay = under
	until := e.now + secs(e.opt.AnnounceAhead)
	for i := e.nextArr; i < len(e.jobs) && e.jobs[i].submit <= until; i++ {
		if a, ok := p.announcement(&e.jobs[i]); ok && e.jobs[i].submit > e.now {
			st.Announced = append(st.Announced, a)
		}
	}
}

// announcement is job j's announcement, if it is announced: from its
// submission, for its duration.
func (p *predictive) announcement(j *job) (fleet.Announcement, bool) {
	if !j.announced || j.duration <= 0 {
		return fleet.Announcement{}, false
	}
	id := j.id
	if id == "" {
		id = fmt.Sprint("job-", j.order)
	}
	return fleet.Announcement{ID: id, StartAt: p.at(j.submit), GPUs: j.gpus, Duration: time.Duration(j.duration) * time.Second}, true
}

// perfectForecast is the true demand, for the loop at t: from the step
// that holds t to the horizon, each step's peak times 1 + margin.
func (p *predictive) perfectForecast(t time.Time) forecast.Forecast {
	now := int64(t.Sub(p.base) / time.Second)
	step := secs(p.cfg.Forecast.Step)
	k0 := now / step
	n := max(1, int((p.cfg.Forecast.Horizon+p.cfg.Forecast.Step-1)/p.cfg.Forecast.Step))
	if len(p.fc.Values) != 1 || len(p.fc.Values[0]) != n {
		// One level, below every quantile the planner asks for (which
		// then all read its values): the truth has no spread.
		p.fc = forecast.Forecast{Step: p.cfg.Forecast.Step, Model: "perfect", Levels: []float64{fleet.MinCostQuantile / 2}, Values: [][]float64{make([]float64, n)}}
	}
	p.fc.Origin = p.at(k0 * step)
	for h := range n {
		v := 0.0
		if k := int(k0) + h; k < len(p.truth) {
			v = p.truth[k]
		}
		p.fc.Values[0][h] = v * (1 + p.margin)
	}
	return p.fc
}

// rebase grows the reservation to the planner's recommendation (or, in
// the advice check, to the fixed size).
func (p *predictive) rebase(e *engine) {
	pools := make([]fleet.Pool, len(e.pools))
	for i := range e.pools {
		pools[i] = e.pools[i].spec
	}
	nodes := p.fixed
	if nodes < 0 {
		// The simulated fleet commits when simulate.advice_after says,
		// on however much history it has by then.
		b := planner.RecommendBaseline(p.loop.Held(), pools, 0)
		if b == nil {
			return
		}
		nodes = b.Nodes
	}
	if e.reserve(p.reserved, nodes) {
		p.commits = append(p.commits, Commitment{Day: float64(e.now) / day, Nodes: nodes, GPUs: nodes * e.pools[p.reserved].spec.GPUsPerNode})
	}
}

func (p *predictive) at(s int64) time.Time { return p.base.Add(time.Duration(s) * time.Second) }

// observe is what the controller would see: every node its read of the
// region (rd) lists, with its jobs as its agent reports them (agents
// report every cycle), stand-ins for the nodes its groups owe, and the
// queue; then the agents take up the drains and cancellations decided
// since their last report, as the controller's answer to this report
// (deliver). A booting node is this controller's launch if its launch
// records claim it (rd), and unknown otherwise, as `run` takes it.
func (p *predictive) observe(e *engine, rd *actuator.Reading) *fleet.State {
	st := &p.state
	st.CapturedAt = p.at(e.now)
	st.Pools = p.statuses
	st.PendingGPUs = e.pendingGPUs()
	p.announce(e)
	// No history: the planner's baseline advice is taken only with advised
	// reservations, and then at their cadence (rebase), not every cycle.
	// The nodes are written in place: a node in the same slot as last
	// cycle keeps what does not change (most cycles launch and remove
	// nothing).
	now, k, started := p.at(e.now), 0, p.clouds.Started()
	// cur[i] is how many of pool i's listed instances are taken: the
	// region lists each pool's nodes in launch order, as e.live holds
	// them, then what it owes.
	cur := p.cursor[:0]
	for range e.pools {
		cur = append(cur, 0)
	}
	p.cursor = cur
	for _, n := range e.live {
		if n.state == gone {
			continue
		}
		pr := &rd.Pools[n.pool]
		if c := cur[n.pool]; c >= len(pr.Instances) || pr.Instances[c].ID != n.id {
			continue // not listed yet: the stand-in for what its group owes counts it
		}
		cur[n.pool]++
		if k == len(st.Nodes) {
			st.Nodes = append(st.Nodes, fleet.Node{})
		}
		fn := &st.Nodes[k]
		k++
		if fn.ID != n.id {
			*fn = fleet.Node{ID: n.id, Pool: e.pools[n.pool].spec.Name, LaunchedAt: p.at(n.launched)}
		}
		fn.Jobs = e.reported(n)
		fn.LastReport, fn.DrainStartedAt, fn.DrainAcked, fn.DrainConfirmed, fn.InterruptAt = now, time.Time{}, false, false, time.Time{}
		fn.Unknown = false
		switch {
		case n.state == booting:
			fn.State, fn.LastReport = fleet.Pending, time.Time{}
			fn.LaunchedAt, fn.Unknown = launchedAt(rd, pr, n.id, p.at(n.launched), started)
		case n.drainRec >= 0:
			// Draining since the controller decided it (its drain record).
			// The agent holds the drain from its first report after the
			// answer that carried it (deliver, after this report), and
			// confirms it in a report once the node holds no job: a job
			// leaves once the checkpoint the drain asked for is durable;
			// one that ignores the drain stays, and the drain times out.
			acked := n.heardAt >= 0
			fn.State, fn.DrainStartedAt, fn.DrainAcked = fleet.Draining, p.at(n.drainRec), acked
			fn.DrainConfirmed = acked && len(n.jobs) == 0
			if p.confirms != nil {
				fn.DrainConfirmed = p.confirms(n)
			}
		default:
			// Ready, or draining on its own agent's word (a spot
			// interruption notice, which the report carries).
			fn.State = fleet.Ready
			if n.noticed {
				fn.InterruptAt = p.at(n.interruptAt)
			}
		}
		// Idle from the first report without jobs, as the controller's
		// agents' view counts it: a job that came and went between two
		// reports is not seen.
		fn.IdleSince, fn.DrainCancelledAt = time.Time{}, time.Time{}
		switch {
		case n.state == booting || len(n.jobs) > 0:
			n.idleSeen = -1
		case n.idleSeen < 0:
			n.idleSeen = e.now
		}
		if n.idleSeen >= 0 {
			fn.IdleSince = p.at(n.idleSeen)
		}
		if n.cancelledAt >= 0 {
			fn.DrainCancelledAt = p.at(n.cancelledAt)
		}
	}
	// The stand-ins: capacity a group owes, for nodes launched and not
	// listed yet.
	for i := range rd.Pools {
		pr := &rd.Pools[i]
		for c := cur[i]; c < len(pr.Instances); c++ {
			in := &pr.Instances[c]
			if k == len(st.Nodes) {
				st.Nodes = append(st.Nodes, fleet.Node{})
			}
			fn := &st.Nodes[k]
			k++
			*fn = fleet.Node{ID: in.ID, Pool: pr.Status.Name, State: fleet.Pending}
			fn.LaunchedAt, fn.Unknown = launchedAt(rd, pr, in.ID, in.LaunchedAt, started)
		}
	}
	st.Nodes = st.Nodes[:k]
	p.deliver(e)
	return st
}

// launchedAt is when a booting node (or stand-in) id of pool pr counts as
// launched, and whether it is unknown, as the controller takes it: from
// when its launch was decided if its launch records claim it (its
// provisioning deadline runs from then), else unknown, from when it was
// first seen (or as its cloud says, for capacity owed); never before
// started.
func launchedAt(rd *actuator.Reading, pr *actuator.PoolReading, id string, cloud, started time.Time) (time.Time, bool) {
	if at := pr.Launched(id); !at.IsZero() {
		return later(at, started), false
	}
	if t := rd.FirstSeen(id); !t.IsZero() {
		cloud = t
	}
	return later(cloud, started), true
}

func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// deliver hands the agents the drains and cancellations decided since
// their last report: a node told to drain stops taking work and asks its
// jobs to checkpoint; one whose drain was cancelled takes work again.
func (p *predictive) deliver(e *engine) {
	// In the order the nodes launched, as their reports arrive.
	slices.SortFunc(p.told, func(a, b *node) int { return int(a.idx - b.idx) })
	for _, n := range p.told {
		switch {
		case n.state == gone:
		case n.drainRec >= 0 && n.heardAt < 0:
			n.heardAt = e.now
			e.drain(n) // a node draining on a notice already goes on
		case n.drainRec < 0 && n.heardAt >= 0:
			n.heardAt = -1
			if !n.noticed {
				e.undrain(n)
			}
		}
	}
	p.told = p.told[:0]
}
