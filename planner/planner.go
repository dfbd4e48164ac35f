package planner

import (
	"fmt"
	"math"
	"slices"
	"strings"
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
	Now      time.Time
}

// poolPlan is the planner's working view of one pool.
type poolPlan struct {
	spec   *fleet.Pool
	status fleet.PoolStatus
	// size counts the pool's live nodes (pending within deadline, ready,
	// draining); active excludes draining ones.
	size, active int
	// billed counts the nodes the pool pays for now: every node that is
	// not terminating (a launch past its deadline too, until it is gone).
	billed int
	// stuck counts the nodes in size that are past their provisioning
	// deadline (unknown, or being terminated): they count against the
	// limits, but not towards the share of the pool that may drain.
	stuck int
	// failing is set when a node of the pool missed its provisioning deadline.
	failing bool
	// candidates are ready nodes that scale-in may remove.
	candidates []candidate
	// drainsInWindow counts drains of the pool begun within
	// limits.scale_in_window.
	drainsInWindow int
	// ready counts the pool's ready nodes, to size candidates.
	ready int
}

// candidate is a ready node scale-in may remove.
type candidate struct {
	node *fleet.Node
	// silentFor > 0 means the agent is silent.
	silentFor time.Duration
}

// drainCandidate is a candidate with what scale-in needs to order it,
// worked out only for pools scale-in reaches.
type drainCandidate struct {
	candidate
	// blocker is why the node cannot be drained now; "" if it can.
	blocker string
	// oldestCheckpoint is the oldest "last checkpoint" among its jobs.
	oldestCheckpoint time.Time
}

// planner holds one cycle's working state.
type planner struct {
	in     Input
	cfg    *fleet.Settings
	now    time.Time
	q      float64
	pools  []*poolPlan
	byName map[string]*poolPlan
	plan   Plan
	// supply counts GPUs that serve demand: ready nodes, launching nodes
	// within their deadline, and drains cancelled by this plan.
	supply int
	// silentGPUs are the part of supply on nodes with silent agents: they
	// may be dead, so scale-in does not count on them.
	silentGPUs int
	// fleetGPUs and spend are the fleet's GPUs and cost per hour including
	// this plan's launches: a pool's cost is its nodes' price, and a
	// reserved pool's is at least its whole reservation (paid whether
	// used or not).
	fleetGPUs int
	spend     float64
	// decided are the nodes scale-in drained or held to bring a pool
	// back to its max: they are not listed again.
	decided map[string]bool
	// launches are this plan's launches, with when they will be ready.
	launches []launched
	// fc is the sanitized forecast; nil when there is none.
	fc *forecast.Forecast
	// window is how far ahead scale-in looks: the longest burst lead time
	// plus the hysteresis.
	window time.Duration
	noted  map[string]bool
	// orphans are the fleet's orphans, for reap.
	orphans []*fleet.Node
	// scaleInLeft is what is left of limits.max_scale_in_per_cycle: drains
	// for scale-in and reaps share it.
	scaleInLeft int
}

// launched is capacity this plan buys, ready at a time.
type launched struct {
	ready time.Time
	gpus  int
}

// Make plans one cycle. It never fails: problems in its input (a bad
// forecast, an unknown pool) become notes, and the plan stays safe.
func Make(in Input) Plan {
	p := &planner{
		in:      in,
		cfg:     &in.Settings,
		now:     in.Now,
		q:       in.Settings.Forecast.Quantile,
		byName:  make(map[string]*poolPlan, len(in.Settings.Pools)),
		noted:   map[string]bool{},
		decided: map[string]bool{},
	}
	p.plan = Plan{At: in.Now, Quantile: p.q}
	p.scaleInLeft = in.Settings.Limits.MaxScaleInPerCycle
	longest := time.Duration(0)
	for i := range in.Settings.Pools {
		pp := &poolPlan{spec: &in.Settings.Pools[i], status: fleet.PoolStatus{Name: in.Settings.Pools[i].Name}}
		p.pools = append(p.pools, pp)
		p.byName[pp.spec.Name] = pp
		if pp.spec.Capacity != fleet.Reserved {
			longest = max(longest, pp.spec.LeadTime)
		}
	}
	p.window = longest + in.Settings.Forecast.Hysteresis
	for _, st := range in.State.Pools {
		if pp := p.byName[st.Name]; pp != nil {
			pp.status = st
		}
	}
	p.plan.Demand.PendingGPUs = max(0, in.State.PendingGPUs)

	p.observe()
	p.sanitizeForecast()
	p.launch()
	p.scaleIn()
	p.reap()
	p.plan.CostPerHourBefore, p.plan.CostPerHourAfter = cents(p.plan.CostPerHourBefore), cents(p.costAfter())
	p.plan.Baseline = RecommendBaseline(in.State.History, in.Settings.Pools)
	return p.plan
}

