package controller

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/fleetcast/autoscaler/agent/report"
	"github.com/fleetcast/autoscaler/apiauth"
	"github.com/fleetcast/autoscaler/fleet"
	"github.com/fleetcast/autoscaler/nodeauth"
	"github.com/fleetcast/autoscaler/planner"
	"github.com/fleetcast/autoscaler/providers/plugin"
)

// metrics are the controller's own counters; the fleet's gauges are read
// from the last snapshot at each scrape.
type metrics struct {
	reg            *prometheus.Registry
	actions        *prometheus.CounterVec
	capacityErrors *prometheus.CounterVec
	describeErrors *prometheus.CounterVec
	// demandSourceErrors counts failed readings of the demand source.
	demandSourceErrors prometheus.Counter
	planSeconds        prometheus.Histogram
	drainSeconds       prometheus.Histogram
	// credentialReplacements counts the good node credentials operators
	// replaced.
	credentialReplacements prometheus.Counter
}

func newMetrics() *metrics {
	m := &metrics{
		reg: prometheus.NewRegistry(),
		actions: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "fleetcast_actions_total",
			Help: "Actions carried out, by kind, pool and result (ok, error, or refused: a launch the cloud refused for capacity or quota); a launch of several nodes is one action."}, []string{"kind", "pool", "result"}),
		capacityErrors: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "fleetcast_capacity_errors_total",
			Help: "Launches the cloud refused (capacity, quota, a group it is changing, a bad request or a missing group), or took and then failed to make for capacity or quota (a managed instance group's stockout), which back the pool off, by pool."}, []string{"pool"}),
		describeErrors: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "fleetcast_describe_errors_total",
			Help: "Cycles in which a pool's group could not be read (the pool is then left as it is), by pool."}, []string{"pool"}),
		demandSourceErrors: prometheus.NewCounter(prometheus.CounterOpts{Name: "fleetcast_demand_source_errors_total",
			Help: "Failed readings of the demand source (the Prometheus query); the agents' count stood in."}),
		planSeconds: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "fleetcast_plan_seconds",
			Help: "Time the planner took per cycle.", Buckets: prometheus.ExponentialBuckets(0.0005, 2, 14)}),
		drainSeconds: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "fleetcast_drain_seconds",
			Help: "Time from a drain's start to the node's termination.", Buckets: prometheus.ExponentialBuckets(15, 2, 10)}),
		credentialReplacements: prometheus.NewCounter(prometheus.CounterOpts{Name: "fleetcast_credential_replacements_total",
			Help: "Good node credentials an operator replaced (`token issue -replace`), cutting off the agent that held them; each is logged with the operator's token and reason."}),
	}
	m.reg.MustRegister(m.actions, m.capacityErrors, m.describeErrors, m.demandSourceErrors, m.planSeconds, m.drainSeconds, m.credentialReplacements)
	return m
}

var (
	descGPUs      = prometheus.NewDesc("fleetcast_gpus", "GPUs in the fleet, by pool and node state.", []string{"pool", "state"}, nil)
	descDemand    = prometheus.NewDesc("fleetcast_demand_gpus", "GPU demand now: held by jobs (running) or waiting (pending).", []string{"kind"}, nil)
	descForecast  = prometheus.NewDesc("fleetcast_forecast_gpus", "Forecast demand one lead time ahead (the forecast's last step), by quantile.", []string{"quantile"}, nil)
	descCost      = prometheus.NewDesc("fleetcast_cost_per_hour_dollars", "The fleet's cost per hour, now and once the plan has completed.", []string{"when"}, nil)
	descSilent    = prometheus.NewDesc("fleetcast_silent_nodes", "Ready or draining nodes whose agent has not reported within the agent timeout.", nil, nil)
	descFragments = prometheus.NewDesc("fleetcast_fragment_gpus", "Free GPUs on busy ready nodes (some of their GPUs held by jobs): while jobs are pending none fits there, so pending demand is provisioned on whole empty nodes.", nil, nil)
	descLastCycle = prometheus.NewDesc("fleetcast_last_cycle_timestamp_seconds", "When the last control cycle ran.", nil, nil)
	descUnknown   = prometheus.NewDesc("fleetcast_unknown_nodes", "Nodes this controller did not launch whose agents have never reported healthy GPUs (never terminated at a deadline nor drained), by pool.", []string{"pool"}, nil)
	descGPUFault  = prometheus.NewDesc("fleetcast_gpu_fault_nodes", "Ready or draining nodes whose agents could not read their GPUs in their latest report (never idle; drained only when the jobs known on them allow), by pool.", []string{"pool"}, nil)
	descOrphans   = prometheus.NewDesc("fleetcast_orphan_nodes", "This fleet's instances of pools the config no longer has (reaped once their agents report them idle), by their old pool.", []string{"pool"}, nil)
	descHalted    = prometheus.NewDesc("fleetcast_scale_in_halted", "1 while scale-in is halted because too many agents are silent at once (limits.silent_share_halt), else 0.", nil, nil)
	descReady     = prometheus.NewDesc("fleetcast_ready", "1 when GET /readyz answers 200 (cycles run, every pool read, no unknown node, scale-in not halted), else 0.", nil, nil)
)

