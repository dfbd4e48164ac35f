package forecast

import (
	"fmt"
	"math"
)

// AdjustedTheta is the Theta method (simple exponential smoothing plus
// half the linear trend, the M3 competition's winner) on the series less
// its daily profile, the profile added back: AdjustedHolt's decomposition
// with a level that follows the data and a drift estimated over the whole
// fit window, which does not chase the last hours' slope.
type AdjustedTheta struct{}

// Name is "adjusted_theta".
func (AdjustedTheta) Name() string { return "adjusted_theta" }

// Fit needs a week of history before trainEnd, as AdjustedHolt does.
func (AdjustedTheta) Fit(y []float64, season, trainEnd int) (Fitted, error) {
	return fitAdjusted("adjusted_theta", theta{}, y, season, trainEnd)
}

// theta is the Theta method on a series without season: its smoothing
// parameter by least squares on the last etsFitSeasons days before
// trainEnd, its drift half the least-squares slope over them.
type theta struct{}

func (theta) Name() string { return "theta" }

func (theta) Fit(y []float64, season, trainEnd int) (Fitted, error) {
	end := min(trainEnd, len(y))
	if end < 2 {
		return nil, fmt.Errorf("theta needs 2 steps of history before its first forecast, has %d", end)
	}
	w := y[max(0, end-etsFitSeasons*max(season, 1)):end]
	alpha := goldenMin(func(a float64) float64 { return sesFilter(w, a, nil) }, 0.001, 1, 40)
	var st, sy, stt, sty float64
	for i, v := range w {
		t := float64(i)
		st += t
		sy += v
		stt += t * t
		sty += t * v
	}
	n := float64(len(w))
	f := &thetaFit{alpha: alpha, drift: (n*sty - st*sy) / (n*stt - st*st) / 2, level: make([]float64, len(y)+1)}
	sesFilter(y, alpha, f.level)
	return f, nil
}

// sesFilter runs simple exponential smoothing with parameter alpha over y
// from its first value and returns the sum of squared one-step errors;
// when level is not nil, level[t] is set to the level after y[:t].
func sesFilter(y []float64, alpha float64, level []float64) float64 {
	l, sse := y[0], 0.0
	for t, v := range y {
		if level != nil {
			level[t] = l
		}
		e := v - l
		sse += e * e
		l += alpha * e
	}
	if level != nil {
		level[len(y)] = l
	}
	return sse
}

// goldenMin minimises f over [lo, hi] by golden-section search in iters
// steps and returns the middle of the last bracket.
func goldenMin(f func(float64) float64, lo, hi float64, iters int) float64 {
	g := (math.Sqrt(5) - 1) / 2
	x1, x2 := hi-g*(hi-lo), lo+g*(hi-lo)
	f1, f2 := f(x1), f(x2)
	for range iters {
		if f1 < f2 {
			hi, x2, f2 = x2, x1, f1
			x1 = hi - g*(hi-lo)
			f1 = f(x1)
		} else {
			lo, x1, f1 = x1, x2, f2
			x2 = lo + g*(hi-lo)
			f2 = f(x2)
		}
	}
	return (lo + hi) / 2
}

type thetaFit struct {
	alpha, drift float64
	level        []float64 // level[t]: after y[:t]
}

// Extend implements Fitted.
func (f *thetaFit) Extend(y []float64) Fitted { return f.extend(y, false) }

func (f *thetaFit) extendInPlace(y []float64) Fitted { return f.extend(y, true) }

// extend is Extend, into the level's spare room when inPlace.
func (f *thetaFit) extend(y []float64, inPlace bool) Fitted {
	n0 := len(f.level) - 1
	if len(y) <= n0 {
		return f
	}
	g := *f
	g.level = append(room(f.level[:n0+1], inPlace), make([]float64, len(y)-n0)...)
	l := f.level[n0]
	for t := n0; t < len(y); t++ {
		l += g.alpha * (y[t] - l)
		g.level[t+1] = l
	}
	return &g
}

// Forecast implements Fitted: the level plus the drift over k-1+1/alpha
// steps k steps ahead (Hyndman and Billah's form of Theta's forecast).
func (f *thetaFit) Forecast(origin, h int) []float64 {
	out := make([]float64, h)
	for k := range out {
		out[k] = f.level[origin] + f.drift*(float64(k)+1/f.alpha)
	}
	return out
}
