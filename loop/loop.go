// Package loop is Fleetcast's one decision loop. Each cycle it observes
// the fleet, records the demand, forecasts (choosing and calibrating the
// model once a day, following it every step), plans with the planner,
// acts, and keeps the books of what the actions came to: back-offs of
// pools that refused a launch, the drain records and the drain log that
// bounds scale-in.
//
// The live controller (`run`, its demo on the simulated cloud) and the
// simulator's predictive policy (`simulate`) both drive it. What differs
// between them sits behind two small interfaces: Fleet, the clouds and
// the agents as observed and acted on (the controller reads its
// providers and agents' reports; the simulator its simulated nodes), and
// Books, the store (state.Store, bbolt, for `run`; state.Memory for
// `simulate`, so months replay fast). The clock is the time each cycle is
// given.
package loop

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/fleetcast/autoscaler/fleet"
	"github.com/fleetcast/autoscaler/forecast"
	"github.com/fleetcast/autoscaler/planner"
	"github.com/fleetcast/autoscaler/providers"
	"github.com/fleetcast/autoscaler/state"
)

// DemandSeries is the name of the fleet's demand history in the books.
const DemandSeries = "fleet"

// HeldSeries is the name, in the books, of what the fleet held beyond its
// idle reservations (Held), for the baseline advice.
const HeldSeries = "held"

// Books is what the loop keeps between cycles: the demand history, the
// pools' back-offs, the drains in progress and the log of drains begun.
// *state.Store (bbolt) and *state.Memory implement it.
type Books interface {
	AppendDemand(series string, samples ...state.Sample) error
	Demand(series string, since time.Time) ([]state.Sample, error)
	PruneDemand(before time.Time) (int, error)
	Backoffs() ([]state.Backoff, error)
	PutBackoff(b state.Backoff) error
	DeleteBackoff(pool string) error
	// PutDrain records a drain begun, in the drains in progress and in
	// the drain log.
	PutDrain(d state.Drain) error
	DeleteDrain(node string) error
	// DrainLog is the drains begun at or after since, oldest first.
	DrainLog(since time.Time) ([]state.Drain, error)
	PruneDrainLog(before time.Time) (int, error)
	// PutHalted records that scale-in was found halted at a cycle's time;
	// Halted is the last such time (zero if never).
	PutHalted(t time.Time) error
	Halted() (time.Time, error)
}

// Observation is what a Fleet saw at the start of a cycle.
type Observation struct {
	// State is the fleet: every pool (in the config's order), node and
	// job, and the pending demand. The loop fills each pool's back-off
	// and recent drains from the books, and, with Options.Advise, the
	// demand history.
	State *fleet.State
	// InUse is the GPUs in use as another source reads them (a
	// Prometheus query), if any: the cycle's demand sample counts the
	// larger of it and what the nodes' jobs hold (see Demand).
	InUse float64
	// Unrecorded, when set, says why this cycle's demand must not be
	// recorded (a pool never read has jobs the count misses: a sample
	// would teach the forecaster a dip that did not happen).
	Unrecorded string
	// Err joins the errors of the parts not read this cycle; the cycle
	// goes on without them, and returns it.
	Err error
}

// Fleet is the clouds and agents a loop observes and acts on.
type Fleet interface {
	// Observe reads the fleet as it is at now. It only reads: what the
	// reading implies for the records is written by Commit.
	Observe(ctx context.Context, now time.Time) (Observation, error)
	// Commit writes what the cycle's observation implies for the fleet's
	// own records (instances first seen, launches claimed, nodes gone),
	// once the cycle has planned and before it acts; in a dry run it
	// writes nothing. It returns the nodes it found gone from their
	// clouds, whose drain records the loop then forgets. A cycle whose
	// Commit fails acts on nothing.
	Commit(ctx context.Context, now time.Time) (gone []string, err error)
	// Launch asks pool for count more nodes. An error that
	// providers.ShouldBackOff accepts refuses the launch, and backs the
	// pool off.
	Launch(ctx context.Context, pool string, count int) error
	// Terminate removes a's node; the loop then forgets its drain.
	Terminate(ctx context.Context, now time.Time, a *planner.Action) error
	// Drain asks d's node to drain; d is in the books already.
	Drain(ctx context.Context, d state.Drain) error
	// CancelDrain tells a's node its drain is cancelled; the books no
	// longer hold it.
	CancelDrain(ctx context.Context, now time.Time, a *planner.Action) error
}