// observe walks the nodes once: counts capacity, demand and cost, settles
// drains and provisioning deadlines, and collects scale-in candidates.
func (p *planner) observe() {
	nodes := sortedNodes(p.in.State.Nodes)
	pools := p.poolsOf(nodes)
	for i, n := range nodes {
		pp := pools[i]
		if pp == nil && n.Orphan {
			p.orphans = append(p.orphans, n)
			continue
		}
		if pp == nil {
			p.note(fmt.Sprintf("node %s names pool %q, which the config does not have; left alone", n.ID, n.Pool))
			continue
		}
		if n.State == fleet.Terminating {
			continue
		}
		gpn := pp.spec.GPUsPerNode
		silent := p.silentFor(n)
		pp.billed++
		// A node's jobs never hold more GPUs than it has, whatever a
		// report claimed.
		p.plan.Demand.RunningGPUs += min(n.UsedGPUs(), gpn)
		if n.Unknown {
			p.plan.UnknownNodes = append(p.plan.UnknownNodes, n.ID)
		}
		if n.GPUFault != "" && (n.State == fleet.Ready || n.State == fleet.Draining) {
			p.plan.GPUFaultNodes = append(p.plan.GPUFaultNodes, n.ID)
		}
		switch n.State {
		case fleet.Pending:
			deadline := n.LaunchedAt.Add(pp.spec.ProvisionTimeout)
			if p.now.After(deadline) && len(n.Jobs) == 0 && n.Unknown {
				// Not this controller's launch: never terminated for
				// missing a deadline it was never given (rule 7), and no
				// longer counted on as capacity. It counts against the
				// limits.
				p.add(Action{Kind: Hold, Pool: pp.spec.Name, Node: n.ID,
					Reason: fmt.Sprintf("unknown instance (not launched by this controller, or not provably), not ready %s after it was first seen; not counted as capacity, and never terminated for it: is its agent installed and reporting?",
						age(p.now.Sub(n.LaunchedAt)))})
				pp.size++
				pp.stuck++
				p.fleetGPUs += gpn
				continue
			}
			if p.now.After(deadline) && len(n.Jobs) == 0 {
				if pp.status.IsUnobserved() {
					// Not counted on, and not terminated blind; it still
					// counts against the limits.
					p.add(Action{Kind: Hold, Pool: pp.spec.Name, Node: n.ID,
						Reason: "past its provisioning deadline, but " + unobserved(pp)})
					pp.size++
					p.fleetGPUs += gpn
					continue
				}
				pp.failing = true
				p.add(Action{Kind: Terminate, Pool: pp.spec.Name, Node: n.ID, BackOff: true,
					Reason: fmt.Sprintf("launched %s ago and not ready by its provisioning deadline (%s); pool backed off",
						age(p.now.Sub(n.LaunchedAt)), age(pp.spec.ProvisionTimeout))})
				// Not counted on, but until it is gone it counts against
				// the limits (its termination may fail).
				pp.size++
				pp.stuck++
				p.fleetGPUs += gpn
				continue
			}
			p.plan.Capacity.LaunchingGPUs += gpn
			p.supply += gpn
			pp.active++
		case fleet.Ready:
			if interrupted(n, p.now) {
				// The cloud takes it: not counted on, so its replacement is
				// launched now, ahead of the loss; it counts against the
				// limits until it is gone.
				p.add(Action{Kind: Hold, Pool: pp.spec.Name, Node: n.ID, InstanceType: pp.spec.InstanceType, GPUs: gpn,
					Reason: fmt.Sprintf("spot interruption notice: the cloud takes it at %s; its agent asked its jobs to checkpoint; not counted as capacity (replaced)", clock(n.InterruptAt))})
				p.plan.Capacity.InterruptedGPUs += gpn
				pp.size++
				pp.stuck++
				p.fleetGPUs += gpn
				continue
			}
			p.plan.Capacity.ReadyGPUs += gpn
			p.supply += gpn
			pp.active++
			// Blockers are found only if scale-in gets to the node.
			pp.candidates = append(pp.candidates, candidate{node: n, silentFor: silent})
			if silent > 0 {
				p.silentGPUs += gpn
				p.plan.Capacity.SilentNodes++
			}
		case fleet.Draining:
			if p.now.Sub(n.DrainStartedAt) < p.cfg.Limits.ScaleInWindow {
				pp.drainsInWindow++
			}
			p.plan.Capacity.DrainingGPUs += gpn
			if silent > 0 {
				p.plan.Capacity.SilentNodes++
			}
			p.settleDrain(pp, n, silent)
		}
		pp.size++
		p.fleetGPUs += gpn
	}
	for _, pp := range p.pools {
		// Drains recorded by the caller include those still in progress,
		// which were counted from the nodes above.
		recorded := 0
		for _, t := range pp.status.RecentDrains {
			if d := p.now.Sub(t); d >= 0 && d < p.cfg.Limits.ScaleInWindow {
				recorded++
			}
		}
		pp.drainsInWindow = max(pp.drainsInWindow, recorded)
		p.spend += pp.cost(pp.billed)
	}
	p.plan.CostPerHourBefore = p.spend
	if m := p.cfg.Limits.MaxSpendPerHour; m > 0 && p.spend > m {
		p.note(fmt.Sprintf("the fleet costs $%.2f/h (reservations included), over limits.max_spend_per_hour ($%.2f): nothing is launched", p.spend, m))
	}
}

// cost is the pool's cost per hour with nodes billed: their price, and a
// reserved pool's whole reservation at least (DESIGN.md rule 3 counts what
// is paid: a reservation of 2 with 4 nodes running pays for 4).
func (pp *poolPlan) cost(nodes int) float64 {
	if pp.spec.Capacity == fleet.Reserved {
		nodes = max(nodes, pp.spec.Max)
	}
	return float64(nodes) * pp.spec.PricePerHour
}

