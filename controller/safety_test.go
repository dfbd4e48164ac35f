package controller

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/fleetcast/autoscaler/actuator"
	"github.com/fleetcast/autoscaler/agent/report"
	"github.com/fleetcast/autoscaler/fleet"
	"github.com/fleetcast/autoscaler/internal/crashtest"
	"github.com/fleetcast/autoscaler/loop"
	"github.com/fleetcast/autoscaler/planner"
	"github.com/fleetcast/autoscaler/providers"
	"github.com/fleetcast/autoscaler/providers/sim"
	"github.com/fleetcast/autoscaler/state"
)

// outside launches n instances in the pool outside the controller (as
// Terraform, a person or the group itself would), with silent agents, and
// returns their IDs.
func (l *cycler) outside(t *testing.T, pool fleet.Pool, n int) []string {
	t.Helper()
	before := map[string]bool{}
	g, _ := l.cloud.Describe(context.Background(), pool)
	for _, in := range g.Instances {
		before[in.ID] = true
	}
	if err := l.cloud.Launch(context.Background(), pool, providers.LaunchRequest{Count: n}); err != nil {
		t.Fatal(err)
	}
	g, _ = l.cloud.Describe(context.Background(), pool)
	var ids []string
	for _, in := range g.Instances {
		if !before[in.ID] {
			ids = append(ids, in.ID)
			l.silent[in.ID] = true
		}
	}
	return ids
}

// mute silences the agents of every instance the pools have now.
func (l *cycler) mute() {
	for _, p := range l.set.Pools {
		g, _ := l.cloud.Describe(context.Background(), p)
		for _, in := range g.Instances {
			l.silent[in.ID] = true
		}
	}
}

// TestAdoptedFleetIsNeverKilled: the controller starts, with a fresh state
// directory, against a fleet it did not launch (a reservation of two nodes
// kept full, two on-demand nodes) whose agents never report: not installed
// yet, or the state directory was lost. For 24 hours it terminates none of
// them and scales nothing in. Jobs wait for more GPUs than the fleet has,
// once; its own launch for them boots but never reports either: it is held
// while scale-in is halted (the adopted agents are silent: the controller
// cannot tell that from a partition), and so is never terminated, but
// counts against the limits.
func TestAdoptedFleetIsNeverKilled(t *testing.T) {
	reserved := gpuPool("reserved", 8, 2, 5*time.Minute)
	reserved.Capacity, reserved.PricePerHour = fleet.Reserved, 20
	ondemand := gpuPool("ondemand", 8, 10, 5*time.Minute)
	l := newLoop(t, false, reserved, ondemand)
	ctx := context.Background()
	// The fleet as Terraform or a person made it, before the controller.
	adopted := map[string]bool{}
	for _, id := range append(l.outside(t, reserved, 2), l.outside(t, ondemand, 2)...) {
		adopted[id] = true
	}
	l.now = l.now.Add(time.Hour)
	var terminated []string
	start := l.now
	held, launches := 0, 0
	for i := range 24 * 60 {
		if i == 0 {
			// 40 GPUs wait for any pool, with 32 in the fleet: one node
			// is bought.
			l.pending.Set(l.now, DemandPush{Source: "slurm", Pending: []PendingDemand{{GPUs: 40}}})
		}
		l.mute() // no agent ever reports
		plan := l.cycle(t)
		for _, a := range plan.Actions {
			switch a.Kind {
			case planner.Drain:
				t.Fatalf("at %v: drained %s: %s", l.now.Sub(start), a.Node, a.Reason)
			case planner.Terminate:
				if adopted[a.Node] {
					t.Fatalf("at %v: terminated %s, an instance this controller did not launch: %s", l.now.Sub(start), a.Node, a.Reason)
				}
				terminated = append(terminated, a.Node)
			case planner.Hold:
				if a.Code == planner.ReasonBootedWhileHalted {
					held++
				}
			case planner.Launch:
				launches++
			}
		}
	}
	for _, p := range []fleet.Pool{reserved, ondemand} {
		g, _ := l.cloud.Describe(ctx, p)
		for _, in := range g.Instances {
			delete(adopted, in.ID)
		}
	}
	if len(adopted) != 0 {
		t.Errorf("instances gone after 24 hours: %v", adopted)
	}
	// Its own launch is held past its deadline (3 lead times), booted,
	// while scale-in is halted; held, it is not capacity, so the forecast
	// may buy another, which is held in turn. Nothing but launches.
	if len(terminated) != 0 || held < 24*60-20 {
		t.Errorf("terminated %v, held %d cycles; want its own launch held from its deadline (15m) on", terminated, held)
	}
	if n := l.count.changes.Load(); n != int64(launches) || launches < 1 {
		t.Errorf("%d changing calls for %d launches; want the launches alone", n, launches)
	}
}

