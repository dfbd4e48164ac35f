package planner

import (
	"math"
	"slices"
	"strings"
	"time"

	"github.com/fleetcast/autoscaler/fleet"
)

// observe walks the nodes once: counts capacity, demand and cost (in the
// plan, its pools and t), settles drains and provisioning deadlines, and
// collects scale-in candidates and orphans.
func (p *planner) observe(t *tally) {
	nodes := sortedNodes(p.in.State.Nodes)
	pools := p.poolsOf(nodes)
	for i, n := range nodes {
		pp := pools[i]
		// Stopped by its cloud: no GPUs held, its disks alone billed; it
		// counts against no limit.
		stopped := n.State == fleet.Terminating && n.Stopped
		if pp == nil {
			// In no pool the config has, but paid for until its cloud
			// says it is gone: it counts against the fleet's limits
			// (docs/design.md rule 3), and is never capacity.
			if !stopped {
				p.countOutside(t, n)
			}
			if n.Orphan {
				t.orphans = append(t.orphans, n)
			} else {
				p.note(ReasonUnknownPool, unknownPoolNote(n))
			}
			continue
		}
		if n.State == fleet.Terminating {
			// Going, but paid for until its cloud says it is gone (an ASG
			// lifecycle hook's wait, a MIG instance DELETING): it counts
			// against the pool's max and the fleet's limits until then
			// (docs/design.md rule 3), and is never capacity.
			if stopped {
				continue
			}
			pp.billed++
			pp.terminating++
			pp.countStuck(t)
			continue
		}
		gpn := pp.spec.GPUsPerNode
		silent := p.silentFor(n)
		pp.billed++
		if !(n.Unknown && n.State == fleet.Pending) && !n.LaunchedAt.After(p.now) && n.LaunchedAt.After(pp.lastLaunch) {
			// The latest launch scale-in waits after (scaleInDelay): not
			// an instance this controller did not launch that is not
			// up (a group's placeholder may say it launches now, every
			// cycle), nor a launch time ahead of the clock, which would
			// hold the pool as long as the node lives.
			pp.lastLaunch = n.LaunchedAt
		}
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
				// missing a deadline it was never given (docs/design.md rule 7), and no
				// longer counted on as capacity. It counts against the
				// limits.
				p.add(Action{Kind: Hold, Pool: pp.spec.Name, Node: n.ID, Code: ReasonUnknownNotReady,
					Reason: unknownNotReadyReason(p.now.Sub(n.LaunchedAt))})
				pp.countStuck(t)
				continue
			}
			if failing := n.LaunchFailing != "" && !n.Unknown && len(n.Jobs) == 0; failing && !pp.status.IsUnobserved() {
				// The cloud says it cannot make the node now: not waited
				// for until the deadline. Terminated, so the cloud stops
				// retrying it once the demand has gone elsewhere.
				pp.failing = true
				p.add(Action{Kind: Terminate, Pool: pp.spec.Name, Node: n.ID, BackOff: true, Code: ReasonLaunchFailing,
					Reason: launchFailingReason(p.now.Sub(n.LaunchedAt), n.LaunchFailing)})
				pp.countStuck(t)
				continue
			}
			if p.now.After(deadline) && len(n.Jobs) == 0 {
				if pp.status.IsUnobserved() {
					// Not counted on, and not terminated blind; it still
					// counts against the limits.
					p.add(Action{Kind: Hold, Pool: pp.spec.Name, Node: n.ID, Code: ReasonPoolUnobserved,
						Reason: "past its provisioning deadline, but " + unobserved(pp)})
					pp.size++
					t.fleetGPUs += gpn
					continue
				}
				// Not counted on, but until it is gone it counts against
				// the limits (its termination may fail). Terminated, or
				// held while scale-in is halted (settleOverdue), once the
				// halt is known.
				t.overdue = append(t.overdue, overdue{pp: pp, node: n})
				pp.countStuck(t)
				continue
			}
			p.plan.Capacity.LaunchingGPUs += gpn
			if !n.Unknown {
				pp.booting++
			}
			pp.serve(t, n, p.yieldingOn(n, pp.spec.GPUsPerNode))
		case fleet.Ready:
			if interrupted(n, p.now) {
				// The cloud takes it: not counted on, so its replacement is
				// launched now, ahead of the loss; it counts against the
				// limits until it is gone.
				p.add(Action{Kind: Hold, Pool: pp.spec.Name, Node: n.ID, InstanceType: pp.spec.InstanceType, GPUs: gpn,
					Code: ReasonInterrupted, Reason: interruptedReason(n.InterruptAt)})
				p.plan.Capacity.InterruptedGPUs += gpn
				pp.countStuck(t)
				continue
			}
			p.plan.Capacity.ReadyGPUs += gpn
			y := p.yieldingOn(n, gpn)
			pp.serve(t, n, y)
			// Blockers are found only if scale-in gets to the node.
			c := candidate{node: n, silentFor: silent, slot: -1, yielding: y}
			// A silent node's jobs are as last reported.
			free := gpn - min(n.UsedGPUs(), gpn)
			p.plan.Capacity.FragmentGPUs += FragmentGPUs(n, gpn, p.now)
			if p.plan.Demand.PendingGPUs > 0 {
				// A pending job is one the scheduler could not place:
				// it did not fit in any busy node's free GPUs.
				pp.stranded += strandedGPUs(n, gpn, y, p.now)
			}
			if silent > 0 {
				t.silentGPUs += gpn
				p.plan.Capacity.SilentNodes++
			} else {
				c.slot = t.placement.add(pp, free, gpn)
				if at, ok := expectedEmpty(n, p.now); ok && free < gpn {
					p.ends = append(p.ends, nodeEnd{at: at, gpus: gpn})
				}
			}
			pp.candidates = append(pp.candidates, c)
		case fleet.Draining:
			if p.now.Sub(n.DrainStartedAt) < p.cfg.Limits.ScaleInWindow {
				pp.drainsInWindow++
			}
			p.plan.Capacity.DrainingGPUs += gpn
			if silent > 0 {
				p.plan.Capacity.SilentNodes++
			}
			p.settleDrain(t, pp, n, silent)
		}
		pp.size++
		t.fleetGPUs += gpn
	}
	p.decideHalt()
	for _, o := range t.overdue {
		p.settleOverdue(o.pp, o.node)
	}
	known := 0.0
	for _, pp := range p.pools {
		// Drains recorded by the caller include those still in progress,
		// which were counted from the nodes above.
		recorded := 0
		for _, at := range pp.status.RecentDrains {
			if d := p.now.Sub(at); d >= 0 && d < p.cfg.Limits.ScaleInWindow {
				recorded++
			}
		}
		pp.drainsInWindow = max(pp.drainsInWindow, recorded)
		billed := pp.billed
		known += pp.cost(billed)
		if pp.status.NeverRead() {
			// Its size is unknown: counted at its max against the fleet's
			// limits (docs/design.md rule 3), so that the pools that can be
			// read still serve, within what is left.
			if unknown := pp.spec.Max - pp.size; unknown > 0 {
				t.fleetGPUs = fleet.SatAdd(t.fleetGPUs, fleet.SatMul(unknown, pp.spec.GPUsPerNode))
				billed += unknown
			}
		}
		t.spend += pp.cost(billed)
	}
	// What the fleet is known to cost: a pool never read is counted at its
	// max against the limits only.
	p.plan.CostPerHourBefore = known + t.outsideSpend
	if m := p.cfg.Limits.MaxSpendPerHour; m > 0 && t.spend > m {
		p.note(ReasonMaxSpend, overSpendNote(t.spend, m))
	}
}

