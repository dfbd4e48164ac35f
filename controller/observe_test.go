package controller

import (
	"context"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/fleetcast/autoscaler/fleet"
	"github.com/fleetcast/autoscaler/nodeauth"
	"github.com/fleetcast/autoscaler/providers"
	"github.com/fleetcast/autoscaler/providers/sim"
	"github.com/fleetcast/autoscaler/state"
)

// guard wraps the controller's store and its cloud. While armed, every
// write to either is a fault (faults); armed or not, it counts the writes
// by method (writes).
type guard struct {
	armed  bool
	faults []string
	writes map[string]int
}

func (g *guard) write(method string) {
	if g.armed {
		g.faults = append(g.faults, method)
	}
	g.writes[method]++
}

// guardedStore is state.Records with every write reported to its guard.
// It implements every method itself (no embedding), so a write the
// interface gains cannot pass unseen: it would not compile.
type guardedStore struct {
	g *guard
	s state.Records
}

var _ state.Records = guardedStore{}

func (w guardedStore) Path() string { return w.s.Path() }
func (w guardedStore) AppendDemand(series string, xs ...state.Sample) error {
	w.g.write("AppendDemand")
	return w.s.AppendDemand(series, xs...)
}
func (w guardedStore) Demand(series string, since time.Time) ([]state.Sample, error) {
	return w.s.Demand(series, since)
}
func (w guardedStore) LatestDemand(series string) (state.Sample, bool, error) {
	return w.s.LatestDemand(series)
}
func (w guardedStore) DemandSeries() ([]string, error) { return w.s.DemandSeries() }
func (w guardedStore) PruneDemand(before time.Time) (int, error) {
	w.g.write("PruneDemand")
	return w.s.PruneDemand(before)
}
func (w guardedStore) FillDemand(series string, step time.Duration, xs ...state.Sample) ([]state.Sample, int, error) {
	w.g.write("FillDemand")
	return w.s.FillDemand(series, step, xs...)
}
func (w guardedStore) PutBackoff(b state.Backoff) error {
	w.g.write("PutBackoff")
	return w.s.PutBackoff(b)
}
func (w guardedStore) DeleteBackoff(pool string) error {
	w.g.write("DeleteBackoff")
	return w.s.DeleteBackoff(pool)
}
func (w guardedStore) Backoffs() ([]state.Backoff, error) { return w.s.Backoffs() }
func (w guardedStore) PutDrain(d state.Drain) error       { w.g.write("PutDrain"); return w.s.PutDrain(d) }
func (w guardedStore) DeleteDrain(node string) error {
	w.g.write("DeleteDrain")
	return w.s.DeleteDrain(node)
}
func (w guardedStore) Drains() ([]state.Drain, error) { return w.s.Drains() }
func (w guardedStore) DrainLog(since time.Time) ([]state.Drain, error) {
	return w.s.DrainLog(since)
}
func (w guardedStore) PruneDrainLog(before time.Time) (int, error) {
	w.g.write("PruneDrainLog")
	return w.s.PruneDrainLog(before)
}
func (w guardedStore) PutHalted(t time.Time) error { w.g.write("PutHalted"); return w.s.PutHalted(t) }
func (w guardedStore) Halted() (time.Time, error)  { return w.s.Halted() }
func (w guardedStore) PutIntent(in state.Intent) error {
	w.g.write("PutIntent")
	return w.s.PutIntent(in)
}
func (w guardedStore) DoneIntent(key string) error {
	w.g.write("DoneIntent")
	return w.s.DoneIntent(key)
}
func (w guardedStore) Intents() ([]state.Intent, error) {
	return w.s.Intents()
}
func (w guardedStore) SettleLaunch(l state.Launch) error {
	w.g.write("SettleLaunch")
	return w.s.SettleLaunch(l)
}
func (w guardedStore) PutLaunches(ls ...state.Launch) error {
	w.g.write("PutLaunches")
	return w.s.PutLaunches(ls...)
}
func (w guardedStore) DeleteLaunches(keys ...string) error {
	w.g.write("DeleteLaunches")
	return w.s.DeleteLaunches(keys...)
}
func (w guardedStore) Launches() ([]state.Launch, error) { return w.s.Launches() }
func (w guardedStore) PutSeen(t time.Time, nodes ...string) error {
	w.g.write("PutSeen")
	return w.s.PutSeen(t, nodes...)
}
func (w guardedStore) DeleteSeen(nodes ...string) error {
	w.g.write("DeleteSeen")
	return w.s.DeleteSeen(nodes...)
}
func (w guardedStore) SeenNodes() ([]state.NodeTime, error) { return w.s.SeenNodes() }
func (w guardedStore) PutReady(t time.Time, nodes ...string) error {
	w.g.write("PutReady")
	return w.s.PutReady(t, nodes...)
}
func (w guardedStore) DeleteReady(nodes ...string) error {
	w.g.write("DeleteReady")
	return w.s.DeleteReady(nodes...)
}
func (w guardedStore) ReadyNodes() ([]state.NodeTime, error) { return w.s.ReadyNodes() }
func (w guardedStore) PutCancelled(node string, t time.Time) error {
	w.g.write("PutCancelled")
	return w.s.PutCancelled(node, t)
}
func (w guardedStore) DeleteCancelled(node string) error {
	w.g.write("DeleteCancelled")
	return w.s.DeleteCancelled(node)
}
func (w guardedStore) CancelledDrains() ([]state.Cancelled, error) { return w.s.CancelledDrains() }
func (w guardedStore) PutPools(ps ...state.PoolRecord) error {
	w.g.write("PutPools")
	return w.s.PutPools(ps...)
}
func (w guardedStore) Pools() ([]state.PoolRecord, error) { return w.s.Pools() }
func (w guardedStore) ClaimFleet(name string) error {
	w.g.write("ClaimFleet")
	return w.s.ClaimFleet(name)
}
func (w guardedStore) PutCredential(c state.Credential) error {
	w.g.write("PutCredential")
	return w.s.PutCredential(c)
}
func (w guardedStore) DeleteCredentials(nodes ...string) error {
	w.g.write("DeleteCredentials")
	return w.s.DeleteCredentials(nodes...)
}
func (w guardedStore) Credentials() ([]state.Credential, error) { return w.s.Credentials() }
func (w guardedStore) PutAPIToken(t state.APIToken) error {
	w.g.write("PutAPIToken")
	return w.s.PutAPIToken(t)
}
func (w guardedStore) DeleteAPIToken(name string) error {
	w.g.write("DeleteAPIToken")
	return w.s.DeleteAPIToken(name)
}
func (w guardedStore) APITokens() ([]state.APIToken, error) { return w.s.APITokens() }
func (w guardedStore) PutViews(views ...state.View) error {
	w.g.write("PutViews")
	return w.s.PutViews(views...)
}
func (w guardedStore) Views() ([]state.View, error) { return w.s.Views() }

