package simulate

import (
	"context"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/fleetcast/autoscaler/actuator"
	"github.com/fleetcast/autoscaler/fleet"
	"github.com/fleetcast/autoscaler/forecast"
	"github.com/fleetcast/autoscaler/loop"
	"github.com/fleetcast/autoscaler/planner"
	"github.com/fleetcast/autoscaler/providers"
	"github.com/fleetcast/autoscaler/state"
	"github.com/fleetcast/autoscaler/trace"
)

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
	set *fleet.Settings
	// fleetName is the fleet's name, which the actuator tags launches with.
	fleetName string
	base      time.Time
	reserved  int // index of the reserved pool, -1 if none
	statuses  []fleet.PoolStatus
	state     fleet.State
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
	// run are the settings the loop plans with: the pools as simulated
	// (the reservation as recommended).
	run   fleet.Settings
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

func newPredictive(set *fleet.Settings, opt Options) (*predictive, error) {
	p := newLoopPolicy(set, opt, "predictive")
	var err error
	p.loop, err = loop.New(loop.Options{Settings: &p.run, Books: &p.books})
	return p, err
}

// newPerfect is the predictive policy fed the true future demand of tr.
func newPerfect(set *fleet.Settings, tr *trace.Trace, opt Options) (*predictive, error) {
	p := newLoopPolicy(set, opt, "perfect")
	p.truth, p.margin = stepPeaks(demandSegments(tr, opt.WholeGPUs), secs(set.Forecast.Step)), opt.PerfectMargin
	var err error
	p.loop, err = loop.New(loop.Options{Settings: &p.run, Books: &p.books, Forecast: p.perfectForecast})
	return p, err
}

// newLoopPolicy is the predictive policy (named name) of set and opt, but
// its loop.
func newLoopPolicy(set *fleet.Settings, opt Options, name string) *predictive {
	p := &predictive{set: set, fleetName: opt.Fleet, base: opt.Start, reserved: -1, run: *set, fixed: -1, listLag: opt.listLag, keyedCloud: opt.keyedCloud}
	p.run.Pools = nil // its own: the simulated pools are written into it
	if opt.Untiered {
		p.run.Tiers = nil
	}
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
	p.clouds, err = actuator.New(actuator.Options{Journal: &p.books, Pools: pools, Providers: providers, Fleet: p.fleetName,
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
	step := secs(p.set.Forecast.Step)
	k0 := now / step
	n := max(1, int((p.set.Forecast.Horizon+p.set.Forecast.Step-1)/p.set.Forecast.Step))
	if len(p.fc.Values) != 1 || len(p.fc.Values[0]) != n {
		// One level, below every quantile the planner asks for (which
		// then all read its values): the truth has no spread.
		p.fc = forecast.Forecast{Step: p.set.Forecast.Step, Model: "perfect", Levels: []float64{fleet.MinCostQuantile / 2}, Values: [][]float64{make([]float64, n)}}
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
	st.PendingTiers = e.pendingTiers(st.PendingTiers)
	st.Scoped = e.pendingShapes(st.Scoped)
	st.PendingTeams = e.pendingTeams(st.PendingTeams)
	st.BurstSpend = e.burstSpend(st.BurstSpend)
	p.announce(e)
	// No history: the planner's baseline advice is taken only with advised
	// reservations, and then at their cadence (rebase), not every cycle.
	// The nodes are written in place: a node in the same slot as last
	// cycle keeps what does not change (most cycles launch and remove
	// nothing).
	now, k := p.at(e.now), 0
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
		c := cur[n.pool]
		if c >= len(pr.Instances) || pr.Instances[c].ID != n.id {
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
			at, own := rd.LaunchedAt(pr, &pr.Instances[c])
			fn.LaunchedAt, fn.Unknown = at, !own
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
			at, own := rd.LaunchedAt(pr, in)
			fn.LaunchedAt, fn.Unknown = at, !own
		}
	}
	st.Nodes = st.Nodes[:k]
	p.deliver(e)
	return st
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
