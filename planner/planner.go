package planner

import (
	"cmp"
	"maps"
	"slices"
	"time"

	"github.com/fleetcast/autoscaler/fleet"
	"github.com/fleetcast/autoscaler/forecast"
)

// Input is everything one planning cycle looks at.
type Input struct {
	// Settings are the pools and the forecast, drain and limit settings
	// (what a config holds: config.Config.Settings).
	Settings fleet.Settings
	State    *fleet.State
	// Forecast is the demand forecast; it should start near Now and reach
	// past the longest lead time plus the hysteresis. An empty forecast makes
	// the plan purely reactive (and says so).
	Forecast forecast.Forecast
	// Unannounced says the forecast is of the demand not announced (the
	// loop's history leaves the announced demand under way out): the
	// planner adds every announcement, under way
	// (State.UnderWay) or ahead (State.Announced), to it for the times it
	// covers. Unset, the forecast is of the whole demand (the perfect
	// ablation's truth, an outside forecast), which may expect the
	// announced jobs already, so announcements only raise current demand.
	Unannounced bool
	// TierForecasts are, with two tiers or more (fleet.Settings.Tiers),
	// the forecasts of each tier's cumulative demand, its jobs' and the
	// higher tiers', by rank, but the last tier's, which is Forecast (the
	// loop's TierDemand); without them each tier reads Forecast.
	TierForecasts []forecast.Forecast
	// PeakHistory is, with tiers, the recorded cumulative demand of the
	// lowest-ranked tier whose waiting is worth something, where another
	// tier ranks below it: the demand scale-in's recent peak reads
	// (recentPeak), so that nothing is kept for the zero-value tiers'
	// peaks. Empty: fleet.State.History, the whole demand's.
	PeakHistory fleet.Series
	Now         time.Time
}

// poolPlan is the planner's working view of one pool. Its counts are
// set by observe and kept up to date by the stages after it, as each
// field says.
type poolPlan struct {
	spec   *fleet.Pool
	status fleet.PoolStatus
	// migGPUs are the pool's GPUs set aside for lines of MIG instances
	// (serveMIG), and migClaimed the instances of each profile they hold:
	// a GPU of a mixed layout serves an instance of each of its profiles.
	migGPUs    int
	migClaimed map[string]int
	// q is the forecast quantile launch buys the pool for
	// (fleet.ForecastSettings.QuantileFor), with tiers the highest of its
	// level's; level is what launch buys it to (poolLevel).
	q     float64
	level level
	// size counts the pool's live nodes (pending within deadline, ready,
	// draining), and active the ones of them not draining: observe counts
	// them (a cancelled drain is active again), launch adds its launches
	// to both, scale-in takes its drains from active. Launch checks size
	// against the pool's max, scale-in active against its min and max.
	size, active int
	// billed counts the nodes the pool pays for now: every node that is
	// not terminating (a launch past its deadline too, until it is gone).
	// Observe counts them, launch adds its launches; the cost is worked out
	// from it.
	billed int
	// stuck counts the nodes in size that are past their provisioning
	// deadline (unknown, or being terminated), under an interruption
	// notice, or terminating (observe): they count against the limits, but
	// not towards the share of the pool that scale-in may drain.
	stuck int
	// terminating counts the pool's nodes its cloud is terminating
	// (observe): billed until they are gone, but not once the plan has
	// completed (costAfter).
	terminating int
	// failing is set by observe when a node of the pool missed its
	// provisioning deadline, or the cloud is failing to create one:
	// launch buys nothing in the pool.
	failing bool
	// holding counts the pool's booted launches held past their deadline
	// while scale-in is halted (settleOverdue): launch buys nothing more
	// in the pool until they report or go, so that a long halt does not
	// fill the pool with launches nobody hears from.
	holding int
	// candidates are ready nodes that scale-in may remove (observe).
	candidates []candidate
	// drainsInWindow counts drains of the pool begun within
	// limits.scale_in_window: observe counts them, scale-in adds its own.
	drainsInWindow int
	// ready counts the pool's ready nodes, to size candidates (observe).
	ready int
	// supply and used are the pool's part of the fleet's supply and the
	// GPUs the jobs on those nodes hold (observe), and launched the GPUs
	// this plan launches in it (launchIn): what scoped demand counts on.
	supply, used, launched int
	// claimed are the pool's free GPUs that scoped demand counts on
	// (launch), so that two scopes over one pool do not count them twice.
	claimed int
	// claimedSupply is the part of claimed on supply (not this plan's launches).
	claimedSupply int
	// stranded is the pool's part of Capacity.FragmentGPUs while jobs are
	// pending (else 0): the free GPUs of busy nodes that pending demand
	// cannot use (observe; scale-in's moves onto busy nodes take from it).
	stranded int
	// yielding is the part of used the preemptible tiers' jobs hold
	// (yieldingOn): free for the other tiers' scoped demand.
	yielding int
	// deferred counts the pool's nodes that launches in slower, dearer
	// pools were left to (launch, leftToFaster): it launches them itself
	// when its own lead time reaches the time they are needed. left is
	// the GPUs the pool's own need was left to such pools.
	deferred, left int
	// booting counts the pool's launches still booting within their
	// provisioning deadline, and lastLaunch is when the latest of its
	// live nodes was launched (observe): scale-in for demand waits for
	// them (scaleInDelay).
	booting    int
	lastLaunch time.Time
}

