package forecast

import (
	"errors"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

// etsSeries is days of a series with season steps a day: base + slope*t +
// amp*sin(2πt/season) + normal noise of sd noise (seeded, so fixed).
func etsSeries(days, season int, base, slope, amp, noise float64) []float64 {
	r := rand.New(rand.NewPCG(1, 2))
	y := make([]float64, days*season)
	for t := range y {
		y[t] = base + slope*float64(t) + amp*math.Sin(2*math.Pi*float64(t)/float64(season)) + noise*r.NormFloat64()
	}
	return y
}

func fitETSTest(t *testing.T, y []float64, season int) *ETSFit {
	t.Helper()
	m, err := ETS{}.Fit(y, season, len(y))
	if err != nil {
		t.Fatal(err)
	}
	f, ok := m.(*ETSFit)
	if !ok {
		t.Fatalf("Fit returned %T", m)
	}
	checkETSParams(t, f)
	return f
}

func checkETSParams(t *testing.T, f *ETSFit) {
	t.Helper()
	ok := f.Alpha > 0 && f.Alpha < 1 && f.Beta >= 0 && f.Beta <= f.Alpha &&
		f.Gamma >= 0 && f.Gamma <= 1-f.Alpha && f.Phi >= 0.8 && f.Phi <= 0.98
	if !ok {
		t.Fatalf("parameters out of range: α=%v β=%v γ=%v φ=%v", f.Alpha, f.Beta, f.Gamma, f.Phi)
	}
}

func TestETSName(t *testing.T) {
	var m Model = ETS{}
	if m.Name() != "ets" {
		t.Fatalf("Name = %q", m.Name())
	}
}

func TestETSDailyCycle(t *testing.T) {
	for _, tc := range []struct {
		name    string
		noise   float64
		maxRMSE float64
	}{
		{"pure", 0, 1e-6},
		{"noisy", 1, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			const season, h = 144, 288
			all := etsSeries(9, season, 100, 0, 50, tc.noise)
			y, truth := all[:7*season], etsSeries(9, season, 100, 0, 50, 0)[7*season:]
			f := fitETSTest(t, y, season)
			if f.Season != season {
				t.Fatalf("Season = %d, want %d", f.Season, season)
			}
			got := f.Forecast(len(y), h)
			if len(got) != h {
				t.Fatalf("%d forecasts, want %d", len(got), h)
			}
			var sse float64
			for k, v := range got {
				sse += (v - truth[k]) * (v - truth[k])
			}
			if rmse := math.Sqrt(sse / h); !(rmse <= tc.maxRMSE) {
				t.Fatalf("RMSE against the noiseless cycle = %v, want at most %v (α=%v β=%v γ=%v φ=%v)", rmse, tc.maxRMSE, f.Alpha, f.Beta, f.Gamma, f.Phi)
			}
		})
	}
}

func TestETSTrendPlusCycle(t *testing.T) {
	const season, slope = 144, 1.0
	y := etsSeries(10, season, 50, slope, 30, 0.5)
	truth := etsSeries(11, season, 50, slope, 30, 0)[len(y):]
	f := fitETSTest(t, y, season)
	n := len(y)
	var mean float64 // the trend state over the last day
	for _, b := range f.trend[n-season+1:] {
		mean += b / season
	}
	if math.Abs(mean-slope) > 0.05*slope {
		t.Fatalf("trend over the last day = %v, want %v ± 5%% (α=%v β=%v γ=%v φ=%v)", mean, slope, f.Alpha, f.Beta, f.Gamma, f.Phi)
	}
	// The forecast continues the trend, damped: 12 steps ahead a forecast
	// without it would be 12 off.
	got := f.Forecast(n, 12)
	for k, v := range got {
		if math.Abs(v-truth[k]) > 1+0.15*slope*float64(k+1) {
			t.Fatalf("step %d: forecast %v, truth %v (φ=%v)", k+1, v, truth[k], f.Phi)
		}
	}
	// A day ahead, the rise is what the damping allows: at most
	// φ/(1-φ) ≤ 49 steps of the slope, and the fit damps little.
	if f.Phi < 0.9 {
		t.Fatalf("φ = %v on a straight trend", f.Phi)
	}
	damp := f.Phi * (1 - math.Pow(f.Phi, season)) / (1 - f.Phi)
	if rise := f.Forecast(n, season)[season-1] - y[n-1]; math.Abs(rise-slope*damp) > 0.1*slope*damp+2 {
		t.Fatalf("a day ahead the forecast rose %v, want about %v", rise, slope*damp)
	}
}