// FollowUpError is an error in what follows an action that was done (a
// store write after a node was terminated): the action's outcome stays
// Done, with this error.
type FollowUpError struct{ Err error }

func (e *FollowUpError) Error() string { return "after the action: " + e.Err.Error() }
func (e *FollowUpError) Unwrap() error { return e.Err }

// followUp wraps err, if any, as a FollowUpError.
func followUp(err error) error {
	if err == nil {
		return nil
	}
	return &FollowUpError{Err: err}
}

// Options are a loop's settings.
type Options struct {
	// Settings are the pools and the forecast, drain and limit settings;
	// the loop reads them every cycle, so a runner may change its pools
	// between cycles (the simulator's reservations grow).
	Settings *fleet.Settings
	Books    Books
	Log      hclog.Logger
	// DryRun plans every cycle and acts on nothing (the books keep only
	// the demand and held histories).
	DryRun bool
	// Advise gives the planner the demand and held histories every
	// cycle, for its baseline advice (the plan's Baseline). The simulator
	// takes advice only at its reservations' cadence (Loop.Held).
	Advise bool
	// Forecast, if set, replaces the forecaster: the simulator's perfect
	// ablation plans on the true future demand.
	Forecast func(now time.Time) forecast.Forecast
}

// Loop is the decision loop. It is not safe for concurrent use: one
// runner drives it, a cycle at a time.
type Loop struct {
	o    Options
	log  hclog.Logger
	hist history
	// held is what the fleet held beyond its idle reservations, per step
	// (Held), for the baseline advice.
	held history
	// main follows the demand history with a forecast; tiers, with tiers,
	// each tier's cumulative demand but the last's (which is all of it,
	// the demand history).
	main  follower
	tiers []tierTrack
	// pendingSince is when the current stretch of pending demand began
	// (zero: none pending), for fleet.State.PendingSince.
	pendingSince time.Time
	prunedAt     time.Time
}

// New makes a loop.
func New(o Options) (*Loop, error) {
	if o.Settings == nil || o.Books == nil {
		return nil, errors.New("loop: settings and books are required")
	}
	if q := o.Settings.Forecast.Quantile; q != 0 && !(q > 0 && q < 1) {
		return nil, fmt.Errorf("loop: forecast quantile %v is not in (0, 1)", q)
	}
	log := o.Log
	if log == nil {
		log = hclog.NewNullLogger()
	}
	return &Loop{o: o, log: log, hist: newHistory(o.Settings.Forecast), held: newHistory(o.Settings.Forecast)}, nil
}

// CycleResult is a cycle's state, forecast and plan, and what became of
// each of the plan's actions.
type CycleResult struct {
	State    *fleet.State
	Forecast forecast.Forecast
	// TierForecasts are the tiers' cumulative forecasts the plan was
	// made with (planner.Input.TierForecasts); none without tiers.
	TierForecasts []forecast.Forecast
	Plan          planner.Plan
	// Outcomes[i] is what became of Plan.Actions[i].
	Outcomes []Outcome
	// PlanTook is the planner's time (for the controller's metrics).
	PlanTook time.Duration
}