// candidate is a ready node scale-in may remove.
type candidate struct {
	node *fleet.Node
	// silentFor > 0 means the agent is silent.
	silentFor time.Duration
	// slot is the node's in tally.placement; -1 when its agent is silent.
	slot int
	// yielding is what the preemptible tiers' jobs hold on it (yieldingOn).
	yielding int
}

// drainCandidate is a candidate with what scale-in needs to order it,
// worked out only for pools scale-in reaches.
type drainCandidate struct {
	candidate
	// blocker is why the node cannot be drained now; none if it can.
	blocker cause
	// oldestCheckpoint is the oldest "last checkpoint" among its jobs.
	oldestCheckpoint time.Time
	// endsBy is when a busy node's jobs are all expected to end, when that
	// is within scale-in's window (expectedEmpty; zero otherwise): scale-in
	// for demand waits for them rather than drain a node (endingSoon).
	endsBy time.Time
	// yields is set for a busy node whose jobs are all of preemptible
	// tiers (onlyPreemptible): drained before the other busy nodes.
	yields bool
}

// tally is the fleet-wide running totals that the stages share: Make
// passes it from one to the next, in the order its doc lists them. Each
// field says which stage sets it and which read or change it after.
type tally struct {
	// supply counts GPUs that serve demand: ready nodes and launching
	// nodes within their deadline (observe), and drains this plan cancels
	// (observe, through settleDrain). Launch counts on it (have), and
	// scale-in, less silentGPUs.
	supply int
	// silentGPUs are the part of supply on nodes with silent agents
	// (observe): they may be dead, so scale-in does not count on them.
	silentGPUs int
	// fleetGPUs is the fleet's GPUs: observe counts every live node's,
	// launch adds its launches' and keeps it within limits.max_gpus.
	fleetGPUs int
	// spend is the fleet's cost per hour: a pool's cost is its nodes'
	// price, and a reserved pool's is at least its whole reservation (paid
	// whether used or not). Observe sets it, launch adds its launches' and
	// keeps it within limits.max_spend_per_hour.
	spend float64
	// deferredGPUs and deferredSpend are what the pools counted on by
	// leftToFaster would add to fleetGPUs and spend: no more is counted
	// on than the fleet's limits leave.
	deferredGPUs  int
	deferredSpend float64
	// launches are this plan's launches, with when they will be ready:
	// launch adds them, and counts them as capacity (have) from then on.
	launches []launched
	// scaleInLeft is what is left of limits.max_scale_in_per_cycle: Make
	// sets it, scale-in's drains spend it, then reap's drains what is left.
	scaleInLeft int
	// scopedFree is the free GPUs of supply set aside for the demand
	// pending for some pools only (launch, serveScoped): the
	// fleet-wide launches count neither it, nor planner.scopedPending, nor
	// the launches made for it.
	scopedFree int
	// placement is the free GPUs of ready nodes, where scale-in places
	// the jobs of a busy node it drains (observe fills it).
	placement placement
	// orphans are the fleet's orphans (observe), for reap.
	orphans []*fleet.Node
	// outsideSpend is what the nodes of no configured pool cost per hour
	// (observe, countOutside): counted in spend, against the limits.
	outsideSpend float64
	// overdue are this controller's launches past their provisioning
	// deadline (observe), settled once the halt is known (settleOverdue).
	overdue []overdue
}

// overdue is a launch past its provisioning deadline, and its pool.
type overdue struct {
	pp   *poolPlan
	node *fleet.Node
}

// launched is capacity this plan buys, ready at a time; scoped when it
// is bought for scoped demand, which it alone serves.
type launched struct {
	ready  time.Time
	gpus   int
	pool   *poolPlan
	scoped int // GPUs of it that scoped demand counts on
}

