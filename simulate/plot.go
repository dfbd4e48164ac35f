package simulate

import (
	"errors"
	"fmt"
	"image/color"
	"math"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
)

// PlotFormats are the file extensions Plot accepts, each naming the format
// it writes.
var PlotFormats = []string{".svg", ".png", ".pdf"}

// plotMaxPoints is the most points drawn per line; longer series are
// downsampled by taking the maximum over buckets, so peaks stay visible.
const plotMaxPoints = 4000

// The picture's size, and about how much of its height the title and the x
// axis take from the data area.
const (
	plotWidth     = 12 * vg.Inch
	plotHeight    = 5 * vg.Inch
	plotFurniture = 80 // points
	legendMargin  = 8  // points, around the legend's entries
)

// policyColors are the colours of the known policies' capacity lines; any
// other policy takes one of fallbackColors.
var (
	policyColors = map[string]color.Color{
		"static":     color.RGBA{R: 0x1f, G: 0x77, B: 0xb4, A: 0xff}, // blue
		"reactive":   color.RGBA{R: 0xff, G: 0x7f, B: 0x0e, A: 0xff}, // orange
		"predictive": color.RGBA{R: 0x2c, G: 0xa0, B: 0x2c, A: 0xff}, // green
		"oracle":     color.RGBA{R: 0xd6, G: 0x27, B: 0x28, A: 0xff}, // red
		"headroom":   color.RGBA{R: 0x94, G: 0x67, B: 0xbd, A: 0xff}, // purple
		"perfect":    color.RGBA{R: 0x17, G: 0xbe, B: 0xcf, A: 0xff}, // cyan
	}
	fallbackColors = []color.Color{
		color.RGBA{R: 0x8c, G: 0x56, B: 0x4b, A: 0xff}, // brown
		color.RGBA{R: 0xe3, G: 0x77, B: 0xc2, A: 0xff}, // pink
		color.RGBA{R: 0xbc, G: 0xbd, B: 0x22, A: 0xff}, // olive
	}
)

// Plot draws the report as one picture, "where the money went": the trace's
// demand as a grey area and each policy's capacity as a coloured line, in
// GPUs against days since the trace start, with each policy's cost in the
// legend. The format follows path's extension, one of PlotFormats; an
// unknown extension is an error before anything is drawn or written.
func (r *Report) Plot(path string) error {
	if err := r.plot(path); err != nil {
		return fmt.Errorf("plot %s: %w", path, err)
	}
	return nil
}

// checkPlotPath refuses a picture path whose extension is none of
// PlotFormats, before anything is drawn.
func checkPlotPath(path string) error {
	ext := strings.ToLower(filepath.Ext(path))
	if slices.Contains(PlotFormats, ext) {
		return nil
	}
	name := "no extension"
	if ext != "" {
		name = strconv.Quote(ext)
	}
	return fmt.Errorf("unsupported extension %s: want one of %s", name, strings.Join(PlotFormats, ", "))
}

// titledPlot is an empty picture with the pictures' title style.
func titledPlot(title string) *plot.Plot {
	p := plot.New()
	p.Title.Text = title
	p.Title.TextStyle.Font.Size = vg.Points(14)
	p.Title.Padding = vg.Points(8)
	return p
}

func (r *Report) plot(path string) error {
	if err := checkPlotPath(path); err != nil {
		return err
	}
	step := r.Demand.Step.Hours() / 24
	if step <= 0 {
		if len(r.Demand.Values) > 0 || r.hasCapacity() {
			return errors.New("demand step must be positive")
		}
		step = 1
	}

	p := titledPlot(r.Trace + ": demand and capacity by policy")
	p.X.Label.Text = "days since trace start"
	p.Y.Label.Text = "GPUs"
	p.X.Min, p.Y.Min = 0, 0
	p.Add(plotter.NewGrid())
	p.Legend.Top = true
	p.Legend.Left = true
	p.Legend.YOffs = -vg.Points(4)
	p.Legend.XOffs = vg.Points(4)
	legend := &legendBox{l: &p.Legend}

	if len(r.Demand.Values) > 0 {
		demand, err := plotter.NewLine(series(r.Demand.Values, step))
		if err != nil {
			return fmt.Errorf("demand: %w", err)
		}
		demand.StepStyle = plotter.PostStep
		demand.FillColor = color.Gray{Y: 0xd0}
		demand.Color = color.Gray{Y: 0x90}
		demand.Width = vg.Points(0.5)
		p.Add(demand)
		legend.add("demand", demand)
	}

	other := 0
	for _, res := range r.Policies {
		if len(res.Capacity) == 0 {
			continue
		}
		line, err := plotter.NewLine(series(res.Capacity, step))
		if err != nil {
			return fmt.Errorf("policy %s: %w", res.Policy, err)
		}
		line.StepStyle = plotter.PostStep
		line.Width = vg.Points(1.2)
		c, ok := policyColors[res.Policy]
		if !ok {
			c = fallbackColors[other%len(fallbackColors)]
			other++
		}
		line.Color = c
		p.Add(line)
		legend.add(fmt.Sprintf("%s  $%s  (%.2fx oracle)", res.Policy, thousands(res.CostUSD), res.CostVsOracle), line)
	}
	// Headroom above the tallest line for the legend, which sits top left
	// on a white box.
	if !(p.Y.Max > 0) {
		p.Y.Max = 1
	}
	if _, h := legend.size(); h > 0 {
		room := h + 2*vg.Points(legendMargin) - p.Legend.YOffs
		if frac := float64(room / (plotHeight - vg.Points(plotFurniture))); frac < 0.6 {
			p.Y.Max /= 1 - frac
		}
	}
	p.Add(legend)
	if p.X.Max <= p.X.Min {
		p.X.Max = p.X.Min + step
	}

	return p.Save(plotWidth, plotHeight, path)
}

