package simulate

import (
	"cmp"
	"fmt"
	"io"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"text/tabwriter"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"

	"github.com/fleetcast/autoscaler/config"
	"github.com/fleetcast/autoscaler/trace"
)

// FrontierQuantiles are the provisioning levels (forecast.quantile) the
// frontier runs the predictive policy at.
var FrontierQuantiles = []float64{0.5, 0.6, 0.7, 0.8, 0.9, 0.95, 0.97, 0.99}

// FrontierBuffers are the buffers, in GPUs, the frontier runs the headroom
// policy with; 0 is the reactive policy.
var FrontierBuffers = []int{0, 64, 128, 256, 512}

// FrontierPoint is one policy at one provisioning level.
type FrontierPoint struct {
	// Policy is "predictive" or "headroom"; Level is its forecast quantile
	// (0: each pool's by expected cost, the config's own choice when it
	// sets no quantile) or its buffer in GPUs.
	Policy string  `json:"policy"`
	Level  float64 `json:"level"`
	Result
}

// Frontier is cost against waiting, for the predictive policy over its
// quantiles and for the headroom policy over its buffers: the forecast
// earns its keep where predictive's points lie below headroom's line
// (cheaper at the same waiting).
type Frontier struct {
	Trace        string  `json:"trace"`
	Jobs         int     `json:"jobs"`
	Days         float64 `json:"days"`
	Seed         int64   `json:"seed"`
	Reservations string  `json:"reservations"`
	// HeadroomPlaceholders is the size of the headroom policy's
	// placeholders: "node" or "gpu".
	HeadroomPlaceholders string `json:"headroom_placeholders"`
	// OracleCostUSD is the clairvoyant lower bound on cost at no wait.
	OracleCostUSD float64 `json:"oracle_cost_usd"`
	// Points are headroom's, by buffer, then predictive's, by quantile.
	Points []FrontierPoint `json:"points"`
}

// RunFrontier simulates the trace under the headroom policy at each of
// FrontierBuffers and the predictive policy at each of FrontierQuantiles
// (forecast.quantile replaced) and, when the config sets no quantile, at
// its own choice by cost, with the rest of opt as Run takes it, on every
// core.
func RunFrontier(cfg *config.Config, tr *trace.Trace, opt Options) (*Frontier, error) {
	opt, err := prepare(cfg, tr, opt)
	if err != nil {
		return nil, err
	}
	if opt.Reservations != Configured {
		return nil, fmt.Errorf("simulate: the frontier compares policies holding the configured reservations, not %q ones: the headroom policy does not follow the baseline advice", opt.Reservations)
	}
	opt.sample = 0 // no pictures of capacity
	opt.Progress = nil
	type run struct {
		policy string
		level  float64
	}
	// The slow runs first, so that the cores finish together.
	var runs []run
	for _, q := range slices.Backward(FrontierQuantiles) {
		runs = append(runs, run{"predictive", q})
	}
	if cfg.Forecast.Quantile == 0 {
		runs = append(runs, run{"predictive", 0})
	}
	for _, b := range FrontierBuffers {
		runs = append(runs, run{"headroom", float64(b)})
	}
	runs = append(runs, run{"oracle", 0})
	results := make([]Result, len(runs))
	errs := make([]error, len(runs))
	parallel(len(runs), runtime.GOMAXPROCS(0), func(i int) {
		r, c, o := runs[i], cfg, opt
		switch r.policy {
		case "predictive":
			if r.level > 0 {
				cc := *cfg
				cc.Forecast.Quantile = r.level
				c = &cc
			}
		case "headroom":
			o.HeadroomGPUs = int(r.level)
			if o.HeadroomGPUs == 0 {
				o.HeadroomGPUs = -1
			}
		}
		results[i], errs[i] = runPolicy(c, tr, o, r.policy)
		if errs[i] != nil {
			errs[i] = fmt.Errorf("simulate: %s at %s: %w", r.policy, levelText(r.policy, r.level), errs[i])
		}
	})
	for _, err := range errs {
		if err != nil {
			return nil, err
		}
	}
	f := &Frontier{Trace: tr.Name, Jobs: len(tr.Jobs), Days: tr.Span().Hours() / 24, Seed: opt.Seed,
		Reservations: opt.Reservations, HeadroomPlaceholders: opt.HeadroomPlaceholders, OracleCostUSD: results[len(runs)-1].CostUSD}
	for _, want := range []string{"headroom", "predictive"} {
		for i, r := range runs {
			if r.policy != want {
				continue
			}
			res := results[i]
			if f.OracleCostUSD > 0 {
				res.CostVsOracle = res.CostUSD / f.OracleCostUSD
			}
			f.Points = append(f.Points, FrontierPoint{Policy: r.policy, Level: r.level, Result: res})
		}
	}
	slices.SortStableFunc(f.Points, func(a, b FrontierPoint) int {
		return cmp.Or(strings.Compare(a.Policy, b.Policy), cmp.Compare(a.Level, b.Level))
	})
	return f, nil
}

// parallel calls do(0..n-1) on up to workers goroutines and waits.
func parallel(n, workers int, do func(i int)) {
	next := make(chan int)
	var wg sync.WaitGroup
	for range max(1, min(workers, n)) {
		wg.Go(func() {
			for i := range next {
				do(i)
			}
		})
	}
	for i := range n {
		next <- i
	}
	close(next)
	wg.Wait()
}

// labelledTicks are gonum's default ticks with labels written by label.
type labelledTicks struct{ label func(float64) string }

// Ticks implements plot.Ticker.
func (t labelledTicks) Ticks(lo, hi float64) []plot.Tick {
	ticks := plot.DefaultTicks{}.Ticks(lo, hi)
	for i := range ticks {
		if ticks[i].Label != "" {
			ticks[i].Label = t.label(ticks[i].Value)
		}
	}
	return ticks
}

