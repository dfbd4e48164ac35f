package controller

import (
	"slices"
	"time"

	"github.com/fleetcast/autoscaler/fleet"
	"github.com/fleetcast/autoscaler/state"
	"github.com/fleetcast/autoscaler/usage"
)

// observeBudgets adds to st, when teams have burst budgets, what the
// planner needs to hold each to its budget: each such team's pending GPUs
// by tier (fleet.State.PendingTeams, from the pushes' and the Slurm
// source's lines) and what it has spent on burst capacity today
// (fleet.State.BurstSpend, burstSpend).
func (c *Controller) observeBudgets(st *fleet.State, now time.Time) {
	teams := fleet.BudgetedTeams(c.set.Teams)
	if len(teams) == 0 {
		return
	}
	for _, w := range c.waiting(now) {
		if w.GPUs <= 0 || !slices.Contains(teams, w.Team) {
			continue
		}
		i := slices.IndexFunc(st.PendingTeams, func(l fleet.TeamGPUs) bool { return l.Team == w.Team && l.Tier == w.Tier })
		if i < 0 {
			st.PendingTeams = append(st.PendingTeams, fleet.TeamGPUs{Team: w.Team, Tier: w.Tier})
			i = len(st.PendingTeams) - 1
		}
		st.PendingTeams[i].GPUs += w.GPUs
	}
	st.BurstSpend = c.burstSpend(teams, now)
}

// burstSpend is what each of teams has spent on burst capacity in the
// budget day of now (fleet.BudgetDay), as the books of who used what
// charge it: its charges of kinds used and bought_for on pools that are
// not reserved (a pool the config no longer has counts as burst), in the
// day's hours the store holds and those the books hold open (which stand
// for the store's records of the same hours). When the store cannot be
// read, the last spend read stands, and the failure is logged.
func (c *Controller) burstSpend(teams []string, now time.Time) []fleet.TeamSpend {
	day := fleet.BudgetDay(now)
	stored, err := c.store.UsageHours(day, time.Time{})
	if err != nil {
		c.log.Warn("usage hours not read: the teams' burst spend stands as last read", "error", err)
		return c.lastSpend
	}
	open := c.usage.Open()
	hours := make(map[time.Time]bool, len(open))
	for _, h := range open {
		hours[h.Hour.UTC()] = true
	}
	by := map[string]usage.Micros{}
	add := func(h state.UsageHour) {
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
	for _, h := range stored {
		if !hours[h.Hour.UTC()] {
			add(h)
		}
	}
	for _, h := range open {
		add(h)
	}
	var out []fleet.TeamSpend
	for _, t := range teams {
		if m := by[t]; m > 0 {
			out = append(out, fleet.TeamSpend{Team: t, USD: m.Dollars()})
		}
	}
	c.lastSpend = out
	return out
}

// forTeams is holders without the teams over their burst budget (the
// plan's OverBudget): nothing a plan buys is for them.
func forTeams(holders []usage.Holder, over []string) []usage.Holder {
	if len(over) == 0 {
		return holders
	}
	return slices.DeleteFunc(holders, func(h usage.Holder) bool { return slices.Contains(over, h.Team) })
}
