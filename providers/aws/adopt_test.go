package aws

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"

	"github.com/fleetcast/autoscaler/actuator"
	"github.com/fleetcast/autoscaler/config"
	"github.com/fleetcast/autoscaler/controller"
	"github.com/fleetcast/autoscaler/fleet"
	"github.com/fleetcast/autoscaler/planner"
	"github.com/fleetcast/autoscaler/providers"
	"github.com/fleetcast/autoscaler/state"
)

// TestAdoptedFleetIsNeverKilled runs the live controller, with a fresh
// state directory, against an account Terraform and another controller
// already populated: a full reservation group of four nodes, an on-demand
// group of two, and one tagged spot instance run from the launch template.
// No agent ever reports. For 24 hours the controller terminates none of
// them and scales nothing in; its own launches (jobs wait for more GPUs
// than the fleet has) run but never report either: past their
// provisioning deadline they are held while scale-in is halted (the
// adopted agents are silent, which the controller cannot tell from a
// partition), never terminated.
func TestAdoptedFleetIsNeverKilled(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	lt := e.fix.template(t, "gpu", "p4d.24xlarge")
	e.fix.group(t, "fleetcast-reserved-a100", lt, "reserved-a100", 4, 4, 4)
	e.fix.group(t, "fleetcast-ondemand-a100", lt, "aws-ondemand-a100", 0, 16, 2)
	run, err := e.fix.ec2.RunInstances(ctx, &ec2.RunInstancesInput{
		LaunchTemplate: &ec2types.LaunchTemplateSpecification{LaunchTemplateName: aws.String(lt)},
		MinCount:       aws.Int32(1), MaxCount: aws.Int32(1),
		TagSpecifications: []ec2types.TagSpecification{{ResourceType: ec2types.ResourceTypeInstance, Tags: []ec2types.Tag{
			{Key: aws.String(TagManaged), Value: aws.String("true")},
			{Key: aws.String(TagPool), Value: aws.String("aws-spot-a100")},
			{Key: aws.String(TagLaunchKey), Value: aws.String("fc-launch-aws-spot-a100-another-controller")},
		}}},
	})
	if err != nil {
		t.Fatal(err)
	}
	reserved := e.asgPool("reserved-a100", "fleetcast-reserved-a100", 4)
	reserved.Capacity, reserved.PricePerHour = fleet.Reserved, 20
	spot := e.ec2Pool("aws-spot-a100", lt, fleet.Spot)
	spot.PricePerHour = 40 // dearer here, so the launch goes to the group
	cfg := config.Defaults()
	cfg.Pools = []fleet.Pool{reserved, e.asgPool("aws-ondemand-a100", "fleetcast-ondemand-a100", 16), spot}
	c, _, pending := e.controller(t, &cfg)
	adopted := e.instances(t, cfg.Pools)
	if len(adopted) != 7 {
		t.Fatalf("%d instances to adopt, want 7", len(adopted))
	}
	if aws.ToString(run.Instances[0].InstanceId) == "" || !adopted[aws.ToString(run.Instances[0].InstanceId)] {
		t.Fatalf("the spot instance %v is not the pool's", run.Instances)
	}
	start := e.clock.now()
	var own []string
	held, launched := 0, 0
	const step = 10 * time.Minute
	for i := range int(24 * time.Hour / step) {
		if i == 0 {
			// 64 GPUs wait for any pool, with 56 in the fleet (8 of them
			// the other controller's spot node): one more node is bought.
			pending.Set(e.clock.now(), controller.DemandPush{Source: "slurm", Pending: []controller.PendingDemand{{GPUs: 64}}})
		}
		plan, err := c.Cycle(ctx)
		if err != nil {
			t.Fatalf("cycle at %v: %v", e.clock.now().Sub(start), err)
		}
		for _, a := range plan.Actions {
			switch a.Kind {
			case planner.Drain:
				t.Fatalf("at %v: drained %s: %s", e.clock.now().Sub(start), a.Node, a.Reason)
			case planner.Terminate:
				if adopted[a.Node] {
					t.Fatalf("at %v: terminated %s, an instance this controller did not launch: %s", e.clock.now().Sub(start), a.Node, a.Reason)
				}
				own = append(own, a.Node)
			case planner.Hold:
				if a.Code == planner.ReasonBootedWhileHalted {
					held++
				}
			case planner.Launch:
				launched += a.Count
			}
		}
		e.clock.add(step)
	}
	left := e.instances(t, cfg.Pools)
	for id := range adopted {
		if !left[id] {
			t.Errorf("instance %s is gone after 24 hours", id)
		}
	}
	if len(own) != 0 || held == 0 || launched == 0 || len(left) != len(adopted)+launched {
		t.Errorf("terminated %v, held %d times, launched %d; %d instances left; want its own launches held, none terminated, and the %d adopted",
			own, held, launched, len(left), len(adopted))
	}
}

