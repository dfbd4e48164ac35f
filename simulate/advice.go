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
	"text/tabwriter"

	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"

	"github.com/fleetcast/autoscaler/fleet"
	"github.com/fleetcast/autoscaler/trace"
)

// Commitment is one growth of the advised reservation.
type Commitment struct {
	// Day is when it was made, in days from the trace start.
	Day float64 `json:"day"`
	// Nodes and GPUs are the reservation from then on.
	Nodes int `json:"nodes"`
	GPUs  int `json:"gpus"`
}

// AdviceTarget is what the advice check asks of the advice: it costs at
// most this much more than the hindsight-best fixed reservation.
const AdviceTarget = 1.05

// advicePoints is how many fixed reservation sizes the check's coarse
// grid tries (the configured size to the trace's peak), and adviceRefine
// how many more it tries around the cheapest of them.
const (
	advicePoints = 9
	adviceRefine = 4
)

// FixedReservation is the predictive policy run with one fixed
// reservation, committed at the advice's first review (advice_after).
type FixedReservation struct {
	Nodes int `json:"nodes"`
	GPUs  int `json:"gpus"`
	Result
}

// AdviceCheck weighs the baseline advice against hindsight: the predictive
// policy following the advice (reviewed after advice_after, then every
// 30 days; grown, never shrunk), against the same policy committing, at
// that first review, to each of a grid of fixed reservations and keeping
// it to the end. The cheapest fixed one is the hindsight-best fixed
// reservation; the configured size (no commitment beyond it) is "none".
type AdviceCheck struct {
	Trace string  `json:"trace"`
	Jobs  int     `json:"jobs"`
	Days  float64 `json:"days"`
	Seed  int64   `json:"seed"`
	// Pool is the reserved pool the advice is for; AdviceAfterDays when
	// it is first reviewed (and the fixed reservations committed).
	Pool            string  `json:"pool"`
	AdviceAfterDays float64 `json:"advice_after_days"`
	// Advised is the predictive policy following the advice, with its
	// commitments.
	Advised     Result       `json:"advised"`
	Commitments []Commitment `json:"commitments"`
	// Fixed are the fixed reservations tried, by size; Best indexes the
	// cheapest and None the configured size.
	Fixed []FixedReservation `json:"fixed"`
	Best  int                `json:"best"`
	None  int                `json:"none"`
	// VsBest and VsNone are the advice's cost over the best fixed
	// reservation's and over no commitment's.
	VsBest float64 `json:"vs_best"`
	VsNone float64 `json:"vs_none"`
}

