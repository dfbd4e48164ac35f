package controller

import (
	"slices"
	"testing"

	"github.com/fleetcast/autoscaler/fleet"
)

// TestPendingTiers: pushed pending lines are summed by tier for the
// planner (fleet.State.PendingTiers); lines without a tier are left to
// the default tier, and no more than is pending is given a tier.
func TestPendingTiers(t *testing.T) {
	dr, pending, now := demandRig()
	body := `{"source": "kueue", "pending": [{"gpus": 8, "tier": "critical"}, {"gpus": 4, "tier": "best_effort"}, {"gpus": 2}, {"gpu_model": "h100", "gpus": 8, "tier": "critical"}]}`
	if w := push(t, dr, "", "application/json", body); w.Code != 204 {
		t.Fatalf("push: %d %s", w.Code, w.Body)
	}
	total, _ := pending.Demand(*now)
	full := pendingTiers(pending.Waiting(*now), total)
	if want := []fleet.TierGPUs{{Tier: "critical", GPUs: 16}, {Tier: "best_effort", GPUs: 4}}; total != 22 || !slices.Equal(full, want) {
		t.Errorf("pending %d, by tier %v; want 22, %v", total, full, want)
	}
	// In the lines' order, to what is pending.
	if got := pendingTiers(pending.Waiting(*now), 10); !slices.Equal(got, []fleet.TierGPUs{{Tier: "critical", GPUs: 8}, {Tier: "best_effort", GPUs: 2}}) {
		t.Errorf("capped at 10: %v", got)
	}
	st := fleet.State{PendingGPUs: total, PendingTiers: full}
	tiers := []fleet.Tier{{Name: "critical", Rank: 1}, {Name: "standard", Rank: 2, Default: true}, {Name: "best_effort", Rank: 3}}
	if by := fleet.PendingByTier(&st, tiers); !slices.Equal(by, []int{16, 2, 4}) {
		t.Errorf("by tier %v, want [16 2 4]: the line without a tier the default's", by)
	}
}
