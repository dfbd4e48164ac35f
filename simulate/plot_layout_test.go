package simulate

import (
	"bytes"
	"encoding/xml"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"gonum.org/v1/plot/font"
	"gonum.org/v1/plot/font/liberation"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/vgsvg"

	"github.com/fleetcast/autoscaler/fleet"
	"github.com/fleetcast/autoscaler/forecast"
)

// Long, realistic labels: a trace's base name as simulate takes it, and
// the policies' legend entries with costs in the tens of millions.
const longTrace = "servegen_bailian_chat_msmall_per_minute_2025-01-15_to_2025-02-15.csv"

// longReport is a report over a week of a daily cycle, with every policy.
func longReport() *Report {
	step := 10 * time.Minute
	n := 7 * 144
	demand := make([]float64, n)
	for i := range demand {
		demand[i] = 3000 + 1500*math.Sin(2*math.Pi*float64(i)/144)
	}
	r := &Report{Trace: longTrace, Jobs: 123456, Days: 7,
		Demand: fleet.Series{Start: time.Date(2025, 1, 15, 0, 0, 0, 0, time.UTC), Step: step, Values: demand}}
	costs := map[string]float64{"static": 41_093_552, "reactive": 24_980_117, "headroom": 26_400_318,
		"predictive": 24_723_274, "perfect": 23_951_880, "oracle": 23_390_721, "fair-share": 25_112_004}
	for k, pol := range []string{"static", "reactive", "headroom", "predictive", "perfect", "oracle", "fair-share"} {
		capacity := make([]float64, n)
		for i, d := range demand {
			capacity[i] = d * (1 + 0.05*float64(k))
			if pol == "static" {
				capacity[i] = 4600
			}
		}
		r.Policies = append(r.Policies, Result{Policy: pol, CostUSD: costs[pol], CostVsOracle: costs[pol] / costs["oracle"], Capacity: capacity})
	}
	return r
}

// longFrontier is a frontier with every policy's points, the largest
// waiting (reactive's) at the right edge with its label.
func longFrontier(trace string) *Frontier {
	f := &Frontier{Trace: trace, HeadroomPlaceholders: "node", OracleCostUSD: 23_390_721}
	add := func(policy string, level, wait, costM float64) {
		f.Points = append(f.Points, FrontierPoint{Policy: policy, Level: level,
			Result: Result{Policy: policy, WaitGPUHours: wait, CostUSD: costM * 1e6}})
	}
	for i, b := range FrontierBuffers {
		add("headroom", float64(b), []float64{15_812, 1_562, 700, 200, 40}[i], []float64{24.0, 25.41, 26.0, 27.5, 30.2}[i])
	}
	for i, m := range []float64{0, 0.05, 0.1, 0.2} {
		add("perfect", m, []float64{3000, 900, 300, 50}[i], []float64{23.6, 24.3, 25.0, 26.6}[i])
	}
	add("predictive", 0, 2_356, 25.15)
	for i, q := range FrontierQuantiles {
		add("predictive", q, []float64{14_000, 12_000, 9_000, 6_000, 3_500, 2_500, 2_356, 1_200}[i], []float64{23.8, 24.0, 24.3, 24.7, 25.0, 25.2, 25.15, 25.9}[i])
	}
	return f
}

// longForecast is two weeks of history at ten minutes and a day's
// forecast after it, made by a combination of models.
func longForecast() (fleet.Series, forecast.Forecast) {
	step := 10 * time.Minute
	h := fleet.Series{Start: time.Date(2025, 1, 15, 0, 0, 0, 0, time.UTC), Step: step, Values: make([]float64, 14*144)}
	for i := range h.Values {
		h.Values[i] = 800 + 300*math.Sin(2*math.Pi*float64(i)/144)
	}
	f := forecast.Forecast{Origin: h.Start.Add(time.Duration(len(h.Values)) * step), Step: step,
		Model:  "fourier_regression (step 1), adjusted_holt (steps 2-6), seasonal_naive (steps 7-144)",
		Levels: []float64{0.1, 0.5, 0.9}, Values: make([][]float64, 3)}
	for l, spread := range []float64{-120, 0, 150} {
		for k := range 144 {
			f.Values[l] = append(f.Values[l], 800+300*math.Sin(2*math.Pi*float64(k)/144)+spread*math.Sqrt(float64(k+1)/144))
		}
	}
	return h, f
}

