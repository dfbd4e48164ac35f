package forecast

import (
	"fmt"
	"math"

	"gonum.org/v1/gonum/optimize"
)

// ETS is exponential smoothing with additive errors, a level, a damped
// additive trend and an additive seasonal component: ETS(A,Ad,A), the damped
// Holt-Winters method. With y_t observed after the states of step t-1,
//
//	e_t = y_t - (l_{t-1} + φ b_{t-1} + s_{t-m})
//	l_t = l_{t-1} + φ b_{t-1} + α e_t
//	b_t = φ b_{t-1} + β e_t
//	s_t = s_{t-m} + γ e_t
//
// and the forecast k steps after step t is l_t + (φ + … + φ^k) b_t +
// s_{t+k-m⌈k/m⌉}.
//
// Fit estimates α, β, γ and φ once, by minimising the sum of squared
// one-step-ahead errors with Nelder-Mead over logistic transforms that keep
// 0 < α < 1, 0 < β < α, 0 < γ < 1-α and 0.8 < φ < 0.98. The evaluations
// are capped (etsMaxEvals), and on a series longer than etsFitSeasons
// seasons the parameters are fitted on its last etsFitSeasons seasons only
// (14 days at a daily season); the states are then filtered over the whole
// series. The initial states come from the first two seasons: the trend is
// the difference of their means over the season, the level is the first
// season's mean taken back along that trend to the step before the first,
// and each seasonal index is its slot's deviation from that trend line
// averaged over the two seasons (halving the noise of using the first
// season alone; the indices sum to zero).
//
// With a season under 2 or fewer than 2*season+1 values, Fit falls back to
// the non-seasonal damped trend model ETS(A,Ad,N) (ETSFit.Season is then 0),
// initialised from the first few values.
//
// Forecasts are not clamped at zero. The model is deterministic and does no
// I/O (gonum's optimiser runs its evaluations on its own goroutines, one at
// a time).
type ETS struct{}

// Name is "ets".
func (ETS) Name() string { return "ets" }

const (
	// etsMaxEvals caps the SSE evaluations of one fit.
	etsMaxEvals = 300
	// etsFitSeasons is how many of the last seasons the parameters are fitted
	// on when the series is longer.
	etsFitSeasons = 14
	// etsMinFit is the fewest values the parameters are fitted on; shorter
	// series use etsDefault.
	etsMinFit = 8
	etsPhiMin = 0.8
	etsPhiMax = 0.98
)

// etsDefault are the parameters the optimiser starts from, and those used
// when there are too few values to fit.
var etsDefault = etsParams{alpha: 0.3, beta: 0.03, gamma: 0.07, phi: 0.9}

type etsParams struct{ alpha, beta, gamma, phi float64 }

// etsDefaults is etsDefault for season m (0: none, so no gamma).
func etsDefaults(m int) etsParams {
	p := etsDefault
	if m == 0 {
		p.gamma = 0
	}
	return p
}

// ETSFit is ETS fitted on a series: its parameters and its filtered states
// at every step, so that Forecast from any origin costs O(h).
type ETSFit struct {
	Alpha, Beta, Gamma, Phi float64
	// Season is the seasonal period used; 0 for the non-seasonal fallback.
	Season int

	// level[t] and trend[t] are the states after y[:t] (level[0] and
	// trend[0] the initial ones).
	level, trend []float64
	// seas[Season+t] is s_t; seas[:Season] are the initial indices
	// s_{-Season}, …, s_{-1}. Nil when Season is 0.
	seas []float64
}

// Fit fits ETS on y with season steps per seasonal cycle. It returns
// ErrNoHistory for an empty y and an error for a NaN or infinite value.
func (ETS) Fit(y []float64, season, trainEnd int) (Fitted, error) {
	n := min(max(trainEnd, 1), len(y))
	if n == 0 {
		return nil, ErrNoHistory
	}
	for i, v := range y {
		if math.IsNaN(v) || math.IsInf(v, 0) {
			return nil, fmt.Errorf("forecast: ets: value %d is %v", i, v)
		}
	}
	m := season
	if season < 2 || n < 2*season+1 {
		m = 0
	}
	win := y[:n]
	if m > 0 && n > etsFitSeasons*m {
		win = y[n-etsFitSeasons*m : n]
	}
	p := fitETS(win, m)
	f := filterETS(y, m, p)
	if d := etsDefaults(m); !f.finite() && p != d {
		f = filterETS(y, m, d)
	}
	return f, nil
}

