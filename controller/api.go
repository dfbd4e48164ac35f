package controller

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/fleetcast/autoscaler/apiauth"
	"github.com/fleetcast/autoscaler/controller/reports"
	"github.com/fleetcast/autoscaler/fleet"
	"github.com/fleetcast/autoscaler/nodeauth"
	"github.com/fleetcast/autoscaler/planner"
	"github.com/fleetcast/autoscaler/providers/plugin"
)

// APIOptions are the HTTP API's parts beyond the controller.
type APIOptions struct {
	// Credentials check the agents' node credentials on their reports
	// (a nodeauth.Registry); nil: no reports are taken.
	Credentials reports.Credentials
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

// firstCycleGrace is how long /healthz waits for the first cycle (or
// three intervals, if longer) before it says the loop has stopped: every
// pool read, the recovery and a Prometheus backfill, each bounded by its
// own timeout.
const firstCycleGrace = 10 * time.Minute

// unready lists why the controller is not fully in charge of its fleet,
// as the last cycle saw it: no recent cycle, a pool it could not read,
// instances it does not know, scale-in halted by silent agents. Empty
// when it is.
func (c *Controller) unready(last Snapshot) []string {
	if last.At.IsZero() {
		return []string{"no control cycle yet"}
	}
	var out []string
	if age := c.now().Sub(last.At); age > 3*c.ctl.Interval {
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
//	GET  /healthz                     200 before the first cycle and while one ran within three intervals, else 503 (liveness)
//	GET  /readyz                      200 once a cycle has run and the controller is fully in charge of the fleet, else 503 with why
//	GET  /metrics                     Prometheus metrics
//	GET  /v1/plan                     the last plan (JSON)
//	GET  /v1/fleet                    pools, nodes, jobs and agent freshness as the last cycle saw them
//	GET  /v1/forecast                 the last forecast
//	GET  /v1/plugins                  the provider plugins: versions, pools, health
//	GET  /v1/usage                    who used what: cost, GPU-hours and queue times by team, tier, pool or job (?from=&to=&by=&share_idle=)
//	POST /v1/agents/{node}/report     agent reports (the node's credential)
//	POST /v1/agents/{node}/credential ...  node credentials (see nodeauth.Server)
//	POST /v1/demand                   schedulers' pending and announced demand, running jobs' ends (scope demand)
//	POST /v1/slurm/resume|suspend     the hostlists Slurm's resume and suspend programs are given (scope demand)
//	GET|POST|DELETE /v1/api-tokens... the API tokens (scope operator; see apiauth.Tokens.Routes)
//	GET  /ui                          the web page (scope read, or its session cookie; see uiServer)
//	GET|POST /ui/login, POST /ui/logout  the web page's login form: a read token traded for a session cookie
//
// Every route says the access it needs (apiauth.Router): a write needs a
// token whose scope allows it, or a node's credential for that node's
// reports; the /v1/ reads need a token of scope read unless o.OpenReads.
func (c *Controller) Handler(o APIOptions) *apiauth.Router {
	mux := &apiauth.Router{Tokens: o.Tokens, OpenReads: o.OpenReads, Log: c.log.Named("api")}
	mux.Handle("GET /metrics", apiauth.Public, promhttp.HandlerFor(c.metrics.reg, promhttp.HandlerOpts{}))
	// Liveness: only a controller whose loop has stopped (no cycle for
	// three intervals after one ran) is unhealthy (a network partition
	// that silences the agents must not get it restarted by its probes);
	// what is degraded is said in the body.
	mux.HandleFunc("GET /healthz", apiauth.Public, func(w http.ResponseWriter, r *http.Request) {
		last := c.Last()
		// Before the first cycle the process is up, and says the cycle
		// is yet to come (a degraded line): the first cycle may take
		// long (every pool read, recovery), and /readyz says 503 until it.
		// A first cycle that never comes (hung) is a stopped loop too,
		// once firstCycleGrace has passed since the start.
		if age := c.now().Sub(last.At); !last.At.IsZero() && age > 3*c.ctl.Interval {
			http.Error(w, "last control cycle "+age.Round(time.Second).String()+" ago", http.StatusServiceUnavailable)
			return
		}
		if up := c.now().Sub(c.started); last.At.IsZero() && up > max(firstCycleGrace, 3*c.ctl.Interval) {
			http.Error(w, "no control cycle in the "+up.Round(time.Second).String()+" since the controller started", http.StatusServiceUnavailable)
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
	mux.Handle("GET /v1/fleet", apiauth.NeedRead, serve(func(s Snapshot) (any, bool) {
		return newFleetView(s.At, c.set, s.State, c.usageSet.IdleWindow), s.State != nil
	}))
	mux.Handle("GET /v1/forecast", apiauth.NeedRead, serve(func(s Snapshot) (any, bool) { return NewForecastView(s.Forecast), s.Forecast != nil }))
	mux.HandleFunc("GET /v1/plugins", apiauth.NeedRead, func(w http.ResponseWriter, r *http.Request) {
		status := []plugin.Status{}
		if o.Plugins != nil {
			status = o.Plugins.Status()
		}
		writeJSON(w, status)
	})
	mux.HandleFunc(UsagePattern, apiauth.NeedRead, c.serveUsage)
	if o.Credentials != nil {
		mux.Handle(reports.Pattern, apiauth.Node, &reports.Receiver{Credentials: o.Credentials, Store: c.agents, Now: c.now, Log: c.log, NodeGPUs: c.nodeGPUs})
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
	mux.HandleFunc(SlurmResumePattern, apiauth.NeedDemand, c.slurmProgram(true))
	mux.HandleFunc(SlurmSuspendPattern, apiauth.NeedDemand, c.slurmProgram(false))
	// The web page: GET /ui takes what a read takes, or, from a browser
	// that sends no token, the session cookie the Public login form
	// trades a read token for (apiauth.ReadOrSession; the cookie is good
	// for nothing else).
	c.uiRoutes(mux, o.Tokens)
	return mux
}

// writeJSON answers v as indented JSON.
func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.Encode(v)
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
		for _, p := range c.set.Pools {
			if p.Name == n.Pool {
				return p, n.Zone, true
			}
		}
	}
	return fleet.Pool{}, "", false
}
