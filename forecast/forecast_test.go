package forecast

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/fleetcast/autoscaler/fleet"
	"pgregory.net/rapid"
)

var start = time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)

// daily is days of a 10-minute series that repeats every day: i mod 144,
// plus noise(i).
func daily(days int, noise func(i int) float64) fleet.Series {
	s := fleet.Series{Start: start, Step: 10 * time.Minute}
	for i := range days * 144 {
		s.Values = append(s.Values, float64(i%144)+noise(i))
	}
	return s
}

func TestSeasonalNaiveRepeatsYesterday(t *testing.T) {
	h := daily(3, func(int) float64 { return 0 })
	f, err := SeasonalNaive(h, time.Hour, []float64{0.5, 0.9})
	if err != nil {
		t.Fatal(err)
	}
	if f.Model != "seasonal_naive_daily" || f.Steps() != 6 || !f.Origin.Equal(h.End()) {
		t.Fatalf("forecast = %+v", f)
	}
	// A perfectly periodic series: every quantile is yesterday's value.
	for h, want := range []float64{0, 1, 2, 3, 4, 5} {
		if got := f.Quantile(0.9)[h]; got != want {
			t.Fatalf("step %d: p90 = %v, want %v", h, got, want)
		}
	}
	if got := f.At(0.5, f.Origin.Add(25*time.Minute)); got != 2 {
		t.Fatalf("At(+25m) = %v, want 2", got)
	}
	if got := f.Max(0.5, f.Origin, f.Origin.Add(time.Hour)); got != 5 {
		t.Fatalf("Max over the hour = %v, want 5", got)
	}
}

func TestSeasonalNaiveQuantilesAreCalibrated(t *testing.T) {
	// Noise uniform on [-10, 10]: day-over-day changes are triangular on
	// [-20, 20], whose 90th percentile is 20 - sqrt(80) = 11.06.
	rng := rand.New(rand.NewPCG(1, 2))
	h := daily(20, func(int) float64 { return 50 + 20*rng.Float64() - 10 })
	f, err := SeasonalNaive(h, time.Hour, nil)
	if err != nil {
		t.Fatal(err)
	}
	lo, mid, hi := f.Quantile(0.1), f.Quantile(0.5), f.Quantile(0.9)
	for i := range mid {
		if !(lo[i] <= mid[i] && mid[i] <= hi[i]) {
			t.Fatalf("step %d: quantiles out of order: %v %v %v", i, lo[i], mid[i], hi[i])
		}
		if d := hi[i] - mid[i]; d < 9.5 || d > 12.5 {
			t.Fatalf("step %d: p90 - p50 = %v, want about 11.1", i, d)
		}
	}
}

func TestSeasonalNaiveFallsBackWithShortHistory(t *testing.T) {
	h := fleet.Series{Start: start, Step: 10 * time.Minute, Values: []float64{4, 6, 5, 7}}
	f, err := SeasonalNaive(h, 30*time.Minute, nil)
	if err != nil {
		t.Fatal(err)
	}
	if f.Model != "naive" || !strings.Contains(f.Note, "less than one day") {
		t.Fatalf("model %q note %q", f.Model, f.Note)
	}
	// Changes 2, -1, 2: the median change is 2.
	if got := f.At(0.5, f.Origin); got != 7+2 {
		t.Fatalf("p50 = %v, want the last value plus the median change", got)
	}
}

func TestSeasonalNaiveRejectsBadHistory(t *testing.T) {
	tests := []struct {
		name string
		h    fleet.Series
		want string
	}{
		{"empty", fleet.Series{Step: time.Minute}, "no demand history"},
		{"no step", fleet.Series{Values: []float64{1}}, "step 0s is not positive"},
		{"NaN", fleet.Series{Start: start, Step: time.Minute, Values: []float64{1, math.NaN()}}, "history value 1 (2026-11-01T00:01:00Z) is NaN"},
		{"Inf", fleet.Series{Start: start, Step: time.Minute, Values: []float64{math.Inf(1)}}, "history value 0"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := SeasonalNaive(tt.h, time.Hour, nil)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("err = %v, want %q", err, tt.want)
			}
		})
	}
	if _, err := SeasonalNaive(fleet.Series{Step: time.Minute}, time.Hour, nil); !errors.Is(err, ErrNoHistory) {
		t.Fatalf("err = %v, want ErrNoHistory", err)
	}
}

