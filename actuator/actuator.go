// Package actuator is the controller's hands on the clouds: it reads
// every pool's group, works out which instances are this controller's own
// launches (Clouds), and makes every change to a cloud journaled, safely
// across crashes (Actuator). `run` drives it over the real providers and
// `simulate` over its simulated region, both with the same code.
//
// Every change to a cloud goes through an Actuator, which writes the intent
// and its idempotency key to the state store (synced) before calling the
// provider, and removes it once the cloud's answer is known, recording a
// launch the cloud took as the controller's own (state.Launch): only its
// own launches are ever terminated for missing their provisioning deadline.
// After a crash, Recover reads the journal and reconciles each intent
// against the cloud's own state, finishing a launch with its own key, so a
// crash between deciding and acting never launches twice and never leaves a
// decided termination half done (docs/design.md rules 4, 7 and 8).
package actuator

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/fleetcast/autoscaler/fleet"
	"github.com/fleetcast/autoscaler/providers"
	"github.com/fleetcast/autoscaler/state"
)

// Journal is the records the actuator keeps, and it alone writes: the
// intents (each cloud change, journaled before it is made), the launches
// it made (and the instances claimed for them), and when each instance
// was first seen (an instance seen before a launch is never its).
// state.Records implements it.
type Journal interface {
	PutIntent(state.Intent) error
	DoneIntent(key string) error
	Intents() ([]state.Intent, error)
	SettleLaunch(state.Launch) error
	PutLaunches(...state.Launch) error
	DeleteLaunches(keys ...string) error
	Launches() ([]state.Launch, error)
	PutSeen(t time.Time, nodes ...string) error
	DeleteSeen(nodes ...string) error
	SeenNodes() ([]state.NodeTime, error)
	// Path names where the records are kept, for errors.
	Path() string
}

// Actuator makes the cloud changes a plan asks for, journaled.
type Actuator struct {
	store Journal
	pools map[string]fleet.Pool
	// clouds maps each pool to the provider that drives its group.
	clouds map[string]providers.Provider
	now    func() time.Time
	log    hclog.Logger
	// Fleet names the fleet on every launch (LaunchRequest.Fleet), for the
	// ownership tags.
	Fleet string
	// Rand, if set, is where the keys' random bits come from (the
	// simulator's seed: a run is a function of it); crypto/rand if not.
	Rand io.Reader
	// Term, if set, is the leader's term (a controller run highly
	// available), carried in every idempotency key it makes.
	Term func() int64
	// Journaled, if set, is called with each intent once it is journaled,
	// before the cloud is called: the fault hook of the end-to-end tests,
	// which kill the process there.
	Journaled func(state.Intent)
}

// journal writes an intent, then tells Journaled.
func (a *Actuator) journal(in state.Intent) error {
	if err := a.store.PutIntent(in); err != nil {
		return err
	}
	if a.Journaled != nil {
		a.Journaled(in)
	}
	return nil
}

// NewActuator makes an Actuator over the pools, each driven by
// clouds[pool.Name], journaling in store and reading time from now.
func NewActuator(store Journal, pools []fleet.Pool, clouds map[string]providers.Provider, now func() time.Time, log hclog.Logger) (*Actuator, error) {
	a := &Actuator{store: store, pools: make(map[string]fleet.Pool, len(pools)), clouds: clouds, now: now, log: log}
	if a.log == nil {
		a.log = hclog.NewNullLogger()
	}
	for _, p := range pools {
		if clouds[p.Name] == nil {
			return nil, fmt.Errorf("actuator: pool %s has no provider", p.Name)
		}
		a.pools[p.Name] = p
	}
	return a, nil
}

func (a *Actuator) pool(name string) (fleet.Pool, providers.Provider, error) {
	p, ok := a.pools[name]
	if !ok {
		return fleet.Pool{}, nil, fmt.Errorf("actuator: unknown pool %q", name)
	}
	return p, a.clouds[name], nil
}

