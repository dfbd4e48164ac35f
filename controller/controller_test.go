package controller

import (
	"context"
	"errors"
	"fmt"
	"math"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/fleetcast/autoscaler/agent/report"
	"github.com/fleetcast/autoscaler/fleet"
	"github.com/fleetcast/autoscaler/forecast"
	"github.com/fleetcast/autoscaler/internal/crashtest"
	"github.com/fleetcast/autoscaler/loop"
	"github.com/fleetcast/autoscaler/planner"
	"github.com/fleetcast/autoscaler/providers"
	"github.com/fleetcast/autoscaler/providers/sim"
	"github.com/fleetcast/autoscaler/state"
)

// counting counts a provider's changing calls.
type counting struct {
	providers.Provider
	changes atomic.Int64
}

func (c *counting) Launch(ctx context.Context, p fleet.Pool, r providers.LaunchRequest) error {
	c.changes.Add(1)
	return c.Provider.Launch(ctx, p, r)
}

func (c *counting) Terminate(ctx context.Context, p fleet.Pool, ids []string) error {
	c.changes.Add(1)
	return c.Provider.Terminate(ctx, p, ids)
}

// cycler is a controller on the simulated cloud with a clock the test moves.
type cycler struct {
	now     time.Time
	set     *fleet.Settings
	ctl     fleet.ControllerSettings
	cloud   *sim.Cloud
	count   *counting
	store   *state.Store
	agents  *Agents
	pending *Pending
	c       *Controller
	// silent agents send nothing; busy nodes report a job on every GPU.
	silent, busy map[string]bool
	// held is the drain each agent holds (from the controller's answers).
	held map[string]string
	// also are pools whose nodes' agents report beyond the config's (a
	// pool taken out of it).
	also []fleet.Pool
	// notice is the cloud's warning each agent reports, if any.
	notice map[string]*report.Notice
	// team is the team of the busy nodes' jobs.
	team string
}

// testConfig is what a test's controller is made of: the planner's
// settings, the controller block's and the demand block's.
type testConfig struct {
	fleet.Settings
	Controller fleet.ControllerSettings
	Demand     fleet.DemandSettings
}

// testDefaults are the defaults, with no pools.
func testDefaults() testConfig {
	return testConfig{Settings: fleet.DefaultSettings(), Controller: fleet.DefaultControllerSettings(), Demand: fleet.DefaultDemandSettings()}
}

func newLoop(t *testing.T, dryRun bool, pools ...fleet.Pool) *cycler {
	t.Helper()
	return newLoopOn(t, dryRun, nil, pools...)
}

// newLoopOn is newLoop with the controller's store and clouds as wrap
// makes them of the test's (nil: as they are).
func newLoopOn(t *testing.T, dryRun bool, wrap func(state.Records, providers.Provider) (state.Records, providers.Provider), pools ...fleet.Pool) *cycler {
	t.Helper()
	return newLoopWith(t, dryRun, wrap, nil, pools...)
}

// newLoopWith is newLoopOn with the controller's options as more makes
// them (nil: as they are), given the cycler's parts.
func newLoopWith(t *testing.T, dryRun bool, wrap func(state.Records, providers.Provider) (state.Records, providers.Provider), more func(*cycler, *Options), pools ...fleet.Pool) *cycler {
	t.Helper()
	l := &cycler{now: t0, silent: map[string]bool{}, busy: map[string]bool{}, held: map[string]string{}}
	cfg := testDefaults()
	cfg.Pools = pools
	l.set, l.ctl = &cfg.Settings, cfg.Controller
	clock := func() time.Time { return l.now }
	var err error
	l.cloud = sim.New(pools, 1, clock)
	l.count = &counting{Provider: l.cloud}
	if l.store, err = state.Open(t.TempDir()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.store.Close() })
	var store state.Records = l.store
	var cloud providers.Provider = l.count
	if wrap != nil {
		store, cloud = wrap(l.store, l.cloud)
	}
	clouds := map[string]providers.Provider{}
	for _, p := range pools {
		clouds[p.Name] = cloud
	}
	l.agents, l.pending = NewAgents(clock), &Pending{}
	o := Options{Settings: l.set, Controller: l.ctl, Store: store, Clouds: clouds, Agents: l.agents, Pending: l.pending, Now: clock, DryRun: dryRun}
	if more != nil {
		more(l, &o)
	}
	if l.c, err = New(o); err != nil {
		t.Fatal(err)
	}
	if err := l.c.Recover(context.Background()); err != nil {
		t.Fatal(err)
	}
	return l
}