func TestSeasonalNaiveNeverNegative(t *testing.T) {
	h := daily(3, func(i int) float64 { return -float64(i % 144) }) // all zeros
	h.Values[len(h.Values)-1] = 50                                  // one spike
	f, err := SeasonalNaive(h, 2*time.Hour, nil)
	if err != nil {
		t.Fatal(err)
	}
	for k := range f.Levels {
		for _, v := range f.Values[k] {
			if v < 0 {
				t.Fatalf("negative forecast %v at level %v", v, f.Levels[k])
			}
		}
	}
}

func TestLevels(t *testing.T) {
	got, err := Levels(0.9, 0.85)
	if err != nil || len(got) != 7 || got[3] != 0.85 {
		t.Fatalf("Levels = %v, %v", got, err)
	}
	for _, q := range []float64{0, 1, -0.5, math.NaN()} {
		if _, err := Levels(q); err == nil {
			t.Fatalf("Levels(%v): want an error", q)
		}
	}
}

func TestQuantileInterpolates(t *testing.T) {
	f := Forecast{Origin: start, Step: time.Minute, Levels: []float64{0.5, 0.9}, Values: [][]float64{{10}, {20}}}
	for _, tt := range []struct{ q, want float64 }{{0.5, 10}, {0.7, 15}, {0.9, 20}, {0.1, 10}, {0.99, 20}} {
		if got := f.Quantile(tt.q)[0]; math.Abs(got-tt.want) > 1e-9 {
			t.Fatalf("Quantile(%v) = %v, want %v", tt.q, got, tt.want)
		}
	}
}

func TestSeasonalLevelFollowsTodaysLevel(t *testing.T) {
	// Three days of the same daily shape, then today 40 higher.
	h := daily(4, func(i int) float64 {
		if i >= 3*144 {
			return 40
		}
		return 0
	})
	y := h.Values[:3*144+72] // noon of day four
	p, err := Predict(SeasonalLevelModel{}, y, 144, 6, []float64{0.5, 0.9})
	if err != nil {
		t.Fatal(err)
	}
	// Last value 71+40; next step: yesterday's change (71 -> 72) from there.
	if p.Model != "seasonal_level" || p.Point[0] != 112 {
		t.Fatalf("%s point %v, want 112", p.Model, p.Point[0])
	}
	naive, _ := Predict(SeasonalNaiveModel{Days: 1}, y, 144, 6, []float64{0.5})
	if naive.Point[0] > 80 {
		t.Fatalf("seasonal naive point %v: it should not see today's level", naive.Point[0])
	}
}

func TestPredictCalibrated(t *testing.T) {
	// A daily shape plus a random walk and noise: the 80% band, calibrated
	// on the history before each origin, should hold about 80% of outcomes.
	rng := rand.New(rand.NewPCG(7, 7))
	walk := 0.0
	h := daily(30, func(int) float64 { walk += rng.NormFloat64(); return 200 + walk + 5*rng.NormFloat64() })
	for _, m := range []Model{SeasonalLevelModel{}, HoltDamped{}, AdjustedHolt{}, AdjustedTheta{}, DiffAR{}} {
		inside, total := 0, 0
		for origin := 11 * 144; origin+6 <= len(h.Values); origin += 37 {
			p, err := Predict(m, h.Values[:origin], 144, 6, []float64{0.1, 0.9})
			if err != nil {
				t.Fatal(err)
			}
			for step := range 6 {
				if v := h.Values[origin+step]; v >= p.Quantiles[0][step] && v <= p.Quantiles[1][step] {
					inside++
				}
				total++
			}
		}
		if c := float64(inside) / float64(total); c < 0.7 || c > 0.9 {
			t.Fatalf("%s: 80%% band coverage %.2f over %d outcomes", m.Name(), c, total)
		}
	}
}

