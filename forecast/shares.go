package forecast

import (
	"fmt"
	"math"
)

// TierScore is one tier's backtest figures with its cumulative demand
// forecast two ways (BacktestShares).
type TierScore struct {
	Tier string `json:"tier"`
	// Cumulative is auto on the tier's own cumulative series: how the
	// controller forecasts a tier.
	Cumulative Score `json:"cumulative"`
	// Share is auto on the total, scaled by the tier's share of the total
	// over the steps before the origin.
	Share Score `json:"share"`
}

// BacktestShares backtests the two ways to forecast tiers' demand: each
// tier's cumulative series (cum[k] is tier k's demand with the higher
// tiers', in rank order; the last is the total) forecast by itself, and
// the total's forecast times the tier's share of the total over the
// shareSteps steps before the origin (at least 1: the sum of the tier's
// cumulative values over the sum of the total's; all of it where the
// total's is 0). Both are auto's
// choice among models, at the same origins as Backtest's, scored against
// the tier's cumulative series; the total's two figures are the same. It
// returns one TierScore per tier and the number of origins.
func BacktestShares(names []string, cum [][]float64, shareSteps int, models []Model, opt BacktestOptions) ([]TierScore, int, error) {
	if shareSteps < 1 {
		return nil, 0, fmt.Errorf("backtest: a share over %d steps: want 1 or more", shareSteps)
	}
	if len(cum) == 0 || len(names) != len(cum) {
		return nil, 0, fmt.Errorf("backtest: %d tier name(s) for %d series", len(names), len(cum))
	}
	n := len(cum[0])
	for k, y := range cum {
		if len(y) != n {
			return nil, 0, fmt.Errorf("backtest: tier %q has %d steps, tier %q %d", names[k], len(y), names[0], n)
		}
		for i, v := range y {
			if math.IsNaN(v) || math.IsInf(v, 0) {
				return nil, 0, fmt.Errorf("backtest: tier %q: value %d is %v", names[k], i, v)
			}
		}
	}
	b, err := newBacktest(n, &opt)
	if err != nil {
		return nil, 0, err
	}
	h, season, total := opt.Horizon, opt.Season, cum[len(cum)-1]
	direct, shared := make([]acc, len(cum)), make([]acc, len(cum))
	for _, o := range b.origins {
		pt, ok := b.auto(models, total[o-b.ntrain:o:o], season, h)
		for k, y := range cum {
			train, actual := y[o-b.ntrain:o:o], y[o:o+h]
			scale := naiveScale(train, season)
			p, pok := pt, ok // the total's is forecast once
			if k < len(cum)-1 {
				p, pok = b.auto(models, train, season, h)
			}
			if pok {
				direct[k].add(p, actual, scale, b.lo, b.up, b.hi, opt.Quantile)
			} else {
				direct[k].failed++
			}
			if !ok {
				shared[k].failed++
				continue
			}
			shared[k].add(scaled(pt, share(y, total, o, shareSteps)), actual, scale, b.lo, b.up, b.hi, opt.Quantile)
		}
	}
	out := make([]TierScore, len(cum))
	for k := range cum {
		out[k] = TierScore{Tier: names[k], Cumulative: direct[k].score(AutoName), Share: shared[k].score(AutoName)}
	}
	return out, len(b.origins), nil
}

// auto is auto's prediction from train, as Backtest makes it: the blend
// of the models that forecast, false when none does.
func (b *backtest) auto(models []Model, train []float64, season, h int) (Prediction, bool) {
	var cands []*paths
	for _, m := range models {
		if c, err := forecastPaths(m, train, season, h); err == nil {
			cands = append(cands, c)
		}
	}
	if len(cands) == 0 {
		return Prediction{}, false
	}
	return pick(cands, b.levels).predict(train, b.levels), true
}

// share is y's share of total over the n steps before origin: the sum of
// y's values over the sum of total's, 1 where total's is not above 0.
func share(y, total []float64, origin, n int) float64 {
	var a, t float64
	for i := max(0, origin-n); i < origin; i++ {
		a += y[i]
		t += total[i]
	}
	if !(t > 0) {
		return 1
	}
	return a / t
}

// scaled is p with its point forecasts and quantiles times s.
func scaled(p Prediction, s float64) Prediction {
	mul := func(v []float64) []float64 {
		out := make([]float64, len(v))
		for i, x := range v {
			out[i] = s * x
		}
		return out
	}
	q := make([][]float64, len(p.Quantiles))
	for j := range q {
		q[j] = mul(p.Quantiles[j])
	}
	p.Point, p.Quantiles = mul(p.Point), q
	return p
}
