package controller

import (
	"slices"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/fleetcast/autoscaler/fleet"
	"github.com/fleetcast/autoscaler/loop"
	"github.com/fleetcast/autoscaler/planner"
)

// metrics are the controller's own counters, in a registry of its own with
// the Go runtime's and the process's collectors; the fleet's gauges are
// read from the last snapshot at each scrape (snapshotCollector).
//
// Every label's values come from a small fixed set of words or are a
// configured pool's name: never a number (a quantile is a sample, not a
// label) nor a name read from the clouds (an orphan's old pool), which
// would make a new series whenever a price or a tag changes.
type metrics struct {
	reg            *prometheus.Registry
	actions        *prometheus.CounterVec
	capacityErrors *prometheus.CounterVec
	describeErrors *prometheus.CounterVec
	// orphanActions counts the actions on orphans (instances of pools the
	// config no longer has), which no configured pool names.
	orphanActions *prometheus.CounterVec
	// demandSourceErrors counts failed readings of the demand source.
	demandSourceErrors prometheus.Counter
	planSeconds        prometheus.Histogram
	drainSeconds       prometheus.Histogram
	// credentialReplacements counts the good node credentials operators
	// replaced.
	credentialReplacements prometheus.Counter
	// workLost counts the work, in GPU-hours, that jobs had not saved on
	// nodes that left their clouds without this controller terminating
	// them (see forgetGone).
	workLost prometheus.Counter
}

func newMetrics() *metrics {
	m := &metrics{
		reg: prometheus.NewRegistry(),
		actions: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "fleetcast_actions_total",
			Help: "Actions carried out in the configured pools, by kind, pool and result (ok, error, or refused: a launch the cloud refused for capacity or quota); a launch of several nodes is one action. Actions on orphans are in fleetcast_orphan_actions_total."}, []string{"kind", "pool", "result"}),
		capacityErrors: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "fleetcast_capacity_errors_total",
			Help: "Launches the cloud refused (capacity, quota, a group it is changing, a bad request or a missing group), or took and then failed to make for capacity or quota (a managed instance group's stockout), which back the pool off, by pool."}, []string{"pool"}),
		describeErrors: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "fleetcast_describe_errors_total",
			Help: "Cycles in which a pool's group could not be read (the pool is then left as it is), by pool."}, []string{"pool"}),
		orphanActions: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "fleetcast_orphan_actions_total",
			Help: "Actions carried out on orphans (this fleet's instances of pools the config no longer has, reaped once idle), by kind and result (ok or error); their IDs and old pools are in GET /v1/plan's orphans."}, []string{"kind", "result"}),
		demandSourceErrors: prometheus.NewCounter(prometheus.CounterOpts{Name: "fleetcast_demand_source_errors_total",
			Help: "Failed readings of the demand source (the Prometheus query); the agents' count stood in."}),
		planSeconds: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "fleetcast_plan_seconds",
			Help: "Time the planner took per cycle.", Buckets: prometheus.ExponentialBuckets(0.0005, 2, 14)}),
		drainSeconds: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "fleetcast_drain_seconds",
			Help: "Time from a drain's start to the node's termination.", Buckets: prometheus.ExponentialBuckets(15, 2, 10)}),
		credentialReplacements: prometheus.NewCounter(prometheus.CounterOpts{Name: "fleetcast_credential_replacements_total",
			Help: "Good node credentials an operator replaced (`token issue -replace`), cutting off the agent that held them; each is logged with the operator's token and reason."}),
		workLost: prometheus.NewCounter(prometheus.CounterOpts{Name: "fleetcast_work_lost_gpu_hours_total",
			Help: "Work lost, in GPU-hours, as far as the agents' reports show it: for each node that left its cloud without this controller terminating it (a spot reclaim, a person, a failure), the GPUs of each job its agent last reported times the time from the job's last checkpoint (its start, if it never checkpointed) to that report. Work done after the last report, and jobs the agent did not report, are not counted; a job that checkpointed or exited after it is counted. Counted by this process since it started."}),
	}
	m.reg.MustRegister(m.actions, m.capacityErrors, m.describeErrors, m.orphanActions, m.demandSourceErrors, m.planSeconds, m.drainSeconds,
		m.credentialReplacements, m.workLost,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}

// countActions counts what became of a cycle's actions (holds are none;
// a dry run's are logged, not counted): by kind, pool and result, an
// orphan's apart, and the launches a pool's cloud took and then could not
// make as a capacity error, once a cycle.
func (c *Controller) countActions(plan *planner.Plan, outcomes []loop.Outcome) {
	failing := map[string]bool{}
	for i, a := range plan.Actions {
		o := outcomes[i]
		if o.Result == loop.DryRun {
			c.log.Info("dry run: would "+string(a.Kind), "pool", a.Pool, "node", a.Node, "count", a.Count, "reason", a.Reason)
			continue
		}
		if a.Kind == planner.Hold {
			continue
		}
		result := "ok"
		switch {
		case o.Result == loop.Refused:
			result = "refused"
		case o.Err != nil:
			result = "error"
		}
		if c.set.Pool(a.Pool) == nil {
			// An orphan's: its pool, read from its tags, is no
			// configured name to label a series by.
			c.metrics.orphanActions.WithLabelValues(string(a.Kind), result).Inc()
			continue
		}
		c.metrics.actions.WithLabelValues(string(a.Kind), a.Pool, result).Inc()
		if a.Kind == planner.Terminate && a.Code == planner.ReasonLaunchFailing && o.Err == nil && !failing[a.Pool] {
			// Launches the cloud took and then could not make: once a
			// cycle, as the pool is backed off once.
			failing[a.Pool] = true
			c.metrics.capacityErrors.WithLabelValues(a.Pool).Inc()
		}
	}
}

