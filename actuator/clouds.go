package actuator

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/fleetcast/autoscaler/fleet"
	"github.com/fleetcast/autoscaler/forecast"
	"github.com/fleetcast/autoscaler/providers"
	"github.com/fleetcast/autoscaler/state"
)

// Clouds is every pool's group as this controller reads and changes it:
// each read says which instances are this controller's own launches
// (claim), and every change goes through the journaling Actuator. It
// keeps the journal's records (intents, launches and their claims, first
// sightings), and no other part writes them.
//
// A read only reads: what it implies for the records (instances first
// seen, launches' new claims, launch records no longer needed) is kept in
// the Reading and written by Commit, once the cycle has planned. It is
// not safe for concurrent use: one cycle at a time reads and acts.
type Clouds struct {
	act     *Actuator
	journal Journal
	pools   []fleet.Pool
	fleet   string
	log     hclog.Logger
	dryRun  bool
	serial  bool
	// started is when this controller started: launches from before it
	// get their provisioning time from it.
	started time.Time
	// seen is each pool's group as last read, which stands in for it
	// while the cloud cannot be read.
	seen map[string]seenGroup
	// firstSeen is when each instance was first seen in its cloud (also in
	// the journal): an instance first seen after a launch may be the
	// launch's, one seen before it never is.
	firstSeen map[string]time.Time
	// byPool is launchesByPool's, reused.
	byPool map[string][]state.Launch
	// prev is each pool's instances (their IDs) as of the last read
	// committed, all in firstSeen.
	prev map[string][]string
	// standIns are the stand-ins the last read took for this controller's
	// own launches (capacity a group owes, instances a keyed group does
	// not list yet), with the key of the launch each is for: terminating
	// one gives up that unit of the launch (Spend).
	standIns map[string]string
	// buf is the last Reading's storage, reused by the next.
	buf Reading
}

// seenGroup is a pool's group as last read.
type seenGroup struct {
	instances []providers.Instance
	keyed     bool
	at        time.Time
}

// Options are what Clouds needs.
type Options struct {
	Journal Journal
	// Pools are the config's pools, in its order; Providers drives each.
	Pools     []fleet.Pool
	Providers map[string]providers.Provider
	// Fleet is the config's controller.fleet: launches carry it, and
	// instances tagged with another fleet's name are not read.
	Fleet string
	Now   func() time.Time
	Log   hclog.Logger
	// DryRun reads and changes nothing: Commit keeps what a read implies
	// in memory only.
	DryRun bool
	// Serial reads the pools one after another, for providers that answer
	// from memory (the simulator's): no read is worth a goroutine.
	Serial bool
	// Rand, if set, is where launch keys' random bits come from
	// (Actuator.Rand).
	Rand io.Reader
	// Term, if set, is the leader's term, carried in every idempotency
	// key (Actuator.Term).
	Term func() int64
	// Journaled, if set, is told of each intent journaled, before its
	// call (Actuator.Journaled).
	Journaled func(state.Intent)
}

// New makes Clouds over the pools and reads the journal's first
// sightings. Call Recover before the first Read to settle the journal.
func New(o Options) (*Clouds, error) {
	act, err := NewActuator(o.Journal, o.Pools, o.Providers, o.Now, o.Log)
	if err != nil {
		return nil, err
	}
	act.Fleet, act.Rand, act.Term, act.Journaled = o.Fleet, o.Rand, o.Term, o.Journaled
	c := &Clouds{act: act, journal: o.Journal, pools: o.Pools, fleet: o.Fleet, log: act.log, dryRun: o.DryRun, serial: o.Serial,
		started: o.Now(), seen: map[string]seenGroup{}, firstSeen: map[string]time.Time{}, standIns: map[string]string{}}
	seen, err := o.Journal.SeenNodes()
	if err != nil {
		return nil, err
	}
	for _, x := range seen {
		c.firstSeen[x.Node] = x.At
	}
	return c, nil
}