// legendBox is a plotter, added last, that fills a white box where the
// legend (top left, drawn after all plotters) goes, so that lines and grid
// do not run through its text. texts are the legend's entries, which the
// legend keeps to itself.
type legendBox struct {
	l     *plot.Legend
	texts []string
}

// add adds an entry to the legend.
func (b *legendBox) add(text string, thumb plot.Thumbnailer) {
	b.l.Add(text, thumb)
	b.texts = append(b.texts, text)
}

// size is the legend's size, as the legend lays it out.
func (b *legendBox) size() (width, height vg.Length) {
	if len(b.texts) == 0 {
		return 0, 0
	}
	sty := b.l.TextStyle
	var entry vg.Length
	for _, t := range b.texts {
		entry = max(entry, sty.Rectangle(t).Max.Y)
		width = max(width, sty.Rectangle(" "+t).Max.X)
	}
	n := vg.Length(len(b.texts))
	return b.l.ThumbnailWidth + width, n*entry + (n-1)*b.l.Padding + sty.FontExtents().Descent
}

// Plot implements plot.Plotter.
func (b *legendBox) Plot(c draw.Canvas, _ *plot.Plot) {
	if len(b.texts) == 0 {
		return
	}
	w, h := b.size()
	m := vg.Points(legendMargin) / 2
	box := vg.Rectangle{
		Min: vg.Point{X: c.Min.X + b.l.XOffs - m, Y: c.Max.Y + b.l.YOffs - h - m},
		Max: vg.Point{X: c.Min.X + b.l.XOffs + w + m, Y: c.Max.Y + b.l.YOffs + m},
	}
	c.SetColor(color.RGBA{R: 0xff, G: 0xff, B: 0xff, A: 0xff})
	c.Fill(box.Path())
	c.SetLineStyle(draw.LineStyle{Color: color.Gray{Y: 0xb0}, Width: vg.Points(0.5)})
	c.Stroke(box.Path())
}

// hasCapacity reports whether any policy has a capacity series.
func (r *Report) hasCapacity() bool {
	for i := range r.Policies {
		if len(r.Policies[i].Capacity) > 0 {
			return true
		}
	}
	return false
}

// series is vs as points at x = i*step, downsampled to at most
// plotMaxPoints points by taking the maximum of each bucket (at the
// bucket's start), so that peaks stay visible. The last point is repeated
// one step on so that a step line covers the last sample's interval.
func series(vs []float64, step float64) plotter.XYs {
	bucket := (len(vs) + plotMaxPoints - 1) / plotMaxPoints
	bucket = max(bucket, 1)
	xys := make(plotter.XYs, 0, len(vs)/bucket+2)
	for i := 0; i < len(vs); i += bucket {
		m := math.Inf(-1)
		for _, v := range vs[i:min(i+bucket, len(vs))] {
			if !math.IsNaN(v) && !math.IsInf(v, 0) {
				m = max(m, v)
			}
		}
		if math.IsInf(m, -1) {
			m = 0
		}
		xys = append(xys, plotter.XY{X: float64(i) * step, Y: m})
	}
	if n := len(xys); n > 0 {
		xys = append(xys, plotter.XY{X: float64(len(vs)) * step, Y: xys[n-1].Y})
	}
	return xys
}

// thousands is v rounded to a whole number, with commas between thousands.
func thousands(v float64) string {
	s := strconv.FormatFloat(math.Round(v)+0, 'f', 0, 64) // +0: no "-0"
	sign := ""
	if strings.HasPrefix(s, "-") {
		sign, s = "-", s[1:]
	}
	if len(s) <= 3 || strings.ContainsAny(s, "IN") { // Inf, NaN
		return sign + s
	}
	var b strings.Builder
	head := len(s) % 3
	if head > 0 {
		b.WriteString(s[:head])
	}
	for i := head; i < len(s); i += 3 {
		if b.Len() > 0 {
			b.WriteByte(',')
		}
		b.WriteString(s[i : i+3])
	}
	return sign + b.String()
}
