package aws

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awsconfig "github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/autoscaling"
	astypes "github.com/aws/aws-sdk-go-v2/service/autoscaling/types"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/smithy-go/middleware"
	"github.com/hashicorp/go-hclog"

	"github.com/fleetcast/autoscaler/fleet"
	"github.com/fleetcast/autoscaler/internal/mototest"
	"github.com/fleetcast/autoscaler/providers"
)

// clock is a test clock.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) add(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

// env is moto behind the recording proxy, with a provider pointed at it.
type env struct {
	proxy *mototest.Proxy
	fix   *fixture
	clock *clock
	log   *bytes.Buffer
	p     *Provider
}

func newEnv(t *testing.T, apiOptions ...func(*middleware.Stack) error) *env {
	t.Helper()
	// The provider's clock runs an hour ahead of moto's, so launch times
	// read from EC2 differ from "now".
	e := &env{proxy: mototest.NewProxy(t), clock: &clock{t: time.Now().UTC().Add(time.Hour)}, log: &bytes.Buffer{}}
	e.fix = newFixture(t, motoURL(t))
	e.p = e.provider(apiOptions...)
	return e
}

// provider makes a fresh provider, as a restarted controller would.
func (e *env) provider(apiOptions ...func(*middleware.Stack) error) *Provider {
	return New(Options{Now: e.clock.now, MaxAttempts: 3, APIOptions: apiOptions,
		Log:         hclog.New(&hclog.LoggerOptions{Output: e.log, Level: hclog.Warn}),
		LoadOptions: []func(*awsconfig.LoadOptions) error{testCreds}})
}

func (e *env) asgPool(name, group string, max int) fleet.Pool {
	return fleet.Pool{Name: name, Provider: "aws", Region: region, InstanceType: "p4d.24xlarge", GPUsPerNode: 8,
		Capacity: fleet.OnDemand, PricePerHour: 32.77, LeadTime: 9 * time.Minute, ProvisionTimeout: 27 * time.Minute, Max: max,
		Settings: Settings{ASG: group, Endpoint: e.proxy.URL}}
}

func (e *env) ec2Pool(name, template string, c fleet.CapacityType) fleet.Pool {
	return fleet.Pool{Name: name, Provider: "aws", Region: region, InstanceType: "p4d.24xlarge", GPUsPerNode: 8,
		Capacity: c, PricePerHour: 12.5, LeadTime: 8 * time.Minute, ProvisionTimeout: 24 * time.Minute, Max: 8,
		Settings: Settings{LaunchTemplate: template, Endpoint: e.proxy.URL}}
}

// with returns pool with its settings changed by change.
func with(pool fleet.Pool, change func(*Settings)) fleet.Pool {
	s := SettingsOf(pool)
	change(&s)
	pool.Settings = s
	return pool
}

// group reads a group straight from moto.
func (e *env) group(t *testing.T, name string) astypes.AutoScalingGroup {
	t.Helper()
	out, err := e.fix.asg.DescribeAutoScalingGroups(context.Background(), &autoscaling.DescribeAutoScalingGroupsInput{AutoScalingGroupNames: []string{name}})
	if err != nil || len(out.AutoScalingGroups) != 1 {
		t.Fatalf("group %s: %v, %v", name, out, err)
	}
	return out.AutoScalingGroups[0]
}

func inService(g astypes.AutoScalingGroup) []string {
	var ids []string
	for _, in := range g.Instances {
		if instanceState(in.LifecycleState) != providers.InstanceTerminating {
			ids = append(ids, aws.ToString(in.InstanceId))
		}
	}
	return ids
}

