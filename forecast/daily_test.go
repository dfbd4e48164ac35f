package forecast

import (
	"cmp"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/fleetcast/autoscaler/fleet"
)

// quietNights is every 10 minutes for days a level of 100 GPUs with
// N(0, 2) noise from midnight to noon and N(0, 8) from noon to midnight.
func quietNights(days int, seed uint64) fleet.Series {
	return tenMinutes(days, seed, func(i int, rng *rand.Rand) float64 {
		sd := 2.0
		if i%144 >= 72 {
			sd = 8
		}
		return 100 + sd*rng.NormFloat64()
	})
}

// smoothCycle is every 10 minutes for days 200+100*sin(2*pi*h/24) GPUs at
// hour of day h with N(0, 1) noise: a cycle the models forecast, whose
// changes are large mid-rise and small at the peak.
func smoothCycle(days int, seed uint64) fleet.Series {
	return tenMinutes(days, seed, func(i int, rng *rand.Rand) float64 {
		return 200 + 100*math.Sin(2*math.Pi*float64(i%144)/144) + rng.NormFloat64()
	})
}

func TestDailyScale(t *testing.T) {
	ramp := make([]float64, 14*144)
	for i := range ramp {
		ramp[i] = float64(i)
	}
	// Quiet nights with no change at all: the scale there is the floor.
	still := quietNights(14, 1).Values
	for i := range still {
		if i%144 < 72 {
			still[i] = 100
		}
	}
	least := 144 + 1 + 2*144 // a day, a step, and two days of changes
	for _, tc := range []struct {
		name       string
		y          []float64
		season     int
		none       bool
		night, day float64 // the scale at 06:00 and 18:00
		within     float64 // relative, 15% if 0
	}{
		{name: "quiet nights", y: quietNights(14, 1).Values, season: 144, night: 0.4, day: 1.6, within: 0.25},
		{name: "a value that is not a number", y: withNaN(quietNights(14, 1).Values, 1000), season: 144, night: 0.4, day: 1.6, within: 0.25},
		{name: "the shortest history with a scale", y: quietNights(14, 1).Values[:least], season: 144, night: 0.4, day: 1.6, within: 0.3},
		{name: "no change at night", y: still, season: 144, night: 1 / scaleClamp, day: 2},
		// At its peak (06:00) and trough (18:00) the cycle's own changes
		// are smallest: a scale of raw changes would be about 0.4 there.
		{name: "a cycle the day before explains", y: smoothCycle(14, 1).Values, season: 144, night: 1, day: 1, within: 0.25},
		{name: "the same change every step", y: ramp, season: 144, none: true},
		{name: "a step too short", y: quietNights(14, 1).Values[:least-1], season: 144, none: true},
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
				if got := ds.scale[c.at]; math.Abs(got-c.want) > cmp.Or(tc.within, 0.15)*c.want {
					t.Errorf("scale at step %d of the day: %.2f, want %.2f", c.at, got, c.want)
				}
			}
		})
	}
}

