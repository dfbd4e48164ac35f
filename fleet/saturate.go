package fleet

import "math"

// SatMul is a*b for a, b >= 0, or math.MaxInt where the product would
// overflow: a pool's nodes times its GPUs per node never wraps round to a
// small number (which would, for one, turn off the planner's guard against
// absurd forecasts).
func SatMul(a, b int) int {
	if a <= 0 || b <= 0 {
		return max(0, a) * max(0, b)
	}
	if a > math.MaxInt/b {
		return math.MaxInt
	}
	return a * b
}

// SatAdd is a+b for a, b >= 0, or math.MaxInt where the sum would
// overflow.
func SatAdd(a, b int) int {
	if a > 0 && b > math.MaxInt-a {
		return math.MaxInt
	}
	return a + b
}