// newKey returns a fresh idempotency key: the kind, the pool, the
// leader's term where the controller runs highly available, and 64
// random bits (from Rand, if set), the pool cut so the key fits an EC2
// client token (64 characters). A deposed leader's key never names the
// term of the leader after it (docs/design.md rule 12).
func (a *Actuator) newKey(kind state.IntentKind, pool string) string {
	var b [8]byte
	if a.Rand != nil {
		io.ReadFull(a.Rand, b[:])
	} else {
		rand.Read(b[:])
	}
	term := ""
	if a.Term != nil {
		if t := a.Term(); t > 0 {
			term = fmt.Sprintf("-t%d", t)
		}
	}
	room := maxKey - len("fc-") - len(kind) - len("-") - len(term) - len("-") - 2*len(b)
	if len(pool) > room {
		pool = pool[:max(room, 0)]
	}
	return fmt.Sprintf("fc-%s-%s%s-%s", kind, pool, term, hex.EncodeToString(b[:]))
}

// maxKey is the longest idempotency key: an EC2 client token's limit.
const maxKey = 64

// Launch adds count instances to the pool's group: it reads the group's
// target size, journals the launch to target+count, asks the cloud, and
// clears the journal once the cloud has answered. A capacity or quota
// error (the cloud's answer is known, whatever it granted) is returned for
// the caller to back the pool off; an error whose outcome is unknown
// (a timeout, a crash) leaves the intent for Recover.
func (a *Actuator) Launch(ctx context.Context, poolName string, count int) error {
	return a.LaunchNamed(ctx, poolName, count, nil)
}

// LaunchNamed is Launch for a pool whose instances are named (Slurm
// nodes): names, at most count, are the names they are to take, kept
// with the intent so that a launch sent again after a restart asks for
// the same.
func (a *Actuator) LaunchNamed(ctx context.Context, poolName string, count int, names []string) error {
	if count < 1 || len(names) > count || slices.ContainsFunc(names, func(n string) bool { return n == "" || strings.Contains(n, ",") }) {
		return fmt.Errorf("actuator: launch of %d instances in pool %s, named %q (at most one name each, none empty or with a comma)", count, poolName, names)
	}
	pool, cloud, err := a.pool(poolName)
	if err != nil {
		return err
	}
	g, err := cloud.Describe(ctx, pool)
	if err != nil {
		return fmt.Errorf("actuator: launch in pool %s: %w", poolName, err)
	}
	in := state.Intent{Key: a.newKey(state.IntentLaunch, poolName), Kind: state.IntentLaunch, Pool: poolName,
		Count: count, Target: g.Target + count, Names: strings.Join(names, ","), Created: a.now()}
	if err := a.journal(in); err != nil {
		return fmt.Errorf("actuator: launch in pool %s not made: %w", poolName, err)
	}
	a.log.Info("launching", "pool", poolName, "count", count, "from", g.Target, "to", in.Target, "key", in.Key)
	return a.send(ctx, pool, cloud, in, g)
}

// send asks the cloud for a journaled launch and settles its intent once
// the cloud has answered: a launch the cloud took is recorded as the
// controller's own (state.Launch), with the instances it added. A
// refusal (capacity, quota; the cloud may have granted part) is the
// cloud's answer too: what it granted is read back and recorded, and the
// refusal returned for the caller to back the pool off. Any other error
// leaves the outcome unknown and the intent for Recover. before is the
// group as read before the launch.
func (a *Actuator) send(ctx context.Context, pool fleet.Pool, cloud providers.Provider, in state.Intent, before providers.Group) error {
	err := cloud.Launch(ctx, pool, providers.LaunchRequest{Count: in.Count, Target: in.Target, Key: in.Key, Fleet: a.Fleet, Names: in.NameList()})
	if err != nil && !providers.ShouldBackOff(err) {
		// Not the cloud's definite answer: the outcome is unknown.
		return fmt.Errorf("actuator: launch in pool %s (intent %s kept for recovery): %w", pool.Name, in.Key, err)
	}
	rec := state.Launch{Key: in.Key, Pool: in.Pool, Count: in.Count, At: in.Created}
	if err != nil {
		rec.Count = a.granted(ctx, pool, cloud, in, before, err)
	}
	if serr := a.store.SettleLaunch(rec); serr != nil {
		return errors.Join(err, serr)
	}
	return err
}

