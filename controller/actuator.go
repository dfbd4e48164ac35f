// Package controller is the live controller's edge: it turns the
// planner's actions into cloud calls, safely across crashes, and takes
// pending demand pushed by schedulers (POST /v1/demand, see DemandReceiver).
//
// Every change to a cloud goes through an Actuator, which writes the intent
// and its idempotency key to the state store (synced) before calling the
// provider, and removes it once the cloud's answer is known. After a crash,
// Recover reads the journal and reconciles each intent against the cloud's
// own state, so a crash between deciding and acting never launches twice
// and never leaves a decided termination half done (DESIGN.md rules 4 and 8).
package controller

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/fleetcast/autoscaler/fleet"
	"github.com/fleetcast/autoscaler/providers"
	"github.com/fleetcast/autoscaler/state"
)

// Actuator makes the cloud changes a plan asks for, journaled.
type Actuator struct {
	store *state.Store
	pools map[string]fleet.Pool
	// clouds maps each pool to the provider that drives its group.
	clouds map[string]providers.Provider
	now    func() time.Time
	log    hclog.Logger
}

// NewActuator makes an Actuator over the pools, each driven by
// clouds[pool.Name], journaling in store and reading time from now.
func NewActuator(store *state.Store, pools []fleet.Pool, clouds map[string]providers.Provider, now func() time.Time, log hclog.Logger) (*Actuator, error) {
	a := &Actuator{store: store, pools: make(map[string]fleet.Pool, len(pools)), clouds: clouds, now: now, log: log}
	if a.log == nil {
		a.log = hclog.NewNullLogger()
	}
	for _, p := range pools {
		if clouds[p.Name] == nil {
			return nil, fmt.Errorf("controller: pool %s has no provider", p.Name)
		}
		a.pools[p.Name] = p
	}
	return a, nil
}

func (a *Actuator) pool(name string) (fleet.Pool, providers.Provider, error) {
	p, ok := a.pools[name]
	if !ok {
		return fleet.Pool{}, nil, fmt.Errorf("controller: unknown pool %q", name)
	}
	return p, a.clouds[name], nil
}

// newKey returns a fresh idempotency key: the pool, the kind and 64 random
// bits, short enough for an EC2 client token (64 characters).
func newKey(kind state.IntentKind, pool string) string {
	var b [8]byte
	rand.Read(b[:])
	if len(pool) > 32 {
		pool = pool[:32]
	}
	return fmt.Sprintf("fc-%s-%s-%s", kind, pool, hex.EncodeToString(b[:]))
}

// Launch adds count instances to the pool's group: it reads the group's
// target size, journals the launch to target+count, asks the cloud, and
// clears the journal once the cloud has answered. A capacity or quota
// error (the cloud's answer is known, whatever it granted) is returned for
// the caller to back the pool off; an error whose outcome is unknown
// (a timeout, a crash) leaves the intent for Recover.
func (a *Actuator) Launch(ctx context.Context, poolName string, count int) error {
	if count < 1 {
		return fmt.Errorf("controller: launch of %d instances in pool %s", count, poolName)
	}
	pool, cloud, err := a.pool(poolName)
	if err != nil {
		return err
	}
	g, err := cloud.Describe(ctx, pool)
	if err != nil {
		return fmt.Errorf("controller: launch in pool %s: %w", poolName, err)
	}
	in := state.Intent{Key: newKey(state.IntentLaunch, poolName), Kind: state.IntentLaunch, Pool: poolName,
		Count: count, Target: g.Target + count, Created: a.now()}
	if err := a.store.PutIntent(in); err != nil {
		return fmt.Errorf("controller: launch in pool %s not made: %w", poolName, err)
	}
	a.log.Info("launching", "pool", poolName, "count", count, "from", g.Target, "to", in.Target, "key", in.Key)
	err = cloud.Launch(ctx, pool, providers.LaunchRequest{Count: count, Target: in.Target, Key: in.Key})
	if err != nil && !providers.ShouldBackOff(err) {
		// Not the cloud's definite answer (it refused, or granted part):
		// the outcome is unknown.
		return fmt.Errorf("controller: launch in pool %s (intent %s kept for recovery): %w", poolName, in.Key, err)
	}
	if derr := a.store.DoneIntent(in.Key); derr != nil {
		return errors.Join(err, derr)
	}
	return err
}