// etsInit returns the initial level and trend of y (the states before
// y[0]) from its first two blocks of q values, and fills seas, when it is
// not nil (len q), with each slot's deviation from that trend line averaged
// over the two blocks. A y shorter than 2 starts at its first value with no
// trend.
func etsInit(y []float64, q int, seas []float64) (l, b float64) {
	if q < 1 || len(y) < 2*q {
		return y[0], 0
	}
	var m1, m2 float64
	for _, v := range y[:q] {
		m1 += v
	}
	for _, v := range y[q : 2*q] {
		m2 += v
	}
	m1 /= float64(q)
	m2 /= float64(q)
	b = (m2 - m1) / float64(q)
	mid := float64(q-1) / 2 // m1 is the level at step mid
	for j := range seas {
		// The slot's deviation from the trend line, averaged over both blocks.
		dev := y[j] + y[j+q] - 2*(m1+b*(float64(j)-mid)) - b*float64(q)
		seas[j] = dev / 2
	}
	return m1 - b*(mid+1), b
}

// nonSeasonalBlock is the block size etsInit uses without a season.
func nonSeasonalBlock(n int) int { return min(n/2, 5) }

// fitETS estimates the parameters on y, with season m (0: none).
func fitETS(y []float64, m int) etsParams {
	if len(y) < etsMinFit {
		return etsDefaults(m)
	}
	ring := make([]float64, max(m, 1))
	init := make([]float64, m)
	var l0, b0 float64
	if m > 0 {
		l0, b0 = etsInit(y, m, init)
	} else {
		l0, b0 = etsInit(y, nonSeasonalBlock(len(y)), nil)
	}
	seasonal := m > 0
	obj := func(x []float64) float64 {
		copy(ring, init) // ring stays zero without a season
		v := etsSSE(y, etsFromX(x, seasonal), l0, b0, ring)
		if math.IsNaN(v) || math.IsInf(v, 0) {
			return math.MaxFloat64
		}
		return v
	}
	x0 := etsToX(etsDefault, seasonal)
	settings := &optimize.Settings{
		FuncEvaluations: etsMaxEvals,
		Converger:       &optimize.FunctionConverge{Relative: 1e-8, Iterations: 40},
	}
	res, err := optimize.Minimize(optimize.Problem{Func: obj}, x0, settings, &optimize.NelderMead{SimplexSize: 1})
	if err != nil || res == nil || !(res.F < math.MaxFloat64) {
		return etsFromX(x0, seasonal)
	}
	return etsFromX(res.X, seasonal)
}

// etsSSE is the sum of squared one-step errors of the filter over y from
// level l and trend b, with ring holding the seasonal indices for the
// first len(ring) steps (zeros for no season, when gamma is 0). It
// overwrites ring and does not allocate.
//
// It runs the filter in the equivalent states u_t = l_t + φb_t (the
// deseasonalised one-step forecast) and d_t = φb_t, which shortens the
// chain of dependent floating-point operations per step (the loop is
// latency-bound) to about half of the textbook form's:
//
//	e = w - u, with w = y_t - s_{t-m}
//	u' = (1-α-φβ) u + ((α+φβ) w + φ d)
//	d' = (φβ w + φ d) - φβ u
func etsSSE(y []float64, p etsParams, l, b float64, ring []float64) float64 {
	c2 := p.phi * p.beta
	c1 := p.alpha + c2
	a1 := 1 - c1
	phi, gamma := p.phi, p.gamma
	u, d := l+phi*b, phi*b
	var sum float64
	if len(ring) == 1 && ring[0] == 0 && gamma == 0 {
		// No season: the index stays zero (while the errors are finite;
		// once one is not, neither is the sum), so w is y_t, and the
		// filter keeps its states in registers.
		for _, w := range y {
			e := w - u
			sum += e * e
			pd := phi * d
			u, d = a1*u+(c1*w+pd), (c2*w+pd)-c2*u
		}
		return sum
	}
	j := 0
	for _, v := range y {
		s := ring[j]
		w := v - s
		e := w - u
		sum += e * e
		ring[j] = s + gamma*e
		pd := phi * d
		u, d = a1*u+(c1*w+pd), (c2*w+pd)-c2*u
		j++
		if j == len(ring) {
			j = 0
		}
	}
	return sum
}

// filterETS runs the filter over all of y with p and keeps every state.
func filterETS(y []float64, m int, p etsParams) *ETSFit {
	n := len(y)
	f := &ETSFit{
		Alpha: p.alpha, Beta: p.beta, Gamma: p.gamma, Phi: p.phi,
		Season: m,
		level:  make([]float64, n+1),
		trend:  make([]float64, n+1),
	}
	var l, b float64
	if m > 0 {
		f.seas = make([]float64, m+n)
		l, b = etsInit(y, m, f.seas[:m])
	} else {
		l, b = etsInit(y, nonSeasonalBlock(n), nil)
	}
	f.level[0], f.trend[0] = l, b
	for t, v := range y {
		var s float64
		if m > 0 {
			s = f.seas[t] // s_{t-m}
		}
		pb := p.phi * b
		e := v - (l + pb + s)
		l += pb + p.alpha*e
		b = pb + p.beta*e
		if m > 0 {
			f.seas[m+t] = s + p.gamma*e
		}
		f.level[t+1], f.trend[t+1] = l, b
	}
	return f
}

