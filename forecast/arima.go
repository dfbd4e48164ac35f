package forecast

import (
	"fmt"
	"math"

	"gonum.org/v1/gonum/mat"
)

// arimaLags is DiffAR's autoregressive order: two lags were as good as
// three or six on the shared traces and cuts of them, one worse.
const arimaLags = 2

// DiffAR is ARIMA(2,1,0) with drift: the step-over-step changes regressed
// by least squares on the two before them and a constant, fitted on the
// last 14 days, and forecast recursively. It carries the momentum of the
// last steps (a burst that is still rising) and, unlike the models of the
// daily cycle, needs no more than a few hours of history.
type DiffAR struct{}

// Name is "arima_210".
func (DiffAR) Name() string { return "arima_210" }

// Fit estimates the coefficients on the changes over the last
// etsFitSeasons days before trainEnd.
func (DiffAR) Fit(y []float64, season, trainEnd int) (Fitted, error) {
	end := min(trainEnd, len(y))
	const p, q = arimaLags, arimaLags + 1
	x := y[max(0, end-etsFitSeasons*max(season, 1)):end]
	if len(x) < 4*q {
		return nil, fmt.Errorf("arima_210 needs %d steps of history before its first forecast, has %d", 4*q, end)
	}
	// Normal equations for the change at t on 1 and the p changes before.
	var gram [q * q]float64
	var rhs [q]float64
	var row [q]float64
	for t := p + 1; t < len(x); t++ {
		row[0] = 1
		for i := 1; i <= p; i++ {
			row[i] = x[t-i] - x[t-i-1]
		}
		d := x[t] - x[t-1]
		for i := range q {
			rhs[i] += row[i] * d
			for j := range q {
				gram[i*q+j] += row[i] * row[j]
			}
		}
	}
	// A trace of ridge keeps a constant series (all changes zero) solvable.
	for i := range q {
		gram[i*q+i] += 1e-9 * (1 + gram[i*q+i])
	}
	coef := make([]float64, q) // the random walk, if the system cannot be solved
	var sol mat.VecDense
	if err := sol.SolveVec(mat.NewDense(q, q, gram[:]), mat.NewVecDense(q, rhs[:])); err == nil {
		for i := range q {
			coef[i] = sol.AtVec(i)
		}
	}
	for _, c := range coef {
		if math.IsNaN(c) || math.IsInf(c, 0) {
			coef = make([]float64, q)
			break
		}
	}
	return diffARFit{y: y, coef: coef}, nil
}

type diffARFit struct {
	y    []float64
	coef []float64 // constant, then the lags' coefficients
}

// Extend implements Fitted.
func (f diffARFit) Extend(y []float64) Fitted { f.y = y; return f }

// Forecast implements Fitted: the changes forecast recursively from the
// last p and summed onto the last value. Origins too early for p changes
// repeat the last value.
func (f diffARFit) Forecast(origin, h int) []float64 {
	out := make([]float64, h)
	p := len(f.coef) - 1
	if origin < p+1 {
		for k := range out {
			out[k] = f.y[max(origin-1, 0)]
		}
		return out
	}
	changes := make([]float64, p, p+h)
	for i := range p {
		changes[i] = f.y[origin-p+i] - f.y[origin-p+i-1]
	}
	last := f.y[origin-1]
	for k := range out {
		d := f.coef[0]
		n := len(changes)
		for i := 1; i <= p; i++ {
			d += f.coef[i] * changes[n-i]
		}
		changes = append(changes, d)
		last += d
		out[k] = last
	}
	return out
}