// granted is how many instances a refused launch added: what the cloud
// said it granted, or, read back, for a keyed group those listed with its
// key (a listing that lags counts fewer, never more), for a group with a
// target size how far its target rose. With neither, all of the request:
// capacity that may have been launched counts (against the limits too)
// until its provisioning deadline.
func (a *Actuator) granted(ctx context.Context, pool fleet.Pool, cloud providers.Provider, in state.Intent, before providers.Group, err error) int {
	var ice *providers.InsufficientCapacityError
	n := 0
	if errors.As(err, &ice) {
		n = ice.Granted
	}
	g, derr := cloud.Describe(ctx, pool)
	switch {
	case derr != nil:
		a.log.Warn("a refused launch's grant could not be read; all of it counted as launching", "pool", pool.Name, "key", in.Key, "error", derr)
		return in.Count
	case g.Keyed:
		listed := 0
		for _, i := range g.Instances {
			if i.LaunchKey == in.Key {
				listed++
			}
		}
		n = max(n, listed)
	default:
		n = max(n, g.Target-before.Target)
	}
	return min(max(n, 0), in.Count)
}

// Terminate removes a node whose drain is complete (or a launching node
// that missed its deadline) from its pool: journaled, then asked of the
// cloud. A node the cloud no longer has counts as terminated. (Its drain
// record is the loop's, which forgets it once this returns.)
func (a *Actuator) Terminate(ctx context.Context, poolName, node string) error {
	pool, cloud, err := a.pool(poolName)
	if err != nil {
		return err
	}
	in := state.Intent{Key: a.newKey(state.IntentTerminate, poolName), Kind: state.IntentTerminate, Pool: poolName,
		Node: node, Created: a.now()}
	if err := a.journal(in); err != nil {
		return fmt.Errorf("actuator: termination of %s not made: %w", node, err)
	}
	a.log.Info("terminating", "pool", poolName, "node", node, "key", in.Key)
	err = cloud.Terminate(ctx, pool, []string{in.Node})
	var nf *providers.NotFoundError
	if err != nil && !errors.As(err, &nf) {
		return fmt.Errorf("actuator: terminating %s in pool %s (intent %s kept for recovery): %w", in.Node, pool.Name, in.Key, err)
	}
	return a.store.DoneIntent(in.Key)
}

// Recovered says what Recover did with each journaled intent.
type Recovered struct {
	// Done are intents the cloud shows made (or made once sent again);
	// Dropped were not made and are left to the next plan.
	Done, Dropped []state.Intent
	// Refused are pools whose launch, sent again, the cloud refused (for
	// capacity, quota): the caller backs them off.
	Refused map[string]error
	// Unsettled are pools with intents kept for a later try, and why: the
	// pool's group could not be read, or the pool is not in the config.
	// Nothing should be changed in them until their intents settle.
	Unsettled map[string]error
}

// Err joins the reasons intents were left unsettled; nil if none were.
func (r Recovered) Err() error {
	var errs []error
	for _, pool := range slices.Sorted(maps.Keys(r.Unsettled)) {
		errs = append(errs, r.Unsettled[pool])
	}
	return errors.Join(errs...)
}

