package controller

import (
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/fleetcast/autoscaler/actuator"
	"github.com/fleetcast/autoscaler/agent/report"
	"github.com/fleetcast/autoscaler/fleet"
	"github.com/fleetcast/autoscaler/forecast"
	"github.com/fleetcast/autoscaler/loop"
	"github.com/fleetcast/autoscaler/planner"
	"github.com/fleetcast/autoscaler/providers"
	"github.com/fleetcast/autoscaler/state"
	"github.com/fleetcast/autoscaler/usage"
)

// Controller runs control cycles: observe the clouds and agents, record
// demand, forecast, plan with the same planner as `plan` and `simulate`,
// and act through the Actuator (or, dry-run, only plan).
type Controller struct {
	// set are the pools and the planner's settings, ctl the controller
	// block's, and demandBackfill demand.backfill.
	set            *fleet.Settings
	ctl            fleet.ControllerSettings
	demandBackfill bool
	store          state.Records
	// shareViews writes the reads' answers after each cycle (putViews).
	shareViews bool
	clouds     map[string]providers.Provider
	// act is the clouds as this controller reads and changes them: which
	// instances are its own, and every change journaled.
	act     *actuator.Clouds
	agents  *Agents
	pending *Pending
	source  DemandSource
	slurm   *SlurmSource
	now     func() time.Time
	log     hclog.Logger
	dryRun  bool
	creds   interface{ Forget(nodes ...string) error }

	// loop is the decision loop: demand, forecast, plan, and the books
	// of back-offs and drains, in the store.
	loop      *loop.Loop
	cancelled map[string]time.Time // node -> when its last drain was cancelled (also in the store)
	ready     map[string]time.Time // node -> when its agent first reported healthy GPUs (also in the store)
	// started is when this controller started: launches from before it
	// get their provisioning time from it.
	started time.Time
	// orphans are the fleet's orphans the last cycle found, by ID, and
	// orphanLists each reaper's last list (kept when a read fails).
	orphans     map[string]foundOrphan
	orphanLists map[providers.Reaper][]providers.Orphan
	// lastPools are the pools as a config last described them (Recover
	// reads them, and records the config's): what an orphan of a pool
	// gone from the config has and costs.
	lastPools map[string]state.PoolRecord
	// missing is when each node the controller knows of was first
	// missing from a full read of the clouds, and going the nodes its
	// cloud said were going (listed terminating, or terminated by this
	// controller): forgetGone forgets a node after GoneGrace missing, or
	// at once when it was going.
	missing map[string]time.Time
	going   map[string]time.Time
	// terminated are the nodes this controller terminated (drained as
	// their agents confirmed, orphans reaped, launches past their
	// deadlines), with when: their going loses no work (forgetGone).
	terminated map[string]time.Time
	// reused are the nodes seen in plugin pools: servers powered off
	// and on again under the same name, whose credentials outlive their
	// absence from the listing (a cloud instance's ID is never reused).
	reused map[string]bool

	metrics *metrics

	// usage charges the fleet's cost to who used it (keepUsage), kept
	// as usageSet says; usagePrunedAt is when its records were last
	// pruned.
	usage         *usage.Accountant
	usageSet      fleet.UsageSettings
	usagePrunedAt time.Time
	// unwritten is what a write of the usage books that failed left, to
	// write with the next.
	unwritten usage.Flush
	// usageOff skips keepUsage: set by a benchmark alone, to measure
	// what the usage books add to a cycle.
	usageOff bool
	// lastSpend is the teams' burst spend today as last read
	// (burstSpend): it stands while the store cannot be read.
	lastSpend    []fleet.TeamSpend
	lastSpendDay time.Time
	spendCache   spendCache

	// backfilled is what Recover did to fill the demand history from the
	// demand source; didBackfill whether it tried.
	backfilled  Backfilled
	didBackfill bool

	mu        sync.Mutex
	lastPlan  *planner.Plan
	lastFC    *forecast.Forecast
	lastState *fleet.State
	lastCycle time.Time
	// gpusOf is each node's GPUs as the last cycle saw it, made when a
	// report first asks after that cycle.
	gpusOf map[string]int
}

// Options are a Controller's parts.
type Options struct {
	// Settings are the pools and the forecast, drain and limit settings,
	// and the agent timeout; the controller reads them every cycle.
	Settings *fleet.Settings
	// Controller is the controller block: the interval between cycles
	// and the fleet's name.
	Controller fleet.ControllerSettings
	// Backfill fills the demand history's window from the demand
	// source's past when the controller starts (demand.backfill).
	Backfill bool
	// Store keeps the controller's records (state.Open's bbolt file, or
	// state.Memory).
	Store state.Records
	// Clouds maps each pool's name to its provider.
	Clouds  map[string]providers.Provider
	Agents  *Agents
	Pending *Pending
	// Demand, if set, is a further reading of the GPUs in use (a
	// Prometheus query): the demand history counts the larger of it and
	// the agents' count.
	Demand DemandSource
	// Slurm, if set, is the Slurm cluster's queue, read in the
	// background (SlurmSource.Run, which the caller runs): each cycle's
	// plan shows its latest view (fleet.State.Queue); its demand reaches
	// the plan through Pending.
	Slurm *SlurmSource
	Now   func() time.Time
	Log   hclog.Logger
	// DryRun plans every cycle and changes nothing.
	DryRun bool
	// Credentials, if set, forgets the node credentials of instances gone
	// from their clouds (a nodeauth.Registry).
	Credentials interface{ Forget(nodes ...string) error }
	// Usage is how who used what is kept (the usage block); the zero
	// value is fleet.DefaultUsageSettings.
	Usage fleet.UsageSettings
	// Term, if set, is the leader's term, when the controller is one of
	// several replicas: every idempotency key carries it.
	Term func() int64
	// Journaled, if set, is told of each intent journaled, before the
	// cloud is called (the end-to-end tests' fault hook).
	Journaled func(state.Intent)
	// ShareViews writes the plan, fleet and forecast reads' answers to
	// the store after each cycle, for the other replicas to serve.
	ShareViews bool
}

