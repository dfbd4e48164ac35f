package controller

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/fleetcast/autoscaler/fleet"
	"github.com/fleetcast/autoscaler/providers"
	"github.com/fleetcast/autoscaler/state"
)

// foundOrphan is an orphan as the last cycle found it, with the provider
// that listed it (which terminates it).
type foundOrphan struct {
	providers.Orphan
	by providers.Reaper
}

// observeOrphans adds the fleet's orphans (instances this fleet launched
// for pools the config no longer has, see providers.Reaper) to the state,
// as nodes of their old pools marked Orphan, with their agents' reports
// and drains. A provider that cannot list them this cycle keeps its last
// list, so a failed read neither forgets an orphan's drain nor makes it
// look gone; one with no last list (the first cycle since the controller
// started) returns the error, so that nothing is taken for gone this
// cycle.
func (c *Controller) observeOrphans(ctx context.Context, byNode map[string]state.Drain, st *fleet.State) error {
	found := map[string]foundOrphan{}
	var errs []error
	for _, l := range providers.ListOrphans(ctx, c.ctl.Fleet, c.set.Pools, c.clouds) {
		list := l.Orphans
		if l.Err != nil {
			last, ok := c.orphanLists[l.Reaper]
			if !ok {
				errs = append(errs, fmt.Errorf("controller: listing orphans (none taken for gone this cycle): %w", l.Err))
			}
			c.log.Warn("orphans not listed; the last list stands", "error", l.Err)
			list = last
		} else {
			c.orphanLists[l.Reaper] = list
		}
		for _, o := range list {
			found[o.ID] = foundOrphan{Orphan: o, by: l.Reaper}
		}
	}
	ids := make([]string, 0, len(found))
	for id := range found {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	for _, id := range ids {
		o := found[id]
		n := fleet.Node{ID: o.ID, Pool: o.Pool, LaunchedAt: o.LaunchedAt, Orphan: true, DrainCancelledAt: c.cancelled[o.ID]}
		c.agents.Observe(&n)
		// What it has and costs, for the fleet's limits: its pool's
		// last config, or more GPUs if its agent read more.
		last := c.lastPools[o.Pool]
		n.GPUs, n.PricePerHour = max(c.agents.GPUs(o.ID), last.GPUsPerNode), last.PricePerHour
		d, draining := byNode[o.ID]
		switch {
		case o.State == providers.InstanceTerminating:
			n.State, n.Stopped = fleet.Terminating, o.Stopped
		case draining:
			drain := c.drainRequest(d).ID
			n.State, n.DrainStartedAt = fleet.Draining, d.Started
			n.DrainAcked, n.DrainConfirmed = c.agents.Holds(o.ID, drain), c.agents.Confirmed(o.ID, drain)
		case o.State == providers.InstanceRunning:
			n.State = fleet.Ready
		default:
			n.State = fleet.Pending
		}
		st.Nodes = append(st.Nodes, n)
	}
	c.orphans = found
	return errors.Join(errs...)
}

// recordPools reads the pools' last records and records the config's
// (not in a dry run, which writes nothing).
func (c *Controller) recordPools() error {
	recs, err := c.store.Pools()
	if err != nil {
		return err
	}
	c.lastPools = make(map[string]state.PoolRecord, len(recs)+len(c.set.Pools))
	for _, r := range recs {
		c.lastPools[r.Name] = r
	}
	now := make([]state.PoolRecord, 0, len(c.set.Pools))
	for _, p := range c.set.Pools {
		r := state.PoolRecord{Name: p.Name, InstanceType: p.InstanceType, GPUsPerNode: p.GPUsPerNode, PricePerHour: p.PricePerHour}
		c.lastPools[p.Name] = r
		now = append(now, r)
	}
	if c.dryRun {
		return nil
	}
	return c.store.PutPools(now...)
}

// reap terminates an orphan the plan reaps, through the provider that
// listed it, journaled (actuator.Actuator.Reap).
func (c *Controller) reap(ctx context.Context, node string) error {
	o, ok := c.orphans[node]
	if !ok {
		return fmt.Errorf("controller: orphan %s is not among those found this cycle", node)
	}
	return c.act.Reap(ctx, o.by, o.Orphan)
}
