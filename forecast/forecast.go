// Package forecast turns a demand history into quantile forecasts over a
// horizon. It is pure: values in, values out; no clock, no I/O.
package forecast

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/fleetcast/autoscaler/fleet"
)

// Day is the season of the daily cycle.
const Day = 24 * time.Hour

// Forecast is a quantile forecast: Values[k][h] is the Levels[k] quantile of
// demand during step h, which starts at Origin + h*Step.
type Forecast struct {
	// Origin is the start of the first forecast step (the end of the history).
	Origin time.Time     `json:"origin"`
	Step   time.Duration `json:"step"`
	// Model names the model that made the forecast, or the models with the
	// steps each forecasts, e.g. "arima_210 (steps 1-2),
	// fourier_regression (steps 3-12)" (the point forecast's; a quantile
	// may come from another: see Auto).
	Model string `json:"model"`
	// Note says why a simpler model was used, if one was, or why the
	// forecast holds on to the values before the last (an unconfirmed jump).
	Note string `json:"note,omitempty"`
	// Levels are the quantile levels, ascending, in (0, 1).
	Levels []float64   `json:"levels"`
	Values [][]float64 `json:"values"`
}

// Steps is the number of steps the forecast covers.
func (f *Forecast) Steps() int {
	if len(f.Values) == 0 {
		return 0
	}
	return len(f.Values[0])
}

// End is the end of the last forecast step.
func (f *Forecast) End() time.Time {
	return f.Origin.Add(time.Duration(f.Steps()) * f.Step)
}

// Quantile returns the q quantile at every step, interpolating linearly
// between the forecast's levels and holding the outermost level beyond them.
func (f *Forecast) Quantile(q float64) []float64 {
	out := make([]float64, f.Steps())
	for h := range out {
		out[h] = f.at(q, h)
	}
	return out
}

// At returns the q quantile during the step that holds t; times before the
// origin read the first step, times after the end read the last.
func (f *Forecast) At(q float64, t time.Time) float64 {
	n := f.Steps()
	if n == 0 {
		return math.NaN()
	}
	h := 0
	if t.After(f.Origin) && f.Step > 0 {
		h = int(t.Sub(f.Origin) / f.Step)
	}
	return f.at(q, min(h, n-1))
}

// Max returns the largest q quantile over the steps that overlap [from, to].
func (f *Forecast) Max(q float64, from, to time.Time) float64 {
	n := f.Steps()
	if n == 0 {
		return math.NaN()
	}
	first, last := f.index(from), f.index(to)
	best := math.Inf(-1)
	for h := first; h <= last; h++ {
		best = math.Max(best, f.at(q, h)) // NaN propagates
	}
	return best
}

func (f *Forecast) index(t time.Time) int {
	if !t.After(f.Origin) || f.Step <= 0 {
		return 0
	}
	return min(int(t.Sub(f.Origin)/f.Step), f.Steps()-1)
}

func (f *Forecast) at(q float64, h int) float64 {
	lv := f.Levels
	k, found := slices.BinarySearch(lv, q)
	switch {
	case found:
		return f.Values[k][h]
	case k == 0:
		return f.Values[0][h]
	case k == len(lv):
		return f.Values[len(lv)-1][h]
	}
	w := (q - lv[k-1]) / (lv[k] - lv[k-1])
	return f.Values[k-1][h]*(1-w) + f.Values[k][h]*w
}

// defaultLevels are the quantile levels forecasts carry unless asked otherwise.
var defaultLevels = []float64{0.1, 0.5, 0.8, 0.9, 0.95, 0.99}

// Levels returns the default levels plus the extra ones asked for, sorted and
// without duplicates. Levels outside (0, 1) are an error.
func Levels(extra ...float64) ([]float64, error) {
	out := slices.Clone(defaultLevels)
	for _, q := range extra {
		if !(q > 0 && q < 1) {
			return nil, fmt.Errorf("forecast: quantile level %v is not in (0, 1)", q)
		}
		out = append(out, q)
	}
	slices.Sort(out)
	return slices.Compact(out), nil
}

// ErrNoHistory is returned when there is nothing to forecast from.
var ErrNoHistory = errors.New("forecast: no demand history")

// SeasonalNaive forecasts that each step repeats the same step one day
// earlier. Its quantiles are the empirical quantiles of the day-over-day
// changes in the history, widened by the square root of the number of days
// ahead. With less than a day and a step of history it falls back to the
// naive forecast (the last value, with quantiles from step-over-step changes
// widened by the square root of the steps ahead) and says so in Note.
// Forecast values are never negative.
func SeasonalNaive(history fleet.Series, horizon time.Duration, levels []float64) (Forecast, error) {
	return seasonalNaive(history, horizon, levels, Options{})
}

