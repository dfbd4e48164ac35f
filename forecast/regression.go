package forecast

import (
	"fmt"
	"math"
	"slices"
	"sync"

	"gonum.org/v1/gonum/mat"
)

// Regression is a direct multi-horizon regression: for each horizon step k
// it fits its own least-squares regression (ridge-stabilised) of y[t+k] on
// features known at time t:
//
//   - the recent values y[t], y[t-1], y[t-2];
//   - the level: the mean of the last day, y[t-season+1..t], when the
//     history holds at least two days (it is free of the daily cycle and
//     averages the noise out, which the single lags do not);
//   - the value one day before the target, y[t+k-season] (or the latest
//     whole number of days before it when k > season), when the history
//     holds at least two days;
//   - the value one week before the target, y[t+k-7*season], when the
//     history holds at least eight days;
//   - daily Fourier terms sin/cos(2*pi*j*(t+k)/season), j = 1..5 (fewer for
//     a season under 11 steps), when the history holds at least a day;
//   - weekly Fourier terms (period 7*season, j = 1..2) when the history
//     holds at least two weeks;
//   - an intercept.
//
// Each step's regression is fitted on the targets of the last 14 days of
// the history (at least 256 steps); when that window holds more than 4096
// usable rows (e.g. 1-minute data) it is subsampled by an even stride down
// to at most 4096 rows. Features are centred and scaled to unit norm before
// the normal equations are solved by Cholesky with a ridge of 1e-6, so
// collinear or constant features (a flat series) are harmless. A step with
// too few rows (fewer than twice the number of features) forecasts the
// last value.
//
// Fit only validates and copies the history (O(n)); each step's
// coefficients are fitted on first use by Forecast and cached, so a
// Forecast over h steps costs O(h * features) once the steps are fitted.
// The result does not depend on the order of calls; the cache is guarded by
// a mutex. Point forecasts are not clamped at zero.
type Regression struct{}

const (
	regressionDays       = 14   // fit window, in days of targets
	regressionMinWindow  = 256  // fit window floor, in steps
	regressionMaxRows    = 4096 // rows per step's regression before subsampling
	regressionDailyK     = 5    // daily Fourier harmonics
	regressionWeeklyK    = 2    // weekly Fourier harmonics
	regressionRidge      = 1e-6 // ridge on the unit-norm normal equations
	regressionMinHistory = 8    // shortest history Fit accepts
	regressionLags       = 3    // y[t], y[t-1], y[t-2]
)

// Name implements Model.
func (Regression) Name() string { return "fourier_regression" }

// Fit implements Model. It refuses a history shorter than 8 steps, a season
// under 1 and non-finite values.
func (Regression) Fit(y []float64, season, trainEnd int) (Fitted, error) {
	if len(y) == 0 {
		return nil, ErrNoHistory
	}
	if season < 1 {
		return nil, fmt.Errorf("forecast: season %d is not positive", season)
	}
	if len(y) < regressionMinHistory {
		return nil, fmt.Errorf("forecast: fourier_regression needs at least %d steps of history, got %d: history is too short", regressionMinHistory, len(y))
	}
	for i, v := range y {
		if math.IsNaN(v) || math.IsInf(v, 0) {
			return nil, fmt.Errorf("forecast: history value %d is %v", i, v)
		}
	}
	end := min(max(trainEnd, regressionMinHistory), len(y))
	return newRegressionFit(slices.Clone(y), season, end, end), nil
}

// refit fits again on y[:trainEnd] with the feature layout of like (a fit
// of the same model on less data), so that the model calibrated and the
// model that forecasts are the same one.
func (m Regression) refit(like Fitted, y []float64, season, trainEnd int) (Fitted, error) {
	f, err := m.Fit(y, season, trainEnd)
	if err != nil {
		return nil, err
	}
	prev, ok := like.(*regressionFit)
	if !ok {
		return f, nil
	}
	g := f.(*regressionFit)
	return newRegressionFit(g.y, season, g.end, prev.layout), nil
}

// newRegressionFit lays out the features for a training history of layout
// steps, to be fitted on targets in y[:end], and keeps y (which it does not
// copy) for Forecast; nothing is fitted yet.
func newRegressionFit(y []float64, season, end, layout int) *regressionFit {
	n := layout
	f := &regressionFit{y: y, season: season, end: end, layout: layout, coef: &regressionCoef{}}
	f.daily = n >= 2*season
	f.weekly = n >= 8*season
	if n >= season {
		f.kd = min(regressionDailyK, (season-1)/2)
	}
	if n >= 14*season {
		f.kw = regressionWeeklyK
	}
	f.p = regressionLags + 2*f.kd + 2*f.kw
	if f.daily {
		f.p += 2
	}
	if f.weekly {
		f.p++
	}
	f.cum = make([]float64, len(y)+1)
	for i, v := range y {
		f.cum[i+1] = f.cum[i] + v
	}
	if f.kd > 0 {
		f.sinD, f.cosD = regressionSincos(season)
	}
	if f.kw > 0 {
		f.sinW, f.cosW = regressionSincos(7 * season)
	}
	f.mean = regressionMean(y[end-min(end, f.window()) : end])
	return f
}