// Reap terminates an orphan (see providers.Reaper) through the provider
// that listed it, journaled like any termination: the intent is on disk
// before the cloud is asked, and cleared once it has answered.
func (a *Actuator) Reap(ctx context.Context, r providers.Reaper, fleetName string, o providers.Orphan) error {
	in := state.Intent{Key: a.newKey(state.IntentReap, o.Pool), Kind: state.IntentReap, Pool: o.Pool, Node: o.ID, Created: a.now()}
	if err := a.journal(in); err != nil {
		return fmt.Errorf("actuator: reaping %s not made: %w", o.ID, err)
	}
	a.log.Info("reaping an orphan", "pool", o.Pool, "node", o.ID, "fleet", fleetName, "key", in.Key)
	err := r.TerminateOrphan(ctx, fleetName, o)
	var nf *providers.NotFoundError
	if err != nil && !errors.As(err, &nf) {
		return fmt.Errorf("actuator: reaping %s of pool %s (intent %s kept for recovery): %w", o.ID, o.Pool, in.Key, err)
	}
	return a.store.DoneIntent(in.Key)
}

// Recover reconciles the journal with the clouds, oldest intent first:
//   - a launch whose group's target size reached its target (a group
//     with a target size of its own, whose target is the truth), or whose
//     instances the cloud lists by its key, was made, and is recorded as
//     the controller's own; one a group with a target size does not show
//     is dropped, and the next plan decides on the group as it is;
//   - a launch in a keyed group (EC2 instances from a launch template)
//     that the cloud does not list yet is sent again with the same key,
//     which the cloud takes as the same request (an EC2 client token: it
//     answers with the instances it launched the first time), so a launch
//     made just before a crash but not listed yet (EC2's reads are
//     eventually consistent) is never made twice, and one never made is
//     made now. Unless it is older than its pool's provisioning deadline
//     (too late), or could take the pool over its max: then it is dropped;
//   - a termination the cloud shows done is cleared; one not yet done is
//     dropped, never finished blindly: the node may have gone back into
//     service since (its drain failed at the deadline while the controller
//     was down), so the next plan decides again on fresh reports, and
//     terminates it only if it is still drained;
//   - drains and cancelled drains live in the drain records, which the loop
//     picks up as they are; their intents are cleared. (A termination made
//     leaves its node's drain record to the loop, which forgets it once
//     the node is unlisted.)
//
// An intent for a pool no longer in the config is kept and reported, never
// silently dropped. An intent whose pool's group cannot be read is kept for
// the next try, and the pool's later intents with it, while other pools'
// intents are settled: one unreadable pool does not hold the fleet up. The
// error is for the store alone; what was left unsettled is in Unsettled.
func (a *Actuator) Recover(ctx context.Context) (Recovered, error) {
	r := Recovered{Unsettled: map[string]error{}, Refused: map[string]error{}}
	groups := map[string]providers.Group{}
	intents, err := a.store.Intents()
	if err != nil {
		return r, fmt.Errorf("actuator: reading the journal: %w", err)
	}
	for _, in := range intents {
		if in.Kind == state.IntentReap {
			// An orphan's termination whose outcome is unknown: never
			// finished blindly (the orphan is reaped again only once its
			// agent confirms a drain again).
			r.Dropped = append(r.Dropped, in)
			a.log.Warn("recovered reaping: outcome unknown; the next plan decides on fresh reports", "pool", in.Pool, "node", in.Node, "key", in.Key)
			if err := a.store.DoneIntent(in.Key); err != nil {
				return r, err
			}
			continue
		}
		if r.Unsettled[in.Pool] != nil {
			continue // kept, in order, behind the pool's first
		}
		pool, cloud, err := a.pool(in.Pool)
		if err != nil {
			r.Unsettled[in.Pool] = fmt.Errorf("actuator: journaled intent %s is for pool %q, which is not in the config; restore the pool or remove %s", in.Key, in.Pool, a.store.Path())
			continue
		}
		switch in.Kind {
		case state.IntentLaunch, state.IntentTerminate:
			g, ok := groups[in.Pool]
			if !ok {
				if g, err = cloud.Describe(ctx, pool); err != nil {
					r.Unsettled[in.Pool] = fmt.Errorf("actuator: recovering %s %s (kept for the next try): %w", in.Kind, in.Key, err)
					continue
				}
				groups[in.Pool] = g // read once per pool, unless a launch is sent again
			}
			if in.Kind == state.IntentLaunch {
				resent, err := a.recoverLaunch(ctx, &r, pool, cloud, in, g)
				if err != nil {
					return r, err
				}
				if resent {
					delete(groups, in.Pool)
				}
				continue
			}
			if !slices.ContainsFunc(g.Instances, func(i providers.Instance) bool {
				return i.ID == in.Node && i.State != providers.InstanceTerminating
			}) {
				r.Done = append(r.Done, in)
				a.log.Info("recovered termination: made", "pool", in.Pool, "node", in.Node, "key", in.Key)
				break
			}
			r.Dropped = append(r.Dropped, in)
			a.log.Warn("recovered termination: not made; the next plan decides on fresh reports", "pool", in.Pool, "node", in.Node, "key", in.Key)
		default:
			r.Done = append(r.Done, in)
		}
		if err := a.store.DoneIntent(in.Key); err != nil {
			return r, err
		}
	}
	return r, nil
}

