package usage

import (
	"math"
	"slices"
)

// QueueBuckets are the upper bounds, in seconds, of the queue-time
// histogram's buckets (fleetcast_job_queue_seconds); a last bucket counts
// the rest.
var QueueBuckets = []float64{60, 300, 900, 1800, 3600, 7200, 14400, 28800, 86400, 172800}

// bucketOf is the index in a QueueBuckets count of a queue time of s
// seconds.
func bucketOf(s float64) int {
	i, _ := slices.BinarySearch(QueueBuckets, s)
	return i
}

// Quantiles are a set of queue times' p50, p95 and p99, in seconds, and
// how many there were.
type Quantiles struct {
	N   int     `json:"jobs"`
	P50 float64 `json:"p50_s"`
	P95 float64 `json:"p95_s"`
	P99 float64 `json:"p99_s"`
}

// QuantilesOf are xs' quantiles (nearest rank); xs is sorted in place.
func QuantilesOf(xs []float64) Quantiles {
	if len(xs) == 0 {
		return Quantiles{}
	}
	slices.Sort(xs)
	return Quantiles{N: len(xs), P50: rank(xs, 0.50), P95: rank(xs, 0.95), P99: rank(xs, 0.99)}
}

// rank is the nearest-rank q-quantile of sorted xs.
func rank(xs []float64, q float64) float64 {
	i := int(math.Ceil(q*float64(len(xs)))) - 1
	return xs[min(max(i, 0), len(xs)-1)]
}
