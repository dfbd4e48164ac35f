package controller

import (
	"cmp"
	"slices"
	"time"

	"github.com/fleetcast/autoscaler/fleet"
	"github.com/fleetcast/autoscaler/forecast"
	"github.com/fleetcast/autoscaler/planner"
	"github.com/fleetcast/autoscaler/usage"
)

// uiPage is what the web page shows, made from the last cycle's snapshot
// and the usage books, the same figures the JSON API serves.
type uiPage struct {
	Fleet string
	// Now is when the page was made; At the last cycle (zero before the
	// first).
	Now, At time.Time
	DryRun  bool
	// Session is set when the viewer logged in (the page offers to log
	// out); Open when the page is served without a token (loopback).
	Session, Open bool
	// Problems are why the controller is not fully in charge, as
	// /readyz and /healthz say.
	Problems []string
	Plan     *uiPlan
	Pools    []uiPoolRow
	Teams    []uiTeamRow
	Charts   []uiChart
	Forecast *uiForecast
	// Cost is the usage report of the month so far, Queue of the last
	// week (uiQueueWindow).
	Cost, Queue uiUsage
}

// uiQueueWindow is the window of the queue times and allocated-idle, and
// of the long chart.
const uiQueueWindow = 7 * 24 * time.Hour

// uiPoolRow is a pool's nodes by state now.
type uiPoolRow struct {
	Name, Capacity, InstanceType string
	GPUsPerNode                  int
	// Configured is false for a pool the config no longer has (its
	// orphans').
	Configured                            bool
	Pending, Ready, Draining, Terminating int
	// GPUs are those of its nodes not terminating.
	GPUs int
}

// uiTeamRow is a team's jobs now: running (as the agents report them)
// and waiting (as the schedulers push them).
type uiTeamRow struct {
	Team                     string
	Jobs, GPUs               int
	WaitingJobs, WaitingGPUs int
}

// uiForecast is the last forecast: each level at its last step.
type uiForecast struct {
	Origin, End time.Time
	Step, Model string
	Note        string
	Levels      []uiLevelValue
}

// uiLevelValue is a forecast level's value at the last step.
type uiLevelValue struct {
	Name  string  // "p50"
	Level float64 // 0.5
	GPUs  float64
}

// uiUsage is a usage report by team, or why there is none.
type uiUsage struct {
	// Name is "month" or "week", for the page's hooks.
	Name     string
	From, To time.Time
	Err      string
	// Rows are the report's rows (the idle row last), then its total.
	Rows []uiUsageRow
}

// uiUsageRow is a usage report's row in the page's terms: dollars, and
// the GPU-hours of every kind charged to the row.
type uiUsageRow struct {
	Group string
	// Total is set on the report's total row.
	Total                        bool
	Cost, Used, BoughtFor, Idle  float64
	GPUHours                     float64
	Started                      int
	Queue                        usage.Quantiles
	IdleBeforeExecution, Stalled usage.Amount
	WaitedGPUHours               float64
	Waiting, WaitingGPUs         int
}

// newUIUsageRow is x in the page's terms; its Idle is what it was charged
// for idle capacity, its own (the idle row's) or shared back to it.
func newUIUsageRow(x usage.Row, total bool) uiUsageRow {
	return uiUsageRow{Group: x.Group, Total: total, Cost: x.Cost, Used: x.Used.Micros.Dollars(), BoughtFor: x.BoughtFor.Micros.Dollars(),
		Idle: (x.Idle.Micros + x.IdleShare.Micros).Dollars(), GPUHours: x.Used.GPUHours + x.BoughtFor.GPUHours + x.Idle.GPUHours + x.IdleShare.GPUHours,
		Started: x.Started, Queue: x.Queue, IdleBeforeExecution: x.IdleBeforeExecution, Stalled: x.Stalled,
		WaitedGPUHours: x.WaitedGPUHours, Waiting: x.Waiting, WaitingGPUs: x.WaitingGPUs}
}

// uiPlan is the last plan.
type uiPlan struct {
	*planner.Plan
	// Keep names the quantile scale-in keeps ("p97.5").
	Keep string
	// Capacity is ready, launching and draining GPUs together.
	Capacity int
}

// uiPage makes the page's figures as they stand.
func (c *Controller) uiPage(now time.Time) uiPage {
	last := c.Last()
	pg := uiPage{Fleet: c.ctl.Fleet, Now: now, At: last.At, DryRun: c.dryRun}
	for _, why := range append(c.unready(last), silentNote(last), faultNote(last)) {
		if why != "" && !(last.At.IsZero() && why == "no control cycle yet") {
			pg.Problems = append(pg.Problems, why)
		}
	}
	if p := last.Plan; p != nil {
		pg.Plan = &uiPlan{Plan: p, Keep: uiLevel(p.Quantile), Capacity: p.Capacity.ReadyGPUs + p.Capacity.LaunchingGPUs + p.Capacity.DrainingGPUs}
	}
	if last.State != nil {
		pg.Pools = uiPools(c.set.Pools, last.State.Nodes)
	}
	if f := last.Forecast; f != nil && f.Steps() > 0 {
		pg.Forecast = &uiForecast{Origin: f.Origin, End: f.End(), Step: fleet.FormatDurationExact(f.Step), Model: f.Model, Note: f.Note}
		for j, q := range f.Levels {
			if j < len(f.Values) && len(f.Values[j]) > 0 {
				pg.Forecast.Levels = append(pg.Forecast.Levels, uiLevelValue{Name: uiLevel(q), Level: q, GPUs: f.Values[j][len(f.Values[j])-1]})
			}
		}
	}
	live := c.usage.Live()
	month := time.Date(now.UTC().Year(), now.UTC().Month(), 1, 0, 0, 0, 0, time.UTC)
	pg.Cost = c.uiUsage("month", month, now, live)
	pg.Queue = c.uiUsage("week", now.Add(-uiQueueWindow), now, live)
	var running []fleet.Node
	if last.State != nil {
		running = last.State.Nodes
	}
	pg.Teams = uiTeams(running, pg.Cost.Rows)
	pg.Charts = c.uiCharts(last, live)
	return pg
}