// planner holds one cycle's inputs, the plan it builds, and what one
// stage works out for the next outside the tally.
type planner struct {
	in  Input
	cfg *fleet.Settings
	now time.Time
	// q is the highest quantile of the burst pools not refused by their
	// clouds: scale-in keeps what the forecast needs at it (keepQuantile);
	// keep is that level, with tiers each tier's (keepLevel), and q its
	// highest quantile.
	q      float64
	keep   level
	pools  []*poolPlan
	byName map[string]*poolPlan
	// plan is the plan being built. Its Demand is counted by observe and
	// read by the stages after it (what "now" needs).
	plan Plan
	// fc is the sanitized forecast (sanitizeForecast), which launch and
	// scale-in provision for; nil when there is none. tierFc are the
	// tiers' cumulative forecasts (sanitizeTierForecasts), nil for one
	// that reads fc; pendingTier the GPUs pending for each tier
	// (fleet.PendingByTier).
	fc          *forecast.Forecast
	tierFc      []*forecast.Forecast
	pendingTier []int
	// heldBelow is, for each tier, the GPUs the running jobs of the tiers
	// below it that are not preemptible hold; preemptible the GPUs the
	// preemptible tiers' jobs hold (countTiers).
	heldBelow   []int
	preemptible int
	// withheld is, by tier (one entry without tiers), the pending GPUs
	// of the teams over their burst budget that nothing is bought for;
	// overBudget those teams (countBudgets).
	withheld   []int
	overBudget []overBudget
	// fragments is, with tiers, the free GPUs (preemptible jobs' counted
	// free) of the ready nodes that other jobs hold some of (strandedFor).
	fragments int
	// window is how far ahead scale-in looks: the longest burst lead time
	// plus the hysteresis.
	window time.Duration
	// ahead and all are where announced demand rises and falls, sorted
	// (announcedMax): ahead that of State.Announced, all that with
	// State.UnderWay too; each is made when first read.
	ahead, all []change
	// scopedPending is the demand pending for some pools only
	// (fleet.State.Scoped) that serveScoped serves apart, and, with
	// tiers, scopedTier its part of each tier (scopedFor).
	scopedPending int
	scopedTier    []int
	// ends are the ready, reporting nodes whose jobs all have an expected
	// end after now, by the last of them, soonest first (endingBy).
	ends []nodeEnd
	// waitUntil is the latest lead time of the burst pools launch has
	// come to that may launch: a pending job that waits for an expected
	// end within a cheaper pool's lead time instead of its launch is not
	// bought for in a dearer, faster pool either (endingFor).
	waitUntil time.Time
	// noted are the notes' words so far, so each is written once.
	noted map[string]bool
	// widest and dearest are the most GPUs per node and the highest price
	// per node-hour of the configured pools: what a node of no configured
	// pool is counted at when nothing says otherwise (countOutside).
	widest  int
	dearest float64
	// outside is the price per hour of each node of no configured pool
	// that is not terminating (countOutside), for costAfter.
	outside map[string]float64
}

// Make plans one cycle. It never fails: problems in its input (a bad
// forecast, an unknown pool) become notes, and the plan stays safe.
//
// It runs these stages in this order, each in its own file, passing them
// the running totals they share (tally):
//  1. observe (observe.go) walks the nodes once: counts capacity, demand
//     and cost, settles drains and provisioning deadlines, and collects
//     scale-in candidates and orphans;
//  2. sanitizeForecast (forecast_input.go) checks and clamps the forecast,
//     against the demand observe counted;
//  3. launch (launch.go) fills reserved pools and pools below min, then
//     buys burst capacity for the forecast, within the pools' max and the
//     fleet's limits;
//  4. scaleIn (scalein.go) drains pools above their max, then what the
//     forecast will not need, counting on the capacity left after
//     launch;
//  5. reap (reap.go) drains and terminates orphans, within what scale-in
//     left of the cycle's budget;
//
// then the plan's cost after its actions and the baseline advice. The
// words of every reason are made in format.go, their codes in reasons.go.
func Make(in Input) Plan {
	p := &planner{
		in:      in,
		cfg:     &in.Settings,
		now:     in.Now,
		byName:  make(map[string]*poolPlan, len(in.Settings.Pools)),
		noted:   map[string]bool{},
		outside: map[string]float64{},
	}
	t := &tally{scaleInLeft: in.Settings.Limits.MaxScaleInPerCycle}
	longest, widest := time.Duration(0), 0
	for i := range in.Settings.Pools {
		pp := &poolPlan{spec: &in.Settings.Pools[i], status: fleet.PoolStatus{Name: in.Settings.Pools[i].Name}}
		pp.level = p.poolLevel(pp.spec)
		pp.q = pp.level.top()
		p.pools = append(p.pools, pp)
		p.byName[pp.spec.Name] = pp
		if pp.spec.Capacity != fleet.Reserved {
			longest = max(longest, pp.spec.LeadTime)
		}
		widest = max(widest, pp.spec.GPUsPerNode)
		p.dearest = max(p.dearest, pp.spec.PricePerHour)
	}
	p.widest = widest
	p.plan = Plan{At: in.Now}
	t.placement = newPlacement(widest, len(in.State.Nodes))
	p.window = longest + in.Settings.Forecast.Hysteresis
	for _, st := range in.State.Pools {
		if pp := p.byName[st.Name]; pp != nil {
			pp.status = st
		}
	}
	p.plan.Demand.PendingGPUs = max(0, in.State.PendingGPUs)
	if q := in.State.Queue; q != nil {
		p.plan.Queue = q
		if q.Degraded != "" || q.Expired {
			p.note(ReasonQueueDegraded, queueDegradedNote(q))
		}
	}

	p.countTiers()
	p.countBudgets()
	p.observe(t)
	p.sanitizeForecast()
	p.sanitizeTierForecasts()
	p.keep = p.keepLevel()
	p.q = p.keep.top()
	if p.q == 0 {
		// No tier buys any burst pool: the level of them all.
		p.q = p.keepQuantile()
	}
	p.plan.Quantile = p.q
	p.launch(t)
	p.scaleIn(t)
	p.reap(t)
	p.plan.CostPerHourBefore, p.plan.CostPerHourAfter = cents(p.plan.CostPerHourBefore), cents(p.costAfter())
	advisedOn := in.State.Held
	if len(advisedOn.Values)+1 < len(in.State.History.Values) {
		// A snapshot without it, or a controller that began keeping it
		// lately (an upgrade, a seeded history): demand, a lower bound,
		// until it is as long.
		advisedOn = in.State.History
	}
	p.plan.Baseline = RecommendBaseline(advisedOn, in.Settings.Pools, MinAdviceHistory)
	return p.plan
}

