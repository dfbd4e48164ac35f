package fleet

import (
	"math"
	"time"
)

// Team is what the config says of one team (its `team "NAME"` block): its
// share of the reservation and what may be spent on burst capacity for
// it in a day. Jobs and demand carry their team's name (Job.Team,
// ScopedDemand.Team, TeamGPUs.Team); a team without a block has neither
// share nor budget.
type Team struct {
	Name string
	// Budgeted says BurstBudgetPerDay is set: without, nothing caps what
	// is bought for the team.
	Budgeted bool
	// BurstBudgetPerDay is, in dollars, what the burst capacity (on-demand
	// and spot) charged to the team may cost in a budget day (UTC
	// midnight to midnight): its jobs' GPUs there, and capacity bought for
	// it while idle, as the books of who used what charge them
	// (TeamSpend). Once its spend reaches it, nothing more is bought for
	// the team's demand beyond what its reserved share serves, until the
	// next day.
	BurstBudgetPerDay float64
	// ReservedShare is the team's share of the reserved GPUs (0 to 1; the
	// teams' shares add up to at most 1): guaranteed to its jobs, lent to
	// the others' while it leaves them idle.
	ReservedShare float64
}

// BudgetedTeams are the names of the teams with a burst budget.
func BudgetedTeams(teams []Team) []string {
	var out []string
	for i := range teams {
		if teams[i].Budgeted {
			out = append(out, teams[i].Name)
		}
	}
	return out
}

// TeamByName is the team called name in teams, nil for none.
func TeamByName(teams []Team, name string) *Team {
	for i := range teams {
		if teams[i].Name == name {
			return &teams[i]
		}
	}
	return nil
}

// ReservedGPUs is the fleet's reserved GPUs: each reserved pool's
// reservation (its max) times its GPUs per node.
func ReservedGPUs(pools []Pool) int {
	n := 0
	for i := range pools {
		if pools[i].Capacity == Reserved {
			n = SatAdd(n, SatMul(pools[i].Max, pools[i].GPUsPerNode))
		}
	}
	return n
}

// ShareGPUs is the reserved GPUs team t's share guarantees it, of
// reserved in all: its share of them, rounded down.
func (t *Team) ShareGPUs(reserved int) int {
	if t == nil || !(t.ReservedShare > 0) || reserved <= 0 {
		return 0
	}
	return int(math.Floor(t.ReservedShare*float64(reserved) + 1e-9))
}

// BudgetWindow is how far ahead a team's burst spend is counted against
// its budget: a team is over its budget once what it spent today, with
// what its jobs on burst capacity and one more node would cost for this
// long, reaches it. So nothing is bought for it, and a scheduler
// honouring the budget starts none of its jobs on burst capacity, while
// its jobs there can still checkpoint and leave within the budget.
const BudgetWindow = 10 * time.Minute

// BudgetDay is the start of the budget day that holds t: midnight UTC.
func BudgetDay(t time.Time) time.Time {
	return t.UTC().Truncate(24 * time.Hour)
}

// TeamSpend is what one team's burst capacity cost so far in the budget
// day (State.BurstSpend).
type TeamSpend struct {
	Team string `json:"team"`
	// USD is its charges on on-demand and spot pools since the day began:
	// its jobs' GPUs there and capacity bought for it while idle.
	USD float64 `json:"usd"`
}

// TeamGPUs are the GPUs one team's jobs of one tier wait for
// (State.PendingTeams).
type TeamGPUs struct {
	Team string `json:"team"`
	Tier string `json:"tier,omitempty"`
	GPUs int    `json:"gpus"`
}
