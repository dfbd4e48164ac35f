package planner

import (
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/fleetcast/autoscaler/fleet"
	"github.com/fleetcast/autoscaler/forecast"
)

// level is what a pool is bought to, or scale-in keeps: for each tier that
// may buy the pool's capacity, the quantile of the tier's cumulative
// forecast its wait value sets (fleet.ForecastSettings.TierQuantile), so
// that a lower tier is planned on what the higher tiers leave; the level
// is the highest of them. Without tiers, one entry (tier -1): the pool's
// quantile of the whole forecast (fleet.ForecastSettings.QuantileFor).
type level []tierLevel

// tierLevel is one tier's part of a level: tier indexes the settings'
// tiers (-1: none), q is its quantile.
type tierLevel struct {
	tier int
	q    float64
}

// top is the level's highest quantile (0 for none): what the plan's text
// names.
func (lv level) top() float64 {
	q := 0.0
	for _, e := range lv {
		q = max(q, e.q)
	}
	return q
}

// poolLevel is the level pool p is bought to.
func (p *planner) poolLevel(s *fleet.Pool) level {
	if len(p.cfg.Tiers) == 0 {
		return level{{tier: -1, q: p.cfg.Forecast.QuantileFor(s)}}
	}
	var lv level
	for k := range p.cfg.Tiers {
		if q := p.cfg.Forecast.TierQuantile(&p.cfg.Tiers[k], s); q > 0 {
			lv = append(lv, tierLevel{tier: k, q: q})
		}
	}
	return lv
}

// keepLevel is what scale-in keeps: for each tier, the highest of its
// quantiles over the burst pools whose clouds do not refuse them (over all
// the burst pools when every one is refused), as keepQuantile chooses
// without tiers.
func (p *planner) keepLevel() level {
	if len(p.cfg.Tiers) == 0 {
		return level{{tier: -1, q: p.keepQuantile()}}
	}
	open, all := make([]float64, len(p.cfg.Tiers)), make([]float64, len(p.cfg.Tiers))
	anyOpen := false
	for _, pp := range p.pools {
		if pp.spec.Capacity == fleet.Reserved {
			continue
		}
		refused := p.refusing(pp)
		anyOpen = anyOpen || !refused
		for _, e := range pp.level {
			all[e.tier] = max(all[e.tier], e.q)
			if !refused {
				open[e.tier] = max(open[e.tier], e.q)
			}
		}
	}
	if !anyOpen {
		open = all
	}
	var lv level
	for k, q := range open {
		if q > 0 {
			lv = append(lv, tierLevel{tier: k, q: q})
		}
	}
	return lv
}

// capped is lv with each tier's quantile at most keep's for that tier (a
// tier keep does not hold is dropped): a refused pool's shortfall counted
// no higher than scale-in keeps.
func (lv level) capped(keep level) level {
	var out level
	for _, e := range lv {
		for _, k := range keep {
			if k.tier == e.tier {
				out = append(out, tierLevel{tier: e.tier, q: min(e.q, k.q)})
			}
		}
	}
	return out
}

// forecastOf is the forecast tier k's level reads: its cumulative
// forecast (Input.TierForecasts) when the input has a usable one, else
// the whole demand's (the last tier's, and the one without tiers).
func (p *planner) forecastOf(k int) *forecast.Forecast {
	if k >= 0 && k < len(p.tierFc) && p.tierFc[k] != nil {
		return p.tierFc[k]
	}
	return p.fc
}

// valueAt is the forecast's value for the level at t: the highest of its
// tiers' (0 without a forecast), each with the GPUs the lower tiers'
// jobs hold now on top (heldBelow).
func (p *planner) valueAt(lv level, t time.Time) float64 {
	v := 0.0
	for _, e := range lv {
		if f := p.forecastOf(e.tier); f != nil {
			v = max(v, f.At(e.q, t)+p.below(e.tier))
		}
	}
	return v
}

// valueMax is the most the forecast reaches for the level in [from, to].
func (p *planner) valueMax(lv level, from, to time.Time) float64 {
	v := 0.0
	for _, e := range lv {
		if f := p.forecastOf(e.tier); f != nil {
			v = max(v, f.Max(e.q, from, to)+p.below(e.tier))
		}
	}
	return v
}

// below is heldBelow's value for tier k: 0 for none, and for a tier that
// reads the whole forecast (forecastOf), which counts the lower tiers'
// demand already.
func (p *planner) below(k int) float64 {
	if k < 0 || k >= len(p.heldBelow) || k >= len(p.tierFc) || p.tierFc[k] == nil {
		return 0
	}
	return float64(p.heldBelow[k])
}

