package usage

import (
	"cmp"
	"fmt"
	"slices"
	"time"

	"github.com/fleetcast/autoscaler/state"
)

// By is how a report groups its rows.
type By string

// The groupings of a report.
const (
	ByTeam By = "team"
	ByTier By = "tier"
	ByPool By = "pool"
	ByJob  By = "job"
)

// ParseBy reads a grouping's name.
func ParseBy(s string) (By, error) {
	switch b := By(s); b {
	case ByTeam, ByTier, ByPool, ByJob:
		return b, nil
	}
	return "", fmt.Errorf("%q: want team, tier, pool or job", s)
}

// Row is one group's line of a report.
type Row struct {
	// Group is the team, tier, pool or job the row is about; "idle" for
	// the idle capacity's row.
	Group string `json:"group"`
	// Team and Tier are a job's, on a row by job.
	Team string `json:"team,omitempty"`
	Tier string `json:"tier,omitempty"`
	// Used is what the group's jobs held; BoughtFor the free capacity
	// bought for it; IdleShare the idle capacity shared back to it in
	// proportion to its use (with ShareIdle); Idle, on the idle row, what
	// nobody used.
	Used      Amount `json:"used"`
	BoughtFor Amount `json:"bought_for"`
	IdleShare Amount `json:"idle_share"`
	Idle      Amount `json:"idle"`
	// IdleBeforeExecution and Stalled are the parts of Used its jobs held
	// allocated-idle: before their first busy reading, and after one.
	IdleBeforeExecution Amount `json:"idle_before_execution"`
	Stalled             Amount `json:"stalled"`
	// Cost is the row's total, in micro-dollars and in dollars.
	CostMicros Micros  `json:"cost_micros"`
	Cost       float64 `json:"cost_usd"`
	// Queue is the queue times of the group's jobs started in the window.
	Queue Quantiles `json:"queue"`
	// Started counts the group's jobs first seen running in the window.
	Started int `json:"jobs_started"`
	// WaitedGPUHours are the GPUs its pending jobs asked for, times how
	// long they waited, in the window.
	WaitedGPUHours float64 `json:"waited_gpu_hours"`
	// Waiting and WaitingGPUs are its jobs and GPUs pending now (a live
	// controller's report only).
	Waiting     int `json:"jobs_waiting,omitempty"`
	WaitingGPUs int `json:"gpus_waiting,omitempty"`
}

// Report is who used what over a window.
type Report struct {
	From      time.Time `json:"from"`
	To        time.Time `json:"to"`
	By        By        `json:"by"`
	ShareIdle bool      `json:"share_idle"`
	Rows      []Row     `json:"rows"`
	// Total is every row's sum: by team, tier or pool its cost is the
	// fleet's spend over the hours that start in the window; by job, the
	// whole cost of the jobs that started in it (idle and bought-for
	// time apart).
	Total Row `json:"total"`
}

// Query is what a report is asked for.
type Query struct {
	From, To time.Time
	By       By
	// ShareIdle shares each pool's idle cost back among the teams and
	// tiers that used the pool, in proportion to their use (OpenCost's
	// shareIdle); what a pool nobody used idles stays idle.
	ShareIdle bool
	// Waiting is the demand pending now, for a live report.
	Waiting []Waiting
}

// Build makes a report from the usage hours and job records of q's
// window (those starting in it); by team or tier it reads no job record
// (NeedsJobs).
func Build(hours []state.UsageHour, jobs []state.UsageJob, q Query) Report {
	if q.By == "" {
		q.By = ByTeam
	}
	r := Report{From: q.From, To: q.To, By: q.By, ShareIdle: q.ShareIdle}
	if q.By == ByJob {
		r.Rows = jobRows(jobs)
	} else {
		r.Rows = groupRows(hours, jobs, q)
	}
	for _, x := range r.Rows {
		t := &r.Total
		t.Used.Add(x.Used)
		t.BoughtFor.Add(x.BoughtFor)
		t.IdleShare.Add(x.IdleShare)
		t.Idle.Add(x.Idle)
		t.IdleBeforeExecution.Add(x.IdleBeforeExecution)
		t.Stalled.Add(x.Stalled)
		t.CostMicros += x.CostMicros
		t.Started += x.Started
		t.WaitedGPUHours += x.WaitedGPUHours
		t.Waiting += x.Waiting
		t.WaitingGPUs += x.WaitingGPUs
	}
	r.Total.Group = "total"
	r.Total.Cost = r.Total.CostMicros.Dollars()
	var all []float64
	if q.By == ByTeam || q.By == ByTier {
		for _, h := range hours {
			for _, x := range h.Queue {
				all = append(all, float64(x))
			}
		}
	} else {
		for _, j := range jobs {
			if s, ok := jobQueue(j); ok {
				all = append(all, s)
			}
		}
	}
	r.Total.Queue = QuantilesOf(all)
	return r
}

// NeedsJobs reports whether a report by by reads the job records (by
// pool and by job), or the usage hours alone (by team and tier).
func NeedsJobs(by By) bool { return by == ByPool || by == ByJob }

// jobQueue is a job record's queue time in seconds, if known.
func jobQueue(j state.UsageJob) (s float64, ok bool) {
	from := j.Submitted
	if j.Eligible.After(from) {
		from = j.Eligible
	}
	if from.IsZero() || j.Start.Before(from) {
		return 0, false
	}
	return j.Start.Sub(from).Seconds(), true
}

