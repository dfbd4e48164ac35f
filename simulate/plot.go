package simulate

import (
	"errors"
	"fmt"
	"image/color"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/text"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"

	"github.com/fleetcast/autoscaler/fleet"
	"github.com/fleetcast/autoscaler/forecast"
)

// PlotFormats are the file extensions Plot accepts, each naming the format
// it writes.
var PlotFormats = []string{".svg", ".png", ".pdf"}

// plotMaxPoints is the most points drawn per line; longer series are
// downsampled by taking the maximum over buckets, so peaks stay visible.
const plotMaxPoints = 4000

// The report's picture's size, before its legend's rows.
const (
	plotWidth  = 12 * vg.Inch
	plotHeight = 5 * vg.Inch
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
// legend, which lies below the plot. The format follows path's extension,
// one of PlotFormats; an unknown extension is an error before anything is
// drawn or written.
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

// titledPlot is an empty plot with the pictures' title style, for
// newFigure, which lays its legend out below it.
func titledPlot(title string) *plot.Plot {
	p := plot.New()
	p.Title.Text = title
	p.Title.TextStyle.Font.Size = titleSize
	p.Title.Padding = vg.Points(8)
	return p
}

func (r *Report) plot(path string) error {
	if err := checkPlotPath(path); err != nil {
		return err
	}
	fg, err := r.figure()
	if err != nil {
		return err
	}
	return fg.save(path)
}

// figure is the report's picture, to be laid out and drawn.
func (r *Report) figure() (*figure, error) {
	step := r.Demand.Step.Hours() / 24
	if step <= 0 {
		if len(r.Demand.Values) > 0 || r.hasCapacity() {
			return nil, errors.New("demand step must be positive")
		}
		step = 1
	}

	fg := newFigure(r.Trace+": demand and capacity by policy", plotWidth, plotHeight)
	p := fg.p
	p.X.Label.Text = "days since trace start"
	p.Y.Label.Text = "GPUs"
	p.X.Min, p.Y.Min = 0, 0
	p.Add(plotter.NewGrid())

	if len(r.Demand.Values) > 0 {
		demand, err := plotter.NewLine(series(r.Demand.Values, step))
		if err != nil {
			return nil, fmt.Errorf("demand: %w", err)
		}
		demand.StepStyle = plotter.PostStep
		demand.FillColor = color.Gray{Y: 0xd0}
		demand.Color = color.Gray{Y: 0x90}
		demand.Width = vg.Points(0.5)
		p.Add(demand)
		fg.add("demand", demand)
	}

	other := 0
	for _, res := range r.Policies {
		if len(res.Capacity) == 0 {
			continue
		}
		line, err := plotter.NewLine(series(res.Capacity, step))
		if err != nil {
			return nil, fmt.Errorf("policy %s: %w", res.Policy, err)
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
		fg.add(fmt.Sprintf("%s  $%s  (%.2fx oracle)", res.Policy, thousands(res.CostUSD), res.CostVsOracle), line)
	}
	// A little room above the tallest line; the legend is below the plot.
	if !(p.Y.Max > 0) {
		p.Y.Max = 1
	}
	p.Y.Max *= 1.04
	if p.X.Max <= p.X.Min {
		p.X.Max = p.X.Min + step
	}
	return fg, nil
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

// The pictures' furniture, in points.
const (
	// titleSize is the title's font size, unless the title has a word
	// too wide for the picture.
	titleSize = 14
	// plotMargin is kept clear around a picture's contents: gonum draws
	// a title's ascent and a rotated axis label a little past the canvas
	// it lays them out in.
	plotMargin = 4
	// legendMargin is inside the legend's frame, around its entries;
	// legendGap between the x axis's label and the frame; legendColumnGap
	// between the legend's columns; legendEntryPad between the entries of
	// a column.
	legendMargin    = 6
	legendGap       = 6
	legendColumnGap = 18
	legendEntryPad  = 2
)

// figure is a picture to lay out and draw: a plot whose legend stays
// empty, the entries of the picture's legend, which is laid out below
// the plot in as many columns as fit, and the picture's size without
// the legend (which adds its rows to the height).
type figure struct {
	p             *plot.Plot
	title         string
	legend        []legendEntry
	width, height vg.Length
}

// legendEntry is one entry of a figure's legend.
type legendEntry struct {
	text   string
	thumbs []plot.Thumbnailer
}

// newFigure is an empty figure with the pictures' title style.
func newFigure(title string, width, height vg.Length) *figure {
	p := titledPlot(title)
	p.Legend.Padding = vg.Points(legendEntryPad)
	return &figure{p: p, title: title, width: width, height: height}
}

// add adds an entry to the figure's legend.
func (fg *figure) add(text string, thumbs ...plot.Thumbnailer) {
	fg.legend = append(fg.legend, legendEntry{text: text, thumbs: thumbs})
}

// plotLayout is where a figure's parts go, in the picture's coordinates
// (points, y up).
type plotLayout struct {
	// size is the picture's.
	size vg.Point
	// plot is the plot's canvas: its title, axes and data area.
	plot vg.Rectangle
	// legend is the legend's frame, below the plot; empty without a
	// legend. columns are its columns of entries, each drawn by a
	// plot.Legend in its box, in legendStyle.
	legend      vg.Rectangle
	columns     []legendColumn
	legendStyle text.Style
}

// legendColumn is a column of a legend's entries and the box they are
// drawn in, top down.
type legendColumn struct {
	box     vg.Rectangle
	entries []legendEntry
}

// layout lays the figure out: the title broken into lines (or shrunk) to
// fit the width, and the legend's entries in columns below the x axis,
// in a frame of its own, so that they cover no data. It sets the plot's
// title.
func (fg *figure) layout() plotLayout {
	p := fg.p
	inner := fg.width - 2*plotMargin
	sty := p.Title.TextStyle
	sty.Font.Size = titleSize
	p.Title.Text, p.Title.TextStyle = fitText(fg.title, sty, inner)

	lay := plotLayout{size: vg.Point{X: fg.width, Y: fg.height}}
	lay.plot = vg.Rectangle{Min: vg.Point{X: plotMargin, Y: plotMargin}, Max: vg.Point{X: fg.width - plotMargin, Y: fg.height - plotMargin}}
	if len(fg.legend) == 0 {
		return lay
	}
	lsty, cols, widths, h := legendColumns(fg.legend, p.Legend, inner-2*legendMargin)
	w := vg.Length(legendColumnGap) * vg.Length(len(cols)-1)
	for _, cw := range widths {
		w += cw
	}
	w, h = w+2*legendMargin, h+2*legendMargin
	lay.size.Y += h + legendGap
	lay.plot.Min.Y += h + legendGap
	lay.plot.Max.Y = lay.size.Y - plotMargin
	// Centred under the data area, inside the picture.
	data := lay.dataArea(p)
	x := (data.Min.X+data.Max.X)/2 - w/2
	x = max(min(x, fg.width-plotMargin-w), plotMargin)
	lay.legend = vg.Rectangle{Min: vg.Point{X: x, Y: plotMargin}, Max: vg.Point{X: x + w, Y: plotMargin + h}}
	lay.legendStyle = lsty
	x += legendMargin
	for i, col := range cols {
		lay.columns = append(lay.columns, legendColumn{entries: col, box: vg.Rectangle{
			Min: vg.Point{X: x, Y: lay.legend.Min.Y + legendMargin},
			Max: vg.Point{X: x + widths[i], Y: lay.legend.Max.Y - legendMargin},
		}})
		x += widths[i] + legendColumnGap
	}
	return lay
}

// dataArea is where the plot, laid out by lay, draws its data.
func (lay plotLayout) dataArea(p *plot.Plot) vg.Rectangle {
	return p.DataCanvas(draw.Canvas{Rectangle: lay.plot}).Rectangle
}

// fitText breaks s between words into lines no wider than width in sty,
// and shrinks sty's font if a word alone is wider.
func fitText(s string, sty text.Style, width vg.Length) (string, text.Style) {
	if sty.Width(s) <= width {
		return s, sty
	}
	var lines []string
	for _, w := range strings.Fields(s) {
		n := len(lines) - 1
		if n >= 0 && sty.Width(lines[n]+" "+w) <= width {
			lines[n] += " " + w
			continue
		}
		lines = append(lines, w)
	}
	s = strings.Join(lines, "\n")
	if w := sty.Width(s); w > width {
		sty.Font.Size *= width / w
	}
	return s, sty
}

// legendColumns splits entries into as many columns as fit side by side
// in width, each filled top down, and says the text style they are drawn
// in (l's, with its font shrunk if an entry alone is wider than width),
// each column's width and the tallest column's height, as a plot.Legend
// of l's style lays them out.
func legendColumns(entries []legendEntry, l plot.Legend, width vg.Length) (sty text.Style, cols [][]legendEntry, widths []vg.Length, height vg.Length) {
	sty = l.TextStyle
	entryWidth := func(e legendEntry) vg.Length {
		return l.ThumbnailWidth + sty.Rectangle(" ").Max.X + sty.Width(e.text)
	}
	var widest legendEntry
	for _, e := range entries {
		if entryWidth(e) > entryWidth(widest) {
			widest = e
		}
	}
	if w := entryWidth(widest); w > width {
		// The text scales with the font; the thumbnail does not.
		text := w - l.ThumbnailWidth
		sty.Font.Size *= max(width-l.ThumbnailWidth, 1) / text
	}
	for rows := 1; rows <= len(entries); rows++ {
		cols, widths = nil, nil
		total := vg.Length(0)
		for i := 0; i < len(entries); i += rows {
			col := entries[i:min(i+rows, len(entries))]
			cw := vg.Length(0)
			for _, e := range col {
				cw = max(cw, entryWidth(e))
			}
			if len(cols) > 0 {
				total += legendColumnGap
			}
			cols, widths, total = append(cols, col), append(widths, cw), total+cw
		}
		if total <= width || len(cols) == 1 {
			break
		}
	}
	var entry vg.Length
	for _, e := range entries {
		entry = max(entry, sty.Rectangle(e.text).Max.Y)
	}
	n := vg.Length(len(cols[0]))
	return sty, cols, widths, n*entry + (n-1)*l.Padding + sty.FontExtents().Descent
}

// draw draws the figure, laid out by lay, on c, the whole picture: the
// plot, then each column of the legend with gonum's own legend drawing.
func (fg *figure) draw(c draw.Canvas, lay plotLayout) {
	p := fg.p
	if p.BackgroundColor != nil {
		c.SetColor(p.BackgroundColor)
		c.Fill(c.Rectangle.Path())
	}
	p.Draw(crop(c, lay.plot))
	if len(lay.columns) == 0 {
		return
	}
	c.SetLineStyle(draw.LineStyle{Color: color.Gray{Y: 0xb0}, Width: vg.Points(0.5)})
	c.Stroke(lay.legend.Path())
	for _, col := range lay.columns {
		l := plot.NewLegend()
		l.TextStyle, l.ThumbnailWidth, l.Padding = lay.legendStyle, p.Legend.ThumbnailWidth, p.Legend.Padding
		l.Top, l.Left = true, true
		for _, e := range col.entries {
			l.Add(e.text, e.thumbs...)
		}
		l.Draw(crop(c, col.box))
	}
}

// crop is the part r of c.
func crop(c draw.Canvas, r vg.Rectangle) draw.Canvas {
	return draw.Crop(c, r.Min.X-c.Min.X, r.Max.X-c.Max.X, r.Min.Y-c.Min.Y, r.Max.Y-c.Max.Y)
}

// save lays the figure out and writes it to path, in the format its
// extension names (checkPlotPath).
func (fg *figure) save(path string) (err error) {
	lay := fg.layout()
	format := strings.ToLower(strings.TrimPrefix(filepath.Ext(path), "."))
	c, err := draw.NewFormattedCanvas(lay.size.X, lay.size.Y, format)
	if err != nil {
		return err
	}
	fg.draw(draw.New(c), lay)
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	defer func() {
		if cerr := f.Close(); err == nil {
			err = cerr
		}
	}()
	_, err = c.WriteTo(f)
	return err
}

// PlotForecast draws a forecast after its history: the last three days of
// history, the forecast's median and its 80% band, in hours from the
// forecast's origin, under a title that names the series name and the
// forecast's model. The format follows path's extension, one of
// PlotFormats; an unknown extension is an error before anything is drawn
// or written.
func PlotForecast(path, name string, history fleet.Series, f forecast.Forecast) error {
	if err := checkPlotPath(path); err != nil {
		return fmt.Errorf("plot %s: %w", path, err)
	}
	fg, err := forecastFigure(name, history, f)
	if err == nil {
		err = fg.save(path)
	}
	if err != nil {
		return fmt.Errorf("plot %s: %w", path, err)
	}
	return nil
}

// forecastFigure is PlotForecast's picture, to be laid out and drawn.
func forecastFigure(name string, history fleet.Series, f forecast.Forecast) (*figure, error) {
	fg := newFigure(fmt.Sprintf("%s: %s forecast with its 80%% band", name, f.Model), 12*vg.Inch, 5*vg.Inch)
	p := fg.p
	p.X.Label.Text = "hours from the forecast origin"
	p.Y.Label.Text = "demand"
	hours := func(i int, step time.Duration) float64 { return float64(i) * step.Hours() }
	from := 0
	if history.Step > 0 {
		from = max(0, len(history.Values)-int(forecast.Day/history.Step)*3)
	}
	past := make(plotter.XYs, 0, len(history.Values)-from)
	for i := from; i < len(history.Values); i++ {
		past = append(past, plotter.XY{X: hours(i-len(history.Values), history.Step), Y: history.Values[i]})
	}
	lo, mid, hi := f.Quantile(0.1), f.Quantile(0.5), f.Quantile(0.9)
	band := make(plotter.XYs, 0, 2*len(mid))
	med := make(plotter.XYs, 0, len(mid))
	for k := range mid {
		med = append(med, plotter.XY{X: hours(k, f.Step), Y: mid[k]})
		band = append(band, plotter.XY{X: hours(k, f.Step), Y: hi[k]})
	}
	for k := len(lo) - 1; k >= 0; k-- {
		band = append(band, plotter.XY{X: hours(k, f.Step), Y: lo[k]})
	}
	poly, err := plotter.NewPolygon(band)
	if err != nil {
		return nil, err
	}
	poly.Color = color.NRGBA{R: 0x2c, G: 0xa0, B: 0x2c, A: 0x50} // the median's green, faint
	poly.LineStyle.Width = 0
	hl, err := plotter.NewLine(past)
	if err != nil {
		return nil, err
	}
	ml, err := plotter.NewLine(med)
	if err != nil {
		return nil, err
	}
	ml.Color = policyColors["predictive"]
	ml.Width = vg.Points(2)
	p.Add(poly, hl, ml)
	fg.add("history", hl)
	fg.add("forecast (median)", ml)
	fg.add("80% band", poly)
	return fg, nil
}