// report has every running instance's agent report, unless it is silent:
// a job holding every GPU, checkpointed a minute ago, on busy nodes, and
// none on the others.
func (l *cycler) report(t *testing.T) {
	t.Helper()
	for _, p := range append(slices.Clone(l.set.Pools), l.also...) {
		g, err := l.cloud.Describe(context.Background(), p)
		if err != nil {
			t.Fatal(err)
		}
		for _, in := range g.Instances {
			if in.State != providers.InstanceRunning || l.silent[in.ID] {
				continue
			}
			r := &report.Report{Node: in.ID, SentAt: l.now, Healthy: true, Drain: report.DrainStatus{State: report.NotDraining}}
			for i := range p.GPUsPerNode {
				r.GPUs = append(r.GPUs, report.GPU{Index: i, UUID: fmt.Sprint("GPU-", i), MemoryTotal: 80 << 30})
			}
			if l.busy[in.ID] {
				j := report.Job{ID: "train-" + in.ID, Start: t0, LastCheckpoint: l.now.Add(-time.Minute), Team: l.team}
				for i := range p.GPUsPerNode {
					j.GPUs = append(j.GPUs, i)
				}
				r.Jobs = []report.Job{j}
			}
			r.Notice = l.notice[in.ID]
			l.send(t, r)
		}
	}
}

// send has r's agent report it: holding the drain the controller last
// asked of the node (safe once no job is left), and keeping the one the
// controller answers with.
func (l *cycler) send(t *testing.T, r *report.Report) {
	t.Helper()
	if id := l.held[r.Node]; id != "" {
		r.Drain = report.DrainStatus{State: report.Draining, ID: id}
		if len(r.Jobs) == 0 {
			r.Drain.State = report.SafeToTerminate
		}
	}
	ans, err := l.agents.Accept(context.Background(), r)
	if err != nil {
		t.Fatal(err)
	}
	l.held[r.Node] = ""
	if ans.Drain != nil {
		l.held[r.Node] = ans.Drain.ID
	}
}

// cycle moves the clock a minute, has the agents report, and runs a cycle.
func (l *cycler) cycle(t *testing.T) planner.Plan {
	t.Helper()
	l.now = l.now.Add(time.Minute)
	l.report(t)
	p, err := l.c.Cycle(context.Background())
	if err != nil {
		t.Fatalf("cycle at %v: %v", l.now, err)
	}
	return p
}

func (l *cycler) target(t *testing.T, pool fleet.Pool) int {
	g, err := l.cloud.Describe(context.Background(), pool)
	if err != nil {
		t.Fatal(err)
	}
	return g.Target
}

func gpuPool(name string, gpus, max int, lead time.Duration) fleet.Pool {
	return fleet.Pool{Name: name, Provider: "sim", InstanceType: "g5.xlarge", GPUsPerNode: gpus, Capacity: fleet.OnDemand,
		PricePerHour: 1.2 * float64(gpus), LeadTime: lead, ProvisionTimeout: 3 * lead, Max: max}
}

// TestBootingCapacityCounts: 40 one-GPU jobs wait while GPUs take five
// minutes to come up; the controller launches exactly 40 GPUs, not a
// batch more each cycle (kubernetes/autoscaler#7095).
func TestBootingCapacityCounts(t *testing.T) {
	p := gpuPool("g5", 1, 200, 5*time.Minute)
	l := newLoop(t, false, p)
	for range 12 {
		// The scheduler keeps pushing the 40 waiting jobs until they run.
		l.pending.Set(l.now, DemandPush{Source: "slurm", Pending: []PendingDemand{{Pool: "g5", GPUs: 40}}})
		l.cycle(t)
		if got := l.target(t, p); got > 40 {
			t.Fatalf("at %v: %d GPUs launched for 40 waiting jobs", l.now.Sub(t0), got)
		}
	}
	if got := l.target(t, p); got != 40 {
		t.Errorf("%d GPUs launched for 40 waiting jobs, want exactly 40", got)
	}
}

// TestScopedPushServedThere: jobs pushed for the dearer of two pools are
// launched for there, through the controller's cycle, for as long as
// they wait; the cheaper pool, which cannot serve them, gets nothing.
func TestScopedPushServedThere(t *testing.T) {
	cheap, dear := gpuPool("cheap", 8, 10, 5*time.Minute), gpuPool("dear", 8, 10, 5*time.Minute)
	dear.PricePerHour *= 2
	l := newLoop(t, false, cheap, dear)
	for range 3 {
		l.pending.Set(l.now, DemandPush{Source: "slurm", Pending: []PendingDemand{{Pool: "dear", GPUs: 16}}})
		plan := l.cycle(t)
		for _, a := range plan.Actions {
			if a.Kind == planner.Launch && (a.Pool != "dear" || a.Code != planner.ReasonScopedDemand) {
				t.Fatalf("at %v: launch %+v; want launches in dear only, for its scoped demand", l.now.Sub(t0), a)
			}
		}
	}
	if got, want := l.target(t, cheap), 0; got != want {
		t.Errorf("cheap's target %d, want %d", got, want)
	}
	if got, want := l.target(t, dear), 2; got != want {
		t.Errorf("dear's target %d, want %d (16 GPUs waiting for it)", got, want)
	}
}

