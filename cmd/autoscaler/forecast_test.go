package main

import (
	"encoding/csv"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

// daysCSV is a 10-minute series of days days with a daily cycle.
func daysCSV(days int) string {
	var b strings.Builder
	b.WriteString("time,running,pending\n")
	for i := range days * 144 {
		v := 200 + 100*math.Sin(2*math.Pi*float64(i%144)/144) + float64(i%7)
		fmt.Fprintf(&b, "%d,%.1f,%d\n", i*600, v, i%3)
	}
	return b.String()
}

func TestForecastBacktestJSON(t *testing.T) {
	series := writeFile(t, "demand.csv", daysCSV(21))
	code, out, errOut := cmdline("forecast", "-series", series, "-value-column", "running+pending", "-horizon", "1h", "-backtest", "-json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	var rep struct {
		Series   string  `json:"series"`
		StepS    float64 `json:"step_s"`
		HorizonS float64 `json:"horizon_s"`
		Origins  int     `json:"origins"`
		Selected string  `json:"selected"`
		Models   []map[string]any
	}
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("-json does not parse: %v\n%s", err, out)
	}
	if rep.Series != "demand.csv" || rep.StepS != 600 || rep.HorizonS != 3600 || rep.Origins != 30 {
		t.Fatalf("report %+v", rep)
	}
	found := false
	for _, m := range rep.Models {
		for _, k := range []string{"model", "mase", "mase_se", "smape", "pinball", "coverage80", "fit_ms"} {
			if _, ok := m[k]; !ok {
				t.Errorf("model %v has no %q", m["model"], k)
			}
		}
		if len(m) != 7 {
			t.Errorf("model %v has %d fields, want model, mase, mase_se, smape, pinball, coverage80, fit_ms", m["model"], len(m))
		}
		found = found || m["model"] == rep.Selected
	}
	if !found {
		t.Fatalf("selected %q is not among the models", rep.Selected)
	}
}

// TestForecastPerOrigin: -per-origin writes every model's figures at every
// origin, and each model's mean over them is its MASE in the report.
func TestForecastPerOrigin(t *testing.T) {
	series := writeFile(t, "demand.csv", daysCSV(21))
	path := filepath.Join(t.TempDir(), "origins.csv")
	code, out, errOut := cmdline("forecast", "-series", series, "-value-column", "running", "-backtest", "-json", "-origins", "12", "-per-origin", path)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	var rep struct {
		Models []struct {
			Model string  `json:"model"`
			MASE  float64 `json:"mase"`
		} `json:"models"`
	}
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	rows, err := csv.NewReader(f).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(rows[0], ","); got != "origin,time_s,model,mase,pinball,coverage80" {
		t.Fatalf("header %q", got)
	}
	sums, counts := map[string]float64{}, map[string]int{}
	for _, r := range rows[1:] {
		origin, _ := strconv.Atoi(r[0])
		ts, _ := strconv.ParseFloat(r[1], 64)
		m, err := strconv.ParseFloat(r[3], 64)
		if err != nil || ts != float64(origin)*600 {
			t.Fatalf("row %v: %v", r, err)
		}
		sums[r[2]] += m
		counts[r[2]]++
	}
	for _, m := range rep.Models {
		if counts[m.Model] != 12 || math.Abs(sums[m.Model]/12-m.MASE) > 1e-4*(1+m.MASE) {
			t.Errorf("%s: %d origins, mean MASE %v, report %v", m.Model, counts[m.Model], sums[m.Model]/float64(counts[m.Model]), m.MASE)
		}
	}
	if len(rows)-1 != 12*len(rep.Models) {
		t.Errorf("%d rows for %d models at 12 origins", len(rows)-1, len(rep.Models))
	}
}