// Started is when these Clouds were made: the controller's start.
func (c *Clouds) Started() time.Time { return c.started }

// Pool is the config's pool of that name.
func (c *Clouds) Pool(name string) (fleet.Pool, bool) {
	p, ok := c.act.pools[name]
	return p, ok
}

// Listed is pool's instances as last read (nil if never read). The slice
// is shared: do not modify it.
func (c *Clouds) Listed(pool string) []providers.Instance { return c.seen[pool].instances }

// Recover settles the journal against the clouds (see Actuator.Recover).
func (c *Clouds) Recover(ctx context.Context) (Recovered, error) { return c.act.Recover(ctx) }

// Launch asks pool for count more instances, journaled (Actuator.Launch).
func (c *Clouds) Launch(ctx context.Context, pool string, count int) error {
	return c.act.Launch(ctx, pool, count)
}

// LaunchNamed is Launch with the names the instances are to take
// (Actuator.LaunchNamed).
func (c *Clouds) LaunchNamed(ctx context.Context, pool string, count int, names []string) error {
	return c.act.LaunchNamed(ctx, pool, count, names)
}

// Terminate removes node from pool, journaled (Actuator.Terminate); a
// stand-in for an instance a keyed group never listed by its deadline has
// nothing in the cloud to terminate, and is left to Spend.
func (c *Clouds) Terminate(ctx context.Context, pool, node string) error {
	if IsUnlisted(node) {
		c.log.Warn("launched instance never listed by its provisioning deadline; given up", "pool", pool, "launch", c.standIns[node])
		return nil
	}
	return c.act.Terminate(ctx, pool, node)
}

// Reap terminates an orphan through the provider that listed it,
// journaled (Actuator.Reap).
func (c *Clouds) Reap(ctx context.Context, r providers.Reaper, o providers.Orphan) error {
	return c.act.Reap(ctx, r, c.fleet, o)
}

// Spend gives up the unit of this controller's launch that a stand-in it
// terminated was for, so that it is not matched again. Nothing for a node
// that was no stand-in.
func (c *Clouds) Spend(node string) error {
	key, ok := c.standIns[node]
	if !ok || c.dryRun {
		return nil
	}
	all, err := c.journal.Launches()
	if err != nil {
		return err
	}
	for _, l := range all {
		if l.Key == key {
			l.Spent++
			delete(c.standIns, node)
			return c.journal.PutLaunches(l)
		}
	}
	return nil
}

// Forget drops the first sightings of the nodes gone is true of, and
// returns them. Nothing is written in a dry run.
func (c *Clouds) Forget(gone func(node string) bool) ([]string, error) {
	var out []string
	for id := range c.firstSeen {
		if gone(id) {
			out = append(out, id)
		}
	}
	if len(out) == 0 {
		return nil, nil
	}
	if !c.dryRun {
		if err := c.journal.DeleteSeen(out...); err != nil {
			return nil, err
		}
	}
	for _, id := range out {
		delete(c.firstSeen, id)
	}
	// The next read looks every instance up: one forgotten is new again.
	clear(c.prev)
	return out, nil
}

// Reading is one read of every pool's group, with which instances are
// this controller's own. It is the Clouds' own, reused by the next Read.
type Reading struct {
	// Pools are the pools as read, in the config's order.
	Pools []PoolReading
	// Never is set when a pool that could not be read was never read
	// since start-up: its instances are unknown.
	Never bool
	// Err joins the read errors; nil when every pool was read.
	Err error

	c  *Clouds
	at time.Time
	// What the read implies for the journal, written by Commit: the
	// instances first seen now (also in fresh), launches whose claims
	// changed, and launch records no longer needed.
	seen    []string
	fresh   map[string]bool
	claimed []state.Launch
	expired []string
}

// FirstSeen is when the instance was first seen listed here (the read's
// time, for one never seen before it); zero for capacity owed.
func (r *Reading) FirstSeen(id string) time.Time {
	if r.fresh[id] {
		return r.at
	}
	return r.c.firstSeen[id]
}

