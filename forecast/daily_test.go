package forecast

import (
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/fleetcast/autoscaler/fleet"
)

// quietNights is every 10 minutes for days a level of 100 GPUs with
// N(0, 2) noise from midnight to noon and N(0, 8) from noon to midnight.
func quietNights(days int, seed uint64) fleet.Series {
	rng := rand.New(rand.NewPCG(seed, seed))
	s := fleet.Series{Start: start, Step: 10 * time.Minute}
	for i := range days * 144 {
		sd := 2.0
		if i%144 >= 72 {
			sd = 8
		}
		s.Values = append(s.Values, 100+sd*rng.NormFloat64())
	}
	return s
}

func TestDailyScale(t *testing.T) {
	flat := make([]float64, 14*144)
	ramp := make([]float64, 14*144)
	for i := range ramp {
		ramp[i] = float64(i)
	}
	for _, tc := range []struct {
		name       string
		y          []float64
		season     int
		none       bool
		night, day float64 // the scale at 06:00 and 18:00, within 15%
	}{
		{name: "quiet nights", y: quietNights(14, 1).Values, season: 144, night: 0.4, day: 1.6},
		{name: "the same change every step", y: ramp, season: 144, night: 1, day: 1},
		{name: "no change", y: flat, season: 144, none: true},
		{name: "shorter than two days", y: quietNights(2, 1).Values[:2*144], season: 144, none: true},
		{name: "no daily season", y: quietNights(14, 1).Values, season: 1, none: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ds := newDailyScale(tc.y, tc.season)
			if tc.none {
				if ds != nil {
					t.Fatalf("a scale %v, want none", ds.scale[:6])
				}
				if got := ds.steps(0, 3); got[0] != 1 || got[2] != 1 {
					t.Fatalf("steps without a scale: %v, want ones", got)
				}
				return
			}
			if ds == nil {
				t.Fatal("no scale")
			}
			for _, c := range []struct {
				at   int
				want float64
			}{{36, tc.night}, {108, tc.day}} {
				if got := ds.scale[c.at]; math.Abs(got-c.want) > 0.15*c.want {
					t.Errorf("scale at step %d of the day: %.2f, want %.2f", c.at, got, c.want)
				}
			}
		})
	}
}

// TestDailyScaleSteps: k steps ahead the scale is the root mean square of
// the scales of the changes up to it, across midnight too.
func TestDailyScaleSteps(t *testing.T) {
	ds := &dailyScale{scale: []float64{1, 2, 3, 4}, season: 4}
	got := ds.steps(6, 4) // times of day 2, 3, 0, 1
	want := []float64{3, math.Sqrt((9 + 16) / 2.0), math.Sqrt((9 + 16 + 1) / 3.0), math.Sqrt((9 + 16 + 1 + 4) / 4.0)}
	for k := range want {
		if math.Abs(got[k]-want[k]) > 1e-12 {
			t.Fatalf("steps: %v, want %v", got, want)
		}
	}
}

// TestBandFollowsTheDay: where demand moves four times as much in the
// afternoon as at night, the band is about four times as wide there, and
// covers the afternoon's values about as often as it should (a band made
// of every hour's errors alike is as wide at night as in the afternoon,
// and covers too few of the afternoon's).
func TestBandFollowsTheDay(t *testing.T) {
	for _, seed := range []uint64{1, 2, 3} {
		h := quietNights(15, seed)
		width := func(end int) (float64, *Forecast) {
			past := fleet.Series{Start: h.Start, Step: h.Step, Values: h.Values[:end]}
			f, err := AutoWith(past, time.Hour, []float64{0.5, 0.9}, Options{})
			if err != nil {
				t.Fatal(err)
			}
			return f.Values[1][0] - f.Values[0][0], &f
		}
		night, _ := width(14*144 + 30) // the forecast for 05:00-05:10
		day, _ := width(14*144 + 102)  // for 17:00-17:10
		if !(day > 2.5*night) {
			t.Errorf("seed %d: the 90th percentile one step ahead is %.1f above the median at 05:00 and %.1f at 17:00, want it wider in the afternoon", seed, night, day)
		}
	}
	// Coverage in the afternoon, one step ahead, over a day of origins.
	h := quietNights(16, 4)
	covered, n := 0, 0
	for end := 15*144 + 72; end < 16*144; end += 3 {
		past := fleet.Series{Start: h.Start, Step: h.Step, Values: h.Values[:end]}
		f, err := AutoWith(past, time.Hour, []float64{0.5, 0.9}, Options{})
		if err != nil {
			t.Fatal(err)
		}
		n++
		if h.Values[end] <= f.Values[1][0] {
			covered++
		}
	}
	if share := float64(covered) / float64(n); share < 0.82 {
		t.Errorf("the 90th percentile covers %d of %d afternoon values (%.2f)", covered, n, share)
	}
}

// ones is the daily scale of c's calibration origins without one.
func ones(c *paths) [][]float64 {
	out := make([][]float64, len(c.starts))
	var none *dailyScale
	for i, o := range c.starts {
		out[i] = none.steps(o, c.h)
	}
	return out
}

// TestOffsetsInScaleUnits: the calibrated offsets are quantiles of the
// errors divided by their steps' daily scale, so that the forecast's
// scale multiplies them back.
func TestOffsetsInScaleUnits(t *testing.T) {
	c := calibrated("c", noisyTop(10, 7))
	levels := []float64{0.1, 0.5, 0.9}
	twice := ones(c)
	for i := range twice {
		for k := range twice[i] {
			twice[i][k] = 2
		}
	}
	raw, scaled := c.offsets(levels, ones(c)), c.offsets(levels, twice)
	for j := range levels {
		if math.Abs(scaled[0][j]-raw[0][j]/2) > 1e-12 {
			t.Fatalf("level %v: offset %v with errors at twice the scale, want half of %v", levels[j], scaled[0][j], raw[0][j])
		}
	}
}
