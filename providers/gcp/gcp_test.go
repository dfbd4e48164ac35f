package gcp

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"google.golang.org/api/option"

	"github.com/fleetcast/autoscaler/fleet"
	"github.com/fleetcast/autoscaler/internal/gcptest"
	"github.com/fleetcast/autoscaler/providers"
)

var now = time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)

func migPool(name string, s Settings) fleet.Pool {
	return fleet.Pool{Name: name, Provider: fleet.ProviderGCP, InstanceType: "a2-highgpu-8g", GPUsPerNode: 8, Capacity: fleet.OnDemand,
		PricePerHour: 29.39, LeadTime: 12 * time.Minute, Max: 12, Settings: s}
}

func newTestProvider(t *testing.T, f *gcptest.Compute, log hclog.Logger) *Provider {
	p := New(Options{ClientOptions: f.Options(), Now: func() time.Time { return now }, Log: log})
	t.Cleanup(func() { p.Close() }) //nolint:errcheck // test clean-up
	return p
}

// TestMIG: the provider reads, grows and shrinks zonal and regional
// managed instance groups through the real REST clients.
func TestMIG(t *testing.T) {
	for _, regional := range []bool{false, true} {
		name := "zonal"
		s := Settings{Project: "ml", Zone: "us-central1-a", MIG: "a100"}
		if regional {
			name, s = "regional", Settings{Project: "ml", Region: "us-central1", MIG: "a100"}
		}
		t.Run(name, func(t *testing.T) {
			f := gcptest.NewCompute(t)
			g := f.AddGroup(&gcptest.Group{Project: s.Project, Zone: s.Zone, Region: s.Region, Name: s.MIG}, 2)
			p := newTestProvider(t, f, nil)
			pool := migPool("gcp-a100", s)
			ctx := context.Background()
			grp, err := p.Describe(ctx, pool)
			if err != nil {
				t.Fatal(err)
			}
			if grp.Target != 2 || len(grp.Instances) != 2 || grp.Instances[0].State != providers.InstanceRunning ||
				!grp.Instances[0].LaunchedAt.Equal(time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)) || grp.Instances[0].Fleet != "prod" || grp.Instances[0].Zone == "" {
				t.Fatalf("group %+v; want 2 running instances made at 09:00, of fleet prod, with zones", grp)
			}
			// Scale-out to an absolute target: the new VMs are being
			// created, and count as pending until they run.
			if err := p.Launch(ctx, pool, providers.LaunchRequest{Count: 2, Target: 4, Key: "launch-1"}); err != nil {
				t.Fatal(err)
			}
			grp, _ = p.Describe(ctx, pool)
			pending := 0
			for _, in := range grp.Instances {
				if in.State == providers.InstancePending {
					pending++
					if !in.LaunchedAt.Equal(now) {
						t.Errorf("creating instance %s launched at %v; want first seen, %v", in.ID, in.LaunchedAt, now)
					}
				}
			}
			if grp.Target != 4 || len(grp.Instances) != 4 || pending != 2 {
				t.Fatalf("after the launch: %+v; want target 4, 2 of 4 pending", grp)
			}
			// A retry, or the same launch after a restart: no second resize.
			resizes := f.Count("resize")
			if err := p.Launch(ctx, pool, providers.LaunchRequest{Count: 2, Target: 4, Key: "launch-1"}); err != nil {
				t.Fatal(err)
			}
			restarted := newTestProvider(t, f, nil)
			if err := restarted.Launch(ctx, pool, providers.LaunchRequest{Count: 2, Target: 4, Key: "launch-1"}); err != nil {
				t.Fatal(err)
			}
			if n := f.Count("resize"); n != resizes {
				t.Fatalf("%d resizes after a retry and a restart; want still %d", n, resizes)
			}
			f.Boot(g)
			// Scale-in of the chosen instances only, lowering the target.
			grp, _ = p.Describe(ctx, pool)
			chosen := grp.Instances[1].ID
			if err := p.Terminate(ctx, pool, []string{chosen}); err != nil {
				t.Fatal(err)
			}
			grp, _ = p.Describe(ctx, pool)
			for _, in := range grp.Instances {
				if (in.ID == chosen) != (in.State == providers.InstanceTerminating) {
					t.Errorf("instance %s is %s after terminating %s", in.ID, in.State, chosen)
				}
			}
			if grp.Target != 3 {
				t.Errorf("target %d after terminating one of 4; want 3", grp.Target)
			}
			// Another group's instance is refused, and nothing deleted.
			deletes := f.Count("delete")
			var nf *providers.NotFoundError
			if err := p.Terminate(ctx, pool, []string{"other-group-0001"}); !errors.As(err, &nf) || f.Count("delete") != deletes {
				t.Fatalf("terminating another group's instance: %v, %d deletes; want a NotFoundError and none", err, f.Count("delete")-deletes)
			}
		})
	}
}

