package controller

import (
	"context"
	"maps"
	"slices"
	"time"

	"github.com/fleetcast/autoscaler/actuator"
	"github.com/fleetcast/autoscaler/providers"
	"github.com/fleetcast/autoscaler/state"
)

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
	if err := c.restoreUsage(c.now()); err != nil {
		return err
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