// instances lists the live instances of the pools, as the cloud has them.
func (e *env) instances(t *testing.T, pools []fleet.Pool) map[string]bool {
	t.Helper()
	out := map[string]bool{}
	for _, p := range pools {
		g, err := e.p.Describe(context.Background(), p)
		if err != nil {
			t.Fatal(err)
		}
		for _, in := range g.Instances {
			if in.State != providers.InstanceTerminating && !isPlaceholder(in.ID) {
				out[in.ID] = true
			}
		}
	}
	return out
}

// crashAfter wraps a provider and fails its next Launch as a controller
// killed around the call would see it: before the call reaches EC2, or
// after EC2 made it.
type crashAfter struct {
	providers.Provider
	before, after bool
}

var errKilled = errors.New("controller killed")

func (c *crashAfter) Launch(ctx context.Context, p fleet.Pool, req providers.LaunchRequest) error {
	if c.before {
		c.before = false
		return errKilled
	}
	err := c.Provider.Launch(ctx, p, req)
	if err == nil && c.after {
		c.after = false
		return errKilled
	}
	return err
}

// TestRecoverDirectLaunch: a controller killed around a RunInstances call
// is restarted and settles the journaled launch against EC2 (moto, whose
// reads do not lag; the lagging case and the key sent again are tested in
// process, in the controller's tests): made once, tagged with the
// journaled key, recorded as the controller's own, the journal empty. One
// instance: moto grants only RunInstances' MinCount.
func TestRecoverDirectLaunch(t *testing.T) {
	for _, when := range []string{"before", "after"} {
		t.Run("killed "+when+" the call", func(t *testing.T) {
			e := newEnv(t)
			ctx := context.Background()
			pool := e.ec2Pool("aws-spot-a100", e.fix.template(t, "gpu", "p4d.24xlarge"), fleet.Spot)
			dir := t.TempDir()
			store, err := state.Open(dir)
			if err != nil {
				t.Fatal(err)
			}
			wrap := &crashAfter{Provider: e.p, before: when == "before", after: when == "after"}
			act, err := actuator.NewActuator(store, []fleet.Pool{pool}, map[string]providers.Provider{pool.Name: wrap}, e.clock.now, nil)
			if err != nil {
				t.Fatal(err)
			}
			if err := act.Launch(ctx, pool.Name, 1); !errors.Is(err, errKilled) {
				t.Fatalf("launch: %v; want the controller killed", err)
			}
			journal, _ := store.Intents()
			store.Close()
			// Restarted: a fresh provider, store and actuator.
			e.p = e.provider()
			if store, err = state.Open(dir); err != nil {
				t.Fatal(err)
			}
			defer store.Close()
			act, err = actuator.NewActuator(store, []fleet.Pool{pool}, map[string]providers.Provider{pool.Name: e.p}, e.clock.now, nil)
			if err != nil {
				t.Fatal(err)
			}
			r, err := act.Recover(ctx)
			if err != nil || len(r.Done) != 1 || len(r.Unsettled) != 0 {
				t.Fatalf("recover: %+v, %v; want the launch done", r, err)
			}
			g, err := e.p.Describe(ctx, pool)
			if err != nil {
				t.Fatal(err)
			}
			if len(journal) != 1 || g.Target != 1 || len(g.Instances) != 1 || g.Instances[0].LaunchKey != journal[0].Key {
				t.Fatalf("group %+v for the journaled launch %+v; want its instance, tagged with its key", g, journal)
			}
			if in, _ := store.Intents(); len(in) != 0 {
				t.Errorf("journal after recovery: %+v", in)
			}
			if ls, _ := store.Launches(); len(ls) != 1 || ls[0].Key != journal[0].Key || ls[0].Count != 1 {
				t.Errorf("launch records %+v; want the launch as the controller's own", ls)
			}
		})
	}
}