// TestMIGErrors: Compute Engine's answers map to the shared typed errors,
// so the pool backs off (and the planner falls back) as on AWS.
func TestMIGErrors(t *testing.T) {
	s := Settings{Project: "ml", Zone: "us-central1-a", MIG: "a100"}
	tests := []struct {
		name  string
		setup func(f *gcptest.Compute, g *gcptest.Group)
		check func(err error) bool
		want  string
	}{{
		name: "a stockout in the last attempt is insufficient capacity",
		setup: func(f *gcptest.Compute, g *gcptest.Group) {
			g.Stockout = "ZONE_RESOURCE_POOL_EXHAUSTED"
			f.AddCreating(g, g.Stockout)
		},
		check: func(err error) bool { var e *providers.InsufficientCapacityError; return errors.As(err, &e) },
		want:  "ZONE_RESOURCE_POOL_EXHAUSTED",
	}, {
		name: "a resize refused for capacity",
		setup: func(f *gcptest.Compute, _ *gcptest.Group) {
			f.FailNext("resize", gcptest.Error{Code: 503, Reason: "ZONE_RESOURCE_POOL_EXHAUSTED_WITH_DETAILS", Msg: "no A100s"})
		},
		check: func(err error) bool { var e *providers.InsufficientCapacityError; return errors.As(err, &e) },
	}, {
		name: "quota",
		setup: func(f *gcptest.Compute, _ *gcptest.Group) {
			f.FailNext("resize", gcptest.Error{Code: 403, Reason: "quotaExceeded", Msg: "Quota 'NVIDIA_A100_GPUS' exceeded"})
		},
		check: func(err error) bool { var e *providers.QuotaExceededError; return errors.As(err, &e) },
	}, {
		name: "throttled past the retries",
		setup: func(f *gcptest.Compute, _ *gcptest.Group) {
			for range throttleRetries {
				f.FailNext("resize", gcptest.Error{Code: 429, Reason: "rateLimitExceeded", Msg: "slow down"})
			}
		},
		check: func(err error) bool { var e *providers.ThrottledError; return errors.As(err, &e) },
	}, {
		name: "a group that does not exist",
		setup: func(f *gcptest.Compute, _ *gcptest.Group) {
			f.FailNext("get", gcptest.Error{Code: 404, Reason: "notFound", Msg: "no group"})
		},
		check: func(err error) bool { var e *providers.NotFoundError; return errors.As(err, &e) },
	}, {
		name: "another 4xx is a refusal",
		setup: func(f *gcptest.Compute, _ *gcptest.Group) {
			f.FailNext("resize", gcptest.Error{Code: 400, Reason: "invalid", Msg: "bad size"})
		},
		check: func(err error) bool { var e *providers.RefusedError; return errors.As(err, &e) },
	}, {
		name: "a proactive rolling update makes the group busy",
		setup: func(_ *gcptest.Compute, g *gcptest.Group) {
			g.Unstable, g.NotReached, g.UpdatePolicy = true, true, "PROACTIVE"
		},
		check: func(err error) bool { var e *providers.GroupBusyError; return errors.As(err, &e) },
		want:  "update",
	}, {
		name:  "auto-healing makes the group busy",
		setup: func(_ *gcptest.Compute, g *gcptest.Group) { g.Unstable, g.Recreating = true, 1 },
		check: func(err error) bool { var e *providers.GroupBusyError; return errors.As(err, &e) },
		want:  "recreating",
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := gcptest.NewCompute(t)
			g := f.AddGroup(&gcptest.Group{Project: s.Project, Zone: s.Zone, Name: s.MIG}, 1)
			tt.setup(f, g)
			p := newTestProvider(t, f, nil)
			err := p.Launch(context.Background(), migPool("gcp-a100", s), providers.LaunchRequest{Count: 2, Target: 4, Key: "k"})
			if !tt.check(err) || !strings.Contains(err.Error(), tt.want) || !providers.ShouldBackOff(err) && !strings.Contains(tt.name, "throttled") {
				t.Fatalf("error %v (%T); want the typed error, mentioning %q", err, err, tt.want)
			}
		})
	}
}

