package config

import (
	"fmt"
	"regexp"
	"slices"
	"strings"

	"github.com/hashicorp/hcl/v2"

	"github.com/fleetcast/autoscaler/fleet"
)

// tierName is what a tier's name may be (a metric's label value).
var tierName = regexp.MustCompile(`^[A-Za-z0-9_-]{1,63}$`)

// tierBody is a `tier "NAME"` block.
type tierBody struct {
	Rank          int      `hcl:"rank"`
	WaitValue     float64  `hcl:"wait_value_per_gpu_hour"`
	CapacityTypes []string `hcl:"capacity_types,optional"`
	Default       bool     `hcl:"default,optional"`

	RankAt          hcl.Range `hcl:"rank,attr_value_range"`
	WaitValueAt     hcl.Range `hcl:"wait_value_per_gpu_hour,attr_value_range"`
	CapacityTypesAt hcl.Range `hcl:"capacity_types,attr_value_range"`
	DefaultAt       hcl.Range `hcl:"default,attr_value_range"`
}

// tierBlock is a decoded tier block and where it is.
type tierBlock struct {
	tier     fleet.Tier
	nameAt   hcl.Range
	rankAt   hcl.Range
	defRange hcl.Range
}

// decodeTier decodes one tier block: a name of letters, digits, '-' and
// '_'; a rank of 1 to fleet.MaxTiers; a wait value of 0 or more; capacity
// types each reserved, on_demand or spot, each once.
func (d *decoder) decodeTier(b *hcl.Block) tierBlock {
	var v tierBody
	d.decode(b.Body, &v)
	out := tierBlock{tier: fleet.Tier{Name: b.Labels[0]}, nameAt: b.LabelRanges[0], rankAt: v.RankAt, defRange: b.DefRange}
	if !tierName.MatchString(b.Labels[0]) {
		d.invalid(b.LabelRanges[0], "A tier's name must be 1 to 63 letters, digits, '-' or '_', got %q.", b.Labels[0])
	}
	if d.between("rank", v.Rank, 1, fleet.MaxTiers, v.RankAt) == set {
		out.tier.Rank = v.Rank
	}
	if d.check(v.WaitValueAt, v.WaitValue >= 0, "wait_value_per_gpu_hour must not be negative (what a GPU-hour of this tier's waiting costs, in dollars; 0 buys nothing for it), got %g.", v.WaitValue) == set {
		out.tier.WaitValuePerGPUHour = v.WaitValue
	}
	out.tier.Default = v.Default
	if d.state(v.CapacityTypesAt) == set {
		kinds := []string{string(fleet.Reserved), string(fleet.OnDemand), string(fleet.Spot)}
		for _, c := range v.CapacityTypes {
			switch {
			case !fleet.CapacityType(c).Valid():
				d.invalid(v.CapacityTypesAt, "Unknown capacity type %q; capacity_types lists %q, %q or %q.%s", c, fleet.Reserved, fleet.OnDemand, fleet.Spot, didYouMean(c, kinds))
				return out
			case slices.Contains(out.tier.CapacityTypes, fleet.CapacityType(c)):
				d.invalid(v.CapacityTypesAt, "capacity_types lists %q twice.", c)
				return out
			}
			out.tier.CapacityTypes = append(out.tier.CapacityTypes, fleet.CapacityType(c))
		}
		if len(out.tier.CapacityTypes) == 0 {
			d.invalid(v.CapacityTypesAt, "capacity_types must list at least one capacity type; leave it out for any.")
		}
	}
	return out
}

// checkTiers checks the tiers across blocks and returns them by rank:
// names and ranks unique, at most fleet.MaxTiers, exactly one default.
func (d *decoder) checkTiers(blocks []tierBlock) []fleet.Tier {
	if len(blocks) == 0 {
		return nil
	}
	names, ranks := map[string]tierBlock{}, map[int]tierBlock{}
	var defaults []string
	for _, b := range blocks {
		if prev, dup := names[b.tier.Name]; dup {
			d.errorf(b.nameAt, "Duplicate tier name", "A tier named %q was already defined at %s; tier names must be unique.", b.tier.Name, defPos(prev.defRange))
			continue
		}
		names[b.tier.Name] = b
		if prev, dup := ranks[b.tier.Rank]; dup && b.tier.Rank > 0 {
			d.errorf(b.rankAt, "Duplicate tier rank", "Tier %q has rank %d, as tier %q (at %s) has; each tier's rank must differ.", b.tier.Name, b.tier.Rank, prev.tier.Name, defPos(prev.defRange))
		}
		ranks[b.tier.Rank] = b
		if b.tier.Default {
			defaults = append(defaults, fmt.Sprintf("%q", b.tier.Name))
		}
	}
	switch {
	case len(blocks) > fleet.MaxTiers:
		d.errorf(blocks[fleet.MaxTiers].defRange, "Too many tiers", "A config may define at most %d tiers (each is forecast apart), got %d.", fleet.MaxTiers, len(blocks))
	case len(defaults) == 0:
		d.errorf(blocks[0].defRange, "No default tier", "One tier must be the default (default = true): the tier of demand that names none.")
	case len(defaults) > 1:
		d.errorf(blocks[0].defRange, "More than one default tier", "Only one tier may be the default, but %s are.", strings.Join(defaults, ", "))
	}
	out := make([]fleet.Tier, 0, len(blocks))
	for _, b := range blocks {
		out = append(out, b.tier)
	}
	slices.SortStableFunc(out, func(a, b fleet.Tier) int { return a.Rank - b.Rank })
	return out
}
