package daemon

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/fleetcast/autoscaler/agent/report"
	"github.com/fleetcast/autoscaler/apiauth"
	"github.com/fleetcast/autoscaler/controller"
	"github.com/fleetcast/autoscaler/election"
	"github.com/fleetcast/autoscaler/fleet"
	"github.com/fleetcast/autoscaler/loop"
	"github.com/fleetcast/autoscaler/state"
	"github.com/fleetcast/autoscaler/usage"
)

// forwardedHeader marks a request a follower forwarded to the leader: one
// that reaches a follower again (leadership moved on the way) is answered
// 503, never forwarded twice.
const forwardedHeader = "Fleetcast-Forwarded-By"

// haMode is a replica of several (controller.ha): it campaigns on etcd;
// while it leads, it builds the parts afresh from the shared state and
// runs the cycles; while it follows, it forwards the API to the leader.
type haMode struct {
	d         *Daemon
	client    *clientv3.Client
	el        *election.Elector
	prefix    string
	advertise string
	// forward carries requests to the leader (trusting ha.api_ca where
	// set); proxies are the reverse proxies by leader address.
	forward http.RoundTripper
	mu      sync.Mutex
	proxies map[string]*httputil.ReverseProxy
	// readers serve a follower's reads, made at readAt (reads).
	readers http.Handler
	readAt  time.Time
	// leading are the parts while this replica leads; lastTerm is the
	// term it led last.
	leading  atomic.Pointer[parts]
	lastTerm atomic.Int64
}

// openHA dials etcd and opens the state there, fenced by this replica's
// elector.
func (d *Daemon) openHA(ctx context.Context, live bool) error {
	ha := d.ctl.HA
	switch {
	case !live:
		return errors.New("controller.ha: the simulated cloud lives in one process's memory: run one replica on it (drop the ha block), or pools on a real cloud")
	case d.o.RootToken == "":
		return errors.New("controller.ha: the replicas must share the root API token: set FLEETCAST_API_TOKEN to the same secret on each")
	}
	client, err := election.Dial(*ha)
	if err != nil {
		return err
	}
	d.closers = append(d.closers, func() { client.Close() })
	prefix := d.ctl.HAPrefix()
	el, err := election.New(election.Config{Client: client, Prefix: prefix, TTL: ha.LeaseTTL, Name: ha.Advertise, Log: d.o.Log.Named("election")})
	if err != nil {
		return err
	}
	// The replica's own store only reads (the tokens, the views, the
	// books, for a follower's reads); each term opens its own to write.
	if d.store, err = state.OpenEtcd(ctx, state.EtcdOptions{Client: client, Prefix: prefix + "state/", Fence: readOnly{}}); err != nil {
		return err
	}
	forward := http.DefaultTransport.(*http.Transport).Clone()
	if ha.APICAFile != "" {
		pem, err := os.ReadFile(ha.APICAFile)
		if err != nil {
			return fmt.Errorf("controller.ha.api_ca: %w", err)
		}
		roots := x509.NewCertPool()
		if !roots.AppendCertsFromPEM(pem) {
			return fmt.Errorf("controller.ha.api_ca: %s holds no PEM certificate", ha.APICAFile)
		}
		forward.TLSClientConfig = &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12}
	}
	d.ha = &haMode{d: d, client: client, el: el, prefix: prefix, advertise: ha.Advertise, forward: forward, proxies: map[string]*httputil.ReverseProxy{}}
	return nil
}