// RunAdviceCheck runs the advice check (see AdviceCheck) on every core:
// the advised predictive policy, then the predictive policy at fixed
// reservations from the configured size to the trace's peak, on a grid
// refined around the cheapest.
func RunAdviceCheck(set *fleet.Settings, tr *trace.Trace, opt Options) (*AdviceCheck, error) {
	opt.Reservations = Advised
	opt, err := prepare(set, tr, opt)
	if err != nil {
		return nil, err
	}
	opt.sample, opt.Progress, opt.Cycles = 0, nil, nil // a dozen runs at once, all "predictive"
	if span := tr.Span(); opt.AdviceAfter >= span {
		return nil, fmt.Errorf("simulate: the advice's first review, after %s of history, would come at or after the trace's end (%.1f days): nothing to weigh; set a shorter advice_after (-advice-after)",
			fleet.FormatDurationExact(opt.AdviceAfter), span.Hours()/24)
	}
	res := -1
	for i := range set.Pools {
		p := &set.Pools[i]
		if p.Capacity == fleet.Reserved && p.GPUsPerNode > 0 && (res < 0 || fleet.CompareForLaunch(p, &set.Pools[res]) < 0) {
			res = i
		}
	}
	if res < 0 {
		return nil, fmt.Errorf("simulate: the advice check needs a reserved pool to advise on; the config has none")
	}
	pool := set.Pools[res]
	gpn, configured := pool.GPUsPerNode, pool.Max
	top := max(configured+1, int(math.Ceil(float64(tr.PeakGPUs())/float64(gpn))))

	c := &AdviceCheck{Trace: tr.Name, Jobs: len(tr.Jobs), Days: tr.Span().Hours() / 24, Seed: opt.Seed,
		Pool: pool.Name, AdviceAfterDays: opt.AdviceAfter.Hours() / 24}
	var advisedErr error
	tried := map[int]*FixedReservation{}
	try := func(sizes []int) error {
		var todo []int
		for _, n := range sizes {
			if _, ok := tried[n]; !ok && n >= configured && n <= top {
				tried[n] = &FixedReservation{Nodes: n, GPUs: n * gpn}
				todo = append(todo, n)
			}
		}
		errs := make([]error, len(todo))
		parallel(len(todo), runtime.GOMAXPROCS(0), func(i int) {
			o := opt
			o.fixedCommit, o.fixedNodes = true, todo[i]
			tried[todo[i]].Result, errs[i] = runPolicy(set, tr, o, "predictive")
		})
		for i, err := range errs {
			if err != nil {
				return fmt.Errorf("simulate: predictive with %d reserved node(s): %w", todo[i], err)
			}
		}
		return nil
	}
	// The advised run goes beside the coarse grid, on the same cores.
	done := make(chan struct{})
	go func() {
		defer close(done)
		pol, err := newPolicy(set, tr, opt, "predictive")
		if err != nil {
			advisedErr = err
			return
		}
		c.Advised, advisedErr = simulatePolicy(set, tr, opt, "predictive", pol)
		c.Commitments = pol.(*predictive).commits
	}()
	grid := make([]int, 0, advicePoints)
	for k := range advicePoints {
		grid = append(grid, configured+int(math.Round(float64(k*(top-configured))/float64(advicePoints-1))))
	}
	err = try(grid)
	<-done
	if err != nil {
		return nil, err
	}
	if advisedErr != nil {
		return nil, fmt.Errorf("simulate: predictive following the advice: %w", advisedErr)
	}
	// Refine between the cheapest point's neighbours, and try the advice's
	// own final size as a fixed one.
	best := cheapestFixed(tried)
	lo, hi := best, best
	for n := range tried {
		if n < best && (lo == best || n > lo) {
			lo = n
		}
		if n > best && (hi == best || n < hi) {
			hi = n
		}
	}
	var more []int
	for k := 1; k <= adviceRefine; k++ {
		more = append(more, lo+int(math.Round(float64(k*(hi-lo))/float64(adviceRefine+1))))
	}
	if n := len(c.Commitments); n > 0 {
		more = append(more, c.Commitments[n-1].Nodes)
	}
	if err := try(more); err != nil {
		return nil, err
	}
	for _, f := range tried {
		c.Fixed = append(c.Fixed, *f)
	}
	slices.SortFunc(c.Fixed, func(a, b FixedReservation) int { return cmp.Compare(a.Nodes, b.Nodes) })
	best = cheapestFixed(tried)
	for i, f := range c.Fixed {
		if f.Nodes == best {
			c.Best = i
		}
	}
	c.None = 0 // the configured size: the grid's first and smallest
	if b := c.Fixed[c.Best].CostUSD; b > 0 {
		c.VsBest = c.Advised.CostUSD / b
	}
	if n := c.Fixed[c.None].CostUSD; n > 0 {
		c.VsNone = c.Advised.CostUSD / n
	}
	return c, nil
}

// cheapestFixed is the size of the cheapest fixed reservation tried, the
// smaller of equals.
func cheapestFixed(tried map[int]*FixedReservation) int {
	best := -1
	for n, f := range tried {
		if b, ok := tried[best]; !ok || f.CostUSD < b.CostUSD || (f.CostUSD == b.CostUSD && n < best) {
			best = n
		}
	}
	return best
}

// Passed reports whether the advice holds the check's line: at most
// AdviceTarget times the best fixed reservation's cost, and never more
// than no commitment.
func (c *AdviceCheck) Passed() bool {
	return c.VsBest <= AdviceTarget && c.VsNone <= 1
}

