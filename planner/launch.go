package planner

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/fleetcast/autoscaler/fleet"
)

// launch fills reserved pools and pools below min, serves the demand
// pending for one pool, or a GPU model's, a partition's or a width's
// pools, there, then buys burst capacity for
// the demand forecast one lead time ahead, cheapest pool first, counting
// on the capacity observe found (t.supply) and the launches before each
// (t.launches). A pool never read is left alone, and counted at its max
// against the fleet's limits (observe).
func (p *planner) launch(t *tally) {
	for _, pp := range p.pools {
		if pp.status.NeverRead() {
			p.note(ReasonPoolNeverRead, neverReadNote(pp))
		}
	}
	order := p.launchOrder()
	for _, pp := range order {
		want, code := max(pp.spec.Min-pp.active, 0), ReasonBelowMin
		if r := pp.spec.Max - pp.size; pp.spec.Capacity == fleet.Reserved && r > 0 && r >= want {
			want, code = r, ReasonReservedBaseline
		}
		if want > 0 {
			why := belowMinReason(pp)
			if code == ReasonReservedBaseline {
				why = reservedBaselineReason(pp)
			}
			p.launchIn(t, pp, want, why, code, why)
		}
	}
	p.serveScoped(t, order)
	for _, pp := range order {
		if pp.spec.Capacity == fleet.Reserved {
			continue
		}
		if len(pp.spec.MIG) > 0 {
			continue // bought for lines of MIG instances only (serveMIG)
		}
		at := p.now.Add(pp.spec.LeadTime)
		if p.unavailable(pp).none() && at.After(p.waitUntil) {
			p.waitUntil = at
		}
		if len(p.cfg.Tiers) > 0 && len(pp.level) == 0 {
			continue // no tier may buy the pool's capacity, or any worth it
		}
		need, src, have, by := p.needIn(t, pp.level, at)
		gap := need - have
		if gap <= 0 {
			if e := p.endingFor(at); e > 0 && gap+e > 0 {
				p.note(ReasonExpectedEnds, expectedEndsNote(pp, e, p.endsBy(at)))
			}
			continue
		}
		if pp.left = p.leftToFaster(t, order, pp, gap); pp.left > 0 {
			p.note(ReasonLeftToFaster, leftToFasterNote(pp, pp.left, gap, at))
			if gap -= pp.left; gap <= 0 {
				continue
			}
		}
		gpn := pp.spec.GPUsPerNode
		p.launchIn(t, pp, (gap+gpn-1)/gpn, fmt.Sprintf("%d GPUs needed at %s", gap, clock(at)), src, p.demandReason(src, by, need, at, pp.spec.LeadTime, have))
	}
	// What no pool could buy, at the worst moment.
	short, shortAt := 0, time.Time{}
	for _, pp := range order {
		// A pool refused by its cloud is not counted above the level
		// scale-in keeps (keepQuantile): its shortfall is no one's to buy
		// while it is refused. A reserved pool is bought whole, not to a
		// level of its own.
		lv := pp.level.capped(p.keep)
		if pp.spec.Capacity == fleet.Reserved {
			lv = p.keep
		}
		at := p.now.Add(pp.spec.LeadTime)
		need, _ := p.needAt(lv, at)
		if gap := need - p.scopedFor(lv) - (p.have(t, at) - p.foreign(t, at, lv)) - pp.left; gap > short {
			short, shortAt = gap, at
		}
	}
	if short > 0 {
		p.note(ReasonUnmetDemand, unmetNote(short, shortAt))
	}
}

