package gcp

import (
	"context"
	"errors"
	"fmt"
	"path"
	"strings"
	"sync"
	"time"

	compute "cloud.google.com/go/compute/apiv1"
	"cloud.google.com/go/compute/apiv1/computepb"
	"github.com/google/uuid"
	"github.com/hashicorp/go-hclog"
	"google.golang.org/api/iterator"
	"google.golang.org/api/option"

	"github.com/fleetcast/autoscaler/fleet"
	"github.com/fleetcast/autoscaler/providers"
)

// Options configure a Provider.
type Options struct {
	// Log receives the provider's logs; nil discards them.
	Log hclog.Logger
	// ClientOptions are given to every Compute Engine client, after the
	// pool's endpoint: credentials (Application Default Credentials when
	// none), or, in tests, an HTTP client and no authentication.
	ClientOptions []option.ClientOption
	// Now is the clock (time.Now if nil): when an instance not yet created
	// was first seen.
	Now func() time.Time
	// Fleet is the controller's fleet (controller.fleet): a group whose
	// template labels its instances with another is refused at start.
	Fleet string
}

// Provider drives GPU pools on Compute Engine managed instance groups,
// zonal or regional, through the Compute Engine REST API. It is safe for
// concurrent use.
type Provider struct {
	log   hclog.Logger
	opts  []option.ClientOption
	now   func() time.Time
	fleet string

	mu sync.Mutex
	// clients are by endpoint ("" for Google's).
	clients map[string]*clients
	// groups remember what each pool's group was last seen with, by pool.
	groups map[string]*groupMemo
	// unresolved are the pools whose facts Resolve could not read.
	unresolved map[string]bool
}

// clients are the Compute Engine clients for one endpoint.
type clients struct {
	zonal     *compute.InstanceGroupManagersClient
	regional  *compute.RegionInstanceGroupManagersClient
	instances *compute.InstancesClient
}

// groupMemo is what the provider remembers of a pool's group.
type groupMemo struct {
	// target is the target size last seen or set; -1 before the first read.
	// changes counts Fleetcast's own changes to it, so that a read that
	// raced with one is not taken for a change made outside.
	target  int32
	changes int
	// created are the instances' creation times, which never change; seen
	// is when an instance the group is still creating was first listed.
	created, seen map[string]time.Time
	// fleets are the instances' fleet labels, read with their creation
	// times.
	fleets map[string]string
}

// setTarget records a target size Fleetcast set (-1: read it again); p.mu
// must be held.
func (m *groupMemo) setTarget(t int32) {
	m.target = t
	m.changes++
}

// New makes a GCP provider.
func New(o Options) *Provider {
	if o.Log == nil {
		o.Log = hclog.NewNullLogger()
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	return &Provider{log: o.Log, opts: o.ClientOptions, now: o.Now, fleet: o.Fleet, clients: map[string]*clients{}, groups: map[string]*groupMemo{}, unresolved: map[string]bool{}}
}

// Close closes the provider's clients.
func (p *Provider) Close() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	var errs []error
	for _, c := range p.clients {
		errs = append(errs, c.zonal.Close(), c.regional.Close(), c.instances.Close())
	}
	p.clients = map[string]*clients{}
	return errors.Join(errs...)
}

// clientsFor returns the clients for the pool's endpoint, made once.
func (p *Provider) clientsFor(ctx context.Context, pool fleet.Pool) (*clients, error) {
	endpoint := SettingsOf(pool).Endpoint
	p.mu.Lock()
	defer p.mu.Unlock()
	if c, ok := p.clients[endpoint]; ok {
		return c, nil
	}
	opts := p.options(pool)
	zonal, err := compute.NewInstanceGroupManagersRESTClient(ctx, opts...)
	if err != nil {
		if noCredentials(err) {
			p.log.Debug("no Application Default Credentials", "error", err)
			return nil, &providers.NoCredentialsError{Cloud: "GCP", How: howToCredential, Err: err}
		}
		return nil, fmt.Errorf("pool %s: gcp: %w", pool.Name, err)
	}
	regional, err := compute.NewRegionInstanceGroupManagersRESTClient(ctx, opts...)
	if err != nil {
		return nil, errors.Join(fmt.Errorf("pool %s: gcp: %w", pool.Name, err), zonal.Close())
	}
	instances, err := compute.NewInstancesRESTClient(ctx, opts...)
	if err != nil {
		return nil, errors.Join(fmt.Errorf("pool %s: gcp: %w", pool.Name, err), zonal.Close(), regional.Close())
	}
	c := &clients{zonal: zonal, regional: regional, instances: instances}
	p.clients[endpoint] = c
	return c, nil
}