// LaunchedAt is when the instance in, one of pr's Instances not yet
// ready, counts as launched, and whether it is this controller's own:
// from when its launch was decided, if a launch of this controller
// accounts for it (its provisioning deadline runs from then); else, not
// known to be its own, from when it was first seen here (as its cloud
// says, for capacity owed). Never before the controller's start: a launch
// from before it, or an instance seen before it, is given its time from
// then.
func (r *Reading) LaunchedAt(pr *PoolReading, in *providers.Instance) (at time.Time, own bool) {
	if at := pr.Launched(in.ID); !at.IsZero() {
		return later(at, r.c.started), true
	}
	at = in.LaunchedAt
	if t := r.FirstSeen(in.ID); !t.IsZero() {
		at = t
	}
	return later(at, r.c.started), false
}

// PoolReading is one pool's group as read.
type PoolReading struct {
	// Status is the pool's name, its group's own minimum, and, if it
	// was not read (or its journal is not settled), why.
	Status fleet.PoolStatus
	// Instances are the group's instances of this fleet (as last read if
	// it could not be read now), then stand-ins for this controller's
	// launches the cloud does not list yet (IsUnlisted).
	Instances []providers.Instance
	own       ownership
	// listed is how many of Instances the group listed (the rest are
	// stand-ins for launches it does not list).
	listed int
}

// Launched is when the launch of this controller that accounts for the
// instance id (one of Instances) was decided (docs/design.md rule 7);
// zero when the instance is not known to be this controller's.
func (pr *PoolReading) Launched(id string) time.Time { return pr.own.at[id] }

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

// Read reads every pool's group at now and works out which of its
// instances this controller launched (claim). A pool whose group cannot
// be read is taken as last read and marked unobserved (so nothing is
// changed in it); one whose journaled changes are not settled
// (unsettled, from Recover) is marked so. ready says whether a node has
// ever been ready (a launch whose instance never was is kept past its
// time). It writes nothing: see Commit. The error is the journal's or
// the context's; the pools' read errors are in the Reading.
func (c *Clouds) Read(ctx context.Context, now time.Time, unsettled map[string]error, ready func(node string) bool) (*Reading, error) {
	r := &c.buf
	r.c, r.at, r.Never, r.Err = c, now, false, nil
	r.seen, r.claimed, r.expired = r.seen[:0], r.claimed[:0], r.expired[:0]
	clear(r.fresh)
	launches, err := c.launchesByPool(now, ready, r)
	if err != nil {
		return nil, err
	}
	// Launches still journaled have an outcome not known yet (the cloud
	// did not answer, or cannot be read to settle them): their capacity
	// may be coming, so it counts, and against the limits, until they
	// settle.
	intents, err := c.journal.Intents()
	if err != nil {
		return nil, err
	}
	var inFlight map[string][]state.Intent
	for _, in := range intents {
		if in.Kind == state.IntentLaunch {
			if inFlight == nil {
				inFlight = map[string][]state.Intent{}
			}
			inFlight[in.Pool] = append(inFlight[in.Pool], in)
		}
	}
	clear(c.standIns)
	if cap(r.Pools) < len(c.pools) {
		r.Pools = make([]PoolReading, len(c.pools))
	}
	r.Pools = r.Pools[:len(c.pools)]
	var errs []error
	described := c.describeAll(ctx)
	for i, p := range c.pools {
		pr := &r.Pools[i]
		pr.Status = fleet.PoolStatus{Name: p.Name}
		g, err := described[i].group, described[i].err
		instances := g.Instances
		if err != nil {
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
			last, ok := c.seen[p.Name]
			pr.Status.Unobserved = fleet.Unobserved{Code: fleet.UnobservedReadFailed, Err: err.Error(), LastRead: last.at}
			if !ok {
				pr.Status.Unobserved.Code = fleet.UnobservedNeverRead
				r.Never = true
			}
			instances = last.instances
			errs = append(errs, fmt.Errorf("actuator: reading pool %s (left as it is this cycle): %w", p.Name, err))
		} else {
			c.seen[p.Name] = seenGroup{instances: g.Instances, keyed: g.Keyed, at: now}
			pr.Status.MinNodes = g.Min
			if why := unsettled[p.Name]; why != nil {
				// Its group reads now, but an earlier change's outcome is
				// not settled: nothing new until it is.
				pr.Status.Unobserved = fleet.Unobserved{Code: fleet.UnobservedUnsettled, Err: why.Error()}
			}
		}
		instances = c.ownFleet(instances)
		if !pr.Status.IsUnobserved() {
			// Sightings are recorded with the claims they allow: in a pool
			// not observed (unread, or its journal unsettled) neither is,
			// so an instance first listed there can still be claimed once
			// it is.
			c.sight(r, p.Name, instances)
		}
		claim(&pr.own, launches[p.Name], instances, c.seen[p.Name].keyed, func(id string) bool { return r.fresh[id] }, p.ProvisionTimeout, now, c.started)
		if !pr.Status.IsUnobserved() {
			r.claimed = append(r.claimed, pr.own.changed...)
		}
		for _, in := range inFlight[p.Name] {
			if c.dryRun && now.Sub(in.Created) > p.ProvisionTimeout {
				// Left by a controller that stopped; a dry run does not
				// settle it, and a live one would not count it any more.
				continue
			}
			pr.own.standIns(in.Key, in.Count, in.Created)
		}
		// The stand-ins taken for this controller's launches: terminating
		// one gives up its unit (Spend).
		pr.listed = len(instances)
		for k := range instances {
			if in := &instances[k]; in.Owed {
				if key, ok := pr.own.by[in.ID]; ok {
					c.standIns[in.ID] = key
				}
			}
		}
		for k := range pr.own.unlisted {
			c.standIns[pr.own.unlisted[k].ID] = pr.own.unlisted[k].LaunchKey
		}
		if len(pr.own.unlisted) > 0 {
			instances = append(slices.Clip(instances), pr.own.unlisted...)
		}
		pr.Instances = instances
	}
	r.Err = errors.Join(errs...)
	return r, nil
}