// TestASGScaleOutDrainProtect drives a Terraform-made group: scale out by
// desired capacity within the group's own max, never touching min or max;
// protect an instance holding work and lift it; terminate exactly the
// drained instance with the desired capacity decremented; a retried or
// restarted launch does not launch again.
func TestASGScaleOutDrainProtect(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	lt := e.fix.template(t, "gpu-a100", "p4d.24xlarge")
	e.fix.group(t, "fleetcast-ondemand-a100", lt, "aws-ondemand-a100", 0, 4, 1)
	e.fix.group(t, "other", lt, "other", 0, 2, 1)
	pool := e.asgPool("aws-ondemand-a100", "fleetcast-ondemand-a100", 4)

	g, err := e.p.Describe(ctx, pool)
	if err != nil || g.Target != 1 || len(g.Instances) != 1 || g.Instances[0].State != providers.InstanceRunning || g.Min != 0 {
		t.Fatalf("Describe = %+v, %v; want one running instance", g, err)
	}
	if at := g.Instances[0].LaunchedAt; at.IsZero() || !at.Before(e.clock.now().Add(-30*time.Minute)) {
		t.Fatalf("launch time %v: want EC2's, not the provider's now (%v)", at, e.clock.now())
	}
	if err := e.p.Launch(ctx, pool, providers.LaunchRequest{Count: 2, Target: 3, Key: "k1"}); err != nil {
		t.Fatal(err)
	}
	grp := e.group(t, "fleetcast-ondemand-a100")
	if aws.ToInt32(grp.DesiredCapacity) != 3 || len(inService(grp)) != 3 || aws.ToInt32(grp.MinSize) != 0 || aws.ToInt32(grp.MaxSize) != 4 {
		t.Fatalf("after the launch: desired %d, %d instances, min %d, max %d; want 3, 3, 0, 4",
			aws.ToInt32(grp.DesiredCapacity), len(inService(grp)), aws.ToInt32(grp.MinSize), aws.ToInt32(grp.MaxSize))
	}
	if e.proxy.Count("UpdateAutoScalingGroup") != 0 {
		t.Fatal("min or max changed: UpdateAutoScalingGroup was called")
	}
	// The same request again, and again from a restarted controller:
	// nothing more is launched.
	sets := e.proxy.Count("SetDesiredCapacity")
	for _, p := range []*Provider{e.p, e.provider()} {
		if err := p.Launch(ctx, pool, providers.LaunchRequest{Count: 2, Target: 3, Key: "k1"}); err != nil {
			t.Fatal(err)
		}
	}
	if n := e.proxy.Count("SetDesiredCapacity"); n != sets || aws.ToInt32(e.group(t, "fleetcast-ondemand-a100").DesiredCapacity) != 3 {
		t.Fatalf("a repeated launch set desired capacity again (%d calls, was %d)", n, sets)
	}

	ids := inService(e.group(t, "fleetcast-ondemand-a100"))
	if err := e.p.SetProtected(ctx, pool, ids[:1], true); err != nil {
		t.Fatal(err)
	}
	g, _ = e.p.Describe(ctx, pool)
	for _, in := range g.Instances {
		if in.Protected != (in.ID == ids[0]) {
			t.Fatalf("instance %s protected = %v after protecting %s", in.ID, in.Protected, ids[0])
		}
	}
	if err := e.p.SetProtected(ctx, pool, ids[:1], false); err != nil {
		t.Fatal(err)
	}
	if g, _ = e.p.Describe(ctx, pool); g.Instances[0].Protected || g.Instances[1].Protected || g.Instances[2].Protected {
		t.Fatalf("protection not lifted: %+v", g.Instances)
	}

	if err := e.p.Terminate(ctx, pool, []string{ids[1]}); err != nil {
		t.Fatal(err)
	}
	c, _ := e.proxy.Last("TerminateInstanceInAutoScalingGroup")
	if c.Form.Get("InstanceId") != ids[1] || c.Form.Get("ShouldDecrementDesiredCapacity") != "true" {
		t.Fatalf("terminate request = %v", c.Form)
	}
	grp = e.group(t, "fleetcast-ondemand-a100")
	left := inService(grp)
	if aws.ToInt32(grp.DesiredCapacity) != 2 || len(left) != 2 || strings.Contains(strings.Join(left, ","), ids[1]) {
		t.Fatalf("after terminating %s: desired %d, instances %v", ids[1], aws.ToInt32(grp.DesiredCapacity), left)
	}

	// An instance of another group is not touched, whatever its ID.
	other := inService(e.group(t, "other"))
	var nf *providers.NotFoundError
	if err := e.p.Terminate(ctx, pool, other); !errors.As(err, &nf) {
		t.Fatalf("terminating another group's instance: %v; want NotFoundError", err)
	}
	if got := inService(e.group(t, "other")); len(got) != 1 {
		t.Fatalf("the other group lost its instance: %v", got)
	}

	// Above the group's own max: raised to max, and a quota error says why.
	var qe *providers.QuotaExceededError
	if err := e.p.Launch(ctx, pool, providers.LaunchRequest{Count: 7, Target: 9, Key: "k2"}); !errors.As(err, &qe) || !strings.Contains(err.Error(), "max_size") {
		t.Fatalf("launch above max: %v; want a QuotaExceededError naming max_size", err)
	}
	if d := aws.ToInt32(e.group(t, "fleetcast-ondemand-a100").DesiredCapacity); d != 4 {
		t.Fatalf("desired %d after a launch above max; want the max, 4", d)
	}
}