// levelText is a provisioning level as a person reads it.
func levelText(policy string, level float64) string {
	switch {
	case policy == "headroom":
		return fmt.Sprintf("%.0f GPUs", level)
	case level == 0:
		return "by cost"
	}
	return "p" + strconv.FormatFloat(100*level, 'g', 4, 64)
}

// WriteTable writes the frontier, one row per point, cheapest policy
// levels of each policy in order.
func (f *Frontier) WriteTable(w io.Writer) error {
	fmt.Fprintf(w, "trace %s: %d jobs over %.1f days, seed %d; reservations %s; headroom in %s-wide placeholders; oracle $%s\n\n",
		f.Trace, f.Jobs, f.Days, f.Seed, f.Reservations, f.HeadroomPlaceholders, thousands(f.OracleCostUSD))
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "policy\tlevel\tcost $\tvs oracle\twait GPU-h\tp95\tp99\tlost GPU-h\tlaunches\tdrains\treserved GPUs\tlimited\t")
	for _, p := range f.Points {
		fmt.Fprintf(tw, "%s\t%s\t%.0f\t%.3f\t%.0f\t%s\t%s\t%.1f\t%d\t%d\t%d\t%d\t\n", p.Policy, levelText(p.Policy, p.Level),
			p.CostUSD, p.CostVsOracle, p.WaitGPUHours, waitText(p.WaitP95), waitText(p.WaitP99), p.LostGPUHours, p.Launches, p.Drains, p.ReservedGPUs, p.LimitedCycles)
	}
	return tw.Flush()
}

// Plot draws the frontier: cost against waited GPU-hours, one line of
// points per policy, each point labelled with its level, and the oracle's
// cost as a dashed line. The format follows path's extension, one of
// PlotFormats.
func (f *Frontier) Plot(path string) error {
	if err := f.plot(path); err != nil {
		return fmt.Errorf("plot %s: %w", path, err)
	}
	return nil
}

func (f *Frontier) plot(path string) error {
	if err := checkPlotPath(path); err != nil {
		return err
	}
	p := titledPlot(f.Trace + ": cost against waiting (" + f.HeadroomPlaceholders + "-wide placeholders)")
	p.X.Label.Text = "waited GPU-hours"
	p.Y.Label.Text = "cost, $ millions"
	p.X.Min = 0
	p.X.Tick.Marker = labelledTicks{func(v float64) string { return thousands(v) }}
	p.Y.Tick.Marker = labelledTicks{func(v float64) string { return strconv.FormatFloat(v, 'g', 4, 64) }}
	p.Add(plotter.NewGrid())
	p.Legend.Top = true // top right: where neither line goes
	lo, hi := f.OracleCostUSD, f.OracleCostUSD
	maxWait := 0.0
	for _, pol := range []string{"headroom", "predictive"} {
		var xys, byCost plotter.XYs
		var labels []string
		for _, pt := range f.Points {
			if pt.Policy == pol {
				xy := plotter.XY{X: pt.WaitGPUHours, Y: pt.CostUSD / 1e6}
				lo, hi, maxWait = min(lo, pt.CostUSD), max(hi, pt.CostUSD), max(maxWait, pt.WaitGPUHours)
				if pol == "predictive" && pt.Level == 0 {
					// Off the line of quantiles: its own mark.
					byCost = append(byCost, xy)
					continue
				}
				xys = append(xys, xy)
				labels = append(labels, levelText(pol, pt.Level))
			}
		}
		if len(xys) == 0 {
			continue
		}
		line, points, err := plotter.NewLinePoints(xys)
		if err != nil {
			return fmt.Errorf("%s: %w", pol, err)
		}
		c := policyColors[pol]
		line.Color, line.Width = c, vg.Points(1.2)
		points.Color, points.Shape, points.Radius = c, draw.CircleGlyph{}, vg.Points(3)
		lab, err := plotter.NewLabels(plotter.XYLabels{XYs: xys, Labels: labels})
		if err != nil {
			return fmt.Errorf("%s: %w", pol, err)
		}
		for i := range lab.TextStyle {
			lab.TextStyle[i].Font.Size = vg.Points(8)
			lab.TextStyle[i].Color = c
		}
		lab.Offset = vg.Point{X: vg.Points(4), Y: vg.Points(3)}
		p.Add(line, points, lab)
		p.Legend.Add(pol, line)
		if len(byCost) > 0 {
			s, err := plotter.NewScatter(byCost)
			if err != nil {
				return fmt.Errorf("%s by cost: %w", pol, err)
			}
			s.Color, s.Shape, s.Radius = c, draw.BoxGlyph{}, vg.Points(4)
			p.Add(s)
			p.Legend.Add(pol+" by cost (the config's choice)", s)
		}
	}
	if f.OracleCostUSD > 0 {
		o, err := plotter.NewLine(plotter.XYs{{X: 0, Y: f.OracleCostUSD / 1e6}, {X: max(maxWait, 1) * 1.1, Y: f.OracleCostUSD / 1e6}})
		if err != nil {
			return err
		}
		o.Color, o.Dashes = policyColors["oracle"], []vg.Length{vg.Points(4), vg.Points(3)}
		p.Add(o)
		p.Legend.Add(fmt.Sprintf("oracle $%s", thousands(f.OracleCostUSD)), o)
	}
	p.X.Max = max(maxWait, 1) * 1.15
	pad := max((hi-lo)/1e6*0.1, 0.01)
	p.Y.Min, p.Y.Max = lo/1e6-pad, hi/1e6+3*pad
	return p.Save(8*vg.Inch, 5*vg.Inch, path)
}
