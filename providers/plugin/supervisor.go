package plugin

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/fleetcast/autoscaler/fleet"
	"github.com/fleetcast/autoscaler/providers"
)

// Restart backoff: a plugin that exited is started again after 1 s,
// doubling to a minute while it keeps failing to start or exiting.
const (
	restartInitial = time.Second
	restartMax     = time.Minute
)

// Supervisor keeps one plugin running for the controller, as a
// providers.Provider: calls go to the plugin's process, and a process
// that exited (a crash) is started again, with backoff, and configured
// again with its pools. While it is down every call fails, naming it, so
// the controller leaves its pools alone (unobserved, as for an unreadable
// cloud) until it answers. It is safe for concurrent use.
type Supervisor struct {
	spec  Spec
	pools []fleet.Pool
	fleet string
	// base is the logger given, for Start (which names it for the
	// plugin); log is named for the plugin.
	base, log hclog.Logger
	now       func() time.Time
	// info is what the plugin last said of itself.
	info struct {
		name, version string
		protocol      int
	}

	mu       sync.Mutex
	client   *Client
	starting bool // a process is being started (the lock not held)
	restarts int
	failures int
	nextTry  time.Time
	lastErr  error
	closed   bool
}

// Supervise starts the plugin and configures it with its pools; a plugin
// that does not start, or finds its config wrong, is an error (its
// diagnostics are returned with a nil error, for the caller to place in
// the config file).
func Supervise(ctx context.Context, spec Spec, pools []fleet.Pool, fleetName string, log hclog.Logger) (*Supervisor, []Diagnostic, error) {
	if log == nil {
		log = hclog.NewNullLogger()
	}
	s := &Supervisor{spec: spec, pools: pools, fleet: fleetName, base: log, log: log.Named(spec.Name), now: time.Now}
	c, diags, err := s.start(ctx)
	if err != nil || len(diags) > 0 {
		return nil, diags, err
	}
	s.client = c
	s.noteInfo(c)
	return s, nil, nil
}

// start starts and configures a process of the plugin.
func (s *Supervisor) start(ctx context.Context) (*Client, []Diagnostic, error) {
	c, err := Start(ctx, s.spec, s.base)
	if err != nil {
		return nil, nil, err
	}
	diags, err := c.Configure(ctx, s.pools, s.fleet)
	if err != nil || len(diags) > 0 {
		c.Close()
		return nil, diags, err
	}
	return c, nil, nil
}

// ErrDown is the error of a call while the plugin is down.
var ErrDown = errors.New("the plugin is down")

// current is the running plugin, started again if it exited and its
// backoff has passed; an error naming why not otherwise. The lock is not
// held while a process starts (Status answers meanwhile), and one start
// at a time is made: calls in the meantime are told it is starting.
func (s *Supervisor) current(ctx context.Context) (*Client, error) {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil, fmt.Errorf("plugin %s: %w (closed)", s.spec.Name, ErrDown)
	}
	if s.client != nil && !s.client.Exited() {
		c := s.client
		s.mu.Unlock()
		return c, nil
	}
	if s.client != nil {
		// Closed without the lock held (it may take StopTimeout): Status
		// answers meanwhile.
		go s.client.Close()
		s.client = nil
		s.failures++
		s.nextTry = s.now().Add(backoff(s.failures))
		s.lastErr = errors.New("its process exited")
		s.log.Error("plugin exited; starting it again", "after", backoff(s.failures))
	}
	if s.starting {
		s.mu.Unlock()
		return nil, fmt.Errorf("plugin %s: %w (starting it again)", s.spec.Name, ErrDown)
	}
	if now := s.now(); now.Before(s.nextTry) {
		defer s.mu.Unlock()
		return nil, fmt.Errorf("plugin %s: %w (%v; starting it again in %s)", s.spec.Name, ErrDown, s.lastErr, s.nextTry.Sub(now).Round(time.Second))
	}
	s.starting = true
	s.mu.Unlock()

	// Started on the caller's values but not its cancellation: a caller
	// that gives up (a bootstrap request cut off) is no failed start.
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), StartTimeout+s.callTimeout())
	defer cancel()
	c, diags, err := s.start(sctx)
	if err == nil && len(diags) > 0 {
		err = fmt.Errorf("its config is refused now: %s: %s", diags[0].Path, diags[0].Summary)
	}

	s.mu.Lock()
	defer s.mu.Unlock()
	s.starting = false
	if s.closed { // closed while it started
		if c != nil {
			c.Close()
		}
		return nil, fmt.Errorf("plugin %s: %w (closed)", s.spec.Name, ErrDown)
	}
	if err != nil {
		s.failures++
		s.nextTry, s.lastErr = s.now().Add(backoff(s.failures)), err
		s.log.Error("plugin did not start", "error", err, "next", backoff(s.failures))
		return nil, fmt.Errorf("plugin %s: %w (%v)", s.spec.Name, ErrDown, err)
	}
	s.log.Info("plugin started again", "after_failures", s.failures)
	s.client, s.failures = c, 0
	s.restarts++
	s.noteInfo(c)
	return c, nil
}