// WriteTable writes the check: the advice's commitments and cost, then
// every fixed reservation tried.
func (c *AdviceCheck) WriteTable(w io.Writer) error {
	fmt.Fprintf(w, "trace %s: %d jobs over %.1f days, seed %d; the advice for %s, first reviewed after %.0f days (the fixed reservations committed then)\n\n",
		c.Trace, c.Jobs, c.Days, c.Seed, c.Pool, c.AdviceAfterDays)
	var steps []string
	for _, m := range c.Commitments {
		steps = append(steps, fmt.Sprintf("%d GPUs on day %.0f", m.GPUs, m.Day))
	}
	if len(steps) == 0 {
		steps = append(steps, "no commitment beyond the configured reservation")
	}
	verdict := "holds"
	if !c.Passed() {
		verdict = "misses"
	}
	fmt.Fprintf(w, "advised: %s; cost $%s, wait %s GPU-h\n", strings.Join(steps, ", "), thousands(c.Advised.CostUSD), thousands(c.Advised.WaitGPUHours))
	fmt.Fprintf(w, "advice vs the best fixed reservation (%d GPUs): %.3fx; vs no commitment (%d GPUs): %.3fx; the line (<= %.2fx best, <= 1x none) %s\n\n",
		c.Fixed[c.Best].GPUs, c.VsBest, c.Fixed[c.None].GPUs, c.VsNone, AdviceTarget, verdict)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "\tfixed reserved GPUs\tcost $\tvs best\twait GPU-h\tlost GPU-h\t")
	for i, f := range c.Fixed {
		var marks []string
		if i == c.None {
			marks = append(marks, "none")
		}
		if i == c.Best {
			marks = append(marks, "best")
		}
		mark := strings.Join(marks, ", ")
		fmt.Fprintf(tw, "%s\t%d\t%.0f\t%.3f\t%.0f\t%.1f\t\n", mark, f.GPUs, f.CostUSD, f.CostUSD/c.Fixed[c.Best].CostUSD, f.WaitGPUHours, f.LostGPUHours)
	}
	return tw.Flush()
}

// Plot draws cost against the fixed reservation's size, with the advice's
// final size and cost as a square. The format follows path's extension,
// one of PlotFormats.
func (c *AdviceCheck) Plot(path string) error {
	if err := c.plot(path); err != nil {
		return fmt.Errorf("plot %s: %w", path, err)
	}
	return nil
}

func (c *AdviceCheck) plot(path string) error {
	if err := checkPlotPath(path); err != nil {
		return err
	}
	fg, err := c.figure()
	if err != nil {
		return err
	}
	return fg.save(path)
}

// figure is the advice check's picture, to be laid out and drawn.
func (c *AdviceCheck) figure() (*figure, error) {
	fg := newFigure(c.Trace+": the reservation advice against fixed reservations", 8*vg.Inch, 5*vg.Inch)
	p := fg.p
	p.X.Label.Text = "reserved GPUs (from the first review)"
	p.Y.Label.Text = "cost, $ millions"
	p.Y.Tick.Marker = labelledTicks{func(v float64) string { return strconv.FormatFloat(v, 'g', 4, 64) }}
	p.Add(plotter.NewGrid())
	var xys plotter.XYs
	for _, f := range c.Fixed {
		xys = append(xys, plotter.XY{X: float64(f.GPUs), Y: f.CostUSD / 1e6})
	}
	line, points, err := plotter.NewLinePoints(xys)
	if err != nil {
		return nil, err
	}
	col := policyColors["predictive"]
	line.Color, points.Color, points.Shape = col, col, draw.CircleGlyph{}
	p.Add(line, points)
	fg.add("predictive, fixed reservation", line, points)
	if n := len(c.Commitments); n > 0 {
		s, err := plotter.NewScatter(plotter.XYs{{X: float64(c.Commitments[n-1].GPUs), Y: c.Advised.CostUSD / 1e6}})
		if err != nil {
			return nil, err
		}
		s.Color, s.Shape, s.Radius = policyColors["oracle"], draw.BoxGlyph{}, vg.Points(4)
		p.Add(s)
		fg.add("predictive following the advice (its last size)", s)
	}
	return fg, nil
}
