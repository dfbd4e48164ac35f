package forecast

import (
	"fmt"
	"math"
	"slices"
)

// An unconfirmed jump is a last value far from the forecast made just
// before it: a reading that lost half the fleet's reports, a counter reset,
// a double count, or a real surge. One value cannot tell them apart, and
// the models follow their last value closely (most of them nearly as a
// random walk), so a single bad reading would carry the whole band with it:
// a zero took even the 99th percentile to zero. Until the next value
// confirms the jump, the point forecast is the one made before it, and the
// band is widened to hold the forecast that follows it (see hedge): the
// planner provisions to an upper quantile, so capacity is not released on
// one low reading, and a surge is provisioned for as soon as it is seen.

// jumpFactor sets how far is far: a last value is an unconfirmed jump when
// it is further from the one-step forecast made before it than jumpFactor
// times the 99th percentile of the one-step errors at the calibration
// origins (the last three days). On the shared traces and cuts of them,
// unaltered, it fires at 18 of 3,200 origins, leaving the backtests as
// they were (a little better at ServeGen); with the last value zeroed,
// halved or doubled, it fires at nearly every origin but ServeGen's, whose
// own dropouts make its one-step errors large. The largest one-step error
// as the scale (factor 1 or 1.5) missed most halved values of the jumpiest
// cut (Earth's job counts).
const jumpFactor = 2

// jumpMaterial is the smallest jump, relative to the values: 1%.
const jumpMaterial = 0.01

// jumpThreshold is jumpFactor times the 99th percentile of the absolute
// one-step errors at the calibration origins.
func (c *paths) jumpThreshold() float64 {
	abs := make([]float64, len(c.starts))
	for i, o := range c.starts {
		abs[i] = math.Abs(c.y[o] - c.calib[i][0])
	}
	slices.Sort(abs)
	return jumpFactor * abs[int(0.99*float64(len(abs)-1))]
}

// unconfirmedJump reports whether the last value of y is further than the
// blend's threshold from the one-step forecast that it (its members fitted
// on y) made before it. If it is, it returns that one-step forecast, the
// blend's point forecast for the h steps after y made before the jump
// (from one step earlier, h+1 steps, less the first), and the members'
// forecasts it was mixed from.
func unconfirmedJump(b *blend, y []float64, h int) (before []float64, fs [][]float64, expected float64, ok bool) {
	n := len(y)
	if n < 2 || len(b.members) == 0 || h < 1 {
		return nil, nil, 0, false
	}
	expected = mixed(b.point[:1], b.forecasts(n-1, 1), 0)[0]
	threshold := b.jump
	// A jump is also at least jumpMaterial of the values' size (so that a
	// series the models fit exactly has no jumps of rounding error). NaNs
	// compare false: no jump.
	if d := math.Abs(y[n-1] - expected); !(d > threshold && d > jumpMaterial*max(math.Abs(y[n-1]), math.Abs(expected))) {
		return nil, nil, 0, false
	}
	fs = b.forecasts(n-1, h+1)
	before = mixed(b.point, fs, 1)
	for _, v := range before {
		if math.IsNaN(v) || math.IsInf(v, 0) {
			return nil, nil, 0, false
		}
	}
	return before, fs, expected, true
}

// holdJump applies the rule to a forecast from y by blend b, q being its
// quantiles at levels. When the last value of y is an
// unconfirmed jump (see unconfirmedJump), it returns q hedged with the
// forecast made before the jump, that forecast, and a note saying so;
// otherwise q, nil and "".
func holdJump(b *blend, y []float64, h int, levels []float64, q [][]float64) ([][]float64, []float64, string) {
	before, fs, expected, ok := unconfirmedJump(b, y, h)
	if !ok {
		return q, nil, ""
	}
	note := fmt.Sprintf("the last value, %.4g, is far from the %.4g expected; forecast from before it until the next value confirms it, the band widened to hold both", y[len(y)-1], expected)
	return hedge(levels, b.quantiles(fs, 1, b.offsetsFrom(len(y)-1, 1)), q), before, note
}

// hedge returns the quantiles (rows per level, levels ascending) of a
// forecast made before an unconfirmed jump, widened to hold after, those of
// the forecast that follows the jump: below the median the lower of the
// two, above it the higher; the median is before's. Neither input crosses,
// so neither does the result.
func hedge(levels []float64, before, after [][]float64) [][]float64 {
	out := make([][]float64, len(before))
	for j, l := range levels {
		out[j] = slices.Clone(before[j])
		for k, a := range after[j] {
			switch {
			case l < 0.5:
				out[j][k] = math.Min(out[j][k], a)
			case l > 0.5:
				out[j][k] = math.Max(out[j][k], a)
			}
		}
	}
	return out
}
