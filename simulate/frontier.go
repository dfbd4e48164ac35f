package simulate

import (
	"cmp"
	"fmt"
	"io"
	"math"
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

	"github.com/fleetcast/autoscaler/fleet"
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
	// Policy is "predictive", "untiered" (predictive planning as if the
	// config had no tiers), "headroom" or "perfect"; Level is its forecast
	// quantile (0: each pool's by expected cost, the config's own choice
	// when it sets no quantile), its buffer in GPUs, or the perfect
	// ablation's margin over the true demand (Options.PerfectMargin).
	Policy string  `json:"policy"`
	Level  float64 `json:"level"`
	Result
}

// Frontier is cost against waiting, for the predictive policy over its
// quantiles and for the headroom policy over its buffers (and the perfect
// ablation over its margins, when asked for): the forecast earns its keep
// where predictive's points lie below headroom's line (cheaper at the
// same waiting).
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
	// Points are headroom's, by buffer, then perfect's, by margin, then
	// predictive's, by quantile, then, with tiers, untiered's: the
	// predictive policy planning as if the config had none
	// (Options.Untiered), by quantile.
	Points []FrontierPoint `json:"points"`
	// AtBuffers reads the other frontiers at each buffer's waiting: what
	// the forecast buys against the practice it competes with.
	AtBuffers []BufferLevel `json:"at_buffers"`
	// Tiers reads the frontiers again with each tier's waiting, when the
	// config has tiers: cost against the GPU-hours that tier's jobs
	// waited.
	Tiers []TierFrontier `json:"tiers,omitempty"`
}

// BufferLevel is the frontiers read at the waiting of one headroom
// buffer: what predictive, and the perfect ablation when it ran, cost at
// that waiting, against what the buffer costs.
type BufferLevel struct {
	// BufferGPUs is the buffer; WaitGPUHours and CostUSD are what the
	// headroom policy waits and costs with it.
	BufferGPUs   int     `json:"buffer_gpus"`
	WaitGPUHours float64 `json:"wait_gpu_hours"`
	CostUSD      float64 `json:"cost_usd"`
	// Predictive is predictive's frontier read at WaitGPUHours.
	Predictive Reading `json:"predictive"`
	// Perfect is nil when the frontier ran no perfect ablation.
	Perfect *Reading `json:"perfect,omitempty"`
	// Untiered is the untiered predictive frontier read there; nil unless
	// the frontier ran it (with tiers, and without Options.Untiered).
	Untiered *Reading `json:"untiered,omitempty"`
}

// Reading is one policy's frontier read at a waiting level (readAt).
type Reading struct {
	// Reached is false when every point of the policy waits longer: its
	// frontier does not reach the level, and the cost there is unknown.
	Reached bool `json:"reached"`
	// Beyond is true when the level waits longer than the policy's
	// cheapest point: CostUSD is then that point's cost, which it pays for
	// less waiting, so an upper bound on its cost at the level.
	Beyond bool `json:"beyond"`
	// CostUSD is the policy's cost at the level, and VsBuffer that cost
	// against the buffer's, less 1 (-0.03: 3% cheaper); nil when the level
	// is not reached.
	CostUSD  *float64 `json:"cost_usd,omitempty"`
	VsBuffer *float64 `json:"vs_buffer,omitempty"`
	// Between names the points read: the two the level lies between, or
	// one (a point at the level's waiting; the cheapest point, when the
	// level is beyond it; the point that waits least, when the level is
	// not reached).
	Between []string `json:"between"`
	// LeastWaitGPUHours is the least any point of the policy waits.
	LeastWaitGPUHours float64 `json:"least_wait_gpu_hours"`
}

