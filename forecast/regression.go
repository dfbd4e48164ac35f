package forecast

import (
	"fmt"
	"math"
	"slices"
	"sync"

	"gonum.org/v1/gonum/mat"
)

// Regression is a direct multi-horizon regression on changes: for each
// horizon step k it fits its own robust regression (ridge-stabilised) of the
// change y[t+k] - y[t] on features known at time t, all of them changes or
// deviations, so the forecast starts from the last value and a shift of
// level does not pull it back to the window's mean:
//
//   - the recent changes y[t]-y[t-1], y[t-1]-y[t-2], y[t-2]-y[t-3];
//   - the last value's deviation from the mean of the last day,
//     y[t-season+1..t], when the history holds at least two days (mean
//     reversion, free of the daily cycle);
//   - the change over the same k steps one day earlier, y[t+k-season] -
//     y[t-season] (whole days earlier when k > season), when the history
//     holds at least two days;
//   - the same one week earlier, when the history holds at least eight days;
//   - the change of daily Fourier terms sin/cos(2*pi*j*t/season) from t to
//     t+k, j = 1..5 (fewer for a season under 11 steps), when the history
//     holds at least a day;
//   - the same for weekly Fourier terms (period 7*season, j = 1..2) when the
//     history holds at least two weeks;
//   - an intercept (a drift).
//
// Each step's regression is fitted on the targets of the last 14 days of
// the history (at least 256 steps); when that window holds more than 2048
// usable rows (e.g. 1-minute data) it is subsampled by an even stride down
// to at most 2048 rows. The loss is Huber's, with its threshold at 0.7
// robust standard deviations of the residuals (by their median absolute
// value), fitted by a few rounds of iteratively reweighted least squares
// from the least-squares fit: demand jumps when large jobs start or end,
// and squared error lets those few jumps set the coefficients; the
// threshold is low because forecasts are judged by absolute error. Each
// weighted least-squares fit centres the features and scales them to unit
// norm before the normal equations are solved by Cholesky with a ridge of
// 1e-6, so collinear or constant features (a flat series) are harmless. A
// step with too few rows (fewer than twice the number of features)
// forecasts the last value.
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
	regressionMaxRows    = 2048 // rows per step's regression before subsampling
	regressionDailyK     = 5    // daily Fourier harmonics
	regressionWeeklyK    = 2    // weekly Fourier harmonics
	regressionRidge      = 1e-6 // ridge on the unit-norm normal equations
	regressionMinHistory = 8    // shortest history Fit accepts
	regressionLags       = 3    // changes at t, t-1 and t-2
	regressionHuberK     = 0.7  // Huber threshold, in robust standard deviations
	regressionHuberIters = 3    // reweighting rounds after least squares
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
	// Scratch for fitStep, reused across steps, guarded by mu.
	xbuf []float64 // the design matrix, its weighted, centred copy, and that by columns
	vbuf []float64 // per-row vectors: targets, weights, residuals
	gram []float64 // the normal equations' matrix, upper triangle
}

// Extend implements Fitted: the coefficients stay, the features read y
// (which must not change afterwards), with the running sums of the new
// values appended in new storage (extensions may branch).
func (f *regressionFit) Extend(y []float64) Fitted { return f.extend(y, false) }

func (f *regressionFit) extendInPlace(y []float64) Fitted { return f.extend(y, true) }