// callTimeout is the deadline of the plugin's calls.
func (s *Supervisor) callTimeout() time.Duration {
	if s.spec.CallTimeout > 0 {
		return s.spec.CallTimeout
	}
	return CallTimeout
}

// running is the plugin's process if it runs now; it starts none.
func (s *Supervisor) running() (*Client, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed || s.client == nil || s.client.Exited() {
		return nil, fmt.Errorf("plugin %s: %w", s.spec.Name, ErrDown)
	}
	return s.client, nil
}

// noteInfo keeps what a started plugin says of itself.
func (s *Supervisor) noteInfo(c *Client) {
	s.info.name, s.info.version, _, _ = c.Info()
	s.info.protocol = c.Protocol()
}

func backoff(failures int) time.Duration {
	d := restartInitial
	for i := 1; i < failures && d < restartMax; i++ {
		d *= 2
	}
	return min(d, restartMax)
}

// Status is a plugin's health, for `autoscaler plugins` and the
// controller's GET /v1/plugins.
type Status struct {
	// Name is the plugin's name in the config; Path its executable.
	Name string `json:"name"`
	Path string `json:"path"`
	// Plugin and Version are what the plugin says it is, Protocol the
	// protocol version it speaks (all of the process running, or last run).
	Plugin   string `json:"plugin,omitempty"`
	Version  string `json:"version,omitempty"`
	Protocol int    `json:"protocol,omitempty"`
	// Pools are the pools it drives.
	Pools []string `json:"pools"`
	// Healthy says its process runs; otherwise Error says why not, and
	// NextStart when it is started again.
	Healthy   bool       `json:"healthy"`
	Error     string     `json:"error,omitempty"`
	NextStart *time.Time `json:"next_start,omitempty"`
	// Restarts counts the times it was started again after it exited;
	// Failures the failed starts and exits in a row now.
	Restarts int `json:"restarts"`
	Failures int `json:"failures"`
}

// Status is the plugin's health now; it starts nothing.
func (s *Supervisor) Status() Status {
	s.mu.Lock()
	defer s.mu.Unlock()
	st := Status{Name: s.spec.Name, Path: s.spec.Path, Pools: []string{}, Restarts: s.restarts, Failures: s.failures}
	for _, p := range s.pools {
		st.Pools = append(st.Pools, p.Name)
	}
	if s.info.name != "" {
		st.Plugin, st.Version, st.Protocol = s.info.name, s.info.version, s.info.protocol
	}
	switch {
	case s.closed:
		st.Error = "stopped"
	case s.starting:
		st.Error = "starting it again"
	case s.client != nil && !s.client.Exited():
		st.Healthy = true
	case s.client != nil:
		st.Error = "its process exited; it is started again at the next call"
	default:
		st.Error = fmt.Sprint(s.lastErr)
		if !s.nextTry.IsZero() {
			next := s.nextTry
			st.NextStart = &next
		}
	}
	return st
}

// Close stops the plugin for good.
func (s *Supervisor) Close() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.closed = true
	if s.client != nil {
		s.client.Close()
		s.client = nil
	}
}

// Describe is the running plugin's Describe.
func (s *Supervisor) Describe(ctx context.Context, pool fleet.Pool) (providers.Group, error) {
	c, err := s.current(ctx)
	if err != nil {
		return providers.Group{}, fmt.Errorf("pool %s: %w", pool.Name, err)
	}
	return c.Describe(ctx, pool)
}

// Launch is the running plugin's Launch.
func (s *Supervisor) Launch(ctx context.Context, pool fleet.Pool, req providers.LaunchRequest) error {
	c, err := s.current(ctx)
	if err != nil {
		return fmt.Errorf("pool %s: %w", pool.Name, err)
	}
	return c.Launch(ctx, pool, req)
}

// Terminate is the running plugin's Terminate.
func (s *Supervisor) Terminate(ctx context.Context, pool fleet.Pool, ids []string) error {
	c, err := s.current(ctx)
	if err != nil {
		return fmt.Errorf("pool %s: %w", pool.Name, err)
	}
	return c.Terminate(ctx, pool, ids)
}

// SetProtected is the running plugin's SetProtected.
func (s *Supervisor) SetProtected(ctx context.Context, pool fleet.Pool, ids []string, protected bool) error {
	c, err := s.current(ctx)
	if err != nil {
		return fmt.Errorf("pool %s: %w", pool.Name, err)
	}
	return c.SetProtected(ctx, pool, ids, protected)
}

// Orphans is the running plugin's Orphans.
func (s *Supervisor) Orphans(ctx context.Context, fleetName string, pools []fleet.Pool) ([]providers.Orphan, error) {
	c, err := s.current(ctx)
	if err != nil {
		return nil, err
	}
	return c.Orphans(ctx, fleetName, pools)
}

