package simulate

import (
	"errors"
	"math"
	"slices"
	"time"

	"github.com/fleetcast/autoscaler/config"
	"github.com/fleetcast/autoscaler/fleet"
	"github.com/fleetcast/autoscaler/forecast"
	"github.com/fleetcast/autoscaler/planner"
	"github.com/fleetcast/autoscaler/providers"
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

// predictive runs this project's planner and forecaster every control
// interval, holding the configured reservations. With advice (the
// "advised" reservations), the cheapest reserved pool grows to the baseline
// the planner recommends from the demand seen so far: first after
// adviceAfter, then at most every adviceEvery; never shrunk (a reservation
// is a commitment).
//
// With truth set it is the perfect policy, an ablation: the same planner
// fed the trace's true future demand (each forecast step's peak, times
// 1 + margin) instead of the forecaster's, so the gap to the oracle splits
// into forecast error and the planner's own decisions.
type predictive struct {
	cfg      *config.Config
	base     time.Time
	reserved int // index of the reserved pool, -1 if none
	levels   []float64
	history  fleet.Series
	stepMax  float64 // peak demand in the current history step
	// mean is the demand averaged over each step, for the reservation
	// advice (history, the per-step peaks, is what capacity must cover);
	// stepSum and stepTicks accumulate the current step.
	mean      fleet.Series
	stepSum   float64
	stepTicks int
	stepEnd   int64
	fc        forecast.Forecast
	online    *forecast.Online
	steps     int // history steps recorded
	statuses  []fleet.PoolStatus
	failures  []int
	state     fleet.State
	// byNode caches each node's jobs as reported, by node index.
	byNode []nodeJobs
	// advise, when set, grows the reservation: first at nextBase, then
	// every adviceEvery seconds.
	advise      bool
	nextBase    int64
	adviceEvery int64
	// truth, when set, is the true demand's peak in each forecast step
	// from the trace start (the perfect policy), with margin added.
	truth  []float64
	margin float64
	// run is the config the planner sees: the pools as simulated (the
	// reservation as recommended).
	run config.Config
	// confirms, when set, replaces the simulated agent's drain
	// confirmation (no job left on the node); tests break the drain rule
	// with it.
	confirms func(n *node) bool
}

// adviceEvery is how often the advised reservation may grow: a
// commitment is reviewed monthly, not on every wiggle of demand.
const adviceEvery = 30 * day

func newPredictive(cfg *config.Config, opt Options) (*predictive, error) {
	levels, err := forecast.Levels(cfg.Forecast.Quantile)
	if err != nil {
		return nil, err
	}
	p := &predictive{cfg: cfg, base: opt.Start, levels: levels, reserved: -1, run: *cfg}
	p.run.Pools = nil // its own: the simulated pools are written into it
	if opt.Reservations == Advised {
		p.advise, p.nextBase, p.adviceEvery = true, secs(opt.AdviceAfter), adviceEvery
	}
	return p, nil
}

// newPerfect is the predictive policy fed the true future demand of tr.
func newPerfect(cfg *config.Config, tr *trace.Trace, opt Options) (*predictive, error) {
	p, err := newPredictive(cfg, opt)
	if err != nil {
		return nil, err
	}
	p.truth, p.margin = stepPeaks(demandSegments(tr), secs(cfg.Forecast.Step)), opt.PerfectMargin
	p.levels = []float64{cfg.Forecast.Quantile}
	return p, nil
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
	e.drain(n) // only an up node drains: a draining one's jobs were asked already
}

func (p *predictive) start(e *engine) {
	step := p.cfg.Forecast.Step
	p.history = fleet.Series{Start: p.base, Step: step}
	p.mean = p.history
	p.stepEnd = secs(step)
	p.statuses = make([]fleet.PoolStatus, len(e.pools))
	p.failures = make([]int, len(e.pools))
	for i := range e.pools {
		p.statuses[i].Name = e.pools[i].spec.Name
		if e.pools[i].spec.Capacity == fleet.Reserved && (p.reserved < 0 || fleet.CompareForLaunch(&e.pools[i].spec, &e.pools[p.reserved].spec) < 0) {
			p.reserved = i
		}
	}
}

func (p *predictive) tick(e *engine) error {
	demand := float64(e.runningGPUs + e.queuedGPUs)
	p.stepMax = max(p.stepMax, demand)
	p.stepSum += demand
	p.stepTicks++
	if e.now >= p.stepEnd {
		keep := int(p.cfg.Forecast.History / p.cfg.Forecast.Step)
		appendKeep(&p.history, p.stepMax, keep)
		appendKeep(&p.mean, p.stepSum/float64(p.stepTicks), keep)
		p.stepMax, p.stepSum, p.stepTicks = 0, 0, 0
		p.stepEnd += secs(p.cfg.Forecast.Step)
		// The forecaster chooses its model and calibrates it daily (as
		// forecast.Auto does), and forecasts every step from the latest
		// history with it.
		if p.truth == nil && (p.online == nil || p.online.Model() == "" || p.steps%max(1, int(forecast.Day/p.cfg.Forecast.Step)) == 0) {
			if o, err := forecast.NewOnline(p.history, p.cfg.Forecast.Horizon, p.levels); err == nil {
				p.online = o
			}
		}
		p.steps++
		if p.online != nil {
			if fc, err := p.online.Forecast(p.history); err == nil {
				p.fc = fc
			}
		}
	}
	if p.truth != nil {
		p.perfectForecast(e.now)
	}
	if p.advise && e.now >= p.nextBase && p.reserved >= 0 {
		p.rebase(e)
		p.nextBase += p.adviceEvery
	}

	for i := range p.statuses {
		ps := &p.statuses[i]
		cut := 0
		for cut < len(ps.RecentDrains) && p.at(e.now).Sub(ps.RecentDrains[cut]) >= p.cfg.Limits.ScaleInWindow {
			cut++
		}
		ps.RecentDrains = ps.RecentDrains[cut:]
	}
	p.run.Pools = p.run.Pools[:0]
	for i := range e.pools {
		p.run.Pools = append(p.run.Pools, e.pools[i].spec)
	}
	st := p.observe(e)
	plan := planner.Make(planner.Input{Config: &p.run, State: st, Forecast: p.fc, Now: p.at(e.now)})
	if plan.LimitedBy != "" {
		e.limitedNow = true
	}
	for _, a := range plan.Actions {
		n := e.liveNode(a.Node)
		switch a.Kind {
		case planner.Launch:
			pi := p.poolIndex(e, a.Pool)
			_, err := e.launch(pi, a.Count, secs(e.pools[pi].spec.LeadTime))
			if providers.ShouldBackOff(err) {
				p.backOff(pi, e.now, err.Error())
			} else if err == nil {
				p.failures[pi] = 0
			}
		case planner.Drain:
			if n != nil {
				e.drain(n)
				// The scale-in budget counts drains begun in its window,
				// finished or not, as the controller's drain log does.
				ps := &p.statuses[p.poolIndex(e, a.Pool)]
				ps.RecentDrains = append(ps.RecentDrains, p.at(e.now))
			}
		case planner.Terminate:
			if n != nil {
				e.terminate(n)
			}
			if a.BackOff {
				p.backOff(p.poolIndex(e, a.Pool), e.now, "a launch missed its provisioning deadline")
			}
		case planner.CancelDrain:
			if n != nil {
				e.undrain(n)
			}
		}
	}
	return nil
}

// perfectForecast sets the forecast to the true demand: from the step that
// holds now to the horizon, each step's peak times 1 + margin.
func (p *predictive) perfectForecast(now int64) {
	step := secs(p.cfg.Forecast.Step)
	k0 := now / step
	n := max(1, int((p.cfg.Forecast.Horizon+p.cfg.Forecast.Step-1)/p.cfg.Forecast.Step))
	if len(p.fc.Values) != 1 || len(p.fc.Values[0]) != n {
		p.fc = forecast.Forecast{Step: p.cfg.Forecast.Step, Model: "perfect", Levels: p.levels, Values: [][]float64{make([]float64, n)}}
	}
	p.fc.Origin = p.at(k0 * step)
	for h := range n {
		v := 0.0
		if k := int(k0) + h; k < len(p.truth) {
			v = p.truth[k]
		}
		p.fc.Values[0][h] = v * (1 + p.margin)
	}
}

// appendKeep appends v to s, keeping its last keep values.
func appendKeep(s *fleet.Series, v float64, keep int) {
	s.Values = append(s.Values, v)
	if drop := len(s.Values) - keep; drop > 0 {
		s.Values = slices.Delete(s.Values, 0, drop)
		s.Start = s.Start.Add(time.Duration(drop) * s.Step)
	}
}

// rebase grows the reservation to the planner's recommendation.
func (p *predictive) rebase(e *engine) {
	pools := make([]fleet.Pool, len(e.pools))
	for i := range e.pools {
		pools[i] = e.pools[i].spec
	}
	if b := planner.RecommendBaseline(p.mean, pools); b != nil {
		e.reserve(p.reserved, b.Nodes)
	}
}

func (p *predictive) backOff(pi int, now int64, why string) {
	p.failures[pi]++
	p.statuses[pi].BackoffUntil = p.at(now).Add(providers.Backoff(p.failures[pi]))
	p.statuses[pi].BackoffReason = why
}

func (p *predictive) poolIndex(e *engine, name string) int {
	for i := range e.pools {
		if e.pools[i].spec.Name == name {
			return i
		}
	}
	return -1
}

func (p *predictive) at(s int64) time.Time { return p.base.Add(time.Duration(s) * time.Second) }

// nodeJobs are a node's jobs as its agent last reported them.
type nodeJobs struct {
	ver   uint32 // the node's jobsVer when they were made, plus one (0: never)
	until int64  // when the first of them passes its next checkpoint
	jobs  []fleet.Job
}

// jobsOf is n's jobs as its agent reports them (a wide job holding whole
// nodes), made again only when the node's jobs change or one of them
// passes a checkpoint: agents report every cycle, but most reports repeat
// the last one.
func (p *predictive) jobsOf(e *engine, n *node) []fleet.Job {
	if need := int(n.idx) + 1; need > len(p.byNode) {
		p.byNode = append(p.byNode, make([]nodeJobs, max(need, len(e.nodes))-len(p.byNode))...)
	}
	c := &p.byNode[n.idx]
	if c.ver == n.jobsVer+1 && e.now < c.until {
		return c.jobs[:len(c.jobs):len(c.jobs)]
	}
	c.jobs, c.until, c.ver = c.jobs[:0], math.MaxInt64, n.jobsVer+1
	for _, jid := range n.jobs {
		j := &e.jobs[jid]
		fj := fleet.Job{ID: j.id, GPUs: j.gpus, Start: p.at(j.start)}
		if len(j.nodes) > 1 {
			fj.GPUs = n.gpn // a wide job holds whole nodes
		}
		ck := j.checkpointed(e.now)
		if ck > 0 {
			fj.LastCheckpoint = p.at(j.start + ck)
		}
		if j.ckpt > 0 {
			c.until = min(c.until, j.start+ck+j.ckpt)
		}
		c.jobs = append(c.jobs, fj)
	}
	return c.jobs[:len(c.jobs):len(c.jobs)]
}

// observe is what the controller would see: every node with its jobs, as
// its agent reports them (agents report every cycle), and the queue.
func (p *predictive) observe(e *engine) *fleet.State {
	st := &p.state
	st.CapturedAt = p.at(e.now)
	st.Pools = p.statuses
	// The simulated scheduler reports as pending what its queue cannot
	// place: the queued GPUs, plus, while anything is queued, the free GPUs
	// it cannot place them on (fragments too small, or not whole nodes for
	// a wide job). Otherwise the planner would count stranded fragments as
	// capacity for the queue.
	st.PendingGPUs = e.queuedGPUs
	if e.queuedGPUs > 0 {
		for f := 1; f < e.maxGPN; f++ { // empty nodes are usable by wide jobs
			st.PendingGPUs += f * e.bucketLen(f)
		}
	}
	// No history: the planner's baseline advice is taken only with advised
	// reservations, and then at their cadence (rebase), not every cycle.
	st.Nodes = st.Nodes[:0]
	now := p.at(e.now)
	for _, n := range e.live {
		if n.state == gone {
			continue
		}
		fn := fleet.Node{ID: n.id, Pool: e.pools[n.pool].spec.Name, LaunchedAt: p.at(n.launched), Jobs: p.jobsOf(e, n)}
		switch n.state {
		case booting:
			fn.State = fleet.Pending
		case up:
			fn.State, fn.LastReport = fleet.Ready, now
		case draining:
			// The simulated agent holds the drain from the moment it is
			// decided, and confirms it once the node holds no job: a job
			// leaves once the checkpoint the drain asked for is durable; one
			// that ignores the drain stays, and the drain times out.
			fn.State, fn.LastReport, fn.DrainStartedAt, fn.DrainAcked = fleet.Draining, now, p.at(n.drainAt), true
			fn.DrainConfirmed = len(n.jobs) == 0
			if p.confirms != nil {
				fn.DrainConfirmed = p.confirms(n)
			}
		}
		if n.idleSince >= 0 && n.state != booting {
			fn.IdleSince = p.at(n.idleSince)
		}
		st.Nodes = append(st.Nodes, fn)
	}
	return st
}
