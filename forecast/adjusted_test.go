package forecast

import (
	"math"
	"slices"
	"testing"
)

// TestAdjustedHoltProfile: on a daily sine plus a trend and noise, the
// profile is the sine (a little flattened by the smoothing) and the
// forecasts an hour ahead are within the noise.
func TestAdjustedHoltProfile(t *testing.T) {
	y := structured("trend", 5).Values
	n := 20 * 144
	f, err := AdjustedHolt{}.Fit(y, 144, n)
	if err != nil {
		t.Fatal(err)
	}
	for j, v := range f.(adjustedFitted).profile {
		if want := 50 * math.Sin(2*math.Pi*float64(j)/144); math.Abs(v-want) > 6 {
			t.Fatalf("profile at step %d of the day: %.1f, want about %.1f", j, v, want)
		}
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
}

// TestAdjustedHoltExtend: extending a fit forecasts as a fit with the same
// training end over the longer series does, and less than a week of history
// is refused.
func TestAdjustedHoltExtend(t *testing.T) {
	y := structured("noise", 8).Values
	short, err := AdjustedHolt{}.Fit(y[:15*144], 144, 15*144)
	if err != nil {
		t.Fatal(err)
	}
	long, err := AdjustedHolt{}.Fit(y, 144, 15*144)
	if err != nil {
		t.Fatal(err)
	}
	got, want := short.Extend(y).Forecast(len(y), 6), long.Forecast(len(y), 6)
	for k := range want {
		if math.Abs(got[k]-want[k]) > 1e-9*math.Abs(want[k]) {
			t.Fatalf("extended %v, fitted %v", got, want)
		}
	}
	if slices.Equal(got, short.Forecast(15*144, 6)) {
		t.Fatal("the extension did not follow the new values")
	}
	if _, err := (AdjustedHolt{}).Fit(y, 144, 7*144-1); err == nil {
		t.Fatal("less than a week before trainEnd: want an error")
	}
}
