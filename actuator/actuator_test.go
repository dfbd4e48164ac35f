package actuator

import (
	"context"
	"errors"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/fleetcast/autoscaler/fleet"
	"github.com/fleetcast/autoscaler/internal/crashtest"
	"github.com/fleetcast/autoscaler/providers"
	"github.com/fleetcast/autoscaler/providers/sim"
	"github.com/fleetcast/autoscaler/state"
)

var t0 = time.Date(2026, 11, 30, 10, 0, 0, 0, time.UTC)

func simPool(name string, max int) fleet.Pool {
	return fleet.Pool{Name: name, Provider: "sim", InstanceType: "p4d.24xlarge", GPUsPerNode: 8, Capacity: fleet.OnDemand,
		PricePerHour: 32, LeadTime: 5 * time.Minute, ProvisionTimeout: 15 * time.Minute, Max: max}
}

// tb is what the rig needs of a test: *testing.T and *rapid.T both have it.
type tb interface {
	Helper()
	Fatal(args ...any)
}

type rig struct {
	dir   string
	now   time.Time
	pool  fleet.Pool
	cloud *sim.Cloud
	wrap  *crashtest.Provider
	store *state.Store
	act   *Actuator
}

func newRig(t tb, dir string, capacity string) *rig {
	p := simPool("a100", 20)
	if capacity != "" {
		n, err := strconv.Atoi(capacity)
		if err != nil {
			t.Fatal(err)
		}
		p.Settings = sim.Settings{Capacity: n}
	}
	cloud := sim.New([]fleet.Pool{p}, 1, func() time.Time { return t0 })
	r := &rig{dir: dir, now: t0, pool: p, cloud: cloud, wrap: &crashtest.Provider{Provider: cloud}}
	r.restart(t)
	return r
}

// restart is a new controller process on the same state and cloud.
func (r *rig) restart(t tb) {
	if r.store != nil {
		r.store.Close()
	}
	s, err := state.Open(r.dir)
	if err != nil {
		t.Fatal(err)
	}
	a, err := NewActuator(s, []fleet.Pool{r.pool}, map[string]providers.Provider{r.pool.Name: r.wrap}, func() time.Time { return r.now }, nil)
	if err != nil {
		t.Fatal(err)
	}
	r.store, r.act = s, a
}

func (r *rig) group(t tb) providers.Group {
	g, err := r.cloud.Describe(context.Background(), r.pool)
	if err != nil {
		t.Fatal(err)
	}
	return g
}

func TestLaunchAndTerminateClearTheJournal(t *testing.T) {
	r := newRig(t, t.TempDir(), "")
	ctx := context.Background()
	if err := r.act.Launch(ctx, "a100", 3); err != nil {
		t.Fatal(err)
	}
	g := r.group(t)
	if g.Target != 3 || len(g.Instances) != 3 {
		t.Fatalf("group after launching 3: target %d, %d instances", g.Target, len(g.Instances))
	}
	if ls, _ := r.store.Launches(); len(ls) != 1 || ls[0].Count != 3 || ls[0].Pool != "a100" {
		t.Fatalf("launch records %+v; want the launch of 3 as the controller's own", ls)
	}
	node := g.Instances[0].ID
	if err := r.act.Terminate(ctx, "a100", node); err != nil {
		t.Fatal(err)
	}
	if g := r.group(t); g.Target != 2 {
		t.Errorf("target after terminating one: %d, want 2", g.Target)
	}
	if in, _ := r.store.Intents(); len(in) != 0 {
		t.Errorf("journal after success: %+v, want empty", in)
	}
	// A node the cloud no longer has counts as terminated.
	if err := r.act.Terminate(ctx, "a100", node); err != nil {
		t.Errorf("terminating a gone node: %v", err)
	}
	for _, err := range []error{r.act.Launch(ctx, "h100", 1), r.act.Launch(ctx, "a100", 0), r.act.Terminate(ctx, "nope", "x")} {
		if err == nil {
			t.Error("bad request accepted")
		}
	}
}

func TestCapacityErrorIsAnswered(t *testing.T) {
	r := newRig(t, t.TempDir(), "2")
	err := r.act.Launch(context.Background(), "a100", 5)
	var ice *providers.InsufficientCapacityError
	if !errors.As(err, &ice) {
		t.Fatalf("launch beyond capacity: %v, want InsufficientCapacityError", err)
	}
	if g := r.group(t); g.Target != 2 {
		t.Errorf("target %d, want the 2 granted", g.Target)
	}
	if in, _ := r.store.Intents(); len(in) != 0 {
		t.Errorf("journal after a refusal: %+v, want empty (the cloud answered)", in)
	}
	// What the cloud granted is the controller's own launch.
	if ls, _ := r.store.Launches(); len(ls) != 1 || ls[0].Count != 2 || !ls[0].At.Equal(t0) {
		t.Errorf("launch records %+v; want the 2 granted, at %v", ls, t0)
	}
}