// Extend implements Fitted: the parameters stay, the filter runs on over
// the new values of y, into new storage (extensions may branch).
func (f *ETSFit) Extend(y []float64) Fitted { return f.extend(y, false) }

func (f *ETSFit) extendInPlace(y []float64) Fitted { return f.extend(y, true) }

// extend is Extend, into the arrays' spare room when inPlace.
func (f *ETSFit) extend(y []float64, inPlace bool) Fitted {
	n0 := len(f.level) - 1 // values filtered so far
	if len(y) <= n0 {
		return f
	}
	g := *f
	g.level = append(room(f.level[:n0+1], inPlace), make([]float64, len(y)-n0)...)
	g.trend = append(room(f.trend[:n0+1], inPlace), make([]float64, len(y)-n0)...)
	m := f.Season
	if m > 0 {
		g.seas = append(room(f.seas, inPlace), make([]float64, len(y)-n0)...)
	}
	l, b := f.level[n0], f.trend[n0]
	for t := n0; t < len(y); t++ {
		var s float64
		if m > 0 {
			s = g.seas[t] // s_{t-m}
		}
		pb := g.Phi * b
		e := y[t] - (l + pb + s)
		l += pb + g.Alpha*e
		b = pb + g.Beta*e
		if m > 0 {
			g.seas[m+t] = s + g.Gamma*e
		}
		g.level[t+1], g.trend[t+1] = l, b
	}
	return &g
}

// finite reports whether every state is finite.
func (f *ETSFit) finite() bool {
	for _, xs := range [][]float64{f.level, f.trend, f.seas} {
		for _, v := range xs {
			if math.IsNaN(v) || math.IsInf(v, 0) {
				return false
			}
		}
	}
	return true
}

// Forecast returns the point forecasts for the h steps after y[:origin],
// from the states filtered over y[:origin] with the fitted parameters.
// States within the first two seasons rest on initial states estimated
// from those two seasons, so forecasts from such early origins are not
// strictly out of sample. It panics if origin is outside [0, len(y)]; a
// negative h gives no forecasts.
func (f *ETSFit) Forecast(origin, h int) []float64 {
	if origin < 0 || origin >= len(f.level) {
		panic(fmt.Sprintf("forecast: ets origin %d is outside [0, %d]", origin, len(f.level)-1))
	}
	out := make([]float64, max(h, 0))
	l, b := f.level[origin], f.trend[origin]
	m := f.Season
	var damp, pk float64 = 0, 1
	for k := 1; k <= h; k++ {
		pk *= f.Phi
		damp += pk
		v := l + damp*b
		if m > 0 {
			// s_{t+k-m⌈k/m⌉} with t = origin-1, at index m+t+k-m⌈k/m⌉.
			v += f.seas[origin-1+k-m*((k+m-1)/m)+m]
		}
		out[k-1] = v
	}
	return out
}

// logistic is 1/(1+e^-x), with x clamped to ±18 so that the result stays
// strictly inside (0, 1).
func logistic(x float64) float64 {
	return 1 / (1 + math.Exp(-min(max(x, -18), 18)))
}

func logit(p float64) float64 { return math.Log(p / (1 - p)) }

// etsFromX maps unconstrained x (α, β/α, γ/(1-α), (φ-0.8)/0.18 in logits;
// no γ without a season) to parameters.
func etsFromX(x []float64, seasonal bool) etsParams {
	a := logistic(x[0])
	p := etsParams{alpha: a, beta: a * logistic(x[1])}
	phi := x[2]
	if seasonal {
		p.gamma = (1 - a) * logistic(x[2])
		phi = x[3]
	}
	p.phi = etsPhiMin + (etsPhiMax-etsPhiMin)*logistic(phi)
	return p
}

// etsToX is the inverse of etsFromX.
func etsToX(p etsParams, seasonal bool) []float64 {
	x := []float64{logit(p.alpha), logit(p.beta / p.alpha)}
	if seasonal {
		x = append(x, logit(p.gamma/(1-p.alpha)))
	}
	return append(x, logit((p.phi-etsPhiMin)/(etsPhiMax-etsPhiMin)))
}