// howToCredential says how to give the controller Application Default
// Credentials.
const howToCredential = "set GOOGLE_APPLICATION_CREDENTIALS to a service account key file, or run gcloud auth application-default login, or run on a VM with a service account"

// noCredentials says err is the auth library's "could not find default
// credentials": none in GOOGLE_APPLICATION_CREDENTIALS, gcloud's
// well-known file or the metadata server (the library has no error value
// for it; TestNoCloudCredentials in cmd/autoscaler holds this to its
// words).
func noCredentials(err error) bool {
	return strings.Contains(err.Error(), "could not find default credentials")
}

// options are the client options for the pool: its endpoint, then the
// provider's own.
func (p *Provider) options(pool fleet.Pool) []option.ClientOption {
	var opts []option.ClientOption
	if e := SettingsOf(pool).Endpoint; e != "" {
		opts = append(opts, option.WithEndpoint(e))
	}
	return append(opts, p.opts...)
}

// memo returns the pool's group memo; p.mu must be held.
func (p *Provider) memoLocked(pool string) *groupMemo {
	m, ok := p.groups[pool]
	if !ok {
		m = &groupMemo{target: -1, created: map[string]time.Time{}, seen: map[string]time.Time{}, fleets: map[string]string{}}
		p.groups[pool] = m
	}
	return m
}

// group is a pool's managed instance group: where it is and how to reach it.
type group struct {
	pool fleet.Pool
	s    Settings
	c    *clients
}

// what names the group in errors and logs.
func (g group) what() string {
	if g.s.Region != "" {
		return fmt.Sprintf("regional managed instance group %q in %s", g.s.MIG, g.s.Region)
	}
	return fmt.Sprintf("managed instance group %q in %s", g.s.MIG, g.s.Zone)
}

// group is the pool's group, for a call on it: its facts checked first if
// they were not at start (checked).
func (p *Provider) group(ctx context.Context, pool fleet.Pool) (group, error) {
	if err := p.checked(ctx, pool); err != nil {
		return group{}, err
	}
	return p.groupOf(ctx, pool)
}

// groupOf is the pool's group, its facts checked or not.
func (p *Provider) groupOf(ctx context.Context, pool fleet.Pool) (group, error) {
	c, err := p.clientsFor(ctx, pool)
	return group{pool: pool, s: SettingsOf(pool), c: c}, err
}

// get reads the group.
func (g group) get(ctx context.Context) (*computepb.InstanceGroupManager, error) {
	var (
		m   *computepb.InstanceGroupManager
		err error
	)
	if g.s.Region != "" {
		m, err = g.c.regional.Get(ctx, &computepb.GetRegionInstanceGroupManagerRequest{Project: g.s.Project, Region: g.s.Region, InstanceGroupManager: g.s.MIG})
	} else {
		m, err = g.c.zonal.Get(ctx, &computepb.GetInstanceGroupManagerRequest{Project: g.s.Project, Zone: g.s.Zone, InstanceGroupManager: g.s.MIG})
	}
	if err != nil {
		return nil, classify(g.pool.Name, g.what(), "get", err)
	}
	return m, nil
}

// managed lists the group's managed instances, every page.
func (g group) managed(ctx context.Context) ([]*computepb.ManagedInstance, error) {
	var out []*computepb.ManagedInstance
	next := func() (*computepb.ManagedInstance, error) { return nil, nil }
	if g.s.Region != "" {
		it := g.c.regional.ListManagedInstances(ctx, &computepb.ListManagedInstancesRegionInstanceGroupManagersRequest{Project: g.s.Project, Region: g.s.Region, InstanceGroupManager: g.s.MIG})
		next = it.Next
	} else {
		it := g.c.zonal.ListManagedInstances(ctx, &computepb.ListManagedInstancesInstanceGroupManagersRequest{Project: g.s.Project, Zone: g.s.Zone, InstanceGroupManager: g.s.MIG})
		next = it.Next
	}
	for {
		mi, err := next()
		if errors.Is(err, iterator.Done) {
			return out, nil
		}
		if err != nil {
			return nil, classify(g.pool.Name, g.what(), "listManagedInstances", err)
		}
		out = append(out, mi)
	}
}

// resize sets the group's target size, with a request ID made from key,
// so that Compute Engine does the same request once however often it is
// sent, and waits for the operation. DONE means the resize is scheduled,
// not that the VMs exist: they are listed as being created meanwhile.
func (g group) resize(ctx context.Context, size int32, key string) error {
	id := requestID(g.pool.Name, key)
	call := func() (*compute.Operation, error) {
		if g.s.Region != "" {
			return g.c.regional.Resize(ctx, &computepb.ResizeRegionInstanceGroupManagerRequest{Project: g.s.Project, Region: g.s.Region, InstanceGroupManager: g.s.MIG, Size: size, RequestId: &id})
		}
		return g.c.zonal.Resize(ctx, &computepb.ResizeInstanceGroupManagerRequest{Project: g.s.Project, Zone: g.s.Zone, InstanceGroupManager: g.s.MIG, Size: size, RequestId: &id})
	}
	return g.operate(ctx, fmt.Sprintf("resize to %d", size), call)
}

