package controller

import (
	"context"
	"errors"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/fleetcast/autoscaler/actuator"
	"github.com/fleetcast/autoscaler/agent/report"
	"github.com/fleetcast/autoscaler/config"
	"github.com/fleetcast/autoscaler/fleet"
	"github.com/fleetcast/autoscaler/forecast"
	"github.com/fleetcast/autoscaler/loop"
	"github.com/fleetcast/autoscaler/planner"
	"github.com/fleetcast/autoscaler/providers"
	"github.com/fleetcast/autoscaler/state"
)

// Controller runs control cycles: observe the clouds and agents, record
// demand, forecast, plan with the same planner as `plan` and `simulate`,
// and act through the Actuator (or, dry-run, only plan).
type Controller struct {
	cfg    *config.Config
	store  state.Records
	clouds map[string]providers.Provider
	// act is the clouds as this controller reads and changes them: which
	// instances are its own, and every change journaled.
	act     *actuator.Clouds
	agents  *Agents
	pending *Pending
	source  DemandSource
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
	Config *config.Config
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
	Now    func() time.Time
	Log    hclog.Logger
	// DryRun plans every cycle and changes nothing.
	DryRun bool
	// Credentials, if set, forgets the node credentials of instances gone
	// from their clouds (a nodeauth.Registry).
	Credentials interface{ Forget(nodes ...string) error }
}

// New makes a controller. Call Recover before the first Cycle.
func New(o Options) (*Controller, error) {
	if o.Config == nil || o.Store == nil || o.Agents == nil || o.Pending == nil || o.Now == nil {
		return nil, errors.New("controller: config, store, agents, pending demand and clock are required")
	}
	log := o.Log
	if log == nil {
		log = hclog.NewNullLogger()
	}
	act, err := actuator.New(actuator.Options{Journal: o.Store, Pools: o.Config.Pools, Providers: o.Clouds,
		Fleet: o.Config.Controller.Fleet, Now: o.Now, Log: log, DryRun: o.DryRun})
	if err != nil {
		return nil, err
	}
	c := &Controller{cfg: o.Config, store: o.Store, clouds: o.Clouds, act: act, agents: o.Agents, pending: o.Pending, source: o.Demand, creds: o.Credentials,
		now: o.Now, log: log, dryRun: o.DryRun, cancelled: map[string]time.Time{}, ready: map[string]time.Time{},
		reused: map[string]bool{}, orphanLists: map[providers.Reaper][]providers.Orphan{}, metrics: newMetrics(),
		missing: map[string]time.Time{}, going: map[string]time.Time{}, terminated: map[string]time.Time{}}
	c.started = act.Started()
	if c.loop, err = loop.New(loop.Options{Config: o.Config, Books: o.Store, Log: log, DryRun: o.DryRun, Advise: true}); err != nil {
		return nil, err
	}
	if !o.DryRun {
		if err := o.Store.ClaimFleet(o.Config.Controller.Fleet); err != nil {
			return nil, err
		}
	}
	c.metrics.reg.MustRegister(snapshotCollector{c})
	return c, nil
}

// Recover reconciles the journal with the clouds (see Actuator.Recover),
// fills the steps of the demand history's window it has not recorded from
// the demand source's past, if it has one (see Backfilled), and hands the
// stored drains back to the agents. A dry run reads the clouds only.
func (c *Controller) Recover(ctx context.Context) error {
	if !c.dryRun {
		r, err := c.act.Recover(ctx)
		if err != nil {
			return err
		}
		c.log.Info("journal recovered", "done", len(r.Done), "dropped", len(r.Dropped), "unsettled", len(r.Unsettled))
		if err := r.Err(); err != nil {
			// Settled in a later cycle; those pools are left alone until.
			c.log.Warn("journal not fully recovered", "error", err)
		}
		if err := c.settled(c.now(), r); err != nil {
			return err
		}
	}
	if err := c.recordPools(); err != nil {
		return err
	}
	cancels, err := c.store.CancelledDrains()
	if err != nil {
		return err
	}
	for _, x := range cancels {
		c.cancelled[x.Node] = x.At
	}
	ready, err := c.store.ReadyNodes()
	if err != nil {
		return err
	}
	for _, x := range ready {
		c.ready[x.Node] = x.At
	}
	c.backfilled, c.didBackfill = c.backfill(ctx)
	if c.dryRun {
		return nil // a dry run asks nothing of the agents
	}
	drains, err := c.store.Drains()
	if err != nil {
		return err
	}
	for _, d := range drains {
		c.agents.SetDrain(d.Node, c.drainRequest(d))
	}
	return nil
}