// TestRunningPushEnds: a scheduler pushes 8 GPUs pending and the time
// limit of the job on a busy node, 3 minutes away with a 5-minute lead
// time: the pending job waits for that node instead of a launch. Without
// the push's end, or once the end has passed, a node is launched.
func TestRunningPushEnds(t *testing.T) {
	for _, tt := range []struct {
		name   string
		end    time.Duration // from the push; 0 for none
		launch int
	}{
		{"the end within the lead time", 3 * time.Minute, 0},
		{"no end", 0, 1},
		{"the end beyond the lead time", 20 * time.Minute, 1},
	} {
		t.Run(tt.name, func(t *testing.T) {
			p := gpuPool("g5", 8, 10, 5*time.Minute)
			l := newLoop(t, false, p)
			if err := l.c.act.Launch(context.Background(), "g5", 1); err != nil {
				t.Fatal(err)
			}
			g, _ := l.cloud.Describe(context.Background(), p)
			id := g.Instances[0].ID
			l.busy[id] = true
			l.now = l.now.Add(5 * time.Minute)
			push := DemandPush{Source: "slurm", Pending: []PendingDemand{{GPUs: 8}}}
			if tt.end > 0 {
				push.Running = []RunningJob{{Job: "train-" + id, Node: id, ExpectedEnd: l.now.Add(time.Minute + tt.end)}}
			}
			l.pending.Set(l.now, push)
			l.pending.SetRunning(l.now, push)
			plan := l.cycle(t)
			if n := plan.Counts()[planner.Launch]; n != tt.launch {
				t.Fatalf("launched %d nodes, want %d\n%v", n, tt.launch, plan.Actions)
			}
			noted := slices.ContainsFunc(plan.Notes, func(n planner.Note) bool { return n.Code == planner.ReasonExpectedEnds })
			if noted != (tt.launch == 0) {
				t.Errorf("expected_ends noted %v; notes %v", noted, plan.Notes)
			}
		})
	}
}

// TestAnnouncedPushProvisioned: demand a scheduler announces is bought
// one lead time before its start, is under way once the start passes,
// and is dropped once its duration has.
func TestAnnouncedPushProvisioned(t *testing.T) {
	p := gpuPool("g5", 8, 10, 5*time.Minute)
	l := newLoop(t, false, p)
	l.pending.Announce(DemandPush{Source: "airflow", Announce: []AnnouncedDemand{{ID: "stage-2", StartAt: l.now.Add(8 * time.Minute), GPUs: 16, Duration: "1h"}}})
	plan := l.cycle(t) // 8 minutes ahead: beyond the lead time
	if n := plan.Counts()[planner.Launch]; n != 0 {
		t.Fatalf("launched %d nodes 8 minutes ahead of a start, with a 5-minute lead time", n)
	}
	l.now = l.now.Add(4 * time.Minute)
	plan = l.cycle(t)
	launched := 0
	for _, a := range plan.Actions {
		if a.Kind == planner.Launch {
			launched += a.Count
			if a.Code != planner.ReasonAnnounced {
				t.Errorf("launch %+v, want code announced", a)
			}
		}
	}
	if launched != 2 {
		t.Errorf("launched %d nodes 4 minutes ahead, want 2 for 16 GPUs announced", launched)
	}
	// Under way from its start until its duration has passed, then
	// forgotten.
	l.now = l.now.Add(5 * time.Minute)
	if ahead, under := l.pending.Announced(l.now); len(ahead) != 0 || len(under) != 1 || under[0].ID != "airflow/stage-2" {
		t.Errorf("after the start: ahead %v, under way %v; want airflow/stage-2 under way", ahead, under)
	}
	l.now = l.now.Add(time.Hour)
	if ahead, under := l.pending.Announced(l.now); len(ahead)+len(under) != 0 {
		t.Errorf("after its hour: ahead %v, under way %v; want none", ahead, under)
	}
}

