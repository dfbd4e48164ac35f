package forecast

import (
	"fmt"
	"math"
	"time"

	"github.com/fleetcast/autoscaler/fleet"
)

// maxSteps bounds a resampled series: 50 million steps (95 years of
// minutes), far beyond any history worth forecasting from.
const maxSteps = 50_000_000

// Resampled is a series put on a regular grid, and what that took.
type Resampled struct {
	fleet.Series
	// Filled counts steps with no point, filled by interpolation (gaps of
	// up to maxGap steps) or by carrying the last value (longer gaps).
	Filled, Carried int
}

// Resample puts points (offsets from start, ascending, with their values)
// on a regular grid of step: each step's value is the mean of the points in
// it; steps without points are filled linearly between their neighbours
// when the gap is at most maxGap steps, and with the last value before them
// when it is longer (a long outage is better seen as flat than invented).
// Values must be finite: the first that is not is an error naming its
// index.
func Resample(start time.Time, offsets []time.Duration, values []float64, step time.Duration, maxGap int) (Resampled, error) {
	if step <= 0 {
		return Resampled{}, fmt.Errorf("resample: step %v is not positive", step)
	}
	if len(offsets) != len(values) || len(values) == 0 {
		return Resampled{}, fmt.Errorf("resample: %d offsets for %d values", len(offsets), len(values))
	}
	for i, off := range offsets {
		if v := values[i]; math.IsNaN(v) || math.IsInf(v, 0) {
			return Resampled{}, fmt.Errorf("resample: value %d (at %v) is %v", i, off, v)
		}
		if i > 0 && off < offsets[i-1] {
			return Resampled{}, fmt.Errorf("resample: offset %d (%v) is before the one before it", i, off)
		}
	}
	first := offsets[0].Truncate(step)
	span := (offsets[len(offsets)-1] - first) / step
	if span >= maxSteps {
		return Resampled{}, fmt.Errorf("resample: %v at a step of %v is more than %d steps", offsets[len(offsets)-1]-first, step, maxSteps)
	}
	n := int(span) + 1
	sum := make([]float64, n)
	cnt := make([]int, n)
	for i, off := range offsets {
		v := values[i]
		k := int((off - first) / step)
		sum[k] += v
		cnt[k]++
	}
	r := Resampled{Series: fleet.Series{Start: start.Add(first), Step: step, Values: make([]float64, n)}}
	last := -1 // the last step with points
	for k := range n {
		if cnt[k] == 0 {
			continue
		}
		r.Values[k] = sum[k] / float64(cnt[k])
		if gap := k - last - 1; last >= 0 && gap > 0 {
			a, b := r.Values[last], r.Values[k]
			for j := last + 1; j < k; j++ {
				if gap <= maxGap {
					r.Values[j] = a + (b-a)*float64(j-last)/float64(gap+1)
					r.Filled++
				} else {
					r.Values[j] = a
					r.Carried++
				}
			}
		}
		last = k
	}
	return r, nil
}