// settleDrain decides what happens to a draining node: terminate it once
// its agent confirms, for this drain and on its own clock, that every job
// on it checkpointed after the agent received the drain, or exited
// (fleet.Node.DrainConfirmed); cancel the drain after the timeout; hold it
// until then. No checkpoint time is compared with the drain's start here:
// they are on two clocks (DESIGN.md rule 1).
func (p *planner) settleDrain(pp *poolPlan, n *fleet.Node, silent time.Duration) {
	a := Action{Pool: pp.spec.Name, Node: n.ID, InstanceType: pp.spec.InstanceType, GPUs: pp.spec.GPUsPerNode}
	since := p.now.Sub(n.DrainStartedAt)
	blocker := unconfirmed(n, silent)
	switch {
	case blocker == "" && pp.status.IsUnobserved():
		a.Kind, a.Reason = Hold, "drained, but "+unobserved(pp)
	case blocker == "" && len(n.Jobs) == 0:
		a.Kind, a.Reason = Terminate, fmt.Sprintf("drained: no jobs left, as its agent confirmed (draining for %s)", age(since))
	case blocker == "":
		a.Kind, a.Reason = Terminate, fmt.Sprintf("drained: its agent confirmed all %d job(s) checkpointed since it received the drain, begun %s ago", len(n.Jobs), age(since))
	case since > p.cfg.Drain.Timeout:
		a.Kind, a.Reason = CancelDrain, fmt.Sprintf("drain timed out after %s: %s; node kept", age(since), blocker)
		// The node returns to service and serves demand again.
		p.supply += pp.spec.GPUsPerNode
		if silent > 0 {
			p.silentGPUs += pp.spec.GPUsPerNode
		}
		pp.active++
	default:
		a.Kind, a.Reason = Hold, fmt.Sprintf("draining for %s: %s (timeout in %s)", age(since), blocker, age(p.cfg.Drain.Timeout-since))
	}
	p.add(a)
}

// unconfirmed says why a draining node may not be terminated yet; "" once
// its agent, reporting since the drain began, holds the drain and
// confirms that every job checkpointed after it received it, or exited.
func unconfirmed(n *fleet.Node, silent time.Duration) string {
	switch {
	case silent > 0:
		return silence(silent) + ", so its jobs' checkpoints cannot be confirmed"
	case !n.LastReport.After(n.DrainStartedAt):
		return "no agent report since the drain began"
	case !n.DrainAcked:
		// The cordon: until the agent holds the drain it may still take
		// new work, which the next report would show.
		return "its agent has not yet confirmed the drain (it may still take new work)"
	case !n.DrainConfirmed:
		// Naming the job is a hint only, from times on the agent's clock:
		// the agent's confirmation decides.
		if j := worstJob(n.Jobs, func(j *fleet.Job) bool { return !j.LastCheckpoint.After(n.DrainStartedAt) }); j != nil {
			return fmt.Sprintf("job %s shows no checkpoint since the drain began, and its agent has not confirmed the drain safe", j.ID)
		}
		return "its agent has not yet confirmed that every job checkpointed since the drain reached it"
	}
	return ""
}

// StaleNotice is how long past its deadline a spot interruption notice
// still counts: a node that reports on after that survived it (it was
// stopped or hibernated and resumed, or the notice was not the cloud's),
// and is capacity again.
const StaleNotice = 10 * time.Minute

// interrupted reports whether the cloud is taking the node: its agent
// reports an interruption notice not older than StaleNotice.
func interrupted(n *fleet.Node, now time.Time) bool {
	return !n.InterruptAt.IsZero() && now.Sub(n.InterruptAt) <= StaleNotice
}

// ReapIdle is how long an orphan's agent must have reported it idle
// before it is drained.
const ReapIdle = 10 * time.Minute

// reap decides what happens to the fleet's orphans (fleet.Node.Orphan):
// an idle one, whose agent has reported it so for ReapIdle, is drained,
// and terminated once its agent confirms the drain, as any node is; one
// whose agent is silent, whose GPUs cannot be read, or that runs jobs is
// held. None starts while scale-in is halted, and drains share
// limits.max_scale_in_per_cycle with scale-in (what it left). Orphans count
// in no pool's size or cost: their pool's config is gone.
func (p *planner) reap() {
	budget := &p.scaleInLeft
	for _, n := range p.orphans {
		p.plan.Orphans = append(p.plan.Orphans, n.ID)
		why := fmt.Sprintf("orphan: pool %s is no longer in the config", n.Pool)
		a := Action{Pool: n.Pool, Node: n.ID, Kind: Hold}
		silent := p.silentFor(n)
		switch n.State {
		case fleet.Terminating:
			continue
		case fleet.Pending:
			a.Reason = why + "; booting: reaped once its agent reports it idle"
		case fleet.Draining:
			since := p.now.Sub(n.DrainStartedAt)
			switch blocker := unconfirmed(n, silent); {
			case blocker == "":
				a.Kind, a.Reason = Terminate, why+"; reaped: drained, as its agent confirmed"
			case since > p.cfg.Drain.Timeout:
				a.Kind, a.Reason = CancelDrain, fmt.Sprintf("%s; drain timed out after %s: %s; node kept", why, age(since), blocker)
			default:
				a.Reason = fmt.Sprintf("%s; draining for %s: %s (timeout in %s)", why, age(since), blocker, age(p.cfg.Drain.Timeout-since))
			}
		case fleet.Ready:
			idle := time.Duration(0)
			if !n.IdleSince.IsZero() {
				idle = p.now.Sub(n.IdleSince)
			}
			switch {
			case interrupted(n, p.now):
				a.Reason = fmt.Sprintf("%s; spot interruption notice: the cloud takes it at %s", why, clock(n.InterruptAt))
			case silent > 0:
				a.Reason = why + "; " + silentReason(n, silent) + ": never reaped while silent"
			case n.GPUFault != "":
				a.Reason = fmt.Sprintf("%s; its agent cannot read its GPUs (%s): never reaped unseen", why, n.GPUFault)
			case len(n.Jobs) > 0:
				a.Reason = fmt.Sprintf("%s; runs %d job(s): reaped once idle", why, len(n.Jobs))
			case idle < ReapIdle:
				a.Reason = fmt.Sprintf("%s; idle for %s: reaped after %s idle", why, age(idle), age(ReapIdle))
			case p.plan.ScaleInHalt != "":
				a.Reason = why + "; idle, but scale-in is halted: " + p.plan.ScaleInHalt
			case *budget == 0:
				a.Reason = fmt.Sprintf("%s; idle, but limits.max_scale_in_per_cycle (%d) is reached this cycle", why, p.cfg.Limits.MaxScaleInPerCycle)
			default:
				a.Kind, a.Reason = Drain, fmt.Sprintf("%s; reaping: idle %s", why, age(idle))
				*budget--
			}
		}
		p.add(a)
	}
}

