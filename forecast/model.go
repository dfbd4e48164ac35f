package forecast

// Model is a point-forecasting method. Quantiles are added around any
// model's point forecasts by calibration on its own out-of-sample errors
// (see Predict), so a model only needs to forecast the mean path.
type Model interface {
	// Name identifies the model in reports, e.g. "ets".
	Name() string
	// Fit estimates the model's parameters on y[:trainEnd], y being a
	// regular series with season steps per day (e.g. 144 for 10-minute
	// steps); the Fitted may forecast from any origin in y, so forecasts from
	// origins past trainEnd are out of sample for the parameters too (that
	// is what calibration uses). It must not modify y.
	Fit(y []float64, season, trainEnd int) (Fitted, error)
}

// Fitted is a model with its parameters estimated.
type Fitted interface {
	// Forecast returns the point forecasts for the h steps after y[:origin]
	// (y as given to Fit), using only y[:origin] and the fitted parameters:
	// forecasts from earlier origins are out of sample for the data, which
	// is what calibration and backtests need. origin may be at most len(y).
	Forecast(origin, h int) []float64
	// Extend returns the model over y, which extends the series it was
	// fitted on (the same values, then more): the parameters stay, the
	// state follows the new values. Fitting is the costly part; a caller
	// that forecasts at every step refits now and then and extends between.
	Extend(y []float64) Fitted
}

// inPlace is a Fitted that can extend in place: the extension may write
// into spare room of the arrays it shares with the fit, so extensions made
// earlier the same way are no longer valid. Online uses it for the
// members it alone holds, which follow each final step once and the
// provisional last one anew at every forecast: no copy of the state.
type inPlace interface {
	extendInPlace(y []float64) Fitted
}

// room is s for appending to: with no spare room unless inPlace, so an
// extension copies and leaves the fit it came from valid.
func room(s []float64, inPlace bool) []float64 {
	if inPlace {
		return s
	}
	return s[:len(s):len(s)]
}

// extendInPlace extends f over y in place where f can, else as Extend.
func extendInPlace(f Fitted, y []float64) Fitted {
	if e, ok := f.(inPlace); ok {
		return e.extendInPlace(y)
	}
	return f.Extend(y)
}
