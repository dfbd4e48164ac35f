package controller

import (
	"net/http"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/fleetcast/autoscaler/fleet"
	"github.com/fleetcast/autoscaler/loop"
	"github.com/fleetcast/autoscaler/planner"
	"github.com/fleetcast/autoscaler/state"
	"github.com/fleetcast/autoscaler/usage"
)

// UsagePattern is the route of the report of who used what.
const UsagePattern = "GET /v1/usage"

// waiting is the demand pending now by team and tier: the pushes' and
// the Slurm source's.
func (c *Controller) waiting(now time.Time) []usage.Waiting {
	w := c.pending.Waiting(now)
	if c.slurm != nil {
		w = append(w, c.slurm.Waiting(now)...)
	}
	return w
}

// keepUsage charges the interval since the last cycle to who used the
// fleet (usage.Accountant), records the purchases of the cycle's launches
// for the teams they were made for, and writes what changed to the store
// (not in a dry run), pruning it by its retentions once an hour.
func (c *Controller) keepUsage(now time.Time, r *loop.CycleResult) {
	if c.usageOff {
		return
	}
	waiting := c.waiting(now)
	flush := c.usage.Observe(usage.SnapshotOf(r.State, c.set.Pools, waiting))
	for i, a := range r.Plan.Actions {
		if a.Kind != planner.Launch || i >= len(r.Outcomes) || r.Outcomes[i].Result != loop.Done {
			continue
		}
		p := c.set.Pool(a.Pool)
		if p == nil || p.Capacity == fleet.Reserved {
			continue // a reservation is paid for anyway: bought for nobody
		}
		var teams []usage.Holder
		switch a.Code {
		case planner.ReasonDemandNow, planner.ReasonScopedDemand:
			teams = usage.ForPending(waiting, p)
		case planner.ReasonForecast:
			teams = c.usage.ForForecast()
		}
		teams = forTeams(teams, r.Plan.OverBudget)
		c.usage.Bought(a.Pool, a.Count, teams, now.Add(max(p.ProvisionTimeout, c.ctl.Interval)))
	}
	if c.dryRun {
		return
	}
	c.writeUsage(flush)
	if now.Sub(c.usagePrunedAt) >= time.Hour {
		c.usagePrunedAt = now
		if n, err := c.store.PruneUsage(now.Add(-c.usageSet.HourRetention), now.Add(-c.usageSet.JobRetention)); err != nil {
			c.log.Warn("usage not pruned", "error", err)
		} else if n > 0 {
			c.log.Debug("usage pruned", "records", n)
		}
	}
}

// flushUsage writes the books of who used what as they stand (the hours
// in progress and the running jobs' records), as a stopping controller
// does, so that the next one restores them whole.
func (c *Controller) flushUsage() {
	if c.dryRun || c.usageOff {
		return
	}
	l := c.usage.Live()
	c.writeUsage(usage.Flush{Hours: l.Hours, Jobs: l.Running})
}

// writeUsage writes what the books changed, with what an earlier write
// that failed left (c.unwritten, kept until a write succeeds: an hour
// the books closed is in no other place).
func (c *Controller) writeUsage(f usage.Flush) {
	f = c.unwritten.Merge(f)
	if len(f.Hours) == 0 && len(f.Jobs) == 0 {
		return
	}
	if err := c.store.PutUsage(f.Hours, f.Jobs); err != nil {
		c.log.Warn("usage not recorded; kept to write with the next", "error", err, "hours", len(f.Hours), "jobs", len(f.Jobs))
		c.unwritten = f
		return
	}
	c.unwritten = usage.Flush{}
}

// restoreUsage takes back the hour in progress and the jobs running, as
// the store kept them, so that a restart goes on from them.
func (c *Controller) restoreUsage(now time.Time) error {
	hours, err := c.store.UsageHours(now.UTC().Truncate(time.Hour), time.Time{})
	if err != nil {
		return err
	}
	jobs, err := c.store.UsageJobs(now.Add(-c.usageSet.JobRetention), time.Time{})
	if err != nil {
		return err
	}
	c.usage.Restore(hours, jobs)
	return nil
}

// UsageReport is the report of who used what over [from, to), by team,
// tier, pool or job, from the store's records and the books as they
// stand now.
func (c *Controller) UsageReport(q usage.Query) (usage.Report, error) {
	return BuildUsageReport(c.store, q, c.usage.Live())
}