// worstJob returns, among the jobs that match, the one with the oldest last
// checkpoint (never is oldest), then the smallest ID; nil if none match.
// Reasons name it, so they do not depend on the order jobs were listed in.
func worstJob(jobs []fleet.Job, match func(*fleet.Job) bool) *fleet.Job {
	var worst *fleet.Job
	for i := range jobs {
		j := &jobs[i]
		if !match(j) {
			continue
		}
		if worst == nil || j.LastCheckpoint.Before(worst.LastCheckpoint) ||
			(j.LastCheckpoint.Equal(worst.LastCheckpoint) && j.ID < worst.ID) {
			worst = j
		}
	}
	return worst
}

// drainBlocker says why a ready node cannot be drained now ("" if it can),
// and returns the oldest last checkpoint among its jobs. Every job must have
// checkpointed within drain.checkpoint_max_age (stricter than DESIGN.md rule
// 1, which asks it of long-running jobs only: a young job that never
// checkpointed would lose all its work) and, after a cancelled drain, since
// the cancel (so a job that ignores the signal does not flap its node
// between drains).
func (p *planner) drainBlocker(n *fleet.Node) (string, time.Time) {
	if n.GPUFault != "" && len(n.Jobs) == 0 {
		// Empty as far as the agent knows, but nobody can see what runs
		// on the GPUs: not idle.
		return fmt.Sprintf("its agent cannot read its GPUs (for %s: %s), so what runs on them is unknown and the node is never taken for idle", age(p.now.Sub(n.GPUFaultSince)), n.GPUFault), time.Time{}
	}
	maxAge := p.cfg.Drain.CheckpointMaxAge
	stale := func(j *fleet.Job) bool {
		return j.LastCheckpoint.IsZero() || p.now.Sub(j.LastCheckpoint) > maxAge || j.LastCheckpoint.Before(n.DrainCancelledAt)
	}
	oldest := worstJob(n.Jobs, func(*fleet.Job) bool { return true })
	j := worstJob(n.Jobs, stale)
	switch {
	case oldest == nil:
		return "", time.Time{}
	case j == nil:
		return "", oldest.LastCheckpoint
	}
	kind := "job"
	if j.LongRunning || p.now.Sub(j.Start) >= p.cfg.Drain.LongRunningAfter {
		kind = "long-running job"
	}
	var why string
	switch {
	case j.LastCheckpoint.IsZero():
		why = fmt.Sprintf("%s %s has never checkpointed (started %s ago)", kind, j.ID, age(p.now.Sub(j.Start)))
	case p.now.Sub(j.LastCheckpoint) > maxAge:
		why = fmt.Sprintf("%s %s last checkpoint %s ago > %s", kind, j.ID, age(p.now.Sub(j.LastCheckpoint)), age(maxAge))
	default:
		why = fmt.Sprintf("drain cancelled %s ago and %s %s has not checkpointed since", age(p.now.Sub(n.DrainCancelledAt)), kind, j.ID)
	}
	return why, oldest.LastCheckpoint
}

// poolsOf is each node's pool plan (nil for a pool the config does not
// have), looked up once for each run of nodes of the same pool, with
// each pool's candidates sized to its ready nodes.
func (p *planner) poolsOf(nodes []*fleet.Node) []*poolPlan {
	out := make([]*poolPlan, len(nodes))
	var last *poolPlan
	name, looked := "", false
	for i, n := range nodes {
		if !looked || n.Pool != name {
			last, name, looked = p.byName[n.Pool], n.Pool, true
		}
		out[i] = last
		if last != nil && n.State == fleet.Ready {
			last.ready++
		}
	}
	for _, pp := range p.pools {
		pp.candidates = make([]candidate, 0, pp.ready)
	}
	return out
}