func TestForecastFromTheEnd(t *testing.T) {
	series := writeFile(t, "demand.csv", daysCSV(8))
	pic := filepath.Join(t.TempDir(), "f.png")
	code, out, errOut := cmdline("forecast", "-series", series, "-value-column", "running", "-horizon", "30m", "-quantile", "0.95", "-plot", pic)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	if !strings.Contains(out, "forecast from") || !regexp.MustCompile(`time +p10 +p50 +p90 +p95\n`).MatchString(out) || strings.Count(out, "\n") < 5 {
		t.Fatalf("output:\n%s", out)
	}
	if b, err := os.ReadFile(pic); err != nil || len(b) < 1000 {
		t.Fatalf("picture: %v", err)
	}
	// -quantile 0.9 (the default) is the band's top: no second column.
	// A last reading of zero is held as an unconfirmed jump, and said: the
	// median stays near the day's level (about 200), and the forecast has
	// a note, whose words are those of testdata/forecast-jump.golden.
	csv := daysCSV(8)
	csv = csv[:strings.LastIndex(strings.TrimSuffix(csv, "\n"), "\n")+1] + fmt.Sprintf("%d,0,0\n", (8*144-1)*600)
	zero := writeFile(t, "zero.csv", csv)
	code, out, errOut = cmdline("forecast", "-series", zero, "-value-column", "running", "-horizon", "30m")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	if !regexp.MustCompile(`time +p10 +p50 +p90\n`).MatchString(out) {
		t.Fatalf("output:\n%s", out)
	}
	f := forecastJSON(t, "-series", zero, "-value-column", "running", "-horizon", "30m")
	if f.Note == "" || len(f.Values) < 2 || f.Levels[1] != 0.5 || f.Values[1][0] < 150 {
		t.Errorf("the forecast after a last value of 0: note %q, median %v; want a note and the median held near 200", f.Note, f.Values)
	}
	pinned(t, "forecast-jump.golden", out)
}

// forecastOut is what forecast -json prints, in part.
type forecastOut struct {
	Model  string      `json:"model"`
	Note   string      `json:"note"`
	Levels []float64   `json:"levels"`
	Values [][]float64 `json:"values"`
}

// forecastJSON runs forecast with args and -json, and returns the
// forecast it prints.
func forecastJSON(t *testing.T, args ...string) forecastOut {
	t.Helper()
	code, out, errOut := cmdline(append(append([]string{"forecast"}, args...), "-json")...)
	var f forecastOut
	if err := json.Unmarshal([]byte(out), &f); code != 0 || err != nil {
		t.Fatalf("forecast -json: exit %d, %v: %s%s", code, err, out, errOut)
	}
	return f
}

func TestForecastErrors(t *testing.T) {
	good := writeFile(t, "demand.csv", daysCSV(3))
	day := writeFile(t, "day.csv", daysCSV(1))
	bad := writeFile(t, "bad.csv", daysCSV(3)+"99999999,abc,0\n")
	// want is what each error names (a flag and its value, a file and
	// its line, columns, a count); the words are those of
	// testdata/forecast-errors.golden.
	noDir := filepath.Join(t.TempDir(), "no", "o.csv")
	tests := []struct {
		name string
		args []string
		code int
		want string
	}{
		{"no series", []string{"forecast"}, 2, "-series"},
		{"bad row", []string{"forecast", "-series", bad, "-value-column", "running"}, 1, bad + ":434: running \"abc\""},
		{"several columns", []string{"forecast", "-series", good}, 1, ": running, pending\n"},
		{"bad step", []string{"forecast", "-series", good, "-value-column", "running", "-step", "7m"}, 2, "step 7m0s "},
		{"bad quantile", []string{"forecast", "-series", good, "-quantile", "1.5"}, 2, "-quantile 1.5"},
		{"too short to backtest", []string{"forecast", "-series", day, "-value-column", "running", "-backtest"}, 1, "144 steps"},
		{"per-origin without backtest", []string{"forecast", "-series", good, "-value-column", "running", "-per-origin", filepath.Join(t.TempDir(), "o.csv")}, 2, "-per-origin"},
		{"bad where", []string{"forecast", "-series", good, "-value-column", "running", "-where", "model"}, 2, `"model"`},
		{"where on no column", []string{"forecast", "-series", good, "-value-column", "running", "-where", "model=m-large"}, 1, `"model"`},
		{"per-origin unwritable", []string{"forecast", "-series", good, "-value-column", "running", "-backtest", "-per-origin", noDir}, 1, "-per-origin: open " + noDir},
	}
	// Every file is in a directory of this test's own.
	tmp := filepath.Dir(filepath.Dir(good))
	tr := &transcript{normalize: func(s string) string { return strings.ReplaceAll(s, tmp, "$TMP") }}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, out, errOut := cmdline(tt.args...)
			tr.add(tt.name, code, out, errOut)
			if code != tt.code || !strings.Contains(errOut, tt.want) {
				t.Fatalf("exit %d, stderr:\n%s\nwant exit %d and %q", code, errOut, tt.code, tt.want)
			}
		})
	}
	tr.check(t, "forecast-errors.golden", len(tests))
}