// plotCases are every kind of picture, each with long labels: plot
// draws it as its callers do, and figure is the same picture to lay out.
func plotCases() []struct {
	name   string
	plot   func(path string) error
	figure func() (*figure, error)
} {
	oneRow := longReport()
	oneRow.Policies = oneRow.Policies[3:4]
	// Every point near the largest waiting: the labels crowd the right
	// edge.
	crowded := longFrontier(longTrace)
	crowded.HeadroomPlaceholders = "gpu"
	for i := range crowded.Points {
		crowded.Points[i].WaitGPUHours = 15_000 + float64(i)*40
	}
	history, fc := longForecast()
	forecastName := "philly_busy_running_and_pending_gpus_per_10_minutes.csv"
	return []struct {
		name   string
		plot   func(path string) error
		figure func() (*figure, error)
	}{
		{"report", longReport().Plot, longReport().figure},
		{"report, one policy", oneRow.Plot, oneRow.figure},
		{"frontier", longFrontier(longTrace).Plot, longFrontier(longTrace).figure},
		{"frontier, short name", longFrontier("philly_trace.csv").Plot, longFrontier("philly_trace.csv").figure},
		{"frontier, labels at the right edge", crowded.Plot, crowded.figure},
		{"forecast", func(path string) error { return PlotForecast(path, forecastName, history, fc) },
			func() (*figure, error) { return forecastFigure(forecastName, history, fc) }},
		{"advice", longAdvice().Plot, longAdvice().figure},
	}
}

// longAdvice is an advice check with a long trace name, fixed
// reservations from none to the peak, and the advice's last size.
func longAdvice() *AdviceCheck {
	c := &AdviceCheck{Trace: longTrace, Pool: "reserved-h100", Advised: Result{CostUSD: 24_410_118}}
	for i := range 12 {
		c.Fixed = append(c.Fixed, FixedReservation{Nodes: 20 * i, GPUs: 160 * i, Result: Result{CostUSD: 26e6 - 4e5*float64(i) + 5e4*float64(i*i)}})
	}
	c.Commitments = []Commitment{{Day: 7, Nodes: 60, GPUs: 480}, {Day: 37, Nodes: 100, GPUs: 800}}
	return c
}

// TestPlotTextInside draws each kind of picture with long labels and
// checks that every text lies inside the picture, each text's extent
// measured with the font metrics gonum lays text out with; and that the
// legend, in a frame of its own, covers neither the data area nor any
// other text, and holds every entry's text.
func TestPlotTextInside(t *testing.T) {
	for _, tc := range plotCases() {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "plot.svg")
			if err := tc.plot(path); err != nil {
				t.Fatal(err)
			}
			b, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			pic := readSVG(t, b)
			if len(pic.texts) < 5 {
				t.Fatalf("%d texts, want more", len(pic.texts))
			}
			const tol = 0.05 // points: the SVG's coordinates are rounded
			for _, tx := range pic.texts {
				r := tx.box
				if r.Min.X < -tol || r.Max.X > pic.width+tol || r.Min.Y < -tol || r.Max.Y > pic.height+tol {
					t.Errorf("%q spans x %.1f to %.1f, y %.1f to %.1f: outside the %.0f by %.0f picture",
						tx.text, r.Min.X, r.Max.X, r.Min.Y, r.Max.Y, pic.width, pic.height)
				}
			}

			fg, err := tc.figure()
			if err != nil {
				t.Fatal(err)
			}
			lay := fg.layout()
			if d := lay.size.Sub(vg.Point{X: pic.width, Y: pic.height}); math.Abs(float64(d.X))+math.Abs(float64(d.Y)) > tol {
				t.Fatalf("laid out %v, drawn %v by %v", lay.size, pic.width, pic.height)
			}
			if len(fg.legend) == 0 || len(lay.columns) == 0 {
				t.Fatal("no legend")
			}
			data := lay.dataArea(fg.p)
			frame := lay.legend
			t.Logf("picture %.0f by %.0f, data area %v, legend %v in %d columns", pic.width, pic.height, data, frame, len(lay.columns))
			if overlaps(frame, data) {
				t.Errorf("legend %v overlaps the data area %v", frame, data)
			}
			if frame.Min.X < 0 || frame.Min.Y < 0 || frame.Max.X > lay.size.X || frame.Max.Y > lay.size.Y {
				t.Errorf("legend %v outside the picture %v", frame, lay.size)
			}
			// In the SVG's coordinates, y down.
			frame.Min.Y, frame.Max.Y = pic.height-frame.Max.Y, pic.height-frame.Min.Y
			entries := map[string]bool{}
			for _, e := range fg.legend {
				entries[e.text] = false
			}
			for _, tx := range pic.texts {
				if _, ok := entries[tx.text]; ok && inside(tx.box, frame) {
					entries[tx.text] = true
				} else if overlaps(tx.box, frame) {
					t.Errorf("%q at %v overlaps the legend %v", tx.text, tx.box, frame)
				}
			}
			for e, ok := range entries {
				if !ok {
					t.Errorf("legend entry %q not drawn inside the legend %v", e, frame)
				}
			}
		})
	}
}

