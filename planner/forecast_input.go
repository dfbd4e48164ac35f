package planner

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/fleetcast/autoscaler/fleet"

	"github.com/fleetcast/autoscaler/forecast"
)

// sanitizeForecast checks the input forecast's shape and copies it with
// every value that is not a number replaced by current demand (as observe
// counted it) and negatives raised to 0, each kind noted once (docs/design.md rule 10).
// Only the clean copy is used and shown. A malformed forecast is dropped
// and the plan made on current demand, and so is one with an absurd value
// (over ten times what the fleet can hold): such a forecast carries no
// information, and clamping it would buy the whole fleet.
func (p *planner) sanitizeForecast() {
	in := p.in.Forecast
	if why := malformed(&in); !why.none() {
		p.note(why.code, noForecastNote(why.text))
		return
	}
	if huge, worst, ceiling := p.absurd(&in); huge > 0 {
		p.note(ReasonForecastAbsurd, noForecastNote(fmt.Sprintf("%d absurd value(s), up to %.3g GPUs, above ten times what the fleet can hold, %.0f", huge, worst, ceiling)))
		return
	}
	now := float64(p.plan.Demand.Total())
	f, nan, neg, crossed := cleaned(in, now)
	if crossed > 0 {
		p.note(ReasonForecastCrossing, fmt.Sprintf("forecast had %d value(s) below a lower quantile's; raised to it", crossed))
	}
	if nan > 0 {
		p.note(ReasonForecastNotANumber, fmt.Sprintf("forecast had %d value(s) that are not numbers; replaced with current demand (%.0f GPUs)", nan, now))
	}
	if neg > 0 {
		p.note(ReasonForecastNegative, fmt.Sprintf("forecast had %d negative value(s); clamped to 0", neg))
	}
	if end := p.now.Add(p.window); f.End().Before(end) {
		p.note(ReasonForecastShort, fmt.Sprintf("forecast ends at %s, before %s (longest lead time + hysteresis): its last step stands for the rest", clock(f.End()), clock(end)))
	}
	p.plan.Forecast = &f
	p.fc = &f
}

// cleanForecast is sanitizeForecast's clean copy of in, without its notes;
// false for a forecast it would drop.
func (p *planner) cleanForecast(in forecast.Forecast) (forecast.Forecast, bool) {
	if why := malformed(&in); !why.none() {
		return forecast.Forecast{}, false
	}
	if huge, _, _ := p.absurd(&in); huge > 0 {
		return forecast.Forecast{}, false
	}
	f, _, _, _ := cleaned(in, float64(p.plan.Demand.Total()))
	return f, true
}

// absurd counts the forecast's values over ten times what the fleet can
// hold (ceiling), and the worst of them.
func (p *planner) absurd(in *forecast.Forecast) (huge int, worst, ceiling float64) {
	ceiling = float64(p.cfg.MaxFleetGPUs())
	if ceiling <= 0 {
		return 0, 0, ceiling
	}
	for _, row := range in.Values {
		for _, v := range row {
			if v > 10*ceiling {
				huge, worst = huge+1, max(worst, v)
			}
		}
	}
	return huge, worst, ceiling
}

// cleaned is a copy of in with every value that is not a number replaced
// by now and negatives raised to 0, and no quantile below a lower one's (a
// level below another, a model's or the clean-up's doing, is raised to
// it, so that every pool's level and scale-in's read one consistent
// distribution); with how many of each it changed.
func cleaned(in forecast.Forecast, now float64) (f forecast.Forecast, nan, neg, crossed int) {
	f = in
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
	for h := range f.Steps() {
		for k := 1; k < len(f.Values); k++ {
			if f.Values[k][h] < f.Values[k-1][h] {
				f.Values[k][h], crossed = f.Values[k-1][h], crossed+1
			}
		}
	}
	return f, nan, neg, crossed
}