// settleOverdue decides what happens to a launch of this controller's
// past its provisioning deadline (docs/design.md rule 7): terminated, and its pool backed
// off; or, if its cloud says it runs (booted) while scale-in is halted or
// within a provisioning deadline of the halt's end, held (docs/design.md rules 9, 1, 5):
// the agents are cut off, not the node, and a scheduler may have put jobs
// on it. It counts against the limits either way (observe).
func (p *planner) settleOverdue(pp *poolPlan, n *fleet.Node) {
	since := p.now.Sub(n.LaunchedAt)
	halted := p.in.State.HaltedAt
	until := halted.Add(pp.spec.ProvisionTimeout)
	if n.Booted && (p.plan.ScaleInHalt != "" || !halted.IsZero() && p.now.Before(until)) {
		p.add(Action{Kind: Hold, Pool: pp.spec.Name, Node: n.ID, Code: ReasonBootedWhileHalted,
			Reason: bootedWhileHaltedReason(since, p.plan.ScaleInHalt, halted, until)})
		pp.holding++
		return
	}
	pp.failing = true
	p.add(Action{Kind: Terminate, Pool: pp.spec.Name, Node: n.ID, BackOff: true, Code: ReasonProvisionTimeout,
		Reason: provisionTimeoutReason(since, pp.spec.ProvisionTimeout)})
}

// settleDrain decides what happens to a draining node: terminate it once
// its agent confirms, for this drain and on its own clock, that every job
// on it checkpointed after the agent received the drain, or exited
// (fleet.Node.DrainConfirmed); cancel the drain after the timeout, the
// node serving demand again (in t); hold it until then. No checkpoint time
// is compared with the drain's start here: they are on two clocks
// (docs/design.md rule 1).
func (p *planner) settleDrain(t *tally, pp *poolPlan, n *fleet.Node, silent time.Duration) {
	a := Action{Pool: pp.spec.Name, Node: n.ID, InstanceType: pp.spec.InstanceType, GPUs: pp.spec.GPUsPerNode}
	since := p.now.Sub(n.DrainStartedAt)
	blocker := unconfirmed(n, silent)
	switch {
	case blocker.none() && pp.status.IsUnobserved():
		a.Kind, a.Code, a.Reason = Hold, ReasonPoolUnobserved, "drained, but "+unobserved(pp)
	case blocker.none() && len(n.Jobs) == 0:
		a.Kind, a.Code, a.Reason = Terminate, ReasonDrainedEmpty, drainedEmptyReason(since)
	case blocker.none():
		a.Kind, a.Code, a.Reason = Terminate, ReasonDrainedCheckpointed, drainedCheckpointedReason(len(n.Jobs), since)
	case since > p.cfg.Drain.Timeout:
		a.Kind, a.Code, a.Reason = CancelDrain, ReasonDrainTimeout, drainTimeoutReason(since, blocker)
		// The node returns to service and serves demand again.
		pp.serve(t, n, p.yieldingOn(n, pp.spec.GPUsPerNode))
		if silent > 0 {
			t.silentGPUs += pp.spec.GPUsPerNode
		}
	default:
		a.Kind, a.Code, a.Reason = Hold, blocker.code, drainWaitReason(since, blocker, p.cfg.Drain.Timeout)
	}
	p.add(a)
}