// TestSilentAgentsHaltScaleIn: ten nodes, six busy and four held for
// waiting jobs. The waiting jobs go, and the four idle nodes' agents go
// silent at once (a network fault, not idleness: their nodes may hold work
// placed since); ten minutes later the six busy nodes' jobs finish. While
// more than limits.silent_share_halt of the nodes are silent, nothing is
// scaled in, not even the six that report idle. With the halt switched
// off, those six are scaled in (and the silent four never are); with every
// agent reporting, all ten are.
func TestSilentAgentsHaltScaleIn(t *testing.T) {
	for _, tt := range []struct {
		name     string
		silent   int
		halt     float64
		wantLeft int
	}{
		{"four of ten silent", 4, 0.3, 10},
		{"four of ten silent, no halt", 4, 1, 4},
		{"every agent reporting", 0, 0.3, 0},
	} {
		t.Run(tt.name, func(t *testing.T) {
			p := gpuPool("g5", 8, 20, 5*time.Minute)
			l := newLoop(t, false, p)
			l.set.Limits.SilentShareHalt = tt.halt
			if err := l.c.act.Launch(context.Background(), "g5", 10); err != nil {
				t.Fatal(err)
			}
			g, _ := l.cloud.Describe(context.Background(), p)
			idle, busy := g.Instances[:4], g.Instances[4:]
			for _, in := range busy {
				l.busy[in.ID] = true
			}
			l.now = l.now.Add(5 * time.Minute)
			for range 5 {
				l.pending.Set(l.now, DemandPush{Source: "slurm", Pending: []PendingDemand{{Pool: "g5", GPUs: 32}}})
				plan := l.cycle(t)
				if c := plan.Counts(); c[planner.Drain]+c[planner.Terminate] != 0 {
					t.Fatalf("a busy fleet was scaled in: %v", c)
				}
			}
			l.pending.Set(l.now, DemandPush{Source: "slurm"})
			for _, in := range idle[:tt.silent] {
				l.silent[in.ID] = true
			}
			for i := range 120 {
				if i == 10 {
					for _, in := range busy {
						l.busy[in.ID] = false
					}
				}
				plan := l.cycle(t)
				for _, a := range plan.Actions {
					if (a.Kind == planner.Drain || a.Kind == planner.Terminate) && l.silent[a.Node] {
						t.Fatalf("%s of %s, whose agent is silent", a.Kind, a.Node)
					}
				}
			}
			if got := l.target(t, p); got != tt.wantLeft {
				t.Errorf("%d nodes left two hours after the jobs ended; want %d", got, tt.wantLeft)
			}
		})
	}
}

// TestDryRunChangesNothing: a dry run plans launches for waiting jobs,
// serves the plan, and makes no changing call nor any record.
func TestDryRunChangesNothing(t *testing.T) {
	p := gpuPool("g5", 1, 200, 5*time.Minute)
	l := newLoop(t, true, p)
	for range 5 {
		l.pending.Set(l.now, DemandPush{Source: "slurm", Pending: []PendingDemand{{Pool: "g5", GPUs: 16}}})
		plan := l.cycle(t)
		if plan.Counts()[planner.Launch] == 0 {
			t.Fatalf("dry run planned no launch for 16 waiting GPUs: %+v", plan)
		}
	}
	if n := l.count.changes.Load(); n != 0 {
		t.Errorf("dry run made %d changing provider calls", n)
	}
	if got := l.c.Last().Plan; got == nil || got.Counts()[planner.Launch] == 0 {
		t.Errorf("last plan not served: %+v", got)
	}
	intents, _ := l.store.Intents()
	drains, _ := l.store.Drains()
	if len(intents)+len(drains) != 0 {
		t.Errorf("dry run recorded intents %v, drains %v", intents, drains)
	}
}

// restart is the controller killed and started again on the same state
// directory, clouds and agents' endpoint (whose in-memory view is lost
// with the process).
func (l *cycler) restart(t *testing.T, wrap providers.Provider) {
	t.Helper()
	dir := l.store.Path()
	l.store.Close()
	var err error
	if l.store, err = state.Open(filepath.Dir(dir)); err != nil {
		t.Fatal(err)
	}
	clock := func() time.Time { return l.now }
	l.agents = NewAgents(clock)
	clouds := map[string]providers.Provider{}
	for _, p := range l.set.Pools {
		clouds[p.Name] = wrap
	}
	if l.c, err = New(Options{Settings: l.set, Controller: l.ctl, Store: l.store, Clouds: clouds, Agents: l.agents, Pending: l.pending, Now: clock}); err != nil {
		t.Fatal(err)
	}
	if err := l.c.Recover(context.Background()); err != nil {
		t.Fatal(err)
	}
}

