package simulate

import (
	"math"
	"time"

	"github.com/fleetcast/autoscaler/fleet"
)

// budgetBook keeps, when the config gives teams budgets (fleet.Team) and
// the jobs have teams, what each team's jobs cost on burst capacity: its
// running jobs' GPUs on on-demand and spot nodes at their price per
// GPU-hour, as the controller's books charge a team's use, brought up to
// date whenever a job starts or stops there and when the policy reads it.
// The planner reads each budget day's spend so far (fleet.State.BurstSpend)
// and the report each team's totals (TeamResult).
type budgetBook struct {
	// spec is each team's budget, by team index; nil for a team without
	// a budget. teams are the budgeted teams' indexes, and slot each
	// team's place among them plus 1 (0 for none): pendingShapes' lines.
	spec  []*fleet.Team
	teams []int32
	slot  []int32
	// rate is what each team's running jobs on burst nodes cost a second.
	rate []float64
	// spent is each team's spend in the budget day so far; burst in the
	// whole run; maxDay the most in one day; overBy the most it went past
	// its budget in a day. held says the budget held the team back today
	// (overBudget found it so), and heldDays counts such days.
	spent, burst, maxDay, overBy []float64
	held                         []bool
	heldDays                     []int
	// queued is the queued GPUs of each budgeted team's jobs, by tier
	// (one without tiers): fleet.State.PendingTeams.
	queued [][]int
	// dayEnd is when the budget day spent counts ends, and at when spent
	// was last brought up to date, in engine seconds; enforceAt when
	// enforceBudgets may next look.
	dayEnd, at, enforceAt int64
}

// newBudgetBook is the book for a run: nil unless some team of names (the
// jobs' teams, by index) has a budget.
func newBudgetBook(teams []fleet.Team, names []string, tiers int, start time.Time) *budgetBook {
	b := &budgetBook{spec: make([]*fleet.Team, len(names))}
	any := false
	b.slot = make([]int32, len(names))
	for k, name := range names {
		if t := fleet.TeamByName(teams, name); t != nil && t.Budgeted {
			b.spec[k], any = t, true
			b.teams = append(b.teams, int32(k))
			b.slot[k] = int32(len(b.teams))
		}
	}
	if !any {
		return nil
	}
	n := len(names)
	b.rate, b.spent, b.burst, b.maxDay, b.overBy = make([]float64, n), make([]float64, n), make([]float64, n), make([]float64, n), make([]float64, n)
	b.held, b.heldDays, b.queued = make([]bool, n), make([]int, n), make([][]int, n)
	for k := range b.queued {
		if b.spec[k] != nil {
			b.queued[k] = make([]int, max(tiers, 1))
		}
	}
	b.dayEnd = secs(fleet.BudgetDay(start).Add(24 * time.Hour).Sub(start))
	return b
}

// advance brings the spend up to now, closing each budget day it passes.
func (b *budgetBook) advance(now int64) {
	for b.at < now {
		end := min(now, b.dayEnd)
		dt := float64(end - b.at)
		for k, r := range b.rate {
			if r > 0 {
				b.spent[k] += r * dt
				b.burst[k] += r * dt
			}
		}
		b.at = end
		if end == b.dayEnd {
			b.closeDay()
			b.dayEnd += 24 * 3600
		}
	}
}

// closeDay counts the day's spend into each team's figures and starts
// the next day at nothing.
func (b *budgetBook) closeDay() {
	for k, s := range b.spent {
		b.maxDay[k] = max(b.maxDay[k], s)
		if t := b.spec[k]; t != nil && s > t.BurstBudgetPerDay {
			b.overBy[k] = max(b.overBy[k], s-t.BurstBudgetPerDay)
		}
		if b.held[k] {
			b.heldDays[k]++
		}
		b.spent[k], b.held[k] = 0, false
	}
}

// chargeRate adds (sign 1) or takes away (-1) what job j's run costs a
// second on the burst nodes it holds to its team's rate, the spend so far
// brought up to date first.
func (e *engine) chargeRate(j *job, sign float64) {
	b := e.budget
	if b == nil {
		return
	}
	b.advance(e.now)
	k := j.group[byTeam]
	e.onNodes(j, func(n *node, m int) {
		if p := &e.pools[n.pool].spec; p.Capacity != fleet.Reserved {
			b.rate[k] += sign * float64(m) / shareMilli * p.PricePerGPUHour() / 3600
		}
	})
	if b.rate[k] < 1e-12 {
		b.rate[k] = 0 // what rounding leaves once its last run stops
	}
}