func TestRecoverAfterCrashAtEachStep(t *testing.T) {
	ctx := context.Background()
	tests := []struct {
		name          string
		before, after bool
		terminate     bool
		// down is how long the controller stays down.
		down       time.Duration
		wantTarget int
		want       string // what Recover did: done or dropped
	}{
		// The group's target is the truth: below the launch's, it was not
		// made, and the next plan decides (a keyed group's launch is sent
		// again instead: TestRestartWithLaggingReadsLaunchesOnce).
		{name: "launch: crash before the cloud call", before: true, wantTarget: 2, want: "dropped"},
		{name: "launch: crash after the cloud call", after: true, wantTarget: 5, want: "done"},
		{name: "launch: crash after the cloud call, down long", after: true, down: time.Hour, wantTarget: 5, want: "done"},
		{name: "terminate: crash before the cloud call", terminate: true, before: true, wantTarget: 2, want: "dropped"},
		{name: "terminate: crash after the cloud call", terminate: true, after: true, wantTarget: 1, want: "done"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := newRig(t, t.TempDir(), "")
			if err := r.act.Launch(ctx, "a100", 2); err != nil {
				t.Fatal(err)
			}
			node := r.group(t).Instances[0].ID
			r.wrap.Before, r.wrap.After = tt.before, tt.after
			var err error
			if tt.terminate {
				err = r.act.Terminate(ctx, "a100", node)
			} else {
				err = r.act.Launch(ctx, "a100", 3)
			}
			if !errors.Is(err, crashtest.ErrCrash) || !strings.Contains(err.Error(), "kept for recovery") {
				t.Fatalf("crashed call: %v", err)
			}
			r.now = r.now.Add(tt.down)
			r.restart(t)
			got, err := r.act.Recover(ctx)
			if err != nil {
				t.Fatal(err)
			}
			did := map[string]int{"done": len(got.Done), "dropped": len(got.Dropped)}
			if did[tt.want] != 1 || did["done"]+did["dropped"] != 1 {
				t.Errorf("recover: %+v, want one %s", did, tt.want)
			}
			g := r.group(t)
			if g.Target != tt.wantTarget || len(g.Instances) != tt.wantTarget {
				t.Errorf("group: target %d, %d instances; want %d", g.Target, len(g.Instances), tt.wantTarget)
			}
			if in, _ := r.store.Intents(); len(in) != 0 {
				t.Errorf("journal after recovery: %+v", in)
			}
			if tt.terminate && tt.after && !slices.ContainsFunc(got.Done, func(in state.Intent) bool { return in.Node == node }) {
				t.Errorf("recover: %+v; want the termination of %s among those done (its drain is then forgotten)", got, node)
			}
		})
	}
}

func TestRecoverKeepsIntentsOfUnknownPools(t *testing.T) {
	r := newRig(t, t.TempDir(), "")
	in := state.Intent{Key: "fc-launch-gone-1", Kind: state.IntentLaunch, Pool: "gone", Count: 1, Target: 1, Created: t0}
	if err := r.store.PutIntent(in); err != nil {
		t.Fatal(err)
	}
	rec, err := r.act.Recover(context.Background())
	if err != nil || rec.Err() == nil || !strings.Contains(rec.Err().Error(), "fc-launch-gone-1") || !strings.Contains(rec.Err().Error(), "not in the config") {
		t.Errorf("recover: %v, unsettled %v; want the intent named as unsettled", err, rec.Err())
	}
	if got, _ := r.store.Intents(); !slices.Equal(got, []state.Intent{in}) {
		t.Errorf("journal: %+v, want the intent kept", got)
	}
}