// needIn is what launch buys a pool of level lv for at at (needAt), and
// the capacity there will be then that serves it (have). With tiers, each
// tier of the level is weighed apart: its forecast (with what the lower
// tiers hold) or its and the higher tiers' pending GPUs, against the
// capacity it may run on; the tier short of the most sets the need.
func (p *planner) needIn(t *tally, lv level, at time.Time) (need int, src Reason, have int, by tierLevel) {
	all := p.have(t, at)
	if len(p.cfg.Tiers) == 0 {
		need, src = p.needAt(lv, at)
		return max(need-p.scopedPending, 0), src, all, tierLevel{tier: -1, q: lv.top()}
	}
	gap := math.MinInt
	for i, e := range lv {
		up := lv[:i+1] // the level's tiers down to e's (by rank)
		n, s := p.need(up, p.valueAt(level{e}, at), at, at, min(p.endingFor(at), max(p.pendingFor(up)-p.scopedFor(up), 0)))
		n = max(n-p.scopedFor(up), 0) // served apart
		h := all - p.foreign(t, at, level{e})
		if n-h > gap {
			gap, need, src, have, by = n-h, n, s, h, e
		}
	}
	return need, src, have, by
}

// forecastText names the forecast a tier's level reads, as the plan's
// words say it: "forecast p99" without tiers (or for a tier that reads the
// whole forecast), else the tier's, with the higher tiers' demand in it.
func (p *planner) forecastText(e tierLevel) string {
	if e.tier < 0 || e.tier >= len(p.cfg.Tiers) || p.forecastOf(e.tier) == p.fc {
		return "forecast " + pct(e.q)
	}
	name := p.cfg.Tiers[e.tier].Name
	if e.tier == 0 {
		return fmt.Sprintf("tier %s's forecast %s", name, pct(e.q))
	}
	return fmt.Sprintf("tier %s's forecast %s (with the tiers above)", name, pct(e.q))
}

// covers reports whether every tier of level o has a part in lv: capacity
// bought at lv serves o's tiers.
func (lv level) covers(o level) bool {
	for _, e := range o {
		if !slices.ContainsFunc(lv, func(x tierLevel) bool { return x.tier == e.tier }) {
			return false
		}
	}
	return true
}

// foreign is, with tiers, the part of have (at at) in pools no tier of lv
// runs on (fleet.Tier.Buys: its capacity types): capacity its tiers' jobs cannot use.
func (p *planner) foreign(t *tally, at time.Time, lv level) int {
	if len(p.cfg.Tiers) == 0 {
		return 0
	}
	runs := func(pp *poolPlan) bool {
		for _, e := range lv {
			if e.tier >= 0 && p.cfg.Tiers[e.tier].Buys(pp.spec.Capacity) {
				return true
			}
		}
		return false
	}
	n := 0
	for _, pp := range p.pools {
		if !runs(pp) {
			n += max(pp.supply-pp.claimedSupply, 0)
		}
	}
	for _, l := range t.launches {
		if !l.ready.After(at.Add(p.cfg.Forecast.Step)) && !runs(l.pool) {
			n += l.gpus - l.scoped
		}
	}
	return n
}

// countTiers counts, with tiers, the GPUs pending for each tier
// (fleet.PendingByTier), and the GPUs the running jobs of the tiers below
// each tier hold on capacity it may run on (heldBelow), and of the
// preemptible tiers (preemptible):
// a scheduler starts a higher tier's job first but does not stop a lower
// tier's running one for it unless that tier is preemptible, so the GPUs
// a tier can count on are those the lower tiers' jobs do not hold; a
// preemptible tier's jobs (its waiting is worth nothing: a best-effort
// tier) leave for the others', so their GPUs count as free.
func (p *planner) countTiers() {
	tiers := p.cfg.Tiers
	p.pendingTier = fleet.PendingByTier(p.in.State, tiers)
	if len(tiers) == 0 {
		return
	}
	running := make([]int, len(tiers))
	// on[k][c] is what tier k's jobs hold on capacity type c (capacityTypes).
	on := make([][3]int, len(tiers))
	for i := range p.in.State.Nodes {
		n := &p.in.State.Nodes[i]
		if n.State == fleet.Terminating {
			continue
		}
		pp := p.byName[n.Pool]
		if pp == nil {
			continue // as observe: a pool the config does not have
		}
		// Each node's jobs at most its GPUs, as observe counts them.
		held, left := 0, pp.spec.GPUsPerNode
		for j := range n.Jobs {
			k := fleet.TierIndex(tiers, n.Jobs[j].Tier)
			g := min(n.Holds(j), left)
			left -= g
			running[k] += g
			c := slices.Index(capacityTypes, pp.spec.Capacity)
			if c < 0 {
				c = 1 // none said: on demand
			}
			on[k][c] += g
			if !Preemptible(&tiers[k]) {
				held += g
			}
		}
		// A node's free GPUs are fragments (FragmentGPUs) when jobs
		// that stay hold some of it: a preemptible job's GPUs are free.
		if held > 0 && n.State == fleet.Ready && !interrupted(n, p.now) {
			p.fragments += pp.spec.GPUsPerNode - held
		}
	}
	// What the lower tiers hold counts against a tier only on capacity
	// it may run on.
	p.heldBelow = make([]int, len(tiers))
	var held [3]int
	for k := len(tiers) - 1; k >= 0; k-- {
		for c, kind := range capacityTypes {
			if tiers[k].Buys(kind) {
				p.heldBelow[k] += held[c]
			}
		}
		if Preemptible(&tiers[k]) {
			p.preemptible += running[k]
			continue
		}
		for c := range held {
			held[c] += on[k][c]
		}
	}
}

