package forecast

import "math"

// A dailyScale says how much demand moves at each time of day against
// the day's average: scale[s] for the steps s, s+season, s+2*season, ...
// of the history (one time of day). Job submissions, and with them the
// size of a step's change and of a forecast's error, follow working hours:
// on the shared series the largest 10-minute changes (their 95th
// percentile) are two to four times as large in the busy hours as in the
// quiet ones. Bands calibrated on every hour alike are then too wide in the
// quiet hours and too narrow in the busy ones. The calibration errors are divided by
// the scale of their steps before their quantiles are taken, and the
// quantiles multiplied by the scale of the steps forecast (split conformal
// with normalised scores, the normaliser a profile of the day): the bands
// keep their coverage over the day, narrower where demand is quiet.
type dailyScale struct {
	scale  []float64
	season int
}

// The daily scale is made from the last scaleDays days of the history,
// each time of day from the changes within an hour of it (a 24th of the
// season) either side, and kept within [1/scaleClamp, scaleClamp] times
// the average. A history of fewer than scaleMinDays days has none.
const (
	scaleDays    = 14
	scaleMinDays = 2
	scaleClamp   = 4.0
)

// newDailyScale is the daily scale of y, whose season is that many steps:
// at each time of day, the mean absolute change from one step to the next
// over the days and the steps within an hour of it, divided by the mean
// of them all. Nil when there is no daily season, too short a history, or
// no change at all.
func newDailyScale(y []float64, season int) *dailyScale {
	n := len(y)
	if season < 2 || n-1 < scaleMinDays*season {
		return nil
	}
	from := max(1, n-scaleDays*season)
	sum, cnt := make([]float64, season), make([]float64, season)
	total := 0.0
	for t := from; t < n; t++ {
		d := math.Abs(y[t] - y[t-1])
		if math.IsNaN(d) || math.IsInf(d, 0) {
			continue
		}
		sum[t%season] += d
		cnt[t%season]++
		total += d
	}
	all := 0.0
	for _, c := range cnt {
		all += c
	}
	if !(total > 0) || all == 0 {
		return nil
	}
	avg := total / all
	w := max(1, season/24)
	// A circular moving window over the times of day, by running sums.
	ds := &dailyScale{scale: make([]float64, season), season: season}
	ws, wc := 0.0, 0.0
	for i := -w; i <= w; i++ {
		s := ((i % season) + season) % season
		ws, wc = ws+sum[s], wc+cnt[s]
	}
	for s := range season {
		v := 1.0
		if wc > 0 {
			v = ws / wc / avg
		}
		ds.scale[s] = min(max(v, 1/scaleClamp), scaleClamp)
		out, in := ((s-w)%season+season)%season, (s+w+1)%season
		ws, wc = ws-sum[out]+sum[in], wc-cnt[out]+cnt[in]
	}
	return ds
}

// steps is the scale of each of h steps forecast from origin o (whose
// first step is y[o]): for step k, the root mean square of the scales of
// the changes from o to o+k, as the variance of a sum of changes is the
// sum of theirs. All ones without a scale.
func (ds *dailyScale) steps(o, h int) []float64 {
	out := make([]float64, h)
	if ds == nil {
		for k := range out {
			out[k] = 1
		}
		return out
	}
	sq := 0.0
	for k := range out {
		s := ds.scale[(o+k)%ds.season]
		sq += s * s
		out[k] = math.Sqrt(sq / float64(k+1))
	}
	return out
}