// TestASGFoundByTag finds a group by tag: exactly one must match.
func TestASGFoundByTag(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	lt := e.fix.template(t, "gpu", "p4d.24xlarge")
	e.fix.group(t, "burst-1", lt, "train-burst", 0, 4, 2)
	pool := e.asgPool("train-burst", "", 4)
	pool = with(pool, func(s *Settings) { s.ASG, s.ASGTag = "", TagPool+"=train-burst" })
	if g, err := e.p.Describe(ctx, pool); err != nil || g.Target != 2 {
		t.Fatalf("Describe by tag = %+v, %v", g, err)
	}
	var nf *providers.NotFoundError
	missing := with(pool, func(s *Settings) { s.ASGTag = TagPool + "=nothing" })
	if _, err := e.p.Describe(ctx, missing); !errors.As(err, &nf) || !strings.Contains(err.Error(), "tagged fleetcast/pool=nothing") {
		t.Fatalf("no group with the tag: %v", err)
	}
	e.fix.group(t, "burst-2", lt, "train-burst", 0, 4, 0)
	if _, err := e.provider().Describe(ctx, pool); err == nil || !strings.Contains(err.Error(), "matches 2 groups (burst-1, burst-2)") {
		t.Fatalf("two groups with the tag: %v", err)
	}
}

// TestInstanceRefreshBlocksScaling: while an instance refresh runs the
// group is not scaled, and the error backs the pool off.
func TestInstanceRefreshBlocksScaling(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	e.fix.group(t, "g", e.fix.template(t, "gpu", "p4d.24xlarge"), "p", 0, 4, 1)
	pool := e.asgPool("p", "g", 4)
	e.proxy.SetRefresh("g", "InProgress")
	var busy *providers.GroupBusyError
	err := e.p.Launch(ctx, pool, providers.LaunchRequest{Count: 1, Target: 2, Key: "k"})
	if !errors.As(err, &busy) || !providers.ShouldBackOff(err) || !strings.Contains(err.Error(), "instance refresh refresh-1 of g is InProgress") {
		t.Fatalf("launch during a refresh: %v", err)
	}
	if d := aws.ToInt32(e.group(t, "g").DesiredCapacity); d != 1 {
		t.Fatalf("desired %d during a refresh; want 1", d)
	}
	e.proxy.SetRefresh("g", "Successful")
	if err := e.p.Launch(ctx, pool, providers.LaunchRequest{Count: 1, Target: 2, Key: "k"}); err != nil {
		t.Fatal(err)
	}
	if d := aws.ToInt32(e.group(t, "g").DesiredCapacity); d != 2 {
		t.Fatalf("desired %d after the refresh; want 2", d)
	}
}

