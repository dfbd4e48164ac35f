package main

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/autoscaling"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"

	"github.com/fleetcast/autoscaler/internal/mototest"
	"github.com/fleetcast/autoscaler/planner"
)

// TestPlanAgainstMoto runs `plan -config examples/aws.hcl` against a local
// EC2 and Auto Scaling API (moto_server) holding what the Terraform in
// examples/terraform/aws makes (mototest.CreateExample: the launch
// templates and the three groups, tagged), with two A100 nodes running on
// demand.
func TestPlanAgainstMoto(t *testing.T) {
	ec, as := motoAccount(t, mototest.URL(t))
	ctx := context.Background()
	if err := mototest.CreateExample(ctx, ec, as); err != nil {
		t.Fatal(err)
	}
	if _, err := as.SetDesiredCapacity(ctx, &autoscaling.SetDesiredCapacityInput{AutoScalingGroupName: aws.String("fleetcast-ondemand-a100"), DesiredCapacity: aws.Int32(2)}); err != nil {
		t.Fatal(err)
	}
	// Six instances read (four reserved, two on demand), all unknown,
	// their agents silent: scale-in halted; the capacity block filled.
	p := planJSON(t, "-config", "../../examples/aws.hcl", "-at", "2026-11-30T14:00:00Z")
	if c := p.Capacity; c != (planner.Capacity{ReadyGPUs: 48, SilentNodes: 6}) {
		t.Errorf("capacity %+v; want 48 GPUs ready on 6 nodes with silent agents", c)
	}
	if len(p.UnknownNodes) != 6 || !strings.HasPrefix(p.UnknownNodes[0], "i-") {
		t.Errorf("unknown instances %v; want the 6 of moto", p.UnknownNodes)
	}
	if got, want := fmt.Sprint(actionsOf(p)), fmt.Sprint([]planAction{{planner.Launch, "h100-capacity-block", "", 2, planner.ReasonReservedBaseline}}); got != want {
		t.Errorf("actions %s, want %s", got, want)
	}
	if p.ScaleInHalt == "" || !slices.Contains(noteCodes(p), planner.ReasonScaleInHalted) {
		t.Errorf("notes %v; want scale-in halted", noteCodes(p))
	}

	// The controller on the same account, dry run: one cycle at once, the
	// plan served, nothing changed.
	src, err := os.ReadFile("../../examples/aws.hcl")
	if err != nil {
		t.Fatal(err)
	}
	conf := localExample(t, string(src))
	code, out, errOut := cmdline("run", "-config", conf, "-dry-run", "-for", "1ms", "-listen", "127.0.0.1:0")
	if code != 0 || !strings.Contains(out, "Fleetcast controller (dry run: planning only) on 4 pools, a cycle every 1m") {
		t.Fatalf("run -dry-run: exit %d\n%s\n%s", code, out, errOut)
	}
	g, err := as.DescribeAutoScalingGroups(ctx, &autoscaling.DescribeAutoScalingGroupsInput{AutoScalingGroupNames: []string{"fleetcast-ondemand-a100"}})
	if err != nil || aws.ToInt32(g.AutoScalingGroups[0].DesiredCapacity) != 2 {
		t.Fatalf("a dry run changed the group: %+v, %v", g, err)
	}
	runs, err := ec.DescribeInstances(ctx, &ec2.DescribeInstancesInput{Filters: []ec2types.Filter{{Name: aws.String("tag:fleetcast/pool"), Values: []string{"h100-capacity-block"}}}})
	if err != nil || len(runs.Reservations) != 0 {
		t.Fatalf("a dry run launched: %+v, %v", runs.Reservations, err)
	}
}
