package controller

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"

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
	cfg     *config.Config
	store   *state.Store
	clouds  map[string]providers.Provider
	act     *Actuator
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
	// seen is each pool's group as last read, which stands in for it
	// while the cloud cannot be read.
	seen map[string]seenGroup
	// firstSeen is when each instance was first seen in its cloud (also in
	// the store): an instance first seen after a launch may be the
	// launch's, one seen before it never is.
	firstSeen map[string]time.Time
	// standIns are the stand-ins the last cycle took for this controller's
	// own launches (capacity a group owes, instances a keyed group does
	// not list yet), with the key of the launch each is for: terminating
	// one gives up that unit of the launch.
	standIns map[string]string
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
	Store  *state.Store
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
	act, err := NewActuator(o.Store, o.Config.Pools, o.Clouds, o.Now, log)
	if err != nil {
		return nil, err
	}
	c := &Controller{cfg: o.Config, store: o.Store, clouds: o.Clouds, act: act, agents: o.Agents, pending: o.Pending, source: o.Demand, creds: o.Credentials,
		now: o.Now, log: log, dryRun: o.DryRun, cancelled: map[string]time.Time{}, ready: map[string]time.Time{}, seen: map[string]seenGroup{},
		firstSeen: map[string]time.Time{}, standIns: map[string]string{}, reused: map[string]bool{}, orphanLists: map[providers.Reaper][]providers.Orphan{}, metrics: newMetrics(),
		missing: map[string]time.Time{}, going: map[string]time.Time{}, terminated: map[string]time.Time{}}
	act.Fleet = o.Config.Controller.Fleet
	c.started = o.Now()
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
		if err := c.backOffRefused(c.now(), r); err != nil {
			return err
		}
	}
	if err := c.recordPools(); err != nil {
		return err
	}
	seen, err := c.store.SeenNodes()
	if err != nil {
		return err
	}
	for _, x := range seen {
		c.firstSeen[x.Node] = x.At
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
			if p, ok := c.act.pools[n.Pool]; ok {
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
	r, err := c.loop.Cycle(ctx, f, now)
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
	// drainStart is when each draining node's drain began, as observed.
	drainStart map[string]time.Time
}

// Observe settles journaled intents whose outcome was unknown, reads
// every pool and the agents' reports (see observe), forgets what is gone
// after a full read, and protects reported work from the groups' own
// scale-in.
func (f *cycleFleet) Observe(ctx context.Context, now time.Time) (loop.Observation, error) {
	c := f.c
	var unsettled Recovered
	if !c.dryRun {
		// An intent whose outcome was unknown (a timeout, a cloud error)
		// is settled against the cloud before anything new is decided;
		// a pool whose intents cannot be settled yet is left alone.
		var err error
		if unsettled, err = c.act.Recover(ctx); err != nil {
			return loop.Observation{}, err
		}
		if err := c.backOffRefused(now, unsettled); err != nil {
			return loop.Observation{}, err
		}
	}
	drains, err := c.store.Drains()
	if err != nil {
		return loop.Observation{}, err
	}
	st, unread, err := c.observe(ctx, now, drains, unsettled.Unsettled)
	if err != nil {
		return loop.Observation{}, err
	}
	obs := loop.Observation{State: &st, Err: errors.Join(unsettled.Err(), unread.err)}
	if !c.dryRun && obs.Err == nil {
		// Only a full read says what is gone.
		if err := c.forgetGone(now, drains, st.Nodes); err != nil {
			return loop.Observation{}, err
		}
	}
	obs.InUse = c.sourceInUse(ctx, now)
	if unread.never {
		obs.Unrecorded = "a pool has never been read"
	}
	f.drainStart = map[string]time.Time{}
	for i := range st.Nodes {
		if n := &st.Nodes[i]; n.State == fleet.Draining {
			f.drainStart[n.ID] = n.DrainStartedAt
		}
	}
	if !c.dryRun {
		// Work is protected before anything is scaled in.
		obs.Err = errors.Join(obs.Err, c.protect(ctx, &st))
	}
	return obs, nil
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
	} else if isUnlisted(a.Node) {
		// Launched but never listed by its deadline: nothing in the
		// cloud to terminate; the unit is given up.
		c.log.Warn("launched instance never listed by its provisioning deadline; given up", "pool", a.Pool, "launch", c.standIns[a.Node])
	} else {
		err = c.act.Terminate(ctx, a.Pool, a.Node)
	}
	if err != nil {
		return err
	}
	c.going[a.Node] = now // its cloud took the termination: gone once unlisted
	c.terminated[a.Node] = now
	after := c.spendStandIn(a.Node)
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
		pool := c.act.pools[ps.Name]
		pr, ok := c.clouds[ps.Name].(providers.Protector)
		if !ok || ps.IsUnobserved() {
			continue
		}
		// Ready and draining nodes are listed instances; most are
		// protected already, and a pool with none unprotected is done.
		var unprotected map[string]bool
		for _, in := range c.seen[ps.Name].instances {
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

func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// seenGroup is a pool's group as last read.
type seenGroup struct {
	instances []providers.Instance
	keyed     bool
	at        time.Time
}

// backOffRefused backs off the pools whose journaled launches, sent
// again by recovery, the cloud refused.
func (c *Controller) backOffRefused(now time.Time, r Recovered) error {
	for _, pool := range slices.Sorted(maps.Keys(r.Refused)) {
		c.metrics.capacityErrors.WithLabelValues(pool).Inc()
		if err := c.loop.BackOff(now, pool, r.Refused[pool].Error(), providers.OutOfCapacity(r.Refused[pool])); err != nil {
			return err
		}
	}
	return nil
}

// launchesByPool reads the controller's launch records, by pool, and
// forgets those no longer needed: two provisioning deadlines after a
// launch was decided, once no instance it claimed is left that has never
// been ready (so one of its own that a restart or an unreadable pool kept
// past its deadline is still terminated at it). A record kept longer
// claims nothing new: it claims only within its provisioning timeout.
func (c *Controller) launchesByPool(now time.Time) (map[string][]state.Launch, error) {
	all, err := c.store.Launches()
	if err != nil {
		return nil, err
	}
	out := map[string][]state.Launch{}
	var expired []string
	listed := map[string]map[string]bool{} // pool -> instances last read
	waiting := func(l state.Launch) bool {
		if _, read := c.seen[l.Pool]; !read {
			return true // not read since start-up: its instances are not known yet
		}
		ids, ok := listed[l.Pool]
		if !ok {
			ids = map[string]bool{}
			for _, in := range c.seen[l.Pool].instances {
				ids[in.ID] = true
			}
			listed[l.Pool] = ids
		}
		return slices.ContainsFunc(l.Claimed, func(id string) bool { return ids[id] && c.ready[id].IsZero() })
	}
	for _, l := range all {
		p, inConfig := c.act.pools[l.Pool]
		if !inConfig {
			// A pool no longer configured: nothing of it is acted on.
			p.ProvisionTimeout = forecast.Day
		}
		if now.Sub(l.At) > 2*p.ProvisionTimeout && (!inConfig || !waiting(l)) {
			expired = append(expired, l.Key)
			continue
		}
		out[l.Pool] = append(out[l.Pool], l)
	}
	if len(expired) > 0 && !c.dryRun {
		if err := c.store.DeleteLaunches(expired...); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// spendStandIn gives up the unit of this controller's launch that a
// stand-in it terminated was for, so that it is not matched again.
func (c *Controller) spendStandIn(node string) error {
	key, ok := c.standIns[node]
	if !ok {
		return nil
	}
	all, err := c.store.Launches()
	if err != nil {
		return err
	}
	for _, l := range all {
		if l.Key == key {
			l.Spent++
			delete(c.standIns, node)
			return c.store.PutLaunches(l)
		}
	}
	return nil
}

// unreadPools says which pools' groups could not be read this cycle.
type unreadPools struct {
	// err joins the read errors; nil when every pool was read.
	err error
	// never is set when a pool that could not be read was never read
	// since start-up, so its nodes are unknown.
	never bool
}

// observe reads every pool's group and joins it with the agents' reports,
// the stored drains and the pending demand (the loop adds back-offs and
// recent drains from the store).
// A pool whose group cannot be read is taken as last read and marked
// unobserved, so the planner changes nothing in it while the rest of the
// fleet is planned as usual.
func (c *Controller) observe(ctx context.Context, now time.Time, drains []state.Drain, unsettled map[string]error) (fleet.State, unreadPools, error) {
	st := fleet.State{CapturedAt: now}
	st.PendingGPUs, st.Scoped = c.pending.Demand(now)
	st.Announced, st.UnderWay = c.pending.Announced(now)
	ends := c.pending.Ends(now)
	var unread unreadPools
	byNode := make(map[string]state.Drain, len(drains))
	for _, d := range drains {
		byNode[d.Node] = d
	}
	// Room for the nodes last read, so thousands are not appended into
	// ever-growing copies.
	hint := 0
	for _, g := range c.seen {
		hint += len(g.instances)
	}
	st.Nodes = make([]fleet.Node, 0, hint)
	launches, err := c.launchesByPool(now)
	if err != nil {
		return st, unread, err
	}
	// Launches still journaled have an outcome not known yet (the cloud
	// did not answer, or cannot be read to settle them): their capacity
	// may be coming, so it counts, and against the limits, until they
	// settle.
	intents, err := c.store.Intents()
	if err != nil {
		return st, unread, err
	}
	inFlight := map[string][]state.Intent{}
	for _, in := range intents {
		if in.Kind == state.IntentLaunch {
			inFlight[in.Pool] = append(inFlight[in.Pool], in)
		}
	}
	clear(c.standIns)
	var errs []error
	var newlyReady, newlySeen []string // written to the store in one transaction each
	var claimed []state.Launch
	described := c.describeAll(ctx)
	for i, p := range c.cfg.Pools {
		ps := fleet.PoolStatus{Name: p.Name}
		g, err := described[i].group, described[i].err
		instances := g.Instances
		if err != nil {
			if ctx.Err() != nil {
				return st, unread, ctx.Err()
			}
			c.metrics.describeErrors.WithLabelValues(p.Name).Inc()
			last, ok := c.seen[p.Name]
			ps.Unobserved = fleet.Unobserved{Code: fleet.UnobservedReadFailed, Err: err.Error(), LastRead: last.at}
			if !ok {
				ps.Unobserved.Code = fleet.UnobservedNeverRead
				unread.never = true
			}
			instances = last.instances
			errs = append(errs, fmt.Errorf("controller: reading pool %s (left as it is this cycle): %w", p.Name, err))
		} else {
			c.seen[p.Name] = seenGroup{instances: g.Instances, keyed: g.Keyed, at: now}
			ps.MinNodes = g.Min
			if why := unsettled[p.Name]; why != nil {
				// Its group reads now, but an earlier change's outcome is
				// not settled: nothing new until it is.
				ps.Unobserved = fleet.Unobserved{Code: fleet.UnobservedUnsettled, Err: why.Error()}
			}
		}
		instances = c.ownFleet(instances)
		st.Pools = append(st.Pools, ps)
		for _, in := range instances {
			if _, ok := c.firstSeen[in.ID]; !ok && !in.Owed {
				c.firstSeen[in.ID] = now
				newlySeen = append(newlySeen, in.ID)
			}
		}
		own := claim(launches[p.Name], instances, c.seen[p.Name].keyed, c.firstSeen, p.ProvisionTimeout, now, c.started)
		if !ps.IsUnobserved() {
			claimed = append(claimed, own.changed...)
		}
		for _, in := range inFlight[p.Name] {
			if c.dryRun && now.Sub(in.Created) > p.ProvisionTimeout {
				// Left by a controller that stopped; a dry run does not
				// settle it, and a live one would not count it any more.
				continue
			}
			own.standIns(in.Key, in.Count, in.Created)
		}
		instances = append(instances, own.unlisted...)
		for _, in := range instances {
			n := fleet.Node{ID: in.ID, Pool: p.Name, Zone: in.Zone, LaunchedAt: in.LaunchedAt, DrainCancelledAt: c.cancelled[in.ID], Machine: in.Machine}
			healthy := c.agents.Observe(&n)
			ends.Apply(&n)
			if healthy && c.ready[in.ID].IsZero() && !c.dryRun {
				c.ready[in.ID] = now
				newlyReady = append(newlyReady, in.ID)
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
			case !own.at[in.ID].IsZero():
				// Launched by this controller and not ready yet: it counts
				// as capacity until its provisioning deadline, from when
				// the launch was decided, or from this controller's start
				// for a launch from before it (its agent may simply not
				// have reported to this process yet).
				n.State = fleet.Pending
				n.LaunchedAt = later(own.at[in.ID], c.started)
				if in.Failing != nil && in.State == providers.InstancePending {
					n.LaunchFailing = in.Failing.Error()
				}
				// Booted, as its cloud says: past its deadline while
				// the agents are cut off, it is held (docs/design.md rule 9).
				n.Booted = in.State == providers.InstanceRunning && !in.Owed
				if in.Owed || isUnlisted(in.ID) {
					c.standIns[in.ID] = own.by[in.ID]
				}
			default:
				// Not launched by this controller, or not provably: a
				// fleet it adopted, a state directory lost, another
				// controller's or a person's instance. It may hold work
				// nobody reported, so it is never terminated at a
				// deadline, nor drained (docs/design.md rule 2); a booting one counts as
				// capacity for one provisioning deadline from when it was
				// first seen here.
				n.Unknown = true
				n.State = fleet.Pending
				if in.State == providers.InstanceRunning && !in.Owed {
					n.State = fleet.Ready
				}
				if t, ok := c.firstSeen[in.ID]; ok {
					n.LaunchedAt = t
				}
				n.LaunchedAt = later(n.LaunchedAt, c.started)
			}
			st.Nodes = append(st.Nodes, n)
		}
	}
	if len(newlyReady) > 0 {
		if err := c.store.PutReady(now, newlyReady...); err != nil {
			return st, unread, err
		}
	}
	if len(newlySeen) > 0 && !c.dryRun {
		if err := c.store.PutSeen(now, newlySeen...); err != nil {
			return st, unread, err
		}
	}
	if len(claimed) > 0 && !c.dryRun {
		if err := c.store.PutLaunches(claimed...); err != nil {
			return st, unread, err
		}
	}
	if err := c.observeOrphans(ctx, byNode, &st); err != nil {
		errs = append(errs, err)
	}
	unread.err = errors.Join(errs...)
	return st, unread, nil
}

// MaxDescribes is how many pools' groups are read at once: a cloud or
// plugin that is slow to answer (up to its own timeout) delays the cycle
// by that once, not once per pool, and the other pools are read
// meanwhile.
const MaxDescribes = 8

// described is one pool's group as read, or why it could not be.
type described struct {
	group providers.Group
	err   error
}

// describeAll reads every pool's group, MaxDescribes at a time, and
// returns them in the config's order.
func (c *Controller) describeAll(ctx context.Context) []described {
	out := make([]described, len(c.cfg.Pools))
	slots := make(chan struct{}, MaxDescribes)
	var wg sync.WaitGroup
	for i, p := range c.cfg.Pools {
		slots <- struct{}{}
		wg.Add(1)
		go func() {
			defer func() { <-slots; wg.Done() }()
			out[i].group, out[i].err = c.clouds[p.Name].Describe(ctx, p)
		}()
	}
	wg.Wait()
	return out
}

// ownFleet leaves out the instances tagged as another fleet's (a staging
// controller's direct launches in a pool of the same name): they are that
// controller's to count and to remove. Untagged instances stay (launched
// before fleets were named, or in a group that sets no fleet tag).
func (c *Controller) ownFleet(instances []providers.Instance) []providers.Instance {
	mine := c.cfg.Controller.Fleet
	if !slices.ContainsFunc(instances, func(in providers.Instance) bool { return !in.OfFleet(mine) }) {
		return instances
	}
	out := make([]providers.Instance, 0, len(instances))
	for _, in := range instances {
		if in.OfFleet(mine) {
			out = append(out, in)
		}
	}
	return out
}