// leftToFaster is how much of pp's gap, GPUs needed one lead time ahead
// (at) that there will not be, cheaper pools that boot sooner can still
// buy in time, so that pp need not buy it now at its dearer price: each
// of them launches for it when its own lead time reaches at, as its own
// need then says, a cycle or more from now. They are counted on up to
// their max, and a pool its cloud refused since its last launch up to
// what it held since (fleet.PoolStatus.HeldSinceRefusal); a pool that
// cannot launch now is not counted on, nor more than the fleet's limits
// (max_gpus, max_spend_per_hour) leave room for. What they are counted on
// for is added to their deferred nodes, and to the fleet's (t), so that
// no two pools count on the same room. If one is refused when its time
// comes, pp buys the rest then, late by the difference of their lead
// times and however long the refusal takes to show (at a launch, or for
// a launch that never comes up, at its provisioning deadline).
func (p *planner) leftToFaster(t *tally, order []*poolPlan, pp *poolPlan, gap int) int {
	left := 0
	for _, c := range order {
		if left >= gap || c == pp {
			break
		}
		if c.spec.Capacity == fleet.Reserved || len(c.spec.MIG) > 0 || c.spec.LeadTime >= pp.spec.LeadTime ||
			c.spec.PricePerGPUHour() >= pp.spec.PricePerGPUHour() || !p.unavailable(c).none() || !c.level.covers(pp.level) {
			continue
		}
		room := c.spec.Max - c.size
		if c.status.Refused {
			room = min(room, c.status.HeldSinceRefusal-c.size)
		}
		gpn := c.spec.GPUsPerNode
		room -= c.deferred
		if m := p.cfg.Limits.MaxGPUs; m > 0 {
			room = min(room, (m-t.fleetGPUs-t.deferredGPUs)/gpn)
		}
		if m := p.cfg.Limits.MaxSpendPerHour; m > 0 && c.spec.PricePerHour > 0 {
			room = min(room, int(math.Floor((m-t.spend-t.deferredSpend)/c.spec.PricePerHour)))
		}
		n := min(room, (gap-left+gpn-1)/gpn)
		if n <= 0 {
			continue
		}
		c.deferred += n
		t.deferredGPUs += n * gpn
		t.deferredSpend += float64(n) * c.spec.PricePerHour
		left += n * gpn
	}
	return min(left, gap)
}

// serveScoped launches for the demand pending for one pool, or for the
// pools of a GPU model, a partition or a width (fleet.State.Scoped), in
// those pools, cheapest first: free GPUs elsewhere do not serve it. A
// scope every pool serves is the whole fleet's, and left to the
// fleet-wide launches. A scope counts on its pools' free GPUs (capacity
// now and launching, less what their jobs hold) that a scope before it
// has not: with tiers, the higher tiers' first; then pool scopes, then
// the others, those served by fewer pools first (so that a broad scope
// does not take the free GPUs a narrow one has no other place for). The fleet-wide launches that follow
// count these launches as capacity.
func (p *planner) serveScoped(t *tally, order []*poolPlan) {
	scoped := slices.Clone(p.in.State.Scoped)
	served := func(d fleet.ScopedDemand) int {
		n := 0
		for _, pp := range order {
			if d.Serves(pp.spec) {
				n++
			}
		}
		return n
	}
	// With tiers, the higher tiers' lines first: they claim free GPUs
	// before the lower tiers' (a requested node's line before all).
	rank := func(d fleet.ScopedDemand) int {
		if len(p.cfg.Tiers) == 0 || d.Requested {
			return -1
		}
		return fleet.TierIndex(p.cfg.Tiers, d.Tier)
	}
	slices.SortStableFunc(scoped, func(a, b fleet.ScopedDemand) int {
		return cmp.Or(cmp.Compare(rank(a), rank(b)), cmpBool(a.Pool == "", b.Pool == ""), cmp.Compare(served(a), served(b)))
	})
	for _, d := range scoped {
		if d.GPUs <= 0 {
			continue
		}
		if d.ServesAll(p.cfg.Pools) {
			continue // the whole fleet's: the fleet-wide launches serve it
		}
		var tier *fleet.Tier                      // the line's, with tiers
		if len(p.cfg.Tiers) > 0 && !d.Requested { // a requested node is its job's already
			tier = &p.cfg.Tiers[fleet.TierIndex(p.cfg.Tiers, d.Tier)]
			if Preemptible(tier) {
				p.note(ReasonTierNotBought, fmt.Sprintf("%d GPUs pending for %s of tier %s: nothing is bought for a tier whose waiting is worth nothing", d.GPUs, d, tier.Name))
				continue
			}
		}
		if o := p.overTeam(d.Team); o != nil && !d.Requested {
			continue // its pending GPUs are withheld (countBudgets), and noted
		}
		var scope []*poolPlan
		free := 0
		for _, pp := range order {
			if d.Serves(pp.spec) && (tier == nil || tier.Buys(pp.spec.Capacity)) {
				scope = append(scope, pp)
				free += pp.free()
			}
		}
		if len(scope) == 0 && tier != nil {
			// Its jobs run on none of the pools that may be bought
			// for them: not fleet-wide demand either.
			p.servedApart(d, d.GPUs)
			p.note(ReasonTierNotBought, fmt.Sprintf("%d GPUs pending for %s of tier %s: none of its pools is of a capacity type the tier may buy", d.GPUs, d, tier.Name))
			continue
		}
		p.serveScope(t, d, scope, free)
	}
}

