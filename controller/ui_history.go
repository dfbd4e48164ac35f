package controller

import (
	"slices"
	"time"

	"github.com/fleetcast/autoscaler/state"
	"github.com/fleetcast/autoscaler/usage"
)

// The web page's history: what the controller keeps of the last days.
// The demand is the history it forecasts from (fleet.State.History, a
// sample a step). The capacity over time is what the usage books charged
// each closed hour: every GPU the fleet paid for, by every team and kind,
// so each hour's GPU-hours are the mean GPUs paid for in it (a
// reservation's whole, as it is paid). Past forecasts are not kept: only
// the last one is drawn, ahead of the last cycle.

// uiCharts are the page's two charts: the last week, and the last twelve
// hours with the forecast ahead. None before the first cycle.
func (c *Controller) uiCharts(last Snapshot, live usage.Live) []uiChart {
	if last.At.IsZero() {
		return nil
	}
	now := last.At
	var lines []uiSeries
	var bands []uiBand
	start := now
	if st := last.State; st != nil && len(st.History.Values) > 0 {
		h := st.History
		pts := make([]uiPoint, len(h.Values))
		for i, v := range h.Values {
			pts[i] = uiPoint{T: h.Start.Add(time.Duration(i) * h.Step), V: v}
		}
		start = pts[0].T
		lines = append(lines, uiSeries{Class: "demand", Label: "demand: GPUs held and waited for", Points: pts})
	}
	paid, err := c.uiPaid(now.Add(-uiQueueWindow), now, live)
	if err != nil {
		c.log.Error("usage hours for the web page", "error", err)
	}
	if len(paid) > 0 {
		start = uiEarlier(start, paid[0].T)
		lines = append(lines, uiSeries{Class: "paid", Label: "GPUs paid for, each hour's mean (reservations whole)", Points: paid, Step: true, Until: paid[len(paid)-1].T.Add(time.Hour)})
	}
	end := now
	if f := last.Forecast; f != nil && f.Steps() > 0 {
		end = uiLater(end, f.End())
		keep := 0.9
		if last.Plan != nil && last.Plan.Quantile > 0 {
			keep = last.Plan.Quantile
		}
		band, median, kept := uiForecastSeries(f, keep)
		bands = append(bands, band)
		lines = append(lines, median, kept)
	}
	if p := last.Plan; p != nil {
		capacity := float64(p.Capacity.ReadyGPUs + p.Capacity.LaunchingGPUs + p.Capacity.DrainingGPUs)
		lines = append(lines, uiSeries{Class: "capacity", Label: "capacity now: ready, launching and draining GPUs",
			Points: []uiPoint{{T: now, V: capacity}, {T: end, V: capacity}}})
	}
	// The week, or as much of it as there is (six hours at least).
	from := uiLater(now.Add(-uiQueueWindow), uiEarlier(start, now.Add(-6*time.Hour)))
	week := uiChartSpec{Title: "Demand, forecast and capacity since " + uiTime(from), From: from, To: end, Now: now, Bands: bands, Series: lines}
	day := uiChartSpec{Title: "The last 12 hours and the forecast ahead", From: now.Add(-12 * time.Hour), To: uiLater(end, now.Add(time.Hour)), Now: now, Bands: bands, Series: lines}
	return []uiChart{week.layout(), day.layout()}
}

// uiPaid is the mean GPUs paid for in each closed hour from from to now,
// by the usage records and the books' hours not yet written.
func (c *Controller) uiPaid(from, now time.Time, live usage.Live) ([]uiPoint, error) {
	current := now.UTC().Truncate(time.Hour)
	from = from.UTC().Truncate(time.Hour)
	if !from.Before(current) {
		return nil, nil
	}
	hours, err := c.store.UsageHours(from, current)
	if err != nil {
		return nil, err
	}
	gpus := map[time.Time]float64{}
	add := func(h state.UsageHour) {
		for _, ch := range h.Charges {
			// The kinds the spend is made of (usage.Kinds), not the
			// parts of Used (allocated-idle), which would count twice.
			if slices.Contains(usage.Kinds, usage.Kind(ch.Kind)) {
				gpus[h.Hour.UTC()] += ch.GPUHours
			}
		}
	}
	// The books' own hours win over the records of them, which trail.
	open := map[time.Time]bool{}
	for _, h := range live.Hours {
		if t := h.Hour.UTC(); !t.Before(from) && t.Before(current) {
			open[t] = true
		}
	}
	for _, h := range hours {
		if !open[h.Hour.UTC()] {
			add(h)
		}
	}
	for _, h := range live.Hours {
		if open[h.Hour.UTC()] {
			add(h)
		}
	}
	out := make([]uiPoint, 0, len(gpus))
	for t, v := range gpus {
		out = append(out, uiPoint{T: t, V: v})
	}
	slices.SortFunc(out, func(a, b uiPoint) int { return a.T.Compare(b.T) })
	// An hour with no record (the controller was stopped, and charged
	// nobody) is drawn at 0 rather than bridged.
	var filled []uiPoint
	for i, p := range out {
		if i > 0 && p.T.Sub(out[i-1].T) > time.Hour {
			filled = append(filled, uiPoint{T: out[i-1].T.Add(time.Hour), V: 0})
		}
		filled = append(filled, p)
	}
	return filled, nil
}

// uiEarlier is the earlier of a and b; uiLater the later.
func uiEarlier(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}

func uiLater(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}
