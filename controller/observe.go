package controller

import (
	"context"
	"errors"
	"time"

	"github.com/fleetcast/autoscaler/fleet"
	"github.com/fleetcast/autoscaler/providers"
	"github.com/fleetcast/autoscaler/state"
)

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
	if len(c.set.Tiers) > 0 {
		st.PendingTiers = c.pending.Tiers(now)
	}
	st.Announced, st.UnderWay = c.pending.Announced(now)
	c.observeBudgets(&st, now)
	ends := c.pending.Ends(now)
	if c.slurm != nil {
		st.Queue = c.slurm.Queue(now)
	}
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
			n := fleet.Node{ID: in.ID, Pool: name, Zone: in.Zone, Address: in.Address, LaunchedAt: in.LaunchedAt, DrainCancelledAt: c.cancelled[in.ID], Machine: in.Machine}
			healthy := c.agents.Observe(&n)
			ends.Apply(&n)
			if c.slurm != nil && len(n.Jobs) > 0 {
				c.slurm.Label(&n)
			}
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
				if n.DrainConfirmed && c.slurm != nil && !c.slurm.DrainedIdle(name, in.ID) {
					// Slurm's jobs need not be registered with the agent:
					// Slurm must say none runs, and none can start.
					n.DrainConfirmed = false
				}
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
