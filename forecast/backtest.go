package forecast

import (
	"fmt"
	"math"
	"slices"
	"time"
)

// BacktestOptions set a rolling-origin backtest. The protocol is the one
// of ../shared/bench (and R's forecast-package anchors there): Origins
// origins evenly spaced from max(60% of the series, the training window)
// to the last full horizon; each model is fitted on the TrainDays before
// the origin and forecasts Horizon steps; errors are averaged over the
// steps; MASE and pinball loss are scaled by the training window's
// seasonal-naive (lag one day) mean absolute error.
type BacktestOptions struct {
	// Season is the number of steps in a day.
	Season int
	// Horizon is the number of steps forecast.
	Horizon int
	// Origins is how many origins (default 30).
	Origins int
	// TrainDays is the training window (default 14).
	TrainDays float64
	// Quantile is the pinball loss's quantile (default 0.9).
	Quantile float64
	// Now, if set, times each fit (it is the caller's clock: the package
	// keeps none).
	Now func() time.Time
}

// Score is one model's backtest figures.
type Score struct {
	Model string `json:"model"`
	// MASE is the mean absolute error scaled by the in-sample
	// seasonal-naive error.
	MASE float64 `json:"mase"`
	// MASESE is MASE's standard error: the standard deviation of the
	// origins' MASE over the square root of their number, how far another
	// draw of origins could move MASE. A few origins with a burst or an
	// outage in their horizon often carry much of the mean, so a gap to a
	// figure from other origins (a published anchor) under about twice
	// this is noise. Models scored on the same origins share that noise:
	// gaps between them are surer than this.
	MASESE float64 `json:"mase_se"`
	// SMAPE is the symmetric mean absolute percentage error, in percent.
	SMAPE float64 `json:"smape"`
	// Pinball is the pinball loss at the quantile, scaled like MASE.
	Pinball float64 `json:"pinball"`
	// Coverage80 is the share of outcomes inside the 10%-90% band.
	Coverage80 float64 `json:"coverage80"`
	// FitMS is the mean time to fit and forecast once, in milliseconds.
	FitMS float64 `json:"fit_ms"`
	// Failed counts origins where the model could not forecast.
	Failed int `json:"failed,omitempty"`
}

// AutoName is the name of the choice among models in backtests: at every
// origin, the blend Auto makes.
const AutoName = "auto"

// BacktestReport is a backtest's outcome.
type BacktestReport struct {
	Origins int     `json:"origins"`
	Scores  []Score `json:"models"`
	// Picks counts, for auto, how often each candidate was chosen one
	// step ahead.
	Picks map[string]int `json:"-"`
	// PerOrigin has every model's figures at every origin where it
	// forecast, in origin order and then the models' (auto last): what a
	// paired comparison with another forecaster scored on the same origins
	// needs, since the origins differ far more from each other than good
	// models do.
	PerOrigin []OriginScore `json:"-"`
}

// OriginScore is one model's figures at one backtest origin.
type OriginScore struct {
	// Origin is the index in the series of the first value forecast.
	Origin int
	Model  string
	// MASE, Pinball and Coverage80 are as in Score, for this origin.
	MASE, Pinball, Coverage80 float64
}

// Backtest runs the rolling-origin backtest of each model, and of auto
// (the choice among them), on y.
func Backtest(y []float64, models []Model, opt BacktestOptions) (BacktestReport, error) {
	for i, v := range y {
		if math.IsNaN(v) || math.IsInf(v, 0) {
			return BacktestReport{}, fmt.Errorf("backtest: value %d is %v", i, v)
		}
	}
	b, err := newBacktest(len(y), &opt)
	if err != nil {
		return BacktestReport{}, err
	}
	h, season, ntrain, origins, levels := opt.Horizon, opt.Season, b.ntrain, b.origins, b.levels
	lo, up, hi := b.lo, b.up, b.hi

	accs := make([]acc, len(models)+1) // the last is auto
	rep := BacktestReport{Origins: len(origins), Picks: map[string]int{}}
	for _, o := range origins {
		train := y[o-ntrain : o : o] // no room to reach the targets
		actual := y[o : o+h]
		scale := naiveScale(train, season)
		var cands []*paths
		totalMS := 0.0
		for i, m := range models {
			var t0 time.Time
			if opt.Now != nil {
				t0 = opt.Now()
			}
			c, err := forecastPaths(m, train, season, h)
			var p Prediction
			if err == nil {
				p = pick([]*paths{c}, levels).predict(train, levels)
			}
			ms := 0.0
			if opt.Now != nil {
				ms = float64(opt.Now().Sub(t0)) / 1e6
			}
			totalMS += ms
			if err != nil {
				accs[i].failed++
				continue
			}
			cands = append(cands, c)
			sc := accs[i].add(p, actual, scale, lo, up, hi, opt.Quantile)
			sc.Origin, sc.Model = o, m.Name()
			rep.PerOrigin = append(rep.PerOrigin, sc)
			accs[i].ms += ms
		}
		a := &accs[len(models)]
		if len(cands) == 0 {
			a.failed++
			continue
		}
		var t0 time.Time
		if opt.Now != nil {
			t0 = opt.Now()
		}
		best := pick(cands, levels)
		p := best.predict(train, levels)
		if opt.Now != nil {
			totalMS += float64(opt.Now().Sub(t0)) / 1e6
		}
		rep.Picks[best.first]++
		sc := a.add(p, actual, scale, lo, up, hi, opt.Quantile)
		sc.Origin, sc.Model = o, AutoName
		rep.PerOrigin = append(rep.PerOrigin, sc)
		a.ms += totalMS
	}
	for i := range accs {
		name := AutoName
		if i < len(models) {
			name = models[i].Name()
		}
		rep.Scores = append(rep.Scores, accs[i].score(name))
	}
	return rep, nil
}

