package main

import (
	"github.com/fleetcast/autoscaler/fleet"
	"github.com/fleetcast/autoscaler/forecast"
	"github.com/fleetcast/autoscaler/simulate"
)

// plotForecast draws the last three days of history, the forecast's median
// and its 80% band, in hours relative to the forecast origin, with the
// legend below the plot (simulate.PlotForecast).
func plotForecast(path, name string, history fleet.Series, f forecast.Forecast) error {
	return simulate.PlotForecast(path, name, history, f)
}