func TestOnline(t *testing.T) {
	h := structured("noise", 4)
	past := fleet.Series{Start: h.Start, Step: h.Step, Values: h.Values[:15*144]}
	o, err := NewOnline(past, time.Hour, []float64{0.1, 0.5, 0.9})
	if err != nil {
		t.Fatal(err)
	}
	// A day later, the oldest day dropped: the same models follow on.
	later := fleet.Series{Start: h.Start.Add(24 * time.Hour), Step: h.Step, Values: h.Values[144 : 16*144]}
	f, err := o.Forecast(later)
	if err != nil || !f.Origin.Equal(later.End()) || f.Steps() != 6 || f.Model == "" {
		t.Fatalf("forecast %+v, %v", f, err)
	}
	// Its median tracks the cycle (sd 10 noise around 100 +- 50).
	want := 100 + 50*math.Sin(2*math.Pi*float64((16*144)%144)/144)
	if got := f.At(0.5, f.Origin); math.Abs(got-want) > 25 {
		t.Fatalf("%s median %.1f, want about %.1f", f.Model, got, want)
	}
	// A history that does not continue the fitted one is refused.
	if _, err := o.Forecast(fleet.Series{Start: h.Start.Add(-time.Hour), Step: h.Step, Values: h.Values}); err == nil {
		t.Fatal("a history starting before the fitted one: want an error")
	}
}

// TestOnlineProvisionalLast: the last value of a history is provisional
// (the step in progress): a forecast from it is the same whatever earlier
// forecasts saw there, and the models keep only final values.
func TestOnlineProvisionalLast(t *testing.T) {
	h := structured("noise", 4)
	n := 15 * 144
	with := func(last ...float64) fleet.Series {
		return fleet.Series{Start: h.Start, Step: h.Step, Values: append(slices.Clone(h.Values[:n]), last...)}
	}
	seen, fresh := mustOnline(t, with(0)), mustOnline(t, with(0))
	for _, v := range []float64{10, 400, 90} { // the step's peak so far, then higher and lower
		if _, err := seen.Forecast(with(v)); err != nil {
			t.Fatal(err)
		}
	}
	for _, next := range [][]float64{{120}, {120, 80}} {
		a, err := seen.Forecast(with(next...))
		if err != nil {
			t.Fatal(err)
		}
		b, _ := fresh.Forecast(with(next...))
		for l := range a.Values {
			if !slices.Equal(a.Values[l], b.Values[l]) {
				t.Fatalf("history ending %v, level %v: %v after other values last, %v without; want the same", next, a.Levels[l], a.Values[l], b.Values[l])
			}
		}
	}
}

func mustOnline(t *testing.T, h fleet.Series) *Online {
	t.Helper()
	o, err := NewOnline(h, time.Hour, []float64{0.1, 0.5, 0.9})
	if err != nil {
		t.Fatal(err)
	}
	return o
}

