// Package election elects one controller replica to lead a fleet, on etcd
// (designs/ha-etcd.md). Each replica campaigns with a lease; the leader's
// term is its election key's creation revision, unique and larger for
// every later leader. An Elector is the state store's fence
// (state.Fence): the store conditions every write on the term, so a
// leader whose lease has lapsed, which may not know it yet, writes
// nothing more, and so calls no cloud (the journal's write comes before
// every call: docs/design.md rules 8 and 12).
package election

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"
)

// Config is what an Elector campaigns with.
type Config struct {
	Client *clientv3.Client
	// Prefix is the fleet's prefix in etcd ("/fleetcast/<fleet>/"); the
	// election's keys are under Prefix + "leader".
	Prefix string
	// TTL is the lease's: a leader that cannot renew it for this long
	// stops leading, and another is elected. Whole seconds, at least one.
	TTL time.Duration
	// Name is this replica's address, which followers forward writes to.
	Name string
	// Retry is how long to wait after etcd failed before campaigning
	// again (one second when zero).
	Retry time.Duration
	Log   hclog.Logger
}

// Elector campaigns for one replica. Its methods are safe for concurrent
// use.
type Elector struct {
	cfg Config
	mu  sync.Mutex
	// key and rev are the election key and term of this replica's last
	// win, held while live has not ended.
	key  string
	rev  int64
	live context.Context
	// until is when the lease may lapse, as last renewed.
	until time.Time
}

// New checks the config and returns an Elector that has not campaigned.
func New(cfg Config) (*Elector, error) {
	switch {
	case cfg.Client == nil:
		return nil, errors.New("election: no etcd client")
	case cfg.Prefix == "":
		return nil, errors.New("election: no prefix")
	case cfg.TTL < time.Second || cfg.TTL%time.Second != 0 || cfg.TTL > math.MaxInt32*time.Second:
		return nil, fmt.Errorf("election: lease TTL %v: want whole seconds, at least 1s", cfg.TTL)
	case cfg.Name == "":
		return nil, errors.New("election: no name for this replica")
	}
	if cfg.Retry <= 0 {
		cfg.Retry = time.Second
	}
	if cfg.Log == nil {
		cfg.Log = hclog.NewNullLogger()
	}
	return &Elector{cfg: cfg}, nil
}

// Term returns the election key and the term while this replica leads;
// ok is false while it does not (state.Fence).
func (e *Elector) Term() (key string, rev int64, ok bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.live == nil || e.live.Err() != nil || !time.Now().Before(e.until) {
		return "", 0, false
	}
	return e.key, e.rev, true
}

// Of is a fence of one term: its Term holds while this replica leads that
// term, never a later one it may win after (a request of the earlier term
// still under way then writes nothing).
func (e *Elector) Of(term int64) TermFence { return TermFence{e, term} }

// TermFence is Elector.Of's fence.
type TermFence struct {
	e    *Elector
	term int64
}

// Term returns the election key and the term while this replica leads
// the fence's term.
func (f TermFence) Term() (key string, rev int64, ok bool) {
	key, rev, ok = f.e.Term()
	return key, rev, ok && rev == f.term
}

// Leading is the term while this replica leads, and 0 while it does not.
func (e *Elector) Leading() int64 {
	_, rev, _ := e.Term()
	return rev
}

func (e *Elector) set(key string, rev int64, live context.Context) {
	e.mu.Lock()
	e.key, e.rev, e.live = key, rev, live
	e.mu.Unlock()
}

// Run campaigns until ctx ends. Each time this replica is elected, Run
// calls lead with the term and a context that ends as soon as the lease is
// known lost (the session's end: Campaign itself does not notice it) or
// ctx ends; Term stops returning the term before that context ends. When
// lead returns, Run resigns and campaigns again. It returns ctx's error.
func (e *Elector) Run(ctx context.Context, lead func(ctx context.Context, term int64) error) error {
	for ctx.Err() == nil {
		if err := e.once(ctx, lead); err != nil && ctx.Err() == nil {
			e.cfg.Log.Warn("election: campaigning again", "after", e.cfg.Retry, "error", err)
			select {
			case <-ctx.Done():
			case <-time.After(e.cfg.Retry):
			}
		}
	}
	return ctx.Err()
}

