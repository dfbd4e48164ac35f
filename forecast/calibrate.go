package forecast

import (
	"cmp"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/fleetcast/autoscaler/fleet"
)

// SeasonalNaiveModel forecasts each step as the value one season ago (Lag
// steps; a day or a week).
type SeasonalNaiveModel struct {
	// Days is the lag in days: 1 (daily) or 7 (weekly).
	Days int
}

// Name is "snaive_daily" or "snaive_weekly" (or "snaive_Nd").
func (m SeasonalNaiveModel) Name() string {
	switch m.Days {
	case 1:
		return "snaive_daily"
	case 7:
		return "snaive_weekly"
	}
	return fmt.Sprintf("snaive_%dd", m.Days)
}

// Fit needs a full lag of history before trainEnd (so that forecasts from
// there on look back at real values); it has no parameters.
func (m SeasonalNaiveModel) Fit(y []float64, season, trainEnd int) (Fitted, error) {
	lag := max(1, m.Days) * season
	if min(trainEnd, len(y)) < lag {
		return nil, fmt.Errorf("%s needs %d steps of history before its first forecast, has %d", m.Name(), lag, min(trainEnd, len(y)))
	}
	return lagged{y: y, lag: lag}, nil
}

type lagged struct {
	y   []float64
	lag int
}

func (l lagged) Extend(y []float64) Fitted { l.y = y; return l }

func (l lagged) Forecast(origin, h int) []float64 {
	out := make([]float64, h)
	for k := 1; k <= h; k++ {
		i := origin - 1 + k - l.lag*((k+l.lag-1)/l.lag)
		out[k-1] = l.y[max(i, 0)]
	}
	return out
}

// SeasonalLevelModel forecasts that demand moves from its current level the
// way it moved during the same hours a day earlier: the last value plus
// yesterday's change over the same steps.
type SeasonalLevelModel struct{}

// Name is "seasonal_level".
func (SeasonalLevelModel) Name() string { return "seasonal_level" }

// Fit needs a day and a step of history; it has no parameters.
func (SeasonalLevelModel) Fit(y []float64, season, _ int) (Fitted, error) {
	if len(y) < season+1 {
		return nil, fmt.Errorf("seasonal_level needs more than %d steps of history, has %d", season, len(y))
	}
	return levelFitted{y: y, season: season}, nil
}

type levelFitted struct {
	y      []float64
	season int
}

func (l levelFitted) Extend(y []float64) Fitted { l.y = y; return l }

func (l levelFitted) Forecast(origin, h int) []float64 {
	out := make([]float64, h)
	for k := 1; k <= h; k++ {
		out[k-1] = levelPoint(l.y, l.season, origin-1, k)
	}
	return out
}

// Quantiles are calibrated on origins over the last calibrationDays of the
// history, at most maxCalibration of them.
// A model needs at least minCalibration origins.
const (
	calibrationDays = 3
	maxCalibration  = 432
	minCalibration  = 12
)

// shortHistoryError says a history is too short to calibrate a model's
// forecasts on.
type shortHistoryError struct {
	model string
	// steps is the history's length, horizon the forecasts' and need the
	// least history that calibrates them.
	steps, horizon, need int
}

func (e *shortHistoryError) Error() string { return e.model + ": " + e.reason() }

// reason is the error without the model's name.
func (e *shortHistoryError) reason() string {
	return fmt.Sprintf("too little history (%d steps) to calibrate %d-step forecasts (%d needed)", e.steps, e.horizon, e.need)
}

// whyNoModel says, on one line, why no model could be calibrated (errs
// are their errors): for a history too short for every one of them, the
// history they need (and its length, with length), once; otherwise each
// distinct reason once, after the models it stopped.
func whyNoModel(errs []error, length bool) string {
	type group struct {
		reason string
		models []string
	}
	var groups []*group
	byReason := map[string]*group{}
	allShort := true
	for _, err := range errs {
		model, reason := "", strings.Join(strings.Fields(err.Error()), " ")
		var short *shortHistoryError
		if errors.As(err, &short) {
			model, reason = short.model, short.reason()
		} else {
			allShort = false
		}
		g := byReason[reason]
		if g == nil {
			g = &group{reason: reason}
			byReason[reason] = g
			groups = append(groups, g)
		}
		if model != "" {
			g.models = append(g.models, model)
		}
	}
	var short *shortHistoryError
	if allShort && len(groups) == 1 && errors.As(errs[0], &short) {
		if !length {
			return fmt.Sprintf("%d-step forecasts need %d steps", short.horizon, short.need)
		}
		return fmt.Sprintf("%d steps; %d-step forecasts need %d", short.steps, short.horizon, short.need)
	}
	out := make([]string, len(groups))
	for i, g := range groups {
		out[i] = g.reason
		if len(g.models) > 0 {
			out[i] = strings.Join(g.models, ", ") + ": " + g.reason
		}
	}
	return strings.Join(out, "; ")
}