// TestPlotFormats draws each kind of picture in each format.
func TestPlotFormats(t *testing.T) {
	magic := map[string]string{".svg": "<?xml", ".png": "\x89PNG", ".pdf": "%PDF"}
	for _, tc := range plotCases() {
		for _, ext := range PlotFormats {
			path := filepath.Join(t.TempDir(), "plot"+ext)
			if err := tc.plot(path); err != nil {
				t.Fatalf("%s %s: %v", tc.name, ext, err)
			}
			b, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			if !strings.HasPrefix(string(b), magic[ext]) {
				t.Errorf("%s %s starts %q", tc.name, ext, b[:min(len(b), 8)])
			}
		}
	}
}

// overlaps reports whether rectangles a and b share more than an edge.
func overlaps(a, b vg.Rectangle) bool {
	return a.Min.X < b.Max.X && b.Min.X < a.Max.X && a.Min.Y < b.Max.Y && b.Min.Y < a.Max.Y
}

// inside reports whether a lies inside b.
func inside(a, b vg.Rectangle) bool {
	return a.Min.X >= b.Min.X && a.Max.X <= b.Max.X && a.Min.Y >= b.Min.Y && a.Max.Y <= b.Max.Y
}

// svgPicture is an SVG picture's size, in points, and its texts.
type svgPicture struct {
	width, height vg.Length
	texts         []svgText
}

// svgText is a <text> element: its string, and the box its glyphs take
// (the advance width by the descent below and the ascent above the
// baseline), in the picture's coordinates (y down, as SVG has it).
type svgText struct {
	text string
	box  vg.Rectangle
}

// affine is an SVG transform matrix(a b c d e f).
type affine [6]float64

func (m affine) mul(n affine) affine {
	return affine{
		m[0]*n[0] + m[2]*n[1], m[1]*n[0] + m[3]*n[1],
		m[0]*n[2] + m[2]*n[3], m[1]*n[2] + m[3]*n[3],
		m[0]*n[4] + m[2]*n[5] + m[4], m[1]*n[4] + m[3]*n[5] + m[5],
	}
}

func (m affine) apply(x, y float64) (float64, float64) {
	return m[0]*x + m[2]*y + m[4], m[1]*x + m[3]*y + m[5]
}

var (
	identity     = affine{1, 0, 0, 1, 0, 0}
	transformRE  = regexp.MustCompile(`(\w+)\s*\(([^)]*)\)`)
	fontSizeRE   = regexp.MustCompile(`font-size:([0-9.eE+-]+)px`)
	fontDescrRE  = regexp.MustCompile(`^(font-family:[^;]*;font-variant:[^;]*;font-weight:[^;]*;font-style:[^;]*)`)
	viewBoxRE    = regexp.MustCompile(`^0 0 ([0-9.]+) ([0-9.]+)$`)
	svgFaces     map[string]font.Face
	svgFacesErr  error
	numberSepsRE = regexp.MustCompile(`[\s,]+`)
)

// parseTransform reads an SVG transform attribute.
func parseTransform(s string) (affine, error) {
	m := identity
	for _, f := range transformRE.FindAllStringSubmatch(s, -1) {
		var args []float64
		for _, a := range numberSepsRE.Split(strings.TrimSpace(f[2]), -1) {
			v, err := strconv.ParseFloat(a, 64)
			if err != nil {
				return m, fmt.Errorf("transform %q: %w", s, err)
			}
			args = append(args, v)
		}
		arg := func(i int, def float64) float64 {
			if i < len(args) {
				return args[i]
			}
			return def
		}
		var n affine
		switch f[1] {
		case "translate":
			n = affine{1, 0, 0, 1, arg(0, 0), arg(1, 0)}
		case "scale":
			n = affine{arg(0, 1), 0, 0, arg(1, arg(0, 1)), 0, 0}
		case "rotate":
			if len(args) != 1 {
				return m, fmt.Errorf("transform %q: rotate about a point", s)
			}
			sin, cos := math.Sincos(args[0] * math.Pi / 180)
			n = affine{cos, sin, -sin, cos, 0, 0}
		case "matrix":
			if len(args) != 6 {
				return m, fmt.Errorf("transform %q: matrix of %d numbers", s, len(args))
			}
			copy(n[:], args)
		default:
			return m, fmt.Errorf("transform %q: unknown %s", s, f[1])
		}
		m = m.mul(n)
	}
	return m, nil
}