func TestResample(t *testing.T) {
	mins := func(ms ...int) []time.Duration {
		var out []time.Duration
		for _, m := range ms {
			out = append(out, time.Duration(m)*time.Minute)
		}
		return out
	}
	// Points at 0, 3 (same step), 10, 40 (a two-step gap), 100 (a five-step gap).
	r, err := Resample(start, mins(0, 3, 10, 40, 100), []float64{10, 20, 30, 60, 0}, 10*time.Minute, 3)
	if err != nil {
		t.Fatal(err)
	}
	want := []float64{15, 30, 40, 50, 60, 60, 60, 60, 60, 60, 0}
	if len(r.Values) != len(want) || r.Filled != 2 || r.Carried != 5 {
		t.Fatalf("resampled %v (filled %d, carried %d), want %v", r.Values, r.Filled, r.Carried, want)
	}
	for i := range want {
		if math.Abs(r.Values[i]-want[i]) > 1e-9 {
			t.Fatalf("resampled %v, want %v", r.Values, want)
		}
	}
	if _, err := Resample(start, mins(0, 10), []float64{1, math.NaN()}, time.Minute, 3); err == nil || !strings.Contains(err.Error(), "value 1") {
		t.Fatalf("NaN: err = %v", err)
	}
	if _, err := Resample(start, mins(10, 0), []float64{1, 2}, time.Minute, 3); err == nil {
		t.Fatal("descending offsets: want an error")
	}
}

// structured are generated series of known structure, 21 days of 10-minute
// steps.
func structured(kind string, seed uint64) fleet.Series {
	rng := rand.New(rand.NewPCG(seed, 3))
	s := fleet.Series{Start: start, Step: 10 * time.Minute}
	for i := range 21 * 144 {
		cycle := 100 + 50*math.Sin(2*math.Pi*float64(i%144)/144)
		v := cycle
		switch kind {
		case "trend":
			v += 0.02*float64(i) + 5*rng.NormFloat64()
		case "step":
			v += 5 * rng.NormFloat64()
			if i >= 19*144 {
				v += 80
			}
		case "noise":
			v += 10 * rng.NormFloat64()
		}
		s.Values = append(s.Values, v)
	}
	return s
}

// TestModelsRecoverStructure: on series of known structure, the chosen
// model's errors are small and, with noise of known variance, the 80% band
// holds 75-85% of outcomes.
func TestModelsRecoverStructure(t *testing.T) {
	for _, tt := range []struct {
		kind    string
		maxMASE float64
	}{
		// Noise of sd 5 sets a floor near 0.7: the error of knowing the
		// signal exactly, over the seasonal-naive error (two noises).
		{"cycle", 0.05}, {"trend", 0.8}, {"noise", 0.8},
		// The step's first day after it costs every model; see also
		// TestAdaptsToStep.
		{"step", 1.5},
	} {
		t.Run(tt.kind, func(t *testing.T) {
			y := structured(tt.kind, 1).Values
			rep, err := Backtest(y, DefaultModels(), BacktestOptions{Season: 144, Horizon: 6})
			if err != nil {
				t.Fatal(err)
			}
			auto := rep.Scores[len(rep.Scores)-1]
			if auto.Model != AutoName || auto.MASE > tt.maxMASE {
				t.Fatalf("%+v, want MASE <= %v (picks %v)", auto, tt.maxMASE, rep.Picks)
			}
			if tt.kind == "noise" && (auto.Coverage80 < 0.75 || auto.Coverage80 > 0.85) {
				t.Fatalf("80%% coverage %.2f on noise of known variance (picks %v)", auto.Coverage80, rep.Picks)
			}
		})
	}
}

// TestAdaptsToStep: half a day after demand steps up by 80, the forecast
// sits at the new level.
func TestAdaptsToStep(t *testing.T) {
	s := structured("step", 3)
	s.Values = s.Values[:19*144+72] // noon after the step at midnight
	f, err := Auto(s, time.Hour, []float64{0.5})
	if err != nil {
		t.Fatal(err)
	}
	want := 100 + 50*math.Sin(2*math.Pi*72/144) + 80
	if got := f.At(0.5, f.Origin); math.Abs(got-want) > 15 {
		t.Fatalf("%s forecast %.1f, want about %.1f (the new level)", f.Model, got, want)
	}
}