type snapshotCollector struct{ c *Controller }

func (snapshotCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descGPUs, descDemand, descForecast, descCost, descSilent, descFragments, descLastCycle, descUnknown, descGPUFault, descOrphans, descHalted, descReady} {
		ch <- d
	}
}

func (s snapshotCollector) Collect(ch chan<- prometheus.Metric) {
	last := s.c.Last()
	if last.State == nil || last.Plan == nil {
		return
	}
	ch <- prometheus.MustNewConstMetric(descLastCycle, prometheus.GaugeValue, float64(last.At.UnixNano())/1e9)
	for _, p := range s.c.cfg.Pools {
		counts := map[fleet.NodeState]int{}
		unknown, faults := 0, 0
		for i := range last.State.Nodes {
			if n := &last.State.Nodes[i]; n.Pool == p.Name {
				counts[n.State] += p.GPUsPerNode
				if n.Unknown {
					unknown++
				}
				if n.GPUFault != "" && (n.State == fleet.Ready || n.State == fleet.Draining) {
					faults++
				}
			}
		}
		for _, st := range []fleet.NodeState{fleet.Pending, fleet.Ready, fleet.Draining, fleet.Terminating} {
			ch <- prometheus.MustNewConstMetric(descGPUs, prometheus.GaugeValue, float64(counts[st]), p.Name, string(st))
		}
		ch <- prometheus.MustNewConstMetric(descUnknown, prometheus.GaugeValue, float64(unknown), p.Name)
		ch <- prometheus.MustNewConstMetric(descGPUFault, prometheus.GaugeValue, float64(faults), p.Name)
	}
	orphans := map[string]int{}
	for i := range last.State.Nodes {
		if n := &last.State.Nodes[i]; n.Orphan && n.State != fleet.Terminating {
			orphans[n.Pool]++
		}
	}
	for pool, n := range orphans {
		ch <- prometheus.MustNewConstMetric(descOrphans, prometheus.GaugeValue, float64(n), pool)
	}
	halted, ready := 0.0, 1.0
	if last.Plan.ScaleInHalt != "" {
		halted = 1
	}
	if len(s.c.unready(last)) > 0 {
		ready = 0
	}
	ch <- prometheus.MustNewConstMetric(descHalted, prometheus.GaugeValue, halted)
	ch <- prometheus.MustNewConstMetric(descReady, prometheus.GaugeValue, ready)
	ch <- prometheus.MustNewConstMetric(descDemand, prometheus.GaugeValue, float64(last.Plan.Demand.RunningGPUs), "running")
	ch <- prometheus.MustNewConstMetric(descDemand, prometheus.GaugeValue, float64(last.Plan.Demand.PendingGPUs), "pending")
	if f := last.Forecast; f != nil && f.Steps() > 0 {
		for j, q := range f.Levels {
			ch <- prometheus.MustNewConstMetric(descForecast, prometheus.GaugeValue, f.Values[j][f.Steps()-1], strconv.FormatFloat(q, 'g', -1, 64))
		}
	}
	ch <- prometheus.MustNewConstMetric(descCost, prometheus.GaugeValue, last.Plan.CostPerHourBefore, "now")
	ch <- prometheus.MustNewConstMetric(descCost, prometheus.GaugeValue, last.Plan.CostPerHourAfter, "planned")
	ch <- prometheus.MustNewConstMetric(descSilent, prometheus.GaugeValue, float64(last.Plan.Capacity.SilentNodes))
	ch <- prometheus.MustNewConstMetric(descFragments, prometheus.GaugeValue, float64(last.Plan.Capacity.FragmentGPUs))
}

// APIOptions are the HTTP API's parts beyond the controller.
type APIOptions struct {
	// Credentials check the agents' node credentials on their reports
	// (a nodeauth.Registry); nil: no reports are taken.
	Credentials report.Credentials
	// Auth serves the credential routes (bootstrap, rotation, revocation);
	// nil: none.
	Auth *nodeauth.Server
	// Demand serves POST /v1/demand, to tokens of scope demand.
	Demand *DemandReceiver
	// Tokens are the API tokens; nil: none is good (only the open reads,
	// the agents' reports and bootstraps are served).
	Tokens *apiauth.Tokens
	// OpenReads serves the GET /v1/ reads without a token (as `run` does
	// on a loopback address unless -loopback-reads=false); otherwise they
	// need a token of scope read. /healthz, /readyz and /metrics are open
	// either way and carry no secret.
	OpenReads bool
	// Plugins, when set, serves GET /v1/plugins: the provider plugins'
	// health (a plugin.Set).
	Plugins interface{ Status() []plugin.Status }
}

