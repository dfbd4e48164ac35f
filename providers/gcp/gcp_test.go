package gcp

import (
	"bytes"
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/fleetcast/autoscaler/fleet"
	"github.com/fleetcast/autoscaler/providers"
)

var now = time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)

func migPool(name string, s Settings) fleet.Pool {
	return fleet.Pool{Name: name, Provider: fleet.ProviderGCP, InstanceType: "a2-highgpu-8g", GPUsPerNode: 8, Capacity: fleet.OnDemand,
		PricePerHour: 29.39, LeadTime: 12 * time.Minute, Max: 12, Settings: s}
}

func newTestProvider(t *testing.T, f *fakeCompute, log hclog.Logger) *Provider {
	p := New(Options{ClientOptions: f.options(), Now: func() time.Time { return now }, Log: log})
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
			f := newFakeCompute(t)
			g := f.addGroup(&fakeGroup{project: s.Project, zone: s.Zone, region: s.Region, name: s.MIG}, 2)
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
			resizes := f.count("resize")
			if err := p.Launch(ctx, pool, providers.LaunchRequest{Count: 2, Target: 4, Key: "launch-1"}); err != nil {
				t.Fatal(err)
			}
			restarted := newTestProvider(t, f, nil)
			if err := restarted.Launch(ctx, pool, providers.LaunchRequest{Count: 2, Target: 4, Key: "launch-1"}); err != nil {
				t.Fatal(err)
			}
			if n := f.count("resize"); n != resizes {
				t.Fatalf("%d resizes after a retry and a restart; want still %d", n, resizes)
			}
			f.boot(g)
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
			deletes := f.count("delete")
			var nf *providers.NotFoundError
			if err := p.Terminate(ctx, pool, []string{"other-group-0001"}); !errors.As(err, &nf) || f.count("delete") != deletes {
				t.Fatalf("terminating another group's instance: %v, %d deletes; want a NotFoundError and none", err, f.count("delete")-deletes)
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
		setup func(f *fakeCompute, g *fakeGroup)
		check func(err error) bool
		want  string
	}{{
		name: "a stockout in the last attempt is insufficient capacity",
		setup: func(f *fakeCompute, g *fakeGroup) {
			g.stockout = "ZONE_RESOURCE_POOL_EXHAUSTED"
			f.mu.Lock()
			in := f.addInstanceLocked(g, "", "CREATING", time.Time{})
			in.lastErr = g.stockout
			g.target++
			f.mu.Unlock()
		},
		check: func(err error) bool { var e *providers.InsufficientCapacityError; return errors.As(err, &e) },
		want:  "ZONE_RESOURCE_POOL_EXHAUSTED",
	}, {
		name: "a resize refused for capacity",
		setup: func(f *fakeCompute, _ *fakeGroup) {
			f.failNext("resize", fakeError{code: 503, reason: "ZONE_RESOURCE_POOL_EXHAUSTED_WITH_DETAILS", msg: "no A100s"})
		},
		check: func(err error) bool { var e *providers.InsufficientCapacityError; return errors.As(err, &e) },
	}, {
		name: "quota",
		setup: func(f *fakeCompute, _ *fakeGroup) {
			f.failNext("resize", fakeError{code: 403, reason: "quotaExceeded", msg: "Quota 'NVIDIA_A100_GPUS' exceeded"})
		},
		check: func(err error) bool { var e *providers.QuotaExceededError; return errors.As(err, &e) },
	}, {
		name: "throttled past the retries",
		setup: func(f *fakeCompute, _ *fakeGroup) {
			for range throttleRetries {
				f.failNext("resize", fakeError{code: 429, reason: "rateLimitExceeded", msg: "slow down"})
			}
		},
		check: func(err error) bool { var e *providers.ThrottledError; return errors.As(err, &e) },
	}, {
		name: "a group that does not exist",
		setup: func(f *fakeCompute, _ *fakeGroup) {
			f.failNext("get", fakeError{code: 404, reason: "notFound", msg: "no group"})
		},
		check: func(err error) bool { var e *providers.NotFoundError; return errors.As(err, &e) },
	}, {
		name: "another 4xx is a refusal",
		setup: func(f *fakeCompute, _ *fakeGroup) {
			f.failNext("resize", fakeError{code: 400, reason: "invalid", msg: "bad size"})
		},
		check: func(err error) bool { var e *providers.RefusedError; return errors.As(err, &e) },
	}, {
		name:  "a rolling update makes the group busy",
		setup: func(_ *fakeCompute, g *fakeGroup) { g.unstable, g.notReached = true, true },
		check: func(err error) bool { var e *providers.GroupBusyError; return errors.As(err, &e) },
		want:  "update",
	}, {
		name:  "auto-healing makes the group busy",
		setup: func(_ *fakeCompute, g *fakeGroup) { g.unstable, g.recreating = true, 1 },
		check: func(err error) bool { var e *providers.GroupBusyError; return errors.As(err, &e) },
		want:  "recreating",
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFakeCompute(t)
			g := f.addGroup(&fakeGroup{project: s.Project, zone: s.Zone, name: s.MIG}, 1)
			tt.setup(f, g)
			p := newTestProvider(t, f, nil)
			err := p.Launch(context.Background(), migPool("gcp-a100", s), providers.LaunchRequest{Count: 2, Target: 4, Key: "k"})
			if !tt.check(err) || !strings.Contains(err.Error(), tt.want) || !providers.ShouldBackOff(err) && !strings.Contains(tt.name, "throttled") {
				t.Fatalf("error %v (%T); want the typed error, mentioning %q", err, err, tt.want)
			}
		})
	}
}