// TestForecastWhere: of a file holding several series (a model column),
// -where picks one; without it the interleaved times are refused.
func TestForecastWhere(t *testing.T) {
	var b strings.Builder
	b.WriteString("model,t_start_s,rate\n")
	for _, m := range []struct {
		name string
		base float64
	}{{"m-large", 200}, {"m-small", 20}} {
		for i := range 3 * 144 {
			fmt.Fprintf(&b, "%s,%d,%.1f\n", m.name, i*600, m.base+m.base/2*math.Sin(2*math.Pi*float64(i%144)/144))
		}
	}
	series := writeFile(t, "rates.csv", b.String())
	// Refused at the first row out of order (the words:
	// testdata/forecast-where.golden).
	code, _, errOut := cmdline("forecast", "-series", series, "-value-column", "rate")
	if code != 1 || !strings.Contains(errOut, series+":") {
		t.Fatalf("without -where: exit %d: %s", code, errOut)
	}
	pinned(t, "forecast-where.golden", strings.ReplaceAll(errOut, series, "$SERIES"))
	for _, m := range []struct {
		name   string
		lo, hi float64
	}{{"m-large", 90, 310}, {"m-small", 9, 31}} {
		code, out, errOut := cmdline("forecast", "-series", series, "-value-column", "rate", "-where", "model="+m.name, "-json")
		if code != 0 {
			t.Fatalf("-where model=%s: exit %d: %s", m.name, code, errOut)
		}
		var f struct {
			Values [][]float64 `json:"values"`
		}
		if err := json.Unmarshal([]byte(out), &f); err != nil || len(f.Values) == 0 {
			t.Fatalf("-where model=%s: %v: %s", m.name, err, out)
		}
		for _, v := range f.Values[len(f.Values)/2] {
			if v < m.lo || v > m.hi {
				t.Errorf("-where model=%s: a median forecast of %.1f, want %v to %v: another model's rows were read", m.name, v, m.lo, m.hi)
			}
		}
	}
}

// TestForecastTimes: a series timed in seconds from its start has its
// forecast's times printed as days and time from that start (not as dates
// in year 1); one with dates, as dates.
func TestForecastTimes(t *testing.T) {
	var dated strings.Builder
	dated.WriteString("time,running\n")
	start := time.Date(2020, 5, 1, 0, 0, 0, 0, time.UTC)
	for i := range 3 * 144 {
		fmt.Fprintf(&dated, "%s,%d\n", start.Add(time.Duration(i)*10*time.Minute).Format(time.DateTime), 200+i%7)
	}
	tests := []struct {
		name, csv string
		want      []string
	}{
		{"seconds", daysCSV(3), []string{"forecast from +3d 00:00, times from the start of the series\n", "\n  +3d 00:00  ", "\n  +3d 00:50  "}},
		{"dates", dated.String(), []string{"forecast from 2020-05-04T00:00:00Z\n", "\n  2020-05-04 00:00  ", "\n  2020-05-04 00:50  "}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, out, errOut := cmdline("forecast", "-series", writeFile(t, "s.csv", tt.csv), "-value-column", "running")
			if code != 0 {
				t.Fatalf("exit %d: %s", code, errOut)
			}
			for _, want := range tt.want {
				if !strings.Contains(out, want) {
					t.Errorf("output lacks %q:\n%s", want, out)
				}
			}
			if strings.Contains(out, "0001-") {
				t.Errorf("a year-1 date:\n%s", out)
			}
			code, out, errOut = cmdline("forecast", "-series", writeFile(t, "s.csv", tt.csv), "-value-column", "running", "-json")
			if code != 0 || strings.Contains(out, "0001-") {
				t.Errorf("-json: exit %d %s, a year-1 date or none:\n%s", code, errOut, out)
			}
			if tt.name == "seconds" && !strings.Contains(out, `"origin": "+3d 00:00"`) {
				t.Errorf("-json of a series in seconds: no relative origin:\n%s", out)
			}
		})
	}
}