// malformed says what is wrong with a forecast's shape; none if nothing.
func malformed(f *forecast.Forecast) cause {
	switch {
	case f.Steps() == 0 || len(f.Levels) == 0:
		return cause{ReasonNoForecast, "empty"}
	case f.Step <= 0:
		return cause{ReasonForecastMalformed, "step is not positive"}
	case len(f.Values) != len(f.Levels):
		return cause{ReasonForecastMalformed, fmt.Sprintf("%d rows of values for %d levels", len(f.Values), len(f.Levels))}
	}
	for k, q := range f.Levels {
		if !(q > 0 && q < 1) || (k > 0 && q <= f.Levels[k-1]) {
			return cause{ReasonForecastMalformed, "levels are not ascending in (0, 1)"}
		}
		if len(f.Values[k]) != f.Steps() {
			return cause{ReasonForecastMalformed, "rows of values differ in length"}
		}
	}
	return cause{}
}

// needAt is the demand to provision for at t, and what set it
// (ReasonForecast, ReasonDemandNow or ReasonAnnounced): the forecast's q
// quantile, never below what is in use or pending now with what is
// announced for t.
//
// Nodes expected to be empty by t (their jobs' expected ends) serve the
// pending jobs there, as far as they go: so a pending job waits for a
// node that frees within the lead time instead of a launch (or within a
// cheaper pool's, endsBy). An expected end is a hint (docs/design.md rule 11): one that
// has passed counts no more, so it delays a launch by at most one lead
// time; and needOver, which scale-in keeps for, never counts it (scale-in
// only waits for such a node to empty, endingSoon).
func (p *planner) needAt(lv level, t time.Time) (int, Reason) {
	return p.need(lv, p.valueAt(lv, t), t, t, min(p.endingFor(t), p.pendingFor(lv)))
}

// nodeEnd is a node expected to be empty at at, with its GPUs.
type nodeEnd struct {
	at   time.Time
	gpus int
}

// expectedEmpty is when ready node n is expected to hold no job: the last
// of its jobs' expected ends, if every job has one after now.
func expectedEmpty(n *fleet.Node, now time.Time) (time.Time, bool) {
	var last time.Time
	for i := range n.Jobs {
		e := n.Jobs[i].ExpectedEnd
		if !e.After(now) {
			return time.Time{}, false // unknown, or passed: the job overran
		}
		if e.After(last) {
			last = e
		}
	}
	return last, len(n.Jobs) > 0
}

// endingFor is how many pending GPUs the nodes expected to be empty by t
// can serve: their GPUs, at most the GPUs pending fleet-wide (the ends
// only stand in for a launch for pending jobs; those pending for one pool
// or model are served apart, serveScoped). None once jobs have been
// pending (fleet.State.PendingSince) as long as the wait for t: so
// however the ends are told, overrun or staggered over nodes, a launch
// for pending jobs waits at most one lead time.
func (p *planner) endingFor(t time.Time) int {
	pending := p.plan.Demand.PendingGPUs - p.scopedPending
	if len(p.cfg.Tiers) > 0 {
		// The preemptible tiers' pending jobs buy nothing: ends stand in
		// for no launch of theirs.
		pending = -p.scopedPending
		for k, g := range p.pendingTier {
			if !Preemptible(&p.cfg.Tiers[k]) {
				pending += g
			}
		}
	}
	for k, w := range p.withheld {
		// The teams over budget's: nothing is bought for them (those of
		// preemptible tiers are out of pending already).
		if len(p.cfg.Tiers) == 0 || !Preemptible(&p.cfg.Tiers[k]) {
			pending -= w
		}
	}
	if pending <= 0 {
		return 0
	}
	t = p.endsBy(t)
	if since := p.in.State.PendingSince; !since.IsZero() && p.now.Sub(since) >= t.Sub(p.now) {
		return 0
	}
	freed := 0
	for _, e := range p.ends {
		if !e.at.After(t) {
			freed += e.gpus
		}
	}
	return min(freed, pending)
}

// endsBy is how late the expected ends that stand in for a launch one
// lead time ahead, at t, may come: t, or the lead time of a cheaper pool
// that waits for them (p.waitUntil), whichever is later.
func (p *planner) endsBy(t time.Time) time.Time {
	if p.waitUntil.After(t) {
		return p.waitUntil
	}
	return t
}

// needOver is the most demand to provision for during [from, to] at the
// level scale-in keeps for (p.keep: p.q, keepQuantile, without tiers),
// and what set it.
func (p *planner) needOver(from, to time.Time) (int, Reason) {
	return p.need(p.keep, p.valueMax(p.keep, from, to), from, to, 0)
}