// unready lists why the controller is not fully in charge of its fleet,
// as the last cycle saw it: no recent cycle, a pool it could not read,
// instances it does not know, scale-in halted by silent agents. Empty
// when it is.
func (c *Controller) unready(last Snapshot) []string {
	if last.At.IsZero() {
		return []string{"no control cycle yet"}
	}
	var out []string
	if age := c.now().Sub(last.At); age > 3*c.cfg.Controller.Interval {
		out = append(out, "last control cycle "+age.Round(time.Second).String()+" ago")
	}
	if last.State != nil {
		for _, ps := range last.State.Pools {
			if ps.IsUnobserved() {
				out = append(out, fmt.Sprintf("pool %s not read: %s", ps.Name, ps.Unobserved.String()))
			}
		}
	}
	if p := last.Plan; p != nil {
		if n := len(p.UnknownNodes); n > 0 {
			out = append(out, fmt.Sprintf("%d unknown instance(s) (not launched by this controller, agents never reported healthy GPUs; never terminated at a deadline nor drained): %s",
				n, planner.ListIDs(p.UnknownNodes, 10)))
		}
		if p.ScaleInHalt != "" {
			out = append(out, "scale-in halted: "+p.ScaleInHalt)
		}
	}
	return out
}

// silentNote says how many known nodes' agents are silent, below the share
// that halts scale-in; "" when none are, or when scale-in is halted (which
// says it).
func silentNote(last Snapshot) string {
	p := last.Plan
	if p == nil || p.ScaleInHalt != "" || p.Capacity.SilentNodes <= len(p.UnknownNodes) {
		return ""
	}
	return fmt.Sprintf("%d node(s) with silent agents (never drained while silent)", p.Capacity.SilentNodes-len(p.UnknownNodes))
}

// faultNote says which nodes' agents cannot read their GPUs; "" when none.
func faultNote(last Snapshot) string {
	p := last.Plan
	if p == nil || len(p.GPUFaultNodes) == 0 {
		return ""
	}
	return fmt.Sprintf("%d node(s) whose agents cannot read their GPUs (never idle; see gpu_fault in /v1/fleet): %s", len(p.GPUFaultNodes), planner.ListIDs(p.GPUFaultNodes, 10))
}