// TestNeverLaunchesTwice drives a pool through random desired sizes with
// the controller killed at random points around its cloud calls and
// restarted (Recover, then the next cycle decides from the cloud's state):
// the group never exceeds what was asked, ends at the last size asked, and
// no intent outlives its cycle.
func TestNeverLaunchesTwice(t *testing.T) {
	ctx := context.Background()
	rapid.Check(t, func(rt *rapid.T) {
		dir, err := os.MkdirTemp("", "fleetcast-actuator-")
		if err != nil {
			rt.Fatal(err)
		}
		defer os.RemoveAll(dir)
		r := newRig(rt, dir, "")
		defer func() { r.store.Close() }()
		want := 0
		for range rapid.IntRange(1, 12).Draw(rt, "cycles") {
			want = rapid.IntRange(0, 8).Draw(rt, "want")
			crash := rapid.SampledFrom([]string{"none", "before", "after"}).Draw(rt, "crash")
			r.wrap.Before, r.wrap.After = crash == "before", crash == "after"
			// One cycle: act until the group is the size wanted, as the
			// loop would over cycles, restarting after each crash.
			for range 20 {
				g := r.group(rt)
				if g.Target > want && g.Target > 0 {
					victim := g.Instances[rapid.IntRange(0, len(g.Instances)-1).Draw(rt, "victim")].ID
					err = r.act.Terminate(ctx, "a100", victim)
				} else if g.Target < want {
					err = r.act.Launch(ctx, "a100", want-g.Target)
				} else {
					break
				}
				if errors.Is(err, crashtest.ErrCrash) {
					r.restart(rt)
					if _, err := r.act.Recover(ctx); err != nil {
						rt.Fatal(err)
					}
				} else if err != nil {
					rt.Fatal(err)
				}
				if after := r.group(rt); after.Target > max(want, g.Target) || after.Target != len(after.Instances) {
					rt.Fatalf("group went from target %d to %d (%d instances) while %d wanted", g.Target, after.Target, len(after.Instances), want)
				}
			}
			g := r.group(rt)
			if g.Target != want {
				rt.Fatalf("cycle ended at target %d, want %d", g.Target, want)
			}
			if in, _ := r.store.Intents(); len(in) != 0 {
				rt.Fatalf("journal not empty between cycles: %+v", in)
			}
		}
	})
}

// namesSeen is a cloud that keeps the names each launch asked for.
type namesSeen struct {
	providers.Provider
	names [][]string
}

func (n *namesSeen) Launch(ctx context.Context, pool fleet.Pool, req providers.LaunchRequest) error {
	n.names = append(n.names, req.Names)
	return n.Provider.Launch(ctx, pool, req)
}

// TestLaunchNamed: a named launch's names go to the cloud, and are kept
// with its intent, for a launch sent again after a restart; more names
// than instances is refused.
func TestLaunchNamed(t *testing.T) {
	ctx := context.Background()
	r := newRig(t, t.TempDir(), "")
	seen := &namesSeen{Provider: r.cloud}
	r.wrap.Provider = seen
	if err := r.act.LaunchNamed(ctx, "a100", 2, []string{"dgx-3"}); err != nil {
		t.Fatal(err)
	}
	r.wrap.Before = true
	if err := r.act.LaunchNamed(ctx, "a100", 1, []string{"dgx-4"}); !errors.Is(err, crashtest.ErrCrash) {
		t.Fatalf("crashed call: %v", err)
	}
	if in, err := r.store.Intents(); err != nil || len(in) != 1 || in[0].Names != "dgx-4" {
		t.Fatalf("the journal: %+v, %v; want the crashed launch's intent with its name", in, err)
	}
	if len(seen.names) != 1 || !slices.Equal(seen.names[0], []string{"dgx-3"}) {
		t.Errorf("the cloud was asked for names %q; want [[dgx-3]]", seen.names)
	}
	if err := r.act.LaunchNamed(ctx, "a100", 1, []string{"a", "b"}); err == nil || !strings.Contains(err.Error(), `launch of 1 instances in pool a100, named ["a" "b"]`) {
		t.Errorf("a launch of 1 with 2 names: %v", err)
	}
}

// TestKeyCarriesTerm: a key carries the leader's term and fits an EC2
// client token, whatever the pool's name and the term.
func TestKeyCarriesTerm(t *testing.T) {
	long := strings.Repeat("p", 80)
	for _, tt := range []struct {
		pool string
		term int64
		want string
	}{
		{"a100", 0, "fc-terminate-a100-"},
		{"a100", 7, "fc-terminate-a100-t7-"},
		{long, 9223372036854775807, "fc-terminate-ppppppppppppp-t9223372036854775807-"},
		{long, 0, "fc-terminate-" + strings.Repeat("p", 34) + "-"},
	} {
		a := &Actuator{Term: func() int64 { return tt.term }}
		k := a.newKey(state.IntentTerminate, tt.pool)
		if !strings.HasPrefix(k, tt.want) || len(k) != len(tt.want)+16 || len(k) > 64 {
			t.Errorf("pool %.8s…, term %d: key %q (%d characters); want %q and 16 hex digits, at most 64", tt.pool, tt.term, k, len(k), tt.want)
		}
	}
}