// serveScope serves one scope's pending demand in its pools, cheapest
// first: it claims their free GPUs, then launches for the rest. A line of
// whole nodes (fleet.ScopedDemand.Nodes: jobs on several nodes, which
// run on that many nodes whatever their width) counts free GPUs only in
// whole empty nodes, and launches nodes, not GPUs.
func (p *planner) serveScope(t *tally, d fleet.ScopedDemand, scope []*poolPlan, free int) {
	if d.MIG != "" {
		p.serveMIG(t, d, scope, free)
		return
	}
	whole := d.Nodes > 0
	left, what := d.GPUs, "GPUs"
	if whole {
		left, what = d.Nodes, "whole nodes"
	}
	// unit is the GPUs one of left stands for in pp: a GPU, or a node.
	unit := func(pp *poolPlan) int {
		if whole {
			return pp.spec.GPUsPerNode
		}
		return 1
	}
	setAside := 0
	for _, pp := range scope {
		u := unit(pp)
		// The preemptible tiers' jobs leave for it (serveScoped buys
		// nothing for theirs).
		c := min(left, pp.unclaimed()/u) * u
		t.claimFree(pp, c)
		setAside += c
		left -= c / u
		for i := range t.launches {
			if l := &t.launches[i]; l.pool == pp && left > 0 {
				c := min(left, (l.gpus-l.scoped)/u) * u
				l.scoped += c
				pp.claimed += c
				setAside += c
				left -= c / u
			}
		}
	}
	for _, pp := range scope {
		if left <= 0 {
			break
		}
		gpn, u := pp.spec.GPUsPerNode, unit(pp)
		got := p.launchIn(t, pp, (left*u+gpn-1)/gpn, fmt.Sprintf("%d %s pending for %s", left, what, d), ReasonScopedDemand, scopedReason(d, free))
		c := min(left*u, got*gpn)
		if got > 0 {
			t.launches[len(t.launches)-1].scoped = c
		}
		pp.claimed += c
		setAside += c
		left -= c / u
	}
	// What is set aside for the scope, or what it waits for if more: the
	// fleet-wide launches count neither.
	p.servedApart(d, max(d.GPUs, setAside))
	if left > 0 {
		p.note(ReasonUnmetDemand, unmetScopedNote(left, what, d))
	}
}

// unclaimed is the free GPUs of the pool's ready nodes that scoped demand
// has not claimed yet: the GPUs the preemptible tiers' jobs hold count as
// free (serveScoped buys nothing for theirs), the stranded ones do not.
func (pp *poolPlan) unclaimed() int {
	return max(pp.supply-(pp.used-pp.yielding)-pp.stranded-pp.claimedSupply, 0)
}

// claimFree claims c free GPUs of pp for scoped demand, which the
// fleet-wide demand then does not count on again.
func (t *tally) claimFree(pp *poolPlan, c int) {
	pp.claimed += c
	pp.claimedSupply += c
	t.scopedFree += c
}