// need is a forecast value v for [from, to] as GPUs to provision for at
// level lv, never below current demand (with tiers, the pending GPUs of
// the level's tiers only, pendingFor, and the running GPUs of the tiers
// that are not preemptible, countTiers) with the GPUs announced ahead on
// top, and what set it. While jobs are pending, current demand counts the free
// GPUs of busy nodes as held (p.stranded()): the pending jobs did not fit
// there, so they are provisioned on whole empty nodes. Announced demand
// ahead is added to current demand; a forecast of the demand not
// announced (Input.Unannounced) has every announcement covering the
// moment, under way or ahead, added to it, and a forecast of the whole
// demand nothing, since it may expect them already. The GPUs of nodes
// expected to be empty (ending, at most the GPUs pending: see needAt) are
// taken from what is needed, forecast or current demand: both count the
// pending jobs that will start there.
func (p *planner) need(lv level, v float64, from, to time.Time, ending int) (int, Reason) {
	ahead := p.announcedMax(false, from, to)
	// The teams over budget: nothing is bought for their pending GPUs
	// beyond their reserved shares, now or in the forecast, which holds
	// them as demand.
	w := p.withheldFor(lv)
	now := max(p.plan.Demand.RunningGPUs-p.preemptible, 0) + p.pendingFor(lv) - w
	n, src := now+p.strandedFor(lv)+ahead, ReasonDemandNow
	if p.fc != nil && p.in.Unannounced {
		v += float64(p.announcedMax(true, from, to))
	}
	v -= float64(w)
	if f := int(math.Ceil(v - 1e-9)); f > n {
		n, src = f, ReasonForecast
	} else if ahead > 0 {
		src = ReasonAnnounced
	}
	return max(n-ending, 0), src
}

// announcedMax is the most GPUs announced for one moment in [from, to]
// ahead of their start (State.Announced), or with all, under way too
// (State.UnderWay): the level at from, then swept over the starts and
// ends after it.
func (p *planner) announcedMax(all bool, from, to time.Time) int {
	list, sorted := p.in.State.Announced, &p.ahead
	if all {
		list, sorted = append(slices.Clip(list), p.in.State.UnderWay...), &p.all
	}
	if len(list) == 0 {
		return 0
	}
	if *sorted == nil {
		changes := make([]change, 0, 2*len(list)) // never nil: made once
		for _, a := range list {
			if a.GPUs > 0 {
				changes = append(changes, change{a.StartAt, a.GPUs})
				if a.Duration > 0 {
					changes = append(changes, change{a.StartAt.Add(a.Duration), -a.GPUs})
				}
			}
		}
		// Ends before starts at one time: an announcement covers its start,
		// not its end.
		slices.SortFunc(changes, func(a, b change) int { return cmp.Or(a.at.Compare(b.at), cmp.Compare(a.gpus, b.gpus)) })
		*sorted = changes
	}
	changes := *sorted
	level, i := 0, 0
	for ; i < len(changes) && !changes[i].at.After(from); i++ {
		level += changes[i].gpus
	}
	best := level
	for ; i < len(changes) && !changes[i].at.After(to); i++ {
		level += changes[i].gpus
		best = max(best, level)
	}
	return best
}

// change is where announced demand rises (a start) or falls (an end).
type change struct {
	at   time.Time
	gpus int
}

// have is the capacity there will be at t: ready and launching nodes, and
// this plan's launches ready within one forecast step of t (both in t). A
// cheaper pool that is a few minutes slower thus serves a need a dearer,
// faster pool could meet to the minute (the forecast cannot tell those
// minutes apart), while a pool slower than that leaves the early need to a
// faster pool.
func (p *planner) have(t *tally, at time.Time) int {
	n := t.supply - t.scopedFree
	for _, pp := range p.pools {
		if len(pp.spec.MIG) > 0 {
			n -= pp.unclaimed() // a partitioned GPU runs no whole-GPU job
		}
	}
	for _, l := range t.launches {
		if !l.ready.After(at.Add(p.cfg.Forecast.Step)) && len(l.pool.spec.MIG) == 0 {
			n += l.gpus - l.scoped
		}
	}
	return n
}
