package fleet

import "slices"

// Tier is a class of service (the config's `tier "NAME"` blocks): how
// much its jobs' waiting is worth, and which capacity may be bought for
// them. Jobs carry their tier's name (Job.Tier); one without a tier, or
// with a tier the config does not define, is the default tier's.
type Tier struct {
	Name string
	// Rank orders the tiers: 1 is served first. The simulated scheduler
	// starts a higher tier's queued job before a lower one's, and the
	// planner provisions a lower tier on what the higher ones leave.
	Rank int
	// WaitValuePerGPUHour is what a GPU-hour of this tier's waiting costs,
	// in dollars: the tier's own ForecastSettings.WaitValuePerGPUHour.
	// 0 buys nothing for the tier: it runs on capacity others leave idle.
	WaitValuePerGPUHour float64
	// CapacityTypes are the capacity types that may be bought for the
	// tier; empty: any.
	CapacityTypes []CapacityType
	// Default is the tier of demand without one (exactly one tier is).
	Default bool
}

// Buys reports whether capacity of type c may be bought for the tier.
func (t *Tier) Buys(c CapacityType) bool {
	return len(t.CapacityTypes) == 0 || slices.Contains(t.CapacityTypes, c)
}

// MaxTiers bounds the tiers a config may define: each is forecast apart.
const MaxTiers = 8

// TierIndex is the index in tiers (by rank, as Settings.Tiers holds them)
// of the tier called name: the default tier's when no tier is called
// that (a config always has one; without, the first), and 0 when tiers is
// empty.
func TierIndex(tiers []Tier, name string) int {
	def := 0
	for i := range tiers {
		if tiers[i].Name == name {
			return i
		}
		if tiers[i].Default {
			def = i
		}
	}
	return def
}

// TierQuantile is the demand quantile the planner provisions pool p for
// on behalf of tier t: ForecastSettings.QuantileFor with the tier's wait
// value, 0 when the tier may not buy the pool's capacity type or its
// waiting is worth nothing (no level: nothing is bought for it).
func (f *ForecastSettings) TierQuantile(t *Tier, p *Pool) float64 {
	if !t.Buys(p.Capacity) || !(t.WaitValuePerGPUHour > 0) {
		return 0
	}
	g := *f
	g.WaitValuePerGPUHour = t.WaitValuePerGPUHour
	return g.QuantileFor(p)
}

// TierGPUs are GPUs of one tier (State.PendingTiers).
type TierGPUs struct {
	Tier string `json:"tier"`
	GPUs int    `json:"gpus"`
}

// PendingByTier splits st's pending GPUs among tiers (indexed as tiers,
// by rank): each line of st.PendingTiers to its tier (TierIndex), at most
// what is pending in all, and the rest to the default tier. Nil without
// tiers.
func PendingByTier(st *State, tiers []Tier) []int {
	if len(tiers) == 0 {
		return nil
	}
	out := make([]int, len(tiers))
	left := max(st.PendingGPUs, 0)
	for _, l := range st.PendingTiers {
		g := min(max(l.GPUs, 0), left)
		out[TierIndex(tiers, l.Tier)] += g
		left -= g
	}
	out[TierIndex(tiers, "")] += left
	return out
}
