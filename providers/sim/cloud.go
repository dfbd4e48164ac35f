// Package sim is an in-process simulated cloud: the built-in default that
// lets `plan`, `simulate` and `run` work with no cloud account.
//
// Each pool is a group with the pool's lead time and price, a capacity (the
// most instances the simulated region can supply) and an injectable rate of
// capacity errors per launch. Everything random comes from one seeded source,
// and time comes from a clock the caller passes in, so a simulation is
// deterministic for its seed.
package sim

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/hcl/v2"

	"github.com/fleetcast/autoscaler/fleet"
	"github.com/fleetcast/autoscaler/providers"
)

// ErrSimulated wraps every refusal the simulated cloud makes up.
var ErrSimulated = errors.New("simulated cloud")

// Settings are a pool's simulation settings: the attributes of its `sim`
// block.
type Settings struct {
	// Capacity is the most instances the simulated region can supply to the
	// pool at once; launches beyond it fail with InsufficientCapacityError.
	// It may be below the pool's min or Initial: that simulates a stockout.
	Capacity int `hcl:"capacity,optional" json:"capacity,omitempty"`
	// ErrorRate is the probability that a launch fails with
	// InsufficientCapacityError whatever the capacity.
	ErrorRate float64 `hcl:"capacity_error_rate,optional" json:"capacity_error_rate,omitempty"`
	// Initial is the number of nodes the generated fleet starts with.
	Initial int `hcl:"initial,optional" json:"initial,omitempty"`

	// Where each attribute's value is in the config, for diagnostics; the
	// zero Range where it is absent.
	CapacityAt  hcl.Range `hcl:"capacity,attr_value_range" json:"-"`
	ErrorRateAt hcl.Range `hcl:"capacity_error_rate,attr_value_range" json:"-"`
	InitialAt   hcl.Range `hcl:"initial,attr_value_range" json:"-"`
}

// Provider is fleet.ProviderSim.
func (Settings) Provider() string { return fleet.ProviderSim }

// Defaults are the settings of a pool whose sim block leaves them out (or
// that has none): capacity = max, no errors, initial = min.
func Defaults(p fleet.Pool) Settings { return Settings{Capacity: p.Max, Initial: p.Min} }

// SettingsOf returns a pool's simulation settings: those of its sim block,
// or, for a pool of another provider (simulate models any pool) or one
// made without a config, the defaults: capacity = max, no errors,
// initial = min.
func SettingsOf(p fleet.Pool) Settings {
	if s, ok := p.Settings.(Settings); ok {
		return s
	}
	return Defaults(p)
}

// Grant decides how many of want more instances a group of current
// instances gets from the simulated region: none, by an injected capacity
// error at the pool's error rate; those that fit under Capacity, with an
// InsufficientCapacityError when that is fewer than asked; or all of them.
// The simulated cloud and the simulator both launch through it.
func (s Settings) Grant(pool, zone string, current, want int, rng *rand.Rand) (int, error) {
	if want <= 0 {
		return 0, nil
	}
	if s.ErrorRate > 0 && rng.Float64() < s.ErrorRate {
		return 0, &providers.InsufficientCapacityError{Pool: pool, Zone: zone,
			Err: fmt.Errorf("%w: injected capacity error (rate %g)", ErrSimulated, s.ErrorRate)}
	}
	if current+want > s.Capacity {
		granted := max(s.Capacity-current, 0)
		return granted, &providers.InsufficientCapacityError{Pool: pool, Zone: zone, Granted: granted,
			Err: fmt.Errorf("%w: region capacity of %d instance(s) reached", ErrSimulated, s.Capacity)}
	}
	return want, nil
}

// Cloud is the simulated cloud. It is safe for concurrent use.
type Cloud struct {
	clock func() time.Time

	mu     sync.Mutex
	src    *rand.PCG
	rng    *rand.Rand
	groups map[string]*group
	nextID int
	// keys remembers when each launch request key launched, so a repeated
	// request launches nothing; a key is forgotten KeyLifetime after.
	keys map[string]time.Time
	// path, when set, is the file the cloud is saved to after each change.
	path string
}

