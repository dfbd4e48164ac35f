package planner

import (
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/fleetcast/autoscaler/config"
	"github.com/fleetcast/autoscaler/fleet"
	"github.com/fleetcast/autoscaler/forecast"
)

// Input is everything one planning cycle looks at.
type Input struct {
	Config *config.Config
	State  *fleet.State
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
	// failing is set when a node of the pool missed its provisioning deadline.
	failing bool
	// candidates are ready nodes that scale-in may remove.
	candidates []candidate
}

// candidate is a ready node with what scale-in needs to know about it.
type candidate struct {
	node *fleet.Node
	// silentFor > 0 means the agent is silent.
	silentFor time.Duration
	// blocker is why the node cannot be drained now; "" if it can.
	blocker string
	// oldestCheckpoint is the oldest "last checkpoint" among its jobs.
	oldestCheckpoint time.Time
}

// planner holds one cycle's working state.
type planner struct {
	in     Input
	cfg    *config.Config
	now    time.Time
	q      float64
	pools  []*poolPlan
	byName map[string]*poolPlan
	plan   Plan
	// supply counts GPUs that serve demand: ready nodes, launching nodes
	// within their deadline, and drains cancelled by this plan.
	supply int
	// fleetGPUs and spend are the fleet's GPUs and marginal spend per hour
	// (reserved nodes cost nothing at the margin) including this plan's launches.
	fleetGPUs int
	spend     float64
	// fc is the sanitized forecast; nil when there is none.
	fc *forecast.Forecast
	// planned counts the GPUs this plan launches.
	planned int
	noted   map[string]bool
}

// Make plans one cycle. It never fails: problems in its input (a bad
// forecast, an unknown pool) become notes, and the plan stays safe.
func Make(in Input) Plan {
	p := &planner{
		in:     in,
		cfg:    in.Config,
		now:    in.Now,
		q:      in.Config.Forecast.Quantile,
		byName: make(map[string]*poolPlan, len(in.Config.Pools)),
		noted:  map[string]bool{},
	}
	p.plan = Plan{At: in.Now, Quantile: p.q}
	for i := range in.Config.Pools {
		pp := &poolPlan{spec: &in.Config.Pools[i], status: fleet.PoolStatus{Name: in.Config.Pools[i].Name}}
		p.pools = append(p.pools, pp)
		p.byName[pp.spec.Name] = pp
	}
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
	p.plan.CostPerHourAfter = p.costAfter()
	p.plan.Baseline = RecommendBaseline(in.State.History, in.Config.Pools)
	return p.plan
}

// observe walks the nodes once: counts capacity and demand, settles drains
// and deadlines, and collects scale-in candidates.
func (p *planner) observe() {
	dr := p.cfg.Drain
	nodes := sortedNodes(p.in.State.Nodes)
	for _, pp := range p.pools {
		if pp.spec.Capacity == fleet.Reserved {
			p.plan.CostPerHourBefore += float64(pp.spec.Max) * pp.spec.PricePerHour
		}
	}
	for _, n := range nodes {
		pp := p.byName[n.Pool]
		if pp == nil {
			p.note(fmt.Sprintf("node %s names pool %q, which the config does not have; left alone", n.ID, n.Pool))
			continue
		}
		gpn := pp.spec.GPUsPerNode
		used := n.UsedGPUs()
		silent := p.silentFor(n)
		if n.State == fleet.Terminating {
			continue
		}
		if pp.spec.Capacity != fleet.Reserved {
			p.plan.CostPerHourBefore += pp.spec.PricePerHour
		}
		switch n.State {
		case fleet.Pending:
			deadline := n.LaunchedAt.Add(pp.spec.ProvisionTimeout)
			if p.now.After(deadline) && len(n.Jobs) == 0 {
				pp.failing = true
				p.add(Action{Kind: Terminate, Pool: pp.spec.Name, Node: n.ID, BackOff: true,
					Reason: fmt.Sprintf("launched %s ago and not ready by its provisioning deadline (%s); pool backed off",
						age(p.now.Sub(n.LaunchedAt)), age(pp.spec.ProvisionTimeout))})
				continue
			}
			p.plan.Capacity.LaunchingGPUs += gpn
			p.supply += gpn
			pp.active++
		case fleet.Ready:
			p.plan.Capacity.ReadyGPUs += gpn
			p.supply += gpn
			pp.active++
			c := candidate{node: n, silentFor: silent}
			c.blocker, c.oldestCheckpoint = p.drainBlocker(n)
			pp.candidates = append(pp.candidates, c)
		case fleet.Draining:
			p.plan.Capacity.DrainingGPUs += gpn
			p.settleDrain(pp, n, silent, dr)
		}
		if silent > 0 && (n.State == fleet.Ready || n.State == fleet.Draining) {
			p.plan.Capacity.SilentNodes++
		}
		pp.size++
		if n.State != fleet.Pending {
			p.plan.Demand.RunningGPUs += used
		}
		p.fleetGPUs += gpn
		if pp.spec.Capacity != fleet.Reserved {
			p.spend += pp.spec.PricePerHour
		}
	}
}

