package daemon

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fleetcast/autoscaler/config"
	"github.com/fleetcast/autoscaler/fleet"
	"github.com/fleetcast/autoscaler/internal/etcdtest"
	"github.com/fleetcast/autoscaler/loop"
	"github.com/fleetcast/autoscaler/providers"
	"github.com/fleetcast/autoscaler/providers/registry"
	"github.com/fleetcast/autoscaler/providers/sim"
	"github.com/fleetcast/autoscaler/state"
)

// haPool is the HA tests' one pool: 8-GPU nodes on the simulated cloud,
// none at the start.
const haPool = `
pool "a" {
  provider       = "sim"
  region         = "r"
  zones          = ["r-a"]
  instance_type  = "x8"
  gpu_model      = "A100"
  gpus_per_node  = 8
  capacity       = "on_demand"
  price_per_hour = 10
  lead_time      = "1m"
  max            = 10
}
`

// launch is a launch that reached the cloud.
type launch struct {
	key   string
	count int
}

// cloudLog is the shared simulated cloud as the replicas reach it: each
// replica's own wrapper, which logs the launches that reach the cloud and
// can kill its replica before its next launch reaches it.
type cloudLog struct {
	mu       sync.Mutex
	launches []launch
}

type replicaCloud struct {
	providers.Provider
	log *cloudLog
	// kill, when set, is called instead of the replica's next launch:
	// the replica dies between the launch's journal write and its call.
	mu   sync.Mutex
	kill func()
}

func (c *replicaCloud) Launch(ctx context.Context, p fleet.Pool, req providers.LaunchRequest) error {
	c.mu.Lock()
	kill := c.kill
	c.kill = nil
	c.mu.Unlock()
	if kill != nil {
		kill()
		<-ctx.Done() // dead: the call never goes
		return ctx.Err()
	}
	err := c.Provider.Launch(ctx, p, req)
	if err == nil {
		c.log.mu.Lock()
		c.log.launches = append(c.log.launches, launch{req.Key, req.Count})
		c.log.mu.Unlock()
	}
	return err
}

// haReplica is a started replica and what it saw.
type haReplica struct {
	d      *Daemon
	cloud  *replicaCloud
	cancel context.CancelFunc
	done   chan struct{}
	mu     sync.Mutex
	cycles []time.Time
}

func (r *haReplica) firstCycleAfter(t time.Time) (time.Time, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, c := range r.cycles {
		if c.After(t) {
			return c, true
		}
	}
	return time.Time{}, false
}

// root is the HA tests' root API token, which the replicas share.
const root = "0123456789abcdef0123456789abcdef0123456789abcdef"

// haRig is replicas of the one-pool config sharing one simulated cloud
// and etcd.
type haRig struct {
	cfg    *config.Config
	shared *sim.Cloud
	log    *cloudLog
	rs     []*haReplica
}

// newHARig starts n replicas, replica i dialling etcd at endpoints(i),
// each after the one before leads or follows.
func newHARig(t *testing.T, n int, endpoints func(i int) []string) *haRig {
	t.Helper()
	cfg, diags := config.Parse("ha.hcl", []byte(haPool+"controller {\n  interval = \"1s\"\n  fleet = \"ha\"\n}\n"), registry.Blocks())
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	g := &haRig{cfg: cfg, shared: sim.New(cfg.Pools, 1, func() time.Time { return time.Now().UTC() }), log: &cloudLog{}}
	t.Cleanup(func() {
		for _, r := range g.rs {
			r.cancel()
			<-r.done
			r.d.Close()
		}
	})
	for i := range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		addr := l.Addr().String()
		l.Close()
		c := *cfg
		c.Controller.HA = &fleet.HASettings{Etcd: endpoints(i), LeaseTTL: 2 * time.Second, Advertise: "http://" + addr}
		r := &haReplica{cloud: &replicaCloud{Provider: g.shared, log: g.log}}
		d, err := Start(context.Background(), Options{Config: &c, Listen: addr, StateDir: t.TempDir(), RootToken: root,
			Clouds: map[string]providers.Provider{"a": r.cloud}})
		if err != nil {
			t.Fatalf("replica %d: %v", i, err)
		}
		r.d = d
		ctx, cancel := context.WithCancel(context.Background())
		r.cancel, r.done = cancel, make(chan struct{})
		go func() {
			defer close(r.done)
			d.Run(ctx, 0, func(now time.Time, _ loop.CycleResult) {
				r.mu.Lock()
				r.cycles = append(r.cycles, now)
				r.mu.Unlock()
			})
		}()
		g.rs = append(g.rs, r)
		if i == 0 {
			g.leader(t, nil)
		}
	}
	return g
}

// leader waits for a replica other than skip to lead, and returns it.
func (g *haRig) leader(t *testing.T, skip *haReplica) *haReplica {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		for _, r := range g.rs {
			if r != skip && r.d.ha.leading.Load() != nil {
				return r
			}
		}
	}
	t.Fatal("no replica leads")
	return nil
}

