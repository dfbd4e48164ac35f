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

// oneOffBurst is examples/one-off-burst-10m.csv's shape: every 10 minutes
// for days, 200+100*sin(2*pi*(h-9)/24) GPUs at hour of day h with N(0, 8)
// noise, and 300 more on day 8 from 14:00 to 16:00.
func oneOffBurst(days int, seed uint64) fleet.Series {
	return tenMinutes(days, seed, func(i int, rng *rand.Rand) float64 {
		h := float64(i%144) / 6
		v := 200 + 100*math.Sin(2*math.Pi*(h-9)/24) + 8*rng.NormFloat64()
		if i >= 8*144+84 && i < 8*144+96 {
			v += 300
		}
		return v
	})
}

// tenMinutes is days of a series every 10 minutes from start, value(i,
// rng) at step i, the generator seeded.
func tenMinutes(days int, seed uint64, value func(i int, rng *rand.Rand) float64) fleet.Series {
	rng := rand.New(rand.NewPCG(seed, seed))
	s := fleet.Series{Start: start, Step: 10 * time.Minute}
	for i := range days * 144 {
		s.Values = append(s.Values, value(i, rng))
	}
	return s
}

// TestBandForgetsAOneOffBurst: two hours after a burst that came once, the
// forecast one step ahead follows the level, and its upper quantiles do not
// carry the burst (the models of the daily cycle miss it at each of its
// steps; the ones that follow the level one step ahead only at its start
// and end). Further ahead they still may: a model that follows the level
// misses the start at as many origins as the steps ahead.
func TestBandForgetsAOneOffBurst(t *testing.T) {
	for _, seed := range []uint64{1, 2, 3} {
		h := oneOffBurst(11, seed)
		end := 8*144 + 96 + 12 // two hours after the burst
		past := fleet.Series{Start: h.Start, Step: h.Step, Values: h.Values[:end]}
		f, err := AutoWith(past, 2*time.Hour, []float64{0.5, 0.95}, Options{})
		if err != nil {
			t.Fatal(err)
		}
		next := f.Origin.Add(f.Step)
		median, upper := f.At(0.5, next), f.At(0.95, next)
		if upper-median > 100 {
			t.Errorf("seed %d: %s one step ahead: median %.0f, 95th percentile %.0f: the band holds the 300-GPU burst of two hours ago", seed, f.Model, median, upper)
		}
		if truth := h.Values[end]; math.Abs(median-truth) > 40 {
			t.Errorf("seed %d: %s one step ahead: median %.0f, the value %.0f", seed, f.Model, median, truth)
		}
	}
}

// calibrated is a candidate whose calibration errors one step ahead are
// errs (the value less the forecast), at consecutive origins.
func calibrated(name string, errs []float64) *paths {
	c := &paths{name: name, y: make([]float64, len(errs)+1), season: 144, h: 1}
	for i, e := range errs {
		c.starts = append(c.starts, i)
		c.calib = append(c.calib, []float64{-e})
	}
	c.mae = c.calibrationMAE()
	return c
}

// TestSwitchLevelsNeedsEvidence: a level takes another candidate's
// quantile than the point forecast's only when it is better by more than
// the calibration's noise.
func TestSwitchLevelsNeedsEvidence(t *testing.T) {
	n := 432
	// A model of the daily cycle that missed a recent burst at each of its
	// six steps, and one that follows the level and missed only its start.
	cycle, level := noisyTop(3, 5), noisyTop(6, 6)
	for i := n - 60; i < n-54; i++ {
		cycle[i] += 150
	}
	level[n-60] += 150
	times := func(e []float64, c float64) []float64 {
		out := make([]float64, len(e))
		for i, x := range e {
			out[i] = x * c
		}
		return out
	}
	for _, tc := range []struct {
		name       string
		def, other []float64
		// scale is the daily scale of every origin's step (0: none).
		scale float64
		want  int
	}{
		{"a burst missed at every step against at its start", cycle, level, 0, 1},
		{"the same at four times the daily scale", times(cycle, 4), times(level, 4), 4, 1},
		{"a few tail errors a little smaller", noisyTop(10, 7), noisyTopShrunk(10, 7), 0, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			levels := []float64{0.98}
			cands := []*paths{calibrated("def", tc.def), calibrated("other", tc.other)}
			sc := ones(cands[0])
			for i := range sc {
				sc[i][0] = cmp.Or(tc.scale, 1)
			}
			offsets := [][][]float64{cands[0].offsets(levels, sc), cands[1].offsets(levels, sc)}
			if tc.want == 0 {
				// The other's loss is lower: switching on the loss alone
				// would take it.
				if l0, l1 := tailLoss(cands[0], offsets[0], 0.98), tailLoss(cands[1], offsets[1], 0.98); !(l1 < l0) {
					t.Fatalf("the other's loss %.4f is not below the default's %.4f: the case tests nothing", l1, l0)
				}
			}
			if got := switchLevels(cands, offsets, sc, levels, []int{0})[0][0]; got != tc.want {
				t.Fatalf("level 0.98 takes candidate %d's quantile, want %d", got, tc.want)
			}
		})
	}
}

