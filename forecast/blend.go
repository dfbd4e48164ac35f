package forecast

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"strings"
)

// A blend is a calibrated forecast made of fitted models: at each horizon
// step its point forecast is a mix of them, and so is each quantile, to
// which the quantile's calibrated error offset is added (times the daily
// scale of the step: see dailyScale). The candidate best
// one step ahead is often not the best two hours ahead (a model that
// follows the last value against one of the daily cycle), and the best
// median is often not the best upper quantile: a model that misses a whole
// burst for as long as it lasts (the seasonal naive model, for one) errs
// at every step of it, where a model that follows the level errs, k steps
// ahead, at the k origins before its start. So for the three days the
// calibration looks back, the first's band holds the burst at every step,
// the second's only at steps as long as the burst or longer. Choosing per
// step and per level keeps each from the candidate whose calibration
// errors are smallest there (see pick).
type blend struct {
	name    string
	members []Fitted
	// point[k][i] is member i's weight in the point forecast k+1 steps
	// ahead; level[j][k][i] its weight in the levels[j] quantile.
	point [][]float64
	level [][][]float64
	// offsets[k][j] is the levels[j] quantile's calibrated error k+1 steps
	// ahead, in units of the daily scale: times the scale of the steps
	// forecast (offsetsFrom), it is added to its mix.
	offsets [][]float64
	// daily is the history's daily scale; nil for none.
	daily *dailyScale
	// jump is the unconfirmed jump threshold (see unconfirmedJump) of the
	// candidate chosen one step ahead.
	jump float64
	mae  float64 // the point forecast's calibration MAE
	// first names the candidate one step ahead.
	first string
}

// forecasts are the members' forecasts from origin n, h steps each.
func (b *blend) forecasts(n, h int) [][]float64 {
	fs := make([][]float64, len(b.members))
	for i, m := range b.members {
		fs[i] = m.Forecast(n, h)
	}
	return fs
}

// offsetsFrom are the offsets of a forecast from origin n, per step, for
// its steps from the shift-th on: step k's are those of the blend's step
// k+shift (the last step's past the horizon), times the daily scale of the
// changes from n to it. A forecast made one step earlier than another
// (shift 1, from n-1) so reads the same offsets at the same target, with
// the scale of the changes up to it from its own origin. The result is
// read, not written: it may be the blend's own.
func (b *blend) offsetsFrom(n, shift int) [][]float64 {
	h := len(b.offsets)
	if b.daily == nil && shift == 0 {
		return b.offsets
	}
	sc := b.daily.steps(n, h+shift)
	out := make([][]float64, h)
	for k := range out {
		row := b.offsets[min(k+shift, h-1)]
		out[k] = make([]float64, len(row))
		for j, v := range row {
			out[k][j] = v * sc[k+shift]
		}
	}
	return out
}

// mixed is the forecast at each of the blend's steps from the members'
// forecasts fs made shift steps earlier (fs[i][k+shift] for step k, with
// the weights of step k+shift, the last step's past the horizon).
func mixed(weights [][]float64, fs [][]float64, shift int) []float64 {
	out := make([]float64, len(weights))
	for k := range out {
		w := weights[min(k+shift, len(weights)-1)]
		for i, x := range w {
			if x != 0 {
				out[k] += x * fs[i][k+shift]
			}
		}
	}
	return out
}

// quantiles are the blend's quantiles (rows per level, levels ascending)
// from the members' forecasts fs made shift steps earlier, with offsets
// (per step, per level): never negative and never crossing.
func (b *blend) quantiles(fs [][]float64, shift int, offsets [][]float64) [][]float64 {
	q := make([][]float64, len(b.level))
	for j := range q {
		q[j] = mixed(b.level[j], fs, shift)
	}
	for k := range offsets {
		prev := 0.0
		for j := range q {
			v := math.Max(0, q[j][k]+offsets[k][j])
			if j > 0 {
				v = math.Max(v, prev)
			}
			q[j][k], prev = v, v
		}
	}
	return q
}