// keepQuantile is the highest quantile of the burst pools their clouds do
// not refuse (refusing: backed off, failing): what scale-in keeps for, so
// that nothing it drains a launch would buy back in this plan (a refused
// pool does not launch), nor in a later one once a pool at its max can
// buy again (a drain of its own nodes). A refused pool does not count
// while it is: capacity kept for its level is capacity no pool would buy,
// held at a dearer pool's price, as after a burst that spot could not
// serve; once it may buy again, it buys to its own level at its own price.
// When every burst pool is refused, the highest of them all.
func (p *planner) keepQuantile() float64 {
	q, all := 0.0, 0.0
	for _, pp := range p.pools {
		if pp.spec.Capacity == fleet.Reserved {
			continue
		}
		all = max(all, pp.q)
		if !p.refusing(pp) {
			q = max(q, pp.q)
		}
	}
	q = cmp.Or(q, all)
	// No burst pool: the forecast buys nothing.
	return cmp.Or(q, p.cfg.Forecast.Quantile, fleet.MaxCostQuantile)
}

// stranded is Capacity.FragmentGPUs while jobs are pending, else 0: free
// GPUs that pending demand cannot use, which need counts as held.
func (p *planner) stranded() int {
	if p.plan.Demand.PendingGPUs > 0 {
		return p.plan.Capacity.FragmentGPUs
	}
	return 0
}

// cost is the pool's cost per hour with nodes billed: their price, and a
// reserved pool's whole reservation at least (docs/design.md rule 3 counts what
// is paid: a reservation of 2 with 4 nodes running pays for 4).
func (pp *poolPlan) cost(nodes int) float64 {
	if pp.spec.Capacity == fleet.Reserved {
		nodes = max(nodes, pp.spec.Max)
	}
	return float64(nodes) * pp.spec.PricePerHour
}

// costAfter is the cost per hour once the plan has completed: launches
// running, drained and terminated nodes gone.
func (p *planner) costAfter() float64 {
	after := make(map[string]int, len(p.pools))
	for _, pp := range p.pools {
		after[pp.spec.Name] = pp.billed - pp.terminating
	}
	outside := maps.Clone(p.outside)
	for i := range p.plan.Actions {
		switch a := &p.plan.Actions[i]; a.Kind {
		case Drain, Terminate:
			after[a.Pool]--
			delete(outside, a.Node)
		}
	}
	total := 0.0
	for _, id := range slices.Sorted(maps.Keys(outside)) {
		total += outside[id]
	}
	for _, pp := range p.pools {
		// Launches are in billed already.
		total += pp.cost(max(after[pp.spec.Name], 0))
	}
	return total
}

// add appends an action to the plan, with its pool's instance type and
// GPUs when it does not say.
func (p *planner) add(a Action) {
	if a.InstanceType == "" {
		if pp := p.byName[a.Pool]; pp != nil {
			a.InstanceType = pp.spec.InstanceType
			if a.GPUs == 0 && a.Kind != Launch {
				a.GPUs = pp.spec.GPUsPerNode
			}
		}
	}
	p.plan.Actions = append(p.plan.Actions, a)
}

// note adds a note to the plan, unless one with the same words is there.
func (p *planner) note(code Reason, text string) {
	if !p.noted[text] {
		p.noted[text] = true
		p.plan.Notes = append(p.plan.Notes, Note{Code: code, Text: text})
	}
}