// unconfirmed says why a draining node may not be terminated yet; none
// once its agent, reporting since the drain began, holds the drain and
// confirms that every job checkpointed after it received it, or exited.
func unconfirmed(n *fleet.Node, silent time.Duration) cause {
	switch {
	case silent > 0:
		return cause{ReasonAgentSilent, silence(silent) + ", so its jobs' checkpoints cannot be confirmed"}
	case n.GPUFault != "":
		// Nobody sees what runs on GPUs that cannot be read, whatever
		// the agent says of its jobs (docs/design.md rules 1 and 2).
		return cause{ReasonGPUFault, drainGPUFaultText(n)}
	case !n.LastReport.After(n.DrainStartedAt):
		return cause{ReasonDrainNoReport, "no agent report since the drain began"}
	case !n.DrainAcked:
		// The cordon: until the agent holds the drain it may still take
		// new work, which the next report would show.
		return cause{ReasonDrainNotAcked, "its agent has not yet confirmed the drain (it may still take new work)"}
	case !n.DrainConfirmed:
		// Naming the job is a hint only, from times on the agent's clock:
		// the agent's confirmation decides.
		if j := worstJob(n.Jobs, func(j *fleet.Job) bool { return !j.LastCheckpoint.After(n.DrainStartedAt) }); j != nil {
			return cause{ReasonDrainNotConfirmed, notConfirmedJobText(j)}
		}
		return cause{ReasonDrainNotConfirmed, "its agent has not yet confirmed that every job checkpointed since the drain reached it"}
	}
	return cause{}
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

// FragmentGPUs is what node n, of gpn GPUs, adds to
// Capacity.FragmentGPUs at now: its free GPUs if it is ready, not being
// taken by its cloud (an interruption notice), and busy (jobs hold some of
// its GPUs, as last reported), else 0. While jobs are pending the planner
// counts them as held (see Plan.Capacity), and so does the demand history
// the controller forecasts from (loop.Demand).
func FragmentGPUs(n *fleet.Node, gpn int, now time.Time) int {
	used := min(n.UsedGPUs(), gpn)
	if n.State != fleet.Ready || used == 0 || interrupted(n, now) {
		return 0
	}
	return gpn - used
}

// strandedGPUs is node n's fragment (FragmentGPUs) as the tiers that are
// not preemptible see it: the preemptible tiers' jobs, which hold yielding
// of its GPUs, leave for theirs (countTiers counts the fleet's so).
func strandedGPUs(n *fleet.Node, gpn, yielding int, now time.Time) int {
	held := min(n.UsedGPUs(), gpn) - yielding
	if n.State != fleet.Ready || held <= 0 || interrupted(n, now) {
		return 0
	}
	return gpn - held
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

// countOutside counts a node of no configured pool (an orphan, a node of
// a pool a snapshot names and the config does not) against the fleet's
// limits: its GPUs as its agent or its old pool's last config says (the
// widest configured pool's when unknown), its price as its old pool's last
// config says (the dearest configured pool's when unknown).
func (p *planner) countOutside(t *tally, n *fleet.Node) {
	gpus, price := n.GPUs, n.PricePerHour
	if gpus <= 0 {
		gpus = p.widest
	}
	if price <= 0 {
		price = p.dearest
	}
	t.fleetGPUs = fleet.SatAdd(t.fleetGPUs, gpus)
	t.spend += price
	t.outsideSpend += price
	if n.State != fleet.Terminating {
		p.outside[n.ID] = price
	}
}

// serve counts a node that serves demand, ready or launching within its
// deadline: its GPUs in the supply, the pool's and the fleet's (t), what
// its jobs hold, and of that what the preemptible tiers' jobs hold
// (yielding, yieldingOn).
func (pp *poolPlan) serve(t *tally, n *fleet.Node, yielding int) {
	gpn := pp.spec.GPUsPerNode
	t.supply += gpn
	pp.supply += gpn
	pp.used += min(n.UsedGPUs(), gpn)
	pp.yielding += yielding
	pp.active++
}

// countStuck counts a live node that serves no demand (past its deadline,
// or under an interruption notice): in the pool's size and the fleet's
// GPUs, so against the limits, but not towards the share of the pool that
// may drain.
func (pp *poolPlan) countStuck(t *tally) {
	pp.size++
	pp.stuck++
	t.fleetGPUs += pp.spec.GPUsPerNode
}