// once takes a lease, campaigns with it, and leads until the lease or
// lead ends.
func (e *Elector) once(ctx context.Context, lead func(ctx context.Context, term int64) error) error {
	ttl := int64(e.cfg.TTL / time.Second)
	sent := time.Now()
	gctx, gcancel := context.WithTimeout(ctx, e.cfg.TTL)
	grant, err := e.cfg.Client.Grant(gctx, ttl)
	gcancel()
	if err != nil {
		return fmt.Errorf("election: taking a lease: %w", err)
	}
	e.mu.Lock()
	e.until = sent.Add(e.cfg.TTL)
	e.mu.Unlock()
	s, err := concurrency.NewSession(e.cfg.Client, concurrency.WithLease(grant.ID), concurrency.WithContext(ctx))
	if err != nil {
		return fmt.Errorf("election: opening a session: %w", err)
	}
	defer s.Close()
	// live ends when the lease may have lapsed: a lease lost while
	// campaigning or leading ends both.
	live, cancel := context.WithCancel(ctx)
	defer cancel()
	go e.renew(live, cancel, grant.ID, sent, s.Done())
	el := concurrency.NewElection(s, e.cfg.Prefix+"leader")
	if err := el.Campaign(live, e.cfg.Name); err != nil {
		return fmt.Errorf("election: campaigning: %w", err)
	}
	term := el.Rev()
	select {
	case <-live.Done():
		return errors.New("election: the lease ended as this replica was elected")
	default:
	}
	e.set(el.Key(), term, live)
	e.cfg.Log.Info("election: leading", "term", term, "name", e.cfg.Name)
	err = lead(live, term)
	cancel()
	rctx, rcancel := context.WithTimeout(context.WithoutCancel(ctx), e.cfg.TTL)
	defer rcancel()
	if rerr := el.Resign(rctx); rerr != nil {
		e.cfg.Log.Debug("election: resigning", "error", rerr)
	}
	e.cfg.Log.Info("election: stopped leading", "term", term, "error", err)
	return err
}

// renew keeps the lease and ends live (with cancel) the moment it may
// have lapsed: a TTL after the last renewal etcd took was sent. The
// server's own expiry comes no sooner (it renewed after the request was
// sent), so a leader cut off from etcd stops acting no later than etcd
// lets another be elected. The session's end (the lease revoked or
// expired as etcd says) ends it too. The renewals are sent by a goroutine
// of their own, so that one waiting on etcd never delays the end.
func (e *Elector) renew(live context.Context, cancel context.CancelFunc, id clientv3.LeaseID, granted time.Time, sessionDone <-chan struct{}) {
	every := e.cfg.TTL / 4
	renewed := make(chan time.Time, 1)
	go func() {
		tick := time.NewTicker(every)
		defer tick.Stop()
		for {
			select {
			case <-live.Done():
				return
			case <-tick.C:
			}
			sent := time.Now()
			rctx, rcancel := context.WithTimeout(live, every)
			_, err := e.cfg.Client.KeepAliveOnce(rctx, id)
			rcancel()
			switch {
			case errors.Is(err, rpctypes.ErrLeaseNotFound):
				cancel()
				return
			case err == nil:
				select {
				case <-renewed: // a later renewal replaces one not yet taken
				default:
				}
				renewed <- sent
			}
		}
	}()
	expire := time.NewTimer(time.Until(granted.Add(e.cfg.TTL)))
	defer expire.Stop()
	for {
		select {
		case <-live.Done():
			return
		case <-sessionDone:
			cancel()
			return
		case <-expire.C:
			e.cfg.Log.Warn("election: lease not renewed within its TTL: stopping", "ttl", e.cfg.TTL)
			cancel()
			return
		case sent := <-renewed:
			deadline := sent.Add(e.cfg.TTL)
			e.mu.Lock()
			e.until = deadline
			e.mu.Unlock()
			expire.Reset(time.Until(deadline))
		}
	}
}

// CommandName is the name a command that writes the state (`autoscaler
// state import`, `history import`) campaigns with: it leads while it
// writes, so that no replica acts on a state half written; replicas that
// find it leading say so rather than forward to it.
const CommandName = "an autoscaler command writing the state"

// ErrNoLeader is Leader's answer while no replica leads.
var ErrNoLeader = concurrency.ErrElectionNoLeader

// Leader returns the leading replica's name and term, or ErrNoLeader.
func Leader(ctx context.Context, client *clientv3.Client, prefix string) (name string, term int64, err error) {
	resp, err := client.Get(ctx, prefix+"leader/", clientv3.WithFirstCreate()...)
	if err != nil {
		return "", 0, fmt.Errorf("election: reading the leader: %w", err)
	}
	if len(resp.Kvs) == 0 {
		return "", 0, ErrNoLeader
	}
	return string(resp.Kvs[0].Value), resp.Kvs[0].CreateRevision, nil
}
