package mototest

import (
	"context"
	"fmt"
	"maps"
	"slices"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/autoscaling"
	astypes "github.com/aws/aws-sdk-go-v2/service/autoscaling/types"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
)

// LaunchTemplate is a launch template of the example fleet.
type LaunchTemplate struct {
	Name, InstanceType string
}

// Group is an Auto Scaling group of the example fleet: its name, the pool
// its fleetcast/pool tag names, its launch template and its sizes.
type Group struct {
	Name, Pool, LaunchTemplate string
	Min, Max, Desired          int32
}

// The example fleet: what examples/aws.hcl names, as examples/terraform/aws
// makes it with reserved_nodes = 4 and its other variables' defaults
// (config's tests check that they agree), plus the launch template of the H100 capacity block pool, which
// the operator makes with the capacity block (the Terraform does not).
// CreateExample makes it on moto for the tests and scripts/try-moto.sh.
var (
	ExampleTemplates = []LaunchTemplate{
		{Name: "fleetcast-reserved-a100", InstanceType: "p4d.24xlarge"},
		{Name: "fleetcast-aws-ondemand-a100", InstanceType: "p4d.24xlarge"},
		{Name: "fleetcast-aws-spot-a100", InstanceType: "p4d.24xlarge"},
		{Name: "fleetcast-h100", InstanceType: "p5.48xlarge"},
	}
	ExampleGroups = []Group{
		{Name: "fleetcast-reserved-a100", Pool: "reserved-a100", LaunchTemplate: "fleetcast-reserved-a100", Min: 4, Max: 4, Desired: 4},
		{Name: "fleetcast-ondemand-a100", Pool: "aws-ondemand-a100", LaunchTemplate: "fleetcast-aws-ondemand-a100", Min: 0, Max: 16, Desired: 0},
		{Name: "fleetcast-spot-a100", Pool: "aws-spot-a100", LaunchTemplate: "fleetcast-aws-spot-a100", Min: 0, Max: 8, Desired: 0},
	}
)

// Tags are the group's tags, all propagated at launch, as the Terraform
// sets them.
func (g Group) Tags() map[string]string {
	return map[string]string{"Name": g.Name, "fleetcast/managed": "true", "fleetcast/pool": g.Pool}
}

// ExampleZone is the zone the example groups run in: the reserved group's
// (the Terraform's availability_zone).
const ExampleZone = "us-east-1a"

// exampleAMI is an image moto knows.
const exampleAMI = "ami-12c6146b"

// CreateExample makes the example fleet's launch templates and groups,
// tagged fleetcast/managed=true and fleetcast/pool=POOL (propagated at
// launch) and Name as the Terraform tags them, with the clients given. moto starts
// the groups' instances at once.
func CreateExample(ctx context.Context, ec *ec2.Client, as *autoscaling.Client) error {
	for _, lt := range ExampleTemplates {
		if _, err := ec.CreateLaunchTemplate(ctx, &ec2.CreateLaunchTemplateInput{LaunchTemplateName: aws.String(lt.Name),
			LaunchTemplateData: &ec2types.RequestLaunchTemplateData{ImageId: aws.String(exampleAMI), InstanceType: ec2types.InstanceType(lt.InstanceType)}}); err != nil {
			return fmt.Errorf("launch template %s: %w", lt.Name, err)
		}
	}
	for _, g := range ExampleGroups {
		var tags []astypes.Tag
		for _, k := range slices.Sorted(maps.Keys(g.Tags())) {
			tags = append(tags, astypes.Tag{Key: aws.String(k), Value: aws.String(g.Tags()[k]), PropagateAtLaunch: aws.Bool(true)})
		}
		if _, err := as.CreateAutoScalingGroup(ctx, &autoscaling.CreateAutoScalingGroupInput{
			AutoScalingGroupName: aws.String(g.Name),
			LaunchTemplate:       &astypes.LaunchTemplateSpecification{LaunchTemplateName: aws.String(g.LaunchTemplate), Version: aws.String("$Latest")},
			MinSize:              aws.Int32(g.Min), MaxSize: aws.Int32(g.Max), DesiredCapacity: aws.Int32(g.Desired),
			AvailabilityZones:                []string{ExampleZone},
			NewInstancesProtectedFromScaleIn: aws.Bool(true), // protect_from_scale_in = true
			Tags:                             tags,
		}); err != nil {
			return fmt.Errorf("auto scaling group %s: %w", g.Name, err)
		}
	}
	return nil
}