// Backfilled is what Recover did to fill the demand history from the
// demand source; ok is false when it had nothing to do it with (no source
// with a past, or demand.backfill = false).
func (c *Controller) Backfilled() (b Backfilled, ok bool) { return c.backfilled, c.didBackfill }

func (c *Controller) drainRequest(d state.Drain) *report.DrainRequest {
	return &report.DrainRequest{ID: "drain-" + d.Node + "-" + d.Started.UTC().Format("20060102T150405Z"),
		Since: d.Started, Deadline: d.Deadline, Signal: c.cfg.Drain.Signal}
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

// Cycle runs one control cycle and returns its plan; RunCycle says what
// became of each action too. Errors acting on one pool are logged and the
// rest of the plan still runs; the error returned joins them.
func (c *Controller) Cycle(ctx context.Context) (planner.Plan, error) {
	r, err := c.RunCycle(ctx)
	return r.Plan, err
}

// RunCycle runs one control cycle through the decision loop and returns
// its plan with the outcome of each action: done, refused by the cloud,
// failed, or, in a dry run, only planned. Errors acting on one pool are
// logged and the rest of the plan still runs; the error returned joins
// them. A cycle that stops before planning returns an empty plan and its
// error.
func (c *Controller) RunCycle(ctx context.Context) (loop.CycleResult, error) {
	now := c.now()
	f := &cycleFleet{c: c}
	if !c.dryRun {
		// An intent whose outcome was unknown (a timeout, a cloud error)
		// is settled against the cloud before anything new is observed or
		// decided; a pool whose intents cannot be settled yet is left
		// alone.
		var err error
		if f.unsettled, err = c.act.Recover(ctx); err != nil {
			return loop.CycleResult{}, err
		}
		if err := c.settled(now, f.unsettled); err != nil {
			return loop.CycleResult{}, err
		}
	}
	r, err := c.loop.Cycle(ctx, f, now)
	err = errors.Join(err, f.protectErr)
	if r.State == nil {
		return loop.CycleResult{}, err
	}
	c.metrics.planSeconds.Observe(r.PlanTook.Seconds())
	fc, plan := r.Forecast, &r.Plan
	c.mu.Lock()
	if prev := c.lastFC; fc.Note != "" && (prev == nil || prev.Note == "" || prev.Model != fc.Model) {
		// Said when it starts, not every cycle: a short history's note
		// lasts a day, with figures that change every cycle.
		c.log.Info("forecast note", "model", fc.Model, "note", fc.Note)
	}
	c.lastPlan, c.lastState, c.lastCycle, c.gpusOf = plan, r.State, now, nil
	c.lastFC = nil
	if len(fc.Values) > 0 {
		c.lastFC = &fc
	}
	c.mu.Unlock()
	for _, n := range plan.Notes {
		switch n.Code {
		case planner.ReasonForecastMalformed, planner.ReasonForecastAbsurd, planner.ReasonForecastNotANumber, planner.ReasonForecastNegative:
			// A forecast the planner would not take as given is a fault
			// (docs/design.md rule 10): logged where the default level
			// shows it, every cycle it lasts.
			c.log.Warn("forecast not used as given", "note", n.Text, "code", n.Code)
		default:
			c.log.Info("plan note", "note", n.Text, "code", n.Code)
		}
	}
	c.countActions(plan, r.Outcomes)
	return r, err
}

// cycleFleet is the fleet as one cycle of the controller observes and
// acts on it, for the decision loop: the clouds, through the journaling
// actuator, and the agents.
type cycleFleet struct {
	c *Controller
	// unsettled is what settling the journal before the cycle left.
	unsettled actuator.Recovered
	// drainStart is when each draining node's drain began, as observed.
	drainStart map[string]time.Time
	// What Observe saw, for Commit: the clouds' reading, the drains and
	// nodes, whether every part was read, and the nodes newly ready.
	reading *actuator.Reading
	drains  []state.Drain
	state   *fleet.State
	full    bool
	ready   []string
	// protectErr is why reported work could not be protected from the
	// groups' own scale-in this cycle (the cycle goes on).
	protectErr error
}

// Observe reads every pool and the agents' reports (see observe). It
// writes nothing: Commit does, after the cycle has planned.
func (f *cycleFleet) Observe(ctx context.Context, now time.Time) (loop.Observation, error) {
	c := f.c
	drains, err := c.store.Drains()
	if err != nil {
		return loop.Observation{}, err
	}
	st, err := c.observe(ctx, now, f, drains)
	if err != nil {
		return loop.Observation{}, err
	}
	obs := loop.Observation{State: &st, Err: errors.Join(f.unsettled.Err(), f.reading.Err)}
	f.drains, f.state, f.full = drains, &st, obs.Err == nil
	obs.InUse = c.sourceInUse(ctx, now)
	if f.reading.Never {
		obs.Unrecorded = "a pool has never been read"
	}
	f.drainStart = map[string]time.Time{}
	for i := range st.Nodes {
		if n := &st.Nodes[i]; n.State == fleet.Draining {
			f.drainStart[n.ID] = n.DrainStartedAt
		}
	}
	return obs, nil
}

// Commit writes what the cycle's observation implies, once it has
// planned: the clouds' records (instances first seen, launches claimed),
// the nodes first ready; after a full read, it forgets what is gone and
// returns the gone nodes' drains for the loop to forget; and it protects
// reported work from the groups' own scale-in. A dry run writes nothing.
func (f *cycleFleet) Commit(ctx context.Context, now time.Time) ([]string, error) {
	c := f.c
	if f.reading == nil {
		return nil, nil
	}
	if err := c.act.Commit(f.reading); err != nil {
		return nil, err
	}
	if c.dryRun {
		return nil, nil
	}
	if len(f.ready) > 0 {
		if err := c.store.PutReady(now, f.ready...); err != nil {
			return nil, err
		}
		for _, id := range f.ready {
			c.ready[id] = now
		}
	}
	var gone []string
	if f.full {
		// Only a full read says what is gone.
		var err error
		if gone, err = c.forgetGone(now, f.drains, f.state.Nodes); err != nil {
			return nil, err
		}
	}
	// Work is protected before anything is scaled in.
	f.protectErr = c.protect(ctx, f.state)
	return gone, nil
}

// Launch launches through the actuator, which journals the intent first.
func (f *cycleFleet) Launch(ctx context.Context, pool string, count int) error {
	err := f.c.act.Launch(ctx, pool, count)
	if providers.ShouldBackOff(err) {
		f.c.metrics.capacityErrors.WithLabelValues(pool).Inc()
	}
	return err
}

// Terminate terminates a's node: an orphan through its reaper, a launch
// never listed by giving the unit up, any other through the actuator;
// then the node's stand-in, agent view and cancelled drain are forgotten.
func (f *cycleFleet) Terminate(ctx context.Context, now time.Time, a *planner.Action) error {
	c := f.c
	var err error
	if _, orphan := c.orphans[a.Node]; orphan {
		err = c.reap(ctx, a.Node)
	} else {
		// A launch never listed by its deadline has nothing in the cloud
		// to terminate: its unit is given up (Spend).
		err = c.act.Terminate(ctx, a.Pool, a.Node)
	}
	if err != nil {
		return err
	}
	c.going[a.Node] = now // its cloud took the termination: gone once unlisted
	c.terminated[a.Node] = now
	after := c.act.Spend(a.Node)
	if after == nil {
		c.agents.Forget(a.Node)
		after = c.forgetCancelled(a.Node)
		if t, ok := f.drainStart[a.Node]; ok {
			c.metrics.drainSeconds.Observe(now.Sub(t).Seconds())
		}
	}
	if after != nil {
		return &loop.FollowUpError{Err: after}
	}
	return nil
}

// Drain hands the drain, on disk already, to the node's agent.
func (f *cycleFleet) Drain(ctx context.Context, d state.Drain) error {
	f.c.agents.SetDrain(d.Node, f.c.drainRequest(d))
	f.c.log.Info("draining", "pool", d.Pool, "node", d.Node, "deadline", d.Deadline)
	return nil
}

// CancelDrain tells the node's agent its drain is cancelled and records
// when, so the planner does not drain it again at once.
func (f *cycleFleet) CancelDrain(ctx context.Context, now time.Time, a *planner.Action) error {
	c := f.c
	c.agents.SetDrain(a.Node, nil)
	c.cancelled[a.Node] = now
	c.log.Warn("drain cancelled", "pool", a.Pool, "node", a.Node, "reason", a.Reason)
	if err := c.store.PutCancelled(a.Node, now); err != nil {
		return &loop.FollowUpError{Err: err}
	}
	return nil
}

// protect protects the instances whose agents have reported (ready or
// draining nodes; never an unknown one, which is not the controller's to
// change) from their group's own scale-in, where the cloud has one
// (an Auto Scaling group's policies, a person lowering its desired
// capacity), and never lifts it: only Fleetcast chooses which node goes,
// and it names the instance when it terminates one, which protection does
// not hold back. Pools not read this cycle are left as they are.
func (c *Controller) protect(ctx context.Context, st *fleet.State) error {
	var errs []error
	for _, ps := range st.Pools {
		pool, _ := c.act.Pool(ps.Name)
		pr, ok := c.clouds[ps.Name].(providers.Protector)
		if !ok || ps.IsUnobserved() {
			continue
		}
		// Ready and draining nodes are listed instances; most are
		// protected already, and a pool with none unprotected is done.
		var unprotected map[string]bool
		for _, in := range c.act.Listed(ps.Name) {
			if !in.Protected {
				if unprotected == nil {
					unprotected = map[string]bool{}
				}
				unprotected[in.ID] = true
			}
		}
		var on []string
		for i := range st.Nodes {
			n := &st.Nodes[i]
			if unprotected[n.ID] && n.Pool == ps.Name && (n.State == fleet.Ready || n.State == fleet.Draining) && !n.Unknown {
				on = append(on, n.ID)
			}
		}
		if len(on) == 0 {
			continue
		}
		if err := pr.SetProtected(ctx, pool, on, true); err != nil {
			c.log.Warn("instances not protected from scale-in", "pool", ps.Name, "nodes", len(on), "error", err)
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// sourceInUse is the demand source's reading of the GPUs in use (GPUs on
// nodes whose agents are not yet reporting, say), 0 with no source or a
// failed reading: the loop counts the larger of it and the agents' count.
func (c *Controller) sourceInUse(ctx context.Context, now time.Time) float64 {
	if c.source == nil {
		return 0
	}
	v, err := c.source.GPUsInUse(ctx, now)
	if err != nil {
		c.metrics.demandSourceErrors.Inc()
		c.log.Warn("demand source failed; the agents' count stands", "error", err)
		return 0
	}
	return v
}

// settled takes up what settling the journal did: the loop forgets the
// drains of the nodes whose terminations it found made, and backs off the
// pools whose journaled launches, sent again, the cloud refused. (The
// rest of what is known of such a node is forgotten as of any node gone,
// after GoneGrace unlisted: its termination was found made by one listing
// alone.)
func (c *Controller) settled(now time.Time, r actuator.Recovered) error {
	var terminated []string
	for _, in := range r.Done {
		if in.Kind == state.IntentTerminate {
			terminated = append(terminated, in.Node)
		}
	}
	if err := c.loop.ForgetDrains(terminated...); err != nil {
		return err
	}
	for _, pool := range slices.Sorted(maps.Keys(r.Refused)) {
		c.metrics.capacityErrors.WithLabelValues(pool).Inc()
		if err := c.loop.BackOff(now, pool, r.Refused[pool].Error(), providers.OutOfCapacity(r.Refused[pool])); err != nil {
			return err
		}
	}
	return nil
}

// observe reads every pool's group (through the actuator, which says
// which instances are this controller's own) and joins it with the
// agents' reports, the stored drains and the pending demand (the loop
// adds back-offs and recent drains from the store). A pool whose group
// cannot be read is taken as last read and marked unobserved, so the
// planner changes nothing in it while the rest of the fleet is planned as
// usual. It writes nothing: what it implies is kept in f for Commit.
func (c *Controller) observe(ctx context.Context, now time.Time, f *cycleFleet, drains []state.Drain) (fleet.State, error) {
	st := fleet.State{CapturedAt: now}
	st.PendingGPUs, st.Scoped = c.pending.Demand(now)
	st.Announced, st.UnderWay = c.pending.Announced(now)
	ends := c.pending.Ends(now)
	byNode := make(map[string]state.Drain, len(drains))
	for _, d := range drains {
		byNode[d.Node] = d
	}
	rd, err := c.act.Read(ctx, now, f.unsettled.Unsettled, func(id string) bool { return !c.ready[id].IsZero() })
	if err != nil {
		return st, err
	}
	f.reading, f.ready = rd, nil
	// Room for the nodes read, so thousands are not appended into
	// ever-growing copies.
	hint := 0
	for i := range rd.Pools {
		hint += len(rd.Pools[i].Instances)
	}
	st.Nodes = make([]fleet.Node, 0, hint)
	for i := range rd.Pools {
		pr := &rd.Pools[i]
		name := pr.Status.Name
		if code := pr.Status.Unobserved.Code; code == fleet.UnobservedReadFailed || code == fleet.UnobservedNeverRead {
			c.metrics.describeErrors.WithLabelValues(name).Inc()
		}
		st.Pools = append(st.Pools, pr.Status)
		for k := range pr.Instances {
			in := &pr.Instances[k]
			n := fleet.Node{ID: in.ID, Pool: name, Zone: in.Zone, LaunchedAt: in.LaunchedAt, DrainCancelledAt: c.cancelled[in.ID], Machine: in.Machine}
			healthy := c.agents.Observe(&n)
			ends.Apply(&n)
			if healthy && c.ready[in.ID].IsZero() && !c.dryRun {
				f.ready = append(f.ready, in.ID)
			}
			d, draining := byNode[in.ID]
			switch {
			case in.State == providers.InstanceTerminating:
				n.State, n.Stopped = fleet.Terminating, in.Stopped
			case draining:
				n.State, n.DrainStartedAt = fleet.Draining, d.Started
				id := c.drainRequest(d).ID
				n.DrainAcked, n.DrainConfirmed = c.agents.Holds(in.ID, id), c.agents.Confirmed(in.ID, id)
			case healthy || len(n.Jobs) > 0 || !c.ready[in.ID].IsZero():
				// Ready once its agent reads healthy GPUs (docs/design.md rule
				// 7). A node running jobs, or that has been ready before
				// (this controller may have restarted and not heard from
				// its agent yet), is never taken for a launch that failed:
				// that would terminate its work. With no fresh report it
				// is silent, and so never idle.
				n.State = fleet.Ready
			default:
				var own bool
				n.State = fleet.Pending
				n.LaunchedAt, own = rd.LaunchedAt(pr, in)
				if own {
					// Launched by this controller and not ready yet: it
					// counts as capacity until its provisioning deadline,
					// from when the launch was decided, or from this
					// controller's start for a launch from before it (its
					// agent may simply not have reported to this process
					// yet).
					if in.Failing != nil && in.State == providers.InstancePending {
						n.LaunchFailing = in.Failing.Error()
					}
					// Booted, as its cloud says: past its deadline while
					// the agents are cut off, it is held (docs/design.md rule 9).
					n.Booted = in.State == providers.InstanceRunning && !in.Owed
					break
				}
				// Not launched by this controller, or not provably: a
				// fleet it adopted, a state directory lost, another
				// controller's or a person's instance. It may hold work
				// nobody reported, so it is never terminated at a
				// deadline, nor drained (docs/design.md rule 2); a booting
				// one counts as capacity for one provisioning deadline
				// from when it was first seen here.
				n.Unknown = true
				if in.State == providers.InstanceRunning && !in.Owed {
					n.State = fleet.Ready
				}
			}
			st.Nodes = append(st.Nodes, n)
		}
	}
	if err := c.observeOrphans(ctx, byNode, &st); err != nil {
		rd.Err = errors.Join(rd.Err, err)
	}
	return st, nil
}