// Cycle runs one cycle at now: observe, record, forecast, plan, act, keep
// the books. Errors acting on one action are logged and the rest of the
// plan still runs; the error returned joins them with the observation's.
// A cycle that stops before planning returns an empty result and its
// error.
func (l *Loop) Cycle(ctx context.Context, f Fleet, now time.Time) (CycleResult, error) {
	obs, err := f.Observe(ctx, now)
	if err != nil {
		return CycleResult{}, err
	}
	st := obs.State
	switch {
	case st.PendingGPUs <= 0:
		l.pendingSince = time.Time{}
	case l.pendingSince.IsZero():
		l.pendingSince = now
	}
	st.PendingSince = l.pendingSince // the loop's own reckoning, whatever the observation said
	if err := l.record(now, obs); err != nil {
		return CycleResult{}, err
	}
	if err := l.annotate(now, st); err != nil {
		return CycleResult{}, err
	}
	if st.HaltedAt, err = l.o.Books.Halted(); err != nil {
		// Planned as if never halted: only the hold a provisioning
		// deadline after a halt is lost.
		l.log.Warn("reading when scale-in was last halted", "error", err)
	}
	if l.o.Advise {
		// A copy: the plan and its state outlive the cycle (the API
		// serves them) while the history moves on.
		st.History, st.Held = l.hist.clone(), l.held.clone()
	}
	r := CycleResult{State: st, Forecast: l.forecast(now)}
	started := time.Now()
	// The loop's own forecast is of the history, which leaves the
	// announced demand under way out; Options.Forecast's is of all of it.
	r.TierForecasts = l.tierForecasts(now)
	in := planner.Input{Settings: *l.o.Settings, State: st, Forecast: r.Forecast, TierForecasts: r.TierForecasts,
		Now: now, Unannounced: l.o.Forecast == nil}
	if l.o.Advise {
		in.PeakHistory = l.peakHistory()
	}
	r.Plan = planner.Make(in)
	r.PlanTook = time.Since(started)
	if r.Plan.ScaleInHalt != "" && !l.o.DryRun {
		// A write that fails shortens no hold now, only the one a
		// provisioning deadline after the halt: the plan still acts.
		if err := l.o.Books.PutHalted(now); err != nil {
			l.log.Warn("recording the scale-in halt", "error", err)
		}
	}
	// What the observation implies is written once, here, after planning
	// and before any action: the records before the actions they explain.
	gone, err := f.Commit(ctx, now)
	if err == nil && !l.o.DryRun {
		err = l.forget(gone)
	}
	if err != nil {
		err = fmt.Errorf("loop: recording what the cycle observed (nothing done this cycle): %w", err)
		r.Outcomes = outcomes(&r.Plan, Failed)
		for i := range r.Outcomes {
			r.Outcomes[i].Err = err
		}
		return r, errors.Join(obs.Err, err)
	}
	if l.o.DryRun {
		r.Outcomes = outcomes(&r.Plan, DryRun)
		return r, obs.Err
	}
	r.Outcomes, err = l.act(ctx, f, now, &r.Plan)
	return r, errors.Join(obs.Err, err)
}

// ForgetDrains deletes the drain records of nodes terminated or gone
// from their clouds (a runner's recovery found their terminations made).
func (l *Loop) ForgetDrains(nodes ...string) error { return l.forget(nodes) }

// forget deletes the drain records of nodes gone from their clouds.
func (l *Loop) forget(gone []string) error {
	for _, node := range gone {
		if err := l.o.Books.DeleteDrain(node); err != nil {
			return err
		}
	}
	return nil
}

// record adds the cycle's demand to the history, in the books and in
// memory, and prunes the books once an hour.
func (l *Loop) record(now time.Time, obs Observation) error {
	if !l.hist.loaded {
		// The history so far, as the books hold it (a restarted
		// controller's, or one seeded). One the books cannot read (a
		// damaged record) is not the cycle's end: the loop plans on
		// without it, and the books keep it for a later start.
		for _, h := range []struct {
			series string
			hist   *history
		}{{DemandSeries, &l.hist}, {HeldSeries, &l.held}} {
			samples, err := l.o.Books.Demand(h.series, now.Add(-l.o.Settings.Forecast.History))
			if err == nil {
				err = h.hist.load(samples, now)
			}
			if err != nil {
				h.hist.loaded = true
				l.log.Warn("history unreadable; starting afresh", "series", h.series, "error", err)
			}
		}
	}
	if obs.Unrecorded != "" {
		l.log.Warn("demand not recorded this cycle", "why", obs.Unrecorded)
	} else {
		d, h := tally(l.o.Settings.Pools, obs.State, obs.InUse, now)
		d = unannounced(d, obs.State, now)
		if err := l.o.Books.AppendDemand(DemandSeries, state.Sample{Time: now, Value: d}); err != nil {
			return err
		}
		l.hist.add(now, d)
		if err := l.recordTiers(now, obs.State, d); err != nil {
			return err
		}
		if err := l.o.Books.AppendDemand(HeldSeries, state.Sample{Time: now, Value: h}); err != nil {
			return err
		}
		l.held.add(now, h)
	}
	if now.Sub(l.prunedAt) >= time.Hour {
		// The history is kept as long as the forecaster reads, and a day;
		// the drain log as long as the scale-in window.
		if _, err := l.o.Books.PruneDemand(now.Add(-l.o.Settings.Forecast.History - forecast.Day)); err != nil {
			return err
		}
		if _, err := l.o.Books.PruneDrainLog(now.Add(-l.o.Settings.Limits.ScaleInWindow)); err != nil {
			return err
		}
		l.prunedAt = now
	}
	return nil
}