// pick blends the candidates and the means of the two and three best of
// them (by calibration MAE over the horizon). At each step k the point
// forecast is the candidate's with the smallest calibration MAE there
// (ties to the earlier, the simpler). Each quantile is that candidate's
// too, unless another's calibrated quantile is better in calibration by a
// paired test (see switchLevels): then the best such other's. The choice
// per step is made on fewer errors than one choice for the whole horizon,
// and may change from step to step on noise; choosing on the steps up to
// each (as the levels are) was tried, and was worse at Earth 4 h.
func pick(cands []*paths, levels []float64) *blend {
	for i, c := range cands {
		c.bases = []int{i}
	}
	cands = slices.Clip(cands) // the means are appended to a copy
	bases := cands
	ranked := slices.Clone(cands)
	// A NaN MAE (a model whose calibration forecasts failed) ranks last.
	slices.SortStableFunc(ranked, func(a, b *paths) int {
		return cmp.Or(cmp.Compare(btoi(math.IsNaN(a.mae)), btoi(math.IsNaN(b.mae))), cmp.Compare(a.mae, b.mae))
	})
	for _, k := range []int{2, 3} {
		if len(ranked) >= k {
			cands = append(cands, mean(ranked[:k]))
		}
	}
	h := cands[0].h
	ds := newDailyScale(cands[0].y, cands[0].season)
	sc := make([][]float64, len(cands[0].starts))
	for i, o := range cands[0].starts {
		sc[i] = ds.steps(o, h)
	}
	offsets := make([][][]float64, len(cands))
	for i, c := range cands {
		offsets[i] = c.offsets(levels, sc)
	}
	pointBy := make([]int, h)
	sums, chosen := make([]float64, len(cands)), 0.0
	for k := range h {
		best := math.Inf(1)
		for ci, c := range cands {
			sums[ci] = 0
			for i, o := range c.starts {
				sums[ci] += math.Abs(c.y[o+k] - c.calib[i][k])
			}
			if sums[ci] < best {
				best, pointBy[k] = sums[ci], ci
			}
		}
		chosen += sums[pointBy[k]]
	}
	levelBy := switchLevels(cands, offsets, sc, levels, pointBy)
	b := &blend{daily: ds}
	index := map[int]int{} // base candidate -> member
	use := func(ci int) {
		for _, base := range cands[ci].bases {
			if _, ok := index[base]; !ok {
				index[base] = len(b.members)
				b.members = append(b.members, bases[base].members[0])
			}
		}
	}
	for k := range h {
		use(pointBy[k])
		for j := range levels {
			use(levelBy[j][k])
		}
	}
	// A candidate's weights over the members: equal over its bases.
	weightsOf := func(ci int) []float64 {
		w := make([]float64, len(b.members))
		for _, base := range cands[ci].bases {
			w[index[base]] += 1 / float64(len(cands[ci].bases))
		}
		return w
	}
	b.point = make([][]float64, h)
	b.offsets = make([][]float64, h)
	for k := range h {
		b.point[k] = weightsOf(pointBy[k])
		b.offsets[k] = make([]float64, len(levels))
		for j := range levels {
			b.offsets[k][j] = offsets[levelBy[j][k]][k][j]
		}
	}
	b.level = make([][][]float64, len(levels))
	for j := range levels {
		b.level[j] = make([][]float64, h)
		for k := range h {
			b.level[j][k] = weightsOf(levelBy[j][k])
		}
	}
	b.name, b.first = stepsName(cands, pointBy), cands[pointBy[0]].name
	b.jump = cands[pointBy[0]].jumpThreshold()
	b.mae = chosen / float64(len(cands[0].starts)*h)
	return b
}

// switchAlpha is the chance that a level switches to another candidate
// whose quantile is no better in truth (switchLevels): 2.3%, a one-sided
// test at two standard errors, shared among the alternatives (Bonferroni:
// 2.8 standard errors for each of nine). A switch chosen by the smallest
// loss alone fits the calibration window's noise: in backtests on the
// shared series (30 origins, 1 h and 4 h) it took the pinball loss at the
// 90th percentile up to 45% up (ServeGen 1 h; 8-9% at Earth 1 h and Philly
// 4 h); with the test the backtests are even, and a level switches where
// candidates differ in the tail (where a model that misses a whole burst
// differs from one that misses only its start).
const switchAlpha = 0.02275

