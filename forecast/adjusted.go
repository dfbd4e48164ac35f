package forecast

import "fmt"

// Seasonally adjusted damped trend: the series less a daily profile is
// forecast by ETS(A,Ad,N) and the profile added back (like R's stlf, with
// a moving-average decomposition rather than loess).
const (
	// adjustedDays is how many days before trainEnd the profile is
	// averaged over.
	adjustedDays = 14
	// The profile is a moving average across the day of season /
	// adjustedSmoothing steps either side (two hours). A
	// profile of a fortnight's raw per-step means is noisy enough to cost
	// more than it gains; this smoothing was chosen on the shared traces
	// and cuts of them (an hour either side was worse, three hours alike).
	adjustedSmoothing = 12
)

// AdjustedHolt is HoltDamped on the series less its daily profile: each
// step of the day's mean deviation from a centred day-long moving average
// over the last two weeks, smoothed across the day. Where demand follows
// its day closely it forecasts the shape of the day the way HoltDamped
// forecasts the level.
type AdjustedHolt struct{}

// Name is "adjusted_holt".
func (AdjustedHolt) Name() string { return "adjusted_holt" }

// Fit needs a week of history before trainEnd, so that the profile
// averages over every day of the week. (With less, on the shared
// servegen trace with a week of history, the profile of a few days cost
// more at an hour ahead than it gained at four.)
func (AdjustedHolt) Fit(y []float64, season, trainEnd int) (Fitted, error) {
	return fitAdjusted("adjusted_holt", HoltDamped{}, y, season, trainEnd)
}

// fitAdjusted fits inner on y less its daily profile (as of trainEnd) and
// adds the profile back to its forecasts; name is the model's, for errors.
func fitAdjusted(name string, inner Model, y []float64, season, trainEnd int) (Fitted, error) {
	end := min(trainEnd, len(y))
	if season < 2 || end < 7*season {
		return nil, fmt.Errorf("%s needs %d steps of history before its first forecast, has %d", name, 7*season, end)
	}
	profile := dailyProfile(y[:end], season)
	adj := adjust(nil, y, profile, false)
	f, err := inner.Fit(adj, season, trainEnd)
	if err != nil {
		return nil, err
	}
	return adjustedFitted{profile: profile, adjusted: adj, inner: f}, nil
}

// dailyProfile returns, for each step of the day (index t%season), the
// mean of y's deviations from its centred day-long moving average at that
// step over the last adjustedDays days, smoothed by a moving average across
// the day, and centred on zero.
func dailyProfile(y []float64, season int) []float64 {
	half := season / 2
	start := max(0, len(y)-adjustedDays*season-half)
	sums := make([]float64, len(y)-start+1) // prefix sums from start
	for i, v := range y[start:] {
		sums[i+1] = sums[i] + v
	}
	dev := make([]float64, season)
	count := make([]float64, season)
	for t := start + half; t+half <= len(y); t++ {
		avg := (sums[t+half-start] - sums[t-half-start]) / float64(2*half)
		dev[t%season] += y[t] - avg
		count[t%season]++
	}
	for j := range dev {
		if count[j] > 0 {
			dev[j] /= count[j]
		}
	}
	w := season / adjustedSmoothing
	profile := make([]float64, season)
	window := 0.0
	for d := -w; d <= w; d++ {
		window += dev[(d+season)%season]
	}
	mean := 0.0
	for j := range profile {
		profile[j] = window / float64(2*w+1)
		mean += profile[j] / float64(season)
		window += dev[(j+w+1)%season] - dev[(j-w+season)%season]
	}
	for j := range profile {
		profile[j] -= mean
	}
	return profile
}

// adjust returns y less its profile, reusing done (the adjusted values of
// a prefix of y).
func adjust(done, y, profile []float64, inPlace bool) []float64 {
	out := append(room(done, inPlace), make([]float64, len(y)-len(done))...)
	for t := len(done); t < len(y); t++ {
		out[t] = y[t] - profile[t%len(profile)]
	}
	return out
}

type adjustedFitted struct {
	profile  []float64
	adjusted []float64 // y less the profile
	inner    Fitted    // fitted on adjusted
}

func (f adjustedFitted) Extend(y []float64) Fitted {
	if len(y) <= len(f.adjusted) {
		return f
	}
	f.adjusted = adjust(f.adjusted, y, f.profile, false)
	f.inner = f.inner.Extend(f.adjusted)
	return f
}

func (f adjustedFitted) extendInPlace(y []float64) Fitted {
	if len(y) <= len(f.adjusted) {
		return f
	}
	f.adjusted = adjust(f.adjusted, y, f.profile, true)
	f.inner = extendInPlace(f.inner, f.adjusted)
	return f
}

func (f adjustedFitted) Forecast(origin, h int) []float64 {
	out := f.inner.Forecast(origin, h)
	for k := range out {
		out[k] += f.profile[(origin+k)%len(f.profile)]
	}
	return out
}