// TestKilledMidActionRestarts kills the controller at each step of a
// launch and of a termination, restarts it, and runs on: no duplicate
// instance, no orphaned intent, no node left draining.
func TestKilledMidActionRestarts(t *testing.T) {
	for _, tt := range []struct {
		name          string
		before, after bool
		scaleIn       bool
	}{
		{"launch, killed before the cloud call", true, false, false},
		{"launch, killed after the cloud call", false, true, false},
		{"termination, killed before the cloud call", true, false, true},
		{"termination, killed after the cloud call", false, true, true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			p := gpuPool("g5", 1, 200, 5*time.Minute)
			l := newLoop(t, false, p)
			crash := &crashtest.Provider{Provider: l.cloud}
			l.restart(t, crash)
			want := 24
			if tt.scaleIn {
				// 24 nodes up and busy, then 8 go idle.
				l.pending.Set(l.now, DemandPush{Source: "s", Pending: []PendingDemand{{Pool: "g5", GPUs: 24}}})
				for range 8 {
					l.cycle(t)
				}
				g, _ := l.cloud.Describe(context.Background(), p)
				for _, in := range g.Instances {
					l.busy[in.ID] = true
				}
				l.pending.Set(l.now, DemandPush{Source: "s"})
				for range 3 {
					l.cycle(t)
				}
				for _, in := range g.Instances[:8] {
					l.busy[in.ID] = false
				}
				want = 16
			}
			crash.Before, crash.After = tt.before, tt.after
			killed := false
			for i := range 90 {
				if !tt.scaleIn {
					l.pending.Set(l.now, DemandPush{Source: "s", Pending: []PendingDemand{{Pool: "g5", GPUs: 24}}})
				}
				l.now = l.now.Add(time.Minute)
				l.report(t)
				_, err := l.c.Cycle(context.Background())
				if errors.Is(err, crashtest.ErrCrash) {
					killed = true
					l.restart(t, crash)
					continue
				}
				if err != nil {
					t.Fatalf("cycle %d: %v", i, err)
				}
				if got := l.target(t, p); got > 24 {
					t.Fatalf("cycle %d: %d instances for 24 GPUs of demand", i, got)
				}
			}
			if !killed {
				t.Fatal("the controller was never killed")
			}
			g, _ := l.cloud.Describe(context.Background(), p)
			if g.Target != want || len(g.Instances) != want {
				t.Errorf("group: target %d, %d instances; want %d", g.Target, len(g.Instances), want)
			}
			if in, _ := l.store.Intents(); len(in) != 0 {
				t.Errorf("intents left: %+v", in)
			}
			if d, _ := l.store.Drains(); len(d) != 0 {
				t.Errorf("nodes left draining: %+v", d)
			}
		})
	}
}

// TestCycleSettlesUnknownOutcomes: an intent left by a call whose outcome
// was unknown is settled by the next cycle, and a drain record of a node
// the cloud no longer has is dropped once it has been unlisted for
// GoneGrace.
func TestCycleSettlesUnknownOutcomes(t *testing.T) {
	p := gpuPool("g5", 1, 200, 5*time.Minute)
	l := newLoop(t, false, p)
	crash := &crashtest.Provider{Provider: l.cloud, After: true}
	l.restart(t, crash)
	l.pending.Set(l.now, DemandPush{Source: "s", Pending: []PendingDemand{{Pool: "g5", GPUs: 4}}})
	l.now = l.now.Add(time.Minute)
	if _, err := l.c.Cycle(context.Background()); !errors.Is(err, crashtest.ErrCrash) {
		t.Fatalf("cycle: %v, want the injected failure", err)
	}
	if in, _ := l.store.Intents(); len(in) != 1 {
		t.Fatalf("intents after an unknown outcome: %+v, want the launch kept", in)
	}
	if err := l.store.PutDrain(state.Drain{Node: "i-gone", Pool: "g5", Started: l.now, Deadline: l.now.Add(time.Hour)}); err != nil {
		t.Fatal(err)
	}
	l.cycle(t)
	if in, _ := l.store.Intents(); len(in) != 0 {
		t.Errorf("intents after the next cycle: %+v", in)
	}
	if d, _ := l.store.Drains(); len(d) != 1 {
		t.Errorf("drains after the next cycle: %+v, want the unlisted node's kept for GoneGrace", d)
	}
	l.now = l.now.Add(GoneGrace)
	l.cycle(t)
	if d, _ := l.store.Drains(); slices.ContainsFunc(d, func(d state.Drain) bool { return d.Node == "i-gone" }) {
		t.Errorf("drains %v after the node was unlisted for longer than GoneGrace, want its dropped", d)
	}
	if got := l.target(t, p); got != 4 {
		t.Errorf("target %d, want 4: launched once", got)
	}
}

// TestCancelledDrainSurvivesRestart: a drain cancelled at its timeout is
// remembered across a restart, so the node is not drained again at once.
func TestCancelledDrainSurvivesRestart(t *testing.T) {
	p := gpuPool("g5", 8, 20, 5*time.Minute)
	l := newLoop(t, false, p)
	if err := l.c.act.Launch(context.Background(), "g5", 1); err != nil {
		t.Fatal(err)
	}
	g, _ := l.cloud.Describe(context.Background(), p)
	node := g.Instances[0].ID
	l.silent[node] = true // its jobs' checkpoints can never be confirmed
	l.now = l.now.Add(10 * time.Minute)
	if err := l.store.PutDrain(state.Drain{Node: node, Pool: "g5", Started: l.now.Add(-30 * time.Minute), Deadline: l.now.Add(-10 * time.Minute)}); err != nil {
		t.Fatal(err)
	}
	if plan := l.cycle(t); plan.Counts()[planner.CancelDrain] != 1 {
		t.Fatalf("the timed-out drain was not cancelled: %+v", plan.Actions)
	}
	cancelledAt := l.now
	l.restart(t, l.cloud)
	l.cycle(t)
	st := l.c.Last().State
	if len(st.Nodes) != 1 || !st.Nodes[0].DrainCancelledAt.Equal(cancelledAt) {
		t.Errorf("after a restart the node's drain cancellation is %v, want %v", st.Nodes[0].DrainCancelledAt, cancelledAt)
	}
}

