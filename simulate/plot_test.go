package simulate

import (
	"bytes"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/fleetcast/autoscaler/fleet"
)

// plotReport is a small report: a square-wave demand over two days at a
// five-minute step and two policies' capacities, one a little longer.
func plotReport(n int) *Report {
	step := 5 * time.Minute
	demand := make([]float64, n)
	static := make([]float64, n+7)
	oracle := make([]float64, n+3)
	for i := range demand {
		if (i/48)%2 == 0 {
			demand[i] = 64
		} else {
			demand[i] = 16
		}
	}
	for i := range static {
		static[i] = 72
	}
	for i := range oracle {
		oracle[i] = demand[min(i, n-1)]
	}
	return &Report{
		Trace: "square-wave",
		Jobs:  12,
		Days:  float64(n) * step.Hours() / 24,
		Demand: fleet.Series{
			Start:  time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC),
			Step:   step,
			Values: demand,
		},
		Policies: []Result{
			{Policy: "static", CostUSD: 123456.7, CostVsOracle: 1.87, Capacity: static},
			{Policy: "oracle", CostUSD: 66020, CostVsOracle: 1, Capacity: oracle},
		},
	}
}

func TestPlotSVG(t *testing.T) {
	path := filepath.Join(t.TempDir(), "report.svg")
	if err := plotReport(576).Plot(path); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(b) < 2000 {
		t.Fatalf("svg is %d bytes, want more", len(b))
	}
	svg := string(b)
	for _, want := range []string{
		"square-wave: demand and capacity by policy",
		"days since trace start",
		"static  $123,457  (1.87x oracle)",
		"oracle  $66,020  (1.00x oracle)",
	} {
		if !strings.Contains(svg, want) {
			t.Errorf("svg lacks %q", want)
		}
	}
}

func TestPlotPNG(t *testing.T) {
	path := filepath.Join(t.TempDir(), "report.png")
	start := time.Now()
	if err := plotReport(2000).Plot(path); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("2,000-point png: %d bytes in %v", len(b), time.Since(start))
	if len(b) < 5000 {
		t.Fatalf("png is %d bytes, want more", len(b))
	}
	if !bytes.HasPrefix(b, []byte("\x89PNG\r\n\x1a\n")) {
		t.Fatalf("png starts %q, want the PNG magic", b[:min(len(b), 8)])
	}
}

func TestPlotPDF(t *testing.T) {
	path := filepath.Join(t.TempDir(), "report.pdf")
	if err := plotReport(100).Plot(path); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.HasPrefix(b, []byte("%PDF")) {
		t.Fatalf("pdf starts %q", b[:min(len(b), 8)])
	}
}

func TestPlotBadExtension(t *testing.T) {
	for _, name := range []string{"report.txt", "report"} {
		path := filepath.Join(t.TempDir(), name)
		err := plotReport(100).Plot(path)
		if err == nil {
			t.Fatalf("%s: no error", name)
		}
		if !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), ".svg") {
			t.Errorf("%s: error %q should name the path and the accepted extensions", name, err)
		}
		if name == "report.txt" && !strings.Contains(err.Error(), `".txt"`) {
			t.Errorf("error %q does not name the extension", err)
		}
		if _, err := os.Stat(path); !os.IsNotExist(err) {
			t.Errorf("%s: a file was written", name)
		}
	}
}

func TestPlotEmpty(t *testing.T) {
	path := filepath.Join(t.TempDir(), "empty.svg")
	if err := (&Report{Trace: "empty"}).Plot(path); err != nil {
		t.Fatal(err)
	}
}

func TestPlotDownsample(t *testing.T) {
	vs := make([]float64, 10_001)
	vs[5_003] = 99 // a one-sample spike
	vs[7] = math.NaN()
	xys := series(vs, 0.5)
	if len(xys) > plotMaxPoints+1 {
		t.Fatalf("%d points, want at most %d", len(xys), plotMaxPoints+1)
	}
	peak := 0.0
	for _, p := range xys {
		peak = max(peak, p.Y)
	}
	if peak != 99 {
		t.Errorf("peak %v after downsampling, want 99", peak)
	}
	if last := xys[len(xys)-1]; last.X != 5000.5 {
		t.Errorf("last x %v, want 5000.5", last.X)
	}
}

func TestThousands(t *testing.T) {
	for v, want := range map[float64]string{
		0: "0", -0.3: "0", 999.4: "999", 1000: "1,000", 123456.7: "123,457",
		1234567: "1,234,567", -98765: "-98,765",
	} {
		if got := thousands(v); got != want {
			t.Errorf("thousands(%v) = %q, want %q", v, got, want)
		}
	}
}
