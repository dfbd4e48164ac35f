package main

import (
	"context"
	"os"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/autoscaling"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"

	"github.com/fleetcast/autoscaler/internal/mototest"
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
	code, out, errOut := cli("plan", "-config", "../../examples/aws.hcl", "-at", "2026-11-30T14:00:00Z")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	for _, want := range []string{
		"capacity:    48 GPUs ready, 0 launching, 0 draining; 6 node(s) with silent agents",
		"unknown:     6 instance(s) not launched by this controller, agents never reported healthy GPUs: i-",
		"+ launch 2 x p5.48xlarge in h100-capacity-block (keep the reserved baseline full",
		"scale-in halted: 6 of 6 nodes have silent agents",
		"Plan: 2 to launch, 0 to drain, 0 to terminate",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("plan lacks %q:\n%s", want, out)
		}
	}

	// The controller on the same account, dry run: one cycle at once, the
	// plan served, nothing changed.
	src, err := os.ReadFile("../../examples/aws.hcl")
	if err != nil {
		t.Fatal(err)
	}
	conf := localExample(t, string(src))
	code, out, errOut = cli("run", "-config", conf, "-dry-run", "-for", "1ms", "-listen", "127.0.0.1:0")
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