// noisyTop is N(0, sd) errors at 432 origins (seeded).
func noisyTop(sd float64, seed uint64) []float64 {
	rng := rand.New(rand.NewPCG(seed, seed))
	e := make([]float64, 432)
	for i := range e {
		e[i] = sd * rng.NormFloat64()
	}
	return e
}

// noisyTopShrunk is noisyTop with its three largest errors 10% smaller.
func noisyTopShrunk(sd float64, seed uint64) []float64 {
	e := noisyTop(sd, seed)
	order := make([]int, len(e))
	for i := range order {
		order[i] = i
	}
	slices.SortFunc(order, func(a, b int) int { return cmp.Compare(e[b], e[a]) })
	for _, i := range order[:3] {
		e[i] *= 0.9
	}
	return e
}

// tailLoss is c's recency-weighted pinball loss at level q one step ahead,
// its quantile at offsets[0][0].
func tailLoss(c *paths, offsets [][]float64, q float64) float64 {
	sum, total := 0.0, 0.0
	for i, o := range c.starts {
		w := c.recency(o)
		sum += w * pinball(c.y[o]-c.calib[i][0]-offsets[0][0], q)
		total += w
	}
	return sum / total
}

func TestStepsName(t *testing.T) {
	cands := []*paths{{name: "a"}, {name: "b"}, {name: "c"}}
	for _, tc := range []struct {
		by   []int
		want string
	}{
		{[]int{0}, "a"},
		{[]int{1, 1, 1}, "b"},
		{[]int{0, 1, 1}, "a (step 1), b (steps 2-3)"},
		{[]int{0, 0, 2, 1}, "a (steps 1-2), c (step 3), b (step 4)"},
	} {
		if got := stepsName(cands, tc.by); got != tc.want {
			t.Errorf("stepsName(%v) = %q, want %q", tc.by, got, tc.want)
		}
	}
}

// constant forecasts v at every step.
type constant float64

func (c constant) Forecast(_, h int) []float64 {
	out := make([]float64, h)
	for k := range out {
		out[k] = float64(c)
	}
	return out
}

func (c constant) Extend([]float64) Fitted { return c }

// TestPickPointPerStep: the point forecast at each step is the candidate's
// that erred least there in calibration: a model that follows the level
// one step ahead, one of the daily cycle further out.
func TestPickPointPerStep(t *testing.T) {
	near, far := noisyTop(1, 8), noisyTop(10, 9)
	steps := func(name string, v float64, first, second []float64) *paths {
		c := &paths{name: name, y: make([]float64, len(first)+2), season: 144, h: 2, members: []Fitted{constant(v)}}
		for i := range first {
			c.starts = append(c.starts, i)
			c.calib = append(c.calib, []float64{-first[i], -second[i]})
		}
		c.mae = c.calibrationMAE()
		return c
	}
	cands := []*paths{steps("level", 1, near, far), steps("cycle", 2, far, near)}
	b := pick(cands, []float64{0.5})
	p := b.predict(make([]float64, 10), []float64{0.5})
	if p.Point[0] != 1 || p.Point[1] != 2 {
		t.Fatalf("point forecast %v (%s), want [1 2]: the level model's one step ahead, the cycle's two", p.Point, p.Model)
	}
	if want := "level (step 1), cycle (step 2)"; p.Model != want {
		t.Fatalf("model %q, want %q", p.Model, want)
	}
}