// BuildUsageReport is the report of who used what over q's window from
// records (a state directory's, or a live controller's), and what a live
// controller's books say beyond them (live: the hours in progress, the
// running jobs and the demand waiting; the zero Live for a stopped
// controller's records). The store's records of an hour in progress and
// of a running job trail the books by up to a few cycles.
func BuildUsageReport(r interface {
	UsageHours(from, to time.Time) ([]state.UsageHour, error)
	UsageJobs(from, to time.Time) ([]state.UsageJob, error)
}, q usage.Query, live usage.Live) (usage.Report, error) {
	hours, err := r.UsageHours(q.From, q.To)
	if err != nil {
		return usage.Report{}, err
	}
	var jobs []state.UsageJob
	if usage.NeedsJobs(q.By) {
		if jobs, err = r.UsageJobs(q.From, q.To); err != nil {
			return usage.Report{}, err
		}
	}
	if len(live.Hours) > 0 {
		open := map[time.Time]bool{}
		for _, h := range live.Hours {
			open[h.Hour.UTC()] = true
		}
		kept := hours[:0]
		for _, h := range hours {
			if !open[h.Hour.UTC()] {
				kept = append(kept, h)
			}
		}
		hours = kept
		for _, h := range live.Hours {
			if !h.Hour.Before(q.From) && h.Hour.Before(q.To) {
				hours = append(hours, h)
			}
		}
	}
	if len(live.Running) > 0 {
		byID := make(map[string]state.UsageJob, len(live.Running))
		for _, j := range live.Running {
			byID[j.ID] = j
		}
		for i := range jobs {
			if j, ok := byID[jobs[i].ID]; ok && j.Start.Equal(jobs[i].Start) {
				jobs[i] = j
			}
		}
	}
	q.Waiting = live.Waiting
	return usage.Build(hours, jobs, q), nil
}

// serveUsage answers GET /v1/usage?from=&to=&by=&share_idle=: the report
// of who used what, as JSON. from and to are RFC 3339 times (the last 30
// days to now when left out); by is team (default), tier, pool or job;
// share_idle true or false (the usage block's share_idle when left out).
func (c *Controller) serveUsage(w http.ResponseWriter, r *http.Request) {
	q, err := ParseUsageQuery(r.URL.Query().Get, c.now(), c.usageSet.ShareIdle)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	rep, err := c.UsageReport(q)
	if err != nil {
		c.log.Error("usage report", "error", err)
		http.Error(w, "reading the usage records failed", http.StatusInternalServerError)
		return
	}
	writeJSON(w, rep)
}

// DefaultUsageWindow is the window a usage report covers when not told.
const DefaultUsageWindow = 30 * 24 * time.Hour

// ParseUsageQuery reads a usage report's query from its parameters
// (from, to, by, share_idle), each optional, naming the one that is bad.
func ParseUsageQuery(get func(string) string, now time.Time, shareIdle bool) (usage.Query, error) {
	q := usage.Query{To: now, By: usage.ByTeam, ShareIdle: shareIdle}
	if v := get("to"); v != "" {
		t, err := time.Parse(time.RFC3339, v)
		if err != nil {
			return q, &paramError{"to", v, "an RFC 3339 time such as 2026-12-01T00:00:00Z"}
		}
		q.To = t
	}
	q.From = q.To.Add(-DefaultUsageWindow)
	if v := get("from"); v != "" {
		t, err := time.Parse(time.RFC3339, v)
		if err != nil {
			return q, &paramError{"from", v, "an RFC 3339 time such as 2026-11-01T00:00:00Z"}
		}
		q.From = t
	}
	if !q.From.Before(q.To) {
		return q, &paramError{"from", q.From.Format(time.RFC3339), "a time before to (" + q.To.Format(time.RFC3339) + ")"}
	}
	if v := get("by"); v != "" {
		by, err := usage.ParseBy(v)
		if err != nil {
			return q, &paramError{"by", v, "team, tier, pool or job"}
		}
		q.By = by
	}
	if v := get("share_idle"); v != "" {
		b, err := strconv.ParseBool(v)
		if err != nil {
			return q, &paramError{"share_idle", v, "true or false"}
		}
		q.ShareIdle = b
	}
	return q, nil
}

// paramError is a bad query parameter.
type paramError struct{ name, value, want string }

func (e *paramError) Error() string {
	return e.name + ": " + strconv.Quote(e.value) + ": want " + e.want
}