// unreadable fails Describe for the pools it names, and counts each
// pool's changing calls.
type unreadable struct {
	providers.Provider
	failing map[string]bool
	changes map[string]int
}

func (u *unreadable) Describe(ctx context.Context, p fleet.Pool) (providers.Group, error) {
	if u.failing[p.Name] {
		return providers.Group{}, &providers.ThrottledError{Pool: p.Name, Err: errors.New("rate exceeded")}
	}
	return u.Provider.Describe(ctx, p)
}

func (u *unreadable) Launch(ctx context.Context, p fleet.Pool, r providers.LaunchRequest) error {
	u.changes[p.Name]++
	return u.Provider.Launch(ctx, p, r)
}

func (u *unreadable) Terminate(ctx context.Context, p fleet.Pool, ids []string) error {
	u.changes[p.Name]++
	return u.Provider.Terminate(ctx, p, ids)
}

// TestUnreadablePoolLeftAlone: one pool's group cannot be read for a
// while. The cycle goes on for the others (waiting jobs get capacity), the
// unread pool is planned as last read and nothing in it changes, and its
// drain record is kept; after a restart, never read, it is still left
// alone while the others serve; once it reads again, its drained node
// goes.
func TestUnreadablePoolLeftAlone(t *testing.T) {
	a, b := gpuPool("a", 1, 50, 5*time.Minute), gpuPool("b", 8, 10, 5*time.Minute)
	l := newLoop(t, false, a, b)
	if err := l.c.act.Launch(context.Background(), "b", 2); err != nil {
		t.Fatal(err)
	}
	l.now = l.now.Add(5 * time.Minute)
	l.cycle(t) // b's nodes are read once
	g, _ := l.cloud.Describe(context.Background(), b)
	node := g.Instances[0].ID
	if err := l.store.PutDrain(state.Drain{Node: node, Pool: "b", Started: l.now, Deadline: l.now.Add(time.Hour)}); err != nil {
		t.Fatal(err)
	}
	u := &unreadable{Provider: l.cloud, failing: map[string]bool{"b": true}, changes: map[string]int{}}
	for _, p := range []string{"a", "b"} {
		l.c.clouds[p] = u // the actuator drives the same map
	}
	for range 3 {
		l.pending.Set(l.now, DemandPush{Source: "slurm", Pending: []PendingDemand{{Pool: "a", GPUs: 24}}})
		l.now = l.now.Add(time.Minute)
		l.report(t)
		plan, err := l.c.Cycle(context.Background())
		if err == nil || !strings.Contains(err.Error(), "reading pool b") {
			t.Fatalf("cycle error = %v; want one naming pool b", err)
		}
		for _, act := range plan.Actions {
			if act.Pool == "b" && act.Kind != planner.Hold {
				t.Fatalf("%s in the unread pool: %+v", act.Kind, act)
			}
		}
	}
	if u.changes["b"] != 0 || u.changes["a"] == 0 {
		t.Fatalf("changing calls: %v; want some in a, none in b", u.changes)
	}
	if st := l.c.Last().State; len(st.Pools) != 2 || st.Pools[1].Unobserved.Code != fleet.UnobservedReadFailed ||
		st.Pools[1].Unobserved.LastRead.IsZero() || !strings.Contains(st.Pools[1].Unobserved.Err, "rate exceeded") {
		t.Fatalf("pool status = %+v", st.Pools)
	}
	if ds, _ := l.store.Drains(); len(ds) != 1 || ds[0].Node != node {
		t.Fatalf("drains = %+v; the unread pool's drain must be kept", ds)
	}
	// Restarted while b still cannot be read: b's size is unknown, so it
	// is left alone and counted at its max against the fleet's limits;
	// a, which can be read, still serves its waiting jobs (a cloud out at
	// start does not stop the others).
	l.restart(t, u)
	before := u.changes["a"]
	l.pending.Set(l.now, DemandPush{Source: "slurm", Pending: []PendingDemand{{Pool: "a", GPUs: 40}}})
	l.now = l.now.Add(time.Minute)
	l.report(t)
	plan, _ := l.c.Cycle(context.Background())
	for _, act := range plan.Actions {
		if act.Pool == "b" && act.Kind != planner.Hold {
			t.Fatalf("%s in the pool never read: %+v", act.Kind, act)
		}
	}
	if u.changes["a"] == before || plan.Counts()[planner.Launch] == 0 || !hasNote(&plan, planner.ReasonPoolNeverRead) ||
		l.c.Last().State.Pools[1].Unobserved.Code != fleet.UnobservedNeverRead {
		t.Fatalf("with pool b never read: %d launches, notes %q; want a launch in a, and the note", plan.Counts()[planner.Launch], plan.Notes)
	}
	u.failing["b"] = false
	l.cycle(t)
	if got := l.target(t, b); got != 1 {
		t.Errorf("pool b has %d nodes once read again; want 1 (the drained one terminated)", got)
	}
}