// TestDesiredChangedBehindOurBack: a Terraform apply that sets desired
// capacity is followed and reported, not fought.
func TestDesiredChangedBehindOurBack(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	e.fix.group(t, "g", e.fix.template(t, "gpu", "p4d.24xlarge"), "p", 0, 4, 1)
	pool := e.asgPool("p", "g", 4)
	if _, err := e.p.Describe(ctx, pool); err != nil {
		t.Fatal(err)
	}
	if _, err := e.fix.asg.SetDesiredCapacity(ctx, &autoscaling.SetDesiredCapacityInput{AutoScalingGroupName: aws.String("g"), DesiredCapacity: aws.Int32(3)}); err != nil {
		t.Fatal(err)
	}
	g, err := e.p.Describe(ctx, pool)
	if err != nil || g.Target != 3 {
		t.Fatalf("Describe = %+v, %v; want the group's own desired, 3", g, err)
	}
	if !strings.Contains(e.log.String(), "desired capacity changed outside Fleetcast") || !strings.Contains(e.log.String(), "ignore_changes") {
		t.Fatalf("log = %q; want a warning saying desired changed outside Fleetcast", e.log.String())
	}
	if n := e.proxy.Count("SetDesiredCapacity"); n != 0 {
		t.Fatalf("the provider set desired capacity %d times: it fought the change", n)
	}
}

// hideInstances makes DescribeAutoScalingGroups show at most *keep
// instances of every group (when *keep >= 0): a group whose scale-out the
// cloud never fills, which moto cannot produce.
func hideInstances(keep *int) func(*middleware.Stack) error {
	return func(s *middleware.Stack) error {
		return s.Initialize.Add(middleware.InitializeMiddlewareFunc("hideInstances", func(ctx context.Context, in middleware.InitializeInput, next middleware.InitializeHandler) (middleware.InitializeOutput, middleware.Metadata, error) {
			out, md, err := next.HandleInitialize(ctx, in)
			if o, ok := out.Result.(*autoscaling.DescribeAutoScalingGroupsOutput); ok && *keep >= 0 {
				for i := range o.AutoScalingGroups {
					g := &o.AutoScalingGroups[i]
					g.Instances = g.Instances[:min(*keep, len(g.Instances))]
				}
			}
			return out, md, err
		}), middleware.After)
	}
}