// guardedCloud is a provider (and protector, and reaper of orphans) with
// every change reported to its guard.
type guardedCloud struct {
	g *guard
	p interface {
		providers.Provider
		providers.Protector
		providers.Reaper
	}
}

func (w guardedCloud) Orphans(ctx context.Context, fleetName string, pools []fleet.Pool) ([]providers.Orphan, error) {
	return w.p.Orphans(ctx, fleetName, pools)
}
func (w guardedCloud) TerminateOrphan(ctx context.Context, fleetName string, o providers.Orphan) error {
	w.g.write("TerminateOrphan")
	return w.p.TerminateOrphan(ctx, fleetName, o)
}

func (w guardedCloud) Describe(ctx context.Context, p fleet.Pool) (providers.Group, error) {
	return w.p.Describe(ctx, p)
}
func (w guardedCloud) Launch(ctx context.Context, p fleet.Pool, r providers.LaunchRequest) error {
	w.g.write("Launch")
	return w.p.Launch(ctx, p, r)
}
func (w guardedCloud) Terminate(ctx context.Context, p fleet.Pool, ids []string) error {
	w.g.write("Terminate")
	return w.p.Terminate(ctx, p, ids)
}
func (w guardedCloud) SetProtected(ctx context.Context, p fleet.Pool, ids []string, on bool) error {
	w.g.write("SetProtected")
	return w.p.SetProtected(ctx, p, ids, on)
}