// sight finds the instances of pool never seen before this read (not
// capacity owed, which is no instance), and keeps them in r. Most of a
// pool's instances were listed in the same order by the read before (kept
// by Commit), which is checked first: only those not found there are
// looked up in the sightings.
func (c *Clouds) sight(r *Reading, pool string, instances []providers.Instance) {
	prev, j := c.prev[pool], 0
	for k := range instances {
		in := &instances[k]
		switch {
		case in.Owed:
			continue
		case j < len(prev) && prev[j] == in.ID:
			j++
			continue
		case j+1 < len(prev) && prev[j+1] == in.ID:
			j += 2 // one listed last time is gone
			continue
		}
		if _, ok := c.firstSeen[in.ID]; ok {
			continue
		}
		if r.fresh == nil {
			r.fresh = map[string]bool{}
		}
		r.fresh[in.ID] = true
		r.seen = append(r.seen, in.ID)
	}
}

// Commit writes what r, the last Read, implies: the instances first seen
// in it, the launches whose claims it changed, and the launch records it
// found no longer needed. In a dry run it keeps the sightings in memory
// and writes nothing.
//
// The claims are written before the sightings: an instance recorded as
// seen can be claimed only in the read that first saw it, so a crash
// between the two must leave it claimed and not yet seen (seen again, a
// claimed instance is not claimed twice), never seen and unclaimed.
func (c *Clouds) Commit(r *Reading) error {
	if !c.dryRun {
		if len(r.claimed) > 0 {
			if err := c.journal.PutLaunches(r.claimed...); err != nil {
				return err
			}
			r.claimed = r.claimed[:0]
		}
		if len(r.expired) > 0 {
			if err := c.journal.DeleteLaunches(r.expired...); err != nil {
				return err
			}
			r.expired = r.expired[:0]
		}
		if len(r.seen) > 0 {
			if err := c.journal.PutSeen(r.at, r.seen...); err != nil {
				return err
			}
		}
	}
	for _, id := range r.seen {
		if _, ok := c.firstSeen[id]; !ok {
			c.firstSeen[id] = r.at
		}
	}
	r.seen = r.seen[:0]
	// Every instance of this read's observed pools is in the sightings
	// now: the next read checks their instances against these first. An
	// unobserved pool's were not sighted, and are looked up.
	if c.prev == nil {
		c.prev = map[string][]string{}
	}
	for i := range r.Pools {
		pr := &r.Pools[i]
		ids := c.prev[pr.Status.Name][:0]
		if !pr.Status.IsUnobserved() {
			for k := range pr.listed {
				if in := &pr.Instances[k]; !in.Owed {
					ids = append(ids, in.ID)
				}
			}
		}
		c.prev[pr.Status.Name] = ids
	}
	return nil
}