// TestAdoptedFleetIsReported: unknown instances are named in the plan and
// in the fleet's state, counted as silent (so scale-in halts when they are
// many), and become known once their agents report.
func TestAdoptedFleetIsReported(t *testing.T) {
	p := gpuPool("g5", 8, 10, 5*time.Minute)
	l := newLoop(t, false, p)
	adopted := l.outside(t, p, 3)
	l.now = l.now.Add(10 * time.Minute)
	plan := l.cycle(t)
	if len(plan.UnknownNodes) != 3 || plan.Capacity.SilentNodes != 3 || plan.ScaleInHalt == "" {
		t.Fatalf("plan: unknown %v, %d silent, halt %q; want the 3 unknown, silent, scale-in halted", plan.UnknownNodes, plan.Capacity.SilentNodes, plan.ScaleInHalt)
	}
	for _, n := range l.c.Last().State.Nodes {
		if !n.Unknown || n.State != fleet.Ready {
			t.Fatalf("node %+v; want ready and unknown", n)
		}
	}
	// Degraded, and said so: liveness stays up (a partition must not get
	// the controller restarted), readiness and the metrics say why.
	h := l.c.Handler(APIOptions{OpenReads: true})
	if code, body := get(t, h, "/healthz"); code != http.StatusOK || !strings.HasPrefix(body, "ok\n") ||
		!strings.Contains(body, "degraded: 3 unknown instance(s)") || !strings.Contains(body, "degraded: scale-in halted: 3 of 3 nodes have silent agents") {
		t.Errorf("GET /healthz: %d %q", code, body)
	}
	if code, body := get(t, h, "/readyz"); code != http.StatusServiceUnavailable || !strings.Contains(body, "not ready: 3 unknown instance(s)") {
		t.Errorf("GET /readyz: %d %q", code, body)
	}
	if code, body := get(t, h, "/v1/fleet"); code != http.StatusOK || strings.Count(body, `"unknown": true`) != 3 {
		t.Errorf("GET /v1/fleet does not mark the 3 unknown nodes: %d %s", code, body)
	}
	_, metrics := get(t, h, "/metrics")
	for _, want := range []string{`fleetcast_unknown_nodes{pool="g5"} 3`, "fleetcast_scale_in_halted 1", "fleetcast_ready 0"} {
		if !strings.Contains(metrics, want) {
			t.Errorf("metrics lack %q", want)
		}
	}
	// The agents are installed: the nodes report and are known from then on.
	for _, id := range adopted {
		l.silent[id] = false
	}
	plan = l.cycle(t)
	if len(plan.UnknownNodes) != 0 || plan.ScaleInHalt != "" {
		t.Fatalf("once reporting: unknown %v, halt %q", plan.UnknownNodes, plan.ScaleInHalt)
	}
	if c := plan.Counts(); c[planner.Drain] != 0 || c[planner.Hold] != 3 {
		t.Fatalf("three nodes first heard idle: %+v; want them held until idle for limits.scale_in_unneeded_time", plan.Actions)
	}
	l.now = l.now.Add(l.set.Limits.ScaleInUnneededTime)
	plan = l.cycle(t)
	if c := plan.Counts(); c[planner.Drain] == 0 {
		t.Fatalf("three idle, reporting nodes and no demand: nothing drained: %+v", plan.Actions)
	}
	if code, body := get(t, h, "/readyz"); code != http.StatusOK || body != "ready\n" {
		t.Errorf("GET /readyz once the agents report: %d %q", code, body)
	}
	if _, body := get(t, h, "/healthz"); body != "ok\n" {
		t.Errorf("GET /healthz once the agents report: %q", body)
	}
}

// lagging is a cloud whose reads lag its launches, as EC2's do for
// instances run from a launch template: an instance is listed only lag
// after its launch, the group is keyed (each instance carries its launch's
// key) and its Target is the count listed; a launch runs Count more
// instances, and one sent again with the same key runs none (a client
// token). It records the key of each launch it is sent.
type lagging struct {
	providers.Provider // the simulated cloud, read without lag
	lag                time.Duration
	now                func() time.Time
	keys               []string
}

func (l *lagging) Describe(ctx context.Context, p fleet.Pool) (providers.Group, error) {
	g, err := l.Provider.Describe(ctx, p)
	g.Keyed, g.Target = true, 0
	g.Instances = slices.DeleteFunc(g.Instances, func(in providers.Instance) bool { return l.now().Sub(in.LaunchedAt) < l.lag })
	for _, in := range g.Instances {
		if in.State != providers.InstanceTerminating {
			g.Target++
		}
	}
	return g, err
}

func (l *lagging) Launch(ctx context.Context, p fleet.Pool, req providers.LaunchRequest) error {
	l.keys = append(l.keys, req.Key)
	g, err := l.Provider.Describe(ctx, p)
	if err != nil {
		return err
	}
	return l.Provider.Launch(ctx, p, providers.LaunchRequest{Count: req.Count, Target: g.Target + req.Count, Key: req.Key})
}

// TestRestartWithLaggingReadsLaunchesOnce: the controller launches a node
// for 8 waiting GPUs and is killed just after the cloud call; restarted 10
// seconds later, its cloud does not list the instance yet (its reads lag
// 30 seconds). The journaled launch is sent again with its own key (which
// the cloud answers without launching), the launch is counted as capacity
// until it is listed, and nothing more is bought: one node, not two.
func TestRestartWithLaggingReadsLaunchesOnce(t *testing.T) {
	p := gpuPool("p4d", 8, 10, 5*time.Minute)
	l := newLoop(t, false, p)
	lag := &lagging{Provider: l.cloud, lag: 30 * time.Second, now: func() time.Time { return l.now }}
	crash := &crashtest.Provider{Provider: lag, After: true}
	l.restart(t, crash)
	ctx := context.Background()
	l.pending.Set(l.now, DemandPush{Source: "slurm", Pending: []PendingDemand{{Pool: "p4d", GPUs: 8}}})
	l.now = l.now.Add(time.Minute)
	if _, err := l.c.Cycle(ctx); !errors.Is(err, crashtest.ErrCrash) {
		t.Fatalf("cycle: %v; want the controller killed after the launch call", err)
	}
	l.restart(t, crash)
	for i := range 20 {
		if i == 0 {
			l.now = l.now.Add(10 * time.Second)
		} else {
			l.now = l.now.Add(time.Minute)
		}
		l.pending.Set(l.now, DemandPush{Source: "slurm", Pending: []PendingDemand{{Pool: "p4d", GPUs: 8}}})
		l.report(t)
		if _, err := l.c.Cycle(ctx); err != nil {
			t.Fatalf("cycle %d after the restart: %v", i, err)
		}
		if n := l.target(t, p); n != 1 {
			t.Fatalf("%v after the restart: %d nodes for 8 waiting GPUs; want 1", l.now.Sub(t0), n)
		}
	}
	if len(lag.keys) != 2 || lag.keys[0] != lag.keys[1] {
		t.Errorf("launch keys sent %v; want the journaled launch sent again with its own key", lag.keys)
	}
	if st := l.c.Last().State; len(st.Nodes) != 1 || st.Nodes[0].State != fleet.Ready || st.Nodes[0].Unknown {
		t.Errorf("nodes %+v; want the one launched, ready and known", st.Nodes)
	}
}