// TestDailyScaleWindow: each time of day's scale is the mean of the
// deseasonalised changes within the window around it, as counted one by
// one, for seasons long and short.
func TestDailyScaleWindow(t *testing.T) {
	for _, season := range []int{144, 30, 5, 3, 2} {
		rng := rand.New(rand.NewPCG(uint64(season), 9))
		y := make([]float64, 20*season+7)
		for i := range y {
			y[i] = 50 * rng.Float64() * float64(1+i%season)
		}
		ds := newDailyScale(y, season)
		if ds == nil {
			t.Fatalf("season %d: no scale", season)
		}
		n := len(y)
		from := max(season+1, n-scaleDays*season)
		change := func(t int) float64 { return math.Abs(y[t] - y[t-1] - (y[t-season] - y[t-season-1])) }
		total, all := 0.0, 0.0
		for i := from; i < n; i++ {
			total, all = total+change(i), all+1
		}
		w := min(max(1, season/24), (season-1)/2)
		for s := range season {
			in := map[int]bool{}
			for d := -w; d <= w; d++ {
				in[((s+d)%season+season)%season] = true
			}
			sum, cnt := 0.0, 0.0
			for i := from; i < n; i++ {
				if in[i%season] {
					sum, cnt = sum+change(i), cnt+1
				}
			}
			want := min(max(sum/cnt/(total/all), 1/scaleClamp), scaleClamp)
			if math.Abs(ds.scale[s]-want) > 1e-9 {
				t.Fatalf("season %d, time of day %d: scale %v, want %v", season, s, ds.scale[s], want)
			}
		}
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
// afternoon as at night, the band is about four times as wide there,
// each about as wide as the noise there says (a band made of every hour's
// errors alike is as wide at night as in the afternoon), and covers the
// afternoon's values about as often as it should.
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
		// A normal's 90th percentile is 1.28 standard deviations above
		// its median: no more than half as much again at night, a third
		// in the afternoon (the models' own errors add a little).
		if night > 1.5*1.28*2 || day > 1.33*1.28*8 {
			t.Errorf("seed %d: the 90th percentile one step ahead is %.1f above the median at 05:00 and %.1f at 17:00, want at most %.1f and %.1f", seed, night, day, 1.5*1.28*2, 1.33*1.28*8)
		}
	}
	// The afternoon's coverage one step ahead, at every step of two
	// afternoons (the controller's forecaster, fitted once): the band,
	// four times the night's, covers about as often as it should. (At
	// night it covers more: the models' level carries the afternoon's
	// noise, which the widths above leave out.)
	h := quietNights(17, 4)
	o, err := NewOnline(fleet.Series{Start: h.Start, Step: h.Step, Values: h.Values[:15*144]}, time.Hour, []float64{0.5, 0.9})
	if err != nil {
		t.Fatal(err)
	}
	covered, n := 0, 0
	for day := 15; day < 17; day++ {
		for end := day*144 + 72; end < (day+1)*144; end++ {
			f, err := o.Forecast(fleet.Series{Start: h.Start, Step: h.Step, Values: h.Values[:end]})
			if err != nil {
				t.Fatal(err)
			}
			n++
			if h.Values[end] <= f.Values[1][0] {
				covered++
			}
		}
	}
	if share := float64(covered) / float64(n); share < 0.85 {
		t.Errorf("the 90th percentile covers %d of %d afternoon values (%.2f), want 0.85 or more", covered, n, share)
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

// TestOffsetsInScaleUnits: the calibrated offsets at each step are
// quantiles of that step's errors divided by their own daily scale, so
// that the forecast's scale of the step multiplies them back.
func TestOffsetsInScaleUnits(t *testing.T) {
	errs := noisyTop(10, 7)
	c := &paths{name: "c", y: make([]float64, len(errs)+2), season: 144, h: 2}
	for i, e := range errs {
		c.starts = append(c.starts, i)
		c.calib = append(c.calib, []float64{-e, -2 * e})
	}
	levels := []float64{0.1, 0.5, 0.9}
	scaled := ones(c)
	for i := range scaled {
		scaled[i][0], scaled[i][1] = 2, 8
	}
	raw, got := c.offsets(levels, ones(c)), c.offsets(levels, scaled)
	for k, by := range []float64{2, 8} {
		for j := range levels {
			if math.Abs(got[k][j]-raw[k][j]/by) > 1e-12 {
				t.Fatalf("step %d, level %v: offset %v with the errors' scale at %v, want %v", k+1, levels[j], got[k][j], by, raw[k][j]/by)
			}
		}
	}
}

// TestOnlineBandFollowsTheDay: the controller's forecaster scales its
// bands by the time of day of the steps it forecasts, whatever the time of
// day its history starts at once the oldest values are trimmed.
func TestOnlineBandFollowsTheDay(t *testing.T) {
	h := quietNights(16, 5)
	fit := fleet.Series{Start: h.Start, Step: h.Step, Values: h.Values[:15*144]}
	o, err := NewOnline(fit, time.Hour, []float64{0.5, 0.9})
	if err != nil {
		t.Fatal(err)
	}
	for _, end := range []int{15*144 + 30, 15*144 + 102} { // 05:00, 17:00
		var widths []float64
		for _, d := range []int{0, 37, 144} { // the oldest d values trimmed
			past := fleet.Series{Start: h.Start.Add(time.Duration(d) * h.Step), Step: h.Step, Values: h.Values[d:end]}
			f, err := o.Forecast(past)
			if err != nil {
				t.Fatal(err)
			}
			widths = append(widths, f.Values[1][0]-f.Values[0][0])
		}
		if widths[1] != widths[0] || widths[2] != widths[0] {
			t.Fatalf("step %d of the day: the band's width %v with the history trimmed by 0, 37 and 144 steps, want one width", end%144, widths)
		}
		lo, hi := 1.28*2/1.5, 1.5*1.28*2
		if end%144 >= 72 {
			lo, hi = 1.28*8/1.33, 1.33*1.28*8
		}
		if w := widths[0]; w < lo || w > hi {
			t.Errorf("step %d of the day: the 90th percentile one step ahead is %.1f above the median, want %.1f-%.1f", end%144, w, lo, hi)
		}
	}
}

// TestOffsetsFromShift: a forecast made one step earlier reads each
// target's offsets of the step after, times the scale of the changes up to
// it from its own origin.
func TestOffsetsFromShift(t *testing.T) {
	b := &blend{offsets: [][]float64{{1}, {2}, {3}}}
	if got := b.offsetsFrom(5, 1); !slices.EqualFunc(got, [][]float64{{2}, {3}, {3}}, slices.Equal) {
		t.Fatalf("without a scale: %v", got)
	}
	b.daily = &dailyScale{scale: []float64{1, 2, 3, 4}, season: 4}
	sc := b.daily.steps(6, 4)
	want := [][]float64{{2 * sc[1]}, {3 * sc[2]}, {3 * sc[3]}}
	if got := b.offsetsFrom(6, 1); !slices.EqualFunc(got, want, slices.Equal) {
		t.Fatalf("offsetsFrom(6, 1) = %v, want %v", got, want)
	}
	if got, want := b.offsetsFrom(6, 0), [][]float64{{1 * sc[0]}, {2 * sc[1]}, {3 * sc[2]}}; !slices.EqualFunc(got, want, slices.Equal) {
		t.Fatalf("offsetsFrom(6, 0) = %v, want %v", got, want)
	}
}

// TestJumpBandScaledFromItsOrigin: after an unconfirmed jump, the band of
// the forecast made one step earlier is scaled as a forecast from its own
// origin: at each target, the offset of the step after times the scale of
// the changes from that origin to it.
func TestJumpBandScaledFromItsOrigin(t *testing.T) {
	h := 3
	b := &blend{members: []Fitted{constant(10)}, jump: 1,
		point: [][]float64{{1}, {1}, {1}}, level: [][][]float64{{{1}, {1}, {1}}},
		offsets: [][]float64{{1}, {2}, {3}},
		daily:   &dailyScale{scale: []float64{1, 2, 3, 4}, season: 4}}
	y := make([]float64, 10)
	y[9] = 1000
	levels := []float64{0.9}
	// The forecast after the jump: constant too, its band far below the
	// one before, so that the hedge keeps the one before.
	after := [][]float64{{0, 0, 0}}
	q, before, _ := holdJump(b, y, h, levels, after)
	if before == nil {
		t.Fatal("want an unconfirmed jump")
	}
	sc := b.daily.steps(len(y)-1, h+1)
	want := []float64{10 + 2*sc[1], 10 + 3*sc[2], 10 + 3*sc[3]}
	for k := range want {
		if math.Abs(q[0][k]-want[k]) > 1e-9 {
			t.Fatalf("the 90th percentile after the jump: %v, want %v", q[0], want)
		}
	}
}

// withNaN is y with its i-th value not a number.
func withNaN(y []float64, i int) []float64 {
	y = slices.Clone(y)
	y[i] = math.NaN()
	return y
}