// TestMIGStockoutMoved: a regional group that may place VMs in any of its
// zones moves a creation that stocked out to another, so its VMs are not
// reported failing; an even one's are.
func TestMIGStockoutMoved(t *testing.T) {
	for _, tt := range []struct {
		shape   string
		failing bool
	}{{"BALANCED", false}, {"ANY", false}, {"EVEN", true}} {
		s := Settings{Project: "ml", Region: "us-central1", MIG: "a100"}
		f := gcptest.NewCompute(t)
		g := f.AddGroup(&gcptest.Group{Project: s.Project, Region: s.Region, Name: s.MIG, TargetShape: tt.shape, Zones: []string{"us-central1-a", "us-central1-b"}}, 0)
		f.AddCreating(g, "ZONE_RESOURCE_POOL_EXHAUSTED")
		grp, err := newTestProvider(t, f, nil).Describe(context.Background(), migPool("gcp-a100", s))
		if err != nil || len(grp.Instances) != 1 || (grp.Instances[0].Failing != nil) != tt.failing {
			t.Errorf("%s: %+v, %v; want failing %v", tt.shape, grp.Instances, err, tt.failing)
		}
	}
}

// TestMIGAfterReview: what a review found. An opportunistic update not
// reached does not make the group busy; an instance's fleet label is kept
// after its first read; two equal scale-ins of owed capacity both happen
// (a fresh request ID each); owed stand-ins are named for their pool, so
// two pools whose groups share a name never share one.
func TestMIGAfterReview(t *testing.T) {
	ctx := context.Background()
	s := Settings{Project: "ml", Zone: "us-central1-a", MIG: "a100"}
	f := gcptest.NewCompute(t)
	g := f.AddGroup(&gcptest.Group{Project: s.Project, Zone: s.Zone, Name: s.MIG, UpdatePolicy: "OPPORTUNISTIC", NotReached: true}, 2)
	p := newTestProvider(t, f, nil)
	pool := migPool("gcp-a100", s)
	if err := p.Launch(ctx, pool, providers.LaunchRequest{Count: 1, Target: 3, Key: "k1"}); err != nil {
		t.Fatalf("a launch into a group on an opportunistic update: %v", err)
	}
	f.Do(func() { g.Unstable = true }) // still creating k1's VM
	if err := p.Launch(ctx, pool, providers.LaunchRequest{Count: 1, Target: 4, Key: "k2"}); err != nil {
		t.Fatalf("a launch while the group creates the last one's VMs: %v", err)
	}
	f.Boot(g)
	for range 2 {
		grp, err := p.Describe(ctx, pool)
		if err != nil {
			t.Fatal(err)
		}
		for _, in := range grp.Instances {
			if in.Fleet != "prod" {
				t.Fatalf("instance %s of fleet %q; want prod, on every read", in.ID, in.Fleet)
			}
		}
	}
	for range 2 {
		f.Do(func() { g.Target = 5 }) // owed: one above the 4 it has
		grp, err := p.Describe(ctx, pool)
		if err != nil {
			t.Fatal(err)
		}
		owed := slices.IndexFunc(grp.Instances, func(in providers.Instance) bool { return in.Owed })
		if owed < 0 || !strings.HasPrefix(grp.Instances[owed].ID, "owed/gcp-a100/") {
			t.Fatalf("instances %+v; want an owed stand-in named for the pool", grp.Instances)
		}
		if err := p.Terminate(ctx, pool, []string{grp.Instances[owed].ID}); err != nil || g.Target != 4 {
			t.Fatalf("terminating the owed stand-in: %v, target %d; want 4", err, g.Target)
		}
	}
}