// TestQuantilesNeverCross is a property over generated histories: for q1 <
// q2, the q1 forecast is never above the q2 one, at every step, whichever
// model is chosen.
func TestQuantilesNeverCross(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		n := rapid.IntRange(2*144, 5*144).Draw(t, "n")
		vals := make([]float64, n)
		level := rapid.Float64Range(0, 500).Draw(t, "level")
		jump := rapid.Float64Range(0, 50).Draw(t, "jump")
		for i := range vals {
			vals[i] = math.Max(0, level+20*math.Sin(float64(i)/23)+jump*float64(i%7))
		}
		// A last reading zeroed or scaled: an unconfirmed jump's band.
		vals[n-1] *= rapid.SampledFrom([]float64{1, 0, 0.5, 3}).Draw(t, "last")
		levels := []float64{0.05, 0.1, 0.5, 0.9, 0.95}
		f, err := Auto(fleet.Series{Start: start, Step: 10 * time.Minute, Values: vals}, time.Hour, levels)
		if err != nil {
			t.Fatal(err)
		}
		for k := 1; k < len(f.Levels); k++ {
			for h := range f.Values[k] {
				if f.Values[k][h] < f.Values[k-1][h] || f.Values[k-1][h] < 0 || math.IsNaN(f.Values[k][h]) {
					t.Fatalf("%s: level %v at step %d is %v, below level %v's %v", f.Model, f.Levels[k], h, f.Values[k][h], f.Levels[k-1], f.Values[k-1][h])
				}
			}
		}
	})
}

func TestAutoFallsBackWithShortHistory(t *testing.T) {
	f, err := Auto(fleet.Series{Start: start, Step: 10 * time.Minute, Values: []float64{3, 4, 5, 6}}, time.Hour, nil)
	if err != nil || !strings.Contains(f.Note, "too little history") {
		t.Fatalf("forecast %+v, err %v", f, err)
	}
}

func TestBacktestProtocol(t *testing.T) {
	if got := spread(10, 19, 4); fmt.Sprint(got) != "[10 13 16 19]" {
		t.Fatalf("spread = %v", got)
	}
	if got := spread(5, 7, 30); fmt.Sprint(got) != "[5 6 7]" {
		t.Fatalf("spread = %v, want each origin once", got)
	}
	// A series exactly periodic: seasonal naive has MASE 0... its scale
	// is 0, so the lag-1 scale is used.
	y := structured("cycle", 1).Values
	rep, err := Backtest(y, []Model{SeasonalNaiveModel{Days: 1}}, BacktestOptions{Season: 144, Horizon: 6})
	if err != nil || rep.Origins != 30 || rep.Scores[0].MASE > 1e-9 || rep.Scores[0].Coverage80 != 1 {
		t.Fatalf("report %+v, err %v", rep, err)
	}
	if rep.Scores[0].MASESE != 0 {
		t.Fatalf("MASE's standard error %v, want 0 with no error at any origin", rep.Scores[0].MASESE)
	}
	if _, err := Backtest(y[:200], DefaultModels(), BacktestOptions{Season: 144, Horizon: 6}); err == nil {
		t.Fatal("too short for the training window: want an error")
	}
}