// TestStuckScaleOut: desired capacity raised, instances never arrive. The
// owed instances are shown as launching placeholders (so the planner counts
// them and does not launch again); after three lead times a further launch
// is refused as a capacity error, and terminating the placeholders (the
// planner does at the provisioning deadline) lowers desired capacity back.
func TestStuckScaleOut(t *testing.T) {
	keep := -1
	e := newEnv(t, hideInstances(&keep))
	ctx := context.Background()
	e.fix.group(t, "g", e.fix.template(t, "gpu", "p4d.24xlarge"), "p", 0, 8, 1)
	pool := e.asgPool("p", "g", 8)
	keep = 1
	if err := e.p.Launch(ctx, pool, providers.LaunchRequest{Count: 2, Target: 3, Key: "k"}); err != nil {
		t.Fatal(err)
	}
	g, err := e.p.Describe(ctx, pool)
	if err != nil {
		t.Fatal(err)
	}
	var placeholders []string
	for _, in := range g.Instances {
		if isPlaceholder(in.ID) {
			placeholders = append(placeholders, in.ID)
			if in.State != providers.InstancePending || !in.LaunchedAt.Equal(e.clock.now()) {
				t.Fatalf("placeholder %+v; want pending since now", in)
			}
		}
	}
	if g.Target != 3 || len(g.Instances) != 3 || len(placeholders) != 2 {
		t.Fatalf("group = %+v; want 1 instance and 2 placeholders", g)
	}
	start := e.clock.now()
	e.clock.add(10 * time.Minute)
	if err := e.p.Launch(ctx, pool, providers.LaunchRequest{Count: 1, Target: 4, Key: "k2"}); err != nil {
		t.Fatalf("a launch within three lead times: %v", err)
	}
	// Each placeholder is aged from its own raise, not the first one's.
	g, _ = e.p.Describe(ctx, pool)
	ages := map[time.Duration]int{}
	for _, in := range g.Instances {
		if isPlaceholder(in.ID) {
			ages[in.LaunchedAt.Sub(start)]++
		}
	}
	if ages[0] != 2 || ages[10*time.Minute] != 1 || len(ages) != 2 {
		t.Fatalf("placeholder ages from the first raise: %v; want two at 0 and one at 10m", ages)
	}
	e.clock.add(20 * time.Minute) // 30 minutes short, over 3 x 9m
	var ice *providers.InsufficientCapacityError
	if err := e.p.Launch(ctx, pool, providers.LaunchRequest{Count: 1, Target: 5, Key: "k3"}); !errors.As(err, &ice) || !strings.Contains(err.Error(), "not filling it") {
		t.Fatalf("a launch into a stuck group: %v; want InsufficientCapacityError", err)
	}
	g, _ = e.p.Describe(ctx, pool)
	placeholders = placeholders[:0]
	for _, in := range g.Instances {
		if isPlaceholder(in.ID) {
			placeholders = append(placeholders, in.ID)
		}
	}
	if err := e.p.Terminate(ctx, pool, placeholders); err != nil {
		t.Fatal(err)
	}
	if d := aws.ToInt32(e.group(t, "g").DesiredCapacity); d != 1 {
		t.Fatalf("desired %d after terminating the placeholders; want the 1 live instance", d)
	}
}