// silentFor returns how long a ready or draining node's agent has been
// silent, if longer than the agent timeout; 0 if it is not silent. A node
// whose agent never reported is silent for ever (neverReported).
func (p *planner) silentFor(n *fleet.Node) time.Duration {
	if n.State != fleet.Ready && n.State != fleet.Draining {
		return 0
	}
	if n.LastReport.IsZero() || n.Unknown {
		// An unknown node's agent has never reported healthy GPUs.
		return neverReported
	}
	if d := p.now.Sub(n.LastReport); d > p.cfg.AgentTimeout {
		return d
	}
	return 0
}

// neverReported is the silence of an agent that never reported.
const neverReported = time.Duration(math.MaxInt64)

// sanitizeForecast checks the input forecast's shape and copies it with
// every value that is not a number replaced by current demand and
// negatives raised to 0, each kind noted once (rule 10). Only the clean
// copy is used and shown. A malformed forecast is dropped and the plan made
// on current demand, and so is one with an absurd value (over ten times
// what the fleet can hold): such a forecast carries no information, and
// clamping it would buy the whole fleet.
func (p *planner) sanitizeForecast() {
	in := p.in.Forecast
	if why := malformed(&in); why != "" {
		p.note("no usable forecast (" + why + "): planning on current demand only")
		return
	}
	now := float64(p.plan.Demand.Total())
	ceiling := float64(p.cfg.MaxFleetGPUs())
	if ceiling > 0 {
		huge, worst := 0, 0.0
		for _, row := range in.Values {
			for _, v := range row {
				if v > 10*ceiling {
					huge, worst = huge+1, max(worst, v)
				}
			}
		}
		if huge > 0 {
			p.note(fmt.Sprintf("no usable forecast (%d absurd value(s), up to %.3g GPUs, above ten times what the fleet can hold, %.0f): planning on current demand only", huge, worst, ceiling))
			return
		}
	}
	var nan, neg int
	f := in
	f.Levels = slices.Clone(in.Levels)
	f.Values = make([][]float64, len(in.Values))
	for k, row := range in.Values {
		f.Values[k] = slices.Clone(row)
		for h, v := range f.Values[k] {
			switch {
			case math.IsNaN(v) || math.IsInf(v, 0):
				f.Values[k][h], nan = now, nan+1
			case v < 0:
				f.Values[k][h], neg = 0, neg+1
			}
		}
	}
	if nan > 0 {
		p.note(fmt.Sprintf("forecast had %d value(s) that are not numbers; replaced with current demand (%.0f GPUs)", nan, now))
	}
	if neg > 0 {
		p.note(fmt.Sprintf("forecast had %d negative value(s); clamped to 0", neg))
	}
	if end := p.now.Add(p.window); f.End().Before(end) {
		p.note(fmt.Sprintf("forecast ends at %s, before %s (longest lead time + hysteresis): its last step stands for the rest", clock(f.End()), clock(end)))
	}
	p.plan.Forecast = &f
	p.fc = &f
}

// malformed says what is wrong with a forecast's shape; "" if nothing.
func malformed(f *forecast.Forecast) string {
	switch {
	case f.Steps() == 0 || len(f.Levels) == 0:
		return "empty"
	case f.Step <= 0:
		return "step is not positive"
	case len(f.Values) != len(f.Levels):
		return fmt.Sprintf("%d rows of values for %d levels", len(f.Values), len(f.Levels))
	}
	for k, q := range f.Levels {
		if !(q > 0 && q < 1) || (k > 0 && q <= f.Levels[k-1]) {
			return "levels are not ascending in (0, 1)"
		}
		if len(f.Values[k]) != f.Steps() {
			return "rows of values differ in length"
		}
	}
	return ""
}

// needAt is the demand to provision for at t, and whether the forecast
// ("forecast") or current demand ("now") set it: the forecast quantile,
// never below what is in use or pending now.
func (p *planner) needAt(t time.Time) (int, string) {
	if p.fc == nil {
		return p.need(0)
	}
	return p.need(p.fc.At(p.q, t))
}

// needOver is the most demand to provision for during [from, to].
func (p *planner) needOver(from, to time.Time) (int, string) {
	if p.fc == nil {
		return p.need(0)
	}
	return p.need(p.fc.Max(p.q, from, to))
}

func (p *planner) need(v float64) (int, string) {
	now := p.plan.Demand.Total()
	if f := int(math.Ceil(v - 1e-9)); f > now {
		return f, "forecast"
	}
	return now, "now"
}

// have is the capacity there will be at t: ready and launching nodes, and
// this plan's launches ready within one forecast step of t. A cheaper pool
// that is a few minutes slower thus serves a need a dearer, faster pool could
// meet to the minute (the forecast cannot tell those minutes apart), while a
// pool slower than that leaves the early need to a faster pool.
func (p *planner) have(t time.Time) int {
	n := p.supply
	for _, l := range p.launches {
		if !l.ready.After(t.Add(p.cfg.Forecast.Step)) {
			n += l.gpus
		}
	}
	return n
}