// TestBacktestStandardError: MASE's standard error is that of the origins'
// own MASEs, computed here by hand for the seasonal naive model.
func TestBacktestStandardError(t *testing.T) {
	y := structured("noise", 3).Values
	const season, h, days = 144, 6, 14
	rep, err := Backtest(y, []Model{SeasonalNaiveModel{Days: 1}}, BacktestOptions{Season: season, Horizon: h, TrainDays: days})
	if err != nil {
		t.Fatal(err)
	}
	ntrain := days * season
	var ms []float64
	for _, o := range spread(max(ntrain, int(math.Round(float64(len(y))*0.6))), len(y)-h, 30) {
		scale := naiveScale(y[o-ntrain:o], season)
		e := 0.0
		for k := range h {
			e += math.Abs(y[o+k]-y[o+k-season]) / h
		}
		ms = append(ms, e/scale)
	}
	mean, ss := 0.0, 0.0
	for _, m := range ms {
		mean += m / float64(len(ms))
	}
	for _, m := range ms {
		ss += (m - mean) * (m - mean)
	}
	want := math.Sqrt(ss / float64(len(ms)-1) / float64(len(ms)))
	got := rep.Scores[0]
	if math.Abs(got.MASE-mean) > 1e-9 || math.Abs(got.MASESE-want) > 1e-9 || want == 0 {
		t.Fatalf("MASE %v ± %v, want %v ± %v", got.MASE, got.MASESE, mean, want)
	}
	// The per-origin figures are the same origins' MASEs, the model's then
	// auto's at each origin.
	if len(rep.PerOrigin) != 2*len(ms) {
		t.Fatalf("%d per-origin figures, want %d", len(rep.PerOrigin), 2*len(ms))
	}
	for i, m := range ms {
		s, a := rep.PerOrigin[2*i], rep.PerOrigin[2*i+1]
		if s.Model != "snaive_daily" || a.Model != AutoName || s.Origin != a.Origin || math.Abs(s.MASE-m) > 1e-9 {
			t.Fatalf("origin %d: %+v and %+v, want MASE %v", i, s, a, m)
		}
	}
}

// BenchmarkAuto14d10m fits and forecasts every model (and chooses) on 14
// days of 10-minute data: the target is 20 ms.
func BenchmarkAuto14d10m(b *testing.B) {
	h := structured("noise", 2)
	h.Values = h.Values[:14*144]
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Auto(h, time.Hour, nil); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkAuto90d1m does the same on 90 days of 1-minute data: the
// target is 500 ms.
func BenchmarkAuto90d1m(b *testing.B) {
	rng := rand.New(rand.NewPCG(5, 5))
	h := fleet.Series{Start: start, Step: time.Minute, Values: make([]float64, 90*1440)}
	for i := range h.Values {
		h.Values[i] = 500 + 200*math.Sin(2*math.Pi*float64(i%1440)/1440) + 20*rng.NormFloat64()
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Auto(h, time.Hour, nil); err != nil {
			b.Fatal(err)
		}
	}
}

// TestExtendBranches: extensions of one fit with different new values do
// not disturb each other.
func TestExtendBranches(t *testing.T) {
	base := structured("noise", 6).Values
	for _, m := range []Model{HoltDamped{}, AdjustedHolt{}, AdjustedTheta{}, DiffAR{}, ETS{}, Regression{}, SeasonalLevelModel{}} {
		f, err := m.Fit(base[:15*144], 144, 15*144)
		if err != nil {
			t.Fatal(err)
		}
		ya := append(slices.Clone(base[:15*144]), 100, 110)
		yb := append(slices.Clone(base[:15*144]), 900, 990)
		ga := f.Extend(ya)
		want := ga.Forecast(len(ya), 6)
		gb := f.Extend(yb)
		_ = gb.Forecast(len(yb), 6)
		if got := ga.Forecast(len(ya), 6); !slices.Equal(got, want) {
			t.Fatalf("%s: extending the same fit again changed an earlier extension: %v, then %v", m.Name(), want, got)
		}
	}
}

func TestShortHistoryRefusals(t *testing.T) {
	y := structured("noise", 7).Values[:8*144+50]
	// Eight days and a bit: a weekly lag before the calibration origins
	// would look back past the start.
	if _, err := Predict(SeasonalNaiveModel{Days: 7}, y, 144, 6, []float64{0.5}); err == nil {
		t.Fatal("snaive_weekly without a week before its first forecast: want an error")
	}
	if _, err := Backtest(structured("noise", 7).Values, DefaultModels(), BacktestOptions{Season: 144, Horizon: 6, Quantile: math.NaN(), Origins: 3}); err != nil {
		t.Fatalf("a NaN quantile takes the default: %v", err)
	}
}

// TestSeasonalNaiveBandNeverCollapses: with Options.FewChangesBand and
// fewer than minChanges changes to go by, the fallback's band is at least
// a normal one of their root mean square around the median change, so
// two values that differ never give a band of no width; with more, the
// changes' own quantiles stand. A history without a change keeps its last
// value, with no band.
func TestSeasonalNaiveBandNeverCollapses(t *testing.T) {
	const z90 = 1.2815515655446004 // the standard normal's 0.9 quantile
	tests := []struct {
		name   string
		values []float64
		width  float64 // p90 - p50 one step ahead
		median float64 // p50 one step ahead
	}{
		// The shared Earth series' first two values: its quantiles were
		// all -3.
		{"one change", []float64{602.4, 599.4}, z90 * 3, 596.4},
		{"two changes", []float64{600, 604, 600}, z90 * 4, 600},
		// 11 changes of +4 and -4, six up: the median is +4, and so
		// is every empirical quantile above it.
		{"few changes", slices.Repeat([]float64{600, 604}, (minChanges)/2), z90 * 4, 608},
		// 12 changes: their own quantiles, 4 at p90 (a normal band
		// would be 5.1).
		{"enough changes", append(slices.Repeat([]float64{600, 604}, minChanges/2), 600), 4, 600},
		{"one value", []float64{600}, 0, 600},
		{"no change", []float64{600, 600, 600}, 0, 600},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := fleet.Series{Start: start, Step: 10 * time.Minute, Values: tt.values}
			f, err := AutoWith(h, time.Hour, nil, Options{FewChangesBand: true})
			if err != nil {
				t.Fatal(err)
			}
			p50, p90 := f.At(0.5, f.Origin), f.At(0.9, f.Origin)
			if math.Abs(p50-tt.median) > 1e-6 || math.Abs(p90-p50-tt.width) > 1e-6 {
				t.Errorf("p50 %v, p90 - p50 %v; want %v and %v", p50, p90-p50, tt.median, tt.width)
			}
			// Without the option (a planner's forecast), the changes'
			// own quantiles, as they were.
			plain, err := SeasonalNaive(h, time.Hour, nil)
			if err != nil {
				t.Fatal(err)
			}
			if a, _ := Auto(h, time.Hour, nil); !slices.EqualFunc(a.Values, plain.Values, slices.Equal) {
				t.Errorf("Auto's fallback is not SeasonalNaive's: %v, %v", a.Values, plain.Values)
			}
		})
	}
}