// serveMIG serves a line of MIG instances (fleet.ScopedDemand.MIG) in its
// pools, cheapest first, each GPU of a pool holding as many instances of
// the profile as its layout has: first on the GPUs the pool set aside for
// other profiles' lines already (a GPU of a mixed layout serves an
// instance of each of its profiles), then on free GPUs, GPUs being
// launched, and new nodes. The fleet-wide demand counts the line's GPUs
// as served apart; the GPUs it takes beyond them are claimed, not served.
func (p *planner) serveMIG(t *tally, d fleet.ScopedDemand, scope []*poolPlan, free int) {
	if len(scope) == 0 {
		p.servedApart(d, d.GPUs)
		p.note(ReasonUnmetDemand, fmt.Sprintf("%d %s instances pending: no pool's MIG layout has the profile, so none is bought for them (a pool serves them once its mig { layout } names it)", d.Instances, d.MIG))
		return
	}
	left := d.Instances
	name := strings.ToLower(d.MIG)
	// take counts up to gpus more GPUs of pp for the line, as many as its
	// instances left need beyond what pp's MIG GPUs hold, and returns them.
	take := func(pp *poolPlan, gpus int) int {
		k := pp.spec.MIGInstances(name)
		if pp.migClaimed == nil {
			pp.migClaimed = map[string]int{}
		}
		// What the GPUs set aside already hold of this profile.
		if spare := pp.migGPUs*k - pp.migClaimed[name]; spare > 0 {
			n := min(left, spare)
			left -= n
			pp.migClaimed[name] += n
		}
		n := min(left, gpus*k)
		left -= n
		pp.migClaimed[name] += n
		g := (n + k - 1) / k
		pp.migGPUs += g
		return g
	}
	for _, pp := range scope {
		if left <= 0 {
			break
		}
		if pp.spec.MIGInstances(name) == 0 {
			continue // not of the scope (Serves): never so
		}
		t.claimFree(pp, take(pp, pp.unclaimed()))
		for i := range t.launches {
			if l := &t.launches[i]; l.pool == pp && left > 0 {
				c := take(pp, l.gpus-l.scoped)
				l.scoped += c
				pp.claimed += c
			}
		}
	}
	for _, pp := range scope {
		if left <= 0 {
			break
		}
		per := pp.spec.GPUsPerNode * pp.spec.MIGInstances(name)
		if per == 0 {
			continue
		}
		got := p.launchIn(t, pp, (left+per-1)/per, fmt.Sprintf("%d %s instances pending for %s", left, d.MIG, d), ReasonScopedDemand,
			fmt.Sprintf("%d instances pending for %s, which has %d GPUs free; only it serves them (%d a node)", d.Instances, d, free, per))
		if got > 0 {
			c := take(pp, got*pp.spec.GPUsPerNode)
			t.launches[len(t.launches)-1].scoped = c
			pp.claimed += c
		}
	}
	p.servedApart(d, d.GPUs)
	if left > 0 {
		p.note(ReasonUnmetDemand, unmetScopedNote(left, d.MIG+" instances", d))
	}
}

// servedApart counts gpus of scoped demand d as served apart from the
// fleet-wide demand (scopedPending), in d's tier with tiers.
func (p *planner) servedApart(d fleet.ScopedDemand, gpus int) {
	p.scopedPending += gpus
	if len(p.cfg.Tiers) > 0 {
		if p.scopedTier == nil {
			p.scopedTier = make([]int, len(p.cfg.Tiers))
		}
		p.scopedTier[fleet.TierIndex(p.cfg.Tiers, d.Tier)] += gpus
	}
}

// scopedFor is the scoped demand served apart (servedApart) of level
// lv's tiers, which their fleet-wide need leaves out: all of it without
// tiers.
func (p *planner) scopedFor(lv level) int {
	if len(p.cfg.Tiers) == 0 {
		return p.scopedPending
	}
	n := 0
	for _, e := range lv {
		if e.tier >= 0 && e.tier < len(p.scopedTier) {
			n += p.scopedTier[e.tier]
		}
	}
	return n
}

// free is the pool's GPUs that pending demand could use: its capacity now
// and launching, less what jobs hold, the free GPUs of busy nodes that no
// pending job fits, and what scoped demand claimed.
func (pp *poolPlan) free() int {
	return max(pp.supply+pp.launched-(pp.used-pp.yielding)-pp.stranded-pp.claimed, 0)
}