// TerminateOrphan is the running plugin's TerminateOrphan.
func (s *Supervisor) TerminateOrphan(ctx context.Context, fleetName string, o providers.Orphan) error {
	c, err := s.current(ctx)
	if err != nil {
		return err
	}
	return c.TerminateOrphan(ctx, fleetName, o)
}

// VerifyIdentity is the running plugin's VerifyIdentity. It never starts
// the plugin (a node's bootstrap request is no reason to): while it is
// down, the node is told to try again.
func (s *Supervisor) VerifyIdentity(ctx context.Context, pool fleet.Pool, node, document string) error {
	c, err := s.running()
	if err != nil {
		return fmt.Errorf("pool %s: %w", pool.Name, err)
	}
	return c.VerifyIdentity(ctx, pool, node, document)
}

var (
	_ providers.Provider         = (*Supervisor)(nil)
	_ providers.Protector        = (*Supervisor)(nil)
	_ providers.Reaper           = (*Supervisor)(nil)
	_ providers.IdentityVerifier = (*Supervisor)(nil)
	_ providers.IdentityVerifier = (*Set)(nil)
)

// Set drives the pools of several plugins, each pool through the plugin
// it names (Settings.Plugin), as one providers.Provider. The zero Set
// has none; Add adds one.
type Set struct {
	plugins map[string]*Supervisor
}

// Add adds a running plugin, by its name.
func (s *Set) Add(name string, sup *Supervisor) {
	if s.plugins == nil {
		s.plugins = map[string]*Supervisor{}
	}
	s.plugins[name] = sup
}

func (s *Set) of(pool fleet.Pool) (*Supervisor, error) {
	sup, ok := s.plugins[SettingsOf(pool).Plugin]
	if !ok {
		return nil, fmt.Errorf("pool %s: no plugin %q is running", pool.Name, SettingsOf(pool).Plugin)
	}
	return sup, nil
}

// Describe is the pool's plugin's Describe.
func (s *Set) Describe(ctx context.Context, pool fleet.Pool) (providers.Group, error) {
	sup, err := s.of(pool)
	if err != nil {
		return providers.Group{}, err
	}
	return sup.Describe(ctx, pool)
}

// Launch is the pool's plugin's Launch.
func (s *Set) Launch(ctx context.Context, pool fleet.Pool, req providers.LaunchRequest) error {
	sup, err := s.of(pool)
	if err != nil {
		return err
	}
	return sup.Launch(ctx, pool, req)
}

// Terminate is the pool's plugin's Terminate.
func (s *Set) Terminate(ctx context.Context, pool fleet.Pool, ids []string) error {
	sup, err := s.of(pool)
	if err != nil {
		return err
	}
	return sup.Terminate(ctx, pool, ids)
}

// SetProtected is the pool's plugin's SetProtected.
func (s *Set) SetProtected(ctx context.Context, pool fleet.Pool, ids []string, protected bool) error {
	sup, err := s.of(pool)
	if err != nil {
		return err
	}
	return sup.SetProtected(ctx, pool, ids, protected)
}

// VerifyIdentity is the pool's plugin's VerifyIdentity.
func (s *Set) VerifyIdentity(ctx context.Context, pool fleet.Pool, node, document string) error {
	sup, err := s.of(pool)
	if err != nil {
		return err
	}
	return sup.VerifyIdentity(ctx, pool, node, document)
}

// Orphans are each plugin's orphans among its own pools.
func (s *Set) Orphans(ctx context.Context, fleetName string, pools []fleet.Pool) ([]providers.Orphan, error) {
	by := map[string][]fleet.Pool{}
	for _, p := range pools {
		by[SettingsOf(p).Plugin] = append(by[SettingsOf(p).Plugin], p)
	}
	var out []providers.Orphan
	var errs []error
	for name, ps := range by {
		if sup, ok := s.plugins[name]; ok {
			os, err := sup.Orphans(ctx, fleetName, ps)
			out, errs = append(out, os...), append(errs, err)
		}
	}
	return out, errors.Join(errs...)
}

// TerminateOrphan is the plugin's of the pool it was found through.
func (s *Set) TerminateOrphan(ctx context.Context, fleetName string, o providers.Orphan) error {
	sup, err := s.of(o.Via)
	if err != nil {
		return err
	}
	return sup.TerminateOrphan(ctx, fleetName, o)
}

// Status is each plugin's health, by name.
func (s *Set) Status() []Status {
	out := []Status{}
	for _, sup := range s.plugins {
		out = append(out, sup.Status())
	}
	slices.SortFunc(out, func(a, b Status) int { return strings.Compare(a.Name, b.Name) })
	return out
}

// Close stops every plugin.
func (s *Set) Close() {
	for _, sup := range s.plugins {
		sup.Close()
	}
}