// launchesByPool reads the controller's launch records, by pool, and
// marks in r those no longer needed: two provisioning deadlines after a
// launch was decided, once no instance it claimed is left that has never
// been ready (so one of its own that a restart or an unreadable pool kept
// past its deadline is still terminated at it). A record kept longer
// claims nothing new: it claims only within its provisioning timeout.
func (c *Clouds) launchesByPool(now time.Time, ready func(string) bool, r *Reading) (map[string][]state.Launch, error) {
	all, err := c.journal.Launches()
	if err != nil || len(all) == 0 {
		return nil, err
	}
	out := c.byPool
	if out == nil {
		out = map[string][]state.Launch{}
		c.byPool = out
	}
	for pool, ls := range out {
		out[pool] = ls[:0]
	}
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
		return slices.ContainsFunc(l.Claimed, func(id string) bool { return ids[id] && !ready(id) })
	}
	for _, l := range all {
		p, inConfig := c.act.pools[l.Pool]
		if !inConfig {
			// A pool no longer configured: nothing of it is acted on.
			p.ProvisionTimeout = forecast.Day
		}
		if now.Sub(l.At) > 2*p.ProvisionTimeout && (!inConfig || !waiting(l)) {
			r.expired = append(r.expired, l.Key)
			continue
		}
		out[l.Pool] = append(out[l.Pool], l)
	}
	return out, nil
}

// describeAll reads every pool's group, MaxDescribes at a time (one
// after another with Options.Serial), and returns them in the config's
// order.
func (c *Clouds) describeAll(ctx context.Context) []described {
	out := make([]described, len(c.pools))
	if c.serial || len(c.pools) == 1 {
		for i, p := range c.pools {
			out[i].group, out[i].err = c.act.clouds[p.Name].Describe(ctx, p)
		}
		return out
	}
	slots := make(chan struct{}, MaxDescribes)
	var wg sync.WaitGroup
	for i, p := range c.pools {
		slots <- struct{}{}
		wg.Add(1)
		go func() {
			defer func() { <-slots; wg.Done() }()
			out[i].group, out[i].err = c.act.clouds[p.Name].Describe(ctx, p)
		}()
	}
	wg.Wait()
	return out
}

// ownFleet leaves out the instances tagged as another fleet's (a staging
// controller's direct launches in a pool of the same name): they are that
// controller's to count and to remove. Untagged instances stay (launched
// before fleets were named, or in a group that sets no fleet tag).
func (c *Clouds) ownFleet(instances []providers.Instance) []providers.Instance {
	mine, k := c.fleet, 0
	for k < len(instances) && instances[k].OfFleet(mine) {
		k++
	}
	if k == len(instances) {
		return instances
	}
	out := make([]providers.Instance, k, len(instances))
	copy(out, instances[:k])
	for ; k < len(instances); k++ {
		if instances[k].OfFleet(mine) {
			out = append(out, instances[k])
		}
	}
	return out
}

func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}
