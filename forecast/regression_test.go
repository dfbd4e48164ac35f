package forecast

import (
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
)

// regSeries returns n steps of f(t).
func regSeries(n int, f func(t int) float64) []float64 {
	y := make([]float64, n)
	for t := range y {
		y[t] = f(t)
	}
	return y
}

// regDailyCycle is a smooth daily shape with two harmonics.
func regDailyCycle(t, season int) float64 {
	a := 2 * math.Pi * float64(t) / float64(season)
	return 100 + 30*math.Sin(a) + 10*math.Cos(2*a)
}

func fitRegression(t *testing.T, y []float64, season int) Fitted {
	t.Helper()
	m := Regression{}
	if m.Name() != "fourier_regression" {
		t.Fatalf("Name() = %q", m.Name())
	}
	f, err := m.Fit(y, season, len(y))
	if err != nil {
		t.Fatalf("Fit: %v", err)
	}
	return f
}

func regMaxAbsErr(got, want []float64) float64 {
	e := 0.0
	for i := range got {
		e = math.Max(e, math.Abs(got[i]-want[i]))
	}
	return e
}

func TestRegressionRecoversSignal(t *testing.T) {
	const season = 144
	tests := []struct {
		name   string
		days   int
		f      func(t int) float64
		origin int // steps before the end
		h      int
		tol    float64
	}{
		{"daily cycle 14d", 14, func(t int) float64 { return regDailyCycle(t, season) }, 0, 36, 1e-3},
		{"daily cycle 14d earlier origin", 14, func(t int) float64 { return regDailyCycle(t, season) }, 200, 36, 1e-3},
		{"daily cycle 3d", 3, func(t int) float64 { return regDailyCycle(t, season) }, 0, 24, 1e-3},
		{"daily cycle 20d", 20, func(t int) float64 { return regDailyCycle(t, season) }, 50, 48, 1e-3},
		{"trend plus cycle", 14, func(t int) float64 { return regDailyCycle(t, season) + 0.05*float64(t) }, 0, 36, 0.01},
		{"trend plus cycle 5d", 5, func(t int) float64 { return regDailyCycle(t, season) + 0.05*float64(t) }, 10, 36, 0.01},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			n := tc.days * season
			y := regSeries(n, tc.f)
			fit := fitRegression(t, y, season)
			origin := n - tc.origin
			got := fit.Forecast(origin, tc.h)
			if len(got) != tc.h {
				t.Fatalf("len = %d, want %d", len(got), tc.h)
			}
			want := regSeries(origin+tc.h, tc.f)[origin:]
			e := regMaxAbsErr(got, want)
			t.Logf("max abs error %.3g", e)
			if e > tc.tol {
				t.Errorf("max abs error %g > %g\ngot  %v\nwant %v", e, tc.tol, got, want)
			}
		})
	}
}

// The model learns from a history whose level wanders that the current
// level carries forward, so after a step change it follows the new level
// (a seasonal naive forecast stays at the old one). The random walk after
// the origin is unpredictable, so errors are averaged over seeds.
func TestRegressionLevelStep(t *testing.T) {
	const season, days, seeds, h = 144, 14, 8, 24
	n := days * season
	regErr, naiveErr := 0.0, 0.0
	for seed := range uint64(seeds) {
		rng := rand.New(rand.NewPCG(seed, 2))
		y := make([]float64, n+h)
		level := 0.0
		for t := range y {
			level += rng.NormFloat64() * 2
			y[t] = regDailyCycle(t, season) + level + rng.NormFloat64()*0.5
		}
		// A jump of +100 twelve steps before the end of the history.
		for t := n - 12; t < len(y); t++ {
			y[t] += 100
		}
		hist := y[:n]
		got := fitRegression(t, hist, season).Forecast(n, h)
		for k := range got {
			regErr += math.Abs(got[k]-y[n+k]) / (h * seeds)
			naiveErr += math.Abs(hist[n+k-season]-y[n+k]) / (h * seeds)
		}
	}
	t.Logf("mean abs error after a +100 step: regression %.2f, seasonal naive %.2f", regErr, naiveErr)
	if regErr > 25 || regErr > naiveErr/3 {
		t.Errorf("mean abs error after a +100 step: regression %.2f, seasonal naive %.2f", regErr, naiveErr)
	}
}

// A forecast from an earlier origin reads only y[:origin]: with the same
// coefficients, changing the later values changes nothing.
func TestRegressionUsesOnlyValuesBeforeOrigin(t *testing.T) {
	const season = 144
	rng := rand.New(rand.NewPCG(3, 4))
	for _, days := range []int{1, 3, 10, 15} {
		n := days*season + 37
		y := regSeries(n, func(t int) float64 { return regDailyCycle(t, season) + rng.NormFloat64() })
		fit := fitRegression(t, y, season).(*regressionFit)
		for _, origin := range []int{0, 1, 2, 5, n / 3, n - 100, n - 1, n} {
			want := fit.Forecast(origin, 36)
			changed := slices.Clone(y)
			for i := origin; i < n; i++ {
				changed[i] = 1e9 * float64(i+1)
			}
			later := newRegressionFit(changed, season, len(changed), len(changed))
			later.coef = fit.coef // the same coefficients
			if got := later.Forecast(origin, 36); !slices.Equal(got, want) {
				t.Errorf("days %d origin %d: forecast changed with values after the origin\ngot  %v\nwant %v", days, origin, got, want)
			}
		}
	}
}