// Demand is a fleet's demand as the controller records it to forecast
// from: the GPUs its nodes' jobs hold (at most each node's GPUs, as the
// planner counts them), plus the GPUs pending, plus, while GPUs pending
// for any pool have been pending since an earlier cycle
// (fleet.State.PendingSince), the free GPUs of busy ready nodes
// (planner.FragmentGPUs), at most the pool's GPUs per node less one for
// each GPU pending for any pool (the most GPUs per node of the pools); or
// inUse, if that is more than the GPUs held with those free GPUs, plus
// the GPUs pending.
//
// A pending job is one the scheduler could not place, so those free GPUs
// serve none of it: the planner counts them as held and provisions the
// pending demand on whole empty nodes, and a forecast of the GPUs held
// and pending alone would miss what that takes exactly when jobs wait
// (8-GPU and multi-node jobs need empty nodes). The bound keeps a
// scheduler's moment from teaching the forecast the whole fleet: a job
// seen pending for one cycle (a scheduler's latency) counts no free GPUs,
// and a pending GPU needs at most a whole node, so however its jobs are
// spread (least allocated first leaves every node busy), what jobs
// pending add to the history is at most a node per pending GPU, not
// every busy node's free GPUs, which capacity bought for them would grow.
func Demand(pools []fleet.Pool, st *fleet.State, inUse float64, now time.Time) float64 {
	d, _ := tally(pools, st, inUse, now)
	return d
}

// unannounced is demand d (Demand) less the GPUs of st's announcements
// under way at now (fleet.State.UnderWay), at least 0: what the loop
// records to forecast from. Announced jobs are known ahead, so the
// planner adds them to the forecast for the times they cover
// (planner.Input.Unannounced); left in the history, they would be
// forecast as well, and the bands would be those of all the demand's
// changes, announced or not.
func unannounced(d float64, st *fleet.State, now time.Time) float64 {
	return max(d-float64(fleet.UnderWayGPUs(st.UnderWay, now)), 0)
}

// HeldGPUs is what a fleet would have bought without its reservations: the
// GPUs of its burst nodes (booting and draining included), and for each
// reserved pool as many whole nodes as the GPUs its jobs use would fill.
// Not the reserved nodes themselves: a reservation that is never scaled in
// spreads jobs over its nodes, and idle or half-used ones would not have
// been bought, so it would hold up its own advice.
func HeldGPUs(pools []fleet.Pool, st *fleet.State) float64 {
	_, h := tally(pools, st, 0, time.Time{})
	return h
}

// tally is Demand and HeldGPUs in one pass over the nodes (a cycle
// records both).
func tally(pools []fleet.Pool, st *fleet.State, inUse float64, now time.Time) (demand, held float64) {
	used, bought, gpn, res, pool, frag := 0, 0, 0, -1, "", 0
	// resUsed[k] is the GPUs used on reserved pool k's nodes (nodes come
	// in any order, so they are summed by pool).
	var resUsed map[int]int
	for i := range st.Nodes {
		n := &st.Nodes[i]
		if n.Pool != pool {
			pool, gpn, res = n.Pool, 0, -1
			for j := range pools {
				if pools[j].Name == pool {
					gpn = pools[j].GPUsPerNode
					if pools[j].Capacity == fleet.Reserved {
						res = j
					}
				}
			}
		}
		u := min(n.UsedGPUs(), gpn)
		if n.State != fleet.Terminating {
			// As the planner counts: a node being terminated holds no
			// demand (its jobs left, or are pending again).
			used += u
		}
		frag += planner.FragmentGPUs(n, gpn, now)
		switch {
		case res < 0:
			bought += gpn
		case u > 0:
			if resUsed == nil {
				resUsed = map[int]int{}
			}
			resUsed[res] += u
		}
	}
	for k, u := range resUsed {
		g := pools[k].GPUsPerNode
		bought += (u + g - 1) / g * g
	}
	return max(float64(used+countedFragments(pools, st, frag, now)), inUse) + float64(st.PendingGPUs), float64(bought)
}

