package controller

import (
	"math"
	"strconv"
	"strings"
	"time"
)

// The web page's charts: SVG drawn here, in Go, so that they need no
// script to read. A chart is a time axis, a GPU axis from 0, lines and
// bands; the template turns a uiChart into SVG elements, escaping every
// label, and the CSS colours them by class.

// uiPoint is a value at a time.
type uiPoint struct {
	T time.Time
	V float64
}

// uiSeries is a line of a chart. A step series holds each value until
// the next point's time (an hourly mean until the hour's end).
type uiSeries struct {
	Class, Label string
	Points       []uiPoint
	Step         bool
	// Until is where a step series' last value ends; zero: at its last
	// point.
	Until time.Time
}

// uiBand is a shaded band between two series of the same times.
type uiBand struct {
	Class, Label string
	Lo, Hi       []uiPoint
}

// uiChartSpec is what a chart shows.
type uiChartSpec struct {
	Title    string
	From, To time.Time
	// Now, when within the window, is marked with a vertical line.
	Now    time.Time
	Bands  []uiBand
	Series []uiSeries
}

// uiChart is a chart laid out in its SVG's coordinates, as text.
type uiChart struct {
	Title          string
	W, H           int
	X0, X1, Y0, Y1 string
	// LabelX is where the GPU axis's labels end.
	LabelX string
	XTicks []uiTick
	YTicks []uiTick
	Bands  []uiPath
	Lines  []uiPath
	NowX   string
	Legend []uiLegend
	// Empty is set when nothing falls within the window.
	Empty bool
}

// uiTick is an axis's tick: where, and its label.
type uiTick struct {
	Pos, Label string
}

// uiPath is a polyline's or polygon's points ("x,y x,y ...") and class.
type uiPath struct {
	Class, Points string
}

// uiLegend is a legend's entry.
type uiLegend struct {
	Class, Label string
}

// The chart's size in its own coordinates (it scales to its box) and
// its plot area's margins.
const (
	uiChartW, uiChartH = 720, 270
	uiMarginL          = 48
	uiMarginR          = 12
	uiMarginT          = 12
	uiMarginB          = 26
	// uiMaxPoints bounds the points of a line: more are merged by their
	// peak (a step of ten minutes over a week is 1,008).
	uiMaxPoints = 720
)

// layout lays the chart out.
func (s uiChartSpec) layout() uiChart {
	c := uiChart{Title: s.Title, W: uiChartW, H: uiChartH}
	x0, x1 := float64(uiMarginL), float64(uiChartW-uiMarginR)
	y0, y1 := float64(uiMarginT), float64(uiChartH-uiMarginB)
	c.X0, c.X1, c.Y0, c.Y1, c.LabelX = uiNum(x0), uiNum(x1), uiNum(y0), uiNum(y1), uiNum(x0-6)
	span := s.To.Sub(s.From)
	if span <= 0 {
		c.Empty = true
		return c
	}
	// What falls within the window, each line merged to at most
	// uiMaxPoints by its peaks.
	bands := make([][2][]uiPoint, len(s.Bands))
	for i, b := range s.Bands {
		bands[i] = [2][]uiPoint{thin(clip(b.Lo, s.From, s.To)), thin(clip(b.Hi, s.From, s.To))}
	}
	lines := make([][]uiPoint, len(s.Series))
	for i, l := range s.Series {
		pts := clip(l.Points, s.From, s.To)
		if l.Step {
			pts = steps(l.Points, l.Until, s.From, s.To)
		}
		lines[i] = thin(pts)
	}
	top, seen := 0.0, false
	for _, b := range bands {
		for _, p := range b[1] {
			top, seen = max(top, p.V), true
		}
	}
	for _, l := range lines {
		for _, p := range l {
			top, seen = max(top, p.V), true
		}
	}
	if !seen {
		c.Empty = true
	}
	step := niceStep(max(top, 1) / 4)
	top = math.Ceil(max(top, 1)*1.02/step) * step
	x := func(t time.Time) float64 { return x0 + float64(t.Sub(s.From))/float64(span)*(x1-x0) }
	y := func(v float64) float64 { return y1 - v/top*(y1-y0) }
	for v := 0.0; v <= top+step/2; v += step {
		c.YTicks = append(c.YTicks, uiTick{Pos: uiNum(y(v)), Label: strconv.FormatFloat(v, 'f', -1, 64)})
	}
	tick, daily := timeStep(span)
	for t := s.From.UTC().Truncate(tick); !t.After(s.To); t = t.Add(tick) {
		if t.Before(s.From) {
			continue
		}
		label := t.Format("15:04")
		if daily || t.Hour() == 0 && t.Minute() == 0 {
			label = t.Format("Mon 02")
		}
		c.XTicks = append(c.XTicks, uiTick{Pos: uiNum(x(t)), Label: label})
	}
	path := func(pts []uiPoint) string {
		var b strings.Builder
		for i, p := range pts {
			if i > 0 {
				b.WriteByte(' ')
			}
			b.WriteString(uiNum(x(p.T)) + "," + uiNum(y(p.V)))
		}
		return b.String()
	}
	for i, b := range s.Bands {
		lo, hi := bands[i][0], bands[i][1]
		if len(lo) == 0 || len(hi) == 0 {
			continue
		}
		rev := make([]uiPoint, len(lo))
		for j, p := range lo {
			rev[len(lo)-1-j] = p
		}
		c.Bands = append(c.Bands, uiPath{Class: b.Class, Points: path(hi) + " " + path(rev)})
		c.Legend = append(c.Legend, uiLegend{Class: b.Class, Label: b.Label})
	}
	for i, l := range s.Series {
		if len(lines[i]) == 0 {
			continue
		}
		pts := lines[i]
		if len(pts) == 1 {
			// A single value: a short mark, so that it shows.
			pts = []uiPoint{pts[0], {T: pts[0].T.Add(span / 100), V: pts[0].V}}
		}
		c.Lines = append(c.Lines, uiPath{Class: l.Class, Points: path(pts)})
		c.Legend = append(c.Legend, uiLegend{Class: l.Class, Label: l.Label})
	}
	if !s.Now.Before(s.From) && !s.Now.After(s.To) {
		c.NowX = uiNum(x(s.Now))
	}
	return c
}