func TestETSStepChange(t *testing.T) {
	for _, tc := range []struct {
		name string
		jump float64
	}{
		{"up", 100},
		{"down", -60},
	} {
		t.Run(tc.name, func(t *testing.T) {
			const season, at, after = 144, 5 * 144, 6
			y := etsSeries(7, season, 100, 0, 20, 1)
			for i := at; i < len(y); i++ {
				y[i] += tc.jump
			}
			f := fitETSTest(t, y, season)
			// One-step forecasts a few steps after the jump have caught up
			// with most of it.
			for o := at + after; o < at+after+6; o++ {
				pred := f.Forecast(o, 1)[0]
				if miss := math.Abs(y[o] - pred); miss > 0.2*math.Abs(tc.jump) {
					t.Fatalf("%d steps after the jump: forecast %v, value %v (α=%v)", o-at, pred, y[o], f.Alpha)
				}
			}
		})
	}
}

// etsReference forecasts h steps after y with p by filtering y from the
// initial states, the plain way (no stored states, seasonal ring indexed by
// t mod m).
func etsReference(y []float64, init []float64, l, b float64, p etsParams, h int) []float64 {
	m := len(init)
	s := slices.Clone(init)
	for t, v := range y {
		var si float64
		if m > 0 {
			si = s[t%m]
		}
		e := v - (l + p.phi*b + si)
		l, b = l+p.phi*b+p.alpha*e, p.phi*b+p.beta*e
		if m > 0 {
			s[t%m] = si + p.gamma*e
		}
	}
	out := make([]float64, h)
	var damp, pk float64 = 0, 1
	for k := 1; k <= h; k++ {
		pk *= p.phi
		damp += pk
		out[k-1] = l + damp*b
		if m > 0 {
			out[k-1] += s[(len(y)+k-1)%m]
		}
	}
	return out
}

func TestETSForecastUsesOnlyThePast(t *testing.T) {
	const season, h = 144, 200
	y := etsSeries(8, season, 100, 0.01, 40, 3)
	f := fitETSTest(t, y, season)
	p := etsParams{f.Alpha, f.Beta, f.Gamma, f.Phi}
	// The same parameters on a history whose tail differs after cut.
	const cut = 5*season + 17
	y2 := slices.Clone(y)
	for i := cut; i < len(y2); i++ {
		y2[i] = 3*y2[i] + 1000
	}
	f2 := filterETS(y2, season, p)
	init := make([]float64, season)
	l0, b0 := etsInit(y, season, init)
	for _, origin := range []int{2 * season, 3*season + 5, cut - 1, cut, len(y) - 1, len(y)} {
		got := f.Forecast(origin, h)
		want := etsReference(y[:origin], init, l0, b0, p, h)
		for k := range got {
			if math.Abs(got[k]-want[k]) > 1e-9*(1+math.Abs(want[k])) {
				t.Fatalf("origin %d step %d: stored-state forecast %v, refiltered %v", origin, k+1, got[k], want[k])
			}
		}
		if origin > cut {
			continue
		}
		if other := f2.Forecast(origin, h); !slices.Equal(got, other) {
			t.Fatalf("origin %d: forecast changed when values after %d changed", origin, cut)
		}
	}
}

func TestETSShortHistoryFallback(t *testing.T) {
	const season = 144
	for _, tc := range []struct {
		name  string
		y     []float64
		slope float64 // if not 0, the final trend should be near it
	}{
		{"one value", []float64{7}, 0},
		{"two values", []float64{7, 9}, 0},
		{"three values", []float64{5, 5, 5}, 0},
		{"ten noisy values", etsSeries(1, 10, 20, 0, 0, 2), 0},
		{"two seasons exactly", etsSeries(2, season, 100, 0, 30, 1), 0},
		{"linear", etsSeries(1, 200, 10, 0.5, 0, 0), 0.5},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := fitETSTest(t, tc.y, season)
			if f.Season != 0 {
				t.Fatalf("Season = %d with %d values, want the non-seasonal fallback", f.Season, len(tc.y))
			}
			for _, origin := range []int{0, len(tc.y) / 2, len(tc.y)} {
				got := f.Forecast(origin, 50)
				if len(got) != 50 {
					t.Fatalf("%d forecasts", len(got))
				}
				for k, v := range got {
					if math.IsNaN(v) || math.IsInf(v, 0) {
						t.Fatalf("origin %d step %d: %v", origin, k+1, v)
					}
				}
			}
			if tc.slope != 0 {
				n := len(tc.y)
				if b := f.trend[n]; math.Abs(b-tc.slope) > 0.05*tc.slope {
					t.Fatalf("final trend = %v, want %v", b, tc.slope)
				}
				if next := f.Forecast(n, 1)[0]; math.Abs(next-(tc.y[n-1]+tc.slope)) > 0.1 {
					t.Fatalf("next = %v, want %v", next, tc.y[n-1]+tc.slope)
				}
			}
		})
	}
}

