package forecast

import (
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/fleetcast/autoscaler/fleet"
)

// walk is a daily cycle on a random-walk level with noise: the models follow
// its last values closely, as they do on the real traces.
func walk(seed uint64) fleet.Series {
	rng := rand.New(rand.NewPCG(seed, 11))
	s := fleet.Series{Start: start, Step: 10 * time.Minute}
	level := 300.0
	for i := range 17 * 144 {
		level += 2 * rng.NormFloat64()
		s.Values = append(s.Values, level+50*math.Sin(2*math.Pi*float64(i%144)/144)+rng.NormFloat64())
	}
	return s
}

// TestUnconfirmedJump: one bad last reading (zeroed, halved, doubled) does
// not carry the forecast with it: the median stays with the values before
// it, and the band holds both the old level and the jump. A jump the next
// readings confirm is followed.
func TestUnconfirmedJump(t *testing.T) {
	levels := []float64{0.1, 0.5, 0.9}
	for _, tt := range []struct {
		name string
		// last multiplies the last value, run times (1: unaltered).
		last float64
		run  int
		note bool
	}{
		{"unaltered", 1, 1, false},
		{"zeroed", 0, 1, true},
		{"halved", 0.5, 1, true},
		{"doubled", 2, 1, true},
		{"zeroed, confirmed", 0, 3, false},
		{"doubled, confirmed", 2, 3, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			for seed := range uint64(3) {
				h := walk(seed)
				// Origin 15 days in: at the top of the daily cycle.
				n := 15*144 + 36
				y := slices.Clone(h.Values[:n])
				for i := n - tt.run; i < n; i++ {
					y[i] *= tt.last
				}
				jumped := y[n-1]
				f, err := Auto(fleet.Series{Start: h.Start, Step: h.Step, Values: y}, time.Hour, levels)
				if err != nil {
					t.Fatal(err)
				}
				if got := f.Note != ""; got != tt.note || (got && !strings.Contains(f.Note, "confirms")) {
					t.Fatalf("seed %d: %s note %q, want a note: %v", seed, f.Model, f.Note, tt.note)
				}
				// The level before the jump: the value it replaced.
				cycle := h.Values[n-1]
				med, lo, hi := f.Values[1][0], f.Values[0][0], f.Values[2][0]
				switch {
				case !tt.note && tt.run == 1:
					if math.Abs(med-cycle) > 10 {
						t.Fatalf("seed %d: %s median %.1f, want about %.1f", seed, f.Model, med, cycle)
					}
				case !tt.note:
					// Confirmed: the forecast follows the new level.
					if math.Abs(med-jumped) > 0.25*cycle {
						t.Fatalf("seed %d: %s median %.1f after a confirmed jump to %.1f", seed, f.Model, med, jumped)
					}
				default:
					// The band reaches at least halfway to the jump (the
					// models follow a jump most of the way).
					if math.Abs(med-cycle) > 10 || lo > min(cycle, (cycle+jumped)/2) || hi < max(cycle, (cycle+jumped)/2) {
						t.Fatalf("seed %d: %s step 1 band %.1f-%.1f-%.1f, want a median near %.1f and a band halfway to %.1f", seed, f.Model, lo, med, hi, cycle, jumped)
					}
				}
			}
		})
	}
}

// TestOnlineUnconfirmedJump: Online holds on as Auto does.
func TestOnlineUnconfirmedJump(t *testing.T) {
	h := walk(5)
	n := 15*144 + 36
	var fs [2]Forecast
	for i, last := range []float64{h.Values[n-1], 0} {
		// Each Online sees one continuation (a history's values, once
		// followed, must not change).
		o, err := NewOnline(fleet.Series{Start: h.Start, Step: h.Step, Values: h.Values[:n-6]}, time.Hour, []float64{0.1, 0.5, 0.9})
		if err != nil {
			t.Fatal(err)
		}
		y := slices.Clone(h.Values[:n])
		y[n-1] = last
		if fs[i], err = o.Forecast(fleet.Series{Start: h.Start, Step: h.Step, Values: y}); err != nil {
			t.Fatal(err)
		}
	}
	f0, f := fs[0], fs[1]
	if f0.Note != "" || f.Note == "" {
		t.Fatalf("notes %q (unaltered), %q (zeroed)", f0.Note, f.Note)
	}
	// The median and the top of the band stay near the unaltered
	// forecast's; the bottom of the band comes down towards the zero.
	if lo, med, hi := f.Values[0][0], f.Values[1][0], f.Values[2][0]; lo > f0.Values[0][0]/2 || math.Abs(med-f0.Values[1][0]) > 10 || hi < f0.Values[2][0]-10 {
		t.Fatalf("zeroed: %s step 1 band %.1f-%.1f-%.1f, unaltered %.1f-%.1f-%.1f", f.Model, lo, med, hi, f0.Values[0][0], f0.Values[1][0], f0.Values[2][0])
	}
}

func TestHedge(t *testing.T) {
	levels := []float64{0.1, 0.5, 0.9}
	before := [][]float64{{8, 9}, {10, 11}, {12, 13}}
	after := [][]float64{{0, 20}, {1, 21}, {2, 22}}
	want := [][]float64{{0, 9}, {10, 11}, {12, 22}}
	if got := hedge(levels, before, after); !slices.EqualFunc(got, want, slices.Equal) {
		t.Fatalf("hedge = %v, want %v", got, want)
	}
}

// TestNoJumpOnAnExactFit: a series the models fit exactly (a constant, a
// repeated day) has no jumps of rounding error; a step on a flat run is
// one.
func TestNoJumpOnAnExactFit(t *testing.T) {
	for _, tt := range []struct {
		name string
		v    func(i int) float64
		last float64 // added to the last value
		note bool
	}{
		{"constant", func(int) float64 { return 8 }, 0, false},
		{"constant, rounding", func(int) float64 { return 8 }, 1e-9, false},
		{"repeated day", func(i int) float64 { return float64(i % 144) }, 0, false},
		{"step on a flat run", func(int) float64 { return 8 }, 8, true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			s := fleet.Series{Start: start, Step: 10 * time.Minute}
			for i := range 15 * 144 {
				s.Values = append(s.Values, tt.v(i))
			}
			s.Values[len(s.Values)-1] += tt.last
			f, err := Auto(s, time.Hour, nil)
			if err != nil {
				t.Fatal(err)
			}
			if got := f.Note != ""; got != tt.note {
				t.Fatalf("%s: note %q, want a note: %v", f.Model, f.Note, tt.note)
			}
		})
	}
}