// reads serves the reads the leader shares (controller.SharedViews), and
// who used what as the leader's books last wrote it, from the store, to
// callers the store's tokens let read. The tokens are read again at most
// a second after the last reading, so one created or revoked on the
// leader counts here within a second, and callers without a token cannot
// make a follower read etcd at will.
func (h *haMode) reads() http.Handler {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.readers != nil && time.Since(h.readAt) < time.Second {
		return h.readers
	}
	d := h.d
	rt := &apiauth.Router{OpenReads: d.o.LoopbackReads && fleet.Loopback(d.o.Listen), Log: d.o.Log.Named("api")}
	tokens, err := apiauth.NewTokens(d.store, nil, d.o.Log.Named("api-tokens"))
	if err == nil {
		err = tokens.SetRoot(d.root, d.rootSource)
	}
	if err != nil {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Retry-After", "1")
			http.Error(w, "reading the API tokens: "+err.Error(), http.StatusServiceUnavailable)
		})
	}
	rt.Tokens = tokens
	// Who used what, from the books the leader writes every 30 cycles.
	rt.HandleFunc(controller.UsagePattern, apiauth.NeedRead, func(w http.ResponseWriter, r *http.Request) {
		q, err := controller.ParseUsageQuery(r.URL.Query().Get, d.clock(), d.cfg.Usage.ShareIdle)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		rep, err := controller.BuildUsageReport(d.store, q, usage.Live{})
		if err != nil {
			w.Header().Set("Retry-After", "1")
			http.Error(w, "reading the usage records: "+err.Error(), http.StatusServiceUnavailable)
			return
		}
		w.Header().Set("Fleetcast-Served-By", "follower "+h.advertise)
		report.WriteJSON(w, rep)
	})
	for path, name := range controller.SharedViews {
		rt.HandleFunc("GET "+path, apiauth.NeedRead, func(w http.ResponseWriter, r *http.Request) { h.serveView(w, r, name) })
	}
	h.readers, h.readAt = rt, time.Now()
	return rt
}

// serveView answers a read from the view the leader last wrote of it: as
// the leader would (404 where its last cycle made none), or, for one too
// large to keep, forwarded to the leader.
func (h *haMode) serveView(w http.ResponseWriter, r *http.Request, name string) {
	views, err := h.d.store.Views()
	if err != nil {
		w.Header().Set("Retry-After", "1")
		http.Error(w, "reading the leader's views: "+err.Error(), http.StatusServiceUnavailable)
		return
	}
	i := slices.IndexFunc(views, func(v state.View) bool { return v.Name == name })
	switch {
	case i < 0:
		w.Header().Set("Retry-After", "1")
		http.Error(w, "no control cycle has shared its "+name+" yet", http.StatusServiceUnavailable)
		return
	case views[i].Forward:
		h.toLeader(w, r)
		return
	}
	v := views[i]
	w.Header().Set("Fleetcast-Served-By", "follower "+h.advertise)
	w.Header().Set("Fleetcast-View-Of", v.At.UTC().Format(time.RFC3339Nano))
	if string(v.JSON) == "null" {
		http.Error(w, "the last cycle made none (no demand history to forecast from)", http.StatusNotFound)
		return
	}
	var out bytes.Buffer
	json.Indent(&out, v.JSON, "", "  ")
	out.WriteByte('\n')
	w.Header().Set("Content-Type", "application/json")
	w.Write(out.Bytes())
}

// readOnly is a fence that never holds: a store that only reads.
type readOnly struct{}

func (readOnly) Term() (string, int64, bool) { return "", 0, false }

// proxy is the reverse proxy to the leader at to.
func (h *haMode) proxy(to *url.URL) *httputil.ReverseProxy {
	h.mu.Lock()
	defer h.mu.Unlock()
	p := h.proxies[to.String()]
	if p == nil {
		p = httputil.NewSingleHostReverseProxy(to)
		p.Transport = h.forward
		p.ErrorHandler = func(w http.ResponseWriter, r *http.Request, err error) {
			// The leader went, or is out of reach: leadership may be
			// moving; the caller tries again.
			w.Header().Set("Retry-After", "1")
			http.Error(w, "forwarding to the leader "+to.String()+": "+err.Error(), http.StatusBadGateway)
		}
		h.proxies[to.String()] = p
	}
	return p
}