// TestMIGStockoutFailing: a resize the zone cannot fill succeeds, and
// the instances being created carry the stockout in their last attempt:
// Describe reports them pending and failing, with the typed error (so the
// controller terminates them and backs the pool off at once), and the next
// launch is refused with it. Booted, they fail no more.
func TestMIGStockoutFailing(t *testing.T) {
	s := Settings{Project: "ml", Zone: "us-central1-a", MIG: "a100"}
	f := gcptest.NewCompute(t)
	g := f.AddGroup(&gcptest.Group{Project: s.Project, Zone: s.Zone, Name: s.MIG}, 1)
	f.Do(func() { g.Stockout = "ZONE_RESOURCE_POOL_EXHAUSTED" })
	p := newTestProvider(t, f, nil)
	pool := migPool("gcp-a100", s)
	ctx := context.Background()
	if err := p.Launch(ctx, pool, providers.LaunchRequest{Count: 2, Target: 3, Key: "k1"}); err != nil {
		t.Fatalf("the resize itself succeeds: %v", err)
	}
	grp, err := p.Describe(ctx, pool)
	if err != nil {
		t.Fatal(err)
	}
	failing := 0
	for _, in := range grp.Instances {
		var ice *providers.InsufficientCapacityError
		switch {
		case in.Failing == nil:
		case in.State != providers.InstancePending || !errors.As(in.Failing, &ice) || !strings.Contains(in.Failing.Error(), "ZONE_RESOURCE_POOL_EXHAUSTED"):
			t.Errorf("instance %s: %s, failing %v; want pending, insufficient capacity", in.ID, in.State, in.Failing)
		default:
			failing++
		}
	}
	if failing != 2 {
		t.Fatalf("%d failing instances in %+v; want the 2 being created", failing, grp.Instances)
	}
	var ice *providers.InsufficientCapacityError
	if err := p.Launch(ctx, pool, providers.LaunchRequest{Count: 1, Target: 4, Key: "k2"}); !errors.As(err, &ice) {
		t.Fatalf("a launch into the stocked-out group: %v; want insufficient capacity", err)
	}
	// A later attempt got capacity: a VM exists, provisioning, and the last
	// failed attempt's error is not taken for a failure.
	f.Provision(g)
	grp, _ = p.Describe(ctx, pool)
	for _, in := range grp.Instances {
		if in.Failing != nil {
			t.Errorf("instance %s, provisioning, failing %v; want not failing", in.ID, in.Failing)
		}
	}
	f.Do(func() { g.Stockout = "" })
	f.Boot(g)
	grp, _ = p.Describe(ctx, pool)
	for _, in := range grp.Instances {
		if in.Failing != nil || in.State != providers.InstanceRunning {
			t.Errorf("after the zone had capacity again: %s %s, failing %v", in.ID, in.State, in.Failing)
		}
	}
}

// TestMIGThrottleRetried: a throttled resize is retried with the same
// request ID, and goes through.
func TestMIGThrottleRetried(t *testing.T) {
	s := Settings{Project: "ml", Zone: "us-central1-a", MIG: "a100"}
	f := gcptest.NewCompute(t)
	g := f.AddGroup(&gcptest.Group{Project: s.Project, Zone: s.Zone, Name: s.MIG}, 1)
	f.FailNext("resize", gcptest.Error{Code: 429, Reason: "rateLimitExceeded", Msg: "slow down"})
	f.SetSlowOps(1) // and the operation takes a poll more
	p := newTestProvider(t, f, nil)
	if err := p.Launch(context.Background(), migPool("gcp-a100", s), providers.LaunchRequest{Count: 1, Target: 2, Key: "k"}); err != nil {
		t.Fatal(err)
	}
	if g.Target != 2 || f.Count("resize") != 2 {
		t.Fatalf("target %d after %d resize calls; want 2 after 2", g.Target, f.Count("resize"))
	}
}