// New makes a controller. Call Recover before the first Cycle.
func New(o Options) (*Controller, error) {
	if o.Settings == nil || o.Store == nil || o.Agents == nil || o.Pending == nil || o.Now == nil {
		return nil, errors.New("controller: settings, store, agents, pending demand and clock are required")
	}
	switch {
	case o.Controller.Interval <= 0:
		return nil, fmt.Errorf("controller: interval %v: want a duration above 0 (fleet.DefaultControllerSettings has the default)", o.Controller.Interval)
	case o.Controller.Fleet == "":
		return nil, errors.New("controller: no fleet name (fleet.DefaultControllerSettings has the default)")
	case o.Settings.AgentTimeout <= 0:
		return nil, fmt.Errorf("controller: agent timeout %v: want a duration above 0 (fleet.DefaultSettings has the default)", o.Settings.AgentTimeout)
	}
	log := o.Log
	if log == nil {
		log = hclog.NewNullLogger()
	}
	act, err := actuator.New(actuator.Options{Journal: o.Store, Pools: o.Settings.Pools, Providers: o.Clouds,
		Fleet: o.Controller.Fleet, Now: o.Now, Log: log, DryRun: o.DryRun, Term: o.Term, Journaled: o.Journaled})
	if err != nil {
		return nil, err
	}
	c := &Controller{set: o.Settings, ctl: o.Controller, demandBackfill: o.Backfill, store: o.Store, clouds: o.Clouds, act: act, agents: o.Agents, pending: o.Pending, source: o.Demand, slurm: o.Slurm, creds: o.Credentials,
		now: o.Now, log: log, dryRun: o.DryRun, shareViews: o.ShareViews, cancelled: map[string]time.Time{}, ready: map[string]time.Time{},
		reused: map[string]bool{}, orphanLists: map[providers.Reaper][]providers.Orphan{}, metrics: newMetrics(),
		missing: map[string]time.Time{}, going: map[string]time.Time{}, terminated: map[string]time.Time{}}
	c.started = act.Started()
	c.usageSet = o.Usage
	if c.usageSet == (fleet.UsageSettings{}) {
		c.usageSet = fleet.DefaultUsageSettings()
	}
	c.usage = usage.NewAccountant(usage.Options{MaxTeams: c.usageSet.MaxTeams, MaxTiers: c.usageSet.MaxTiers, IdleWindow: c.usageSet.IdleWindow,
		Teams: teamNames(c.set.Teams)})
	if c.agents != nil {
		c.agents.SetIdleThreshold(c.usageSet.IdleThreshold)
	}
	if c.loop, err = loop.New(loop.Options{Settings: c.set, Books: o.Store, Log: log, DryRun: o.DryRun, Advise: true}); err != nil {
		return nil, err
	}
	if !o.DryRun {
		if err := o.Store.ClaimFleet(o.Controller.Fleet); err != nil {
			return nil, err
		}
	}
	c.metrics.reg.MustRegister(snapshotCollector{c}, usageCollector{c.usage})
	if o.Slurm != nil {
		c.metrics.reg.MustRegister(o.Slurm)
	}
	return c, nil
}

func (c *Controller) drainRequest(d state.Drain) *report.DrainRequest {
	return &report.DrainRequest{ID: "drain-" + d.Node + "-" + d.Started.UTC().Format("20060102T150405Z"),
		Since: d.Started, Deadline: d.Deadline, Signal: c.set.Drain.Signal}
}

// nodeGPUs is the GPUs the node's pool gives it, as the last cycle saw the
// node; 0 for a node it did not see.
func (c *Controller) nodeGPUs(node string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.gpusOf == nil && c.lastState != nil {
		c.gpusOf = make(map[string]int, len(c.lastState.Nodes))
		for i := range c.lastState.Nodes {
			n := &c.lastState.Nodes[i]
			if p, ok := c.act.Pool(n.Pool); ok {
				c.gpusOf[n.ID] = p.GPUsPerNode
			}
		}
	}
	return c.gpusOf[node]
}

// Snapshot is what the last cycle saw and decided, for the API and metrics.
type Snapshot struct {
	// At is when the last cycle ran; zero before the first.
	At       time.Time
	State    *fleet.State
	Plan     *planner.Plan
	Forecast *forecast.Forecast
}

// Last returns the last cycle's snapshot. Its parts are shared: do not
// modify them.
func (c *Controller) Last() Snapshot {
	c.mu.Lock()
	defer c.mu.Unlock()
	return Snapshot{At: c.lastCycle, State: c.lastState, Plan: c.lastPlan, Forecast: c.lastFC}
}