// settleDrain decides what happens to a draining node: terminate it once
// every job checkpointed since the drain began (or exited), cancel the drain
// after the timeout, or hold it.
func (p *planner) settleDrain(pp *poolPlan, n *fleet.Node, silent time.Duration, dr config.Drain) {
	base := Action{Pool: pp.spec.Name, Node: n.ID, InstanceType: pp.spec.InstanceType, GPUs: pp.spec.GPUsPerNode}
	waiting := ""
	for i := range n.Jobs {
		j := &n.Jobs[i]
		if j.LastCheckpoint.Before(n.DrainStartedAt) {
			waiting = j.ID
			break
		}
	}
	since := p.now.Sub(n.DrainStartedAt)
	switch {
	case silent > 0:
		// A silent agent cannot confirm checkpoints: the node is kept
		// whatever its last report said.
		base.Kind, base.Reason = Hold, fmt.Sprintf("draining for %s but %s; cannot confirm its jobs checkpointed", age(since), silence(silent))
		if since > dr.Timeout {
			base.Kind, base.Reason = CancelDrain, fmt.Sprintf("drain timed out after %s (%s); node kept", age(since), silence(silent))
		}
	case waiting == "":
		base.Kind = Terminate
		if len(n.Jobs) == 0 {
			base.Reason = fmt.Sprintf("drained: no jobs left (draining for %s)", age(since))
		} else {
			base.Reason = fmt.Sprintf("drained: all %d job(s) checkpointed since the drain began %s ago", len(n.Jobs), age(since))
		}
	case since > dr.Timeout:
		base.Kind, base.Reason = CancelDrain, fmt.Sprintf("drain timed out after %s: job %s has not checkpointed; node kept", age(since), waiting)
	default:
		base.Kind, base.Reason = Hold, fmt.Sprintf("draining for %s: waiting for job %s to checkpoint (timeout in %s)", age(since), waiting, age(dr.Timeout-since))
	}
	if base.Kind == CancelDrain {
		// The node returns to service and serves demand again.
		p.supply += pp.spec.GPUsPerNode
		pp.active++
	}
	p.add(base)
}

// drainBlocker says why a ready node cannot be drained now ("" if it can),
// and returns the oldest last-checkpoint among its jobs.
func (p *planner) drainBlocker(n *fleet.Node) (string, time.Time) {
	maxAge := p.cfg.Drain.CheckpointMaxAge
	var oldest time.Time
	blocker := ""
	for i := range n.Jobs {
		j := &n.Jobs[i]
		if i == 0 || j.LastCheckpoint.Before(oldest) {
			oldest = j.LastCheckpoint
		}
		if blocker != "" {
			continue
		}
		kind := "job"
		if j.LongRunning || p.now.Sub(j.Start) >= p.cfg.Drain.LongRunningAfter {
			kind = "long-running job"
		}
		switch {
		case j.LastCheckpoint.IsZero():
			blocker = fmt.Sprintf("%s %s has never checkpointed (started %s ago)", kind, j.ID, age(p.now.Sub(j.Start)))
		case p.now.Sub(j.LastCheckpoint) > maxAge:
			blocker = fmt.Sprintf("%s %s last checkpoint %s ago > %s", kind, j.ID, age(p.now.Sub(j.LastCheckpoint)), age(maxAge))
		}
	}
	return blocker, oldest
}

// silentFor returns how long a ready or draining node's agent has been
// silent, if longer than the agent timeout; 0 if it is not silent. A node
// whose agent never reported is silent for ever (neverReported).
func (p *planner) silentFor(n *fleet.Node) time.Duration {
	if n.State != fleet.Ready && n.State != fleet.Draining {
		return 0
	}
	if n.LastReport.IsZero() {
		return neverReported
	}
	if d := p.now.Sub(n.LastReport); d > p.cfg.Controller.AgentTimeout {
		return d
	}
	return 0
}

// neverReported is the silence of an agent that never reported.
const neverReported = time.Duration(math.MaxInt64)