// TestMIGThrottleRetried: a throttled resize is retried with the same
// request ID, and goes through.
func TestMIGThrottleRetried(t *testing.T) {
	s := Settings{Project: "ml", Zone: "us-central1-a", MIG: "a100"}
	f := newFakeCompute(t)
	g := f.addGroup(&fakeGroup{project: s.Project, zone: s.Zone, name: s.MIG}, 1)
	f.failNext("resize", fakeError{code: 429, reason: "rateLimitExceeded", msg: "slow down"})
	f.slowOps = 1 // and the operation takes a poll more
	p := newTestProvider(t, f, nil)
	if err := p.Launch(context.Background(), migPool("gcp-a100", s), providers.LaunchRequest{Count: 1, Target: 2, Key: "k"}); err != nil {
		t.Fatal(err)
	}
	if g.target != 2 || f.count("resize") != 2 {
		t.Fatalf("target %d after %d resize calls; want 2 after 2", g.target, f.count("resize"))
	}
}

// TestMIGTargetChangedOutside: a target size set by someone else is
// followed, and logged with the ignore_changes hint.
func TestMIGTargetChangedOutside(t *testing.T) {
	s := Settings{Project: "ml", Zone: "us-central1-a", MIG: "a100"}
	f := newFakeCompute(t)
	g := f.addGroup(&fakeGroup{project: s.Project, zone: s.Zone, name: s.MIG}, 2)
	var buf bytes.Buffer
	p := newTestProvider(t, f, hclog.New(&hclog.LoggerOptions{Output: &buf}))
	pool := migPool("gcp-a100", s)
	if _, err := p.Describe(context.Background(), pool); err != nil {
		t.Fatal(err)
	}
	f.mu.Lock()
	g.target = 5 // terraform apply
	f.mu.Unlock()
	grp, err := p.Describe(context.Background(), pool)
	if err != nil {
		t.Fatal(err)
	}
	owed := slices.IndexFunc(grp.Instances, func(in providers.Instance) bool { return in.Owed })
	if grp.Target != 5 || owed < 0 || !strings.Contains(buf.String(), "ignore_changes = [target_size]") {
		t.Fatalf("group %+v, log %q; want target 5 followed, with owed stand-ins, and the hint logged", grp, buf.String())
	}
	// A launch to a target at or below it changes nothing.
	if err := p.Launch(context.Background(), pool, providers.LaunchRequest{Count: 1, Target: 3, Key: "k"}); err != nil || f.count("resize") != 0 {
		t.Fatalf("launch below the target: %v, %d resizes; want none", err, f.count("resize"))
	}
	// An owed stand-in terminated lowers the target.
	if err := p.Terminate(context.Background(), pool, []string{grp.Instances[owed].ID}); err != nil || g.target != 4 {
		t.Fatalf("terminating an owed stand-in: %v, target %d; want 4", err, g.target)
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
		model, err                   string
		capacity                     fleet.CapacityType
		max                          int
	}{
		{name: "spot", template: "spot-template", instanceType: "a2-highgpu-8g", gpus: 8, capacity: fleet.Spot, model: "A100"},
		{name: "spot pool on a standard template", template: "a100-template", instanceType: "a2-highgpu-8g", gpus: 8, capacity: fleet.Spot, err: "capacity is spot, but"},
		{name: "on-demand pool on a spot template", template: "spot-template", instanceType: "a2-highgpu-8g", gpus: 8, err: "makes spot VMs"},
		{name: "reserved", template: "reserved-template", instanceType: "a2-highgpu-8g", gpus: 8, capacity: fleet.Reserved, max: 4, model: "A100"},
		{name: "reserved above its reservation", template: "reserved-template", instanceType: "a2-highgpu-8g", gpus: 8, capacity: fleet.Reserved, max: 6, err: "reservation a100-reservation in us-central1-a holds 4 VMs"},
		{name: "reserved on no reservation", template: "a100-template", instanceType: "a2-highgpu-8g", gpus: 8, capacity: fleet.Reserved, max: 4, err: "does not consume one specific reservation"},
		{name: "a2 from its machine type", template: "a100-template", instanceType: "a2-highgpu-8g", gpus: 8, model: "A100"},
		{name: "a regional group", template: "a100-template", instanceType: "a2-highgpu-8g", gpus: 8, regional: true, model: "A100"},
		{name: "n1 from its template", template: "t4-template", instanceType: "n1-standard-16", gpus: 4, model: "T4"},
		{name: "wrong gpus_per_node", template: "a100-template", instanceType: "a2-highgpu-8g", gpus: 4, err: "gpus_per_node is 4, but its VMs have 8 GPUs"},
		{name: "another machine type", template: "a100-template", instanceType: "a2-highgpu-4g", gpus: 4, err: `instance_type is "a2-highgpu-4g", but the instance template a100-template`},
		{name: "no template", template: "", instanceType: "a2-highgpu-8g", gpus: 8, err: "has no instance template"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFakeCompute(t)
			s := Settings{Project: "ml", Zone: "us-central1-a", MIG: "gpus"}
			if tt.regional {
				s = Settings{Project: "ml", Region: "us-central1", MIG: "gpus"}
			}
			g := &fakeGroup{project: s.Project, zone: s.Zone, region: s.Region, name: s.MIG}
			if tt.template != "" {
				g.template = global + tt.template
			}
			f.addGroup(g, 0)
			pool := migPool("gcp-pool", s)
			pool.InstanceType, pool.GPUsPerNode = tt.instanceType, tt.gpus
			if tt.capacity != "" {
				pool.Capacity = tt.capacity
			}
			if tt.max > 0 {
				pool.Max = tt.max
			}
			pools := []fleet.Pool{pool, {Name: "aws-pool", Provider: fleet.ProviderAWS}}
			err := newTestProvider(t, f, nil).Resolve(context.Background(), pools)
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