// run campaigns until ctx ends (or runFor has passed); each time this
// replica is elected it builds the parts from the state (recovering the
// journal as a restart does) and runs cycles until its lease is lost.
func (h *haMode) run(ctx context.Context, runFor time.Duration, after func(now time.Time, r loop.CycleResult)) error {
	if runFor > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, runFor)
		defer cancel()
	}
	err := h.el.Run(ctx, func(lctx context.Context, term int64) error {
		h.lastTerm.Store(term)
		// Everything of the term is the term's own: its writes are fenced
		// by this term alone (not a later one this replica may win while
		// a request of this one is still under way), and the agents'
		// reports and pending demand start empty, rebuilt within an
		// interval, never carried over from an earlier term.
		// Existing: a leader never makes a state, where one was deleted
		// under the running replicas (state import restores one).
		store, err := state.OpenEtcd(lctx, state.EtcdOptions{Client: h.client, Prefix: h.prefix + "state/", Fence: h.el.Of(term), Existing: true})
		if err != nil {
			return fmt.Errorf("term %d: opening the state: %w", term, err)
		}
		d := h.d
		pending := &controller.Pending{Budgeted: fleet.BudgetedTeams(d.cfg.Teams)}
		p, err := d.build(lctx, store, controller.NewAgents(d.clock), pending, func() int64 { return term })
		if err != nil {
			return fmt.Errorf("term %d: starting: %w", term, err)
		}
		h.leading.Store(p)
		defer h.leading.Store(nil)
		// Follows the moment the term ends, while the cycle in progress
		// winds down (its reads of etcd may wait out their timeout in a
		// partition; its writes are refused already).
		stop := context.AfterFunc(lctx, func() { h.leading.CompareAndSwap(p, nil) })
		defer stop()
		return h.d.cycles(lctx, p, 0, after, true)
	})
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
		return nil
	}
	return err
}

// serve answers the API: the leader's own handler while this replica
// leads; otherwise /healthz here, and everything else forwarded to the
// leader.
func (h *haMode) serve(w http.ResponseWriter, r *http.Request) {
	if p := h.leading.Load(); p != nil {
		p.handler.ServeHTTP(w, r)
		return
	}
	if r.URL.Path == "/healthz" {
		// A follower is alive while it can campaign: its probes must not
		// restart it for not leading.
		fmt.Fprintf(w, "ok\nfollower: %s\n", h.advertise)
		return
	}
	if _, shared := controller.SharedViews[r.URL.Path]; (shared || "GET "+r.URL.Path == controller.UsagePattern) && r.Method == http.MethodGet {
		h.reads().ServeHTTP(w, r)
		return
	}
	h.toLeader(w, r)
}

// toLeader forwards a request to the leader.
func (h *haMode) toLeader(w http.ResponseWriter, r *http.Request) {
	if by := r.Header.Get(forwardedHeader); by != "" {
		http.Error(w, "not the leader either (forwarded by "+by+"): leadership is changing, retry", http.StatusServiceUnavailable)
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), 5*time.Second)
	name, _, err := election.Leader(ctx, h.client, h.prefix)
	cancel()
	if err != nil || name == h.advertise {
		// This replica, elected a moment ago, is still starting; or none
		// leads yet.
		w.Header().Set("Retry-After", "1")
		http.Error(w, "no leader elected yet: retry", http.StatusServiceUnavailable)
		return
	}
	if name == election.CommandName {
		w.Header().Set("Retry-After", "10")
		http.Error(w, "an autoscaler command (state import, history import) is writing the state: no replica leads until it is done", http.StatusServiceUnavailable)
		return
	}
	to, err := url.Parse(name)
	if err != nil {
		http.Error(w, fmt.Sprintf("the leader's address %q: %v", name, err), http.StatusBadGateway)
		return
	}
	r.Header.Set(forwardedHeader, h.advertise)
	h.proxy(to).ServeHTTP(w, r)
}