// readAt reads a policy's frontier at waiting level wait. The frontier is
// the lower convex hull of the policy's points that no other of its
// points beats on cost at no more waiting, in order of waiting, joined by
// straight lines: a fleet can run at any point of the line between two of
// them by running each for a share of the time, so a point above that
// line is beaten. A level beyond the cheapest point's waiting reads that
// point's cost (Beyond); one below the least waiting, or not a number,
// is not reached.
func readAt(points []FrontierPoint, policy string, wait float64) Reading {
	hull := hullOf(points, policy)
	if len(hull) == 0 {
		return Reading{}
	}
	r := Reading{LeastWaitGPUHours: hull[0].WaitGPUHours}
	name := func(p FrontierPoint) string { return levelText(p.Policy, p.Level) }
	if math.IsNaN(wait) || wait < hull[0].WaitGPUHours {
		r.Between = []string{name(hull[0])}
		return r
	}
	r.Reached = true
	i := 0
	for i+1 < len(hull) && hull[i+1].WaitGPUHours <= wait {
		i++
	}
	a := hull[i]
	cost := a.CostUSD
	r.CostUSD, r.Between = &cost, []string{name(a)}
	switch {
	case wait == a.WaitGPUHours:
	case i+1 == len(hull):
		r.Beyond = true
	default:
		b := hull[i+1]
		cost += (wait - a.WaitGPUHours) / (b.WaitGPUHours - a.WaitGPUHours) * (b.CostUSD - a.CostUSD)
		r.Between = append(r.Between, name(b))
	}
	return r
}

// hullOf is policy's frontier: the lower convex hull of its points (those
// with numbers for cost and waiting) that no other of its points beats on
// cost at no more waiting, in order of waiting; waiting rises and cost
// falls strictly along it.
func hullOf(points []FrontierPoint, policy string) []FrontierPoint {
	var own []FrontierPoint
	for _, p := range points {
		if p.Policy == policy && !math.IsNaN(p.WaitGPUHours) && !math.IsNaN(p.CostUSD) {
			own = append(own, p)
		}
	}
	slices.SortStableFunc(own, func(a, b FrontierPoint) int {
		return cmp.Or(cmp.Compare(a.WaitGPUHours, b.WaitGPUHours), cmp.Compare(a.CostUSD, b.CostUSD))
	})
	var hull []FrontierPoint
	for _, p := range own {
		if len(hull) > 0 && p.CostUSD >= hull[len(hull)-1].CostUSD {
			continue
		}
		for len(hull) >= 2 && !under(hull[len(hull)-2], hull[len(hull)-1], p) {
			hull = hull[:len(hull)-1]
		}
		hull = append(hull, p)
	}
	return hull
}

// under reports whether m lies strictly under the straight line from a to
// b, where a waits less than m and m less than b.
func under(a, m, b FrontierPoint) bool {
	return (m.WaitGPUHours-a.WaitGPUHours)*(b.CostUSD-a.CostUSD) > (m.CostUSD-a.CostUSD)*(b.WaitGPUHours-a.WaitGPUHours)
}

// readBuffers fills f.AtBuffers from its points: predictive's frontier,
// and perfect's when it ran, read at each buffer's waiting.
func (f *Frontier) readBuffers() {
	perfect := slices.ContainsFunc(f.Points, func(p FrontierPoint) bool { return p.Policy == "perfect" })
	untiered := slices.ContainsFunc(f.Points, func(p FrontierPoint) bool { return p.Policy == "untiered" })
	for _, h := range f.Points {
		if h.Policy != "headroom" {
			continue
		}
		at := BufferLevel{BufferGPUs: int(h.Level), WaitGPUHours: h.WaitGPUHours, CostUSD: h.CostUSD}
		read := func(policy string) Reading {
			r := readAt(f.Points, policy, h.WaitGPUHours)
			if r.Reached && h.CostUSD > 0 {
				vs := *r.CostUSD/h.CostUSD - 1
				r.VsBuffer = &vs
			}
			return r
		}
		at.Predictive = read("predictive")
		if perfect {
			r := read("perfect")
			at.Perfect = &r
		}
		if untiered {
			r := read("untiered")
			at.Untiered = &r
		}
		f.AtBuffers = append(f.AtBuffers, at)
	}
}

