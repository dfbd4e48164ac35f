package controller

import (
	"slices"
	"time"

	"github.com/fleetcast/autoscaler/fleet"
	"github.com/fleetcast/autoscaler/state"
)

// GoneGrace is how long a node that a full read of the clouds no longer
// lists is remembered (its drain, ready time, first sighting, credential
// and agent's view) before it is taken for gone: a listing may omit a
// live instance for a moment (an eventually consistent read). A node its
// cloud said was going (listed terminating, or terminated by this
// controller) is forgotten as soon as it is unlisted.
const GoneGrace = 10 * time.Minute

// forgetGone drops the agent views, ready times, first sightings and
// credentials of nodes the clouds no longer have (terminated by the cloud,
// a spot reclaim, a person): once unlisted for GoneGrace, or at once if
// their cloud said they were going; and returns those of them with drain
// records, which the loop forgets (it keeps the drains). An agent of a
// node not yet listed is taken up again at its next report.
func (c *Controller) forgetGone(now time.Time, drains []state.Drain, nodes []fleet.Node) ([]string, error) {
	present := make(map[string]bool, len(nodes))
	for i := range nodes {
		present[nodes[i].ID] = true
		delete(c.missing, nodes[i].ID)
		if nodes[i].State == fleet.Terminating && !nodes[i].Stopped {
			c.going[nodes[i].ID] = now
		}
		if p := c.set.Pool(nodes[i].Pool); p != nil && p.Provider == fleet.ProviderPlugin {
			c.reused[nodes[i].ID] = true
		}
	}
	// kept says whether what is known of node stays this cycle: it is
	// listed, or unlisted for less than GoneGrace and not going.
	forgotten := map[string]bool{}
	kept := func(id string) bool {
		_, going := c.going[id]
		switch since, ok := c.missing[id]; {
		case present[id]:
			return true
		case going:
		case !ok:
			c.missing[id] = now
			return true
		case now.Sub(since) < GoneGrace:
			return true
		}
		forgotten[id] = true
		return false
	}
	var gone []string
	for _, d := range drains {
		if kept(d.Node) {
			continue
		}
		c.log.Info("node gone while draining; drain forgotten", "pool", d.Pool, "node", d.Node)
		gone = append(gone, d.Node)
	}
	for id, unsaved := range c.agents.Retain(kept) {
		// Gone without this controller terminating it, under jobs its
		// agent last reported: their work since their last checkpoints
		// is lost, as far as the reports show.
		if _, ours := c.terminated[id]; !ours && unsaved > 0 {
			c.metrics.workLost.Add(unsaved)
			c.log.Warn("node left its cloud under jobs that had not saved their work; counted as lost", "node", id, "gpu_hours", unsaved)
		}
	}
	for id := range c.cancelled {
		if !kept(id) {
			if err := c.forgetCancelled(id); err != nil {
				return nil, err
			}
		}
	}
	var unready []string
	for id := range c.ready {
		if !kept(id) {
			unready = append(unready, id)
		}
	}
	if len(unready) > 0 {
		if err := c.store.DeleteReady(unready...); err != nil {
			return nil, err
		}
		for _, id := range unready {
			delete(c.ready, id)
		}
	}
	unseen, err := c.act.Forget(func(id string) bool { return !kept(id) })
	if err != nil {
		return nil, err
	}
	if len(unseen) > 0 && c.creds != nil {
		// A gone instance's credential speaks for nothing: dropped with
		// it (cloud instance IDs are not reused). A plugin pool's server
		// powered off keeps its own: it comes back under its name.
		unseen = slices.DeleteFunc(unseen, c.namesReused)
		if err := c.creds.Forget(unseen...); err != nil {
			return nil, err
		}
	}
	// Forgotten everywhere: their marks go too. Marks of nodes nothing
	// remembers any more (a stand-in's, an orphan reaped) go after a
	// grace, so that they cannot grow without end.
	for id := range forgotten {
		delete(c.missing, id)
		delete(c.going, id)
		delete(c.terminated, id)
	}
	for _, marks := range []map[string]time.Time{c.going, c.terminated} {
		for id, at := range marks {
			if !present[id] && now.Sub(at) > GoneGrace {
				delete(marks, id)
			}
		}
	}
	for id, at := range c.missing {
		if now.Sub(at) > 2*GoneGrace {
			delete(c.missing, id)
		}
	}
	return gone, nil
}

// namesReused reports whether node's name comes back after it is gone:
// a server of a plugin pool (seen in one, or bootstrapped for one). A
// Slurm node that pools share is not: it is a machine of whichever pool
// supplies it next, which registers afresh.
func (c *Controller) namesReused(node string) bool {
	shared := 0
	for i := range c.set.Pools {
		if slices.Contains(c.set.Pools[i].SlurmNodes, node) {
			shared++
		}
	}
	if shared > 1 {
		return false
	}
	if c.reused[node] {
		return true
	}
	if r, ok := c.creds.(interface{ PoolOf(node string) string }); ok {
		if p := c.set.Pool(r.PoolOf(node)); p != nil && p.Provider == fleet.ProviderPlugin {
			return true
		}
	}
	return false
}

// forgetCancelled drops a gone node's cancelled drain.
func (c *Controller) forgetCancelled(node string) error {
	if _, ok := c.cancelled[node]; !ok {
		return nil
	}
	delete(c.cancelled, node)
	return c.store.DeleteCancelled(node)
}
