package forecast

import (
	"math"
	"math/rand/v2"
	"testing"
)

// TestAdjustedTheta: on a daily sine plus a trend and noise, the drift is
// half the trend (0.02 a step) and the forecasts an hour ahead are within the noise.
func TestAdjustedTheta(t *testing.T) {
	y := structured("trend", 5).Values
	n := 20 * 144
	f, err := AdjustedTheta{}.Fit(y, 144, n)
	if err != nil {
		t.Fatal(err)
	}
	th := f.(adjustedFitted).inner.(*thetaFit)
	if d := 0.02 / 2; math.Abs(th.drift-d) > 0.2*d {
		t.Fatalf("drift %.4f per step, want about %.4f", th.drift, d)
	}
	sum := 0.0
	for origin := n; origin+6 <= len(y); origin++ {
		for k, v := range f.Forecast(origin, 6) {
			sum += math.Abs(y[origin+k] - v)
		}
	}
	if mae := sum / float64(6*(len(y)-n-5)); mae > 8 {
		t.Fatalf("mean absolute error an hour ahead %.1f, the noise's is 4", mae)
	}
	if _, err := (AdjustedTheta{}).Fit(y, 144, 7*144-1); err == nil {
		t.Fatal("less than a week before trainEnd: want an error")
	}
}

// TestDiffAR: on a series whose changes are an AR(2) with drift, the fit
// recovers the coefficients and forecasts their decay back to the drift.
func TestDiffAR(t *testing.T) {
	const c, a1, a2 = 0.1, 0.6, -0.2
	rng := rand.New(rand.NewPCG(3, 3))
	y := make([]float64, 14*144)
	d1, d2 := 0.0, 0.0
	for i := 1; i < len(y); i++ {
		d := c + a1*d1 + a2*d2 + rng.NormFloat64()
		y[i] = y[i-1] + d
		d1, d2 = d, d1
	}
	f, err := DiffAR{}.Fit(y, 144, len(y))
	if err != nil {
		t.Fatal(err)
	}
	got := f.(diffARFit).coef
	for i, want := range []float64{c, a1, a2} {
		if math.Abs(got[i]-want) > 0.06 {
			t.Fatalf("coefficients %.3f, want %v", got, []float64{c, a1, a2})
		}
	}
	// From a jump of 10, the changes ahead follow the recursion.
	y = append(y, y[len(y)-1]+10)
	fc := f.Extend(y).Forecast(len(y), 3)
	last, dPrev, dPrev2 := y[len(y)-1], 10.0, y[len(y)-2]-y[len(y)-3]
	for k, v := range fc {
		d := got[0] + got[1]*dPrev + got[2]*dPrev2
		last += d
		if math.Abs(v-last) > 1e-9*math.Abs(last) {
			t.Fatalf("forecast %d steps ahead %.3f, want %.3f", k+1, v, last)
		}
		dPrev, dPrev2 = d, dPrev
	}
	if _, err := (DiffAR{}).Fit(y, 144, 5); err == nil {
		t.Fatal("5 steps of history: want an error")
	}
}