// uiNum is a coordinate, to a tenth.
func uiNum(v float64) string { return strconv.FormatFloat(math.Round(v*10)/10, 'f', -1, 64) }

// clip is the points of pts within [from, to].
func clip(pts []uiPoint, from, to time.Time) []uiPoint {
	var out []uiPoint
	for _, p := range pts {
		if !p.T.Before(from) && !p.T.After(to) && !math.IsNaN(p.V) && !math.IsInf(p.V, 0) {
			out = append(out, p)
		}
	}
	return out
}

// steps draws a step series within [from, to]: each value from its
// point's time to the next's (the last to until, if later).
func steps(pts []uiPoint, until, from, to time.Time) []uiPoint {
	var out []uiPoint
	for i, p := range pts {
		end := until
		if i+1 < len(pts) {
			end = pts[i+1].T
		}
		if end.Before(p.T) {
			end = p.T
		}
		start := p.T
		if start.Before(from) {
			start = from
		}
		if end.After(to) {
			end = to
		}
		if end.Before(start) || math.IsNaN(p.V) || math.IsInf(p.V, 0) {
			continue
		}
		out = append(out, uiPoint{start, p.V}, uiPoint{end, p.V})
	}
	return out
}

// thin merges pts to at most uiMaxPoints, each the peak of its run: a
// chart of a week shows the peaks that a plan provisions for.
func thin(pts []uiPoint) []uiPoint {
	if len(pts) <= uiMaxPoints {
		return pts
	}
	k := (len(pts) + uiMaxPoints - 1) / uiMaxPoints
	out := make([]uiPoint, 0, uiMaxPoints)
	for i := 0; i < len(pts); i += k {
		p := pts[i]
		for _, q := range pts[i:min(i+k, len(pts))] {
			p.V = max(p.V, q.V)
		}
		out = append(out, p)
	}
	return out
}

// niceStep is the least of 1, 2, 2.5 and 5 times a power of ten that is
// at least x.
func niceStep(x float64) float64 {
	if x <= 0 {
		return 1
	}
	p := math.Pow(10, math.Floor(math.Log10(x)))
	for _, m := range []float64{1, 2, 2.5, 5, 10} {
		if m*p >= x {
			return m * p
		}
	}
	return 10 * p
}

// timeStep is the time axis's tick for a span (at most about eight
// ticks), and whether its ticks are whole days.
func timeStep(span time.Duration) (time.Duration, bool) {
	for _, h := range []int{1, 2, 3, 6, 12} {
		if d := time.Duration(h) * time.Hour; span/d <= 8 {
			return d, false
		}
	}
	for _, days := range []int{1, 2, 7, 14} {
		if d := time.Duration(days) * 24 * time.Hour; span/d <= 8 {
			return d, true
		}
	}
	return 30 * 24 * time.Hour, true
}