// regressionSincos returns sin and cos of 2*pi*i/period for i in [0, period).
func regressionSincos(period int) (sin, cos []float64) {
	sin, cos = make([]float64, period), make([]float64, period)
	for i := range period {
		sin[i], cos[i] = math.Sincos(2 * math.Pi * float64(i) / float64(period))
	}
	return sin, cos
}

func regressionMean(xs []float64) float64 {
	s := 0.0
	for _, x := range xs {
		s += x
	}
	return s / float64(len(xs))
}

// regressionFit is Regression fitted on a history.
type regressionFit struct {
	y      []float64 // the history, copied
	end    int       // the steps are fitted on targets in y[:end]
	layout int       // the features are those a history of this length allows
	cum    []float64 // cum[i] is the sum of y[:i]
	season int
	daily  bool // the one-day level and one-day-before-target features are used
	weekly bool // the one-week-before-target feature is used
	kd, kw int  // daily and weekly Fourier harmonics
	p      int  // number of features, not counting the intercept
	// Fourier tables over one day and one week.
	sinD, cosD, sinW, cosW []float64
	mean                   float64 // mean of the fit window, for origin 0

	// coef is shared by the fit and its extensions: the same training rows
	// give the same coefficients.
	coef *regressionCoef
}

// regressionCoef holds the per-step coefficients, fitted on first use.
type regressionCoef struct {
	mu    sync.Mutex
	steps []*regressionStep // steps[k-1]
	xbuf  []float64         // design matrix scratch, guarded by mu
}

// Extend implements Fitted: the coefficients stay, the features read y
// (which must not change afterwards), with the running sums of the new
// values appended in new storage (extensions may branch).
func (f *regressionFit) Extend(y []float64) Fitted {
	n0 := len(f.y)
	if len(y) <= n0 {
		return f
	}
	g := *f
	g.y = y
	g.cum = f.cum[: n0+1 : n0+1]
	for i := n0; i < len(y); i++ {
		g.cum = append(g.cum, g.cum[i]+y[i])
	}
	return &g
}

// regressionStep is one horizon step's regression: forecast = c + b . x.
type regressionStep struct {
	c    float64
	b    []float64
	xbar []float64 // feature means over the fit rows, used when origin is 0
}

// window is the number of most recent targets each step is fitted on.
func (f *regressionFit) window() int {
	return max(regressionDays*f.season, regressionMinWindow)
}

// Forecast implements Fitted.
func (f *regressionFit) Forecast(origin, h int) []float64 {
	if h <= 0 {
		return []float64{}
	}
	origin = max(0, min(origin, len(f.y)))
	steps := f.fitted(h)
	out := make([]float64, h)
	x := make([]float64, f.p)
	t := origin - 1
	for k := 1; k <= h; k++ {
		s := steps[k-1]
		if origin == 0 {
			// Nothing known: the lag features take their fitted means.
			copy(x, s.xbar)
			f.fourier(x, k-1)
		} else {
			f.features(x, t, k)
		}
		v := s.c
		for i, b := range s.b {
			v += b * x[i]
		}
		out[k-1] = v
	}
	return out
}

// fitted returns the coefficients of steps 1..h, fitting those not yet
// fitted. The returned slice's elements are never modified afterwards.
func (f *regressionFit) fitted(h int) []*regressionStep {
	c := f.coef
	c.mu.Lock()
	defer c.mu.Unlock()
	for k := len(c.steps) + 1; k <= h; k++ {
		c.steps = append(c.steps, f.fitStep(k))
	}
	return c.steps[:h:h]
}

// features fills x with the features for target t+k known at time t
// (0 <= t < len(y)): only y[:t+1] is read. A lag before the start of the
// history is replaced by the nearest stand-in that is known: y[0] for the
// short lags, the daily lag for the weekly one, y[t] for the daily one, the
// mean of y[:t+1] for the level.
func (f *regressionFit) features(x []float64, t, k int) {
	y := f.y
	x[0] = y[t]
	x[1] = y[max(t-1, 0)]
	x[2] = y[max(t-2, 0)]
	i := regressionLags
	daily := y[t]
	if j := regressionSeasonalIndex(t, k, f.season); j >= 0 {
		daily = y[j]
	}
	if f.daily {
		lo := max(0, t-f.season+1)
		x[i] = (f.cum[t+1] - f.cum[lo]) / float64(t+1-lo)
		x[i+1] = daily
		i += 2
	}
	if f.weekly {
		x[i] = daily
		if j := regressionSeasonalIndex(t, k, 7*f.season); j >= 0 {
			x[i] = y[j]
		}
		i++
	}
	f.fourier(x, t+k)
}

