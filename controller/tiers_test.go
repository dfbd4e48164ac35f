package controller

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/fleetcast/autoscaler/fleet"
	"github.com/fleetcast/autoscaler/planner"
)

// TestPendingTiers: pushed pending lines are summed by tier for the
// planner (fleet.State.PendingTiers), each tier once, a fresh push's only;
// lines without a tier are left to the default tier.
func TestPendingTiers(t *testing.T) {
	dr, pending, now := demandRig()
	body := `{"source": "kueue", "pending": [{"gpus": 8, "tier": "critical"}, {"gpus": 4, "tier": "best_effort"}, {"gpus": 2}, {"gpu_model": "h100", "gpus": 8, "tier": "critical"}]}`
	if w := push(t, dr, "", "application/json", body); w.Code != 204 {
		t.Fatalf("push: %d %s", w.Code, w.Body)
	}
	if w := push(t, dr, "", "application/json", `{"source": "lsf", "pending": [{"gpus": 3, "tier": "standard"}, {"gpus": 1, "tier": "critical"}]}`); w.Code != 204 {
		t.Fatalf("push: %d %s", w.Code, w.Body)
	}
	total, _ := pending.Demand(*now)
	full := pending.Tiers(*now)
	// kueue's lines first, then lsf's: critical 16 there and 1 here.
	if want := []fleet.TierGPUs{{Tier: "critical", GPUs: 17}, {Tier: "best_effort", GPUs: 4}, {Tier: "standard", GPUs: 3}}; total != 26 || !slices.Equal(full, want) {
		t.Errorf("pending %d, by tier %v; want 26, %v", total, full, want)
	}
	st := fleet.State{PendingGPUs: total, PendingTiers: full}
	tiers := []fleet.Tier{{Name: "critical", Rank: 1}, {Name: "standard", Rank: 2, Default: true}, {Name: "best_effort", Rank: 3}}
	if by := fleet.PendingByTier(&st, tiers); !slices.Equal(by, []int{17, 5, 4}) {
		t.Errorf("by tier %v, want [17 5 4]: the line without a tier the default's", by)
	}
	*now = now.Add(11 * time.Minute)
	if got := pending.Tiers(*now); len(got) != 0 {
		t.Errorf("by tier after the pushes expired: %v", got)
	}
}

// TestScopedPushOfTiers: through the controller's cycle, a pushed line of
// demand scoped to a pool buys there only for a tier worth something:
// best-effort jobs waiting for the on-demand pool buy nothing, there or
// in the spot pool, the plan says why, and critical ones beside them are
// bought for.
func TestScopedPushOfTiers(t *testing.T) {
	od, spot := gpuPool("od", 8, 10, 5*time.Minute), gpuPool("spot", 8, 10, 5*time.Minute)
	spot.Capacity, spot.PricePerHour = fleet.Spot, spot.PricePerHour/3
	l := newLoopWith(t, false, nil, func(l *cycler, o *Options) {
		l.set.Tiers = []fleet.Tier{{Name: "critical", Rank: 1, WaitValuePerGPUHour: 500},
			{Name: "standard", Rank: 2, WaitValuePerGPUHour: 50, Default: true},
			{Name: "best_effort", Rank: 3}}
	}, od, spot)
	l.pending.Set(l.now, DemandPush{Source: "kueue", Pending: []PendingDemand{{Pool: "od", GPUs: 16, Tier: "best_effort"}}})
	plan := l.cycle(t)
	if n := plan.Counts()[planner.Launch]; n != 0 {
		t.Fatalf("launched %d nodes for best-effort demand: %v", n, plan.Actions)
	}
	if !slices.ContainsFunc(plan.Notes, func(n planner.Note) bool {
		return n.Code == planner.ReasonTierNotBought && strings.Contains(n.Text, "16 GPUs pending for pool od of tier best_effort: nothing is bought for a tier whose waiting is worth nothing")
	}) {
		t.Errorf("notes %v: want one saying the best-effort line buys nothing", plan.Notes)
	}
	l.pending.Set(l.now, DemandPush{Source: "kueue", Pending: []PendingDemand{{Pool: "od", GPUs: 16, Tier: "best_effort"}, {Pool: "od", GPUs: 8, Tier: "critical"}}})
	l.cycle(t)
	if got := l.target(t, od); got != 1 {
		t.Errorf("od's target %d, want 1 (8 critical GPUs waiting for it)", got)
	}
	if got := l.target(t, spot); got != 0 {
		t.Errorf("spot's target %d, want 0", got)
	}
}