// Handler serves the controller's HTTP API:
//
//	GET  /healthz                     200 once a cycle ran within three intervals, else 503 (liveness)
//	GET  /readyz                      200 when the controller is fully in charge of the fleet, else 503 with why
//	GET  /metrics                     Prometheus metrics
//	GET  /v1/plan                     the last plan (JSON)
//	GET  /v1/fleet                    pools, nodes, jobs and agent freshness as the last cycle saw them
//	GET  /v1/forecast                 the last forecast
//	GET  /v1/plugins                  the provider plugins: versions, pools, health
//	POST /v1/agents/{node}/report     agent reports (the node's credential)
//	POST /v1/agents/{node}/credential ...  node credentials (see nodeauth.Server)
//	POST /v1/demand                   schedulers' pending and announced demand, running jobs' ends (scope demand)
//	GET|POST|DELETE /v1/api-tokens... the API tokens (scope operator; see apiauth.Tokens.Routes)
//
// Every route says the access it needs (apiauth.Router): a write needs a
// token whose scope allows it, or a node's credential for that node's
// reports; the /v1/ reads need a token of scope read unless o.OpenReads.
func (c *Controller) Handler(o APIOptions) *apiauth.Router {
	mux := &apiauth.Router{Tokens: o.Tokens, OpenReads: o.OpenReads, Log: c.log.Named("api")}
	mux.Handle("GET /metrics", apiauth.Public, promhttp.HandlerFor(c.metrics.reg, promhttp.HandlerOpts{}))
	// Liveness: only a controller whose loop has stopped is unhealthy (a
	// network partition that silences the agents must not get it
	// restarted by its probes); what is degraded is said in the body.
	mux.HandleFunc("GET /healthz", apiauth.Public, func(w http.ResponseWriter, r *http.Request) {
		last := c.Last()
		if last.At.IsZero() {
			http.Error(w, "no control cycle yet", http.StatusServiceUnavailable)
			return
		}
		if age := c.now().Sub(last.At); age > 3*c.cfg.Controller.Interval {
			http.Error(w, "last control cycle "+age.Round(time.Second).String()+" ago", http.StatusServiceUnavailable)
			return
		}
		var b strings.Builder
		b.WriteString("ok\n")
		for _, why := range append(c.unready(last), silentNote(last), faultNote(last)) {
			if why != "" {
				b.WriteString("degraded: " + why + "\n")
			}
		}
		w.Write([]byte(b.String()))
	})
	// Readiness: whether the controller is fully in charge of its fleet.
	// For alerting and dashboards; not for a probe that cuts the agents'
	// traffic off (they could then never report again).
	mux.HandleFunc("GET /readyz", apiauth.Public, func(w http.ResponseWriter, r *http.Request) {
		why := c.unready(c.Last())
		if len(why) == 0 {
			w.Write([]byte("ready\n"))
			return
		}
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.WriteHeader(http.StatusServiceUnavailable)
		w.Write([]byte("not ready: " + strings.Join(why, "\nnot ready: ") + "\n"))
	})
	writeJSON := func(w http.ResponseWriter, v any) {
		w.Header().Set("Content-Type", "application/json")
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		enc.Encode(v)
	}
	// serve answers with what pick takes from the last snapshot, as JSON;
	// ok is false when the last cycle made none of it.
	serve := func(pick func(Snapshot) (v any, ok bool)) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) {
			last := c.Last()
			if last.At.IsZero() {
				http.Error(w, "no control cycle yet", http.StatusServiceUnavailable)
				return
			}
			v, ok := pick(last)
			if !ok {
				http.Error(w, "the last cycle made none (no demand history to forecast from)", http.StatusNotFound)
				return
			}
			writeJSON(w, v)
		}
	}
	// Views of the snapshot: durations as text, lists never null.
	mux.Handle("GET /v1/plan", apiauth.NeedRead, serve(func(s Snapshot) (any, bool) {
		if s.Plan == nil {
			return nil, false
		}
		return NewPlanView(s.Plan), true
	}))
	mux.Handle("GET /v1/fleet", apiauth.NeedRead, serve(func(s Snapshot) (any, bool) { return newFleetView(s.At, c.cfg, s.State), s.State != nil }))
	mux.Handle("GET /v1/forecast", apiauth.NeedRead, serve(func(s Snapshot) (any, bool) { return NewForecastView(s.Forecast), s.Forecast != nil }))
	mux.HandleFunc("GET /v1/plugins", apiauth.NeedRead, func(w http.ResponseWriter, r *http.Request) {
		status := []plugin.Status{}
		if o.Plugins != nil {
			status = o.Plugins.Status()
		}
		writeJSON(w, status)
	})
	if o.Credentials != nil {
		mux.Handle(report.Pattern, apiauth.Node, &report.Receiver{Credentials: o.Credentials, Store: c.agents, Now: c.now, Log: c.log, NodeGPUs: c.nodeGPUs})
	}
	if o.Auth != nil {
		o.Auth.Replacements = c.metrics.credentialReplacements
		o.Auth.Routes(mux)
	}
	if o.Demand != nil {
		mux.Handle(DemandPattern, apiauth.NeedDemand, o.Demand)
	}
	if o.Tokens != nil {
		o.Tokens.Routes(mux)
	}
	return mux
}

// MachineOf is the cloud's ID of the machine the last cycle saw listed
// under node's name, where its cloud names one (a Compute Engine
// instance's); "" otherwise. A bootstrap is checked against it.
func (c *Controller) MachineOf(node string) string {
	last := c.Last()
	if last.State == nil {
		return ""
	}
	for i := range last.State.Nodes {
		if n := &last.State.Nodes[i]; n.ID == node {
			return n.Machine
		}
	}
	return ""
}

// LivePool returns the pool node is a live instance of, as the last cycle
// observed the fleet: listed by its pool's group and not going away (an
// instance the controller did not launch counts: Terraform's first nodes
// are such; an orphan, known by its tags alone, does not), and the zone
// its group lists it in ("" if it says none). It is what a node's
// bootstrap is checked against.
func (c *Controller) LivePool(node string) (fleet.Pool, string, bool) {
	last := c.Last()
	if last.State == nil {
		return fleet.Pool{}, "", false
	}
	for i := range last.State.Nodes {
		n := &last.State.Nodes[i]
		if n.ID != node {
			continue
		}
		if n.State == fleet.Terminating {
			return fleet.Pool{}, "", false
		}
		if n.Orphan {
			// Known by its tags alone, which anyone who may tag instances
			// can set: no credential on that word.
			return fleet.Pool{}, "", false
		}
		for _, p := range c.cfg.Pools {
			if p.Name == n.Pool {
				return p, n.Zone, true
			}
		}
	}
	return fleet.Pool{}, "", false
}