// TestRecoverKeyedLaunch: a launch in a keyed group (EC2 instances from a
// launch template), journaled when the controller was killed, is settled
// on restart while the cloud's reads lag: sent again with its own key when
// it is not listed (made once, whether the first call reached the cloud
// or not), dropped when older than its provisioning deadline or when
// sending it could take the pool over its max.
func TestRecoverKeyedLaunch(t *testing.T) {
	for _, tt := range []struct {
		name          string
		before, after bool
		down          time.Duration
		max           int
		want          string // done or dropped
		// sent counts the launches that reached the cloud.
		nodes, sent int
	}{
		{name: "killed after the call", after: true, down: 10 * time.Second, max: 20, want: "done", nodes: 2, sent: 2},
		{name: "killed before the call", before: true, down: 10 * time.Second, max: 20, want: "done", nodes: 2, sent: 1},
		{name: "killed before the call, down past its deadline", before: true, down: time.Hour, max: 20, want: "dropped", nodes: 0, sent: 0},
		{name: "killed after the call, the max lowered meanwhile", after: true, down: 10 * time.Second, max: 1, want: "dropped", nodes: 2, sent: 1},
	} {
		t.Run(tt.name, func(t *testing.T) {
			now := t0
			clock := func() time.Time { return now }
			p := simPool("a100", 20)
			cloud := sim.New([]fleet.Pool{p}, 1, clock)
			lag := &lagging{Provider: cloud, lag: 30 * time.Second, now: clock}
			dir := t.TempDir()
			store, err := state.Open(dir)
			if err != nil {
				t.Fatal(err)
			}
			act, err := actuator.NewActuator(store, []fleet.Pool{p}, map[string]providers.Provider{p.Name: &crashtest.Provider{Provider: lag, Before: tt.before, After: tt.after}}, clock, nil)
			if err != nil {
				t.Fatal(err)
			}
			if err := act.Launch(context.Background(), p.Name, 2); !errors.Is(err, crashtest.ErrCrash) {
				t.Fatalf("launch: %v", err)
			}
			store.Close()
			now = now.Add(tt.down)
			if store, err = state.Open(dir); err != nil {
				t.Fatal(err)
			}
			defer store.Close()
			p.Max = tt.max
			if act, err = actuator.NewActuator(store, []fleet.Pool{p}, map[string]providers.Provider{p.Name: lag}, clock, nil); err != nil {
				t.Fatal(err)
			}
			r, err := act.Recover(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			did := map[string]int{"done": len(r.Done), "dropped": len(r.Dropped)}
			if did[tt.want] != 1 || did["done"]+did["dropped"] != 1 {
				t.Errorf("recover: %v; want one %s", did, tt.want)
			}
			g, _ := cloud.Describe(context.Background(), p)
			if len(g.Instances) != tt.nodes || len(lag.keys) != tt.sent || (len(lag.keys) == 2 && lag.keys[0] != lag.keys[1]) {
				t.Errorf("%d instances, launches sent with keys %v; want %d instances and %d sends of one key", len(g.Instances), lag.keys, tt.nodes, tt.sent)
			}
			ls, _ := store.Launches()
			if recorded := len(ls) == 1 && ls[0].Count == 2; recorded != (tt.want == "done") {
				t.Errorf("launch records %+v", ls)
			}
			if in, _ := store.Intents(); len(in) != 0 {
				t.Errorf("journal after recovery: %+v", in)
			}
		})
	}
}

// flaky fails a pool's launches (unmade, with an outcome the controller
// cannot know: a timeout) a number of times, then its group's reads.
type flaky struct {
	providers.Provider
	pool                   string
	launchFails, descFails int
}

func (f *flaky) Launch(ctx context.Context, p fleet.Pool, r providers.LaunchRequest) error {
	if p.Name == f.pool && f.launchFails > 0 {
		f.launchFails--
		return errors.New("request timed out")
	}
	return f.Provider.Launch(ctx, p, r)
}

func (f *flaky) Describe(ctx context.Context, p fleet.Pool) (providers.Group, error) {
	if p.Name == f.pool && f.launchFails == 0 && f.descFails > 0 {
		f.descFails--
		return providers.Group{}, errors.New("throttled")
	}
	return f.Provider.Describe(ctx, p)
}

// TestUnsettledLaunchCountsAgainstLimits: launches into pool a time out
// twice, then a's group cannot be read once, while 16 GPUs wait and the
// fleet may hold 16. A launch whose outcome is unknown counts as capacity
// that may be coming, so the planner does not buy the same GPUs in pool b
// meanwhile: the fleet never holds more than 16 GPUs.
func TestUnsettledLaunchCountsAgainstLimits(t *testing.T) {
	a := gpuPool("a", 8, 10, 5*time.Minute)
	b := gpuPool("b", 8, 10, 5*time.Minute)
	b.PricePerHour *= 2
	l := newLoop(t, false, a, b)
	l.set.Limits.MaxGPUs = 16
	l.restart(t, &flaky{Provider: l.cloud, pool: "a", launchFails: 2, descFails: 1})
	for i := range 8 {
		l.pending.Set(l.now, DemandPush{Source: "slurm", Pending: []PendingDemand{{GPUs: 16}}})
		l.now = l.now.Add(time.Minute)
		l.c.Cycle(context.Background()) // errors expected: the timeouts, the read
		if gpus := 8 * (l.target(t, a) + l.target(t, b)); gpus > 16 {
			t.Fatalf("cycle %d: %d GPUs (a %d, b %d nodes) > max_gpus 16", i, gpus, l.target(t, a), l.target(t, b))
		}
	}
	if got := l.target(t, a); got != 2 {
		t.Errorf("pool a has %d nodes once its launches went through; want 2", got)
	}
}

// TestOldLaunchNeverClaimsANewInstance: the controller stops just after a
// launch; while it is down its instance goes (a spot reclaim), and twenty
// minutes on a person adds one with no agent. Restarted on the same state
// (the launch record still kept), it does not take the person's instance
// for its launch's: first seen past the launch's provisioning timeout, it
// is unknown, and never terminated.
func TestOldLaunchNeverClaimsANewInstance(t *testing.T) {
	a := gpuPool("a", 8, 10, 5*time.Minute)
	l := newLoop(t, false, a)
	ctx := context.Background()
	l.cycle(t)
	if err := l.c.act.Launch(ctx, "a", 1); err != nil {
		t.Fatal(err)
	}
	g, _ := l.cloud.Describe(ctx, a)
	if err := l.cloud.Terminate(ctx, a, []string{g.Instances[0].ID}); err != nil {
		t.Fatal(err)
	}
	l.now = l.now.Add(20 * time.Minute)
	person := l.outside(t, a, 1)[0]
	l.restart(t, l.count)
	for range 60 {
		for _, x := range l.cycle(t).Actions {
			if x.Kind == planner.Terminate && x.Node == person {
				t.Fatalf("terminated %s, a person's instance: %s", person, x.Reason)
			}
		}
	}
}

// TestOwnLaunchClaimedOnceForGood: the controller's launch loses its
// instance early (a spot reclaim); a person adds one a minute later, within
// the launch's provisioning timeout. The launch's unit went with its own
// instance: the person's is unknown, and never terminated.
func TestOwnLaunchClaimedOnceForGood(t *testing.T) {
	a := gpuPool("a", 8, 10, 5*time.Minute)
	l := newLoop(t, false, a)
	ctx := context.Background()
	l.cycle(t)
	if err := l.c.act.Launch(ctx, "a", 1); err != nil {
		t.Fatal(err)
	}
	g, _ := l.cloud.Describe(ctx, a)
	own := g.Instances[0].ID
	l.silent[own] = true
	l.cycle(t) // claimed
	if err := l.cloud.Terminate(ctx, a, []string{own}); err != nil {
		t.Fatal(err)
	}
	l.cycle(t)
	person := l.outside(t, a, 1)[0]
	l.restart(t, l.count) // the claims are in the state, not in memory
	for range 60 {
		for _, x := range l.cycle(t).Actions {
			if x.Kind == planner.Terminate && x.Node == person {
				t.Fatalf("terminated %s, a person's instance, for a launch whose instance was gone: %s", person, x.Reason)
			}
		}
	}
}

// TestOwnLaunchTerminatedAcrossAnOutage: a launch of the controller's own
// never reports. The controller is down ten minutes across its deadline,
// or its pool cannot be read for half an hour across it: either way the
// instance is still known as its own afterwards, and terminated at its
// deadline (from the restart, after a restart: its agent may report to
// the new process first), not held for ever as unknown.
func TestOwnLaunchTerminatedAcrossAnOutage(t *testing.T) {
	for _, outage := range []string{"restart", "unreadable"} {
		t.Run(outage, func(t *testing.T) {
			p := gpuPool("g5", 8, 20, 5*time.Minute) // a 15-minute deadline
			l := newLoop(t, false, p)
			ctx := context.Background()
			u := &unreadable{Provider: l.count, failing: map[string]bool{}, changes: map[string]int{}}
			l.restart(t, u)
			l.cycle(t)
			if err := l.c.act.Launch(ctx, "g5", 1); err != nil {
				t.Fatal(err)
			}
			launched := l.now
			g, _ := l.cloud.Describe(ctx, p)
			own := g.Instances[0].ID
			l.silent[own] = true
			for range 10 {
				l.cycle(t)
			}
			var restarted time.Time
			if outage == "restart" {
				l.now = l.now.Add(10 * time.Minute)
				l.restart(t, u)
				restarted = l.now
			} else {
				u.failing["g5"] = true
				for range 30 {
					l.now = l.now.Add(time.Minute)
					l.c.Cycle(ctx)
				}
				u.failing["g5"] = false
			}
			var at time.Time
			for range 60 {
				for _, a := range l.cycle(t).Actions {
					if a.Kind == planner.Terminate && a.Node == own {
						at = l.now
					}
				}
			}
			switch {
			case at.IsZero():
				t.Fatalf("its own launch never terminated after the outage")
			case outage == "restart" && at.Sub(restarted) <= 15*time.Minute:
				t.Errorf("terminated %v after the restart; want its deadline from the restart (15m)", at.Sub(restarted))
			}
			l.now = launched.Add(3 * time.Hour)
			l.cycle(t)
			if ls, _ := l.store.Launches(); len(ls) != 0 {
				t.Errorf("launch records %+v kept long after their instances went", ls)
			}
		})
	}
}

// TestReplacementNeverClaimed: a fleet adopted with its agents not
// reporting; the controller launches a node, and the group replaces one of
// the adopted instances in the same moment. Which new instance is the
// controller's cannot be told, so neither is terminated for the launch,
// even once the controller's own has gone.
func TestReplacementNeverClaimed(t *testing.T) {
	p := gpuPool("ondemand", 8, 10, 5*time.Minute)
	l := newLoop(t, false, p)
	ctx := context.Background()
	l.outside(t, p, 2)
	l.now = l.now.Add(time.Hour)
	l.cycle(t)
	l.pending.Set(l.now, DemandPush{Source: "slurm", Pending: []PendingDemand{{Pool: "ondemand", GPUs: 24}}})
	if plan := l.cycle(t); plan.Counts()[planner.Launch] != 1 {
		t.Fatalf("launches %v; want one node", plan.Counts())
	}
	g, _ := l.cloud.Describe(ctx, p)
	l.now = l.now.Add(10 * time.Second) // the replacement is the newest instance
	if err := l.cloud.Terminate(ctx, p, []string{g.Instances[0].ID}); err != nil {
		t.Fatal(err)
	}
	replacement := l.outside(t, p, 1)[0]
	l.mute()
	for i := range 60 {
		if i == 5 {
			// Then the controller's own instance goes (a spot reclaim):
			// the replacement is still not taken for the launch's.
			g, _ := l.cloud.Describe(ctx, p)
			for _, in := range g.Instances {
				if in.LaunchKey != "" {
					if err := l.cloud.Terminate(ctx, p, []string{in.ID}); err != nil {
						t.Fatal(err)
					}
				}
			}
		}
		for _, a := range l.cycle(t).Actions {
			if a.Kind == planner.Terminate || a.Kind == planner.Drain {
				t.Fatalf("%s %s: %s", a.Kind, a.Node, a.Reason)
			}
		}
		// Not taken for the launch's: unknown, never given a deadline
		// (a hold during a halt would hide a wrong claim otherwise).
		for _, n := range l.c.Last().State.Nodes {
			if n.ID == replacement && !n.Unknown {
				t.Fatalf("cycle %d: the replacement %s is taken for the controller's launch (%s)", i, n.ID, n.State)
			}
		}
	}
}

// failingTerminate refuses every termination, as a throttled cloud may.
type failingTerminate struct{ providers.Provider }

func (f failingTerminate) Terminate(ctx context.Context, p fleet.Pool, ids []string) error {
	return &providers.ThrottledError{Pool: p.Name, Err: context.DeadlineExceeded}
}

// TestFailedTerminationCountsAgainstLimits: two launches of the
// controller's own never report, and their terminations at the deadline
// keep failing; jobs wait for 16 GPUs, and the fleet may hold 16. Until
// they are gone the two nodes count against max_gpus, so no other pool
// buys past it.
func TestFailedTerminationCountsAgainstLimits(t *testing.T) {
	a := gpuPool("a", 8, 10, 5*time.Minute)
	b := gpuPool("b", 8, 10, 5*time.Minute)
	b.PricePerHour *= 2
	l := newLoop(t, false, a, b)
	l.set.Limits.MaxGPUs = 16
	l.restart(t, failingTerminate{l.cloud})
	ctx := context.Background()
	l.cycle(t)
	if err := l.c.act.Launch(ctx, "a", 2); err != nil {
		t.Fatal(err)
	}
	g, _ := l.cloud.Describe(ctx, a)
	for _, in := range g.Instances {
		l.silent[in.ID] = true
	}
	for i := range 40 {
		l.pending.Set(l.now, DemandPush{Source: "slurm", Pending: []PendingDemand{{Pool: "b", GPUs: 16}}})
		l.now = l.now.Add(time.Minute)
		l.report(t)
		l.c.Cycle(ctx) // the terminations' errors are expected
		if gpus := 8 * (l.target(t, a) + l.target(t, b)); gpus > 16 {
			t.Fatalf("cycle %d: %d GPUs (a %d, b %d nodes) > max_gpus 16", i, gpus, l.target(t, a), l.target(t, b))
		}
	}
}

// TestDryRunLeftoverLaunch: a dry run on a state a live controller left
// with a launch journaled counts the launch's capacity only while it could
// still come (one provisioning deadline).
func TestDryRunLeftoverLaunch(t *testing.T) {
	p := gpuPool("g5", 8, 20, 5*time.Minute)
	l := newLoop(t, true, p)
	if err := l.store.PutIntent(state.Intent{Key: "fc-launch-g5-1", Kind: state.IntentLaunch, Pool: "g5", Count: 3, Target: 3, Created: l.now}); err != nil {
		t.Fatal(err)
	}
	if plan := l.cycle(t); plan.Capacity.LaunchingGPUs != 24 {
		t.Fatalf("launching %d GPUs; want the journaled launch's 24", plan.Capacity.LaunchingGPUs)
	}
	l.now = l.now.Add(time.Hour)
	if plan := l.cycle(t); len(l.c.Last().State.Nodes) != 0 || plan.Counts()[planner.Terminate] != 0 {
		t.Fatalf("an hour on: nodes %+v, plan %+v; want the leftover launch no longer counted", l.c.Last().State.Nodes, plan.Actions)
	}
}

// TestUnlistedLaunchGivenUpOnce: a keyed group never lists a launch's
// instances. Its stand-ins count as launching capacity until the deadline,
// are then given up (the pool backed off) once, and never come back.
func TestUnlistedLaunchGivenUpOnce(t *testing.T) {
	p := gpuPool("p4d", 8, 10, 5*time.Minute)
	l := newLoop(t, false, p)
	lag := &lagging{Provider: l.cloud, lag: 1000 * time.Hour, now: func() time.Time { return l.now }}
	l.restart(t, lag)
	l.pending.Set(l.now, DemandPush{Source: "slurm", Pending: []PendingDemand{{Pool: "p4d", GPUs: 8}}})
	given := 0
	for range 60 {
		for _, a := range l.cycle(t).Actions {
			if a.Kind == planner.Terminate && actuator.IsUnlisted(a.Node) {
				given++
			}
		}
	}
	if given != 1 {
		t.Errorf("%d stand-ins given up; want the launch's one, once", given)
	}
	if bs, _ := l.store.Backoffs(); len(bs) != 1 || bs[0].Failures != 1 {
		t.Errorf("back-offs %+v; want the pool's, once", bs)
	}
}

// TestDemandCappedPerNode: a report taken straight into the agents' view
// (past the receiver's checks) claiming 16 GPUs held on an 8-GPU node adds
// at most 8 to the demand history the forecaster learns from.
func TestDemandCappedPerNode(t *testing.T) {
	p := gpuPool("g5", 8, 10, 5*time.Minute)
	l := newLoop(t, false, p)
	ctx := context.Background()
	if err := l.c.act.Launch(ctx, "g5", 1); err != nil {
		t.Fatal(err)
	}
	g, _ := l.cloud.Describe(ctx, p)
	l.silent[g.Instances[0].ID] = true
	l.now = l.now.Add(6 * time.Minute)
	r := &report.Report{Node: g.Instances[0].ID, SentAt: l.now, Healthy: true, Drain: report.DrainStatus{State: report.NotDraining}}
	for i := range 16 {
		r.GPUs = append(r.GPUs, report.GPU{Index: i, MemoryTotal: 1})
		r.Jobs = append(r.Jobs, report.Job{ID: fmt.Sprint("j", i), GPUs: []int{i}, Start: t0})
	}
	if _, err := l.agents.Accept(ctx, r); err != nil {
		t.Fatal(err)
	}
	l.cycle(t)
	last, _, err := l.store.LatestDemand(loop.DemandSeries)
	if err != nil || last.Value != 8 {
		t.Errorf("demand recorded %v (%v); want 8, the node's GPUs", last.Value, err)
	}
}

// TestUnreadableGPUsNeverIdle: nodes whose agents cannot read their GPUs
// any more, with no demand, for half an hour. One had a GPU process no
// job claims when its GPUs last read: it is kept, as that process never
// checkpointed (its registered job checkpointing does not make it safe). One was empty: it is kept too, as empty is not idle when
// nobody can see the GPUs. One runs a job that checkpoints: it is drained
// on the normal rule, but never terminated while its GPUs cannot be read,
// even though its agent says the drain is safe (docs/design.md rules 1 and 2). A healthy
// empty node is drained and terminated, so the holds are not for want of
// scale-in. The faults are reported in the plan, /v1/fleet, /healthz and
// the metrics.
func TestUnreadableGPUsNeverIdle(t *testing.T) {
	p := gpuPool("g5", 8, 10, 5*time.Minute)
	l := newLoop(t, false, p)
	ctx := context.Background()
	if err := l.c.act.Launch(ctx, "g5", 4); err != nil {
		t.Fatal(err)
	}
	g, _ := l.cloud.Describe(ctx, p)
	l.mute() // this test's reports are its own
	unknown, empty, working, healthy := g.Instances[0].ID, g.Instances[1].ID, g.Instances[2].ID, g.Instances[3].ID
	l.now = l.now.Add(5 * time.Minute)
	gpus := []report.GPU{{Index: 0, UUID: "GPU-0", MemoryTotal: 80 << 30}, {Index: 1, UUID: "GPU-1", MemoryTotal: 80 << 30}}
	held := map[string]string{}
	send := func(node string, ok bool, jobs ...report.Job) {
		t.Helper()
		r := report.Report{Node: node, SentAt: l.now, Healthy: ok, Jobs: jobs, Drain: report.DrainStatus{State: report.NotDraining}}
		if ok {
			r.GPUs = gpus
			if node == unknown {
				r.GPUs = slices.Clone(gpus)
				r.GPUs[1].Processes = []report.Process{{PID: 4242, GPU: 1}}
				r.Unknown = r.GPUs[1].Processes
			}
		} else {
			r.GPUError = "NVML device count: GPU is lost (fell off the bus)"
		}
		if id := held[node]; id != "" {
			// The agent's verdict: safe once its job checkpointed after it
			// received the drain (it checkpoints every minute), unless a
			// process no job claims was on its GPUs when they last read.
			r.Drain = report.DrainStatus{State: report.SafeToTerminate, ID: id}
			if node == unknown {
				r.Drain.State, r.Drain.Waiting = report.Draining, nil
			}
		}
		if err := r.Validate(l.now, 5*time.Minute, 8); err != nil {
			t.Fatalf("the test's report is invalid: %v", err)
		}
		ans, err := l.agents.Accept(ctx, &r)
		if err != nil {
			t.Fatal(err)
		}
		held[node] = ""
		if ans.Drain != nil {
			held[node] = ans.Drain.ID
		}
	}
	job := func() report.Job {
		return report.Job{ID: "train", GPUs: []int{0}, Start: t0, LastCheckpoint: l.now.Add(-10 * time.Second)}
	}
	for _, id := range []string{unknown, empty, working, healthy} {
		send(id, true)
	}
	// Jobs waiting for 24 GPUs keep all four while they become ready.
	l.pending.Set(l.now, DemandPush{Source: "s", Pending: []PendingDemand{{Pool: "g5", GPUs: 24}}})
	if plan, err := l.c.Cycle(ctx); err != nil || len(plan.Actions) != 0 {
		t.Fatalf("first cycle: %v %+v", err, plan.Actions)
	}
	l.pending.Set(l.now, DemandPush{Source: "s"})
	actions := map[string][]planner.ActionKind{}
	var last planner.Plan
	emptyHeld := false // held for its fault: idle as far as its agent knows
	for i := range 30 {
		l.now = l.now.Add(time.Minute)
		send(unknown, false, job())
		send(empty, false)
		send(working, false, job())
		send(healthy, true)
		plan, err := l.c.Cycle(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, a := range plan.Actions {
			actions[a.Node] = append(actions[a.Node], a.Kind)
			emptyHeld = emptyHeld || a.Node == empty && a.Kind == planner.Hold && a.Code == planner.ReasonGPUFault
		}
		if i == 0 {
			last = plan
			if got := fmt.Sprint(plan.GPUFaultNodes); got != fmt.Sprint([]string{unknown, empty, working}) {
				t.Errorf("plan's GPU-fault nodes %s, want %v", got, []string{unknown, empty, working})
			}
			h := l.c.Handler(APIOptions{OpenReads: true})
			if _, body := get(t, h, "/v1/fleet"); strings.Count(body, `"gpu_fault": "NVML device count: GPU is lost (fell off the bus)"`) != 3 {
				t.Errorf("GET /v1/fleet does not show the 3 GPU faults: %s", body)
			}
			if _, body := get(t, h, "/healthz"); !strings.Contains(body, "degraded: 3 node(s) whose agents cannot read their GPUs") {
				t.Errorf("GET /healthz: %q", body)
			}
			if _, body := get(t, h, "/metrics"); !strings.Contains(body, `fleetcast_gpu_fault_nodes{pool="g5"} 3`) {
				t.Errorf("metrics lack the GPU faults")
			}
		}
	}
	for _, id := range []string{unknown, empty} {
		if slices.Contains(actions[id], planner.Drain) || slices.Contains(actions[id], planner.Terminate) {
			t.Errorf("node %s, whose GPUs cannot be read, was scaled in: %v", id, actions[id])
		}
	}
	if !slices.Contains(actions[working], planner.Drain) || slices.Contains(actions[working], planner.Terminate) {
		t.Errorf("node %s, whose GPUs cannot be read, running a job that checkpoints: actions %v, want drained, never terminated", working, actions[working])
	}
	if !slices.Contains(actions[healthy], planner.Drain) || !slices.Contains(actions[healthy], planner.Terminate) {
		t.Errorf("node %s: actions %v, want drained and terminated", healthy, actions[healthy])
	}
	for _, a := range last.Actions {
		if a.Node == empty && a.Code != planner.ReasonGPUFault {
			t.Errorf("the empty node's hold is for %s (%q), want %s", a.Code, a.Reason, planner.ReasonGPUFault)
		}
		if a.Node == unknown && !strings.Contains(a.Reason, "unknown-process-4242") {
			t.Errorf("the node with an unclaimed process: hold %q, want it named", a.Reason)
		}
	}
	if !emptyHeld {
		t.Errorf("the empty node whose GPUs cannot be read was never held for %s: it was not kept from scale-in by its fault", planner.ReasonGPUFault)
	}
}

// TestOrphansReaped: a pool is taken out of the config and the controller
// restarted. Its instances this fleet launched are orphans: the idle one
// is drained and terminated once idle for planner.ReapIdle, the busy one
// once its job ends and it has been idle as long, the one whose agent
// reported it idle and then went silent never.
// Another fleet's instance in that pool, and one launched there outside
// Fleetcast (no launch key), are never touched.
func TestOrphansReaped(t *testing.T) {
	kept, gone := gpuPool("kept", 8, 10, 5*time.Minute), gpuPool("gone", 8, 10, 5*time.Minute)
	gone.PricePerHour = 20
	l := newLoop(t, false, kept, gone)
	ctx := context.Background()
	if err := l.c.act.Launch(ctx, "gone", 3); err != nil {
		t.Fatal(err)
	}
	g, _ := l.cloud.Describe(ctx, gone)
	busy, silent, idle := g.Instances[0].ID, g.Instances[1].ID, g.Instances[2].ID
	ours := map[string]bool{busy: true, silent: true, idle: true}
	for _, r := range []providers.LaunchRequest{{Count: 1, Key: "staging-launch", Fleet: "staging"}, {Count: 1, Fleet: "default"}} {
		if err := l.cloud.Launch(ctx, gone, r); err != nil {
			t.Fatal(err)
		}
	}
	l.busy[busy] = true
	l.now = l.now.Add(5 * time.Minute)
	l.set.Pools, l.also = []fleet.Pool{kept}, []fleet.Pool{gone}
	l.restart(t, l.cloud)
	h := l.c.Handler(APIOptions{OpenReads: true})
	actions := map[string][]planner.ActionKind{}
	for i := range 40 {
		switch i {
		case 2:
			l.silent[silent] = true // reported idle, then went silent
		case 20:
			l.busy[busy] = false // its job ends
		}
		plan := l.cycle(t)
		if i == 0 {
			if got := fmt.Sprint(plan.Orphans); got != fmt.Sprint([]string{busy, silent, idle}) {
				t.Fatalf("orphans %s, want this fleet's three", got)
			}
			if _, body := get(t, h, "/v1/fleet"); strings.Count(body, `"orphan": true`) != 3 || strings.Count(body, `"price_per_hour": 20`) != 3 {
				t.Errorf("GET /v1/fleet does not mark the 3 orphans, at their pool's last price: %s", body)
			}
			// Paid for: they count in the fleet's cost, at the price the
			// config last gave their pool.
			if plan.CostPerHourBefore < 3*20 {
				t.Errorf("cost per hour %v leaves out the 3 orphans at $20/h", plan.CostPerHourBefore)
			}
			if _, body := get(t, h, "/metrics"); !strings.Contains(body, "\nfleetcast_orphan_nodes 3\n") {
				t.Errorf("metrics lack the orphans")
			}
		}
		for _, a := range plan.Actions {
			if a.Pool == "gone" {
				if !ours[a.Node] {
					t.Fatalf("cycle %d: %s of %s, not this fleet's orphan: %s", i, a.Kind, a.Node, a.Reason)
				}
				actions[a.Node] = append(actions[a.Node], a.Kind)
			}
		}
	}
	for id, want := range map[string]bool{busy: true, silent: false, idle: true} {
		drained, reaped := slices.Contains(actions[id], planner.Drain), slices.Contains(actions[id], planner.Terminate)
		if drained != want || reaped != want {
			t.Errorf("orphan %s: actions %v, drained %v and reaped %v, want %v", id, actions[id], drained, reaped, want)
		}
	}
	if got := actions[busy]; slices.Index(got, planner.Drain) < 20+int(planner.ReapIdle/time.Minute) {
		t.Errorf("the busy orphan was drained %d cycles in, before its job ended (cycle 20) and it was idle %v: %v", slices.Index(got, planner.Drain), planner.ReapIdle, got)
	}
	g, _ = l.cloud.Describe(ctx, gone)
	if len(g.Instances) != 3 || slices.ContainsFunc(g.Instances, func(in providers.Instance) bool { return in.ID == busy || in.ID == idle }) {
		t.Fatalf("pool gone keeps %+v; want the silent orphan and the two instances not this fleet's", g.Instances)
	}
}

// TestSpotNoticeReplacedAhead: a spot node's agent reports the cloud's
// interruption notice (two minutes' warning). In that very cycle the node
// stops counting as capacity and its replacement is launched, ahead of the
// loss; the controller never drains nor terminates it: the cloud does.
func TestSpotNoticeReplacedAhead(t *testing.T) {
	p := gpuPool("spot", 8, 10, 5*time.Minute)
	p.Capacity = fleet.Spot
	l := newLoop(t, false, p)
	ctx := context.Background()
	if err := l.c.act.Launch(ctx, "spot", 2); err != nil {
		t.Fatal(err)
	}
	g, _ := l.cloud.Describe(ctx, p)
	doomed := g.Instances[0].ID
	for _, in := range g.Instances {
		l.busy[in.ID] = true
	}
	l.now = l.now.Add(5 * time.Minute)
	if plan := l.cycle(t); plan.Counts()[planner.Launch] != 0 {
		t.Fatalf("two busy nodes for two nodes of work: %+v", plan.Actions)
	}
	l.notice = map[string]*report.Notice{doomed: {Kind: report.Interruption, Action: "terminate", Time: l.now.Add(3 * time.Minute)}}
	plan := l.cycle(t)
	launched := 0
	for _, a := range plan.Actions {
		switch {
		case a.Kind == planner.Launch:
			launched += a.Count
		case a.Node == doomed && (a.Kind != planner.Hold || a.Code != planner.ReasonInterrupted):
			t.Errorf("the node under notice: %s (%s), want a hold", a.Kind, a.Reason)
		}
	}
	if launched != 1 || plan.Capacity.InterruptedGPUs != 8 {
		t.Fatalf("plan on the notice: %d launched, %d GPUs under notice; want the replacement launched now: %+v", launched, plan.Capacity.InterruptedGPUs, plan.Actions)
	}
	if _, body := get(t, l.c.Handler(APIOptions{OpenReads: true}), "/v1/fleet"); !strings.Contains(body, `"interrupt_at"`) {
		t.Errorf("GET /v1/fleet does not show the notice: %s", body)
	}
	// The cloud takes it; the replacement is already on its way, and
	// nothing more is launched for it.
	l.now = l.now.Add(2 * time.Minute)
	if err := l.cloud.Terminate(ctx, p, []string{doomed}); err != nil {
		t.Fatal(err)
	}
	if plan := l.cycle(t); plan.Counts()[planner.Launch] != 0 || plan.Counts()[planner.Terminate] != 0 {
		t.Fatalf("after the reclaim: %+v", plan.Actions)
	}
}

// TestAnotherFleetsInstancesLeftOut: staging's controller launches in a
// pool of the same name as prod's. Prod's controller leaves staging's
// instance out altogether (not its to count nor to remove), and still
// sees an untagged instance, as unknown.
func TestAnotherFleetsInstancesLeftOut(t *testing.T) {
	p := gpuPool("g5", 8, 10, 5*time.Minute)
	l := newLoop(t, false, p)
	// The state directory is the "default" fleet's now: a renamed
	// controller is refused on it, and starts on a new one.
	l.ctl.Fleet = "prod"
	if _, err := New(Options{Settings: l.set, Controller: l.ctl, Store: l.store, Clouds: map[string]providers.Provider{"g5": l.cloud}, Agents: l.agents, Pending: l.pending,
		Now: func() time.Time { return l.now }}); err == nil || !strings.Contains(err.Error(), `is fleet "default"'s, and controller.fleet is "prod"`) {
		t.Fatalf("a renamed controller on its old state: %v", err)
	}
	l.store.Close()
	var err error
	if l.store, err = state.Open(t.TempDir()); err != nil {
		t.Fatal(err)
	}
	l.restart(t, l.cloud)
	ctx := context.Background()
	if err := l.c.act.Launch(ctx, "g5", 1); err != nil {
		t.Fatal(err)
	}
	for _, r := range []providers.LaunchRequest{{Count: 1, Key: "staging-launch", Fleet: "staging"}, {Count: 1}} {
		if err := l.cloud.Launch(ctx, p, r); err != nil {
			t.Fatal(err)
		}
	}
	g, _ := l.cloud.Describe(ctx, p)
	if g.Instances[0].Fleet != "prod" {
		t.Fatalf("the controller's launch is tagged %q, want prod", g.Instances[0].Fleet)
	}
	staging, untagged := g.Instances[1].ID, g.Instances[2].ID
	l.silent[staging], l.silent[untagged] = true, true
	l.now = l.now.Add(5 * time.Minute)
	plan := l.cycle(t)
	seen := map[string]fleet.Node{}
	for _, n := range l.c.Last().State.Nodes {
		seen[n.ID] = n
	}
	if _, ok := seen[staging]; ok {
		t.Errorf("staging's instance %s is in prod's fleet", staging)
	}
	if n, ok := seen[untagged]; !ok || !n.Unknown {
		t.Errorf("the untagged instance: %+v, want it seen, unknown", n)
	}
	for _, a := range plan.Actions {
		if a.Node == staging {
			t.Errorf("prod acted on staging's instance: %+v", a)
		}
	}
}

// failingReap is the simulated cloud whose first TerminateOrphan fails
// with an outcome unknown (a timeout).
type failingReap struct {
	*sim.Cloud
	failed bool
}

func (f *failingReap) TerminateOrphan(ctx context.Context, fleetName string, o providers.Orphan) error {
	if !f.failed {
		f.failed = true
		return errors.New("request timed out")
	}
	return f.Cloud.TerminateOrphan(ctx, fleetName, o)
}

// TestReapJournaled: reaping an orphan is journaled as any termination. One
// whose outcome is unknown leaves its intent; the next cycle drops it
// without holding any configured pool up, and the orphan is reaped once
// its agent confirms its drain again.
func TestReapJournaled(t *testing.T) {
	kept, gone := gpuPool("kept", 8, 10, 5*time.Minute), gpuPool("gone", 8, 10, 5*time.Minute)
	l := newLoop(t, false, kept, gone)
	ctx := context.Background()
	if err := l.c.act.Launch(ctx, "gone", 1); err != nil {
		t.Fatal(err)
	}
	g, _ := l.cloud.Describe(ctx, gone)
	orphan := g.Instances[0].ID
	l.now = l.now.Add(5 * time.Minute)
	l.set.Pools, l.also = []fleet.Pool{kept}, []fleet.Pool{gone}
	wrap := &failingReap{Cloud: l.cloud}
	l.restart(t, wrap)
	var reapIntent bool
	terminated := 0
	for i := range 30 {
		plan, err := l.c.Cycle(ctx) // the failed reap is this cycle's error
		l.now = l.now.Add(time.Minute)
		l.report(t)
		if wrap.failed && !reapIntent {
			ins, _ := l.store.Intents()
			for _, in := range ins {
				reapIntent = reapIntent || (in.Kind == state.IntentReap && in.Node == orphan)
			}
		}
		if err == nil {
			terminated += plan.Counts()[planner.Terminate]
			for _, a := range plan.Actions {
				if a.Pool == "kept" && a.Kind == planner.Hold && a.Code == planner.ReasonPoolUnobserved {
					t.Fatalf("cycle %d: the orphan's intent holds a configured pool up: %s", i, a.Reason)
				}
			}
		}
	}
	if !reapIntent {
		t.Fatal("the reap whose outcome was unknown left no intent in the journal")
	}
	if ins, _ := l.store.Intents(); len(ins) != 0 {
		t.Fatalf("intents left: %+v", ins)
	}
	if g, _ := l.cloud.Describe(ctx, gone); len(g.Instances) != 0 {
		t.Fatalf("the orphan was never reaped: %+v (%d terminations decided)", g.Instances, terminated)
	}
}