// TestScaleInBudgetWindow: ten idle nodes, a budget of a fifth of the pool
// per 10 minutes. Drains of idle nodes end within a cycle, yet no more
// than two begin in any 10 minutes, across a restart too.
func TestScaleInBudgetWindow(t *testing.T) {
	p := gpuPool("g5", 8, 20, 5*time.Minute)
	l := newLoop(t, false, p)
	l.set.Limits.ScaleInShare, l.set.Limits.ScaleInWindow = 0.2, 10*time.Minute
	if err := l.c.act.Launch(context.Background(), "g5", 10); err != nil {
		t.Fatal(err)
	}
	l.now = l.now.Add(5 * time.Minute)
	var starts []time.Time
	for i := range 40 {
		if i == 7 {
			l.restart(t, l.cloud)
		}
		plan := l.cycle(t)
		for range plan.Counts()[planner.Drain] {
			starts = append(starts, l.now)
		}
	}
	if len(starts) < 4 {
		t.Fatalf("only %d drains in 40 minutes of an idle fleet", len(starts))
	}
	for i, s := range starts {
		in := 0
		for _, u := range starts[i:] {
			if u.Sub(s) < 10*time.Minute {
				in++
			}
		}
		if in > 2 {
			t.Fatalf("%d drains began within 10 minutes of %v: %v", in, s.Sub(t0), starts)
		}
	}
}

// TestReportedNodesProtected: a node whose agent has reported is
// protected from its group's own scale-in, busy or idle, and stays so; a
// node still launching is not.
func TestReportedNodesProtected(t *testing.T) {
	p := gpuPool("g5", 8, 20, 5*time.Minute)
	l := newLoop(t, false, p)
	if err := l.c.act.Launch(context.Background(), "g5", 2); err != nil {
		t.Fatal(err)
	}
	l.c.clouds["g5"] = l.cloud // the counting wrapper hides the Protector
	g, _ := l.cloud.Describe(context.Background(), p)
	busy, quiet := g.Instances[0].ID, g.Instances[1].ID
	l.busy[busy], l.silent[quiet] = true, true
	l.now = l.now.Add(5 * time.Minute)
	protected := func() map[string]bool {
		g, _ := l.cloud.Describe(context.Background(), p)
		out := map[string]bool{}
		for _, in := range g.Instances {
			out[in.ID] = in.Protected
		}
		return out
	}
	// Jobs wait for 16 GPUs: both nodes are kept.
	l.pending.Set(l.now, DemandPush{Source: "s", Pending: []PendingDemand{{Pool: "g5", GPUs: 16}}})
	l.cycle(t)
	if got := protected(); !got[busy] || got[quiet] {
		t.Fatalf("protection = %v; want %s only (%s has not reported)", got, busy, quiet)
	}
	l.busy[busy] = false
	for range 3 {
		l.pending.Set(l.now, DemandPush{Source: "s", Pending: []PendingDemand{{Pool: "g5", GPUs: 16}}})
		l.cycle(t)
	}
	if got := protected(); !got[busy] {
		t.Fatalf("protection = %v; an idle node keeps its protection", got)
	}
}