// sanitizeForecast copies the input forecast with every value that is not a
// number replaced by current demand, negatives raised to 0 and absurd values
// (over ten times what the fleet can hold) lowered to that ceiling, each kind
// noted once (rule 10). Only the clean copy is used and shown.
func (p *planner) sanitizeForecast() {
	in := p.in.Forecast
	if in.Steps() == 0 || len(in.Levels) == 0 || len(in.Values) != len(in.Levels) {
		p.plan.Forecast = forecast.Forecast{}
		p.note("no forecast: planning reactively on current demand only")
		return
	}
	now := float64(p.plan.Demand.Total())
	ceiling := float64(p.cfg.MaxFleetGPUs())
	var nan, neg, huge int
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
			case ceiling > 0 && v > 10*ceiling:
				f.Values[k][h], huge = ceiling, huge+1
			}
		}
	}
	if nan > 0 {
		p.note(fmt.Sprintf("forecast had %d value(s) that are not numbers; replaced with current demand (%.0f GPUs)", nan, now))
	}
	if neg > 0 {
		p.note(fmt.Sprintf("forecast had %d negative value(s); clamped to 0", neg))
	}
	if huge > 0 {
		p.note(fmt.Sprintf("forecast had %d absurd value(s) above ten times what the fleet can hold; clamped to %.0f GPUs", huge, ceiling))
	}
	p.plan.Forecast = f
	p.fc = &p.plan.Forecast
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

// launch fills reserved pools and pools below min, then buys burst capacity
// for the demand forecast one lead time ahead, cheapest pool first.
func (p *planner) launch() {
	order := p.launchOrder()
	for _, pp := range order {
		want := max(pp.spec.Min-pp.active, 0)
		why := fmt.Sprintf("pool is below its min of %d (%d active)", pp.spec.Min, pp.active)
		if pp.spec.Capacity == fleet.Reserved && pp.spec.Max-pp.size >= want && pp.spec.Max > pp.size {
			want = pp.spec.Max - pp.size
			why = fmt.Sprintf("keep the reserved baseline full: the reservation of %d nodes is paid whether used or not (%d in the pool)", pp.spec.Max, pp.size)
		}
		if want > 0 {
			p.launchIn(pp, want, why)
		}
	}
	var short int
	var shortAt time.Time
	for _, pp := range order {
		if pp.spec.Capacity == fleet.Reserved {
			continue
		}
		at := p.now.Add(pp.spec.LeadTime)
		need, src := p.needAt(at)
		have := p.supply + p.planned
		gap := need - have
		if gap <= 0 {
			short = 0
			continue
		}
		short, shortAt = gap, at
		if why := p.unavailable(pp); why != "" {
			p.note(fmt.Sprintf("skipped pool %s for %d GPUs needed at %s: %s", pp.spec.Name, gap, clock(at), why))
			continue
		}
		gpn := pp.spec.GPUsPerNode
		n := (gap + gpn - 1) / gpn
		var why string
		if src == "forecast" {
			why = fmt.Sprintf("forecast %s needs %d GPUs at %s, lead time %s; have %d", pct(p.q), need, clock(at), age(pp.spec.LeadTime), have)
		} else {
			why = fmt.Sprintf("%d GPUs in use or pending now (%d pending); have %d", need, p.plan.Demand.PendingGPUs, have)
		}
		short = max(gap-p.launchIn(pp, n, why)*gpn, 0)
	}
	if short > 0 {
		p.note(fmt.Sprintf("%d GPUs needed by %s cannot be bought: every pool that could serve is at its max, backed off or over a limit", short, clock(shortAt)))
	}
}

// launchIn adds a launch of up to n nodes to pp within its max and the
// fleet's limits, and returns how many it launched.
func (p *planner) launchIn(pp *poolPlan, n int, why string) int {
	spec := pp.spec
	if why2 := p.unavailable(pp); why2 != "" {
		p.note(fmt.Sprintf("pool %s wants %d node(s) (%s) but %s", spec.Name, n, why, why2))
		return 0
	}
	limit := "its max of " + fmt.Sprint(spec.Max)
	room := spec.Max - pp.size
	if m := p.cfg.Limits.MaxGPUs; m > 0 && (m-p.fleetGPUs)/spec.GPUsPerNode < room {
		room, limit = (m-p.fleetGPUs)/spec.GPUsPerNode, fmt.Sprintf("limits.max_gpus (%d)", m)
	}
	if m := p.cfg.Limits.MaxSpendPerHour; m > 0 && spec.Capacity != fleet.Reserved && spec.PricePerHour > 0 {
		if r := int(math.Floor((m - p.spend) / spec.PricePerHour)); r < room {
			room, limit = r, fmt.Sprintf("limits.max_spend_per_hour ($%.2f)", m)
		}
	}
	got := min(n, max(room, 0))
	if got < n {
		p.note(fmt.Sprintf("pool %s: launching %d of %d node(s) wanted, held by %s", spec.Name, got, n, limit))
	}
	if got == 0 {
		return 0
	}
	pp.size += got
	pp.active += got
	p.planned += got * spec.GPUsPerNode
	p.fleetGPUs += got * spec.GPUsPerNode
	if spec.Capacity != fleet.Reserved {
		p.spend += float64(got) * spec.PricePerHour
	}
	p.add(Action{Kind: Launch, Pool: spec.Name, Count: got, InstanceType: spec.InstanceType,
		GPUs: got * spec.GPUsPerNode, Reason: why})
	return got
}