// recoverLaunch settles one journaled launch against its group as read
// (see Recover) and says whether it sent it again. It returns only the
// store's errors; a launch whose outcome stays unknown (the cloud failed
// the request sent again) is kept and its pool marked unsettled.
func (a *Actuator) recoverLaunch(ctx context.Context, r *Recovered, pool fleet.Pool, cloud providers.Provider, in state.Intent, g providers.Group) (bool, error) {
	// A keyed group's Target only counts what it lists: its launches are
	// known by their keys alone. A group with a target size of its own
	// says by it whether the launch was made.
	made := slices.ContainsFunc(g.Instances, func(i providers.Instance) bool { return i.LaunchKey == in.Key }) ||
		(!g.Keyed && g.Target >= in.Target)
	record := state.Launch{Key: in.Key, Pool: in.Pool, Count: in.Count, At: in.Created}
	switch {
	case made:
		r.Done = append(r.Done, in)
		a.log.Info("recovered launch: made", "pool", in.Pool, "target", in.Target, "key", in.Key)
		return false, a.store.SettleLaunch(record)
	case !g.Keyed || a.now().Sub(in.Created) > pool.ProvisionTimeout:
		// Not made (a group's target is the truth), or too late to make:
		// the next plan decides afresh on the group as it is.
		r.Dropped = append(r.Dropped, in)
		a.log.Warn("recovered launch: not made; the next plan decides",
			"pool", in.Pool, "target", in.Target, "group_target", g.Target, "key", in.Key)
		return false, a.store.DoneIntent(in.Key)
	case g.Target+in.Count > pool.Max:
		// Sent again, it could take the pool over its max (lowered since,
		// or filled by others): dropped. If it was made, its instances are
		// unknown (never terminated at a deadline); counting units that
		// may never come would push the pool over its max, and drain real
		// nodes to bring it back.
		r.Dropped = append(r.Dropped, in)
		a.log.Warn("recovered launch: not listed, and sending it again could exceed the pool's max; dropped",
			"pool", in.Pool, "count", in.Count, "listed", g.Target, "max", pool.Max, "key", in.Key)
		return false, a.store.DoneIntent(in.Key)
	}
	// Sent again as it was, with its key: the cloud launches nothing more
	// for a request it took already (an EC2 client token).
	again := in
	again.Target = g.Target + in.Count
	a.log.Info("recovered launch: not listed; sending it again with its key", "pool", in.Pool, "count", in.Count,
		"listed", g.Target, "key", in.Key)
	err := a.send(ctx, pool, cloud, again, g)
	switch {
	case err == nil:
		r.Done = append(r.Done, in)
	case providers.ShouldBackOff(err):
		r.Done = append(r.Done, in)
		r.Refused[in.Pool] = err
	case ctx.Err() != nil:
		return true, ctx.Err()
	default:
		r.Unsettled[in.Pool] = fmt.Errorf("actuator: recovering launch %s (kept for the next try): %w", in.Key, err)
	}
	return true, nil
}
