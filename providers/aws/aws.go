// Package aws drives GPU pools on AWS with aws-sdk-go-v2: Auto Scaling
// groups (usually created by Terraform) and, for capacity reservations and
// spot, instances launched directly from a launch template.
//
// A pool's aws block names what is behind it:
//   - asg = "NAME", or asg_tag = "KEY=VALUE" to find the one group with that
//     tag: an Auto Scaling group. The provider only ever sets its desired
//     capacity (never min or max, which Terraform owns), terminates exactly
//     the instance a drain finished with, decrementing desired capacity,
//     and protects instances that hold work from the group's own scale-in.
//   - launch_template = "NAME" (or "lt-..."): instances run directly with
//     RunInstances, tagged at creation with fleetcast/managed=true and
//     fleetcast/pool=POOL, found again by those tags, and terminated only
//     when they carry them. capacity_reservation_id targets a capacity
//     reservation; a spot pool asks for spot.
//
// Credentials and region come the standard SDK way (environment, shared
// config, instance role); the pool's region, then the environment's, is
// used; endpoint points the clients elsewhere (tests, private endpoints).
// Errors are the providers package's typed errors (see classify).
package aws

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	awsconfig "github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/autoscaling"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/smithy-go"
	"github.com/aws/smithy-go/middleware"
	"github.com/hashicorp/go-hclog"

	"github.com/fleetcast/autoscaler/fleet"
	"github.com/fleetcast/autoscaler/providers"
)

// Tags the provider reads and writes.
const (
	// TagManaged marks instances (and groups) Fleetcast manages; its value
	// is "true". The IAM policy allows terminating only instances with it.
	TagManaged = "fleetcast/managed"
	// TagPool names the pool an instance belongs to.
	TagPool = "fleetcast/pool"
	// TagLaunchKey is the idempotency key of the launch that made an
	// instance.
	TagLaunchKey = "fleetcast/launch-key"
	// TagFleet names the fleet (the config's controller.fleet) an instance
	// was launched for: a controller reaps only its own fleet's instances.
	TagFleet = "fleetcast/fleet"
)

// RequestTimeout bounds each AWS request, retries apart.
const RequestTimeout = 30 * time.Second

// Options configure a Provider.
type Options struct {
	// Log receives warnings (desired capacity changed behind Fleetcast's
	// back, say); nil for none.
	Log hclog.Logger
	// Now is the clock; nil for time.Now.
	Now func() time.Time
	// MaxAttempts bounds the SDK's retries of throttled and transient
	// calls (with its exponential backoff); 0 for 5.
	MaxAttempts int
	// APIOptions are added to every client's middleware stack (tests use
	// them to inject what a local server cannot produce).
	APIOptions []func(*middleware.Stack) error
	// LoadOptions are added to the SDK's default config loading.
	LoadOptions []func(*awsconfig.LoadOptions) error
}

// Provider drives AWS pools. It is safe for concurrent use.
type Provider struct {
	opts Options
	log  hclog.Logger
	now  func() time.Time

	mu      sync.Mutex
	clients map[string]*clients // by region and endpoint
	groups  map[string]*groupMemo
}

// clients are one region's (and endpoint's) SDK clients.
type clients struct {
	asg *autoscaling.Client
	ec2 *ec2.Client
	// endpoint is the Auto Scaling client's endpoint when it is not AWS's
	// own (a pool's endpoint, AWS_ENDPOINT_URL); "" on AWS.
	endpoint string
	// noRefreshes is set once the endpoint has answered that it does not
	// implement DescribeInstanceRefreshes (see busy); guarded by
	// Provider.mu.
	noRefreshes bool
}

// groupMemo is what the provider remembers of a pool's Auto Scaling group
// between calls.
type groupMemo struct {
	// name is the group's name, once found (asg_tag pools).
	name string
	// desired is the desired capacity last set or read; -1 before any.
	desired int32
	// shortSince is when the group was first seen with fewer instances
	// than its desired capacity (zero when it is not).
	shortSince time.Time
	// raises are Fleetcast's own raises of desired capacity not yet
	// filled, oldest first: the capacity each owes is aged from its own
	// raise.
	raises []raise
	// oldestOwed is when the oldest capacity the group still owes was
	// asked for (zero when it owes none).
	oldestOwed time.Time
}

// raise is a raise of desired capacity by n, at a time.
type raise struct {
	at time.Time
	n  int32
}

// Interface checks.
var (
	_ providers.Provider  = (*Provider)(nil)
	_ providers.Protector = (*Provider)(nil)
	_ providers.Reaper    = (*Provider)(nil)
)

// New makes a Provider. Clients are made per region when first needed.
func New(opts Options) *Provider {
	p := &Provider{opts: opts, log: opts.Log, now: opts.Now, clients: map[string]*clients{}, groups: map[string]*groupMemo{}}
	if p.log == nil {
		p.log = hclog.NewNullLogger()
	}
	if p.now == nil {
		p.now = time.Now
	}
	if p.opts.MaxAttempts == 0 {
		p.opts.MaxAttempts = 5
	}
	return p
}

