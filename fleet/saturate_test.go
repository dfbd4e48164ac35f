package fleet

import (
	"math"
	"testing"
)

// TestMaxFleetGPUs: every pool at its max, within max_gpus, saturated;
// the figures worked by hand.
func TestMaxFleetGPUs(t *testing.T) {
	for _, tt := range []struct {
		name  string
		pools [][2]int // max, GPUs per node
		limit int
		want  int
	}{
		{"no pools", nil, 0, 0},
		{"one pool", [][2]int{{10, 8}}, 0, 80},
		{"two pools", [][2]int{{10, 8}, {3, 4}}, 0, 92},
		{"within max_gpus", [][2]int{{10, 8}, {3, 4}}, 50, 50},
		{"max_gpus above the pools", [][2]int{{10, 8}}, 1000, 80},
		{"a product that overflows", [][2]int{{1 << 61, 8}}, 0, math.MaxInt},
		{"a sum that overflows", [][2]int{{1 << 60, 4}, {1 << 60, 4}}, 0, math.MaxInt},
		{"an overflow within max_gpus", [][2]int{{1 << 61, 8}}, 500, 500},
	} {
		s := Settings{Limits: Limits{MaxGPUs: tt.limit}}
		for _, p := range tt.pools {
			s.Pools = append(s.Pools, Pool{Max: p[0], GPUsPerNode: p[1]})
		}
		if got := s.MaxFleetGPUs(); got != tt.want {
			t.Errorf("%s: MaxFleetGPUs = %d, want %d", tt.name, got, tt.want)
		}
	}
	for _, tt := range []struct{ a, b, mul, add int }{
		{0, 5, 0, 5}, {3, 4, 12, 7}, {math.MaxInt, 2, math.MaxInt, math.MaxInt}, {math.MaxInt / 2, 3, math.MaxInt, math.MaxInt/2 + 3}, {math.MaxInt - 1, 2, math.MaxInt, math.MaxInt},
	} {
		if got := SatMul(tt.a, tt.b); got != tt.mul {
			t.Errorf("SatMul(%d, %d) = %d, want %d", tt.a, tt.b, got, tt.mul)
		}
		if got := SatAdd(tt.a, tt.b); got != tt.add {
			t.Errorf("SatAdd(%d, %d) = %d, want %d", tt.a, tt.b, got, tt.add)
		}
	}
}