// uiUsage is the usage report by team over [from, to), as GET /v1/usage
// answers it for those times.
func (c *Controller) uiUsage(name string, from, to time.Time, live usage.Live) uiUsage {
	u := uiUsage{Name: name, From: from, To: to}
	if !from.Before(to) {
		return u
	}
	rep, err := BuildUsageReport(c.store, usage.Query{From: from, To: to, By: usage.ByTeam, ShareIdle: c.usageSet.ShareIdle}, live)
	if err != nil {
		c.log.Error("usage report for the web page", "error", err)
		u.Err = "The usage records could not be read (the controller's log says why)."
		return u
	}
	for _, x := range rep.Rows {
		u.Rows = append(u.Rows, newUIUsageRow(x, false))
	}
	u.Rows = append(u.Rows, newUIUsageRow(rep.Total, true))
	return u
}

// uiPools counts each pool's nodes by state, the config's pools first in
// its order, then pools only nodes name (orphans'), by name.
func uiPools(pools []fleet.Pool, nodes []fleet.Node) []uiPoolRow {
	rows := make([]uiPoolRow, 0, len(pools))
	at := map[string]int{}
	for _, p := range pools {
		at[p.Name] = len(rows)
		rows = append(rows, uiPoolRow{Name: p.Name, Capacity: string(p.Capacity), InstanceType: p.InstanceType, GPUsPerNode: p.GPUsPerNode, Configured: true})
	}
	var extra []uiPoolRow
	for i := range nodes {
		n := &nodes[i]
		k, ok := at[n.Pool]
		if !ok {
			k = len(rows) + len(extra)
			at[n.Pool] = k
			extra = append(extra, uiPoolRow{Name: n.Pool})
		}
		var r *uiPoolRow
		if k < len(rows) {
			r = &rows[k]
		} else {
			r = &extra[k-len(rows)]
		}
		gpus := r.GPUsPerNode
		if !r.Configured {
			gpus = n.GPUs
		}
		switch n.State {
		case fleet.Pending:
			r.Pending++
		case fleet.Ready:
			r.Ready++
		case fleet.Draining:
			r.Draining++
		case fleet.Terminating:
			r.Terminating++
		}
		if n.State != fleet.Terminating {
			r.GPUs += gpus
		}
	}
	slices.SortFunc(extra, func(a, b uiPoolRow) int { return cmp.Compare(a.Name, b.Name) })
	return append(rows, extra...)
}

// uiTeams are the jobs running on the nodes by team (a job on several
// nodes counted once, its GPUs on each), with what each team waits for
// now (the usage report's rows), by GPUs held, then name.
func uiTeams(nodes []fleet.Node, rows []uiUsageRow) []uiTeamRow {
	by := map[string]*uiTeamRow{}
	row := func(team string) *uiTeamRow {
		r := by[team]
		if r == nil {
			r = &uiTeamRow{Team: team}
			by[team] = r
		}
		return r
	}
	seen := map[string]bool{}
	for i := range nodes {
		for _, j := range nodes[i].Jobs {
			r := row(usage.OrUnattributed(j.Team))
			r.GPUs += j.GPUs
			if key := r.Team + "\x00" + j.ID; !seen[key] {
				seen[key] = true
				r.Jobs++
			}
		}
	}
	for _, x := range rows {
		if !x.Total && (x.Waiting > 0 || x.WaitingGPUs > 0) {
			r := row(x.Group)
			r.WaitingJobs, r.WaitingGPUs = x.Waiting, x.WaitingGPUs
		}
	}
	out := make([]uiTeamRow, 0, len(by))
	for _, r := range by {
		out = append(out, *r)
	}
	slices.SortFunc(out, func(a, b uiTeamRow) int {
		return cmp.Or(cmp.Compare(b.GPUs+b.WaitingGPUs, a.GPUs+a.WaitingGPUs), cmp.Compare(a.Team, b.Team))
	})
	return out
}

// uiForecastSeries are a forecast's band (p10 to p90), its median, and
// the quantile scale-in keeps for, at each step's start.
func uiForecastSeries(f *forecast.Forecast, keep float64) (band uiBand, median, kept uiSeries) {
	at := func(vs []float64) []uiPoint {
		out := make([]uiPoint, len(vs))
		for h, v := range vs {
			out[h] = uiPoint{T: f.Origin.Add(time.Duration(h) * f.Step), V: v}
		}
		return out
	}
	band = uiBand{Class: "band", Label: "forecast p10 to p90", Lo: at(f.Quantile(0.1)), Hi: at(f.Quantile(0.9))}
	median = uiSeries{Class: "median", Label: "forecast p50", Points: at(f.Quantile(0.5))}
	kept = uiSeries{Class: "keep", Label: "forecast " + uiLevel(keep) + " (scale-in keeps for it)", Points: at(f.Quantile(keep))}
	return band, median, kept
}
