package simulate

import (
	"fmt"
	"hash/fnv"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/fleetcast/autoscaler/fleet"
	"github.com/fleetcast/autoscaler/planner"
	"github.com/fleetcast/autoscaler/trace"
)

// TierShare is the share of the jobs without a tier that Options.LabelTiers
// gives one tier.
type TierShare struct {
	Tier  string  `json:"tier"`
	Share float64 `json:"share"`
}

// DefaultLabelTiers is the labelling of jobs without a tier that the
// examples' tiers are measured with: 20% critical, 50% standard, 30%
// best_effort.
var DefaultLabelTiers = []TierShare{{"critical", 0.2}, {"standard", 0.5}, {"best_effort", 0.3}}

// ParseLabelTiers reads "critical=0.2,standard=0.5,best_effort=0.3": each
// tier's share of the jobs without a tier, as LabelTiers takes them.
func ParseLabelTiers(text string) ([]TierShare, error) {
	var out []TierShare
	for _, part := range strings.Split(text, ",") {
		name, share, ok := strings.Cut(strings.TrimSpace(part), "=")
		if !ok {
			return nil, fmt.Errorf("%q: want TIER=SHARE, such as critical=0.2", part)
		}
		v, err := strconv.ParseFloat(share, 64)
		if err != nil {
			return nil, fmt.Errorf("%q: the share %q is not a number", part, share)
		}
		out = append(out, TierShare{Tier: name, Share: v})
	}
	return out, nil
}

// checkLabelTiers checks Options.LabelTiers against the config's tiers:
// each names one of them, once, with a share above 0, and the shares add
// up to 1.
func checkLabelTiers(label []TierShare, tiers []fleet.Tier) error {
	if len(label) == 0 {
		return nil
	}
	if len(tiers) == 0 {
		return fmt.Errorf("simulate: label tiers: the config defines no tier blocks to label jobs with")
	}
	sum, seen := 0.0, map[string]bool{}
	for _, s := range label {
		switch {
		case seen[s.Tier]:
			return fmt.Errorf("simulate: label tiers: %q is given twice", s.Tier)
		case !(s.Share > 0 && s.Share <= 1):
			return fmt.Errorf("simulate: label tiers: %q's share %v: want above 0, at most 1", s.Tier, s.Share)
		}
		seen[s.Tier] = true
		found := false
		for i := range tiers {
			found = found || tiers[i].Name == s.Tier
		}
		if !found {
			names := make([]string, len(tiers))
			for i := range tiers {
				names[i] = tiers[i].Name
			}
			return fmt.Errorf("simulate: label tiers: the config has no tier %q (it has %s)", s.Tier, strings.Join(names, ", "))
		}
		sum += s.Share
	}
	if math.Abs(sum-1) > 1e-9 {
		return fmt.Errorf("simulate: label tiers: the shares add up to %v, want 1", sum)
	}
	return nil
}

// LabelTier is the tier label gives the job with this ID: u, uniform in
// [0, 1), is the top 53 bits of splitmix64(seed XOR FNV-1a-64("tier:" +
// id)) over 2^53, and the tier the first whose running sum of shares
// exceeds u (the last, whatever rounding leaves).
func LabelTier(label []TierShare, seed int64, id string) string {
	f := fnv.New64a()
	f.Write([]byte("tier:" + id)) //nolint:errcheck // a hash does not fail
	u := float64(splitmix64(uint64(seed)^f.Sum64())>>11) / (1 << 53)
	sum := 0.0
	for _, s := range label {
		if sum += s.Share; u < sum {
			return s.Tier
		}
	}
	return label[len(label)-1].Tier
}

// newTierTable is the tier of each of tr's jobs, by rank (names are the
// tiers' names in rank order): its own, else with label one drawn from
// its ID and the seed (LabelTier), else the default tier; a tier the
// config does not define is the default tier too (fleet.TierIndex). It is
// nil without tiers.
func newTierTable(tr *trace.Trace, tiers []fleet.Tier, label []TierShare, seed int64) *teamTable {
	if len(tiers) == 0 {
		return nil
	}
	t := &teamTable{names: make([]string, len(tiers)), of: make([]int32, len(tr.Jobs))}
	for i := range tiers {
		t.names[i] = tiers[i].Name
	}
	for i := range tr.Jobs {
		name := tr.Jobs[i].Tier
		if name == "" && len(label) > 0 {
			name = LabelTier(label, seed, tr.Jobs[i].ID)
		}
		t.of[i] = int32(fleet.TierIndex(tiers, name))
	}
	return t
}

// asTiers makes split rows (splitTeams) tiers' rows: the name is a tier's.
func asTiers(rows []TeamResult) []TeamResult {
	for i := range rows {
		rows[i].Tier, rows[i].Team = rows[i].Team, ""
	}
	return rows
}

// boughtFor reports whether the reactive policies buy capacity for tier
// t's queued jobs: its waiting is worth something (Cluster Autoscaler's
// expendable-pods-priority-cutoff leaves the others' pods out), and it
// runs on on-demand or spot capacity, which they buy.
func boughtFor(t *fleet.Tier) bool {
	m := runsOn(t)
	return !planner.Preemptible(t) && (m == 0 || m&(onDemand|onSpot) != 0)
}

// queuedBought is the queued GPUs the reactive policies buy for: all of
// them without tiers, else those of the tiers they buy for (boughtFor).
// Shares of one GPU count as the GPUs they need (shareQueue.packed); the
// jobs of some GPU types only are bought for apart (typedBought), in the
// pools of their types.
func (e *engine) queuedBought() int {
	if e.queuedTier == nil {
		return e.queuedGPUs - e.queuedShares + e.shareQ[0].packed() - e.typedWhole(-1)
	}
	n := 0
	for k, g := range e.queuedTier {
		if e.buysFor[k] {
			n += g + e.shareQ[k].packed() - e.typedWhole(k)
		}
	}
	return n
}

// sharesBought is the GPUs the queued shares of one GPU of any type need
// (packed) that the reactive policies buy for (queuedBought).
func (e *engine) sharesBought() int {
	n := 0
	for k := range e.shareQ {
		if e.buysFor == nil || e.buysFor[k] {
			n += e.shareQ[k].packed()
		}
	}
	return n
}

// checkTiersRun refuses a run in which a tier that has jobs runs on
// capacity types no pool of the config has: its jobs could never run.
func checkTiersRun(set *fleet.Settings, opt Options) error {
	if opt.tiers == nil || opt.Untiered {
		return nil
	}
	jobs := make([]int, len(opt.tiers.names))
	for _, k := range opt.tiers.of {
		jobs[k]++
	}
	for k := range set.Tiers {
		m := runsOn(&set.Tiers[k])
		if m == 0 || jobs[k] == 0 || slices.ContainsFunc(set.Pools, func(p fleet.Pool) bool { return kindBit(p.Capacity)&m != 0 }) {
			continue
		}
		kinds := make([]string, len(set.Tiers[k].CapacityTypes))
		for i, c := range set.Tiers[k].CapacityTypes {
			kinds[i] = string(c)
		}
		return fmt.Errorf("simulate: tier %q runs on %s capacity, which no pool of the config is: its %d job(s) could never run", set.Tiers[k].Name, strings.Join(kinds, " or "), jobs[k])
	}
	return nil
}