// cmpBool orders false before true.
func cmpBool(a, b bool) int {
	switch {
	case a == b:
		return 0
	case a:
		return 1
	}
	return -1
}

// launchIn adds a launch of up to n nodes to pp, within its max and the
// fleet's limits (t.fleetGPUs and t.spend, to which it adds the launch,
// with the room left to cheaper pools that boot sooner: deferredGPUs,
// deferredSpend), and returns how many it launched. purpose says what the nodes are for,
// in notes; code and why are the action's reason.
func (p *planner) launchIn(t *tally, pp *poolPlan, n int, purpose string, code Reason, why string) int {
	spec := pp.spec
	if skip := p.unavailable(pp); !skip.none() {
		p.note(skip.code, fmt.Sprintf("skipped pool %s for %s: %s", spec.Name, purpose, skip.text))
		return 0
	}
	limit := cause{ReasonPoolAtMax, fmt.Sprintf("its max of %d", spec.Max)}
	room, fleetLimit := spec.Max-pp.size, ""
	if m := p.cfg.Limits.MaxGPUs; m > 0 && (m-t.fleetGPUs-t.deferredGPUs)/spec.GPUsPerNode < room {
		room, limit, fleetLimit = (m-t.fleetGPUs-t.deferredGPUs)/spec.GPUsPerNode, cause{ReasonMaxGPUs, fmt.Sprintf("limits.max_gpus (%d)", m)}, "limits.max_gpus"
	}
	if m := p.cfg.Limits.MaxSpendPerHour; m > 0 && spec.Capacity != fleet.Reserved && spec.PricePerHour > 0 {
		if r := int(math.Floor((m - t.spend - t.deferredSpend) / spec.PricePerHour)); r < room {
			room, limit, fleetLimit = r, cause{ReasonMaxSpend, fmt.Sprintf("limits.max_spend_per_hour ($%.2f)", m)}, "limits.max_spend_per_hour"
		}
	}
	got := min(n, max(room, 0))
	if got < n {
		p.note(limit.code, fmt.Sprintf("pool %s: launching %d of %d node(s) wanted, held by %s", spec.Name, got, n, limit.text))
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
	t.launches = append(t.launches, launched{ready: p.now.Add(spec.LeadTime), gpus: gpus, pool: pp})
	t.fleetGPUs += gpus
	t.spend += pp.cost(pp.billed+got) - pp.cost(pp.billed)
	pp.billed += got
	pp.launched += gpus
	p.add(Action{Kind: Launch, Pool: spec.Name, Count: got, InstanceType: spec.InstanceType, GPUs: gpus, Code: code, Reason: why})
	return got
}

// unavailable says why no node can be launched in pp now; none if one can.
func (p *planner) unavailable(pp *poolPlan) cause {
	switch {
	case pp.status.IsUnobserved():
		return cause{ReasonPoolUnobserved, unobserved(pp)}
	case pp.failing:
		return cause{ReasonPoolFailing, "a node of the pool missed its provisioning deadline this cycle, or the cloud is failing to create one"}
	case pp.holding > 0:
		return cause{ReasonBootedWhileHalted, holdingText(pp.holding)}
	case p.now.Before(pp.status.BackoffUntil):
		return cause{ReasonBackedOff, backedOffText(pp.status)}
	case pp.size >= pp.spec.Max:
		return cause{ReasonPoolAtMax, fmt.Sprintf("it is at its max of %d", pp.spec.Max)}
	}
	return cause{}
}

// refusing reports whether pp's cloud keeps it from buying in this plan:
// it is backed off, or failing to create a node (unavailable's causes that
// the cloud sets). A pool at its max is not: a drain of its own nodes
// would let it buy again.
func (p *planner) refusing(pp *poolPlan) bool {
	return pp.failing || p.now.Before(pp.status.BackoffUntil)
}

// launchOrder is reserved pools first, then cheapest per GPU-hour, higher
// priority, then name.
func (p *planner) launchOrder() []*poolPlan {
	out := slices.Clone(p.pools)
	slices.SortStableFunc(out, func(a, b *poolPlan) int { return fleet.CompareForLaunch(a.spec, b.spec) })
	return out
}