// client returns the SDK clients for a pool's region and endpoint.
func (p *Provider) client(ctx context.Context, pool fleet.Pool) (*clients, error) {
	endpoint := SettingsOf(pool).Endpoint
	key := pool.Region + "|" + endpoint
	p.mu.Lock()
	defer p.mu.Unlock()
	if c := p.clients[key]; c != nil {
		return c, nil
	}
	// Every request is bounded, so one hung answer cannot stall a cycle.
	load := []func(*awsconfig.LoadOptions) error{awsconfig.WithHTTPClient(awshttp.NewBuildableClient().WithTimeout(RequestTimeout))}
	load = append(load, p.opts.LoadOptions...)
	if pool.Region != "" {
		load = append(load, awsconfig.WithRegion(pool.Region))
	}
	load = append(load, awsconfig.WithRetryer(func() aws.Retryer {
		return retry.NewStandard(func(o *retry.StandardOptions) {
			o.MaxAttempts = p.opts.MaxAttempts
			// A capacity or quota refusal comes back as a server error
			// (InsufficientInstanceCapacity is a 500); retrying it only
			// delays the fallback to another pool.
			o.Retryables = append([]retry.IsErrorRetryable{retry.IsErrorRetryableFunc(func(err error) aws.Ternary {
				var ae smithy.APIError
				if errors.As(err, &ae) && (capacityCodes[ae.ErrorCode()] || quotaCodes[ae.ErrorCode()]) {
					return aws.FalseTernary
				}
				return aws.UnknownTernary
			})}, o.Retryables...)
		})
	}))
	cfg, err := awsconfig.LoadDefaultConfig(ctx, load...)
	if err != nil {
		return nil, fmt.Errorf("pool %s: loading the AWS config: %w", pool.Name, err)
	}
	if cfg.Region == "" {
		return nil, fmt.Errorf("pool %s: no AWS region: set the pool's region or AWS_REGION", pool.Name)
	}
	if err := p.checkCredentials(ctx, cfg); err != nil {
		return nil, err
	}
	cfg.APIOptions = append(cfg.APIOptions, p.opts.APIOptions...)
	asg := autoscaling.NewFromConfig(cfg, func(o *autoscaling.Options) {
		if endpoint != "" {
			o.BaseEndpoint = aws.String(endpoint)
		}
	})
	c := &clients{
		asg: asg,
		ec2: ec2.NewFromConfig(cfg, func(o *ec2.Options) {
			if endpoint != "" {
				o.BaseEndpoint = aws.String(endpoint)
			}
		}),
		// The client's own: a pool's endpoint, or AWS_ENDPOINT_URL and
		// its kin as the SDK read them.
		endpoint: aws.ToString(asg.Options().BaseEndpoint),
	}
	p.clients[key] = c
	return c, nil
}

// memoLocked returns what the provider remembers of a pool's group; p.mu
// is held.
func (p *Provider) memoLocked(pool string) *groupMemo {
	m := p.groups[pool]
	if m == nil {
		m = &groupMemo{desired: -1}
		p.groups[pool] = m
	}
	return m
}

// isASG reports whether the pool is an Auto Scaling group (else direct
// EC2 instances from a launch template).
func isASG(pool fleet.Pool) bool {
	s := SettingsOf(pool)
	return s.ASG != "" || s.ASGTag != ""
}

// Describe returns the pool's group: an Auto Scaling group's desired
// capacity and instances, or the pool's tagged EC2 instances.
func (p *Provider) Describe(ctx context.Context, pool fleet.Pool) (providers.Group, error) {
	c, err := p.client(ctx, pool)
	if err != nil {
		return providers.Group{}, err
	}
	if isASG(pool) {
		return p.describeASG(ctx, c, pool)
	}
	return p.describeEC2(ctx, c, pool)
}

// Launch grows the pool to req.Target: an Auto Scaling group's desired
// capacity is raised (within its own max); direct pools run the missing
// instances with req.Key as the client token.
func (p *Provider) Launch(ctx context.Context, pool fleet.Pool, req providers.LaunchRequest) error {
	c, err := p.client(ctx, pool)
	if err != nil {
		return err
	}
	if isASG(pool) {
		return p.launchASG(ctx, c, pool, req)
	}
	return p.launchEC2(ctx, c, pool, req)
}

// Terminate removes exactly the named instances, lowering the group's
// desired capacity by as many.
func (p *Provider) Terminate(ctx context.Context, pool fleet.Pool, ids []string) error {
	c, err := p.client(ctx, pool)
	if err != nil {
		return err
	}
	if isASG(pool) {
		return p.terminateASG(ctx, c, pool, ids)
	}
	return p.terminateEC2(ctx, c, pool, ids)
}

// SetProtected protects instances of an Auto Scaling group from the
// group's own scale-in, or lifts the protection. Direct pools have no
// scale-in of their own: nothing to do.
func (p *Provider) SetProtected(ctx context.Context, pool fleet.Pool, ids []string, protected bool) error {
	if !isASG(pool) || len(ids) == 0 {
		return nil
	}
	c, err := p.client(ctx, pool)
	if err != nil {
		return err
	}
	name, err := p.groupName(ctx, c, pool)
	if err != nil {
		return err
	}
	real := slices.DeleteFunc(slices.Clone(ids), isPlaceholder)
	for start := 0; start < len(real); start += 50 { // the API takes 50 at a time
		batch := real[start:min(start+50, len(real))]
		_, err := c.asg.SetInstanceProtection(ctx, &autoscaling.SetInstanceProtectionInput{
			AutoScalingGroupName: aws.String(name), InstanceIds: batch, ProtectedFromScaleIn: aws.Bool(protected)})
		if err != nil {
			return classify(pool.Name, "SetInstanceProtection "+strings.Join(batch, ","), err)
		}
	}
	return nil
}