// overBudget reports whether team k's spend today, with what its jobs on
// burst capacity cost a second and more (dollars a second) on top over
// window seconds, reaches its budget, and marks the day held if so; false
// for a team without a budget. The simulated scheduler starts a job on
// burst capacity only while the job's run there would not bring its team
// to its budget over fleet.BudgetWindow (maskFor), and asks its team's
// jobs there to leave once they would reach it over a checkpoint and a
// pass of its own (enforceBudgets), as a scheduler honouring the budget
// does; the planner, in the predictive policies, buys nothing for the
// team once one more node would.
func (e *engine) overBudget(k int32, more float64, window int64) bool {
	b := e.budget
	if b == nil || b.spec[k] == nil {
		return false
	}
	b.advance(e.now)
	if b.spent[k]+(b.rate[k]+more)*float64(window) >= b.spec[k].BurstBudgetPerDay {
		b.held[k] = true // the day held it back
		return true
	}
	return false
}

// burstRate is the most a run of gpus GPUs costs a second on burst
// capacity: at the dearest burst pool's price per GPU-hour.
func (e *engine) burstRate(gpus int) float64 {
	r := 0.0
	for i := range e.pools {
		if p := &e.pools[i].spec; p.Capacity != fleet.Reserved {
			r = max(r, p.PricePerGPUHour()/3600)
		}
	}
	return r * float64(gpus)
}

// enforceBudgets asks the jobs of the teams over their budget
// (overBudget) that run on burst capacity to checkpoint and stop, as a
// drain does (askCheckpoint: they requeue with nothing lost once their
// checkpoint is durable, to start on reserved capacity only until the
// next day). It runs at most every preemptEvery seconds and reports
// whether a job left at once.
func (e *engine) enforceBudgets() bool {
	b := e.budget
	if b == nil || e.now < b.enforceAt {
		return false
	}
	b.enforceAt = e.now + preemptEvery
	now := false
	for k := range b.spec {
		if b.rate[k] == 0 || !e.overBudget(int32(k), 0, e.ckptDur+preemptEvery) {
			continue
		}
		for _, n := range e.live {
			if n.tier == 0 || (n.state != up && n.state != draining) {
				continue
			}
			for i := 0; i < len(n.jobs); i++ {
				v := &e.jobs[n.jobs[i]]
				if int(v.group[byTeam]) != k || v.preempted || v.saveAt >= 0 || v.unresponsive {
					continue
				}
				e.st.budgetStops++
				if e.askToLeave(n.jobs[i]) {
					now = true
					i-- // it left the node's jobs
				}
			}
		}
	}
	return now
}

// queueTeam counts gpus more queued (fewer, negative) for job j's team,
// where the team has a budget (by tier) or a share of the reservation.
func (e *engine) queueTeam(j *job, gpus int) {
	if b := e.budget; b != nil && b.spec[j.group[byTeam]] != nil {
		b.queued[j.group[byTeam]][j.group[byTier]] += gpus
	}
	if s := e.shares; s != nil && (j.runsOn == 0 || j.runsOn&onReserved != 0) {
		s.queued[j.group[byTeam]] += gpus // what may run on its share
	}
}

// pendingTeams are the budgeted teams' queued GPUs by tier
// (fleet.State.PendingTeams), written over out.
func (e *engine) pendingTeams(out []fleet.TeamGPUs) []fleet.TeamGPUs {
	out = out[:0]
	b := e.budget
	if b == nil {
		return out
	}
	for k, byTier := range b.queued {
		for tier, g := range byTier {
			if g > 0 {
				out = append(out, fleet.TeamGPUs{Team: b.spec[k].Name, Tier: e.tierName(tier), GPUs: g})
			}
		}
	}
	return out
}

// burstSpend is the budgeted teams' spend so far in the budget day
// (fleet.State.BurstSpend), written over out.
func (e *engine) burstSpend(out []fleet.TeamSpend) []fleet.TeamSpend {
	out = out[:0]
	b := e.budget
	if b == nil {
		return out
	}
	b.advance(e.now)
	for k, s := range b.spent {
		if b.spec[k] != nil && s > 0 {
			out = append(out, fleet.TeamSpend{Team: b.spec[k].Name, USD: s})
		}
	}
	return out
}

// tierName is the name of tier k, "" without tiers.
func (e *engine) tierName(k int) string {
	if t := e.groups[byTier].table; t != nil && k < len(t.names) {
		return t.names[k]
	}
	return ""
}

// budgetResults adds each team's burst spend and budget to its row, the
// run's last day closed (a partial day counts as one).
func (e *engine) budgetResults(rows []TeamResult) {
	b := e.budget
	if b == nil || len(rows) != len(b.spec) {
		return
	}
	b.advance(e.now)
	b.closeDay()
	for k := range rows {
		rows[k].BurstUSD = roundCents(b.burst[k])
		rows[k].MaxDayBurstUSD = roundCents(b.maxDay[k])
		if t := b.spec[k]; t != nil {
			rows[k].BurstBudgetPerDay = &t.BurstBudgetPerDay
			rows[k].DaysHeld = b.heldDays[k]
			rows[k].MaxOverBudgetUSD = roundCents(b.overBy[k])
		}
	}
}

// roundCents is x to the cent.
func roundCents(x float64) float64 { return math.Round(x*100) / 100 }