// deleteInstances deletes the named instances (their URLs as the group
// lists them), lowering the target size by as many.
func (g group) deleteInstances(ctx context.Context, urls []string, key string) error {
	id := requestID(g.pool.Name, key)
	call := func() (*compute.Operation, error) {
		if g.s.Region != "" {
			return g.c.regional.DeleteInstances(ctx, &computepb.DeleteInstancesRegionInstanceGroupManagerRequest{Project: g.s.Project, Region: g.s.Region, InstanceGroupManager: g.s.MIG, RequestId: &id,
				RegionInstanceGroupManagersDeleteInstancesRequestResource: &computepb.RegionInstanceGroupManagersDeleteInstancesRequest{Instances: urls}})
		}
		return g.c.zonal.DeleteInstances(ctx, &computepb.DeleteInstancesInstanceGroupManagerRequest{Project: g.s.Project, Zone: g.s.Zone, InstanceGroupManager: g.s.MIG, RequestId: &id,
			InstanceGroupManagersDeleteInstancesRequestResource: &computepb.InstanceGroupManagersDeleteInstancesRequest{Instances: urls}})
	}
	return g.operate(ctx, fmt.Sprintf("deleteInstances %s", strings.Join(names(urls), ", ")), call)
}

// operate makes a mutating call, retried with backoff while the cloud
// throttles it (safe: the call carries its request ID), and waits for its
// operation; an operation that ends in errors is classified by them.
func (g group) operate(ctx context.Context, what string, call func() (*compute.Operation, error)) error {
	var (
		op  *compute.Operation
		err error
	)
	for attempt := 0; ; attempt++ {
		op, err = call()
		var te *providers.ThrottledError
		if err = classify(g.pool.Name, g.what(), what, err); !errors.As(err, &te) || attempt+1 >= throttleRetries {
			break
		}
		wait := min(max(te.RetryAfter, throttleBackoff<<attempt), throttleMaxWait)
		select {
		case <-ctx.Done():
			return errors.Join(err, ctx.Err())
		case <-time.After(wait):
		}
	}
	if err != nil {
		return err
	}
	if err := op.Wait(ctx); err != nil {
		return classify(g.pool.Name, g.what(), what+" (waiting for operation "+op.Name()+")", err)
	}
	if errs := op.Proto().GetError().GetErrors(); len(errs) > 0 {
		return classifyCodes(g.pool.Name, g.what(), what, errs)
	}
	return nil
}

// throttleRetries and throttleBackoff bound the retries of a throttled
// mutating call: 0.5 s, 1 s, 2 s, then the throttle is reported; a
// Retry-After is followed up to throttleMaxWait, so that one call never
// holds the controller's cycle for long.
const (
	throttleRetries = 4
	throttleBackoff = 500 * time.Millisecond
	throttleMaxWait = 10 * time.Second
)

// requestID is a UUID made from the pool and a launch's key: the same
// launch gets the same ID after a retry or a restart, and Compute Engine
// does it once. Other changes (terminations) are made with a fresh key
// each time (oneOff): Compute Engine ignores a request ID it has seen in
// the last hour or so, and a second, equal termination must not be
// ignored.
func requestID(pool, key string) string {
	return uuid.NewSHA1(requestNamespace, []byte(pool+"\x00"+key)).String()
}

// oneOff is a key for a change made once: the same ID across its
// throttle retries, a new one for every call.
func oneOff(what string) string { return what + ":" + uuid.NewString() }

// requestNamespace is the UUID namespace of Fleetcast's request IDs.
var requestNamespace = uuid.MustParse("6f1c2f4e-8e0b-4c36-9a57-3b1f0e8d2c11")

// names are the last path elements of instance URLs.
func names(urls []string) []string {
	out := make([]string, len(urls))
	for i, u := range urls {
		out[i] = path.Base(u)
	}
	return out
}

// zoneOf is the zone in an instance URL (.../zones/ZONE/instances/NAME).
func zoneOf(url string) string {
	parts := strings.Split(url, "/")
	for i := len(parts) - 2; i >= 0; i-- {
		if parts[i] == "zones" && i+1 < len(parts) {
			return parts[i+1]
		}
	}
	return ""
}
