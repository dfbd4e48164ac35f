package main

import (
	"fmt"
	"image/color"
	"path/filepath"
	"slices"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"

	"github.com/fleetcast/autoscaler/fleet"
	"github.com/fleetcast/autoscaler/forecast"
	"github.com/fleetcast/autoscaler/simulate"
)

// plotForecast draws the last three days of history, the forecast's median
// and its 80% band, in hours relative to the forecast origin.
func plotForecast(path, name string, history fleet.Series, f forecast.Forecast) error {
	if ext := filepath.Ext(path); !slices.Contains(simulate.PlotFormats, ext) {
		return fmt.Errorf("plot %s: unsupported extension %q: want one of %v", path, ext, simulate.PlotFormats)
	}
	p := plot.New()
	p.Title.Text = fmt.Sprintf("%s: %s forecast with its 80%% band", name, f.Model)
	p.X.Label.Text = "hours from the forecast origin"
	p.Y.Label.Text = "demand"
	hours := func(i int, step float64) float64 { return float64(i) * step }
	step := history.Step.Hours()
	from := max(0, len(history.Values)-int(forecast.Day/history.Step)*3)
	past := make(plotter.XYs, 0, len(history.Values)-from)
	for i := from; i < len(history.Values); i++ {
		past = append(past, plotter.XY{X: hours(i-len(history.Values), step), Y: history.Values[i]})
	}
	lo, mid, hi := f.Quantile(0.1), f.Quantile(0.5), f.Quantile(0.9)
	band := make(plotter.XYs, 0, 2*len(mid))
	med := make(plotter.XYs, 0, len(mid))
	for k := range mid {
		med = append(med, plotter.XY{X: hours(k, f.Step.Hours()), Y: mid[k]})
		band = append(band, plotter.XY{X: hours(k, f.Step.Hours()), Y: hi[k]})
	}
	for k := len(lo) - 1; k >= 0; k-- {
		band = append(band, plotter.XY{X: hours(k, f.Step.Hours()), Y: lo[k]})
	}
	poly, err := plotter.NewPolygon(band)
	if err != nil {
		return fmt.Errorf("plot %s: %w", path, err)
	}
	poly.Color = color.RGBA{R: 0x2c, G: 0xa0, B: 0x2c, A: 0x50}
	poly.LineStyle.Width = 0
	hl, err := plotter.NewLine(past)
	if err != nil {
		return fmt.Errorf("plot %s: %w", path, err)
	}
	ml, err := plotter.NewLine(med)
	if err != nil {
		return fmt.Errorf("plot %s: %w", path, err)
	}
	ml.Color = color.RGBA{R: 0x2c, G: 0xa0, B: 0x2c, A: 0xff}
	ml.Width = vg.Points(2)
	p.Add(poly, hl, ml)
	p.Legend.Add("history", hl)
	p.Legend.Add("forecast (median)", ml)
	p.Legend.Add("80% band", poly)
	p.Legend.Top, p.Legend.Left = true, true
	if err := p.Save(12*vg.Inch, 5*vg.Inch, path); err != nil {
		return fmt.Errorf("plot %s: %w", path, err)
	}
	return nil
}