// launch fills reserved pools and pools below min, then buys burst capacity
// for the demand forecast one lead time ahead, cheapest pool first.
func (p *planner) launch() {
	for _, pp := range p.pools {
		if pp.status.NeverRead() {
			p.note(fmt.Sprintf("nothing is launched: pool %s has never been read (%s), so the fleet's size, and its limits, are unknown", pp.spec.Name, pp.status.Unobserved.String()))
			return
		}
	}
	order := p.launchOrder()
	for _, pp := range order {
		want := max(pp.spec.Min-pp.active, 0)
		why := fmt.Sprintf("pool is below its min of %d (%d active)", pp.spec.Min, pp.active)
		if r := pp.spec.Max - pp.size; pp.spec.Capacity == fleet.Reserved && r > 0 && r >= want {
			want = r
			why = fmt.Sprintf("keep the reserved baseline full: the reservation of %d nodes is paid whether used or not (%d in the pool)", pp.spec.Max, pp.size)
		}
		if want > 0 {
			p.launchIn(pp, want, why, why)
		}
	}
	for _, pp := range order {
		if pp.spec.Capacity == fleet.Reserved {
			continue
		}
		at := p.now.Add(pp.spec.LeadTime)
		need, src := p.needAt(at)
		have := p.have(at)
		gap := need - have
		if gap <= 0 {
			continue
		}
		gpn := pp.spec.GPUsPerNode
		var why string
		if src == "forecast" {
			why = fmt.Sprintf("forecast %s needs %d GPUs at %s, lead time %s; have %d", pct(p.q), need, clock(at), age(pp.spec.LeadTime), have)
		} else {
			why = fmt.Sprintf("%d GPUs in use or pending now (%d pending); have %d", need, p.plan.Demand.PendingGPUs, have)
		}
		p.launchIn(pp, (gap+gpn-1)/gpn, fmt.Sprintf("%d GPUs needed at %s", gap, clock(at)), why)
	}
	// What no pool could buy, at the worst moment.
	short, shortAt := 0, time.Time{}
	for _, pp := range order {
		at := p.now.Add(pp.spec.LeadTime)
		need, _ := p.needAt(at)
		if gap := need - p.have(at); gap > short {
			short, shortAt = gap, at
		}
	}
	if short > 0 {
		p.note(fmt.Sprintf("%d GPUs needed at %s cannot be bought: every pool that could serve is at its max, backed off or over a limit", short, clock(shortAt)))
	}
}

// launchIn adds a launch of up to n nodes to pp, within its max and the
// fleet's limits, and returns how many it launched. purpose says what the
// nodes are for, in notes; why is the action's reason.
func (p *planner) launchIn(pp *poolPlan, n int, purpose, why string) int {
	spec := pp.spec
	if skip := p.unavailable(pp); skip != "" {
		p.note(fmt.Sprintf("skipped pool %s for %s: %s", spec.Name, purpose, skip))
		return 0
	}
	limit := fmt.Sprintf("its max of %d", spec.Max)
	room, fleetLimit := spec.Max-pp.size, ""
	if m := p.cfg.Limits.MaxGPUs; m > 0 && (m-p.fleetGPUs)/spec.GPUsPerNode < room {
		room, limit, fleetLimit = (m-p.fleetGPUs)/spec.GPUsPerNode, fmt.Sprintf("limits.max_gpus (%d)", m), "limits.max_gpus"
	}
	if m := p.cfg.Limits.MaxSpendPerHour; m > 0 && spec.Capacity != fleet.Reserved && spec.PricePerHour > 0 {
		if r := int(math.Floor((m - p.spend) / spec.PricePerHour)); r < room {
			room, limit, fleetLimit = r, fmt.Sprintf("limits.max_spend_per_hour ($%.2f)", m), "limits.max_spend_per_hour"
		}
	}
	got := min(n, max(room, 0))
	if got < n {
		p.note(fmt.Sprintf("pool %s: launching %d of %d node(s) wanted, held by %s", spec.Name, got, n, limit))
		if fleetLimit != "" {
			p.plan.LimitedBy = fleetLimit
		}
	}
	if got == 0 {
		return 0
	}
	pp.size += got
	pp.active += got
	gpus := got * spec.GPUsPerNode
	p.launches = append(p.launches, launched{ready: p.now.Add(spec.LeadTime), gpus: gpus})
	p.fleetGPUs += gpus
	p.spend += pp.cost(pp.billed+got) - pp.cost(pp.billed)
	pp.billed += got
	p.add(Action{Kind: Launch, Pool: spec.Name, Count: got, InstanceType: spec.InstanceType, GPUs: gpus, Reason: why})
	return got
}

// unavailable says why no node can be launched in pp now; "" if one can.
func (p *planner) unavailable(pp *poolPlan) string {
	switch {
	case pp.status.IsUnobserved():
		return unobserved(pp)
	case pp.failing:
		return "a node of the pool missed its provisioning deadline this cycle"
	case p.now.Before(pp.status.BackoffUntil):
		r := "backed off until " + clock(pp.status.BackoffUntil)
		if pp.status.BackoffReason != "" {
			r += " after " + pp.status.BackoffReason
		}
		return r
	case pp.size >= pp.spec.Max:
		return fmt.Sprintf("it is at its max of %d", pp.spec.Max)
	}
	return ""
}

// unobserved says why nothing is changed in a pool whose group could not be
// read this cycle.
func unobserved(pp *poolPlan) string {
	return "its group could not be read (" + pp.status.Unobserved.String() + "), so nothing in it is changed"
}

// launchOrder is reserved pools first, then cheapest per GPU-hour, higher
// priority, then name.
func (p *planner) launchOrder() []*poolPlan {
	out := slices.Clone(p.pools)
	slices.SortStableFunc(out, func(a, b *poolPlan) int { return fleet.CompareForLaunch(a.spec, b.spec) })
	return out
}