// jobRows are one row per job, with its whole cost.
func jobRows(jobs []state.UsageJob) []Row {
	out := make([]Row, 0, len(jobs))
	for _, j := range jobs {
		x := Row{Group: j.ID, Team: j.Team, Tier: j.Tier, Used: Amount{Micros: Micros(j.Micros), GPUHours: j.GPUHours}, Started: 1,
			IdleBeforeExecution: Amount{Micros: Micros(j.IdleBeforeMicros), GPUHours: j.IdleBeforeGPUHours},
			Stalled:             Amount{Micros: Micros(j.StalledMicros), GPUHours: j.StalledGPUHours}}
		x.CostMicros = x.Used.Micros
		x.Cost = x.CostMicros.Dollars()
		if s, ok := jobQueue(j); ok {
			x.Queue = QuantilesOf([]float64{s})
		}
		out = append(out, x)
	}
	return out
}

// groupRows sums the hours by team, tier or pool.
func groupRows(hours []state.UsageHour, jobs []state.UsageJob, q Query) []Row {
	type tk struct{ team, tier string }
	// used and idle per pool, for sharing idle back.
	usedIn := map[string]map[tk]Micros{}
	idleIn := map[string]Amount{}
	rows := map[string]*Row{}
	row := func(g string) *Row {
		x := rows[g]
		if x == nil {
			x = &Row{Group: g}
			rows[g] = x
		}
		return x
	}
	group := func(team, tier, pool string) string {
		switch q.By {
		case ByTier:
			return tier
		case ByPool:
			return pool
		}
		return team
	}
	queue := map[string][]float64{}
	for _, h := range hours {
		for _, c := range h.Charges {
			am := Amount{Micros: Micros(c.Micros), GPUHours: c.GPUHours}
			switch Kind(c.Kind) {
			case Idle:
				if q.ShareIdle {
					x := idleIn[c.Pool]
					x.Add(am)
					idleIn[c.Pool] = x
					continue
				}
				g := IdleLabel
				if q.By == ByPool {
					g = c.Pool
				}
				row(g).Idle.Add(am)
			case BoughtFor:
				row(group(h.Team, h.Tier, c.Pool)).BoughtFor.Add(am)
			case IdleBeforeExecution:
				row(group(h.Team, h.Tier, c.Pool)).IdleBeforeExecution.Add(am)
			case Stalled:
				row(group(h.Team, h.Tier, c.Pool)).Stalled.Add(am)
			default:
				row(group(h.Team, h.Tier, c.Pool)).Used.Add(am)
				if usedIn[c.Pool] == nil {
					usedIn[c.Pool] = map[tk]Micros{}
				}
				usedIn[c.Pool][tk{h.Team, h.Tier}] += am.Micros
			}
		}
		if q.By != ByPool && (h.WaitedGPUHours > 0 || h.Started > 0) {
			g := group(h.Team, h.Tier, "")
			x := row(g)
			x.WaitedGPUHours += h.WaitedGPUHours
			x.Started += h.Started
			for _, x := range h.Queue {
				queue[g] = append(queue[g], float64(x))
			}
		}
	}
	if q.ShareIdle {
		pools := make([]string, 0, len(idleIn))
		for p := range idleIn {
			pools = append(pools, p)
		}
		slices.Sort(pools)
		for _, p := range pools {
			idle := idleIn[p]
			users := make([]tk, 0, len(usedIn[p]))
			for k := range usedIn[p] {
				users = append(users, k)
			}
			slices.SortFunc(users, func(a, b tk) int { return cmp.Or(cmp.Compare(a.team, b.team), cmp.Compare(a.tier, b.tier)) })
			weights := make([]float64, len(users))
			sum := 0.0
			for i, u := range users {
				weights[i] = float64(usedIn[p][u])
				sum += weights[i]
			}
			if sum <= 0 {
				g := IdleLabel
				if q.By == ByPool {
					g = p
				}
				row(g).Idle.Add(idle)
				continue
			}
			shares := Apportion(idle.Micros, weights)
			for i, u := range users {
				row(group(u.team, u.tier, p)).IdleShare.Add(Amount{Micros: shares[i], GPUHours: idle.GPUHours * weights[i] / sum})
			}
		}
	}
	// By pool, the job records count the jobs started, and their queue
	// times; by team or tier, the hours do.
	if q.By == ByPool {
		for _, j := range jobs {
			row(j.Pool).Started++
			if s, ok := jobQueue(j); ok {
				queue[j.Pool] = append(queue[j.Pool], s)
			}
		}
	}
	for _, w := range q.Waiting {
		if q.By == ByPool {
			continue
		}
		x := row(group(w.Team, w.Tier, ""))
		x.Waiting += max(w.Jobs, 1)
		x.WaitingGPUs += w.GPUs
	}
	out := make([]Row, 0, len(rows))
	for g, x := range rows {
		x.Queue = QuantilesOf(queue[g])
		x.CostMicros = x.Used.Micros + x.BoughtFor.Micros + x.IdleShare.Micros + x.Idle.Micros
		x.Cost = x.CostMicros.Dollars()
		out = append(out, *x)
	}
	slices.SortFunc(out, func(a, b Row) int {
		// idle last; the rest by cost, then name.
		if (a.Group == IdleLabel) != (b.Group == IdleLabel) {
			if a.Group == IdleLabel {
				return 1
			}
			return -1
		}
		return cmp.Or(cmp.Compare(b.CostMicros, a.CostMicros), cmp.Compare(a.Group, b.Group))
	})
	return out
}
