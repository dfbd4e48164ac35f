package usage

import (
	"fmt"
	"testing"
	"time"

	"github.com/fleetcast/autoscaler/fleet"
)

// BenchmarkObserve is one cycle's charging of 10,000 ten-GPU nodes in four
// pools, each running ten 1-GPU jobs of ten teams (100,000 jobs), whose
// agents report the same jobs as before (fleet.Node.JobsSeq).
func BenchmarkObserve(b *testing.B) {
	t0 := time.Date(2026, 11, 30, 10, 0, 0, 0, time.UTC)
	s := Snapshot{At: t0}
	for n := range 10_000 {
		x := Seen{ID: fmt.Sprint("node-", n), Pool: fmt.Sprint("pool-", n%4), GPUs: 10, Price: 12, Ours: true, JobsSeq: uint64(n + 1)}
		for k := range 10 {
			x.Jobs = append(x.Jobs, fleet.Job{ID: fmt.Sprint("j-", n, "-", k), GPUs: 1, Start: t0, Submitted: t0.Add(-time.Minute), Team: fmt.Sprint("team-", (n+k)%10), Tier: "standard"})
		}
		s.Nodes = append(s.Nodes, x)
	}
	a := NewAccountant(Options{})
	a.Observe(s)
	for b.Loop() {
		s.At = s.At.Add(time.Minute)
		a.Observe(s)
	}
}
