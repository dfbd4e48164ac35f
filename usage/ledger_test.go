package usage

import (
	"math"
	"math/rand/v2"
	"testing"
	"time"
)

func TestApportionAddsUp(t *testing.T) {
	for _, tc := range []struct {
		name    string
		total   Micros
		weights []float64
		want    []Micros
	}{
		{"even", 9, []float64{1, 1, 1}, []Micros{3, 3, 3}},
		{"largest remainder first", 10, []float64{1, 1, 1}, []Micros{4, 3, 3}},
		{"by weight", 16_000_000, []float64{4, 2, 2}, []Micros{8_000_000, 4_000_000, 4_000_000}},
		{"no weight: first takes all", 5, []float64{0, 0}, []Micros{5, 0}},
		{"negative weight counts as none", 7, []float64{-3, 1}, []Micros{0, 7}},
		{"remainder to the largest fraction", 100, []float64{1, 2}, []Micros{33, 67}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := Apportion(tc.total, tc.weights)
			for i := range got {
				if got[i] != tc.want[i] {
					t.Fatalf("Apportion(%d, %v) = %v, want %v", tc.total, tc.weights, got, tc.want)
				}
			}
		})
	}
	r := rand.New(rand.NewPCG(1, 2))
	for i := 0; i < 2000; i++ {
		n := 1 + r.IntN(9)
		w := make([]float64, n)
		for k := range w {
			w[k] = r.Float64() * 8
		}
		total := Micros(r.Int64N(1e9))
		sum := Micros(0)
		for _, x := range Apportion(total, w) {
			sum += x
		}
		if sum != total {
			t.Fatalf("Apportion(%d, %v) adds up to %d", total, w, sum)
		}
	}
}

func TestSplit(t *testing.T) {
	for _, tc := range []struct {
		name string
		node Node
		want map[Key]Micros
	}{
		{"jobs by GPUs held, the rest idle",
			Node{Pool: "od", GPUs: 8, Cost: 16_000_000, Hours: 0.5, Jobs: []Holder{{Team: "a", Tier: "x", GPUs: 4}, {Team: "b", GPUs: 2}}},
			map[Key]Micros{{"a", "x", "od", Used}: 8_000_000, {"b", Unattributed, "od", Used}: 4_000_000, {IdleLabel, IdleLabel, "od", Idle}: 4_000_000}},
		{"free GPUs of a purchase are its teams'",
			Node{Pool: "od", GPUs: 8, Cost: 8_000_000, Hours: 0.25, BoughtFor: []Holder{{Team: "a", GPUs: 3}, {Team: "b", GPUs: 1}}},
			map[Key]Micros{{"a", Unattributed, "od", BoughtFor}: 6_000_000, {"b", Unattributed, "od", BoughtFor}: 2_000_000}},
		{"a full node leaves nothing to its purchase",
			Node{Pool: "od", GPUs: 2, Cost: 1_000_000, Hours: 1, Jobs: []Holder{{Team: "c", GPUs: 2}}, BoughtFor: []Holder{{Team: "a", GPUs: 2}}},
			map[Key]Micros{{"c", Unattributed, "od", Used}: 1_000_000}},
		{"jobs claiming more than the node share it",
			Node{Pool: "od", GPUs: 4, Cost: 3_000_000, Hours: 1, Jobs: []Holder{{Team: "a", GPUs: 4}, {Team: "b", GPUs: 2}}},
			map[Key]Micros{{"a", Unattributed, "od", Used}: 2_000_000, {"b", Unattributed, "od", Used}: 1_000_000}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := map[Key]Micros{}
			hours := 0.0
			for _, c := range Split(tc.node, nil) {
				got[c.Key] += c.Micros
				hours += c.GPUHours
			}
			if len(got) != len(tc.want) {
				t.Fatalf("Split = %v, want %v", got, tc.want)
			}
			for k, v := range tc.want {
				if got[k] != v {
					t.Errorf("%+v: %d, want %d", k, got[k], v)
				}
			}
			if want := float64(tc.node.GPUs) * tc.node.Hours; math.Abs(hours-want) > 1e-9 {
				t.Errorf("GPU-hours add up to %v, want %v", hours, want)
			}
		})
	}
}

func TestMeterAddsUpOverIntervals(t *testing.T) {
	start := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	var m Meter
	m.Charge(3.7, start)
	sum := Micros(0)
	now := start
	for i := 0; i < 1000; i++ {
		now = now.Add(time.Duration(7+i%13) * time.Second)
		sum += m.Charge(3.7, now)
	}
	if want := MicrosOf(3.7 * now.Sub(start).Hours()); sum != want {
		t.Fatalf("charged %d over %v, want %d", sum, now.Sub(start), want)
	}
	// A new price starts a new stretch at the last charge.
	before := sum
	sum += m.Charge(10, now.Add(time.Hour))
	if got := sum - before; got != 10_000_000 {
		t.Fatalf("an hour at $10: %d, want 10000000", got)
	}
	if c := m.Charge(10, now); c != 0 {
		t.Fatalf("a charge back in time: %d, want 0", c)
	}
}

func TestLabelsFoldPastTheCap(t *testing.T) {
	l := NewLabels(2)
	for _, tc := range []struct{ in, want string }{
		{"a", "a"}, {"", Unattributed}, {"b", "b"}, {"c", Other}, {"a", "a"}, {Unattributed, Unattributed}, {IdleLabel, IdleLabel}, {"d", Other},
	} {
		if got := l.Fold(tc.in); got != tc.want {
			t.Errorf("Fold(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
	if l.Len() != 2 {
		t.Errorf("kept %d labels, want 2", l.Len())
	}
}

func TestQuantiles(t *testing.T) {
	xs := make([]float64, 100)
	for i := range xs {
		xs[i] = float64(100 - i)
	}
	q := QuantilesOf(xs)
	if q.N != 100 || q.P50 != 50 || q.P95 != 95 || q.P99 != 99 {
		t.Errorf("QuantilesOf(1..100) = %+v, want 50, 95, 99", q)
	}
}