// scaleIn drains what the forecast says will not be needed within the
// longest burst lead time plus the hysteresis (so nothing drained now has to
// be bought back before it could arrive, from whichever pool): most expensive
// pools first, idle nodes first, then nodes whose jobs checkpointed most
// recently. Capacity on silent nodes is not counted on, and reserved pools
// are never scaled in: they are paid for anyway.
func (p *planner) scaleIn() {
	lim := p.cfg.Limits
	readyNodes, silent := 0, 0
	for _, pp := range p.pools {
		readyNodes += len(pp.candidates)
		for _, c := range pp.candidates {
			if c.silentFor > 0 {
				silent++
			}
		}
	}
	if readyNodes > 0 && float64(silent) > lim.SilentShareHalt*float64(readyNodes) {
		p.plan.ScaleInHalt = fmt.Sprintf("%d of %d nodes have silent agents (more than %s of them): a network fault, not idleness",
			silent, readyNodes, share(lim.SilentShareHalt))
		p.note("scale-in halted: " + p.plan.ScaleInHalt)
		return
	}
	avail := p.supply - p.silentGPUs
	budget := &p.scaleInLeft
	order := p.launchOrder()
	slices.Reverse(order)
	// Pools above their max first (after max was lowered, or a reservation
	// shrank): brought back to it by safe drains, whatever the forecast.
	for _, pp := range order {
		floor := max(pp.spec.Max, pp.spec.Min, pp.status.MinNodes)
		if pp.active > floor && len(pp.candidates) > 0 {
			why := fmt.Sprintf("pool is above its max of %d (%d active)", pp.spec.Max, pp.active)
			back := func() string { return fmt.Sprintf("brought back to %d", floor) }
			if !p.drainPool(pp, budget, &avail, why, func(*poolPlan) bool { return pp.active > floor }, back) {
				return
			}
		}
	}
	until := p.now.Add(p.window)
	keep, src := p.needOver(p.now, until)
	for _, pp := range order {
		if pp.spec.Capacity == fleet.Reserved {
			continue
		}
		gpn := pp.spec.GPUsPerNode
		floor := max(pp.spec.Min, pp.status.MinNodes)
		more := func(pp *poolPlan) bool { return avail-keep >= gpn && pp.active > floor }
		if !more(pp) || len(pp.candidates) == 0 {
			continue
		}
		why := func() string { return fmt.Sprintf("%s, fleet has %d", keepReason(src, p.q, keep, until), avail) }
		if !p.drainPool(pp, budget, &avail, "", more, why) {
			return
		}
	}
}

// drainPool drains the pool's ready nodes while more says the pool should
// lose another, within the cycle's budget (limits.max_scale_in_per_cycle,
// counted down) and the pool's (limits.scale_in_share per
// limits.scale_in_window): idle nodes first, then those whose jobs
// checkpointed most recently; silent and blocked nodes are held, with the
// reason. avail, the capacity scale-in counts on, is counted down by each
// drain. prefix starts each drain's reason (why the pool is scaled in, if
// not for demand) and suffix ends it. It returns false when the cycle's
// budget is spent.
func (p *planner) drainPool(pp *poolPlan, budget, avail *int, prefix string, more func(*poolPlan) bool, suffix func() string) bool {
	lim := p.cfg.Limits
	gpn := pp.spec.GPUsPerNode
	if pp.status.IsUnobserved() {
		p.note(fmt.Sprintf("pool %s is not scaled in: %s", pp.spec.Name, unobserved(pp)))
		return true
	}
	size := pp.size - pp.stuck
	left := ScaleInBudget(lim, size) - pp.drainsInWindow
	if left <= 0 {
		p.note(fmt.Sprintf("pool %s is not scaled in: %d drain(s) began within limits.scale_in_window (%s), its budget at limits.scale_in_share (%s of %d nodes)",
			pp.spec.Name, pp.drainsInWindow, age(lim.ScaleInWindow), share(lim.ScaleInShare), size))
		return true
	}
	cands := make([]drainCandidate, 0, len(pp.candidates))
	for _, c := range pp.candidates {
		if !p.decided[c.node.ID] {
			dc := drainCandidate{candidate: c}
			dc.blocker, dc.oldestCheckpoint = p.drainBlocker(c.node)
			cands = append(cands, dc)
		}
	}
	sortCandidates(cands)
	for _, c := range cands {
		if !more(pp) {
			break
		}
		if *budget == 0 {
			p.note(fmt.Sprintf("scale-in stopped at limits.max_scale_in_per_cycle (%d); more may drain next cycle", lim.MaxScaleInPerCycle))
			return false
		}
		if left == 0 && c.silentFor == 0 && c.blocker == "" {
			// Blocked nodes are still listed with their holds.
			p.note(fmt.Sprintf("pool %s: scale-in stopped at its budget of %d drain(s) per %s (limits.scale_in_share: %s of %d nodes); more may drain later",
				pp.spec.Name, ScaleInBudget(lim, size), age(lim.ScaleInWindow), share(lim.ScaleInShare), size))
			continue
		}
		n := c.node
		if prefix != "" {
			// Decided above the max: not listed again for demand.
			p.decided[n.ID] = true
		}
		a := Action{Pool: pp.spec.Name, Node: n.ID, InstanceType: pp.spec.InstanceType, GPUs: gpn}
		switch {
		case c.silentFor > 0:
			a.Kind, a.Reason = Hold, silentReason(n, c.silentFor)
		case c.blocker != "":
			a.Kind, a.Reason = Hold, c.blocker
		default:
			a.Kind = Drain
			if len(n.Jobs) == 0 {
				a.Reason = "idle"
				if !n.IdleSince.IsZero() {
					a.Reason = "idle " + age(p.now.Sub(n.IdleSince))
				}
			} else {
				a.Reason = fmt.Sprintf("%d job(s), oldest checkpoint %s ago", len(n.Jobs), age(p.now.Sub(c.oldestCheckpoint)))
			}
			if prefix != "" {
				a.Reason = prefix + ": " + a.Reason
			}
			a.Reason += "; " + suffix()
			*avail -= gpn
			pp.active--
			pp.drainsInWindow++
			*budget--
			left--
		}
		if a.Kind == Hold && prefix != "" {
			a.Reason = prefix + ", but " + a.Reason
		}
		p.add(a)
	}
	return true
}