// TestMIGTargetChangedOutside: a target size set by someone else is
// followed, and logged with the ignore_changes hint.
func TestMIGTargetChangedOutside(t *testing.T) {
	s := Settings{Project: "ml", Zone: "us-central1-a", MIG: "a100"}
	f := gcptest.NewCompute(t)
	g := f.AddGroup(&gcptest.Group{Project: s.Project, Zone: s.Zone, Name: s.MIG}, 2)
	var buf bytes.Buffer
	p := newTestProvider(t, f, hclog.New(&hclog.LoggerOptions{Output: &buf}))
	pool := migPool("gcp-a100", s)
	if _, err := p.Describe(context.Background(), pool); err != nil {
		t.Fatal(err)
	}
	f.Do(func() { g.Target = 5 }) // terraform apply
	grp, err := p.Describe(context.Background(), pool)
	if err != nil {
		t.Fatal(err)
	}
	owed := slices.IndexFunc(grp.Instances, func(in providers.Instance) bool { return in.Owed })
	if grp.Target != 5 || owed < 0 || !strings.Contains(buf.String(), "ignore_changes = [target_size]") {
		t.Fatalf("group %+v, log %q; want target 5 followed, with owed stand-ins, and the hint logged", grp, buf.String())
	}
	// A launch to a target at or below it changes nothing.
	if err := p.Launch(context.Background(), pool, providers.LaunchRequest{Count: 1, Target: 3, Key: "k"}); err != nil || f.Count("resize") != 0 {
		t.Fatalf("launch below the target: %v, %d resizes; want none", err, f.Count("resize"))
	}
	// An owed stand-in terminated lowers the target.
	if err := p.Terminate(context.Background(), pool, []string{grp.Instances[owed].ID}); err != nil || g.Target != 4 {
		t.Fatalf("terminating an owed stand-in: %v, target %d; want 4", err, g.Target)
	}
}

// TestResolveUnreachable: a pool whose facts cannot be read at start (a
// 5xx, no network) is no error at start; every call on it reads them
// first, fails while they cannot be read, and refuses the pool for good
// if they do not hold. A pool whose facts are wrong is refused at start.
func TestResolveUnreachable(t *testing.T) {
	const tmpl = "https://www.googleapis.com/compute/v1/projects/ml/global/instanceTemplates/a100-template"
	ctx := context.Background()
	s := Settings{Project: "ml", Zone: "us-central1-a", MIG: "a100"}
	f := gcptest.NewCompute(t)
	f.AddGroup(&gcptest.Group{Project: s.Project, Zone: s.Zone, Name: s.MIG, Template: tmpl}, 1)
	f.FailNext("get", gcptest.Error{Code: 500, Reason: "backendError", Msg: "Internal error"})
	p := newTestProvider(t, f, nil)
	pools := []fleet.Pool{migPool("gcp-a100", s)}
	if err := p.Resolve(ctx, pools); err != nil {
		t.Fatalf("Resolve with Compute Engine failing: %v; want no error", err)
	}
	f.FailNext("get", gcptest.Error{Code: 500, Reason: "backendError", Msg: "Internal error"})
	if _, err := p.Describe(ctx, pools[0]); err == nil || !strings.Contains(err.Error(), "not read at start") {
		t.Fatalf("Describe while the facts cannot be read: %v; want the error", err)
	}
	gets := f.Count("get")
	if g, err := p.Describe(ctx, pools[0]); err != nil || g.Target != 1 || f.Count("get") != gets+2 {
		t.Fatalf("Describe once they can: %+v, %v, %d gets; want the group, its facts read first", g, err, f.Count("get")-gets)
	}
	if _, err := p.Describe(ctx, pools[0]); err != nil || f.Count("get") != gets+3 {
		t.Fatalf("Describe after: %v, %d gets; want the facts read once", err, f.Count("get")-gets)
	}

	// Facts read late, and wrong: the pool is refused on every call.
	f.FailNext("get", gcptest.Error{Code: 500, Reason: "backendError", Msg: "Internal error"})
	wrong := migPool("gcp-a100", s)
	wrong.GPUsPerNode = 4
	p = newTestProvider(t, f, nil)
	if err := p.Resolve(ctx, []fleet.Pool{wrong}); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if err := p.Launch(ctx, wrong, providers.LaunchRequest{Count: 1, Target: 2, Key: "k"}); err == nil || !strings.Contains(err.Error(), "gpus_per_node is 4") {
			t.Fatalf("a launch into a pool whose facts are wrong: %v", err)
		}
	}
	if err := newTestProvider(t, f, nil).Resolve(ctx, []fleet.Pool{wrong}); err == nil {
		t.Fatal("wrong facts read at start: no error")
	}
}