// TestAutoNoteSaysItOnce: too short a history for every model is said in
// one line, once, not once per model.
func TestAutoNoteSaysItOnce(t *testing.T) {
	tests := []struct {
		name  string
		steps int
		want  string
	}{
		{"under a day", 9, "too little history to calibrate a model (6-step forecasts need 162 steps); 9 steps of history is less than one day and one step; used the last value"},
		{"over a day", 150, "too little history to calibrate a model (150 steps; 6-step forecasts need 162)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f, err := Auto(fleet.Series{Start: start, Step: 10 * time.Minute, Values: slices.Repeat([]float64{5}, tt.steps)}, time.Hour, nil)
			if err != nil || f.Note != tt.want {
				t.Errorf("note %q (%v), want %q", f.Note, err, tt.want)
			}
		})
	}
}

func TestWhyNoModel(t *testing.T) {
	short := func(m string) error { return &shortHistoryError{model: m, steps: 9, horizon: 6, need: 162} }
	fit := errors.New("fit failed:\n  singular matrix")
	tests := []struct {
		name string
		errs []error
		want string
	}{
		{"all short", []error{short("a"), short("b")}, "9 steps; 6-step forecasts need 162"},
		{"mixed", []error{short("a"), fmt.Errorf("c: %w", fit), short("b"), fmt.Errorf("c: %w", fit)},
			"a, b: too little history (9 steps) to calibrate 6-step forecasts (162 needed); c: fit failed: singular matrix"},
	}
	for _, tt := range tests {
		if got := whyNoModel(tt.errs, true); got != tt.want {
			t.Errorf("%s: %q, want %q", tt.name, got, tt.want)
		}
	}
}