// countedFragments is how many of the free GPUs of busy ready nodes (frag)
// the demand counts (see Demand): none unless GPUs pending for any pool
// (not for some pools only, nor in whole nodes, which fleet-wide capacity
// does not serve) have been pending since before now, and then at most,
// for each of them, the most GPUs per node of the pools less one.
func countedFragments(pools []fleet.Pool, st *fleet.State, frag int, now time.Time) int {
	pending := st.PendingGPUs
	for _, d := range st.Scoped {
		if !d.ServesAll(pools) {
			pending -= d.GPUs
		}
	}
	if frag <= 0 || pending <= 0 || st.PendingSince.IsZero() || !st.PendingSince.Before(now) {
		return 0
	}
	gpn := 0
	for i := range pools {
		gpn = max(gpn, pools[i].GPUsPerNode)
	}
	return min(frag, pending*max(gpn-1, 0))
}

// Held is the fleet's held history so far (see HeldGPUs), with
// the step in progress last: the history the simulator's advised
// reservations are reviewed on. It is a copy.
func (l *Loop) Held() fleet.Series { return l.held.clone() }

// annotate gives each pool its back-off, if one lasts past now, whether
// its cloud refused it since its last launch and what it held since (which
// it records, from the nodes observed), and the drains begun in it within
// the scale-in window.
func (l *Loop) annotate(now time.Time, st *fleet.State) error {
	backoffs, err := l.o.Books.Backoffs()
	if err != nil {
		return err
	}
	recent, err := l.o.Books.DrainLog(now.Add(-l.o.Settings.Limits.ScaleInWindow))
	if err != nil {
		return err
	}
	var nodes map[string]int
	if len(backoffs) > 0 {
		// What each pool's cloud supplied: nodes that came up, not
		// launches it may still fail to make.
		nodes = make(map[string]int, len(backoffs))
		for i := range st.Nodes {
			if s := st.Nodes[i].State; s == fleet.Ready || s == fleet.Draining {
				nodes[st.Nodes[i].Pool]++
			}
		}
	}
	for i := range st.Pools {
		ps := &st.Pools[i]
		ps.BackoffUntil, ps.BackoffReason, ps.RecentDrains = time.Time{}, "", ps.RecentDrains[:0]
		ps.Refused, ps.HeldSinceRefusal = false, 0
		for _, b := range backoffs {
			if b.Pool != ps.Name {
				continue
			}
			if now.Before(b.Until) {
				ps.BackoffUntil, ps.BackoffReason = b.Until, b.Reason
			}
			refused := b.Refused
			if refused.IsZero() {
				refused = b.Until
			}
			if !now.Before(b.Until) && now.Sub(refused) >= RefusalMemory {
				// Refused long enough ago that the cloud's capacity may
				// have come back: forgotten, and the back-off with it.
				if err := l.o.Books.DeleteBackoff(b.Pool); err != nil {
					return err
				}
				continue
			}
			if b.Refused.IsZero() {
				continue // backed off, but not for capacity
			}
			// What the pool's cloud has supplied since it refused; a node
			// that came up ends its failures in a row.
			if n := nodes[ps.Name]; n > b.Held && !ps.IsUnobserved() {
				b.Held = n
				if !now.Before(b.Until) {
					b.Failures = 0
				}
				if err := l.o.Books.PutBackoff(b); err != nil {
					return err
				}
			}
			ps.Refused, ps.HeldSinceRefusal = true, b.Held
		}
		for _, d := range recent {
			if d.Pool == ps.Name {
				ps.RecentDrains = append(ps.RecentDrains, d.Started)
			}
		}
	}
	return nil
}

// forecast is the forecast of the demand history (follower.forecast),
// or Options.Forecast's.
func (l *Loop) forecast(now time.Time) forecast.Forecast {
	if l.o.Forecast != nil {
		return l.o.Forecast(now)
	}
	return l.main.forecast(l.hist.current(), now, l.o.Settings, l.log)
}