// switchLevels returns, per level and step (by[j][k]), the candidate whose
// quantile the blend takes: the point forecast's, def[k], unless another's
// is better by a paired test at the calibration origins. The loss of a
// candidate at an origin is its quantile's pinball loss summed over steps 1
// to k+1 (the planner provisions for the most over a window from now, so a
// quantile is judged with the steps before it); another candidate is
// better when the recency-weighted mean of its losses less def[k]'s is
// below zero with significance switchAlpha. The losses of origins closer
// than k+1 steps share targets, so the variance of the mean counts k+1
// origins as one. Of those better, the one with the lowest mean is taken.
func switchLevels(cands []*paths, offsets [][][]float64, sc [][]float64, levels []float64, def []int) [][]int {
	c0 := cands[0]
	n, h := len(c0.starts), c0.h
	w := make([]float64, n)
	total := 0.0
	for i, o := range c0.starts {
		w[i] = c0.recency(o)
		total += w[i]
	}
	stride := 1
	if n > 1 {
		stride = c0.starts[1] - c0.starts[0]
	}
	// cum[ci][j][i]: candidate ci's loss at level j and origin i, summed
	// over the steps so far.
	cum := make([][][]float64, len(cands))
	for ci := range cands {
		cum[ci] = make([][]float64, len(levels))
		for j := range levels {
			cum[ci][j] = make([]float64, n)
		}
	}
	by := make([][]int, len(levels))
	for j := range by {
		by[j] = make([]int, h)
	}
	// The test's threshold: switchAlpha shared among the alternatives.
	z := math.Sqrt2 * math.Erfinv(1-2*switchAlpha/float64(max(1, len(cands)-1)))
	for k := range h {
		for ci, c := range cands {
			for i, o := range c.starts {
				e := c.y[o+k] - c.calib[i][k]
				for j, q := range levels {
					cum[ci][j][i] += pinball(e-offsets[ci][k][j]*sc[i][k], q)
				}
			}
		}
		overlapping := math.Max(1, float64(k+1)/float64(stride))
		for j := range levels {
			base := cum[def[k]][j]
			by[j][k] = def[k]
			best := 0.0
			for ci := range cands {
				if ci == def[k] {
					continue
				}
				// The weighted mean of the differences d and the
				// variance of it, sum w^2 (d-mean)^2 / total^2, in one
				// pass.
				sw, sw2, sw2d, sw2d2 := 0.0, 0.0, 0.0, 0.0
				for i, x := range cum[ci][j] {
					di, wi := x-base[i], w[i]
					sw += wi * di
					sw2 += wi * wi
					sw2d += wi * wi * di
					sw2d2 += wi * wi * di * di
				}
				mean := sw / total
				v := math.Max(0, sw2d2-2*mean*sw2d+mean*mean*sw2)
				se := math.Sqrt(v*overlapping) / total
				if mean < -z*se && mean < best {
					best, by[j][k] = mean, ci
				}
			}
		}
	}
	return by
}

// stepsName names the point forecast's candidates: the one, or each with
// the steps it forecasts, e.g. "arima_210 (step 1), fourier_regression
// (steps 2-12)".
func stepsName(cands []*paths, by []int) string {
	var parts []string
	for k := 0; k < len(by); {
		end := k
		for end+1 < len(by) && by[end+1] == by[k] {
			end++
		}
		if k == 0 && end == len(by)-1 {
			return cands[by[k]].name
		}
		if k == end {
			parts = append(parts, fmt.Sprintf("%s (step %d)", cands[by[k]].name, k+1))
		} else {
			parts = append(parts, fmt.Sprintf("%s (steps %d-%d)", cands[by[k]].name, k+1, end+1))
		}
		k = end + 1
	}
	return strings.Join(parts, ", ")
}

// pinball is the pinball loss at level q of an error e, the value less the
// quantile: q*e above it, (1-q)*-e below.
func pinball(e, q float64) float64 {
	if e >= 0 {
		return q * e
	}
	return (q - 1) * e
}

// btoi is 1 for true, 0 for false.
func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}
