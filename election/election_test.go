package election

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/fleetcast/autoscaler/internal/etcdtest"
	"github.com/fleetcast/autoscaler/state"
)

var t0 = time.Date(2026, 12, 7, 10, 0, 0, 0, time.UTC)

// replica is one controller replica of a test: its client, elector and
// fenced store.
type replica struct {
	name   string
	client *clientv3.Client
	el     *Elector
	store  *state.Store
	cancel context.CancelFunc
	done   chan struct{}
}

func newReplica(t *testing.T, srv *etcdtest.Server, name string) *replica {
	t.Helper()
	c := srv.Client(t)
	el, err := New(Config{Client: c, Prefix: "/p/", TTL: 2 * time.Second, Name: name, Retry: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	s, err := state.OpenEtcd(context.Background(), state.EtcdOptions{Client: c, Prefix: "/p/state/", Fence: el})
	if err != nil {
		t.Fatal(err)
	}
	return &replica{name: name, client: c, el: el, store: s}
}

// start runs the replica's campaign, leading with lead.
func (r *replica) start(lead func(ctx context.Context, term int64) error) {
	ctx, cancel := context.WithCancel(context.Background())
	r.cancel, r.done = cancel, make(chan struct{})
	go func() {
		defer close(r.done)
		r.el.Run(ctx, lead)
	}()
}

func (r *replica) stop() {
	if r.cancel != nil {
		r.cancel()
		<-r.done
		r.cancel = nil
	}
}

// leaderOf waits for one of rs to lead, and returns it.
func leaderOf(t *testing.T, within time.Duration, rs ...*replica) *replica {
	t.Helper()
	deadline := time.Now().Add(within)
	for time.Now().Before(deadline) {
		for _, r := range rs {
			if r.el.Leading() > 0 {
				return r
			}
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("no replica leads after %v", within)
	return nil
}

func idle(ctx context.Context, term int64) error { <-ctx.Done(); return nil }

// TestOneLeadsAndAnotherTakesOver: of three replicas one leads, followers'
// writes are refused, and when the leader stops another leads within the
// lease's TTL and a second, with a greater term.
func TestOneLeadsAndAnotherTakesOver(t *testing.T) {
	srv := etcdtest.Start(t)
	rs := []*replica{newReplica(t, srv, "a:1"), newReplica(t, srv, "b:1"), newReplica(t, srv, "c:1")}
	for _, r := range rs {
		r.start(idle)
		defer r.stop()
	}
	first := leaderOf(t, 5*time.Second, rs...)
	time.Sleep(100 * time.Millisecond)
	leaders := 0
	for _, r := range rs {
		err := r.store.PutHalted(t0)
		switch lead := r.el.Leading() > 0; {
		case lead:
			leaders++
			if err != nil {
				t.Errorf("%s leads; its write: %v", r.name, err)
			}
		case !errors.Is(err, state.ErrNotLeader):
			t.Errorf("%s follows; its write: %v, want %v", r.name, err, state.ErrNotLeader)
		}
	}
	if leaders != 1 {
		t.Fatalf("%d replicas lead, want 1", leaders)
	}
	name, term, err := Leader(context.Background(), first.client, "/p/")
	if err != nil || name != first.name || term != first.el.Leading() {
		t.Errorf("Leader: %q, %d, %v; want %q, %d", name, term, err, first.name, first.el.Leading())
	}
	stopped := time.Now()
	first.stop()
	var rest []*replica
	for _, r := range rs {
		if r != first {
			rest = append(rest, r)
		}
	}
	second := leaderOf(t, 3*time.Second, rest...)
	if took := time.Since(stopped); took > 3*time.Second {
		t.Errorf("a new leader after %v, want within the TTL and a second", took)
	}
	if second.el.Leading() <= term {
		t.Errorf("new term %d, want more than %d", second.el.Leading(), term)
	}
}

// TestLeaseLostStopsLeading: a leader whose lease ends (revoked in etcd,
// as when it is cut off past its TTL) stops leading: its lead context ends
// and its Term is gone; and a write under its old term, as a leader that
// had not yet noticed would make, is refused by etcd.
func TestLeaseLostStopsLeading(t *testing.T) {
	srv := etcdtest.Start(t)
	r := newReplica(t, srv, "a:1")
	ended := make(chan struct{}, 1)
	r.start(func(ctx context.Context, term int64) error {
		<-ctx.Done()
		ended <- struct{}{}
		<-make(chan struct{}) // leads no more: stays until stopped
		return nil
	})
	defer func() { go r.stop() }()
	leaderOf(t, 5*time.Second, r)
	key, term, _ := r.el.Term()
	resp, err := r.client.Get(context.Background(), key)
	if err != nil || len(resp.Kvs) != 1 {
		t.Fatalf("leader key %s: %v", key, err)
	}
	other := srv.Client(t)
	if _, err := other.Revoke(context.Background(), clientv3.LeaseID(resp.Kvs[0].Lease)); err != nil {
		t.Fatal(err)
	}
	select {
	case <-ended:
	case <-time.After(3 * time.Second):
		t.Fatal("the leader's context did not end within the TTL and a second")
	}
	if r.el.Leading() != 0 {
		t.Errorf("still leading term %d after its lease ended", r.el.Leading())
	}
	if err := r.store.PutHalted(t0); !errors.Is(err, state.ErrNotLeader) {
		t.Errorf("write after the lease ended: %v, want %v", err, state.ErrNotLeader)
	}
	stale, err := state.OpenEtcd(context.Background(), state.EtcdOptions{Client: other, Prefix: "/p/state/", Fence: fixed{key, term}})
	if err != nil {
		t.Fatal(err)
	}
	if err := stale.PutHalted(t0); !errors.Is(err, state.ErrFenced) {
		t.Errorf("write under the ended term: %v, want %v", err, state.ErrFenced)
	}
}

// fixed is a fence that holds one term whatever happens: a leader that
// has not noticed its lease ended.
type fixed struct {
	key string
	rev int64
}

func (f fixed) Term() (string, int64, bool) { return f.key, f.rev, true }

// cloud records the calls made to it.
type cloud struct {
	mu    sync.Mutex
	calls []string
}

func (c *cloud) call(key string) {
	c.mu.Lock()
	c.calls = append(c.calls, key)
	c.mu.Unlock()
}

// TestFencedOverSchedules is the fence's property, over generated
// schedules of leases lost, replicas crashed and restarted, and leaders
// stalled between their journal's write and their call: every replica
// leads by journaling an intent (its key carries the term) and then
// calling the cloud. From etcd's own history (every revision of every
// key, read after), every intent etcd accepted was written while its
// term led: none under term T once a later term T' began. The calls the
// cloud took are those intents' (a stalled leader's call may come after
// its term ended: the bounded case, which the next leader settles from
// the journal).
func TestFencedOverSchedules(t *testing.T) {
	srv := etcdtest.Start(t)
	refused := 0
	for seed := range uint64(5) {
		t.Run(fmt.Sprint("seed ", seed), func(t *testing.T) {
			refused += schedule(t, srv, seed)
		})
	}
	if refused == 0 {
		t.Error("no write was refused by the fence in any schedule: the schedules do not test it")
	}
}

// schedule runs one generated schedule on a fresh prefix and checks it; it
// returns how many writes the fence refused.
func schedule(t *testing.T, srv *etcdtest.Server, seed uint64) int {
	rng := rand.New(rand.NewPCG(seed, 54))
	prefix := fmt.Sprintf("/s%d/", seed)
	var mu sync.Mutex
	refused := 0
	stall := map[string]time.Duration{}
	cl := &cloud{}
	var rs []*replica
	for i := range 3 {
		c := srv.Client(t)
		name := fmt.Sprintf("r%d", i)
		el, err := New(Config{Client: c, Prefix: prefix, TTL: 2 * time.Second, Name: name, Retry: 20 * time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		s, err := state.OpenEtcd(context.Background(), state.EtcdOptions{Client: c, Prefix: prefix + "state/", Fence: el})
		if err != nil {
			t.Fatal(err)
		}
		rs = append(rs, &replica{name: name, client: c, el: el, store: s})
	}
	lead := func(r *replica) func(ctx context.Context, term int64) error {
		return func(ctx context.Context, term int64) error {
			for n := 0; ctx.Err() == nil; n++ {
				key := fmt.Sprintf("fc-launch-p-t%d-%s-%d", term, r.name, n)
				err := r.store.PutIntent(state.Intent{Key: key, Kind: state.IntentLaunch, Pool: "p", Count: 1, Target: 1, Created: t0})
				mu.Lock()
				d := stall[r.name]
				delete(stall, r.name)
				if errors.Is(err, state.ErrFenced) {
					refused++
				}
				mu.Unlock()
				if err == nil {
					// A stalled leader calls late, whatever became of its
					// lease meanwhile: the call is journaled, so the next
					// leader finds it.
					time.Sleep(d)
					cl.call(key)
					r.store.DoneIntent(key)
				}
				time.Sleep(rand.N(5 * time.Millisecond)) // the global source: the leads run at once
			}
			return nil
		}
	}
	for _, r := range rs {
		r.start(lead(r))
	}
	defer func() {
		for _, r := range rs {
			r.stop()
		}
	}()
	admin := srv.Client(t)
	for range 6 {
		time.Sleep(time.Duration(50+rng.IntN(150)) * time.Millisecond)
		r := rs[rng.IntN(len(rs))]
		switch rng.IntN(4) {
		case 0, 1:
			// The leader's lease ends under it, as past its TTL in a
			// partition or a pause; the leader does not know yet.
			if resp, err := admin.Get(context.Background(), prefix+"leader/", clientv3.WithFirstCreate()...); err == nil && len(resp.Kvs) == 1 {
				admin.Revoke(context.Background(), clientv3.LeaseID(resp.Kvs[0].Lease))
			}
		case 2:
			// A replica stalls between its next journal write and its call.
			mu.Lock()
			stall[r.name] = time.Duration(50+rng.IntN(300)) * time.Millisecond
			mu.Unlock()
		case 3:
			// A replica crashes and comes back.
			r.stop()
			r.start(lead(r))
		}
	}
	time.Sleep(300 * time.Millisecond)
	for _, r := range rs {
		r.stop()
	}
	checkHistory(t, admin, prefix, cl)
	return refused
}

// termIn reads the term out of an intent's key.
var termIn = regexp.MustCompile(`-t(\d+)-`)

// checkHistory reads every revision under prefix and checks the fence's
// property against it.
func checkHistory(t *testing.T, c *clientv3.Client, prefix string, cl *cloud) {
	t.Helper()
	// A last key marks the end of the history.
	if _, err := c.Put(context.Background(), prefix+"end", ""); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	// live are the election's keys, candidates' and leader's, by their
	// creation revision; the leader is the oldest.
	live := map[string]int64{}
	leader := func() int64 {
		var min int64
		for _, rev := range live {
			if min == 0 || rev < min {
				min = rev
			}
		}
		return min
	}
	var terms []int64
	written := map[string]int64{}
	w := c.Watch(ctx, prefix, clientv3.WithPrefix(), clientv3.WithRev(1))
	end := false
	for resp := range w {
		for _, ev := range resp.Events {
			k := string(ev.Kv.Key)
			switch {
			case k == prefix+"end":
				end = true
			case strings.HasPrefix(k, prefix+"leader/"):
				if ev.Type == clientv3.EventTypePut {
					live[k] = ev.Kv.CreateRevision
				} else {
					delete(live, k)
				}
				if l := leader(); l > 0 && (len(terms) == 0 || terms[len(terms)-1] != l) {
					terms = append(terms, l)
				}
			case ev.Type == clientv3.EventTypePut && strings.Contains(k, "/intents/"):
				key := k[strings.LastIndexByte(k, 0)+1:]
				m := termIn.FindStringSubmatch(key)
				if m == nil {
					t.Fatalf("intent %q names no term", key)
				}
				term, _ := strconv.ParseInt(m[1], 10, 64)
				if l := leader(); l != term {
					t.Errorf("intent %s of term %d written at revision %d, when term %d led", key, term, ev.Kv.ModRevision, l)
				}
				written[key] = ev.Kv.ModRevision
			}
		}
		if end {
			break
		}
	}
	if !end {
		t.Fatalf("etcd's history under %s not read to its end: %v", prefix, ctx.Err())
	}
	if len(terms) < 2 {
		t.Errorf("%d terms in the schedule, want a failover at least", len(terms))
	}
	cl.mu.Lock()
	defer cl.mu.Unlock()
	for _, k := range cl.calls {
		if _, ok := written[k]; !ok {
			t.Errorf("the cloud took %s, never journaled", k)
		}
	}
	if len(cl.calls) == 0 {
		t.Error("no call reached the cloud")
	}
}

// TestTermFenceHoldsOneTerm: a replica that loses its lease and wins again
// leads a new term; the fence of its first term holds no more.
func TestTermFenceHoldsOneTerm(t *testing.T) {
	srv := etcdtest.Start(t)
	r := newReplica(t, srv, "a:1")
	r.start(idle)
	defer r.stop()
	leaderOf(t, 5*time.Second, r)
	key, first, _ := r.el.Term()
	fence := r.el.Of(first)
	if _, rev, ok := fence.Term(); !ok || rev != first {
		t.Fatalf("the term's fence: %d, %v; want %d", rev, ok, first)
	}
	resp, err := r.client.Get(context.Background(), key)
	if err != nil || len(resp.Kvs) != 1 {
		t.Fatal(err)
	}
	if _, err := srv.Client(t).Revoke(context.Background(), clientv3.LeaseID(resp.Kvs[0].Lease)); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(10 * time.Second); r.el.Leading() == 0 || r.el.Leading() == first; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("not elected again")
		}
	}
	if _, _, ok := fence.Term(); ok {
		t.Errorf("term %d's fence holds while the replica leads term %d", first, r.el.Leading())
	}
	if _, rev, ok := r.el.Of(r.el.Leading()).Term(); !ok || rev == first {
		t.Errorf("the new term's fence: %d, %v", rev, ok)
	}
}