// TestRestartTerminatesNothing: a restarted controller has no agent
// report yet. Nodes that were ready before are not taken for failed
// launches (they are ready with silent agents, so never idle), and nodes
// it never saw ready get their provisioning time from its start: the
// first cycles terminate nothing, and nothing is drained.
func TestRestartTerminatesNothing(t *testing.T) {
	p := gpuPool("g5", 8, 20, 5*time.Minute)
	l := newLoop(t, false, p)
	if err := l.c.act.Launch(context.Background(), "g5", 3); err != nil {
		t.Fatal(err)
	}
	g, _ := l.cloud.Describe(context.Background(), p)
	for _, in := range g.Instances {
		l.busy[in.ID] = true
	}
	l.now = l.now.Add(5 * time.Minute)
	l.cycle(t) // all three report: ready
	l.now = l.now.Add(time.Hour)
	l.restart(t, l.cloud)
	for range 2 {
		l.now = l.now.Add(time.Minute)
		plan, err := l.c.Cycle(context.Background()) // no reports yet
		if err != nil {
			t.Fatal(err)
		}
		if c := plan.Counts(); c[planner.Terminate]+c[planner.Drain] != 0 {
			t.Fatalf("a restarted controller scaled in nodes it had no report from: %+v", plan.Actions)
		}
		for _, n := range l.c.Last().State.Nodes {
			if n.State != fleet.Ready {
				t.Fatalf("node %s is %s after a restart; want ready (it was before)", n.ID, n.State)
			}
		}
	}

	// A first start on a fleet it never saw (a fresh state directory):
	// the nodes count as launching from the start, not from their launch.
	fresh := newLoop(t, false, p)
	if err := fresh.c.act.Launch(context.Background(), "g5", 2); err != nil {
		t.Fatal(err)
	}
	fresh.now = fresh.now.Add(2 * time.Hour)
	fresh.restart(t, fresh.cloud) // started two hours after the launch
	fresh.now = fresh.now.Add(time.Minute)
	plan, err := fresh.c.Cycle(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if c := plan.Counts(); c[planner.Terminate] != 0 {
		t.Fatalf("a first start terminated nodes before their agents could report: %+v", plan.Actions)
	}
}

// TestUnsettledIntentHoldsOnlyItsPool: a launch in pool b whose outcome is
// unknown cannot be settled while b cannot be read. The intent is kept,
// nothing changes in b, and pool a still gets capacity for waiting jobs.
func TestUnsettledIntentHoldsOnlyItsPool(t *testing.T) {
	a, b := gpuPool("a", 1, 50, 5*time.Minute), gpuPool("b", 8, 10, 5*time.Minute)
	l := newLoop(t, false, a, b)
	l.cycle(t) // both pools read once
	u := &unreadable{Provider: l.cloud, failing: map[string]bool{"b": true}, changes: map[string]int{}}
	for _, p := range []string{"a", "b"} {
		l.c.clouds[p] = u // the actuator drives the same map
	}
	in := state.Intent{Key: "fc-launch-b-1", Kind: state.IntentLaunch, Pool: "b", Count: 1, Target: 1, Created: l.now}
	if err := l.store.PutIntent(in); err != nil {
		t.Fatal(err)
	}
	l.pending.Set(l.now, DemandPush{Source: "slurm", Pending: []PendingDemand{{Pool: "a", GPUs: 16}}})
	l.now = l.now.Add(time.Minute)
	_, err := l.c.Cycle(context.Background())
	if err == nil || !strings.Contains(err.Error(), "kept for the next try") {
		t.Fatalf("cycle error = %v; want the unsettled intent named", err)
	}
	if u.changes["a"] == 0 || u.changes["b"] != 0 {
		t.Fatalf("changing calls %v; want some in a, none in b", u.changes)
	}
	if got, _ := l.store.Intents(); len(got) != 1 || got[0].Key != in.Key {
		t.Fatalf("journal = %+v; want b's intent kept", got)
	}
}

// TestForecastNoteLoggedOnce: a forecast's note (here, too short a history
// for a model) is logged when it starts, not every cycle.
func TestForecastNoteLoggedOnce(t *testing.T) {
	l := newLoop(t, false, gpuPool("g5", 1, 200, 5*time.Minute))
	var buf strings.Builder
	l.c.log = hclog.New(&hclog.LoggerOptions{Output: &buf})
	for range 30 {
		l.pending.Set(l.now, DemandPush{Source: "slurm", Pending: []PendingDemand{{Pool: "g5", GPUs: 4}}})
		l.cycle(t)
	}
	if n := strings.Count(buf.String(), "forecast note"); n != 1 {
		t.Fatalf("%d forecast notes in 30 cycles, want 1:\n%s", n, buf.String())
	}
}

// TestForecastFaultLogged: a forecast with an absurd value, or values
// that are not numbers or negative, is not acted on as given and is logged
// as a warning, which the default level shows (docs/design.md rule 10).
func TestForecastFaultLogged(t *testing.T) {
	for _, tt := range []struct {
		value float64
		code  string
	}{{1e12, "forecast_absurd"}, {math.NaN(), "forecast_not_a_number"}, {-5, "forecast_negative"}} {
		l := newLoop(t, false, gpuPool("g5", 1, 200, 5*time.Minute))
		var buf strings.Builder
		l.c.log = hclog.New(&hclog.LoggerOptions{Output: &buf, Level: hclog.Warn})
		var err error
		l.c.loop, err = loop.New(loop.Options{Settings: l.set, Books: l.store, Log: l.c.log, Advise: true,
			Forecast: func(now time.Time) forecast.Forecast {
				return forecast.Forecast{Origin: now, Step: 10 * time.Minute, Levels: []float64{0.5, 0.9},
					Values: [][]float64{{tt.value, 10}, {tt.value, 12}}}
			}})
		if err != nil {
			t.Fatal(err)
		}
		l.cycle(t)
		if !strings.Contains(buf.String(), "[WARN]") || !strings.Contains(buf.String(), "code="+tt.code) {
			t.Errorf("a forecast of %v: the log at warn says\n%s\nwant a warning with code=%s", tt.value, buf.String(), tt.code)
		}
	}
}

// hasNote reports whether the plan has a note with the code.
func hasNote(p *planner.Plan, code planner.Reason) bool {
	for _, n := range p.Notes {
		if n.Code == code {
			return true
		}
	}
	return false
}