func TestETSNeverNaN(t *testing.T) {
	const season = 144
	constant := func(n int, v float64) []float64 {
		y := make([]float64, n)
		for i := range y {
			y[i] = v
		}
		return y
	}
	sparse := make([]float64, 5*season)
	for i := 0; i < len(sparse); i += 97 {
		sparse[i] = 1
	}
	for _, tc := range []struct {
		name string
		y    []float64
	}{
		{"zero short", constant(20, 0)},
		{"zero seasonal", constant(4*season, 0)},
		{"zero long", constant(20*season, 0)},
		{"flat", constant(4*season, 42)},
		{"flat huge", constant(4*season, 1e12)},
		{"flat tiny", constant(4*season, 1e-12)},
		{"sparse", sparse},
		{"spike", append(constant(3*season, 0), 1e9)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := fitETSTest(t, tc.y, season)
			for _, origin := range []int{0, len(tc.y) / 3, len(tc.y)} {
				for k, v := range f.Forecast(origin, 2*season) {
					if math.IsNaN(v) || math.IsInf(v, 0) {
						t.Fatalf("origin %d step %d: %v", origin, k+1, v)
					}
				}
			}
			if c := tc.y[0]; slices.Equal(tc.y, constant(len(tc.y), c)) {
				for k, v := range f.Forecast(len(tc.y), 10) {
					if math.Abs(v-c) > 1e-9*(1+math.Abs(c)) {
						t.Fatalf("flat %v: step %d forecast %v", c, k+1, v)
					}
				}
			}
		})
	}
}

func TestETSLongSeries(t *testing.T) {
	// 1-minute steps: parameters are fitted on the last 14 days only.
	const season = 1440
	y := etsSeries(20, season, 500, 0, 200, 5)
	truth := etsSeries(21, season, 500, 0, 200, 0)[len(y):]
	f := fitETSTest(t, y, season)
	got := f.Forecast(len(y), 60)
	for k, v := range got {
		if math.Abs(v-truth[k]) > 20 {
			t.Fatalf("step %d: forecast %v, truth %v", k+1, v, truth[k])
		}
	}
}

func TestETSErrorsAndInputs(t *testing.T) {
	if _, err := (ETS{}).Fit(nil, 144, 0); !errors.Is(err, ErrNoHistory) {
		t.Fatalf("empty: err = %v", err)
	}
	for _, bad := range []float64{math.NaN(), math.Inf(1)} {
		if _, err := (ETS{}).Fit([]float64{1, 2, bad, 4}, 2, 4); err == nil {
			t.Fatalf("%v: no error", bad)
		}
	}
	y := etsSeries(3, 144, 10, 0, 5, 1)
	orig := slices.Clone(y)
	m, err := ETS{}.Fit(y, 144, len(y))
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(y, orig) {
		t.Fatal("Fit modified y")
	}
	if got := m.Forecast(len(y), 0); len(got) != 0 {
		t.Fatalf("h=0: %v", got)
	}
	// Deterministic.
	m2, _ := ETS{}.Fit(y, 144, len(y))
	if !slices.Equal(m.Forecast(len(y), 144), m2.Forecast(len(y), 144)) {
		t.Fatal("two fits of the same series differ")
	}
	defer func() {
		if recover() == nil {
			t.Fatal("origin past the end did not panic")
		}
	}()
	m.Forecast(len(y)+1, 1)
}

func benchmarkETS(b *testing.B, days, season int) {
	y := etsSeries(days, season, 100, 0, 50, 5)
	b.ReportAllocs()
	for b.Loop() {
		f, err := ETS{}.Fit(y, season, len(y))
		if err != nil {
			b.Fatal(err)
		}
		f.Forecast(len(y), season)
	}
}

func BenchmarkETSFit14d10m(b *testing.B) { benchmarkETS(b, 14, 144) }

func BenchmarkETSFit90d1m(b *testing.B) { benchmarkETS(b, 90, 1440) }

func TestETSSSEMatchesFilter(t *testing.T) {
	y := etsSeries(4, 144, 100, 0.05, 40, 3)
	p := etsParams{0.3, 0.05, 0.2, 0.93}
	f := filterETS(y, 144, p)
	var want float64
	for i, v := range y {
		e := v - f.Forecast(i, 1)[0]
		want += e * e
	}
	ring := slices.Clone(f.seas[:144])
	if got := etsSSE(y, p, f.level[0], f.trend[0], ring); math.Abs(got-want) > 1e-9*want {
		t.Fatalf("etsSSE = %v, filter's SSE = %v", got, want)
	}
}
