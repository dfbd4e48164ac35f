package simulate

import (
	"context"
	"fmt"
	"time"

	"github.com/fleetcast/autoscaler/fleet"
	"github.com/fleetcast/autoscaler/providers"
)

// engineCloud is the simulated region as a provider, for the predictive
// and perfect policies, which read and change it through the controller's
// own actuator (package actuator) as `run` does its clouds: each pool is a
// group with a target size of its own (as an Auto Scaling group), its
// instances the engine's live nodes.
//
// A node launched after the start is listed lag seconds after its launch
// (0: at once); until then its group owes it, as an Auto Scaling group's
// listing trails its desired capacity, and the group lists a stand-in for
// it (Owed). With keyed set, each group is instead as EC2 instances run
// from a launch template: every node carries its launch's key, a launch
// is known by it (sent again, it launches nothing more), and a node not
// listed yet is simply not listed.
//
// Each Describe hands out the pool's listing as built after its last
// change (a launch, a node up, a node gone), never changed after: the
// actuator keeps it as the group last read.
type engineCloud struct {
	e      *engine
	lag    int64
	keyed  bool
	byName map[string]int
	groups []listing
	// beforeLaunch, if set, runs as a launch reaches pool pi, before it
	// is made (tests: someone else launching into the group at once).
	beforeLaunch func(pi int)
}

// listing is one pool's instances as last built, and how many it lists.
type listing struct {
	ver       uint32
	built     bool
	instances []providers.Instance
	listed    int
}

func newEngineCloud(e *engine, lag int64, keyed bool) *engineCloud {
	c := &engineCloud{e: e, lag: lag, keyed: keyed, byName: make(map[string]int, len(e.pools)), groups: make([]listing, len(e.pools))}
	for i := range e.pools {
		c.byName[e.pools[i].spec.Name] = i
	}
	return c
}

func (c *engineCloud) pool(name string) (int, error) {
	pi, ok := c.byName[name]
	if !ok {
		return 0, &providers.NotFoundError{Pool: name, Resource: "simulated group", Err: fmt.Errorf("no pool %q in the simulation", name)}
	}
	return pi, nil
}

// listed returns pool pi's listing now, building it again after a change
// (and, with a listing lag, every time: nodes come to be listed as time
// passes).
func (c *engineCloud) listed(pi int) *listing {
	g, e := &c.groups[pi], c.e
	if g.built && g.ver == e.poolVer[pi] && c.lag == 0 {
		return g
	}
	p := &e.pools[pi]
	// A new slice: the last one was handed out.
	g.instances = make([]providers.Instance, 0, p.count)
	for _, n := range e.live {
		if n.pool != pi || n.state == gone || c.owes(n) {
			continue
		}
		in := providers.Instance{ID: n.id, State: providers.InstanceRunning, LaunchedAt: e.at(n.launched)}
		if n.state == booting {
			in.State = providers.InstancePending
		}
		if c.keyed {
			in.LaunchKey = n.key
		}
		g.instances = append(g.instances, in)
	}
	g.listed = len(g.instances)
	// What a group with a target size owes: launched, not listed yet.
	if !c.keyed {
		for k := range p.count - g.listed {
			g.instances = append(g.instances, providers.Instance{ID: fmt.Sprintf("owed/%s/%d", p.spec.Name, k), State: providers.InstancePending, Owed: true})
		}
	}
	g.ver, g.built = e.poolVer[pi], true
	return g
}

// owes reports whether n is launched and not listed yet: within the
// listing lag of a launch after the start (the reservations held from the
// start are listed at once).
func (c *engineCloud) owes(n *node) bool { return n.launched > 0 && c.e.now-n.launched < c.lag }

// Describe lists the pool's group: its target size (its live nodes) and
// its instances.
func (c *engineCloud) Describe(_ context.Context, pool fleet.Pool) (providers.Group, error) {
	pi, err := c.pool(pool.Name)
	if err != nil {
		return providers.Group{}, err
	}
	g := c.listed(pi)
	if c.keyed {
		return providers.Group{Target: g.listed, Instances: g.instances, Keyed: true}, nil
	}
	return providers.Group{Target: c.e.pools[pi].count, Instances: g.instances}, nil
}

// Launch grows the group to req.Target, each node up one lead time away;
// a group already there launches nothing (a launch sent again). The
// region's refusal, whole or partial, is an insufficient capacity error,
// as a cloud's.
func (c *engineCloud) Launch(_ context.Context, pool fleet.Pool, req providers.LaunchRequest) error {
	pi, err := c.pool(pool.Name)
	if err != nil {
		return err
	}
	p := &c.e.pools[pi]
	want := min(req.Count, req.Target-p.count)
	if c.keyed {
		want = req.Count
		for _, n := range c.e.live {
			if n.key == req.Key && n.state != gone {
				want--
			}
		}
	}
	if want <= 0 {
		return nil
	}
	if c.beforeLaunch != nil {
		c.beforeLaunch(pi)
	}
	got, err := c.e.launch(pi, want, secs(p.spec.LeadTime))
	for _, n := range c.e.nodes[len(c.e.nodes)-got:] {
		n.key = req.Key // this controller's launch
	}
	return err
}

// Terminate removes the named nodes, lowering the group's target; a
// stand-in for capacity owed gives up the newest node not listed yet. A
// node the region does not have is not found.
func (c *engineCloud) Terminate(_ context.Context, pool fleet.Pool, ids []string) error {
	pi, err := c.pool(pool.Name)
	if err != nil {
		return err
	}
	for _, id := range ids {
		n := c.e.liveNode(id)
		if n == nil {
			n = c.unlisted(pi, id)
		}
		if n == nil || n.pool != pi {
			return &providers.NotFoundError{Pool: pool.Name, Resource: "instance " + id, Err: fmt.Errorf("not in the simulated region")}
		}
		c.e.terminate(n)
	}
	return nil
}

// unlisted is the newest node of pool pi not listed yet, for a stand-in
// of the capacity its group owes; nil if id is no such stand-in.
func (c *engineCloud) unlisted(pi int, id string) *node {
	g := c.listed(pi)
	owed := false
	for k := range g.instances[g.listed:] {
		owed = owed || g.instances[g.listed+k].ID == id
	}
	if !owed {
		return nil
	}
	for i := len(c.e.live) - 1; i >= 0; i-- {
		if n := c.e.live[i]; n.pool == pi && n.state != gone && c.owes(n) {
			return n
		}
	}
	return nil
}

// at is the engine's time as the controller's clock reads it.
func (c *engineCloud) at() time.Time { return c.e.at(c.e.now) }