// Terminate removes a node whose drain is complete (or a launching node
// that missed its deadline) from its pool: journaled, then asked of the
// cloud; the node's drain record goes with it. A node the cloud no longer
// has counts as terminated.
func (a *Actuator) Terminate(ctx context.Context, poolName, node string) error {
	pool, cloud, err := a.pool(poolName)
	if err != nil {
		return err
	}
	in := state.Intent{Key: newKey(state.IntentTerminate, poolName), Kind: state.IntentTerminate, Pool: poolName,
		Node: node, Created: a.now()}
	if err := a.store.PutIntent(in); err != nil {
		return fmt.Errorf("controller: termination of %s not made: %w", node, err)
	}
	a.log.Info("terminating", "pool", poolName, "node", node, "key", in.Key)
	err = cloud.Terminate(ctx, pool, []string{in.Node})
	var nf *providers.NotFoundError
	if err != nil && !errors.As(err, &nf) {
		return fmt.Errorf("controller: terminating %s in pool %s (intent %s kept for recovery): %w", in.Node, pool.Name, in.Key, err)
	}
	if err := a.store.DeleteDrain(in.Node); err != nil {
		return err
	}
	return a.store.DoneIntent(in.Key)
}

// Recovered says what Recover did with each journaled intent.
type Recovered struct {
	// Done are intents the cloud shows made; Dropped were not made and are
	// left to the next plan.
	Done, Dropped []state.Intent
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

// Recover reconciles the journal with the clouds, oldest intent first:
//   - a launch whose group's target size reached its target was made; one
//     whose group is below it was not (or only in part), and is dropped:
//     the next plan sees the group as it is and decides afresh, so nothing
//     is launched twice;
//   - a termination the cloud shows done is cleared; one not yet done is
//     dropped, never finished blindly: the node may have gone back into
//     service since (its drain failed at the deadline while the controller
//     was down), so the next plan decides again on fresh reports, and
//     terminates it only if it is still drained;
//   - drains and cancelled drains live in the drain records, which the loop
//     picks up as they are; their intents are cleared.
//
// An intent for a pool no longer in the config is kept and reported, never
// silently dropped. An intent whose pool's group cannot be read is kept for
// the next try, and the pool's later intents with it, while other pools'
// intents are settled: one unreadable pool does not hold the fleet up. The
// error is for the store alone; what was left unsettled is in Unsettled.
func (a *Actuator) Recover(ctx context.Context) (Recovered, error) {
	r := Recovered{Unsettled: map[string]error{}}
	groups := map[string]providers.Group{}
	intents, err := a.store.Intents()
	if err != nil {
		return r, fmt.Errorf("controller: reading the journal: %w", err)
	}
	for _, in := range intents {
		if r.Unsettled[in.Pool] != nil {
			continue // kept, in order, behind the pool's first
		}
		pool, cloud, err := a.pool(in.Pool)
		if err != nil {
			r.Unsettled[in.Pool] = fmt.Errorf("controller: journaled intent %s is for pool %q, which is not in the config; restore the pool or remove %s", in.Key, in.Pool, a.store.Path())
			continue
		}
		switch in.Kind {
		case state.IntentLaunch, state.IntentTerminate:
			g, ok := groups[in.Pool]
			if !ok {
				if g, err = cloud.Describe(ctx, pool); err != nil {
					r.Unsettled[in.Pool] = fmt.Errorf("controller: recovering %s %s (kept for the next try): %w", in.Kind, in.Key, err)
					continue
				}
				groups[in.Pool] = g // read once per pool: Recover changes nothing in the cloud
			}
			if in.Kind == state.IntentLaunch {
				if g.Target >= in.Target {
					r.Done = append(r.Done, in)
					a.log.Info("recovered launch: made", "pool", in.Pool, "target", in.Target, "key", in.Key)
				} else {
					r.Dropped = append(r.Dropped, in)
					a.log.Warn("recovered launch: not made; the next plan decides", "pool", in.Pool, "target", in.Target, "group_target", g.Target, "key", in.Key)
				}
				break
			}
			if !slices.ContainsFunc(g.Instances, func(i providers.Instance) bool {
				return i.ID == in.Node && i.State != providers.InstanceTerminating
			}) {
				r.Done = append(r.Done, in)
				if err := a.store.DeleteDrain(in.Node); err != nil {
					return r, err
				}
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