// faceFor is the font face an SVG text's style names, at its size: the
// font descriptor vgsvg writes for each face gonum has is matched
// against the style's.
func faceFor(style string) (font.Face, error) {
	if svgFaces == nil && svgFacesErr == nil {
		svgFaces = map[string]font.Face{}
		for _, f := range liberation.Collection() {
			c := vgsvg.New(10, 10)
			f.Font.Size = 10
			c.FillString(f, vg.Point{}, "x")
			var b bytes.Buffer
			if _, err := c.WriteTo(&b); err != nil {
				svgFacesErr = err
				break
			}
			m := regexp.MustCompile(`style="\s*([^"]*)"`).FindAllStringSubmatch(b.String(), -1)
			for _, s := range m {
				if d := fontDescrRE.FindStringSubmatch(s[1]); d != nil {
					svgFaces[d[1]] = f
				}
			}
		}
	}
	if svgFacesErr != nil {
		return font.Face{}, svgFacesErr
	}
	d, size := fontDescrRE.FindStringSubmatch(style), fontSizeRE.FindStringSubmatch(style)
	if d == nil || size == nil {
		return font.Face{}, fmt.Errorf("style %q names no font and size", style)
	}
	f, ok := svgFaces[d[1]]
	if !ok {
		return font.Face{}, fmt.Errorf("style %q: no such font", style)
	}
	pt, err := strconv.ParseFloat(size[1], 64)
	if err != nil {
		return font.Face{}, err
	}
	f.Font.Size = vg.Points(pt)
	return f, nil
}

// readSVG reads the size and the texts of an SVG picture that gonum
// wrote.
func readSVG(t *testing.T, b []byte) svgPicture {
	t.Helper()
	var pic svgPicture
	dec := xml.NewDecoder(bytes.NewReader(b))
	stack := []affine{identity}
	attr := func(e xml.StartElement, name string) string {
		for _, a := range e.Attr {
			if a.Name.Local == name {
				return a.Value
			}
		}
		return ""
	}
	for {
		tok, err := dec.Token()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		switch e := tok.(type) {
		case xml.StartElement:
			m, err := parseTransform(attr(e, "transform"))
			if err != nil {
				t.Fatal(err)
			}
			m = stack[len(stack)-1].mul(m)
			stack = append(stack, m)
			switch e.Name.Local {
			case "svg":
				vb := viewBoxRE.FindStringSubmatch(attr(e, "viewBox"))
				if vb == nil {
					t.Fatalf("svg viewBox %q", attr(e, "viewBox"))
				}
				w, _ := strconv.ParseFloat(vb[1], 64)
				h, _ := strconv.ParseFloat(vb[2], 64)
				pic.width, pic.height = vg.Length(w), vg.Length(h)
			case "text":
				var s string
				if err := dec.DecodeElement(&s, &e); err != nil {
					t.Fatal(err)
				}
				stack = stack[:len(stack)-1]
				face, err := faceFor(attr(e, "style"))
				if err != nil {
					t.Fatal(err)
				}
				x, err1 := strconv.ParseFloat(attr(e, "x"), 64)
				y, err2 := strconv.ParseFloat(attr(e, "y"), 64)
				if err1 != nil || err2 != nil {
					t.Fatalf("text %q at x %q y %q", s, attr(e, "x"), attr(e, "y"))
				}
				w, ext := face.Width(s).Points(), face.Extents()
				box := vg.Rectangle{Min: vg.Point{X: vg.Length(math.Inf(1)), Y: vg.Length(math.Inf(1))},
					Max: vg.Point{X: vg.Length(math.Inf(-1)), Y: vg.Length(math.Inf(-1))}}
				for _, cx := range []float64{x, x + w} {
					for _, cy := range []float64{y - ext.Ascent.Points(), y + ext.Descent.Points()} {
						px, py := m.apply(cx, cy)
						box.Min.X, box.Max.X = min(box.Min.X, vg.Length(px)), max(box.Max.X, vg.Length(px))
						box.Min.Y, box.Max.Y = min(box.Min.Y, vg.Length(py)), max(box.Max.Y, vg.Length(py))
					}
				}
				pic.texts = append(pic.texts, svgText{text: s, box: box})
			}
		case xml.EndElement:
			stack = stack[:len(stack)-1]
		}
	}
	if pic.width <= 0 || pic.height <= 0 {
		t.Fatal("svg has no size")
	}
	return pic
}