func TestSeriesTime(t *testing.T) {
	zero := time.Time{}
	at := time.Date(2020, 5, 1, 4, 10, 30, 0, time.UTC)
	tests := []struct {
		t        time.Time
		absolute bool
		step     time.Duration
		want     string
	}{
		{zero, false, 10 * time.Minute, "+0d 00:00"},
		{zero.Add(3*24*time.Hour + 4*time.Hour + 10*time.Minute), false, 10 * time.Minute, "+3d 04:10"},
		{zero.Add(400*24*time.Hour + 30*time.Second), false, 30 * time.Second, "+400d 00:00:30"},
		{at, true, 10 * time.Minute, "2020-05-01 04:10"},
		{at, true, 30 * time.Second, "2020-05-01 04:10:30"},
	}
	for _, tt := range tests {
		if got := seriesTime(tt.t, tt.absolute, tt.step); got != tt.want {
			t.Errorf("seriesTime(%v, %v, %v) = %q, want %q", tt.t, tt.absolute, tt.step, got, tt.want)
		}
	}
}

// TestForecastShortHistory: a series of a few rows (the shared Earth
// series' first ones) gets the last value's forecast (naive) with a band
// of some width at every step, and one note, said once on the first
// line; the words are those of testdata/forecast-short.golden.
func TestForecastShortHistory(t *testing.T) {
	earth := []float64{602.4, 599.4, 598.2, 607.8, 613.0, 592.2, 594.8, 606.2, 590.7, 558.7}
	cases := []int{2, 3, 10}
	tr := &transcript{}
	for _, rows := range cases {
		t.Run(fmt.Sprint(rows, " values"), func(t *testing.T) {
			csv := "time,running\n"
			for i, v := range earth[:rows] {
				csv += fmt.Sprintf("%d,%.1f\n", i*600, v)
			}
			series := writeFile(t, "s.csv", csv)
			code, out, errOut := cmdline("forecast", "-series", series, "-value-column", "running")
			if code != 0 {
				t.Fatalf("exit %d: %s", code, errOut)
			}
			tr.add(fmt.Sprint(rows, " values"), code, out, errOut)
			f := forecastJSON(t, "-series", series, "-value-column", "running")
			lines := strings.Split(out, "\n")
			if f.Model != "naive" || f.Note == "" || !strings.Contains(lines[0], f.Note) || strings.Count(out, f.Note) != 1 || lines[1] != "" {
				t.Errorf("model %q; the note %q is not one line, said once:\n%s", f.Model, f.Note, out)
			}
			rowRE := regexp.MustCompile(`^ +\+0d \d\d:\d\d +([\d.]+) +([\d.]+) +([\d.]+)$`)
			n := 0
			for _, l := range lines[3:] {
				m := rowRE.FindStringSubmatch(l)
				if m == nil {
					continue
				}
				n++
				lo, _ := strconv.ParseFloat(m[1], 64)
				hi, _ := strconv.ParseFloat(m[3], 64)
				if hi-lo < 1 {
					t.Errorf("a band of width %v: %q", hi-lo, l)
				}
			}
			if n != 6 {
				t.Errorf("%d rows, want 6:\n%s", n, out)
			}
		})
	}
	tr.check(t, "forecast-short.golden", len(cases))
}