// Prediction is a model's forecast with calibrated quantiles, and how well
// the model did on its calibration origins.
type Prediction struct {
	// Model names the model, or the models per step (see Forecast.Model).
	Model string
	// Point[k] is the point forecast k+1 steps ahead.
	Point []float64
	// Quantiles[j][k] is the Levels[j] quantile k+1 steps ahead.
	Levels    []float64
	Quantiles [][]float64
	// CalibrationMAE is the model's mean absolute error over the
	// calibration origins and horizon steps: out of sample for the data.
	// For a blend it is that of the candidates chosen per step on these
	// errors, so in sample for the choice (and lower than it will be).
	CalibrationMAE float64
	// Note says why the forecast holds on to the values before the last,
	// if it does (an unconfirmed jump; see unconfirmedJump).
	Note string
}

// Predict fits m on y and forecasts h steps after it, with quantiles at
// levels calibrated on the model's own errors: forecasts from the last
// origins of y (up to three days of them), each made from the data before
// it with parameters fitted before the first of them, compared with what
// followed, per horizon step (split conformal, by empirical quantiles with
// a finite-sample correction; see offsets), the errors in units of the
// history's daily scale of their steps and the quantiles multiplied back
// by the scale of the steps forecast (see dailyScale).
// A last value far from the forecast made before it is an unconfirmed
// jump: the forecast holds on to the values before it, its band widened to
// hold the jump, and Note says so (see unconfirmedJump).
// Values are never negative and quantiles never cross.
func Predict(m Model, y []float64, season, h int, levels []float64) (Prediction, error) {
	c, err := forecastPaths(m, y, season, h)
	if err != nil {
		return Prediction{}, err
	}
	return pick([]*paths{c}, levels).predict(y, levels), nil
}

// paths are a model's (or a combination's) calibration forecasts.
type paths struct {
	name   string
	y      []float64
	season int
	h      int
	starts []int       // calibration origins
	calib  [][]float64 // calib[i][k]: forecast k+1 steps after starts[i]
	mae    float64     // over the calibration forecasts
	// members is a model's fit on all the data (nil for a mean: see
	// bases).
	members []Fitted
	// bases are the indices, among the candidates of pick, of the models
	// whose mean this is (a model's own, for a model).
	bases []int
}

func forecastPaths(m Model, y []float64, season, h int) (*paths, error) {
	if h < 1 {
		return nil, fmt.Errorf("forecast: horizon of %d steps", h)
	}
	n := len(y)
	origins := min(max(calibrationDays*season, 24), n-h-max(season, 1))
	if origins < minCalibration {
		return nil, &shortHistoryError{model: m.Name(), steps: n, horizon: h, need: minCalibration + h + max(season, 1)}
	}
	// Parameters from the data before the calibration origins, so their
	// errors are out of sample; the final forecast uses all the data.
	f, err := m.Fit(y, season, n-h-origins+1)
	if err != nil {
		return nil, err
	}
	c := &paths{name: m.Name(), y: y, season: max(season, 1), h: h}
	// At most maxCalibration origins, evenly strided over the window (a
	// 1-minute series has 4,320 steps in three days).
	stride := (origins + maxCalibration - 1) / maxCalibration
	for o := n - h - origins + 1; o <= n-h; o += stride {
		c.starts = append(c.starts, o)
		c.calib = append(c.calib, f.Forecast(o, h))
	}
	if r, ok := m.(refitter); ok {
		f, err = r.refit(f, y, season, n)
	} else {
		f, err = m.Fit(y, season, n)
	}
	if err != nil {
		return nil, err
	}
	c.members = []Fitted{f}
	for k, v := range f.Forecast(n, h) {
		if math.IsNaN(v) || math.IsInf(v, 0) {
			return nil, fmt.Errorf("%s: forecast %d steps ahead is %v", m.Name(), k+1, v)
		}
	}
	c.mae = c.calibrationMAE()
	return c, nil
}

