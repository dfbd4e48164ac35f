package planner

import (
	"testing"
	"time"

	"github.com/fleetcast/autoscaler/fleet"
)

// TestNeverReadCountsAtMax: a pool never read (its cloud unreachable at
// start) is left alone, and counted at its max against the fleet's
// limits, so the pools that can be read still serve within what is left.
func TestNeverReadCountsAtMax(t *testing.T) {
	gcp := pool("gcp", fleet.OnDemand, 29, 12*time.Minute, 0, 10) // 80 GPUs at its max
	aws := pool("aws", fleet.OnDemand, 32, 9*time.Minute, 0, 40)
	tests := []struct {
		name    string
		maxGPUs int
		spend   float64
		want    int // nodes launched in aws
	}{
		{"no limits", 0, 0, 8},
		{"max_gpus leaves room for 2 nodes", 96, 0, 2},
		{"max_gpus has no room", 80, 0, 0},
		{"max_spend_per_hour leaves room for 3 nodes", 0, 10*29 + 3*32 + 1, 3},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := withLimits(testConfig(gcp, aws), func(l *fleet.Limits) { l.MaxGPUs, l.MaxSpendPerHour = tt.maxGPUs, tt.spend })
			st := fleet.State{PendingGPUs: 64, Pools: []fleet.PoolStatus{{Name: "gcp", Unobserved: fleet.Unobserved{Code: fleet.UnobservedNeverRead, Err: "connection refused"}}}}
			p := Make(Input{Settings: cfg.Settings(), State: &st, Now: t0})
			got := 0
			for _, a := range actions(p, Launch) {
				if a.Pool != "aws" {
					t.Fatalf("launch in %s, never read", a.Pool)
				}
				got += a.Count
			}
			if got != tt.want || len(notesCoded(p, ReasonPoolNeverRead)) != 1 {
				t.Fatalf("%d aws nodes launched, want %d (and the note)\n%s", got, tt.want, describe(p))
			}
			// What the fleet costs is what is known: nothing runs yet.
			if p.CostPerHourBefore != 0 || p.CostPerHourAfter != float64(got*32) {
				t.Fatalf("cost per hour %v before, %v after; want 0, then the aws launches' %d", p.CostPerHourBefore, p.CostPerHourAfter, got*32)
			}
		})
	}
}