// score is the model's figures: the means of its sums, NaN where it never
// forecast.
func (a *acc) score(name string) Score {
	s := Score{Model: name, Failed: a.failed}
	if a.n == 0 {
		s.MASE, s.SMAPE, s.Pinball = math.NaN(), math.NaN(), math.NaN()
		return s
	}
	n := float64(a.n)
	s.MASE, s.SMAPE, s.Pinball, s.Coverage80, s.FitMS = a.mase/n, a.smape/n, a.pinball/n, a.cover/n, a.ms/n
	if a.n > 1 {
		s.MASESE = math.Sqrt(max(0, a.mase2-n*s.MASE*s.MASE) / (n - 1) / n)
	}
	return s
}

// backtest is a rolling-origin backtest's layout over a series of n
// steps (BacktestOptions): the training window's length, the origins, and
// the quantile levels predicted, with the indices of the 10% level, the
// pinball loss's and the 90% level in them.
type backtest struct {
	ntrain     int
	origins    []int
	levels     []float64
	lo, up, hi int
}

// newBacktest lays out a backtest over n steps, filling opt's defaults.
func newBacktest(n int, opt *BacktestOptions) (backtest, error) {
	if opt.Origins <= 0 {
		opt.Origins = 30
	}
	if opt.TrainDays <= 0 {
		opt.TrainDays = 14
	}
	if !(opt.Quantile > 0 && opt.Quantile < 1) { // NaN too
		opt.Quantile = 0.9
	}
	h, season := opt.Horizon, opt.Season
	if h < 1 || season < 1 {
		return backtest{}, fmt.Errorf("backtest: horizon %d and season %d must be at least 1 step", h, season)
	}
	ntrain := min(n-h-1, int(math.Round(opt.TrainDays*float64(season))))
	first := max(ntrain, int(math.Round(float64(n)*0.6)))
	last := n - h
	if ntrain < 2*season || first > last {
		return backtest{}, fmt.Errorf("backtest: %d steps are too few for a %.0f-day training window and %d-step horizon", n, opt.TrainDays, h)
	}
	levels, err := Levels(0.1, opt.Quantile, 0.9)
	if err != nil {
		return backtest{}, err
	}
	return backtest{ntrain: ntrain, origins: spread(first, last, opt.Origins), levels: levels,
		lo: slices.Index(levels, 0.1), up: slices.Index(levels, opt.Quantile), hi: slices.Index(levels, 0.9)}, nil
}

// acc is one model's running sums over the origins.
type acc struct {
	mase, smape, pinball, cover, ms float64
	mase2                           float64 // sum of the origins' squared MASE
	n, failed                       int
}

// add adds one origin's errors to the running sums and returns them.
func (r *acc) add(p Prediction, actual []float64, scale float64, lo, up, hi int, q float64) OriginScore {
	var ae, sm, pl, in float64
	for k, a := range actual {
		f := p.Point[k]
		ae += math.Abs(a - f)
		if d := math.Abs(a) + math.Abs(f); d > 0 {
			sm += 200 * math.Abs(a-f) / d
		}
		pl += pinball(a-p.Quantiles[up][k], q)
		if a >= p.Quantiles[lo][k] && a <= p.Quantiles[hi][k] {
			in++
		}
	}
	n := float64(len(actual))
	sc := OriginScore{MASE: ae / n / scale, Pinball: pl / n / scale, Coverage80: in / n}
	r.mase += sc.MASE
	r.mase2 += sc.MASE * sc.MASE
	r.smape += sm / n
	r.pinball += sc.Pinball
	r.cover += sc.Coverage80
	r.n++
	return sc
}

// naiveScale is the mean absolute change over a season in y (over one step
// when that is zero or undefined): the MASE denominator.
func naiveScale(y []float64, season int) float64 {
	for _, lag := range []int{season, 1} {
		if len(y) <= lag {
			continue
		}
		s := 0.0
		for i := lag; i < len(y); i++ {
			s += math.Abs(y[i] - y[i-lag])
		}
		if s > 0 {
			return s / float64(len(y)-lag)
		}
	}
	return 1
}

// spread returns n integers evenly spaced from first to last, rounded, each
// once: R's unique(round(seq(first, last, length.out = n))), halves to even.
func spread(first, last, n int) []int {
	if n <= 1 || first == last {
		return []int{first}
	}
	out := make([]int, 0, n)
	by := float64(last-first) / float64(n-1)
	for i := range n {
		v := int(math.RoundToEven(float64(first) + float64(i)*by))
		if len(out) == 0 || out[len(out)-1] != v {
			out = append(out, v)
		}
	}
	return out
}
