package forecast

import "math"

// A dailyScale says how much demand moves unforeseen at each time of day
// against the day's average: scale[s] for the steps s, s+season,
// s+2*season, ... of the history (one time of day). Job submissions, and
// with them the size of a forecast's error, follow working hours: on the
// shared series the largest 10-minute changes (their 95th percentile) are
// two to four times as large in the busy hours as in the quiet ones. Bands
// calibrated on every hour alike are then too wide in the quiet hours and
// too narrow in the busy ones. The calibration errors are divided by the
// scale of their steps before their quantiles are taken, and the quantiles
// multiplied by the scale of the steps forecast (split conformal with
// normalised scores, the normaliser a profile of the day), so that the
// bands are narrower where demand is quiet, as wide as the errors there
// say.
//
// The changes measured are those a day's cycle does not explain: each
// step's change less the change at the same step a day earlier. A cycle
// the models forecast well (a steep morning rise every day) is not
// uncertainty, and counting it would narrow the bands at the peak and the
// trough, where the cycle is flat and the upper quantile matters most. The
// profile is made from the history the calibration errors come from too
// (the last 14 days hold the calibration's three), so the normaliser is
// not quite independent of the scores it divides; it is a smooth average
// of some 180 changes per time of day at 10-minute steps (1,700 at
// 1-minute ones), of which the scores' own are few.
type dailyScale struct {
	scale  []float64
	season int
}

// The daily scale is made from the last scaleDays days of the history,
// each time of day from the changes within an hour either side of it (a
// 24th of the season; one step for seasons under 24, none for a season of
// 2), and kept within [1/scaleClamp, scaleClamp] times the average. It
// needs scaleMinDays days of changes after the first day and its first
// step (whose changes have none a day earlier).
const (
	scaleDays    = 14
	scaleMinDays = 2
	scaleClamp   = 4.0
)

// newDailyScale is the daily scale of y, whose season is that many steps:
// at each time of day, the mean absolute deseasonalised change (a step's
// change less the change at the same step a day earlier) over the days and
// the steps within an hour of it, divided by the mean of them all. Nil when
// there is no daily season, too short a history, or no such change at all.
func newDailyScale(y []float64, season int) *dailyScale {
	n := len(y)
	if season < 2 || n-(season+1) < scaleMinDays*season {
		return nil
	}
	from := max(season+1, n-scaleDays*season)
	sum, cnt := make([]float64, season), make([]float64, season)
	total, all := 0.0, 0.0
	for t := from; t < n; t++ {
		d := math.Abs(y[t] - y[t-1] - (y[t-season] - y[t-season-1]))
		if math.IsNaN(d) || math.IsInf(d, 0) {
			continue // Predict's input is not checked
		}
		sum[t%season] += d
		cnt[t%season]++
		total, all = total+d, all+1
	}
	if !(total > 0) {
		return nil
	}
	avg := total / all
	// Each time of day's window, from prefix sums over the slots w before
	// the first to w after the last (circular).
	w := min(max(1, season/24), (season-1)/2)
	ps, pc := make([]float64, season+2*w+1), make([]float64, season+2*w+1)
	for i := range season + 2*w {
		s := ((i-w)%season + season) % season
		ps[i+1], pc[i+1] = ps[i]+sum[s], pc[i]+cnt[s]
	}
	ds := &dailyScale{scale: make([]float64, season), season: season}
	for s := range season {
		v := 1.0
		if c := pc[s+2*w+1] - pc[s]; c > 0 {
			v = (ps[s+2*w+1] - ps[s]) / c / avg
		}
		ds.scale[s] = min(max(v, 1/scaleClamp), scaleClamp)
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