// capacityTypes are the capacity types, in the order countTiers counts
// them.
var capacityTypes = []fleet.CapacityType{fleet.Reserved, fleet.OnDemand, fleet.Spot}

// Preemptible reports whether tier t's jobs leave for the other tiers':
// its waiting is worth nothing (a best-effort tier). The planner counts
// the GPUs they hold as free, and a scheduler should preempt them (the
// simulated one does: checkpoint, then requeue).
func Preemptible(t *fleet.Tier) bool { return !(t.WaitValuePerGPUHour > 0) }

// strandedFor is stranded for level lv: with tiers, the free GPUs of the
// nodes that jobs that stay hold some of (countTiers), while GPUs of the
// level's tiers are pending.
func (p *planner) strandedFor(lv level) int {
	if len(p.cfg.Tiers) == 0 {
		return p.stranded()
	}
	if p.pendingFor(lv) > 0 {
		return p.fragments
	}
	return 0
}

// pendingFor is the pending GPUs a level provisions for now: all of them
// without tiers; with tiers, those of the tiers in the level (a tier that
// may not buy the pool's capacity, or whose waiting is worth nothing,
// buys nothing for its pending jobs there).
func (p *planner) pendingFor(lv level) int {
	if len(p.cfg.Tiers) == 0 {
		return p.plan.Demand.PendingGPUs
	}
	n := 0
	for _, e := range lv {
		if e.tier >= 0 && e.tier < len(p.pendingTier) {
			n += p.pendingTier[e.tier]
		}
	}
	return n
}

// sanitizeTierForecasts cleans each tier's cumulative forecast as the
// whole forecast is cleaned (cleanForecast), without notes of its own: a
// malformed or absurd one is dropped and its tier reads the whole
// forecast (a level no lower than its own). None unless the input has one
// for each tier but the last.
func (p *planner) sanitizeTierForecasts() {
	in := p.in.TierForecasts
	if len(p.cfg.Tiers) < 2 || len(in) != len(p.cfg.Tiers)-1 || p.fc == nil {
		return
	}
	p.tierFc = make([]*forecast.Forecast, len(in))
	for k := range in {
		if f, ok := p.cleanForecast(in[k]); ok {
			p.tierFc[k] = &f
		}
	}
}

// yieldingOn is the GPUs the jobs of preemptible tiers hold on node n, of
// gpn GPUs, its jobs counted in order to at most its GPUs (as observe
// counts what they hold); none without tiers.
func (p *planner) yieldingOn(n *fleet.Node, gpn int) int {
	if len(p.cfg.Tiers) == 0 {
		return 0
	}
	preemptible := func(j *fleet.Job) bool { return Preemptible(&p.cfg.Tiers[fleet.TierIndex(p.cfg.Tiers, j.Tier)]) }
	y, left := 0, gpn
	for i := range n.Jobs {
		j := &n.Jobs[i]
		g := min(n.Holds(i), left) // a shared GPU counted at its first share
		left -= g
		// A share's leaving frees no GPU while another share holds it:
		// a shared GPU yields only if all its shares do.
		if preemptible(j) && (j.GPUMilli == 0 || !slices.ContainsFunc(n.Jobs, func(k fleet.Job) bool {
			return k.GPUMilli > 0 && k.SharedGPU == j.SharedGPU && !preemptible(&k)
		})) {
			y += g
		}
	}
	return y
}

// onlyPreemptible reports whether every job on busy node n is of a
// preemptible tier (none without tiers): scale-in drains such a node
// before the other busy ones.
func (p *planner) onlyPreemptible(n *fleet.Node) bool {
	if len(p.cfg.Tiers) == 0 || len(n.Jobs) == 0 {
		return false
	}
	for i := range n.Jobs {
		if !Preemptible(&p.cfg.Tiers[fleet.TierIndex(p.cfg.Tiers, n.Jobs[i].Tier)]) {
			return false
		}
	}
	return true
}