// forecastLevels are the fixed quantiles fleetcast_forecast_gpus gives by
// name (a forecast carries them all: forecast.Levels), beside "keep", the
// quantile scale-in keeps for, which follows the pools' prices.
var forecastLevels = []struct {
	name string
	q    float64
}{{"p10", 0.1}, {"p50", 0.5}, {"p90", 0.9}}

var (
	descGPUs      = prometheus.NewDesc("fleetcast_gpus", "GPUs in the fleet, by pool and node state.", []string{"pool", "state"}, nil)
	descDemand    = prometheus.NewDesc("fleetcast_demand_gpus", "GPU demand now: held by jobs (running) or waiting (pending).", []string{"kind"}, nil)
	descForecast  = prometheus.NewDesc("fleetcast_forecast_gpus", "The last forecast's last step: the peak demand in GPUs it forecasts for the step that ends forecast.horizon (default 2h) after its origin (the end of the demand history's step in progress), as GET /v1/forecast serves it, by level: p10, p50 and p90 (those quantiles) and keep (the quantile scale-in keeps for, fleetcast_keep_quantile).", []string{"level"}, nil)
	descKeepQ     = prometheus.NewDesc("fleetcast_keep_quantile", "The forecast quantile scale-in keeps capacity for: the highest of the burst pools' quantiles (fleetcast_pool_quantile) whose clouds are not refusing them, as the last plan chose it.", nil, nil)
	descPoolQ     = prometheus.NewDesc("fleetcast_pool_quantile", "The forecast quantile each burst (on-demand or spot) pool buys capacity for: forecast.quantile if set, else the level its price, lead time, forecast.hysteresis and forecast.wait_value_per_gpu_hour make cheapest, by pool.", []string{"pool"}, nil)
	descPoolFC    = prometheus.NewDesc("fleetcast_pool_forecast_gpus", "The demand in GPUs the last plan's forecast gives at each burst pool's quantile (fleetcast_pool_quantile) one lead time after the cycle: what the pool buys for, before announced demand is added and current demand is taken as a floor, by pool.", []string{"pool"}, nil)
	descPoolSpend = prometheus.NewDesc("fleetcast_pool_cost_per_hour_dollars", "What each configured pool costs per hour as the last cycle saw it: its instances billed (every listed one but those stopped) times its price per node-hour; a reserved pool counts its whole reservation (max nodes), paid whether used or not. Instances of pools the config does not have (orphans) count in fleetcast_cost_per_hour_dollars only. By pool.", []string{"pool"}, nil)
	descCost      = prometheus.NewDesc("fleetcast_cost_per_hour_dollars", "The fleet's cost per hour, now and once the plan has completed.", []string{"when"}, nil)
	descSilent    = prometheus.NewDesc("fleetcast_silent_nodes", "Ready or draining nodes whose agent has not reported within the agent timeout.", nil, nil)
	descFragments = prometheus.NewDesc("fleetcast_fragment_gpus", "Free GPUs on busy ready nodes (some of their GPUs held by jobs): while jobs are pending none fits there, so pending demand is provisioned on whole empty nodes.", nil, nil)
	descLastCycle = prometheus.NewDesc("fleetcast_last_cycle_timestamp_seconds", "When the last control cycle ran.", nil, nil)
	descUnknown   = prometheus.NewDesc("fleetcast_unknown_nodes", "Nodes this controller did not launch whose agents have never reported healthy GPUs (never terminated at a deadline nor drained), by pool.", []string{"pool"}, nil)
	descGPUFault  = prometheus.NewDesc("fleetcast_gpu_fault_nodes", "Ready or draining nodes whose agents could not read their GPUs in their latest report (never idle; drained only when the jobs known on them allow), by pool.", []string{"pool"}, nil)
	descOrphans   = prometheus.NewDesc("fleetcast_orphan_nodes", "This fleet's instances of pools the config no longer has, not yet terminating (reaped once their agents report them idle); their IDs and old pools are in GET /v1/plan's orphans.", nil, nil)
	descHalted    = prometheus.NewDesc("fleetcast_scale_in_halted", "1 while scale-in is halted because too many agents are silent at once (limits.silent_share_halt), else 0.", nil, nil)
	descBudget    = prometheus.NewDesc("fleetcast_team_burst_budget_dollars", "Each team's burst budget for the day (its team block's burst_budget_per_day), by team: what its jobs on on-demand and spot capacity, and capacity bought for it while idle, may cost in a day (UTC).", []string{"team"}, nil)
	descSpent     = prometheus.NewDesc("fleetcast_team_burst_spend_dollars", "What each team with a burst budget has spent on burst capacity today (UTC), as the last cycle read the books of who used what, by team.", []string{"team"}, nil)
	descOver      = prometheus.NewDesc("fleetcast_team_over_budget", "1 while a team has spent its burst budget for the day (nothing is bought for it beyond its reserved share; a scheduler should start its jobs on reserved capacity only, and have its jobs on burst capacity checkpoint and leave), else 0, by team.", []string{"team"}, nil)
	descReady     = prometheus.NewDesc("fleetcast_ready", "1 when GET /readyz answers 200 (a cycle has completed and one ran within three intervals, every pool read, no unknown node, scale-in not halted), else 0 (before the first cycle too).", nil, nil)
)