// TestResolveRefusedCredentials: credentials Compute Engine's token
// endpoint refuses (a key revoked or replaced) are an answer, not an
// outage: Resolve fails at start. A closed port is an outage.
func TestResolveRefusedCredentials(t *testing.T) {
	const tmpl = "https://www.googleapis.com/compute/v1/projects/ml/global/instanceTemplates/a100-template"
	s := Settings{Project: "ml", Zone: "us-central1-a", MIG: "a100"}
	f := gcptest.NewCompute(t)
	f.AddGroup(&gcptest.Group{Project: s.Project, Zone: s.Zone, Name: s.MIG, Template: tmpl}, 1)
	dir := t.TempDir()
	old := f.ServiceAccountKey(dir)
	stale, err := os.ReadFile(old)
	if err != nil {
		t.Fatal(err)
	}
	f.ServiceAccountKey(t.TempDir()) // a new key: the old one is refused
	keyFile := filepath.Join(dir, "stale.json")
	if err := os.WriteFile(keyFile, stale, 0o600); err != nil {
		t.Fatal(err)
	}
	p := New(Options{ClientOptions: []option.ClientOption{option.WithEndpoint(f.URL()), option.WithCredentialsFile(keyFile)}})
	t.Cleanup(func() { p.Close() }) //nolint:errcheck // test clean-up
	if err := p.Resolve(context.Background(), []fleet.Pool{migPool("gcp-a100", s)}); err == nil || !strings.Contains(err.Error(), "invalid_grant") {
		t.Fatalf("Resolve with refused credentials: %v; want the refusal", err)
	}
	closed := New(Options{ClientOptions: []option.ClientOption{option.WithEndpoint("http://127.0.0.1:1"), option.WithoutAuthentication()}})
	t.Cleanup(func() { closed.Close() }) //nolint:errcheck // test clean-up
	if err := closed.Resolve(context.Background(), []fleet.Pool{migPool("gcp-a100", s)}); err != nil {
		t.Fatalf("Resolve with Compute Engine unreachable: %v; want none (checked at the first call)", err)
	}
}

// TestLabelFleet: the fake labels instances as the provider reads them.
func TestLabelFleet(t *testing.T) {
	if LabelFleet != gcptest.LabelFleet {
		t.Fatalf("gcp.LabelFleet %q, gcptest.LabelFleet %q", LabelFleet, gcptest.LabelFleet)
	}
}

// TestRequestID: the same pool and key give the same UUID, others differ.
func TestRequestID(t *testing.T) {
	a, b := requestID("p", "k"), requestID("p", "k")
	if a != b || a == requestID("p", "k2") || a == requestID("q", "k") || len(a) != 36 {
		t.Fatalf("request IDs %s %s", a, b)
	}
}

