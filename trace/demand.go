package trace

import (
	"cmp"
	"slices"
	"time"

	"github.com/fleetcast/autoscaler/fleet"
)

// GPUHours is the work in the trace: the sum of GPUs times Duration, in
// hours, a share of one GPU (Job.Milli) counted at its share.
func (t *Trace) GPUHours() float64 {
	h := 0.0
	for i := range t.Jobs {
		j := &t.Jobs[i]
		g := float64(j.GPUs)
		if j.Milli > 0 && j.GPUs == 1 {
			g = float64(j.Milli) / 1000
		}
		h += g * j.Duration.Hours()
	}
	return h
}

// Span is the time from offset 0 to the end of the job that ends last.
func (t *Trace) Span() time.Duration {
	var span time.Duration
	for i := range t.Jobs {
		span = max(span, t.Jobs[i].Submit+t.Jobs[i].Duration)
	}
	return span
}

// Demand is the number of GPUs busy if every job ran from its submit time,
// as a series from offset 0 to Span with the given step: each value is the
// average over its step (the last step counting the time after Span as
// idle). The series starts at t.Start. A step of 0 or less gives no values.
//
// For a series trace read with its own regular step, Demand(t.Step) gives
// back the series' values exactly, up to the last row with demand.
func (t *Trace) Demand(step time.Duration) fleet.Series {
	return t.DemandOf(step, nil)
}

// DemandOf is Demand of the jobs keep keeps (all of them where keep is
// nil), over the whole trace's span: the series of several such subsets
// have the same steps and add up to Demand's.
func (t *Trace) DemandOf(step time.Duration, keep func(*Job) bool) fleet.Series {
	s := fleet.Series{Start: t.Start, Step: step}
	span := t.Span()
	if step <= 0 || span <= 0 {
		return s
	}
	n := int((span-1)/step) + 1
	values := make([]float64, n)
	// whole[i] - whole[i-1]: the change in GPUs busy for all of step i.
	whole := make([]int64, n+1)
	st := float64(step)
	for i := range t.Jobs {
		j := &t.Jobs[i]
		if j.Duration <= 0 || keep != nil && !keep(j) {
			continue // it holds no GPUs (and may start at Span, past the last step)
		}
		start, end := j.Submit, j.Submit+j.Duration
		first, last := int(start/step), int((end-1)/step)
		g := float64(j.GPUs)
		if first == last {
			values[first] += g * float64(end-start) / st
			continue
		}
		values[first] += g * float64(time.Duration(first+1)*step-start) / st
		values[last] += g * float64(end-time.Duration(last)*step) / st
		whole[first+1] += int64(j.GPUs)
		whole[last] -= int64(j.GPUs)
	}
	var busy int64
	for i := range values {
		busy += whole[i]
		values[i] += float64(busy)
	}
	s.Values = values
	return s
}

// PeakGPUs is the most GPUs busy at once if every job ran from its submit
// time: the exact peak of Demand, found by sweeping job starts and ends (a
// job ending when another starts does not overlap it).
func (t *Trace) PeakGPUs() int {
	type event struct {
		at   time.Duration
		gpus int
	}
	byTime := func(a, b event) int { return cmp.Compare(a.at, b.at) }
	starts := make([]event, len(t.Jobs))
	ends := make([]event, len(t.Jobs))
	for i := range t.Jobs {
		j := &t.Jobs[i]
		starts[i] = event{j.Submit, j.GPUs}
		ends[i] = event{j.Submit + j.Duration, j.GPUs}
	}
	if !slices.IsSortedFunc(starts, byTime) {
		slices.SortFunc(starts, byTime)
	}
	slices.SortFunc(ends, byTime)
	busy, most, k := 0, 0, 0
	for _, s := range starts {
		for k < len(ends) && ends[k].at <= s.at {
			busy -= ends[k].gpus
			k++
		}
		busy += s.gpus
		most = max(most, busy)
	}
	return most
}