// The usage metrics, read from the Accountant's totals at each scrape.
// Their labels are bounded: teams and tiers by the usage block's caps
// (the rest "other"), pools by the config ("orphaned" for pools gone).
var (
	descUsageCost = prometheus.NewDesc("fleetcast_usage_cost_dollars_total",
		"What the fleet cost since the controller started, by who it is charged to: kind used (GPUs held by a team's jobs), bought_for (free GPUs of capacity bought for a team's demand, before its first job) or idle (team and tier \"idle\").",
		[]string{"team", "tier", "pool", "kind"}, nil)
	descUsageGPUHours = prometheus.NewDesc("fleetcast_usage_gpu_hours_total",
		"GPU-hours the fleet held since the controller started, by who they are charged to (as fleetcast_usage_cost_dollars_total).",
		[]string{"team", "tier", "pool", "kind"}, nil)
	descUsageAllocatedIdle = prometheus.NewDesc("fleetcast_usage_allocated_idle_dollars_total",
		"The part of fleetcast_usage_cost_dollars_total{kind=\"used\"} whose GPUs were allocated-idle (every GPU a job held under the usage block's idle_threshold for at least its idle_window), since the controller started: kind idle_before_execution (before the job's first busy reading) or stalled (after one).",
		[]string{"team", "tier", "pool", "kind"}, nil)
	descUsageAllocatedIdleHours = prometheus.NewDesc("fleetcast_usage_allocated_idle_gpu_hours_total",
		"GPU-hours allocated-idle since the controller started (as fleetcast_usage_allocated_idle_dollars_total).",
		[]string{"team", "tier", "pool", "kind"}, nil)
	descUsageWaited = prometheus.NewDesc("fleetcast_usage_waited_gpu_hours_total",
		"GPUs asked for by pending jobs times how long they waited, since the controller started, by team and tier.",
		[]string{"team", "tier"}, nil)
	descQueueSeconds = prometheus.NewDesc("fleetcast_job_queue_seconds",
		"Queue time of the jobs seen starting (start less the later of submission and eligibility, where a scheduler or the agent's registration says them), by team and tier.",
		[]string{"team", "tier"}, nil)
	descJobsWaiting = prometheus.NewDesc("fleetcast_jobs_waiting",
		"Jobs pending now (a pushed line counts its jobs, or 1), by team and tier.", []string{"team", "tier"}, nil)
	descGPUsWaiting = prometheus.NewDesc("fleetcast_gpus_waiting",
		"GPUs pending jobs ask for now, by team and tier.", []string{"team", "tier"}, nil)
)

// usageCollector exports the Accountant's totals.
type usageCollector struct{ a *usage.Accountant }

func (usageCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descUsageCost, descUsageGPUHours, descUsageAllocatedIdle, descUsageAllocatedIdleHours, descUsageWaited, descQueueSeconds, descJobsWaiting, descGPUsWaiting} {
		ch <- d
	}
}

func (u usageCollector) Collect(ch chan<- prometheus.Metric) {
	t := u.a.Totals()
	for k, am := range t.Charges {
		cost, hours := descUsageCost, descUsageGPUHours
		if k.Kind.Part() {
			cost, hours = descUsageAllocatedIdle, descUsageAllocatedIdleHours
		}
		ch <- prometheus.MustNewConstMetric(cost, prometheus.CounterValue, am.Micros.Dollars(), k.Team, k.Tier, k.Pool, string(k.Kind))
		ch <- prometheus.MustNewConstMetric(hours, prometheus.CounterValue, am.GPUHours, k.Team, k.Tier, k.Pool, string(k.Kind))
	}
	for k, v := range t.Waited {
		ch <- prometheus.MustNewConstMetric(descUsageWaited, prometheus.CounterValue, v, k.Team, k.Tier)
	}
	for k, h := range t.Queue {
		buckets := make(map[float64]uint64, len(usage.QueueBuckets))
		cum := uint64(0)
		for i, b := range usage.QueueBuckets {
			cum += uint64(h.Counts[i])
			buckets[b] = cum
		}
		ch <- prometheus.MustNewConstHistogram(descQueueSeconds, uint64(h.N), h.Sum, buckets, k.Team, k.Tier)
	}
	for _, w := range t.Waiting {
		ch <- prometheus.MustNewConstMetric(descJobsWaiting, prometheus.GaugeValue, float64(w.Jobs), w.Team, w.Tier)
		ch <- prometheus.MustNewConstMetric(descGPUsWaiting, prometheus.GaugeValue, float64(w.GPUs), w.Team, w.Tier)
	}
}
