package config

import (
	"math"

	"github.com/hashicorp/hcl/v2"

	"github.com/fleetcast/autoscaler/fleet"
)

// teamBody is a `team "NAME"` block.
type teamBody struct {
	Budget float64 `hcl:"burst_budget_per_day,optional"`
	Share  float64 `hcl:"reserved_share,optional"`

	BudgetAt hcl.Range `hcl:"burst_budget_per_day,attr_value_range"`
	ShareAt  hcl.Range `hcl:"reserved_share,attr_value_range"`
}

// teamBlock is a decoded team block and where it is.
type teamBlock struct {
	team     fleet.Team
	nameAt   hcl.Range
	shareAt  hcl.Range
	defRange hcl.Range
}

// decodeTeam decodes one team block: a name as a job's team label
// (fleet.ValidLabel); a budget of 0 or more dollars a day; a share of the
// reservation of 0 to 1.
func (d *decoder) decodeTeam(b *hcl.Block) teamBlock {
	var v teamBody
	d.decode(b.Body, &v)
	out := teamBlock{team: fleet.Team{Name: b.Labels[0]}, nameAt: b.LabelRanges[0], shareAt: v.ShareAt, defRange: b.DefRange}
	if out.shareAt.Filename == "" {
		out.shareAt = b.DefRange
	}
	if why := fleet.ValidLabel(b.Labels[0]); why != "" || b.Labels[0] == "" {
		if why == "" {
			why = "empty"
		}
		d.invalid(b.LabelRanges[0], "A team's name is its jobs' team label, 1 to %d letters, digits and ._-:@+: %s.", fleet.MaxLabelLen, why)
	}
	if d.check(v.BudgetAt, v.Budget >= 0 && !math.IsInf(v.Budget, 0), "burst_budget_per_day must be 0 or more dollars (what burst capacity charged to the team may cost in a day; 0 buys nothing for it beyond its reserved share), got %g.", v.Budget) == set {
		out.team.Budgeted, out.team.BurstBudgetPerDay = true, v.Budget
	}
	if d.check(v.ShareAt, v.Share >= 0 && v.Share <= 1, "reserved_share must be 0 to 1 (the team's share of the reserved GPUs), got %g.", v.Share) == set {
		out.team.ReservedShare = v.Share
	}
	return out
}

// checkTeams checks the teams across blocks and returns them in the
// config's order: names unique, at most maxTeams (the teams the books of
// who used what tell apart), shares adding up to at most 1.
func (d *decoder) checkTeams(blocks []teamBlock, maxTeams int) []fleet.Team {
	if len(blocks) == 0 {
		return nil
	}
	names := map[string]teamBlock{}
	out := make([]fleet.Team, 0, len(blocks))
	share := 0.0
	for _, b := range blocks {
		if prev, dup := names[b.team.Name]; dup {
			d.errorf(b.nameAt, "Duplicate team name", "A team named %q was already defined at %s; team names must be unique.", b.team.Name, defPos(prev.defRange))
			continue
		}
		names[b.team.Name] = b
		share += b.team.ReservedShare
		if share > 1+1e-9 {
			d.errorf(b.shareAt, "Reserved shares over 1", "The teams' reserved shares add up to %g with team %q's; they may add up to at most 1 (the whole reservation).", share, b.team.Name)
			share = math.Inf(-1) // said once
		}
		out = append(out, b.team)
	}
	if len(blocks) > maxTeams {
		d.errorf(blocks[maxTeams].defRange, "Too many teams", "A config may define at most usage.max_teams (%d) teams: past it, the books of who used what fold teams into \"other\" and could not count a budget; got %d.", maxTeams, len(blocks))
	}
	return out
}