// unavailable says why no node can be launched in pp now; "" if one can.
func (p *planner) unavailable(pp *poolPlan) string {
	switch {
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

// launchOrder is reserved pools first, then cheapest per GPU-hour, higher
// priority, then name.
func (p *planner) launchOrder() []*poolPlan {
	out := slices.Clone(p.pools)
	slices.SortStableFunc(out, func(a, b *poolPlan) int { return fleet.CompareForLaunch(a.spec, b.spec) })
	return out
}

// scaleIn drains what the forecast says will not be needed within each
// pool's lead time plus the hysteresis: most expensive pools first, idle
// nodes first, then nodes whose jobs checkpointed most recently. Reserved
// pools are never scaled in: they are paid for anyway.
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
		p.note(fmt.Sprintf("scale-in halted: %d of %d nodes have silent agents (more than %s): a network fault, not idleness",
			silent, readyNodes, pct(lim.SilentShareHalt)))
		return
	}
	order := p.launchOrder()
	slices.Reverse(order)
	budget := lim.MaxScaleInPerCycle
	for _, pp := range order {
		if pp.spec.Capacity == fleet.Reserved || len(pp.candidates) == 0 {
			continue
		}
		until := p.now.Add(pp.spec.LeadTime + p.cfg.Forecast.Hysteresis)
		keep, src := p.needOver(p.now, until)
		gpn := pp.spec.GPUsPerNode
		if p.supply-keep < gpn {
			continue
		}
		sortCandidates(pp.candidates)
		for _, c := range pp.candidates {
			if p.supply-keep < gpn {
				break
			}
			n := c.node
			if budget == 0 {
				p.note(fmt.Sprintf("scale-in stopped at limits.max_scale_in_per_cycle (%d); more may drain next cycle", lim.MaxScaleInPerCycle))
				return
			}
			if pp.active <= pp.spec.Min {
				break
			}
			base := Action{Pool: pp.spec.Name, Node: n.ID, InstanceType: pp.spec.InstanceType, GPUs: gpn}
			switch {
			case c.silentFor > 0:
				base.Kind, base.Reason = Hold, silentReason(c.silentFor)
			case c.blocker != "":
				base.Kind, base.Reason = Hold, c.blocker
			default:
				base.Kind = Drain
				if len(n.Jobs) == 0 {
					base.Reason = "idle"
					if !n.IdleSince.IsZero() {
						base.Reason = "idle " + age(p.now.Sub(n.IdleSince))
					}
				} else {
					base.Reason = fmt.Sprintf("%d job(s), oldest checkpoint %s ago", len(n.Jobs), age(p.now.Sub(c.oldestCheckpoint)))
				}
				base.Reason += fmt.Sprintf("; %s, fleet has %d", keepReason(src, p.q, keep, until), p.supply)
				p.supply -= gpn
				pp.active--
				budget--
			}
			p.add(base)
		}
	}
}

func silentReason(d time.Duration) string {
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
// idle before busy (longest idle first), then freshest oldest checkpoint,
// then by ID, so the order is total and the plan deterministic.
func sortCandidates(cs []candidate) {
	slices.SortFunc(cs, func(a, b candidate) int {
		ab, bb := a.silentFor > 0 || a.blocker != "", b.silentFor > 0 || b.blocker != ""
		if ab != bb {
			if ab {
				return 1
			}
			return -1
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
	total := p.plan.CostPerHourBefore
	for i := range p.plan.Actions {
		a := &p.plan.Actions[i]
		pp := p.byName[a.Pool]
		if pp.spec.Capacity == fleet.Reserved {
			continue
		}
		switch a.Kind {
		case Launch:
			total += float64(a.Count) * pp.spec.PricePerHour
		case Drain, Terminate:
			total -= pp.spec.PricePerHour
		}
	}
	return math.Max(total, 0)
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
	slices.SortFunc(out, func(a, b *fleet.Node) int { return strings.Compare(a.ID, b.ID) })
	return out
}

// age formats a duration the way a person reads it: 35m, 2h5m, 45s.
func age(d time.Duration) string { return config.FormatDuration(d) }

// clock formats a time of day in UTC.
func clock(t time.Time) string { return t.UTC().Format("15:04") }

// pct formats a quantile as p90.
func pct(q float64) string { return fmt.Sprintf("p%g", math.Round(q*1000)/10) }