// TestPickSwitchesATailLevel: a level takes another candidate's quantile,
// its point and its calibrated offset, where that candidate's errors are
// clearly better in the tail, at every step; the median stays with the
// point forecast's candidate.
func TestPickSwitchesATailLevel(t *testing.T) {
	const h = 3
	n := 432
	steps := func(name string, v float64, errs [][]float64) *paths {
		c := &paths{name: name, y: make([]float64, n+h), season: 144, h: h, members: []Fitted{constant(v)}}
		for i := range n {
			c.starts = append(c.starts, i)
			row := make([]float64, h)
			for k := range h {
				row[k] = -errs[k][i]
			}
			c.calib = append(c.calib, row)
		}
		c.mae = c.calibrationMAE()
		return c
	}
	var cycle, level [][]float64
	for k := range h {
		// The cycle's model: small errors, and a recent burst missed at
		// each of its six steps; the level's: the same errors twice as
		// large (so that their mean is no better), the burst missed at
		// its start only.
		c, l := noisyTop(3, uint64(10+k)), make([]float64, n)
		for i, e := range c {
			l[i] = 2 * e
		}
		for i := n - 60; i < n-54; i++ {
			c[i] += 150
		}
		l[n-60] += 150
		cycle, level = append(cycle, c), append(level, l)
	}
	levels := []float64{0.5, 0.98}
	// The level model first, so that the point forecast's candidate (the
	// cycle's, the smaller MAE) is not the first.
	cands := []*paths{steps("level", 20, level), steps("cycle", 10, cycle)}
	tail := cands[0].offsets(levels, ones(cands[0]))
	b := pick(cands, levels)
	p := b.predict(make([]float64, 10), levels)
	for k := range h {
		if p.Point[k] != 10 {
			t.Fatalf("step %d: point %v (%s), want the cycle model's 10", k+1, p.Point[k], p.Model)
		}
		if want := 20 + tail[k][1]; math.Abs(p.Quantiles[1][k]-want) > 1e-9 {
			t.Errorf("step %d: 98th percentile %.3f, want the level model's %.3f (20 plus its offset)", k+1, p.Quantiles[1][k], want)
		}
		if p.Quantiles[0][k] > 10+5 {
			t.Errorf("step %d: median %.3f, want about the cycle model's 10", k+1, p.Quantiles[0][k])
		}
	}
}

// line forecasts v times the index of each step forecast: v*(origin+k+1)
// k+1 steps after origin, so that a forecast shows its origin and step.
type line float64

func (l line) Forecast(origin, h int) []float64 {
	out := make([]float64, h)
	for k := range out {
		out[k] = float64(l) * float64(origin+k+1)
	}
	return out
}

func (l line) Extend([]float64) Fitted { return l }

// TestJumpHoldsTheBlendMadeBefore: after an unconfirmed jump, the forecast
// made one step earlier is the blend's: each step from the members (and
// weights) of the step it is for, k+2 steps after the earlier origin.
func TestJumpHoldsTheBlendMadeBefore(t *testing.T) {
	b := &blend{members: []Fitted{line(1), line(10)}, point: [][]float64{{1, 0}, {0, 1}, {0, 1}}, jump: 1}
	y := make([]float64, 10)
	y[9] = 1000
	before, _, expected, ok := unconfirmedJump(b, y, 3)
	if !ok {
		t.Fatal("a last value of 1000 against 10 expected: want an unconfirmed jump")
	}
	// One step after origin 9, by the first member: 1*10. Then steps 2-4
	// after it by the second: 10*11, 10*12, 10*13.
	if expected != 10 || !slices.Equal(before, []float64{110, 120, 130}) {
		t.Fatalf("expected %v, before %v; want 10 and [110 120 130]", expected, before)
	}
}
