package loop

import (
	"time"

	"github.com/fleetcast/autoscaler/fleet"
	"github.com/fleetcast/autoscaler/forecast"
	"github.com/fleetcast/autoscaler/planner"
	"github.com/fleetcast/autoscaler/state"
)

// TierSeries is the name, in the books, of the cumulative demand of the
// tier called name: its jobs' and every higher tier's (TierDemand).
func TierSeries(name string) string { return "tier:" + name }

// tierTrack is one tier's cumulative demand history and its forecast.
type tierTrack struct {
	name   string
	hist   history
	follow follower
}

// tracked reports whether the loop's tier tracks are those of tiers: one
// for each tier but the last, by rank. Settings may change between
// cycles (a runner's pools do); a track is kept while its tier is.
func (l *Loop) tracked(tiers []fleet.Tier) bool {
	if len(l.tiers) != max(len(tiers)-1, 0) {
		return false
	}
	for k := range l.tiers {
		if l.tiers[k].name != tiers[k].Name {
			return false
		}
	}
	return true
}

// recordTiers records, with two tiers or more, each tier's cumulative
// demand but the last's (which is the demand, d, recorded apart): to the
// books (TierSeries) and to the tier's history, which is made from the
// books once.
func (l *Loop) recordTiers(now time.Time, st *fleet.State, d float64) error {
	tiers := l.o.Settings.Tiers
	if !l.tracked(tiers) {
		l.tiers = make([]tierTrack, max(len(tiers)-1, 0))
		for k := range l.tiers {
			t := &l.tiers[k]
			t.name, t.hist = tiers[k].Name, newHistory(l.o.Settings.Forecast)
			samples, err := l.o.Books.Demand(TierSeries(t.name), now.Add(-l.o.Settings.Forecast.History))
			if err == nil {
				err = t.hist.load(samples, now)
			}
			if err != nil {
				t.hist.loaded = true
				l.log.Warn("tier history unreadable; starting afresh", "tier", t.name, "error", err)
			}
		}
	}
	if len(l.tiers) == 0 {
		return nil
	}
	cum := TierDemand(l.o.Settings.Pools, tiers, st, now)
	// As the fleet's demand, less the announced demand under way
	// (unannounced): the planner adds it to each forecast.
	underWay := float64(fleet.UnderWayGPUs(st.UnderWay, now))
	for k := range l.tiers {
		v := min(max(cum[k]-underWay, 0), d)
		if err := l.o.Books.AppendDemand(TierSeries(l.tiers[k].name), state.Sample{Time: now, Value: v}); err != nil {
			return err
		}
		l.tiers[k].hist.add(now, v)
	}
	return nil
}

// tierForecasts are the forecasts of each tier's cumulative demand but
// the last's (planner.Input.TierForecasts); nil without tiers, or with
// Options.Forecast (which is of all the demand).
func (l *Loop) tierForecasts(now time.Time) []forecast.Forecast {
	if l.o.Forecast != nil || len(l.tiers) == 0 || !l.tracked(l.o.Settings.Tiers) {
		return nil
	}
	out := make([]forecast.Forecast, len(l.tiers))
	for k := range l.tiers {
		out[k] = l.tiers[k].follow.forecast(l.tiers[k].hist.current(), now, l.o.Settings, l.log)
	}
	return out
}

// TierDemand is, for each of tiers (by rank), the cumulative demand of it
// and the tiers above it, as Demand counts the fleet's: the GPUs their
// jobs hold on nodes not being terminated, plus their pending GPUs
// (fleet.PendingByTier), plus, while GPUs are pending for them, the
// free GPUs of busy nodes that Demand counts (countedFragments), at most
// the most GPUs per node less one for each of their pending GPUs. The last
// is the demand of every tier. Nil without tiers.
func TierDemand(pools []fleet.Pool, tiers []fleet.Tier, st *fleet.State, now time.Time) []float64 {
	if len(tiers) == 0 {
		return nil
	}
	gpns := make(map[string]int, len(pools))
	widest := 0
	for i := range pools {
		gpns[pools[i].Name] = pools[i].GPUsPerNode
		widest = max(widest, pools[i].GPUsPerNode)
	}
	used := make([]int, len(tiers))
	frag := 0
	for i := range st.Nodes {
		n := &st.Nodes[i]
		frag += planner.FragmentGPUs(n, gpns[n.Pool], now)
		if n.State == fleet.Terminating {
			continue
		}
		for j := range n.Jobs {
			used[fleet.TierIndex(tiers, n.Jobs[j].Tier)] += n.Holds(j)
		}
	}
	counted := countedFragments(pools, st, frag, now)
	pending := fleet.PendingByTier(st, tiers)
	out := make([]float64, len(tiers))
	sumUsed, sumPending := 0, 0
	for k := range tiers {
		sumUsed += used[k]
		sumPending += pending[k]
		out[k] = float64(sumUsed + sumPending + min(counted, sumPending*max(widest-1, 0)))
	}
	return out
}

// peakHistory is planner.Input.PeakHistory: with tiers, a copy of the
// cumulative demand history of the lowest-ranked tier whose waiting is
// worth something, where a zero-value tier ranks below it; empty
// otherwise (the whole demand's, fleet.State.History, is read).
func (l *Loop) peakHistory() fleet.Series {
	tiers := l.o.Settings.Tiers
	if len(l.tiers) == 0 || !l.tracked(tiers) {
		return fleet.Series{}
	}
	k := len(tiers) - 1
	for k >= 0 && planner.Preemptible(&tiers[k]) {
		k--
	}
	if k < 0 || k >= len(l.tiers) {
		return fleet.Series{} // the last tier is worth something, or none is
	}
	return l.tiers[k].hist.clone()
}