// Lazily fitted steps give the same forecasts whatever the order of calls,
// and the caller's slice may change after Fit.
func TestRegressionDeterministic(t *testing.T) {
	const season = 144
	rng := rand.New(rand.NewPCG(5, 6))
	y := regSeries(15*season, func(t int) float64 { return regDailyCycle(t, season) + 3*rng.NormFloat64() })
	orig := slices.Clone(y)
	a := fitRegression(t, y, season)
	b := fitRegression(t, y, season)
	clear(y) // Fit copied the history
	a.Forecast(len(y)-10, 3)
	a.Forecast(len(y)-300, 48)
	want := b.Forecast(len(y)-77, 40)
	if got := a.Forecast(len(y)-77, 40); !slices.Equal(got, want) {
		t.Errorf("forecast depends on call order:\n%v\n%v", got, want)
	}
	if !slices.Equal(fitRegression(t, orig, season).Forecast(len(y)-77, 40), want) {
		t.Errorf("forecast changed after the caller cleared its slice")
	}
}

func TestRegressionShortAndDegenerate(t *testing.T) {
	tests := []struct {
		name   string
		y      []float64
		season int
	}{
		{"8 steps", regSeries(8, func(t int) float64 { return float64(t) }), 144},
		{"40 steps", regSeries(40, func(t int) float64 { return 10 + math.Sin(float64(t)) }), 144},
		{"half a day", regSeries(72, func(t int) float64 { return regDailyCycle(t, 144) }), 144},
		{"one day", regSeries(144, func(t int) float64 { return regDailyCycle(t, 144) }), 144},
		{"a day and a half", regSeries(216, func(t int) float64 { return regDailyCycle(t, 144) }), 144},
		{"a week", regSeries(7*144, func(t int) float64 { return regDailyCycle(t, 144) }), 144},
		{"flat", regSeries(14*144, func(int) float64 { return 42 }), 144},
		{"zero", make([]float64, 14*144), 144},
		{"zero short", make([]float64, 30), 144},
		{"zero 1-minute 3 weeks", make([]float64, 21*1440), 1440},
		{"season 1", regSeries(50, func(t int) float64 { return float64(t % 3) }), 1},
		{"season 4", regSeries(200, func(t int) float64 { return float64(t % 4) }), 4},
		{"huge values", regSeries(3*144, func(t int) float64 { return 1e12 * regDailyCycle(t, 144) }), 144},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			fit := fitRegression(t, tc.y, tc.season)
			n := len(tc.y)
			for _, origin := range []int{0, 1, n / 2, n} {
				for _, h := range []int{0, 1, 24, 60} {
					got := fit.Forecast(origin, h)
					if len(got) != h {
						t.Fatalf("origin %d h %d: len %d", origin, h, len(got))
					}
					for k, v := range got {
						if math.IsNaN(v) || math.IsInf(v, 0) {
							t.Fatalf("origin %d h %d: step %d is %v", origin, h, k, v)
						}
					}
				}
			}
			if strings.HasPrefix(tc.name, "flat") || strings.HasPrefix(tc.name, "zero") {
				c := tc.y[0]
				for _, v := range fit.Forecast(n, 60) {
					if math.Abs(v-c) > 1e-9 {
						t.Fatalf("flat series %v forecast %v", c, v)
					}
				}
			}
		})
	}
}

func TestRegressionFitErrors(t *testing.T) {
	tests := []struct {
		name   string
		y      []float64
		season int
		want   string
	}{
		{"empty", nil, 144, "no demand history"},
		{"too short", []float64{1, 2, 3}, 144, "too short"},
		{"season 0", make([]float64, 100), 0, "season"},
		{"NaN", append(make([]float64, 50), math.NaN()), 144, "NaN"},
		{"Inf", append(make([]float64, 50), math.Inf(1)), 144, "Inf"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Regression{}.Fit(tc.y, tc.season, len(tc.y))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("err = %v, want one containing %q", err, tc.want)
			}
		})
	}
}

func benchmarkRegression(b *testing.B, n, season, h int) {
	rng := rand.New(rand.NewPCG(7, 8))
	y := regSeries(n, func(t int) float64 { return regDailyCycle(t, season) + 5*rng.NormFloat64() })
	b.ResetTimer()
	for b.Loop() {
		f, err := Regression{}.Fit(y, season, len(y))
		if err != nil {
			b.Fatal(err)
		}
		f.Forecast(n, h)
	}
}

// 14 days of 10-minute data, forecasting 24 steps.
func BenchmarkRegressionFit14d10m(b *testing.B) { benchmarkRegression(b, 14*144, 144, 24) }

// 90 days of 1-minute data, forecasting 60 steps.
func BenchmarkRegressionFit90d1m(b *testing.B) { benchmarkRegression(b, 90*1440, 1440, 60) }
