package aws

import (
	"context"
	"os"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	awsconfig "github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/autoscaling"
	astypes "github.com/aws/aws-sdk-go-v2/service/autoscaling/types"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"

	"github.com/fleetcast/autoscaler/internal/mototest"
)

// The tests run against moto_server through internal/mototest.

func TestMain(m *testing.M) {
	code := m.Run()
	mototest.Stop()
	os.Exit(code)
}

// motoURL returns the running moto_server's URL, reset to empty.
func motoURL(t *testing.T) string {
	t.Helper()
	return mototest.URL(t)
}

// testCreds are static credentials for the local server.
var testCreds = awsconfig.WithCredentialsProvider(credentials.NewStaticCredentialsProvider("AKIDFLEETCAST", "secret", ""))

// fixture is an account on moto with what Terraform would have made: a
// launch template, and Auto Scaling groups from it.
type fixture struct {
	asg *autoscaling.Client
	ec2 *ec2.Client
	url string
}

const region = "us-east-1"

func newFixture(t *testing.T, endpoint string) *fixture {
	t.Helper()
	cfg, err := awsconfig.LoadDefaultConfig(context.Background(), awsconfig.WithRegion(region), testCreds)
	if err != nil {
		t.Fatal(err)
	}
	return &fixture{
		asg: autoscaling.NewFromConfig(cfg, func(o *autoscaling.Options) { o.BaseEndpoint = aws.String(endpoint) }),
		ec2: ec2.NewFromConfig(cfg, func(o *ec2.Options) { o.BaseEndpoint = aws.String(endpoint) }),
		url: endpoint,
	}
}

// template creates a launch template for GPU nodes and returns its name.
func (f *fixture) template(t *testing.T, name, instanceType string) string {
	t.Helper()
	_, err := f.ec2.CreateLaunchTemplate(context.Background(), &ec2.CreateLaunchTemplateInput{
		LaunchTemplateName: aws.String(name),
		LaunchTemplateData: &ec2types.RequestLaunchTemplateData{ImageId: aws.String("ami-12c6146b"), InstanceType: ec2types.InstanceType(instanceType)},
	})
	if err != nil {
		t.Fatal(err)
	}
	return name
}

// group creates an Auto Scaling group from a template, tagged as a
// Fleetcast pool, as examples/terraform/aws does.
func (f *fixture) group(t *testing.T, name, template, pool string, minSize, maxSize, desired int32) {
	t.Helper()
	_, err := f.asg.CreateAutoScalingGroup(context.Background(), &autoscaling.CreateAutoScalingGroupInput{
		AutoScalingGroupName: aws.String(name),
		LaunchTemplate:       &astypes.LaunchTemplateSpecification{LaunchTemplateName: aws.String(template), Version: aws.String("$Default")},
		MinSize:              aws.Int32(minSize), MaxSize: aws.Int32(maxSize), DesiredCapacity: aws.Int32(desired),
		AvailabilityZones: []string{"us-east-1a", "us-east-1b"},
		Tags: []astypes.Tag{
			{Key: aws.String(TagManaged), Value: aws.String("true"), PropagateAtLaunch: aws.Bool(true)},
			{Key: aws.String(TagPool), Value: aws.String(pool), PropagateAtLaunch: aws.Bool(true)},
		},
	})
	if err != nil {
		t.Fatal(err)
	}
}
