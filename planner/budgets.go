package planner

import (
	"fmt"
	"math"

	"github.com/fleetcast/autoscaler/fleet"
)

// overBudget is one team that has spent its burst budget for the day
// (countBudgets), as the plan's note says it.
type overBudget struct {
	team *fleet.Team
	// spent is what it spent on burst capacity so far today, and rate
	// what its jobs there cost an hour now.
	spent, rate float64
	// pending is its pending GPUs; share the reserved GPUs its share
	// guarantees it, and free the part of them its jobs do not hold.
	pending, share, free int
	// withheld is the part of pending nothing is bought for: beyond free.
	withheld int
}

// countBudgets finds the teams over their burst budget for the day
// (fleet.Team.BurstBudgetPerDay): those whose spend today
// (State.BurstSpend), with what their jobs on burst capacity and one more
// node of the cheapest burst pool would cost over fleet.BudgetWindow,
// reaches it. It withholds from the demand the plan buys for each one's
// pending GPUs beyond what its reserved share leaves free (withheld, by
// tier): its share serves its jobs, and nothing more is bought for them
// until the next day. Its lowest-ranked tiers' GPUs are withheld first,
// as the scheduler starts its highest first on its share. The plan notes
// each such team, and lists it (Plan.OverBudget), so that nothing bought
// is charged to it.
//
// Its running jobs hold their GPUs as any job does: a scheduler honouring
// the budget has those on burst capacity checkpoint and go back to the
// queue, and once they have, their GPUs are free and their demand is
// withheld.
func (p *planner) countBudgets() {
	st := p.in.State
	if len(p.cfg.Teams) == 0 {
		return
	}
	// What each team's jobs hold on reserved nodes, at most each node's
	// GPUs (as observe counts them), and what those on burst nodes cost an
	// hour.
	onShare, rate := map[string]int{}, map[string]float64{}
	node := 0.0 // the cheapest burst node's price per hour
	for _, pp := range p.pools {
		if pp.spec.Capacity != fleet.Reserved && (node == 0 || pp.spec.PricePerHour < node) {
			node = pp.spec.PricePerHour
		}
	}
	for i := range st.Nodes {
		n := &st.Nodes[i]
		pp := p.byName[n.Pool]
		if pp == nil || n.State == fleet.Terminating {
			continue
		}
		left := pp.spec.GPUsPerNode
		for j := range n.Jobs {
			g := min(max(n.Holds(j), 0), left)
			left -= g
			team := n.Jobs[j].Team
			if pp.spec.Capacity == fleet.Reserved {
				onShare[team] += g
			} else {
				rate[team] += float64(g) * pp.spec.PricePerGPUHour()
			}
		}
	}
	var teams []*fleet.Team
	for i := range p.cfg.Teams {
		t := &p.cfg.Teams[i]
		if t.Budgeted && spentBy(st, t.Name)+(rate[t.Name]+node)*fleet.BudgetWindow.Hours() >= t.BurstBudgetPerDay {
			teams = append(teams, t)
		}
	}
	if len(teams) == 0 {
		return
	}
	reserved := fleet.ReservedGPUs(p.cfg.Pools)
	p.withheld = make([]int, max(len(p.cfg.Tiers), 1))
	for _, t := range teams {
		o := overBudget{team: t, spent: spentBy(st, t.Name), rate: rate[t.Name], share: t.ShareGPUs(reserved)}
		o.free = max(o.share-onShare[t.Name], 0)
		byTier := make([]int, len(p.withheld))
		for _, l := range st.PendingTeams {
			if l.Team == t.Name && l.GPUs > 0 {
				byTier[fleet.TierIndex(p.cfg.Tiers, l.Tier)] += l.GPUs
				o.pending += l.GPUs
			}
		}
		// A node its scheduler asks to power up for its jobs is bought
		// whatever (serveScoped): those GPUs are not withheld.
		for _, d := range st.Scoped {
			if d.Requested && d.Team == t.Name && d.GPUs > 0 {
				g := min(d.GPUs, o.pending)
				o.pending -= g
				for k := len(byTier) - 1; k >= 0 && g > 0; k-- {
					x := min(g, byTier[k])
					byTier[k] -= x
					g -= x
				}
			}
		}
		o.withheld = max(o.pending-o.free, 0)
		w := o.withheld
		for k := len(byTier) - 1; k >= 0 && w > 0; k-- {
			g := min(w, byTier[k])
			p.withheld[k] += g
			w -= g
		}
		p.overBudget = append(p.overBudget, o)
		p.plan.OverBudget = append(p.plan.OverBudget, t.Name)
		p.note(ReasonTeamOverBudget, overBudgetNote(o))
	}
}

// spentBy is what team spent on burst capacity today (State.BurstSpend).
func spentBy(st *fleet.State, team string) float64 {
	s := 0.0
	for _, t := range st.BurstSpend {
		if t.Team == team && t.USD > 0 && !math.IsInf(t.USD, 0) {
			s += t.USD
		}
	}
	return s
}

// overTeam reports whether the team called name is over its budget
// (countBudgets): nothing is bought for its scoped lines.
func (p *planner) overTeam(name string) *overBudget {
	if name == "" {
		return nil
	}
	for i := range p.overBudget {
		if p.overBudget[i].team.Name == name {
			return &p.overBudget[i]
		}
	}
	return nil
}

// withheldFor is the pending GPUs of the level's tiers withheld from the
// teams over budget (countBudgets), at most what the level provisions for
// now (pendingFor): all of them without tiers.
func (p *planner) withheldFor(lv level) int {
	if len(p.withheld) == 0 {
		return 0
	}
	if len(p.cfg.Tiers) == 0 {
		return min(p.withheld[0], p.pendingFor(lv))
	}
	n := 0
	for _, e := range lv {
		if e.tier >= 0 && e.tier < len(p.withheld) {
			n += p.withheld[e.tier]
		}
	}
	return min(n, p.pendingFor(lv))
}

// overBudgetNote is the plan's words for a team over its budget.
func overBudgetNote(o overBudget) string {
	s := fmt.Sprintf("team %s is over its burst budget of %s/day (%s spent today", o.team.Name, usd(o.team.BurstBudgetPerDay), usd(o.spent))
	if o.rate > 0 {
		s += fmt.Sprintf(", its jobs on burst capacity %s an hour", usd(o.rate))
	}
	s += ")"
	switch {
	case o.pending == 0 && o.share == 0:
		return s + ": nothing is bought for it until the next day"
	case o.pending == 0:
		return s + ": nothing is bought for it beyond its reserved share until the next day"
	case o.withheld == 0:
		return fmt.Sprintf("%s: its %d pending GPUs wait for its reserved share (%d GPUs free); nothing is bought for it beyond it until the next day", s, o.pending, o.free)
	case o.share == 0:
		return fmt.Sprintf("%s: nothing is bought for its %d pending GPUs until the next day; they run on capacity others leave idle", s, o.pending)
	}
	return fmt.Sprintf("%s: nothing is bought for %d of its %d pending GPUs beyond its reserved share (%d GPUs, %d free) until the next day", s, o.withheld, o.pending, o.share, o.free)
}

// usd is an amount of dollars as the plan's words say it: whole dollars
// with thousands separated, cents below $100.
func usd(x float64) string {
	if x < 100 {
		return fmt.Sprintf("$%.2f", x)
	}
	d := fmt.Sprintf("%.0f", x)
	for i := len(d) - 3; i > 0; i -= 3 {
		d = d[:i] + "," + d[i:]
	}
	return "$" + d
}