// RunFrontier simulates the trace under the headroom policy at each of
// FrontierBuffers and the predictive policy at each of FrontierQuantiles
// (forecast.quantile replaced) and, when the config sets no quantile, at
// its own choice by cost, and the perfect ablation at each of
// opt.FrontierPerfect, with the rest of opt as Run takes it, on every
// core; with tiers (unless opt.Untiered), the predictive policy untiered
// at the same levels too; and reads the frontiers at each buffer's
// waiting (AtBuffers), and with tiers at each tier's (Tiers).
func RunFrontier(set *fleet.Settings, tr *trace.Trace, opt Options) (*Frontier, error) {
	opt, err := prepare(set, tr, opt)
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
	for _, m := range opt.FrontierPerfect {
		runs = append(runs, run{"perfect", m})
	}
	predictives := []string{"predictive"}
	if len(set.Tiers) > 0 && !opt.Untiered {
		predictives = append(predictives, "untiered")
	}
	for _, pol := range predictives {
		for _, q := range slices.Backward(FrontierQuantiles) {
			runs = append(runs, run{pol, q})
		}
		if set.Forecast.Quantile == 0 {
			runs = append(runs, run{pol, 0})
		}
	}
	for _, b := range FrontierBuffers {
		runs = append(runs, run{"headroom", float64(b)})
	}
	runs = append(runs, run{"oracle", 0})
	results := make([]Result, len(runs))
	errs := make([]error, len(runs))
	parallel(len(runs), runtime.GOMAXPROCS(0), func(i int) {
		r, c, o := runs[i], set, opt
		policy := r.policy
		switch r.policy {
		case "predictive", "untiered":
			if r.policy == "untiered" {
				policy, o.Untiered = "predictive", true
			}
			if r.level > 0 {
				cc := *set
				cc.Forecast.Quantile = r.level
				c = &cc
			}
		case "perfect":
			o.PerfectMargin = r.level
		case "headroom":
			o.HeadroomGPUs = int(r.level)
			if o.HeadroomGPUs == 0 {
				o.HeadroomGPUs = -1
			}
		}
		results[i], errs[i] = runPolicy(c, tr, o, policy)
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
	for _, want := range []string{"headroom", "perfect", "predictive", "untiered"} {
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
	f.readBuffers()
	f.readTiers()
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
	case policy == "perfect":
		return "+" + strconv.FormatFloat(100*level, 'f', -1, 64) + "%"
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
	if err := tw.Flush(); err != nil {
		return err
	}
	if err := writeBuffers(w, "at each buffer's waiting, the frontiers read there", f.AtBuffers, f.Points); err != nil {
		return err
	}
	return f.writeTiers(w)
}

// writeBuffers writes, under title, a frontier read at the buffers (as
// AtBuffers): each buffer's waiting and cost, and what predictive (and
// perfect, and untiered) cost there; and predictive's choice by cost
// against reactive (the buffer of 0 GPUs), when both are among points.
func writeBuffers(w io.Writer, title string, at []BufferLevel, points []FrontierPoint) error {
	if len(at) == 0 {
		return nil
	}
	fmt.Fprintf(w, "\n%s (straight lines along the lower hull of their points; <= past the cheapest, which waits less):\n\n", title)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	head := "buffer\twait GPU-h\tcost $\tpredictive $\tvs buffer\tbetween\t"
	if at[0].Perfect != nil {
		head += "perfect $\tvs buffer\tbetween\t"
	}
	if at[0].Untiered != nil {
		head += "untiered $\tvs buffer\tbetween\t"
	}
	fmt.Fprintln(tw, head)
	cell := func(r Reading) string {
		between := strings.Join(r.Between, " to ")
		if !r.Reached {
			return fmt.Sprintf("not reached\t\t%s waits %.0f\t", between, r.LeastWaitGPUHours)
		}
		cost, vs := fmt.Sprintf("%.0f", *r.CostUSD), ""
		if r.VsBuffer != nil {
			vs = fmt.Sprintf("%+.1f%%", 100**r.VsBuffer)
		}
		if r.Beyond {
			// The cheapest point waits less: at most its cost.
			cost, between = "<="+cost, between+", waiting less"
			if vs != "" {
				vs = "<=" + vs
			}
		}
		return cost + "\t" + vs + "\t" + between + "\t"
	}
	for _, b := range at {
		row := fmt.Sprintf("%d GPUs\t%.0f\t%.0f\t", b.BufferGPUs, b.WaitGPUHours, b.CostUSD) + cell(b.Predictive)
		if b.Perfect != nil {
			row += cell(*b.Perfect)
		}
		if b.Untiered != nil {
			row += cell(*b.Untiered)
		}
		fmt.Fprintln(tw, row)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	re := at[0] // reactive: the buffer of 0 GPUs
	i := slices.IndexFunc(points, isByCost)
	if i < 0 || re.BufferGPUs != 0 || re.CostUSD <= 0 {
		return nil
	}
	p := points[i]
	if re.WaitGPUHours > 0 {
		fmt.Fprintf(w, "\npredictive by cost: %.3fx reactive's cost for %.0f%% of its waiting\n", p.CostUSD/re.CostUSD, 100*p.WaitGPUHours/re.WaitGPUHours)
	} else {
		fmt.Fprintf(w, "\npredictive by cost: %.3fx reactive's cost, waiting %s GPU-hours where reactive waits none\n", p.CostUSD/re.CostUSD, thousands(p.WaitGPUHours))
	}
	return nil
}

// Plot draws the frontier: cost against waited GPU-hours, one line of
// points per policy, each point labelled with its level, and the oracle's
// cost as a dashed line, with the legend below the plot. The format
// follows path's extension, one of PlotFormats.
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
	fg, err := f.figure()
	if err != nil {
		return err
	}
	return fg.save(path)
}

// figure is the frontier's picture, to be laid out and drawn.
func (f *Frontier) figure() (*figure, error) {
	fg := newFigure(f.Trace+": cost against waiting ("+f.HeadroomPlaceholders+"-wide placeholders)", 8*vg.Inch, 5*vg.Inch)
	p := fg.p
	p.X.Label.Text = "waited GPU-hours"
	p.Y.Label.Text = "cost, $ millions"
	p.X.Min = 0
	p.X.Tick.Marker = labelledTicks{func(v float64) string { return thousands(v) }}
	p.Y.Tick.Marker = labelledTicks{func(v float64) string { return strconv.FormatFloat(v, 'g', 4, 64) }}
	p.Add(plotter.NewGrid())
	lo, hi := f.OracleCostUSD, f.OracleCostUSD
	maxWait := 0.0
	for _, pol := range []string{"headroom", "perfect", "predictive"} {
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
			return nil, fmt.Errorf("%s: %w", pol, err)
		}
		c := policyColors[pol]
		line.Color, line.Width = c, vg.Points(1.2)
		points.Color, points.Shape, points.Radius = c, draw.CircleGlyph{}, vg.Points(3)
		lab, err := plotter.NewLabels(plotter.XYLabels{XYs: xys, Labels: labels})
		if err != nil {
			return nil, fmt.Errorf("%s: %w", pol, err)
		}
		for i := range lab.TextStyle {
			lab.TextStyle[i].Font.Size = vg.Points(8)
			lab.TextStyle[i].Color = c
		}
		lab.Offset = vg.Point{X: vg.Points(4), Y: vg.Points(3)}
		p.Add(line, points, lab)
		fg.add(pol, line, points)
		if len(byCost) > 0 {
			s, err := plotter.NewScatter(byCost)
			if err != nil {
				return nil, fmt.Errorf("%s by cost: %w", pol, err)
			}
			s.Color, s.Shape, s.Radius = c, draw.BoxGlyph{}, vg.Points(4)
			p.Add(s)
			fg.add(pol+" by cost (the config's choice)", s)
		}
	}
	if f.OracleCostUSD > 0 {
		o, err := plotter.NewLine(plotter.XYs{{X: 0, Y: f.OracleCostUSD / 1e6}, {X: max(maxWait, 1) * 1.1, Y: f.OracleCostUSD / 1e6}})
		if err != nil {
			return nil, err
		}
		o.Color, o.Dashes = policyColors["oracle"], []vg.Length{vg.Points(4), vg.Points(3)}
		p.Add(o)
		fg.add(fmt.Sprintf("oracle $%s", thousands(f.OracleCostUSD)), o)
	}
	p.X.Max = max(maxWait, 1) * 1.15
	pad := max((hi-lo)/1e6*0.1, 0.01)
	p.Y.Min, p.Y.Max = lo/1e6-pad, hi/1e6+pad
	return fg, nil
}