// push sends 16 GPUs of pending demand to a replica's API, as a
// scheduler's source does, and returns the status.
func push(to *haReplica) int {
	body := `{"source": "sched", "pending": [{"pool": "a", "gpus": 16}]}`
	req, _ := http.NewRequest("POST", "http://"+to.d.Info().Addr+"/v1/demand", bytes.NewBufferString(body))
	req.Header.Set("Authorization", "Bearer "+root)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0
	}
	resp.Body.Close()
	return resp.StatusCode
}

// TestHAKillBetweenJournalAndCall: three replicas share one simulated
// cloud and etcd; a scheduler pushes its demand to a follower, which
// forwards it to the leader; the leader journals a launch and dies before
// the call. A new leader starts a cycle within the lease's TTL and a
// second, settles the journaled launch, and the cloud holds exactly the
// nodes the demand needs.
func TestHAKillBetweenJournalAndCall(t *testing.T) {
	srv := etcdtest.Start(t)
	g := newHARig(t, 3, func(int) []string { return srv.Endpoints })
	first := g.rs[0]
	// The leader dies before its first launch reaches the cloud: its
	// client to etcd closed (its lease lapses after the TTL, as a process
	// killed with SIGKILL), and the call never made.
	var mu sync.Mutex
	var killed time.Time
	first.cloud.kill = func() {
		mu.Lock()
		killed = time.Now()
		mu.Unlock()
		first.d.ha.client.Close()
	}
	if code := push(g.rs[1]); code != http.StatusNoContent {
		t.Fatalf("demand pushed to a follower: %d", code)
	}
	// The scheduler pushes every half second, to the followers, until the
	// test ends.
	stop := make(chan struct{})
	defer close(stop)
	go func() {
		for {
			select {
			case <-stop:
				return
			case <-time.After(500 * time.Millisecond):
				push(g.rs[1])
				push(g.rs[2])
			}
		}
	}()
	when := func() time.Time { mu.Lock(); defer mu.Unlock(); return killed }
	for deadline := time.Now().Add(10 * time.Second); when().IsZero(); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the leader never launched")
		}
	}
	second := g.leader(t, first)
	var cycle time.Time
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		var ok bool
		if cycle, ok = second.firstCycleAfter(when()); ok || time.Now().After(deadline) {
			break
		}
	}
	took := cycle.Sub(when())
	if cycle.IsZero() || took > 3*time.Second {
		t.Errorf("the new leader's first cycle %v after the kill, want within the TTL (2s) and a second", took)
	}
	t.Logf("the new leader's first cycle %v after the kill (TTL 2s)", took.Round(time.Millisecond))
	// The cloud holds what the demand needs, and no more.
	time.Sleep(2 * time.Second)
	grp, err := g.shared.Describe(context.Background(), g.cfg.Pools[0])
	if err != nil {
		t.Fatal(err)
	}
	g.log.mu.Lock()
	defer g.log.mu.Unlock()
	if len(g.log.launches) == 0 {
		t.Fatal("no launch reached the cloud")
	}
	firstTerm := fmt.Sprintf("-t%d-", first.d.ha.lastTerm.Load())
	for _, l := range g.log.launches {
		if strings.Contains(l.key, firstTerm) {
			t.Errorf("launch %s of the dead leader's term reached the cloud", l.key)
		}
	}
	// The dead leader's journaled launch is settled: the simulated group
	// keeps a target, which shows it was not made, so the new leader drops
	// it and plans afresh (a keyed group's would be sent again).
	intents, err := second.d.store.Intents()
	if err != nil || len(intents) != 0 {
		t.Errorf("the journal after recovery: %+v, %v; want it empty", intents, err)
	}
	if len(grp.Instances) != 2 {
		t.Errorf("%d instances in the cloud, want 2 (16 GPUs of 8-GPU nodes); launches %+v", len(grp.Instances), g.log.launches)
	}
}