// regressionSeasonalIndex is the index of the target t+k less the fewest
// whole periods that make it known at t; negative when that is before the
// history.
func regressionSeasonalIndex(t, k, period int) int {
	m := (k + period - 1) / period
	return t + k - m*period
}

// fourier fills the Fourier features of x for target index tk.
func (f *regressionFit) fourier(x []float64, tk int) {
	i := regressionLags
	if f.daily {
		i += 2
	}
	if f.weekly {
		i++
	}
	if f.kd > 0 {
		ph := tk % f.season
		for j := 1; j <= f.kd; j++ {
			a := j * ph % f.season
			x[i], x[i+1] = f.sinD[a], f.cosD[a]
			i += 2
		}
	}
	if f.kw > 0 {
		week := 7 * f.season
		ph := tk % week
		for j := 1; j <= f.kw; j++ {
			a := j * ph % week
			x[i], x[i+1] = f.sinW[a], f.cosW[a]
			i += 2
		}
	}
}

// persistence is the last-value forecast, for steps with too few rows.
func (f *regressionFit) persistence() *regressionStep {
	s := &regressionStep{b: make([]float64, f.p), xbar: make([]float64, f.p)}
	s.b[0] = 1
	for i := range regressionLags {
		s.xbar[i] = f.mean
	}
	return s
}

// fitStep fits horizon step k's regression on the rows t whose target t+k
// is in the fit window and whose features are all genuinely known.
func (f *regressionFit) fitStep(k int) *regressionStep {
	n, p := f.end, f.p
	hi := n - 1 - k // last row: its target is the last training value
	lo := regressionLags - 1
	if f.daily {
		lo = max(lo, f.season-1, -regressionSeasonalIndex(0, k, f.season))
	}
	if f.weekly {
		lo = max(lo, -regressionSeasonalIndex(0, k, 7*f.season))
	}
	lo = max(lo, hi-f.window()+1)
	if hi-lo+1 < 2*p {
		return f.persistence()
	}
	stride := (hi - lo + regressionMaxRows) / regressionMaxRows // ceil(rows/max)
	rows := (hi-lo)/stride + 1
	if rows < 2*p {
		return f.persistence()
	}

	// Design matrix and target, centred.
	if cap(f.coef.xbuf) < rows*p {
		f.coef.xbuf = make([]float64, rows*p)
	}
	xs := f.coef.xbuf[:rows*p]
	ys := make([]float64, rows)
	xbar := make([]float64, p)
	ybar := 0.0
	for r := range rows {
		t := hi - r*stride
		row := xs[r*p : (r+1)*p]
		f.features(row, t, k)
		ys[r] = f.y[t+k]
		ybar += ys[r]
		for i, v := range row {
			xbar[i] += v
		}
	}
	fr := float64(rows)
	ybar /= fr
	for i := range xbar {
		xbar[i] /= fr
	}
	for r := range rows {
		row := xs[r*p : (r+1)*p]
		for i := range row {
			row[i] -= xbar[i]
		}
		ys[r] -= ybar
	}
	X := mat.NewDense(rows, p, xs)
	var gram mat.SymDense
	gram.SymOuterK(1, X.T())
	var xty mat.VecDense
	xty.MulVec(X.T(), mat.NewVecDense(rows, ys))

	// Scale every column to unit norm; a (numerically) constant column is
	// zeroed out so that its coefficient is 0.
	scale := make([]float64, p)
	for i := range p {
		tol := 1e-10 * (1 + math.Abs(xbar[i]))
		if d := gram.At(i, i); d > fr*tol*tol {
			scale[i] = 1 / math.Sqrt(d)
		}
	}
	a := mat.NewSymDense(p, nil)
	rhs := mat.NewVecDense(p, nil)
	for i := range p {
		for j := i; j < p; j++ {
			a.SetSym(i, j, gram.At(i, j)*scale[i]*scale[j])
		}
		a.SetSym(i, i, a.At(i, i)+regressionRidge)
		if scale[i] == 0 {
			a.SetSym(i, i, 1)
		}
		rhs.SetVec(i, xty.AtVec(i)*scale[i])
	}
	var chol mat.Cholesky
	if !chol.Factorize(a) {
		return f.persistence()
	}
	var beta mat.VecDense
	if err := chol.SolveVecTo(&beta, rhs); err != nil {
		return f.persistence()
	}
	s := &regressionStep{b: make([]float64, p), xbar: xbar, c: ybar}
	for i := range p {
		s.b[i] = beta.AtVec(i) * scale[i]
		s.c -= s.b[i] * xbar[i]
	}
	for _, v := range s.b {
		if math.IsNaN(v) || math.IsInf(v, 0) {
			return f.persistence()
		}
	}
	return s
}