type group struct {
	pool      fleet.Pool
	settings  Settings
	target    int
	instances []providers.Instance
}

// Interface checks.
var (
	_ providers.Provider  = (*Cloud)(nil)
	_ providers.Protector = (*Cloud)(nil)
	_ providers.Reaper    = (*Cloud)(nil)
)

// New makes a simulated cloud with one group per pool, empty, reading time
// from clock. Pools of any provider may be simulated; their `sim` settings
// apply where present.
func New(pools []fleet.Pool, seed int64, clock func() time.Time) *Cloud {
	c := &Cloud{
		clock:  clock,
		src:    rand.NewPCG(uint64(seed), 0x5eed),
		groups: make(map[string]*group, len(pools)),
		keys:   map[string]time.Time{},
	}
	c.rng = rand.New(c.src)
	for _, p := range pools {
		c.groups[p.Name] = &group{pool: p, settings: SettingsOf(p)}
	}
	return c
}

// SetClock makes the cloud read time from clock from now on (Generate
// makes a cloud on a fixed clock at its time).
func (c *Cloud) SetClock(clock func() time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.clock = clock
}

// withGroup runs fn on the pool's group with the cloud locked, unless ctx
// is done or the group does not exist (a NotFoundError).
func (c *Cloud) withGroup(ctx context.Context, pool string, fn func(g *group) error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	g := c.groups[pool]
	if g == nil {
		return &providers.NotFoundError{Pool: pool, Resource: fmt.Sprintf("simulated group %q", pool), Err: ErrSimulated}
	}
	return fn(g)
}

// change is withGroup for calls that change the cloud: once fn has run,
// the cloud is saved to its file, if it has one.
func (c *Cloud) change(ctx context.Context, pool string, fn func(g *group) error) error {
	err := c.withGroup(ctx, pool, func(g *group) error {
		err := fn(g)
		if c.path != "" {
			if serr := c.save(); serr != nil {
				return errors.Join(err, serr)
			}
		}
		return err
	})
	return err
}

// Describe returns the group with instance states as of the clock: an
// instance is running once its lead time has passed.
func (c *Cloud) Describe(ctx context.Context, pool fleet.Pool) (providers.Group, error) {
	var out providers.Group
	err := c.withGroup(ctx, pool.Name, func(g *group) error {
		now := c.clock()
		out = providers.Group{Target: g.target, Instances: make([]providers.Instance, len(g.instances))}
		for i, in := range g.instances {
			out.Instances[i] = g.at(in, now)
		}
		return nil
	})
	return out, err
}

// at is an instance of g as of now: running once its lead time has passed.
func (g *group) at(in providers.Instance, now time.Time) providers.Instance {
	if in.State == providers.InstancePending && !now.Before(in.LaunchedAt.Add(g.pool.LeadTime)) {
		in.State = providers.InstanceRunning
	}
	return in
}

// KeyLifetime is how long the simulated cloud remembers a launch key, as
// EC2 remembers a client token (at least a day): long past any restart of
// the controller, but not for ever.
const KeyLifetime = 24 * time.Hour

// Launch raises the group's target to req.Target and starts the instances.
// A key seen before launches nothing. Beyond the pool's capacity, or by
// chance at the pool's error rate, it fails with InsufficientCapacityError;
// past capacity it launches what fits first.
func (c *Cloud) Launch(ctx context.Context, pool fleet.Pool, req providers.LaunchRequest) error {
	return c.change(ctx, pool.Name, func(g *group) error {
		now := c.clock()
		for k, at := range c.keys {
			if now.Sub(at) > KeyLifetime {
				delete(c.keys, k)
			}
		}
		if _, seen := c.keys[req.Key]; req.Key != "" && seen {
			return nil
		}
		target := req.Target
		if target <= 0 {
			target = g.target + req.Count
		}
		if target <= g.target {
			return nil
		}
		zone := ""
		if len(g.pool.Zones) > 0 {
			zone = g.pool.Zones[c.rng.IntN(len(g.pool.Zones))]
		}
		granted, capErr := g.settings.Grant(pool.Name, zone, g.target, target-g.target, c.rng)
		if granted == 0 && capErr != nil {
			return capErr
		}
		target = g.target + granted
		if req.Key != "" && target > g.target {
			// Only a request that launched something is remembered: a refused
			// one may be retried with the same key, as with EC2 client tokens.
			c.keys[req.Key] = now
		}
		for g.target < target {
			in := c.add(g, zone, providers.InstancePending, now)
			in.LaunchKey, in.Fleet = req.Key, req.Fleet
		}
		return capErr
	})
}