// TestErrorsClassified: AWS's refusals, as AWS sends them, become the
// providers package's typed errors; throttling is retried by the SDK first.
func TestErrorsClassified(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	lt := e.fix.template(t, "gpu", "p4d.24xlarge")
	e.fix.group(t, "g", lt, "p", 0, 8, 0)
	asgPool, ec2Pool := e.asgPool("p", "g", 8), e.ec2Pool("spot", lt, fleet.Spot)

	// Throttled twice, then through: the SDK's retries absorb it.
	e.proxy.Inject("SetDesiredCapacity", mototest.Fault{Status: 400, Code: "Throttling", Message: "Rate exceeded", Times: 2})
	if err := e.p.Launch(ctx, asgPool, providers.LaunchRequest{Count: 1, Target: 1, Key: "k"}); err != nil {
		t.Fatalf("launch throttled twice: %v", err)
	}
	if n := e.proxy.Count("SetDesiredCapacity"); n != 3 {
		t.Fatalf("SetDesiredCapacity called %d times; want 3 (two throttled, retried)", n)
	}

	var (
		ice *providers.InsufficientCapacityError
		qe  *providers.QuotaExceededError
		th  *providers.ThrottledError
		nf  *providers.NotFoundError
		ref *providers.RefusedError
	)
	for _, tt := range []struct {
		name   string
		action string
		f      mototest.Fault
		call   func() error
		want   any
	}{
		{"no capacity", "RunInstances", mototest.Fault{Status: 500, Code: "InsufficientInstanceCapacity", Message: "We currently do not have sufficient p4d.24xlarge capacity in the Availability Zone you requested (us-east-1a)."},
			func() error { return e.p.Launch(ctx, ec2Pool, providers.LaunchRequest{Count: 1, Target: 1, Key: "a"}) }, &ice},
		{"spot unfulfillable", "RunInstances", mototest.Fault{Status: 400, Code: "UnfulfillableCapacity", Message: "There is no Spot capacity available that matches your request."},
			func() error { return e.p.Launch(ctx, ec2Pool, providers.LaunchRequest{Count: 1, Target: 1, Key: "b"}) }, &ice},
		{"vCPU quota", "RunInstances", mototest.Fault{Status: 400, Code: "VcpuLimitExceeded", Message: "You have requested more vCPU capacity than your current vCPU limit of 96 allows."},
			func() error { return e.p.Launch(ctx, ec2Pool, providers.LaunchRequest{Count: 1, Target: 1, Key: "c"}) }, &qe},
		{"instance quota", "RunInstances", mototest.Fault{Status: 400, Code: "InstanceLimitExceeded", Message: "Your quota allows for 0 more running instance(s)."},
			func() error { return e.p.Launch(ctx, ec2Pool, providers.LaunchRequest{Count: 1, Target: 1, Key: "d"}) }, &qe},
		{"throttled past retries", "DescribeAutoScalingGroups", mototest.Fault{Status: 503, Code: "RequestLimitExceeded", Message: "Request limit exceeded."},
			func() error { _, err := e.p.Describe(ctx, asgPool); return err }, &th},
		{"type not offered in the zone", "RunInstances", mototest.Fault{Status: 400, Code: "Unsupported", Message: "Your requested instance type (p4d.24xlarge) is not supported in your requested Availability Zone (us-east-1e)."},
			func() error { return e.p.Launch(ctx, ec2Pool, providers.LaunchRequest{Count: 1, Target: 1, Key: "f"}) }, &ice},
		{"no permission", "RunInstances", mototest.Fault{Status: 403, Code: "UnauthorizedOperation", Message: "You are not authorized to perform this operation."},
			func() error { return e.p.Launch(ctx, ec2Pool, providers.LaunchRequest{Count: 1, Target: 1, Key: "g"}) }, &ref},
		{"unknown template", "RunInstances", mototest.Fault{Status: 400, Code: "InvalidLaunchTemplateName.NotFoundException", Message: "The specified launch template, with template name gpu-x, does not exist."},
			func() error { return e.p.Launch(ctx, ec2Pool, providers.LaunchRequest{Count: 1, Target: 1, Key: "e"}) }, &nf},
	} {
		t.Run(tt.name, func(t *testing.T) {
			e.proxy.Inject(tt.action, tt.f)
			defer func() { e.proxy.Clear(tt.action) }()
			err := tt.call()
			if err == nil || !errors.As(err, tt.want) || !strings.Contains(err.Error(), tt.f.Code) || !strings.Contains(err.Error(), "pool ") {
				t.Fatalf("error = %v; want a %T carrying AWS's code %s and the pool", err, tt.want, tt.f.Code)
			}
		})
	}
	// A capacity refusal is not retried: it would only delay the fallback.
	runs := e.proxy.Count("RunInstances")
	e.proxy.Inject("RunInstances", mototest.Fault{Status: 500, Code: "InsufficientInstanceCapacity", Message: "no capacity", Times: 1})
	if err := e.p.Launch(ctx, ec2Pool, providers.LaunchRequest{Count: 1, Target: 1, Key: "h"}); !errors.As(err, &ice) {
		t.Fatalf("capacity refusal: %v", err)
	}
	if n := e.proxy.Count("RunInstances") - runs; n != 1 {
		t.Fatalf("RunInstances sent %d times for one capacity refusal; want 1", n)
	}
	unknown := e.asgPool("p", "no-such-group", 8)
	if _, err := e.p.Describe(ctx, unknown); !errors.As(err, &nf) || !strings.Contains(err.Error(), `"no-such-group"`) {
		t.Fatalf("unknown group: %v; want NotFoundError naming it", err)
	}
}