func (c *paths) calibrationMAE() float64 {
	sum := 0.0
	for i, o := range c.starts {
		for k := range c.h {
			sum += math.Abs(c.y[o+k] - c.calib[i][k])
		}
	}
	return sum / float64(len(c.starts)*c.h)
}

// recency is the weight of the calibration origin o: a half-life of a day
// back from the last one.
func (c *paths) recency(o int) float64 {
	return math.Exp2(-float64(c.starts[len(c.starts)-1]-o) / float64(c.season))
}

// refitter is a Model whose final fit must keep the shape (the features)
// of its calibration fit, so that the model calibrated is the one that
// forecasts.
type refitter interface {
	refit(like Fitted, y []float64, season, trainEnd int) (Fitted, error)
}

// mean is the combination of several models' paths: their average.
func mean(ps []*paths) *paths {
	names := make([]string, len(ps))
	for i, p := range ps {
		names[i] = p.name
	}
	slices.Sort(names)
	c := &paths{name: "mean(" + strings.Join(names, "+") + ")", y: ps[0].y, season: ps[0].season, h: ps[0].h, starts: ps[0].starts,
		calib: make([][]float64, len(ps[0].calib))}
	for _, p := range ps {
		c.bases = append(c.bases, p.bases...)
	}
	w := 1 / float64(len(ps))
	for i := range c.calib {
		c.calib[i] = make([]float64, c.h)
		for _, p := range ps {
			for k, v := range p.calib[i] {
				c.calib[i][k] += w * v
			}
		}
	}
	c.mae = c.calibrationMAE()
	return c
}

// predict is the blend's Prediction from the end of y, the series its
// members were fitted on, at the levels it was made for.
func (b *blend) predict(y []float64, levels []float64) Prediction {
	h := len(b.point)
	fs := b.forecasts(len(y), h)
	p := Prediction{Model: b.name, Levels: slices.Clone(levels), CalibrationMAE: b.mae, Point: mixed(b.point, fs, 0)}
	var before []float64
	p.Quantiles, before, p.Note = holdJump(b, y, h, levels, b.quantiles(fs, 0, b.offsetsFrom(len(y), 0)))
	if before != nil {
		p.Point = before
	}
	for k, v := range p.Point {
		p.Point[k] = math.Max(0, v)
	}
	return p
}

// overlap is how many calibration origins' errors k+1 steps ahead share
// the information in one, per step of horizon beyond the first: errors of
// origins fewer than k+1 steps apart overlap (for a random walk they are
// correlated over k+1 origins); the errors also share the model's own
// error, so not all of the overlap counts. Three quarters was chosen on
// the shared traces and cuts of them (a half covers too little at 4
// hours, a whole too much).
const overlap = 0.75

// offsets returns, per horizon step k, the levels' empirical quantiles of
// the calibration errors k+1 steps ahead (offsets[k][j] for levels[j]),
// each divided by its daily scale (sc[i][k] for origin starts[i]: the
// offsets are in units of the scale, see dailyScale) and weighted by its
// recency with a half-life of a day, so the bands follow a change of
// regime within days rather than averaging over it.
//
// Each level is moved outward by split conformal's finite-sample
// correction for n errors (the upper quantile at q(1+1/n) rather than q,
// the lower at q-(1-q)/n), n being the effective number of independent
// errors: the weights' effective sample size (Kish's) divided by the
// number of origins each error is correlated with, 1+overlap*k (in
// origins, with the calibration stride). The errors of a few days are few
// independent samples at long horizons, and their empirical quantiles
// alone give bands that cover too little.
func (c *paths) offsets(levels []float64, sc [][]float64) [][]float64 {
	out := make([][]float64, c.h)
	type werr struct{ e, w float64 }
	errs := make([]werr, len(c.starts))
	weights := make([]float64, len(c.starts))
	total, squares := 0.0, 0.0
	for i, o := range c.starts {
		w := c.recency(o)
		weights[i] = w
		total += w
		squares += w * w
	}
	stride := 1
	if len(c.starts) > 1 {
		stride = c.starts[1] - c.starts[0]
	}
	adjusted := make([]float64, len(levels))
	for k := range c.h {
		for i, o := range c.starts {
			errs[i] = werr{(c.y[o+k] - c.calib[i][k]) / sc[i][k], weights[i]}
		}
		slices.SortFunc(errs, func(a, b werr) int { return cmp.Compare(a.e, b.e) })
		n := total * total / squares / math.Max(1, (1+overlap*float64(k))/float64(stride))
		for j, q := range levels {
			switch {
			case q > 0.5:
				adjusted[j] = math.Min(1, q+q/n)
			case q < 0.5:
				adjusted[j] = math.Max(0, q-(1-q)/n)
			default:
				adjusted[j] = q
			}
		}
		out[k] = make([]float64, len(levels))
		for j, q := range adjusted {
			// The weighted quantile: the first error whose cumulative
			// weight reaches q of the total.
			acc := 0.0
			v := errs[len(errs)-1].e
			for _, x := range errs {
				acc += x.w
				if acc >= q*total {
					v = x.e
					break
				}
			}
			out[k][j] = v
		}
	}
	return out
}

