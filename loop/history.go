package loop

import (
	"slices"
	"time"

	"github.com/fleetcast/autoscaler/fleet"
	"github.com/fleetcast/autoscaler/forecast"
	"github.com/fleetcast/autoscaler/state"
)

// history is the demand on the forecast step: each step's highest sample
// (capacity must cover the peak within a step), kept in memory and made
// from the books once, so a cycle costs the same on the first day as
// after months. The step in progress is kept apart: its peak so far is
// provisional, and the forecaster follows it as such (current).
type history struct {
	step time.Duration
	keep int // the most values kept: forecast.history in steps
	// series is the whole steps; cur the start of the step in progress
	// (zero: none yet), curMax its highest sample so far.
	series fleet.Series
	cur    time.Time
	curMax float64
	loaded bool
}

// newHistory is an empty history of f's step and length.
func newHistory(f fleet.ForecastSettings) history {
	return history{step: f.Step, keep: max(1, int(f.History/f.Step)), series: fleet.Series{Step: f.Step}}
}

// load makes the history from the books' samples before now, oldest
// first.
func (h *history) load(samples []state.Sample, now time.Time) error {
	h.loaded = true
	h.series, h.cur, h.curMax = fleet.Series{Step: h.step}, time.Time{}, 0
	if len(samples) == 0 {
		return nil
	}
	start := samples[0].Time.Truncate(h.step)
	var offsets []time.Duration
	var values []float64
	for _, s := range samples {
		off := s.Time.Sub(start).Truncate(h.step)
		if n := len(offsets); n > 0 && offsets[n-1] == off {
			values[n-1] = max(values[n-1], s.Value)
			continue
		}
		offsets, values = append(offsets, off), append(values, s.Value)
	}
	// Steps with no sample carry the last value, as add does (a sample's
	// neighbour is not known when the step ends).
	r, err := forecast.Resample(start, offsets, values, h.step, 0)
	if err != nil {
		return err
	}
	h.series = r.Series
	if n := len(h.series.Values); n > 0 && !h.series.End().Before(now.Truncate(h.step).Add(h.step)) {
		// The step in progress is not whole yet.
		h.cur, h.curMax = h.series.End().Add(-h.step), h.series.Values[n-1]
		h.series.Values = h.series.Values[:n-1]
	}
	h.trim()
	return nil
}

// add records a sample at t. A sample in a step already whole (a clock
// that went back) counts in the step in progress; steps with no sample
// carry the last value.
func (h *history) add(t time.Time, v float64) {
	k := t.Truncate(h.step)
	switch {
	case h.cur.IsZero():
		h.cur, h.curMax = k, v
		if len(h.series.Values) > 0 && !h.series.End().Equal(k) {
			h.fill(k)
		}
	case k.After(h.cur):
		h.push(h.curMax)
		h.fill(k)
		h.cur, h.curMax = k, v
	default:
		h.curMax = max(h.curMax, v)
	}
}

// fill carries the last value up to the step that starts at k (at most a
// history's length of it); a series that ends after k starts again.
func (h *history) fill(k time.Time) {
	if len(h.series.Values) == 0 {
		return
	}
	if h.series.End().After(k) {
		h.series = fleet.Series{Step: h.step}
		return
	}
	last := h.series.Values[len(h.series.Values)-1]
	missing := int(k.Sub(h.series.End()) / h.step)
	if missing > h.keep {
		h.series.Start = k.Add(-time.Duration(h.keep) * h.step)
		h.series.Values = h.series.Values[:0]
		missing = h.keep
	}
	for range missing {
		h.series.Values = append(h.series.Values, last)
	}
	h.trim()
}

// push appends the step in progress, whole now.
func (h *history) push(v float64) {
	if len(h.series.Values) == 0 {
		h.series.Start = h.cur
	}
	h.series.Values = append(h.series.Values, v)
	h.trim()
}

// current is the history with the step in progress last, its peak so
// far (provisional: see forecast.Online.Forecast). Its values share the
// history's array: copy them to keep them past the next add.
func (h *history) current() fleet.Series {
	s := h.series
	if h.cur.IsZero() {
		return s
	}
	if len(s.Values) == 0 {
		s.Start = h.cur
	}
	s.Values = append(s.Values, h.curMax)
	return s
}

// clone is current, with its values copied: for a plan and its state,
// which outlive the cycle (the API serves them) while the history moves
// on.
func (h *history) clone() fleet.Series {
	s := h.current()
	s.Values = slices.Clone(s.Values)
	return s
}

// trim keeps the last keep values. The window slides by reslicing:
// append copies the kept values into a new array when the old one is
// full, once every history's length or so, so a step costs the same
// whatever the length.
func (h *history) trim() {
	if drop := len(h.series.Values) - h.keep; drop > 0 {
		h.series.Values = h.series.Values[drop:]
		h.series.Start = h.series.Start.Add(time.Duration(drop) * h.step)
	}
}