// TestEC2Pool runs instances directly from a launch template: tagged as
// the pool's at creation, spot when the pool is, in a capacity reservation
// when one is named, with the launch key as the client token; a restarted
// controller's retry launches nothing; only the pool's instances are
// terminated.
func TestEC2Pool(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	lt := e.fix.template(t, "gpu-spot", "p4d.24xlarge")
	pool := e.ec2Pool("aws-spot-a100", lt, fleet.Spot)

	if err := e.p.Launch(ctx, pool, providers.LaunchRequest{Count: 1, Target: 1, Key: "fc-launch-spot-1"}); err != nil {
		t.Fatal(err)
	}
	c, _ := e.proxy.Last("RunInstances")
	for k, want := range map[string]string{
		"ClientToken":                       "fc-launch-spot-1",
		"MinCount":                          "1",
		"MaxCount":                          "1",
		"InstanceType":                      "p4d.24xlarge",
		"LaunchTemplate.LaunchTemplateName": "gpu-spot",
		"InstanceMarketOptions.MarketType":  "spot",
		"TagSpecification.1.ResourceType":   "instance",
		"TagSpecification.1.Tag.1.Key":      TagManaged,
		"TagSpecification.1.Tag.2.Value":    "aws-spot-a100",
		"TagSpecification.1.Tag.3.Value":    "fc-launch-spot-1",
		"InstanceMarketOptions.SpotOptions.InstanceInterruptionBehavior": "terminate",
	} {
		if got := c.Form.Get(k); got != want {
			t.Errorf("RunInstances %s = %q, want %q", k, got, want)
		}
	}
	g, err := e.p.Describe(ctx, pool)
	if err != nil || g.Target != 1 || len(g.Instances) != 1 {
		t.Fatalf("Describe = %+v, %v; want the one tagged instance", g, err)
	}
	// A restarted controller retrying the same launch: nothing more.
	runs := e.proxy.Count("RunInstances")
	if err := e.provider().Launch(ctx, pool, providers.LaunchRequest{Count: 1, Target: 1, Key: "fc-launch-spot-1"}); err != nil {
		t.Fatal(err)
	}
	if n := e.proxy.Count("RunInstances"); n != runs {
		t.Fatalf("a retried launch ran instances again (%d RunInstances, was %d)", n, runs)
	}
	// Two more asked at once. EC2 grants what it has up to MaxCount; moto
	// always grants MinCount (1), which is the partial-grant path.
	var ice *providers.InsufficientCapacityError
	err = e.p.Launch(ctx, pool, providers.LaunchRequest{Count: 2, Target: 3, Key: "fc-launch-spot-2"})
	if c, _ := e.proxy.Last("RunInstances"); c.Form.Get("MaxCount") != "2" || c.Form.Get("MinCount") != "1" {
		t.Fatalf("RunInstances counts: min %s max %s; want 1 and 2", c.Form.Get("MinCount"), c.Form.Get("MaxCount"))
	}
	if !errors.As(err, &ice) || !strings.Contains(err.Error(), "granted 1 of 2") {
		t.Fatalf("partial grant: %v; want InsufficientCapacityError", err)
	}

	// Reserved: the capacity reservation is targeted (moto does not
	// implement reservations: the request is checked).
	res := e.ec2Pool("reserved-a100", lt, fleet.Reserved)
	res = with(res, func(s *Settings) { s.CapacityReservationID = "cr-0123456789abcdef0" })
	if err := e.p.Launch(ctx, res, providers.LaunchRequest{Count: 1, Target: 1, Key: "fc-launch-res-1"}); err != nil {
		t.Fatal(err)
	}
	c, _ = e.proxy.Last("RunInstances")
	if got := c.Form.Get("CapacityReservationSpecification.CapacityReservationTarget.CapacityReservationId"); got != "cr-0123456789abcdef0" {
		t.Fatalf("reservation target = %q; form %v", got, c.Form)
	}
	if c.Form.Get("InstanceMarketOptions.MarketType") != "" {
		t.Fatal("a reserved launch asked for spot")
	}
	// A Capacity Block is its own market.
	block := e.ec2Pool("h100-block", lt, fleet.Reserved)
	block = with(block, func(s *Settings) { s.CapacityReservationID, s.CapacityBlock = "cr-0a1b2c3d4e5f60718", true })
	if err := e.p.Launch(ctx, block, providers.LaunchRequest{Count: 1, Target: 1, Key: "fc-launch-block-1"}); err != nil {
		t.Fatal(err)
	}
	c, _ = e.proxy.Last("RunInstances")
	if c.Form.Get("InstanceMarketOptions.MarketType") != "capacity-block" || c.Form.Get("CapacityReservationSpecification.CapacityReservationTarget.CapacityReservationId") != "cr-0a1b2c3d4e5f60718" {
		t.Fatalf("capacity block launch: %v", c.Form)
	}

	// Terminate: an instance not tagged as the pool's is refused.
	run, err := e.fix.ec2.RunInstances(ctx, &ec2.RunInstancesInput{ImageId: aws.String("ami-12c6146b"), MinCount: aws.Int32(1), MaxCount: aws.Int32(1)})
	if err != nil {
		t.Fatal(err)
	}
	stranger := aws.ToString(run.Instances[0].InstanceId)
	if err := e.p.Terminate(ctx, pool, []string{stranger}); err == nil || !strings.Contains(err.Error(), "not terminated") {
		t.Fatalf("terminating an untagged instance: %v", err)
	}
	g, _ = e.p.Describe(ctx, pool)
	victim := g.Instances[0].ID
	if err := e.p.Terminate(ctx, pool, []string{victim}); err != nil {
		t.Fatal(err)
	}
	if c, _ := e.proxy.Last("TerminateInstances"); c.Form.Get("InstanceId.1") != victim {
		t.Fatalf("TerminateInstances = %v", c.Form)
	}
	g, _ = e.p.Describe(ctx, pool)
	if g.Target != 1 {
		t.Fatalf("after terminating one of two: target %d; want 1", g.Target)
	}
	var nf *providers.NotFoundError
	if err := e.p.Terminate(ctx, pool, []string{"i-0000000000000dead"}); !errors.As(err, &nf) {
		t.Fatalf("terminating an unknown instance: %v; want NotFoundError", err)
	}
}