// add appends an instance to g, raises its target and returns the
// instance. The caller holds c.mu (or owns c, while generating a fleet).
func (c *Cloud) add(g *group, zone string, state providers.InstanceState, launched time.Time) *providers.Instance {
	c.nextID++
	id := fmt.Sprintf("sim-%s-%05d", g.pool.Name, c.nextID)
	g.instances = append(g.instances, providers.Instance{ID: id, Zone: zone, State: state, LaunchedAt: launched})
	g.target++
	return &g.instances[len(g.instances)-1]
}

// Terminate removes the instances and lowers the target by as many. An
// unknown instance is a NotFoundError and nothing is removed.
func (c *Cloud) Terminate(ctx context.Context, pool fleet.Pool, ids []string) error {
	return c.change(ctx, pool.Name, func(g *group) error {
		for _, id := range ids {
			if !slices.ContainsFunc(g.instances, func(in providers.Instance) bool { return in.ID == id }) {
				return &providers.NotFoundError{Pool: pool.Name, Resource: "instance " + id, Err: ErrSimulated}
			}
		}
		g.instances = slices.DeleteFunc(g.instances, func(in providers.Instance) bool { return slices.Contains(ids, in.ID) })
		g.target = max(g.target-len(ids), 0)
		return nil
	})
}

// SetProtected marks instances as protected from the cloud's own scale-in.
// The simulated cloud never scales in on its own; it records the flag.
func (c *Cloud) SetProtected(ctx context.Context, pool fleet.Pool, ids []string, protected bool) error {
	return c.change(ctx, pool.Name, func(g *group) error {
		for i := range g.instances {
			if slices.Contains(ids, g.instances[i].ID) {
				g.instances[i].Protected = protected
			}
		}
		return nil
	})
}

// Orphans lists the fleet's instances, launched by Fleetcast (with a launch
// key), in groups whose pool is not among pools: groups the cloud kept
// for pools a config had before (see Load).
func (c *Cloud) Orphans(ctx context.Context, fleetName string, pools []fleet.Pool) ([]providers.Orphan, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	known := make(map[string]bool, len(pools))
	for _, p := range pools {
		known[p.Name] = true
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	now := c.clock()
	var out []providers.Orphan
	for name, g := range c.groups {
		if known[name] {
			continue
		}
		for _, in := range g.instances {
			if in.Fleet != fleetName || fleetName == "" || in.LaunchKey == "" {
				continue
			}
			o := providers.Orphan{Instance: g.at(in, now), Pool: name}
			if len(pools) > 0 {
				o.Via = pools[0]
			}
			out = append(out, o)
		}
	}
	slices.SortFunc(out, func(a, b providers.Orphan) int { return strings.Compare(a.ID, b.ID) })
	return out, nil
}

// TerminateOrphan removes an orphan, if it is still the fleet's and in the
// group its tags name.
func (c *Cloud) TerminateOrphan(ctx context.Context, fleetName string, o providers.Orphan) error {
	return c.change(ctx, o.Pool, func(g *group) error {
		i := slices.IndexFunc(g.instances, func(in providers.Instance) bool { return in.ID == o.ID })
		switch {
		case i < 0:
			return &providers.NotFoundError{Pool: o.Pool, Resource: "instance " + o.ID, Err: ErrSimulated}
		case g.instances[i].Fleet != fleetName || fleetName == "":
			return fmt.Errorf("simulated cloud: instance %s is of fleet %q, not %q: not terminated", o.ID, g.instances[i].Fleet, fleetName)
		}
		g.instances = slices.Delete(g.instances, i, i+1)
		g.target = max(g.target-1, 0)
		return nil
	})
}
