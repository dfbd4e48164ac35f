package aws

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"

	"github.com/fleetcast/autoscaler/config"
	"github.com/fleetcast/autoscaler/controller"
	"github.com/fleetcast/autoscaler/fleet"
	"github.com/fleetcast/autoscaler/internal/mototest"
	"github.com/fleetcast/autoscaler/planner"
	"github.com/fleetcast/autoscaler/providers"
	"github.com/fleetcast/autoscaler/state"
)

// TestFallbackToAnotherPool runs the live controller on two AWS pools:
// cheap spot instances run from a launch template, and an on-demand Auto
// Scaling group. Jobs wait for 16 GPUs. The spot launch is refused, as AWS
// sends it: for capacity, or for a missing permission; the controller
// backs the spot pool off, and the next cycle buys the GPUs in the
// on-demand group.
func TestFallbackToAnotherPool(t *testing.T) {
	for _, f := range []mototest.Fault{
		{Status: 500, Code: "InsufficientInstanceCapacity", Message: "We currently do not have sufficient p4d.24xlarge capacity in the Availability Zone you requested (us-east-1a)."},
		{Status: 403, Code: "UnauthorizedOperation", Message: "You are not authorized to perform this operation."},
	} {
		t.Run(f.Code, func(t *testing.T) { fallback(t, f) })
	}
}

func fallback(t *testing.T, f mototest.Fault) {
	e := newEnv(t)
	ctx := context.Background()
	lt := e.fix.template(t, "gpu", "p4d.24xlarge")
	e.fix.group(t, "fleetcast-ondemand-a100", lt, "aws-ondemand-a100", 0, 4, 0)
	cfg := config.Defaults()
	cfg.Pools = []fleet.Pool{e.ec2Pool("aws-spot-a100", lt, fleet.Spot), e.asgPool("aws-ondemand-a100", "fleetcast-ondemand-a100", 4)}
	for i := range cfg.Pools {
		cfg.Pools[i].GPUModel = "A100" // as EC2 says of p4d.24xlarge
	}
	c, store, pending := e.controller(t, &cfg)
	e.proxy.Inject("RunInstances", f)

	var launches []string
	for range 2 {
		pending.Set(e.clock.now(), controller.DemandPush{Source: "slurm", Pending: []controller.PendingDemand{{GPUModel: "A100", GPUs: 16}}})
		plan, err := c.Cycle(ctx)
		if err != nil {
			t.Fatalf("cycle: %v", err)
		}
		for _, a := range plan.Actions {
			if a.Kind == planner.Launch {
				launches = append(launches, a.Pool)
			}
		}
		e.clock.add(time.Minute)
	}
	if strings.Join(launches, ",") != "aws-spot-a100,aws-ondemand-a100" {
		t.Fatalf("launches = %v; want spot first, then on-demand after spot is refused", launches)
	}
	bs, _ := store.Backoffs()
	if len(bs) != 1 || bs[0].Pool != "aws-spot-a100" || !strings.Contains(bs[0].Reason, f.Code) {
		t.Fatalf("back-offs = %+v; want the spot pool, for %s", bs, f.Code)
	}
	if d := aws.ToInt32(e.group(t, "fleetcast-ondemand-a100").DesiredCapacity); d != 2 {
		t.Fatalf("on-demand desired capacity %d; want 2 (16 GPUs)", d)
	}
	if g, _ := e.p.Describe(ctx, cfg.Pools[0]); g.Target != 0 {
		t.Fatalf("spot pool has %d instances; want none", g.Target)
	}
}

// controller starts the live controller on the env's provider, with a
// fresh state directory and no agent reporting, as `run` would.
func (e *env) controller(t *testing.T, cfg *config.Config) (*controller.Controller, *state.Store, *controller.Pending) {
	t.Helper()
	store, err := state.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	clouds := map[string]providers.Provider{}
	for _, p := range cfg.Pools {
		clouds[p.Name] = e.p
	}
	pending := &controller.Pending{}
	set := cfg.Settings()
	c, err := controller.New(controller.Options{Settings: &set, Controller: cfg.Controller, Store: store, Clouds: clouds,
		Agents: controller.NewAgents(e.clock.now), Pending: pending, Now: e.clock.now})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Recover(context.Background()); err != nil {
		t.Fatal(err)
	}
	return c, store, pending
}