// DefaultModels are the models Auto chooses among, simplest first, then
// the later additions (the order breaks ties). The
// seasonal ETS is left out: on the shared series it never beat the damped
// trend model without a season and the regression, at twice their cost.
// The damped trend on the seasonally adjusted series (AdjustedHolt), among
// them, took 1.7% off auto's MASE (geometric mean over the shared series
// and cuts of them, an hour and four hours ahead), 13% at Philly 4 h;
// AdjustedTheta and DiffAR another 0.6%, 10% at Philly 1 h.
func DefaultModels() []Model {
	return []Model{SeasonalNaiveModel{Days: 1}, SeasonalNaiveModel{Days: 7}, SeasonalLevelModel{}, HoltDamped{}, AdjustedHolt{}, Regression{}, AdjustedTheta{}, DiffAR{}}
}

// HoltDamped is exponential smoothing with a damped trend and no season
// (ETS(A,Ad,N)): it follows the level and its drift, which over the next
// hour or so often beats any model of the daily cycle.
type HoltDamped struct{}

// Name is "holt_damped".
func (HoltDamped) Name() string { return "holt_damped" }

// Fit fits ETS without a season, its parameters on the last 14 days
// before trainEnd (a longer history changes them little and costs time).
func (HoltDamped) Fit(y []float64, season, trainEnd int) (Fitted, error) {
	if season > 0 && trainEnd > etsFitSeasons*season {
		if err := checkHistory(fleet.Series{Step: 1, Values: y}); err != nil {
			return nil, err
		}
		end := min(trainEnd, len(y))
		p := fitETS(y[end-etsFitSeasons*season:end], 0)
		f := filterETS(y, 0, p)
		if d := etsDefaults(0); !f.finite() && p != d {
			f = filterETS(y, 0, d)
		}
		return f, nil
	}
	return ETS{}.Fit(y, 1, trainEnd)
}

// Auto fits every model, calibrates each, and blends them (see pick): at
// each horizon step the candidate with the smallest calibration error
// there (an out-of-sample error on the last days of the history, so the
// choice uses no future data), and for each quantile that candidate's
// unless another's is clearly better in calibration. Models that cannot fit
// the history (too short for a weekly lag, say) are skipped. Note says
// when there was too little history for any of them (and the seasonal
// naive forecast was used), or when the last value is an unconfirmed jump
// (see Predict).
func Auto(history fleet.Series, horizon time.Duration, levels []float64) (Forecast, error) {
	return autoFrom(DefaultModels(), history, horizon, levels, Options{})
}

// AutoWith is Auto with options.
func AutoWith(history fleet.Series, horizon time.Duration, levels []float64, opt Options) (Forecast, error) {
	return autoFrom(DefaultModels(), history, horizon, levels, opt)
}

func autoFrom(models []Model, history fleet.Series, horizon time.Duration, levels []float64, opt Options) (Forecast, error) {
	if err := checkHistory(history); err != nil {
		return Forecast{}, err
	}
	if len(levels) == 0 {
		levels = defaultLevels
	}
	season := int(Day / history.Step)
	h := max(1, int((horizon+history.Step-1)/history.Step))
	best, err := choose(models, history.Values, season, h, levels)
	if err != nil {
		// Too little history for any calibrated model.
		f, err2 := seasonalNaive(history, horizon, levels, opt)
		if err2 != nil {
			return Forecast{}, err2
		}
		var errs []error
		if j, ok := err.(interface{ Unwrap() []error }); ok {
			errs = j.Unwrap()
		} else {
			errs = []error{err}
		}
		// The fallback's note, if any, says how long the history is.
		note := "too little history to calibrate a model (" + whyNoModel(errs, f.Note == "") + ")"
		if f.Note != "" {
			note += "; " + f.Note
		}
		f.Note = note
		return f, nil
	}
	f := Forecast{Origin: history.End(), Step: history.Step, Model: best.Model, Note: best.Note, Levels: best.Levels, Values: best.Quantiles}
	return f, nil
}

