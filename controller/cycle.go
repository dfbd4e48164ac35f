package controller

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/fleetcast/autoscaler/actuator"
	"github.com/fleetcast/autoscaler/fleet"
	"github.com/fleetcast/autoscaler/loop"
	"github.com/fleetcast/autoscaler/planner"
	"github.com/fleetcast/autoscaler/providers"
	"github.com/fleetcast/autoscaler/state"
)

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
	c.keepUsage(now, &r)
	if c.shareViews {
		c.putViews()
	}
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
	if c.slurm != nil && !c.dryRun {
		// The pools' Slurm nodes follow the instances as observed; the
		// cycle's launches are bound to names by this view.
		c.slurm.SetFleet(now, st.Nodes, st.Pools)
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
// In a pool of Slurm nodes, the launch is bound to names first
// (SlurmSource.Bind), which Slurm is told to power up before it is made,
// and launches no more instances than it has names: with fewer free, the
// rest is refused as a lack of capacity, and the pool backs off.
func (f *cycleFleet) Launch(ctx context.Context, pool string, count int) error {
	var names []string
	var short error
	if s := f.c.slurm; s != nil && !f.c.dryRun && s.namedPool(pool) != nil {
		var err error
		if names, err = s.Bind(ctx, pool, count, f.c.now()); err != nil {
			return err
		}
		if len(names) < count {
			short = &providers.InsufficientCapacityError{Pool: pool, Granted: len(names),
				Err: fmt.Errorf("%d of its Slurm nodes free for a launch of %d (powered down in Slurm, not an administrator's, with no instance or launch)", len(names), count)}
			if count = len(names); count == 0 {
				f.c.metrics.capacityErrors.WithLabelValues(pool).Inc()
				return short
			}
		}
	}
	err := f.c.act.LaunchNamed(ctx, pool, count, names)
	switch {
	case err == nil:
		err = short
	case f.c.slurm != nil && providers.ShouldBackOff(err):
		// The cloud's answer: a launch it refused whole bound nothing.
		// (Names of one it granted in part stay bound until listed.)
		if ice := (*providers.InsufficientCapacityError)(nil); !errors.As(err, &ice) || ice.Granted == 0 {
			f.c.slurm.Refused(names)
		}
	}
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

// Drain hands the drain, on disk already, to the node's agent, and, in a
// pool of Slurm nodes, drains the node in Slurm too.
func (f *cycleFleet) Drain(ctx context.Context, d state.Drain) error {
	f.c.agents.SetDrain(d.Node, f.c.drainRequest(d))
	if f.c.slurm != nil && !f.c.dryRun {
		f.c.slurm.Drain(ctx, d.Pool, d.Node)
	}
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