// extend is Extend, into the sums' spare room when inPlace.
func (f *regressionFit) extend(y []float64, inPlace bool) Fitted {
	n0 := len(f.y)
	if len(y) <= n0 {
		return f
	}
	g := *f
	g.y = y
	g.cum = room(f.cum[:n0+1], inPlace)
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
	// level is the mean of the fit window, the level forecast from origin 0.
	level float64
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
		v := s.level
		if origin == 0 {
			// Nothing known: the fit window's mean changed as the
			// features do on average.
			copy(x, s.xbar)
		} else {
			f.features(x, t, k)
			v = f.y[t]
		}
		v += s.c
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
// (0 <= t < len(y)): only y[:t+1] is read. A value before the start of the
// history is replaced by y[0] for the recent changes and the mean of
// y[:t+1] for the level; a change a day or a week earlier that starts
// before the history by no change (a day) or the daily one (a week).
func (f *regressionFit) features(x []float64, t, k int) {
	y := f.y
	x[0] = y[t] - y[max(t-1, 0)]
	x[1] = y[max(t-1, 0)] - y[max(t-2, 0)]
	x[2] = y[max(t-2, 0)] - y[max(t-3, 0)]
	i := regressionLags
	if f.daily {
		lo := max(0, t-f.season+1)
		x[i] = y[t] - (f.cum[t+1]-f.cum[lo])/float64(t+1-lo)
		x[i+1] = regressionSeasonalChange(y, t, k, f.season)
		if math.IsNaN(x[i+1]) {
			x[i+1] = 0
		}
		i += 2
	}
	if f.weekly {
		x[i] = x[i-1]
		if c := regressionSeasonalChange(y, t, k, 7*f.season); !math.IsNaN(c) {
			x[i] = c
		}
		i++
	}
	// The Fourier terms' change from t to t+k.
	f.fourier(x[i:], t+k)
	var at [2*regressionDailyK + 2*regressionWeeklyK]float64
	f.fourier(at[:], t)
	for j := range f.p - i {
		x[i+j] -= at[j]
	}
}

// regressionSeasonalChange is the change over the k steps that end at the
// target t+k less the fewest whole periods that make it known at t; NaN
// when it starts before the history.
func regressionSeasonalChange(y []float64, t, k, period int) float64 {
	j := regressionSeasonalIndex(t, k, period)
	if j-k < 0 {
		return math.NaN()
	}
	return y[j] - y[j-k]
}

// regressionSeasonalIndex is the index of the target t+k less the fewest
// whole periods that make it known at t; negative when that is before the
// history.
func regressionSeasonalIndex(t, k, period int) int {
	m := (k + period - 1) / period
	return t + k - m*period
}

// fourier fills x[:2*(kd+kw)] with the Fourier terms at index tk.
func (f *regressionFit) fourier(x []float64, tk int) {
	i := 0
	if f.kd > 0 {
		ph := tk % f.season
		a := 0 // j * ph % season
		for range f.kd {
			if a += ph; a >= f.season {
				a -= f.season
			}
			x[i], x[i+1] = f.sinD[a], f.cosD[a]
			i += 2
		}
	}
	if f.kw > 0 {
		week := 7 * f.season
		ph := tk % week
		a := 0
		for range f.kw {
			if a += ph; a >= week {
				a -= week
			}
			x[i], x[i+1] = f.sinW[a], f.cosW[a]
			i += 2
		}
	}
}

// persistence is the last-value forecast (no change), for steps with too
// few rows.
func (f *regressionFit) persistence() *regressionStep {
	return &regressionStep{b: make([]float64, f.p), xbar: make([]float64, f.p), level: f.mean}
}

// fitStep fits horizon step k's regression on the rows t whose target t+k
// is in the fit window and whose features are all genuinely known.
func (f *regressionFit) fitStep(k int) *regressionStep {
	n, p := f.end, f.p
	hi := n - 1 - k // last row: its target is the last training value
	lo := regressionLags
	if f.daily {
		lo = max(lo, f.season-1, k-regressionSeasonalIndex(0, k, f.season))
	}
	if f.weekly {
		lo = max(lo, k-regressionSeasonalIndex(0, k, 7*f.season))
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

	// Design matrix and target.
	if cap(f.coef.xbuf) < 3*rows*p {
		f.coef.xbuf = make([]float64, 3*rows*p)
	}
	raw := f.coef.xbuf[:rows*p]
	work := f.coef.xbuf[rows*p : 2*rows*p]
	cols := f.coef.xbuf[2*rows*p : 3*rows*p]
	if cap(f.coef.vbuf) < 5*rows {
		f.coef.vbuf = make([]float64, 5*rows)
	}
	ys, w, res, sorted, yc := f.coef.vbuf[:rows], f.coef.vbuf[rows:2*rows], f.coef.vbuf[2*rows:3*rows], f.coef.vbuf[3*rows:4*rows], f.coef.vbuf[4*rows:5*rows]
	if cap(f.coef.gram) < p*p {
		f.coef.gram = make([]float64, p*p)
	}
	gram := f.coef.gram[:p*p]
	for r := range rows {
		t := hi - r*stride
		f.features(raw[r*p:(r+1)*p], t, k)
		ys[r] = f.y[t+k] - f.y[t]
		w[r] = 1
	}
	s := solveWeighted(raw, work, cols, gram, ys, yc, w, rows, p)
	if s == nil {
		return f.persistence()
	}
	s.level = f.mean
	// Huber's loss by iteratively reweighted least squares.
	for range regressionHuberIters {
		for r := range rows {
			v := s.c
			for i, b := range s.b {
				v += b * raw[r*p+i]
			}
			res[r] = math.Abs(ys[r] - v)
		}
		copy(sorted, res)
		c := regressionHuberK * nthSmallest(sorted, rows/2) / 0.6745 // 0.6745: the normal's MAD
		if c <= 0 {
			break
		}
		for r := range rows {
			w[r] = 1
			if res[r] > c {
				w[r] = c / res[r]
			}
		}
		if s2 := solveWeighted(raw, work, cols, gram, ys, yc, w, rows, p); s2 != nil {
			s2.level = s.level
			s = s2
		}
	}
	return s
}

// solveWeighted fits ys on the rows of raw (rows x p) by weighted ridge
// least squares with weights w; work (the size of raw), gram (p x p) and
// yc (rows) and cols (the size of raw) are scratch. nil when it cannot.
func solveWeighted(raw, work, cols, gram, ys, yc, w []float64, rows, p int) *regressionStep {
	xbar := make([]float64, p)
	ybar, sw := 0.0, 0.0
	for r := range rows {
		for i := range p {
			xbar[i] += w[r] * raw[r*p+i]
		}
		ybar += w[r] * ys[r]
		sw += w[r]
	}
	ybar /= sw
	for i := range xbar {
		xbar[i] /= sw
	}
	for r := range rows {
		sq := math.Sqrt(w[r])
		for i := range p {
			work[r*p+i] = sq * (raw[r*p+i] - xbar[i])
		}
		yc[r] = sq * (ys[r] - ybar)
	}
	gramUpper(gram, work, cols, rows, p)
	X := mat.NewDense(rows, p, work)
	var xty mat.VecDense
	xty.MulVec(X.T(), mat.NewVecDense(rows, yc))

	// Scale every column to unit norm; a (numerically) constant column is
	// zeroed out so that its coefficient is 0.
	scale := make([]float64, p)
	for i := range p {
		tol := 1e-10 * (1 + math.Abs(xbar[i]))
		if d := gram[i*p+i]; d > sw*tol*tol {
			scale[i] = 1 / math.Sqrt(d)
		}
	}
	a := mat.NewSymDense(p, nil)
	rhs := mat.NewVecDense(p, nil)
	for i := range p {
		for j := i; j < p; j++ {
			a.SetSym(i, j, gram[i*p+j]*scale[i]*scale[j])
		}
		a.SetSym(i, i, a.At(i, i)+regressionRidge)
		if scale[i] == 0 {
			a.SetSym(i, i, 1)
		}
		rhs.SetVec(i, xty.AtVec(i)*scale[i])
	}
	var chol mat.Cholesky
	if !chol.Factorize(a) {
		return nil
	}
	var beta mat.VecDense
	if err := chol.SolveVecTo(&beta, rhs); err != nil {
		return nil
	}
	s := &regressionStep{b: make([]float64, p), xbar: xbar, c: ybar}
	for i := range p {
		s.b[i] = beta.AtVec(i) * scale[i]
		s.c -= s.b[i] * xbar[i]
	}
	for _, v := range s.b {
		if math.IsNaN(v) || math.IsInf(v, 0) {
			return nil
		}
	}
	return s
}

// nthSmallest returns the k-th smallest of xs (0-based; xs holds no NaN),
// reordering xs: Hoare's quickselect, the same value a sort would put at
// xs[k] in linear rather than n log n time.
func nthSmallest(xs []float64, k int) float64 {
	lo, hi := 0, len(xs)-1
	for lo < hi {
		mid := lo + (hi-lo)/2
		if xs[mid] < xs[lo] {
			xs[mid], xs[lo] = xs[lo], xs[mid]
		}
		if xs[hi] < xs[lo] {
			xs[hi], xs[lo] = xs[lo], xs[hi]
		}
		if xs[hi] < xs[mid] {
			xs[hi], xs[mid] = xs[mid], xs[hi]
		}
		pivot := xs[mid]
		i, j := lo, hi
		for i <= j {
			for xs[i] < pivot {
				i++
			}
			for xs[j] > pivot {
				j--
			}
			if i <= j {
				xs[i], xs[j] = xs[j], xs[i]
				i++
				j--
			}
		}
		switch {
		case k <= j:
			hi = j
		case k >= i:
			lo = i
		default:
			return xs[k]
		}
	}
	return xs[k]
}

// gramUpper fills the upper triangle of gram (p x p) with xᵀx for x, rows x
// p by rows, using cols (the same size) for x by columns. Each element is
// summed over the rows in order, as BLAS's dsyrk does (so it rounds
// alike), four elements at a time.
func gramUpper(gram, x, cols []float64, rows, p int) {
	for r := range rows {
		for i, v := range x[r*p : (r+1)*p] {
			cols[i*rows+r] = v
		}
	}
	for i := range p {
		ci := cols[i*rows : (i+1)*rows]
		for j := i; j < p; j += 4 {
			if p-j < 4 {
				// The last four columns, some again (and some,
				// before i, of the lower triangle, which is unused).
				j = max(p-4, 0)
			}
			if p-j < 4 {
				for jj := j; jj < p; jj++ {
					cj := cols[jj*rows : (jj+1)*rows]
					acc := 0.0
					for r, a := range ci {
						acc += float64(a * cj[r])
					}
					gram[i*p+jj] = acc
				}
				break
			}
			c0 := cols[j*rows : (j+1)*rows][:len(ci)]
			c1 := cols[(j+1)*rows : (j+2)*rows][:len(ci)]
			c2 := cols[(j+2)*rows : (j+3)*rows][:len(ci)]
			c3 := cols[(j+3)*rows : (j+4)*rows][:len(ci)]
			var a0, a1, a2, a3 float64
			for r, a := range ci {
				a0 += float64(a * c0[r])
				a1 += float64(a * c1[r])
				a2 += float64(a * c2[r])
				a3 += float64(a * c3[r])
			}
			gram[i*p+j], gram[i*p+j+1], gram[i*p+j+2], gram[i*p+j+3] = a0, a1, a2, a3
			if j+4 >= p {
				break
			}
		}
	}
}
