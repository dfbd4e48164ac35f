package controller

import (
	"maps"
	"slices"
	"time"

	"github.com/fleetcast/autoscaler/fleet"
	"github.com/fleetcast/autoscaler/state"
	"github.com/fleetcast/autoscaler/usage"
)

// teamNames are the names of the config's teams: the books of who used
// what keep each under its own name, whatever other teams come first.
func teamNames(teams []fleet.Team) []string {
	out := make([]string, len(teams))
	for i := range teams {
		out[i] = teams[i].Name
	}
	return out
}

// observeBudgets adds to st, when teams have burst budgets, what the
// planner needs to hold each to its budget: each such team's pending GPUs
// by tier (fleet.State.PendingTeams: the pushes' and the Slurm source's
// lines, as PendingGPUs counts them) and what it has spent on burst
// capacity today (fleet.State.BurstSpend, burstSpend).
func (c *Controller) observeBudgets(st *fleet.State, now time.Time) {
	teams := fleet.BudgetedTeams(c.set.Teams)
	if len(teams) == 0 {
		return
	}
	st.PendingTeams = c.pending.Teams(now)
	st.BurstSpend = c.burstSpend(teams, now)
}

// burstSpend is what each of teams has spent on burst capacity in the
// budget day of now (fleet.BudgetDay), as the books of who used what
// charge it: its charges of kinds used and bought_for on pools that are
// not reserved (a pool the config no longer has counts as burst), in the
// day's hours the store holds and those the books hold open (which stand
// for the store's records of the same hours). The hours closed and
// written before the oldest open one are summed once (spendCache): a
// closed hour does not change. When the store cannot be read, the last
// spend read today stands (none on a new day), and the failure is logged.
func (c *Controller) burstSpend(teams []string, now time.Time) []fleet.TeamSpend {
	day := fleet.BudgetDay(now)
	open := c.usage.Open()
	hours := make(map[time.Time]bool, len(open))
	upto := now.UTC().Truncate(time.Hour)
	earlier := func(t time.Time) {
		if t.Before(upto) {
			upto = t
		}
	}
	for _, h := range open {
		hours[h.Hour.UTC()] = true
		earlier(h.Hour.UTC())
	}
	for _, h := range c.unwritten.Hours {
		earlier(h.Hour.UTC()) // not in the store yet
	}
	add := func(by map[string]usage.Micros, h state.UsageHour) {
		if h.Hour.Before(day) || !slices.Contains(teams, h.Team) {
			return
		}
		for _, ch := range h.Charges {
			if ch.Kind != string(usage.Used) && ch.Kind != string(usage.BoughtFor) {
				continue
			}
			if p := c.set.Pool(ch.Pool); p != nil && p.Capacity == fleet.Reserved {
				continue
			}
			by[h.Team] += usage.Micros(ch.Micros)
		}
	}
	sc := &c.spendCache
	if !sc.day.Equal(day) {
		*sc = spendCache{day: day, through: day, by: map[string]usage.Micros{}}
	}
	if sc.through.Before(upto) {
		closed, err := c.store.UsageHours(sc.through, upto)
		if err != nil {
			return c.spendNotRead(day, err)
		}
		for _, h := range closed {
			add(sc.by, h)
		}
		sc.through = upto
	}
	stored, err := c.store.UsageHours(sc.through, time.Time{})
	if err != nil {
		return c.spendNotRead(day, err)
	}
	by := maps.Clone(sc.by)
	for _, h := range stored {
		if !hours[h.Hour.UTC()] {
			add(by, h)
		}
	}
	for _, h := range open {
		add(by, h)
	}
	var out []fleet.TeamSpend
	for _, t := range teams {
		if m := by[t]; m > 0 {
			out = append(out, fleet.TeamSpend{Team: t, USD: m.Dollars()})
		}
	}
	c.lastSpend, c.lastSpendDay = out, day
	return out
}

// spendCache is the teams' burst spend in the budget day's hours before
// through, all closed and written (burstSpend).
type spendCache struct {
	day, through time.Time
	by           map[string]usage.Micros
}

// spendNotRead is burstSpend when the store cannot be read: the last
// spend read today, none on a new day; it logs why.
func (c *Controller) spendNotRead(day time.Time, err error) []fleet.TeamSpend {
	c.log.Warn("usage hours not read: the teams' burst spend today stands as last read", "error", err)
	if !c.lastSpendDay.Equal(day) {
		return nil // read yesterday: today's is not known
	}
	return c.lastSpend
}

// forTeams is holders without the teams over their burst budget (the
// plan's OverBudget): nothing a plan buys is for them.
func forTeams(holders []usage.Holder, over []string) []usage.Holder {
	if len(over) == 0 {
		return holders
	}
	return slices.DeleteFunc(holders, func(h usage.Holder) bool { return slices.Contains(over, h.Team) })
}