// TestResolve: the GPUs per VM are checked against the machine type's
// accelerators (A2), or the instance template's attached GPUs (N1), and
// the GPU model filled in; a template of another machine type, or a
// pool whose gpus_per_node is wrong, is refused, naming the pool; so is a
// template that buys another capacity type (spot or not, a reserved pool
// off its reservation, or a max the reservation cannot hold).
func TestResolve(t *testing.T) {
	const global = "https://www.googleapis.com/compute/v1/projects/ml/global/instanceTemplates/"
	tests := []struct {
		name, template, instanceType string
		gpus                         int
		regional                     bool
		zones                        []string
		model, err                   string
		capacity                     fleet.CapacityType
		max                          int
	}{
		{name: "spot", template: "spot-template", instanceType: "a2-highgpu-8g", gpus: 8, capacity: fleet.Spot, model: "A100"},
		{name: "spot pool on a standard template", template: "a100-template", instanceType: "a2-highgpu-8g", gpus: 8, capacity: fleet.Spot, err: "capacity is spot, but"},
		{name: "on-demand pool on a spot template", template: "spot-template", instanceType: "a2-highgpu-8g", gpus: 8, err: "makes spot VMs"},
		{name: "reserved", template: "reserved-template", instanceType: "a2-highgpu-8g", gpus: 8, capacity: fleet.Reserved, max: 4, model: "A100"},
		{name: "reserved above its reservation", template: "reserved-template", instanceType: "a2-highgpu-8g", gpus: 8, capacity: fleet.Reserved, max: 6, err: "reservation a100-reservation in us-central1-a holds 4 VMs"},
		{name: "reserved regional in one zone", template: "reserved-template", instanceType: "a2-highgpu-8g", gpus: 8, capacity: fleet.Reserved, max: 4, regional: true, model: "A100"},
		{name: "reserved regional in two zones", template: "reserved-template", instanceType: "a2-highgpu-8g", gpus: 8, capacity: fleet.Reserved, max: 4, regional: true,
			zones: []string{"us-central1-a", "us-central1-b"}, err: "places VMs in 2 zones"},
		{name: "reserved on a reservation any VM may use", template: "open-reserved-template", instanceType: "a2-highgpu-8g", gpus: 8, capacity: fleet.Reserved, max: 4,
			err: "specificReservationRequired is false"},
		{name: "reserved on no reservation", template: "a100-template", instanceType: "a2-highgpu-8g", gpus: 8, capacity: fleet.Reserved, max: 4, err: "does not consume one specific reservation"},
		{name: "a2 from its machine type", template: "a100-template", instanceType: "a2-highgpu-8g", gpus: 8, model: "A100"},
		{name: "a regional group", template: "a100-template", instanceType: "a2-highgpu-8g", gpus: 8, regional: true, model: "A100"},
		{name: "n1 from its template", template: "t4-template", instanceType: "n1-standard-16", gpus: 4, model: "T4"},
		{name: "wrong gpus_per_node", template: "a100-template", instanceType: "a2-highgpu-8g", gpus: 4, err: "gpus_per_node is 4, but its VMs have 8 GPUs"},
		{name: "another machine type", template: "a100-template", instanceType: "a2-highgpu-4g", gpus: 4, err: `instance_type is "a2-highgpu-4g", but the instance template a100-template`},
		{name: "no template", template: "", instanceType: "a2-highgpu-8g", gpus: 8, err: "has no instance template"},
		{name: "another pool's template", template: "other-pool-template", instanceType: "a2-highgpu-8g", gpus: 8, err: "fleetcast-pool=other: another pool's group"},
		{name: "another fleet's template", template: "staging-template", instanceType: "a2-highgpu-8g", gpus: 8, err: "fleetcast-fleet=staging, and this controller's fleet is prod"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := gcptest.NewCompute(t)
			s := Settings{Project: "ml", Zone: "us-central1-a", MIG: "gpus"}
			if tt.regional {
				s = Settings{Project: "ml", Region: "us-central1", MIG: "gpus"}
			}
			g := &gcptest.Group{Project: s.Project, Zone: s.Zone, Region: s.Region, Name: s.MIG, Zones: tt.zones}
			if tt.template != "" {
				g.Template = global + tt.template
			}
			f.AddGroup(g, 0)
			pool := migPool("gcp-pool", s)
			pool.InstanceType, pool.GPUsPerNode = tt.instanceType, tt.gpus
			if tt.capacity != "" {
				pool.Capacity = tt.capacity
			}
			if tt.max > 0 {
				pool.Max = tt.max
			}
			pools := []fleet.Pool{pool, {Name: "aws-pool", Provider: fleet.ProviderAWS}}
			p := New(Options{ClientOptions: f.Options(), Fleet: "prod"})
			t.Cleanup(func() { p.Close() }) //nolint:errcheck // test clean-up
			err := p.Resolve(context.Background(), pools)
			switch {
			case tt.err == "" && err != nil:
				t.Fatal(err)
			case tt.err != "" && (err == nil || !strings.Contains(err.Error(), tt.err) || !strings.Contains(err.Error(), "pool gcp-pool")):
				t.Fatalf("error %v; want one naming the pool, with %q", err, tt.err)
			case tt.err == "" && pools[0].GPUModel != tt.model:
				t.Fatalf("gpu model %q; want %q", pools[0].GPUModel, tt.model)
			}
		})
	}
}