// choose forecasts with each model, and with the means of the two and three
// best of them (combinations often beat every model in them), and returns
// their blend (see pick).
func choose(models []Model, y []float64, season, h int, levels []float64) (Prediction, error) {
	var cands []*paths
	var errs []error
	for _, m := range models {
		c, err := forecastPaths(m, y, season, h)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		cands = append(cands, c)
	}
	if len(cands) == 0 {
		return Prediction{}, errors.Join(errs...)
	}
	return pick(cands, levels).predict(y, levels), nil
}

// Online is Auto for a caller that forecasts at every step of a growing
// history (a controller, a simulation): NewOnline chooses and calibrates a
// blend of models (see pick), the costly part, once in a while; Forecast
// follows each new value with the chosen models' parameters and error
// quantiles as they were. It is not safe for concurrent use.
type Online struct {
	step   time.Duration
	start  time.Time
	y      []float64 // the values fitted on
	buf    []float64 // the values followed, in Forecast
	h      int
	levels []float64
	// blend is the chosen forecast, its members followed to the latest
	// history; nil when the history was too short to choose.
	blend *blend
	// horizon is kept for the fallback (too little history).
	horizon time.Duration
}

// NewOnline fits and calibrates on history as Auto does, but for its last
// value, which is provisional (see Forecast).
func NewOnline(history fleet.Series, horizon time.Duration, levels []float64) (*Online, error) {
	if err := checkHistory(history); err != nil {
		return nil, err
	}
	if len(levels) == 0 {
		levels = defaultLevels
	}
	o := &Online{step: history.Step, start: history.Start, y: slices.Clone(history.Values[:len(history.Values)-1]), levels: slices.Clone(levels), horizon: horizon,
		h: max(1, int((horizon+history.Step-1)/history.Step))}
	var cands []*paths
	for _, m := range DefaultModels() {
		if c, err := forecastPaths(m, o.y, int(Day/history.Step), o.h); err == nil {
			cands = append(cands, c)
		}
	}
	if len(cands) > 0 {
		o.blend = pick(cands, o.levels)
	}
	return o, nil
}

// Model names the chosen models (see Forecast.Model); "" when the history
// was too short to choose (Forecast then falls back as Auto does, at Auto's cost).
func (o *Online) Model() string {
	if o.blend == nil {
		return ""
	}
	return o.blend.name
}

// Forecast forecasts from history, which must continue the one fitted on:
// the same step, and its values those fitted on (some of the oldest may be
// gone) and then newer ones. Otherwise it is an error: refit.
//
// The last value is provisional: it may be the step in progress, its peak
// so far, and change in the next history. The models follow it for this
// forecast only; what they keep follows the values before it, each once,
// when it is final.
func (o *Online) Forecast(history fleet.Series) (Forecast, error) {
	if err := checkHistory(history); err != nil {
		return Forecast{}, err
	}
	if o.blend == nil {
		f, err := Auto(history, o.horizon, o.levels) // falls back, and says why
		return f, err
	}
	d := int(history.Start.Sub(o.start) / o.step)
	if history.Step != o.step || d < 0 || d > len(o.y) || !history.Start.Equal(o.start.Add(time.Duration(d)*o.step)) {
		return Forecast{}, fmt.Errorf("forecast: the history does not continue the one fitted on (step %v, start %v); refit", history.Step, history.Start)
	}
	// The values are those fitted on, then the newer ones, in a buffer
	// of the Online's own: the members follow them in place, as only the
	// Online holds them.
	o.buf = append(append(o.buf[:0], o.y[:d]...), history.Values...)
	y := o.buf
	b := o.blend
	fs := make([][]float64, len(b.members))
	for i, m := range b.members {
		// Each extension continues the last: only the new values are
		// filtered, the final ones kept, the provisional last one not.
		b.members[i] = extendInPlace(m, y[:len(y)-1])
		fs[i] = extendInPlace(b.members[i], y).Forecast(len(y), o.h)
	}
	values, _, note := holdJump(b, y, o.h, o.levels, b.quantiles(fs, 0, b.offsetsFrom(len(y), 0)))
	return Forecast{Origin: history.End(), Step: o.step, Model: b.name, Note: note, Levels: slices.Clone(o.levels), Values: values}, nil
}