// TestObservationOnlyReads: a fleet launched into, ready, drained, its
// nodes terminated behind the controller's back and gone (one holding a
// node credential), its launch records outlived. Before every cycle the
// controller's observation runs alone with the store and the cloud
// guarded: it writes nothing to either. The cycles themselves write every
// record the observations implied (first sightings, claims, ready times,
// gone nodes' drains, ready times, sightings and credentials, expired
// launches) and protect reported work.
func TestObservationOnlyReads(t *testing.T) {
	g := &guard{writes: map[string]int{}}
	pool := gpuPool("g5", 8, 10, 5*time.Minute)
	l := newLoopOn(t, false, func(s state.Records, p providers.Provider) (state.Records, providers.Provider) {
		return guardedStore{g: g, s: s}, guardedCloud{g: g, p: p.(*sim.Cloud)}
	}, pool)
	creds, err := nodeauth.NewRegistry(l.c.store, func() time.Time { return l.now }, nil)
	if err != nil {
		t.Fatal(err)
	}
	l.c.creds = creds
	ctx := context.Background()
	step := func(what string) {
		t.Helper()
		l.now = l.now.Add(time.Minute)
		l.report(t)
		g.armed = true
		f := &cycleFleet{c: l.c}
		if _, err := f.Observe(ctx, l.now); err != nil {
			t.Fatalf("%s: observing: %v", what, err)
		}
		g.armed = false
		if len(g.faults) > 0 {
			t.Fatalf("%s: the observation wrote %s", what, strings.Join(g.faults, ", "))
		}
		if _, err := l.c.Cycle(ctx); err != nil {
			t.Fatalf("%s: cycle: %v", what, err)
		}
	}
	l.pending.Set(l.now, DemandPush{Source: "slurm", Pending: []PendingDemand{{Pool: "g5", GPUs: 24}}})
	step("launch")
	for range 6 {
		step("booting")
	}
	var nodes []string
	grp, _ := l.cloud.Describe(ctx, pool)
	for _, in := range grp.Instances {
		nodes = append(nodes, in.ID)
	}
	if len(nodes) < 3 {
		t.Fatalf("nodes %v after a launch of 3", nodes)
	}
	for _, n := range nodes {
		l.busy[n] = true
	}
	l.pending.Set(l.now, DemandPush{Source: "slurm"})
	step("ready and busy")
	victim := nodes[0]
	if _, _, err := creds.Issue(victim, "g5", nodeauth.ViaBootstrap, ""); err != nil {
		t.Fatal(err)
	}
	if err := l.store.PutDrain(state.Drain{Node: victim, Pool: "g5", Started: l.now, Deadline: l.now.Add(time.Hour)}); err != nil {
		t.Fatal(err)
	}
	if err := l.cloud.Terminate(ctx, pool, []string{victim}); err != nil {
		t.Fatal(err)
	}
	for range int(GoneGrace/time.Minute) + 2 {
		step("a node gone behind the controller's back")
	}
	for range 30 {
		step("launch records outlived")
	}
	if d, _ := l.store.Drains(); slices.ContainsFunc(d, func(d state.Drain) bool { return d.Node == victim }) {
		t.Errorf("drain of %s, gone for %v, still kept", victim, GoneGrace)
	}
	for _, m := range []string{"PutSeen", "PutLaunches", "PutReady", "DeleteDrain", "DeleteReady", "DeleteSeen", "DeleteCredentials", "DeleteLaunches", "SetProtected"} {
		if g.writes[m] == 0 {
			t.Errorf("no %s in any cycle: the observations' writes were lost, not moved (writes: %v)", m, g.writes)
		}
	}
}

// TestGuardSeesEveryWrite: the guarded store reports every method of
// state.Records but its reads (listed: a method added to the interface is
// taken for a write until it is listed here).
func TestGuardSeesEveryWrite(t *testing.T) {
	g := &guard{writes: map[string]int{}}
	w := guardedStore{g: g, s: &state.Memory{}}
	reads := []string{"Path", "Demand", "LatestDemand", "DemandSeries", "Backoffs", "Drains", "DrainLog", "Halted",
		"Intents", "Launches", "SeenNodes", "ReadyNodes", "CancelledDrains", "Pools", "Credentials", "APITokens", "UsageHours", "UsageJobs", "Views"}
	rt := reflect.TypeOf((*state.Records)(nil)).Elem()
	for i := range rt.NumMethod() {
		m := rt.Method(i)
		if slices.Contains(reads, m.Name) {
			continue
		}
		fn := reflect.ValueOf(w).MethodByName(m.Name)
		args := make([]reflect.Value, fn.Type().NumIn())
		for k := range args {
			args[k] = reflect.Zero(fn.Type().In(k))
		}
		if fn.Type().IsVariadic() {
			fn.CallSlice(args)
		} else {
			fn.Call(args)
		}
		if g.writes[m.Name] != 1 {
			t.Errorf("%s: not reported to the guard", m.Name)
		}
	}
}

func (w guardedStore) PutUsage(hours []state.UsageHour, jobs []state.UsageJob) error {
	w.g.write("PutUsage")
	return w.s.PutUsage(hours, jobs)
}
func (w guardedStore) UsageHours(from, to time.Time) ([]state.UsageHour, error) {
	return w.s.UsageHours(from, to)
}
func (w guardedStore) UsageJobs(from, to time.Time) ([]state.UsageJob, error) {
	return w.s.UsageJobs(from, to)
}
func (w guardedStore) PruneUsage(hoursBefore, jobsBefore time.Time) (int, error) {
	w.g.write("PruneUsage")
	return w.s.PruneUsage(hoursBefore, jobsBefore)
}