// TestHAPartitionedLeaderStops: the leader cut off from etcd (not from
// the cloud) stops acting within its lease's TTL of the cut; another is
// elected; a write of the cut-off leader is refused by its fence, and,
// once the network heals, one made under its old term is refused by etcd.
func TestHAPartitionedLeaderStops(t *testing.T) {
	srv := etcdtest.Start(t)
	proxy := srv.NewProxy(t)
	g := newHARig(t, 3, func(i int) []string {
		if i == 0 {
			return []string{proxy.Endpoint}
		}
		return srv.Endpoints
	})
	first := g.rs[0]
	key, term, ok := first.d.ha.el.Term()
	if !ok {
		t.Fatal("the first replica does not lead")
	}
	time.Sleep(500 * time.Millisecond)
	cut := time.Now()
	proxy.Cut()
	for first.d.ha.el.Leading() != 0 {
		time.Sleep(5 * time.Millisecond)
	}
	stopped := time.Since(cut)
	if stopped > 2*time.Second+100*time.Millisecond {
		t.Errorf("the cut-off leader stopped %v after the cut; want within the TTL (2s)", stopped)
	}
	t.Logf("the cut-off leader stopped %v after the cut (TTL 2s)", stopped.Round(time.Millisecond))
	second := g.leader(t, first)
	t.Logf("a new leader %v after the cut", time.Since(cut).Round(time.Millisecond))
	in := state.Intent{Key: "fc-launch-a-late", Kind: state.IntentLaunch, Pool: "a", Count: 1, Target: 1, Created: time.Now()}
	if err := first.d.store.PutIntent(in); !errors.Is(err, state.ErrNotLeader) {
		t.Errorf("the cut-off leader's journal write: %v, want %v", err, state.ErrNotLeader)
	}
	proxy.Heal()
	stale, err := state.OpenEtcd(context.Background(), state.EtcdOptions{Client: first.d.ha.client, Prefix: "/fleetcast/ha/state/", Fence: oldTerm{key, term}})
	if err != nil {
		t.Fatal(err)
	}
	if err := stale.PutIntent(in); !errors.Is(err, state.ErrFenced) {
		t.Errorf("a journal write under the old term %d (term %d leads): %v, want %v", term, second.d.ha.el.Leading(), err, state.ErrFenced)
	}
}

// oldTerm is a fence that holds a term whatever happened since.
type oldTerm struct {
	key string
	rev int64
}

func (f oldTerm) Term() (string, int64, bool) { return f.key, f.rev, true }

// TestHAFollowerReads: a follower serves the plan, the fleet and the
// forecast as the leader last wrote them, and who used what from the
// books, to the callers the shared
// tokens let read, a token created through it (on the leader) within a
// second;
// and refuses an unknown token.
func TestHAFollowerReads(t *testing.T) {
	srv := etcdtest.Start(t)
	g := newHARig(t, 2, func(int) []string { return srv.Endpoints })
	follower := g.rs[1]
	g.leader(t, nil)
	do := func(method, path, token, body string) (*http.Response, string) {
		t.Helper()
		req, _ := http.NewRequest(method, "http://"+follower.d.Info().Addr+path, strings.NewReader(body))
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp, string(b)
	}
	var plan struct {
		At time.Time `json:"at"`
	}
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		resp, body := do("GET", "/v1/plan", root, "")
		if resp.StatusCode == http.StatusOK {
			if by := resp.Header.Get("Fleetcast-Served-By"); by != "follower "+follower.d.Info().Replica {
				t.Errorf("served by %q", by)
			}
			if err := json.Unmarshal([]byte(body), &plan); err != nil || plan.At.IsZero() {
				t.Fatalf("plan %s: %v", body, err)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("GET /v1/plan from a follower: %d %s", resp.StatusCode, body)
		}
	}
	if resp, body := do("GET", "/v1/fleet", root, ""); resp.StatusCode != http.StatusOK || !strings.Contains(body, `"pools"`) {
		t.Errorf("GET /v1/fleet from a follower: %d %s", resp.StatusCode, body)
	}
	if resp, body := do("GET", "/v1/usage?by=pool", root, ""); resp.StatusCode != http.StatusOK || resp.Header.Get("Fleetcast-Served-By") == "" || !strings.Contains(body, `"by": "pool"`) && !strings.Contains(body, `"by":"pool"`) {
		t.Errorf("GET /v1/usage from a follower: %d %v %s", resp.StatusCode, resp.Header, body)
	}
	if resp, _ := do("GET", "/v1/usage?from=yesterday", root, ""); resp.StatusCode != http.StatusBadRequest {
		t.Errorf("GET /v1/usage with a bad window from a follower: %d", resp.StatusCode)
	}
	if resp, _ := do("GET", "/v1/plan", "fct_nothing", ""); resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("GET /v1/plan with an unknown token: %d", resp.StatusCode)
	}
	resp, body := do("POST", "/v1/api-tokens", root, `{"name": "grafana", "scope": "read"}`)
	var created struct {
		Token string `json:"token"`
	}
	if err := json.Unmarshal([]byte(body), &created); resp.StatusCode != http.StatusOK || err != nil || created.Token == "" {
		t.Fatalf("creating a read token through the follower: %d %s", resp.StatusCode, body)
	}
	// Followers read the tokens again a second after they last did.
	time.Sleep(1100 * time.Millisecond)
	if resp, body := do("GET", "/v1/plan", created.Token, ""); resp.StatusCode != http.StatusOK {
		t.Errorf("GET /v1/plan with the new read token, a second on: %d %s", resp.StatusCode, body)
	}
	if resp, _ := do("POST", "/v1/demand", created.Token, `{"source": "x", "pending": []}`); resp.StatusCode != http.StatusForbidden {
		t.Errorf("a read token's push, forwarded: %d, want 403", resp.StatusCode)
	}
}