type snapshotCollector struct{ c *Controller }

func (snapshotCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descGPUs, descDemand, descForecast, descKeepQ, descPoolQ, descPoolFC, descPoolSpend, descCost, descSilent, descFragments,
		descLastCycle, descUnknown, descGPUFault, descOrphans, descHalted, descReady, descBudget, descSpent, descOver} {
		ch <- d
	}
}

func (s snapshotCollector) Collect(ch chan<- prometheus.Metric) {
	last := s.c.Last()
	ready := 1.0
	if len(s.c.unready(last)) > 0 {
		ready = 0
	}
	ch <- prometheus.MustNewConstMetric(descReady, prometheus.GaugeValue, ready)
	if last.State == nil || last.Plan == nil {
		return
	}
	gauge := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
	}
	plan := last.Plan
	gauge(descLastCycle, float64(last.At.UnixNano())/1e9)
	for i := range s.c.set.Pools {
		p := &s.c.set.Pools[i]
		counts := map[fleet.NodeState]int{}
		unknown, faults, billed := 0, 0, 0
		for j := range last.State.Nodes {
			n := &last.State.Nodes[j]
			if n.Pool != p.Name {
				continue
			}
			counts[n.State] += p.GPUsPerNode
			if n.Unknown {
				unknown++
			}
			if n.GPUFault != "" && (n.State == fleet.Ready || n.State == fleet.Draining) {
				faults++
			}
			// A stopped instance bills for its disks alone, as the
			// planner counts it.
			if n.State != fleet.Terminating || !n.Stopped {
				billed++
			}
		}
		for _, st := range []fleet.NodeState{fleet.Pending, fleet.Ready, fleet.Draining, fleet.Terminating} {
			gauge(descGPUs, float64(counts[st]), p.Name, string(st))
		}
		gauge(descUnknown, float64(unknown), p.Name)
		gauge(descGPUFault, float64(faults), p.Name)
		if p.Capacity == fleet.Reserved {
			billed = max(billed, p.Max)
		} else {
			q := s.c.set.Forecast.QuantileFor(p)
			gauge(descPoolQ, q, p.Name)
			if f := plan.Forecast; f != nil && f.Steps() > 0 {
				gauge(descPoolFC, f.At(q, plan.At.Add(p.LeadTime)), p.Name)
			}
		}
		gauge(descPoolSpend, float64(billed)*p.PricePerHour, p.Name)
	}
	orphans := 0
	for i := range last.State.Nodes {
		if n := &last.State.Nodes[i]; n.Orphan && n.State != fleet.Terminating {
			orphans++
		}
	}
	gauge(descOrphans, float64(orphans))
	halted := 0.0
	if plan.ScaleInHalt != "" {
		halted = 1
	}
	gauge(descHalted, halted)
	for _, t := range s.c.set.Teams {
		if !t.Budgeted {
			continue
		}
		spent, over := 0.0, 0.0
		for _, x := range last.State.BurstSpend {
			if x.Team == t.Name {
				spent += x.USD
			}
		}
		if slices.Contains(plan.OverBudget, t.Name) {
			over = 1
		}
		gauge(descBudget, t.BurstBudgetPerDay, t.Name)
		gauge(descSpent, spent, t.Name)
		gauge(descOver, over, t.Name)
	}
	gauge(descDemand, float64(plan.Demand.RunningGPUs), "running")
	gauge(descDemand, float64(plan.Demand.PendingGPUs), "pending")
	if plan.Quantile > 0 {
		gauge(descKeepQ, plan.Quantile)
	}
	if f := last.Forecast; f != nil && f.Steps() > 0 {
		lastStep := func(q float64) float64 { return f.At(q, f.End()) }
		for _, l := range forecastLevels {
			gauge(descForecast, lastStep(l.q), l.name)
		}
		if plan.Quantile > 0 {
			gauge(descForecast, lastStep(plan.Quantile), "keep")
		}
	}
	gauge(descCost, plan.CostPerHourBefore, "now")
	gauge(descCost, plan.CostPerHourAfter, "planned")
	gauge(descSilent, float64(plan.Capacity.SilentNodes))
	gauge(descFragments, float64(plan.Capacity.FragmentGPUs))
}