// act carries out a plan's actions and keeps the books of each: a pool
// that refuses a launch is backed off and one that launches is not; a
// drain is in the books before its node hears of it; a cancelled drain
// leaves them first, a terminated node's once it is terminated. An action done whose bookkeeping then failed is done
// all the same; the error is returned with the others.
func (l *Loop) act(ctx context.Context, f Fleet, now time.Time, plan *planner.Plan) ([]Outcome, error) {
	out := outcomes(plan, Done)
	var errs []error
	// A pool is backed off once a cycle, however many of its launches
	// failed in it.
	backedOff := map[string]bool{}
	backOff := func(pool, reason string, outOfCapacity bool) error {
		if backedOff[pool] {
			return nil
		}
		backedOff[pool] = true
		return l.BackOff(now, pool, reason, outOfCapacity)
	}
	for i := range plan.Actions {
		a := &plan.Actions[i]
		var err error
		switch a.Kind {
		case planner.Launch:
			err = f.Launch(ctx, a.Pool, a.Count)
			if providers.ShouldBackOff(err) {
				// Expected on a cloud out of GPUs: the pool backs off and
				// the next plan falls back to other pools. Not a failure.
				out[i] = Outcome{Result: Refused, Err: err}
				if err := backOff(a.Pool, err.Error(), providers.OutOfCapacity(err)); err != nil {
					errs = append(errs, err)
				}
				continue
			}
			if err == nil {
				err = followUp(l.launched(a.Pool))
			}
		case planner.Terminate:
			err = f.Terminate(ctx, now, a)
			if err == nil || errors.As(err, new(*FollowUpError)) {
				// Done: its drain, if it had one, ended with it; a node
				// that never came up was not supplied by its cloud.
				err = errors.Join(err, followUp(l.o.Books.DeleteDrain(a.Node)))
				if a.BackOff {
					err = errors.Join(err, followUp(backOff(a.Pool, a.Reason, true)))
				}
			}
		case planner.Drain:
			d := state.Drain{Node: a.Node, Pool: a.Pool, Started: now, Deadline: now.Add(l.o.Settings.Drain.Timeout)}
			if err = l.o.Books.PutDrain(d); err == nil {
				err = f.Drain(ctx, d)
			}
		case planner.CancelDrain:
			if err = l.o.Books.DeleteDrain(a.Node); err == nil {
				err = f.CancelDrain(ctx, now, a)
			}
		}
		if err == nil {
			continue
		}
		out[i].Err = err
		if !errors.As(err, new(*FollowUpError)) {
			out[i].Result = Failed
		}
		l.log.Error("action failed", "kind", a.Kind, "pool", a.Pool, "node", a.Node, "error", err)
		errs = append(errs, err)
	}
	return out, errors.Join(errs...)
}

// BackOff records pool's next back-off after an error at now that
// providers.ShouldBackOff accepts: longer with each failure in a row
// (providers.Backoff). outOfCapacity says the cloud had no capacity for
// it (providers.OutOfCapacity, or a node that never came up): the refusal
// is then remembered (state.Backoff.Refused) and what the pool held
// counted from now; a busy group or a refusal of another kind keeps the
// last refusal's.
func (l *Loop) BackOff(now time.Time, pool, reason string, outOfCapacity bool) error {
	b := state.Backoff{Pool: pool}
	bs, err := l.o.Books.Backoffs()
	if err != nil {
		return err
	}
	for _, old := range bs {
		if old.Pool == pool {
			b = old
		}
	}
	b.Failures++
	b.Until, b.Reason = now.Add(providers.Backoff(b.Failures)), reason
	if outOfCapacity {
		b.Refused, b.Held = now, 0
	}
	l.log.Warn("pool backed off", "pool", pool, "until", b.Until, "failures", b.Failures, "reason", reason)
	return l.o.Books.PutBackoff(b)
}

// RefusalMemory is how long a pool's cloud refusing it capacity is
// remembered (state.Backoff.Refused): until then the planner counts on the
// pool for no more than it held since (fleet.PoolStatus.HeldSinceRefusal)
// when it leaves a launch to it.
const RefusalMemory = 6 * time.Hour

// launched ends the pool's back-off after a launch in it succeeded. The
// refusal is remembered for RefusalMemory, and so are its failures in a
// row until a node comes up (annotate): a cloud that takes launches and
// then cannot make them (a managed instance group in a stockout) backs
// the pool off longer each time, as one that refuses them does.
func (l *Loop) launched(pool string) error {
	bs, err := l.o.Books.Backoffs()
	if err != nil {
		return err
	}
	for _, b := range bs {
		switch {
		case b.Pool != pool:
		case b.Refused.IsZero():
			// Backed off, never for capacity: nothing to remember.
			return l.o.Books.DeleteBackoff(pool)
		case !b.Until.IsZero():
			b.Until = time.Time{}
			return l.o.Books.PutBackoff(b)
		}
	}
	return nil
}