// TestFacts reads GPU facts from DescribeInstanceTypes, fills the GPU model
// in, and refuses a gpus_per_node that disagrees.
func TestFacts(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	pool := e.asgPool("p", "g", 4)
	f, err := e.p.Facts(ctx, pool)
	if err != nil || f != (Facts{GPUModel: "A100", GPUs: 8, GPUMemoryMiB: 327680}) {
		t.Fatalf("Facts = %+v, %v", f, err)
	}
	pools := []fleet.Pool{pool, {Name: "s", Provider: "sim"}}
	if err := e.p.Resolve(ctx, pools); err != nil || pools[0].GPUModel != "A100" {
		t.Fatalf("Resolve: %v, model %q", err, pools[0].GPUModel)
	}
	pools[0].GPUsPerNode = 4
	if err := e.p.Resolve(ctx, pools); err == nil || !strings.Contains(err.Error(), "gpus_per_node is 4, but EC2 says p4d.24xlarge has 8 A100 GPUs") {
		t.Fatalf("Resolve with a wrong GPU count: %v", err)
	}
	cpu := pool
	cpu.InstanceType = "m5.large"
	if _, err := e.p.Facts(ctx, cpu); err == nil || !strings.Contains(err.Error(), "m5.large has no GPUs") {
		t.Fatalf("Facts of a CPU type: %v", err)
	}
	spot := e.ec2Pool("spot", "gpu", fleet.Spot)
	if price, err := e.p.SpotPrice(ctx, spot); err != nil || !(price > 0) {
		t.Fatalf("SpotPrice = %v, %v", price, err)
	}
}