// Options change how Auto (AutoWith) forecasts.
type Options struct {
	// FewChangesBand makes the band of the seasonal naive forecast, when
	// fewer than minChanges (12) changes are there to take its quantiles
	// from, at least a normal band of their spread (see widenFewChanges):
	// the empirical quantiles of one change are all that change, a band
	// of no width, and those of a few nearly as narrow. For a forecast a
	// person reads (the forecast command). A planner (plan, the
	// controller, simulate) takes the short history's changes as they
	// are, so that a cold start buys for the demand it sees rather than
	// for a band drawn from a change or two.
	FewChangesBand bool
}

func seasonalNaive(history fleet.Series, horizon time.Duration, levels []float64, opt Options) (Forecast, error) {
	if err := checkHistory(history); err != nil {
		return Forecast{}, err
	}
	y := history.Values
	if len(levels) == 0 {
		levels = defaultLevels
	}
	steps := max(1, int((horizon+history.Step-1)/history.Step))
	season := int(Day / history.Step)
	f := Forecast{
		Origin: history.End(),
		Step:   history.Step,
		Model:  "seasonal_naive_daily",
		Levels: slices.Clone(levels),
		Values: make([][]float64, len(levels)),
	}
	lag := season
	if season < 1 || len(y) <= season {
		lag = 1
		f.Model = "naive"
		f.Note = fmt.Sprintf("%d steps of history is less than one day and one step; used the last value", len(y))
	}
	diffs := make([]float64, 0, len(y)-lag)
	for i := lag; i < len(y); i++ {
		diffs = append(diffs, y[i]-y[i-lag])
	}
	slices.Sort(diffs)
	offsets := make([]float64, len(levels))
	for k, q := range levels {
		offsets[k] = empiricalQuantile(diffs, q)
	}
	if opt.FewChangesBand {
		widenFewChanges(offsets, levels, diffs)
	}
	n := len(y)
	for k := range levels {
		f.Values[k] = make([]float64, steps)
	}
	for h := 1; h <= steps; h++ {
		periods := (h + lag - 1) / lag // whole lags back to a known value
		base := y[n-1+h-periods*lag]
		widen := math.Sqrt(float64(periods))
		for k := range levels {
			f.Values[k][h-1] = math.Max(0, base+offsets[k]*widen)
		}
	}
	// Interpolated quantiles of the same sample stay ordered; clamping at 0
	// keeps them ordered too.
	return f, nil
}

// minChanges is how many changes the seasonal naive forecast needs before
// it trusts their empirical quantiles alone (with Options.FewChangesBand).
const minChanges = 12

// widenFewChanges widens quantile offsets (levels ascending) made of fewer
// than minChanges sorted changes: the empirical quantiles of one change
// are all that change, so the band would have no width, and those of a
// few are nearly as narrow. Each offset is kept at least z(q) standard
// deviations from the median change, the standard deviation being the
// changes' root mean square: a normal band of their spread. A history
// without a change (one value, or all equal) says nothing of how far
// demand moves, and keeps a band of no width: the forecast is the last
// value, as a planner on current demand would take it.
func widenFewChanges(offsets, levels, diffs []float64) {
	if len(diffs) == 0 || len(diffs) >= minChanges {
		return
	}
	var ss float64
	for _, d := range diffs {
		ss += d * d
	}
	sd := math.Sqrt(ss / float64(len(diffs)))
	median := empiricalQuantile(diffs, 0.5)
	for k, q := range levels {
		z := math.Sqrt2 * math.Erfinv(2*q-1)
		if want := median + z*sd; z > 0 && offsets[k] < want || z < 0 && offsets[k] > want {
			offsets[k] = want
		}
	}
}

// empiricalQuantile is the q quantile of sorted xs by linear interpolation
// (R's type 7); 0 for an empty sample.
func empiricalQuantile(xs []float64, q float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	pos := q * float64(len(xs)-1)
	lo := int(math.Floor(pos))
	hi := min(lo+1, len(xs)-1)
	w := pos - float64(lo)
	return xs[lo]*(1-w) + xs[hi]*w
}

// levelPoint is seasonal_level's point forecast from origin o (whose value
// is y[o]) h steps ahead: the last value plus yesterday's change over the
// same steps.
func levelPoint(y []float64, season, o, h int) float64 {
	if h > season {
		return y[o]
	}
	return y[o] + y[o+h-season] - y[o-season]
}

// checkHistory refuses a history that cannot be forecast from.
func checkHistory(history fleet.Series) error {
	if len(history.Values) == 0 {
		return ErrNoHistory
	}
	if history.Step <= 0 {
		return fmt.Errorf("forecast: history step %v is not positive", history.Step)
	}
	for i, v := range history.Values {
		if math.IsNaN(v) || math.IsInf(v, 0) {
			return fmt.Errorf("forecast: history value %d (%s) is %v", i, history.Start.Add(time.Duration(i)*history.Step).Format(time.RFC3339), v)
		}
	}
	return nil
}
