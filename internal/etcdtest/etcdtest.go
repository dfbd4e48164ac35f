// Package etcdtest runs a real etcd member in process for tests
// (go.etcd.io/etcd/server/v3/embed), on loopback ports of its own, with its
// data in the test's temporary directory.
package etcdtest

import (
	"fmt"
	"io"
	"net"
	"net/url"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/server/v3/embed"
	"go.uber.org/zap"
)

// Server is a running etcd member.
type Server struct {
	// Endpoints are its client URLs.
	Endpoints []string
	etcd      *embed.Etcd
}

// Start starts a one-member etcd and stops it when the test ends.
func Start(t testing.TB) *Server {
	t.Helper()
	return StartWith(t, func(*embed.Config) {})
}

// StartWith starts a one-member etcd whose config set changes first (its
// limits: MaxTxnOps, MaxRequestBytes).
func StartWith(t testing.TB, set func(*embed.Config)) *Server {
	t.Helper()
	cfg := embed.NewConfig()
	cfg.Name = "test"
	cfg.Dir = t.TempDir()
	cfg.ZapLoggerBuilder = embed.NewZapLoggerBuilder(zap.NewNop())
	cfg.UnsafeNoFsync = true
	client, peer := freeURL(t), freeURL(t)
	cfg.ListenClientUrls, cfg.AdvertiseClientUrls = []url.URL{client}, []url.URL{client}
	cfg.ListenPeerUrls, cfg.AdvertisePeerUrls = []url.URL{peer}, []url.URL{peer}
	cfg.InitialCluster = fmt.Sprintf("%s=%s", cfg.Name, peer.String())
	set(cfg)
	e, err := embed.StartEtcd(cfg)
	if err != nil {
		t.Fatalf("etcdtest: starting etcd: %v", err)
	}
	t.Cleanup(e.Close)
	select {
	case <-e.Server.ReadyNotify():
	case <-time.After(30 * time.Second):
		t.Fatal("etcdtest: etcd not ready after 30s")
	}
	return &Server{Endpoints: []string{client.String()}, etcd: e}
}

// Client is a client of the server, closed when the test ends.
func (s *Server) Client(t testing.TB) *clientv3.Client {
	t.Helper()
	c, err := clientv3.New(clientv3.Config{Endpoints: s.Endpoints, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatalf("etcdtest: client: %v", err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// freeURL is an http URL on a loopback port free a moment ago.
func freeURL(t testing.TB) url.URL {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("etcdtest: %v", err)
	}
	defer l.Close()
	return url.URL{Scheme: "http", Host: l.Addr().String()}
}

// Proxy forwards TCP connections to an etcd member until it is cut: a
// network partition between one client and etcd.
type Proxy struct {
	// Endpoint is the URL clients dial instead of the member's.
	Endpoint string
	l        net.Listener
	to       string
	mu       sync.Mutex
	cut      bool
	conns    []net.Conn
}

// NewProxy forwards to the server's first endpoint until the test ends.
func (s *Server) NewProxy(t testing.TB) *Proxy {
	t.Helper()
	u, err := url.Parse(s.Endpoints[0])
	if err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &Proxy{Endpoint: "http://" + l.Addr().String(), l: l, to: u.Host}
	t.Cleanup(func() { l.Close(); p.Cut() })
	go p.serve()
	return p
}

func (p *Proxy) serve() {
	for {
		c, err := p.l.Accept()
		if err != nil {
			return
		}
		p.mu.Lock()
		if p.cut {
			p.mu.Unlock()
			c.Close()
			continue
		}
		up, err := net.Dial("tcp", p.to)
		if err != nil {
			p.mu.Unlock()
			c.Close()
			continue
		}
		p.conns = append(p.conns, c, up)
		p.mu.Unlock()
		go func() { io.Copy(up, c); up.Close() }()
		go func() { io.Copy(c, up); c.Close() }()
	}
}

// Cut drops every connection and refuses new ones, until Heal.
func (p *Proxy) Cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cut = true
	for _, c := range p.conns {
		c.Close()
	}
	p.conns = nil
}

// Heal lets connections through again.
func (p *Proxy) Heal() {
	p.mu.Lock()
	p.cut = false
	p.mu.Unlock()
}