// ScaleInBudget is how many of a pool's size nodes may start draining
// within one limits.scale_in_window: the scale_in_share of them, rounded
// down, but at least one (DESIGN.md rule 9).
func ScaleInBudget(lim fleet.Limits, size int) int {
	return max(1, int(math.Floor(lim.ScaleInShare*float64(size)+1e-9)))
}

func silentReason(n *fleet.Node, d time.Duration) string {
	if n.Unknown {
		return "unknown instance (not launched by this controller) whose agent has never reported healthy GPUs; a silent node is never treated as idle"
	}
	return silence(d) + "; a silent node is never treated as idle"
}

// silence describes an agent's silence: "agent silent for 7m" or "agent never reported".
func silence(d time.Duration) string {
	if d == neverReported {
		return "agent never reported"
	}
	return "agent silent for " + age(d)
}

// keepReason says how much capacity scale-in keeps, and why, until a time.
func keepReason(src string, q float64, keep int, until time.Time) string {
	if src == "forecast" {
		return fmt.Sprintf("forecast %s needs at most %d GPUs until %s", pct(q), keep, clock(until))
	}
	return fmt.Sprintf("%d GPUs in use or pending now, forecast %s no higher until %s", keep, pct(q), clock(until))
}

// sortCandidates orders scale-in candidates: drainable before blocked,
// then nodes the cloud recommends moving work off (a rebalance
// recommendation), then idle before busy (longest idle first), then
// freshest oldest checkpoint, then by ID, so the order is total and the
// plan deterministic.
func sortCandidates(cs []drainCandidate) {
	slices.SortFunc(cs, func(a, b drainCandidate) int {
		ab, bb := a.silentFor > 0 || a.blocker != "", b.silentFor > 0 || b.blocker != ""
		if ab != bb {
			if ab {
				return 1
			}
			return -1
		}
		if a.node.Rebalance != b.node.Rebalance {
			if a.node.Rebalance {
				return -1
			}
			return 1
		}
		ai, bi := len(a.node.Jobs) == 0, len(b.node.Jobs) == 0
		if ai != bi {
			if ai {
				return -1
			}
			return 1
		}
		if ai {
			if c := a.node.IdleSince.Compare(b.node.IdleSince); c != 0 {
				return c
			}
		} else if c := b.oldestCheckpoint.Compare(a.oldestCheckpoint); c != 0 {
			return c
		}
		return strings.Compare(a.node.ID, b.node.ID)
	})
}

// costAfter is the cost per hour once the plan has completed: launches
// running, drained and terminated nodes gone.
func (p *planner) costAfter() float64 {
	after := make(map[string]int, len(p.pools))
	for _, pp := range p.pools {
		after[pp.spec.Name] = pp.billed
	}
	for i := range p.plan.Actions {
		switch a := &p.plan.Actions[i]; a.Kind {
		case Drain, Terminate:
			after[a.Pool]--
		}
	}
	total := 0.0
	for _, pp := range p.pools {
		// Launches are in billed already.
		total += pp.cost(max(after[pp.spec.Name], 0))
	}
	return total
}

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

func (p *planner) note(s string) {
	if !p.noted[s] {
		p.noted[s] = true
		p.plan.Notes = append(p.plan.Notes, s)
	}
}

// sortedNodes returns pointers to the nodes ordered by ID, so the plan does
// not depend on the order a provider listed them in.
func sortedNodes(nodes []fleet.Node) []*fleet.Node {
	out := make([]*fleet.Node, len(nodes))
	for i := range nodes {
		out[i] = &nodes[i]
	}
	byID := func(a, b *fleet.Node) int { return strings.Compare(a.ID, b.ID) }
	if !slices.IsSortedFunc(out, byID) {
		slices.SortFunc(out, byID)
	}
	return out
}

// age formats a duration the way a person reads it: 35m, 2h5m, 45s.
func age(d time.Duration) string { return fleet.FormatDuration(d) }

// cents rounds dollars to cents.
func cents(usd float64) float64 { return math.Round(usd*100) / 100 }

// clock formats a time of day in UTC.
func clock(t time.Time) string { return t.UTC().Format("15:04") }

// share formats a share as a percentage: 50%.
func share(x float64) string { return fmt.Sprintf("%g%%", math.Round(x*1000)/10) }

// pct formats a quantile as p90.
func pct(q float64) string { return fmt.Sprintf("p%g", math.Round(q*1000)/10) }
