package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awsconfig "github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/autoscaling"
	astypes "github.com/aws/aws-sdk-go-v2/service/autoscaling/types"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"

	"github.com/fleetcast/autoscaler/internal/gcptest"
	"github.com/fleetcast/autoscaler/internal/mototest"
	"github.com/fleetcast/autoscaler/planner"
)

// motoAccount points the AWS SDK's default chain at endpoint (moto, or a
// proxy in front of it), with static credentials, for this test and the
// commands it runs, and returns clients for the test's own set-up.
func motoAccount(t *testing.T, endpoint string) (*ec2.Client, *autoscaling.Client) {
	t.Helper()
	for k, v := range map[string]string{"AWS_ENDPOINT_URL": endpoint, "AWS_ACCESS_KEY_ID": "AKIDFLEETCAST", "AWS_SECRET_ACCESS_KEY": "secret",
		"AWS_REGION": "us-east-1", "AWS_CONFIG_FILE": "/nonexistent", "AWS_SHARED_CREDENTIALS_FILE": "/nonexistent"} {
		t.Setenv(k, v)
	}
	cfg, err := awsconfig.LoadDefaultConfig(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return ec2.NewFromConfig(cfg), autoscaling.NewFromConfig(cfg)
}

// gcpAccount is a fake Compute Engine reached the way the controller
// reaches Google's, with Application Default Credentials: a service
// account key file (GOOGLE_APPLICATION_CREDENTIALS) whose token the fake
// issues and then requires.
func gcpAccount(t *testing.T) *gcptest.Compute {
	t.Helper()
	f := gcptest.NewCompute(t)
	t.Setenv("GOOGLE_APPLICATION_CREDENTIALS", f.ServiceAccountKey(t.TempDir()))
	return f
}

// withEndpoint gives a config's gcp blocks the endpoint (the fake's).
func withEndpoint(src, endpoint string) string {
	return strings.ReplaceAll(src, "  gcp {\n", fmt.Sprintf("  gcp {\n    endpoint = %q\n", endpoint))
}

const a100Template = "https://www.googleapis.com/compute/v1/projects/my-gpu-project/global/instanceTemplates/a100-template"

// TestPlanAcrossClouds runs `plan -config examples/cloud.hcl` and `run
// -dry-run` against AWS (moto, holding what examples/terraform/aws makes)
// and GCP (the fake, holding the managed instance group of
// examples/terraform/gcp, one VM running) at once: one fleet, read from
// both. Then with Compute Engine unreachable: the plan is made all the
// same, the GCP pool left alone and counted at its max, the AWS pools
// serving.
func TestPlanAcrossClouds(t *testing.T) {
	ec, as := motoAccount(t, mototest.URL(t))
	ctx := context.Background()
	if err := mototest.CreateExample(ctx, ec, as); err != nil {
		t.Fatal(err)
	}
	f := gcpAccount(t)
	f.AddGroup(&gcptest.Group{Project: "my-gpu-project", Zone: "us-central1-a", Name: "fleetcast-ondemand-a100", Template: a100Template,
		Labels: map[string]string{gcptest.LabelFleet: "default"}}, 1)
	src, err := os.ReadFile("../../examples/cloud.hcl")
	if err != nil {
		t.Fatal(err)
	}
	conf := localExample(t, withEndpoint(string(src), f.URL()))
	// Five nodes read, every one's agent silent (plan reads the clouds
	// only): 40 GPUs, scale-in halted; the GCP VM among the unknown
	// instances.
	p := planJSON(t, "-config", conf, "-at", "2026-12-03T14:00:00Z")
	if c := p.Capacity; c != (planner.Capacity{ReadyGPUs: 40, SilentNodes: 5}) {
		t.Errorf("capacity %+v; want 40 GPUs ready on 5 nodes with silent agents", c)
	}
	if !slices.Contains(p.UnknownNodes, "fleetcast-ondemand-a100-0001") {
		t.Errorf("unknown instances %v; want the GCP VM among them", p.UnknownNodes)
	}
	if p.ScaleInHalt == "" || !slices.Contains(noteCodes(p), planner.ReasonScaleInHalted) {
		t.Errorf("notes %v; want scale-in halted", noteCodes(p))
	}
	if f.Count("get") == 0 || f.Count("list") == 0 || f.Count("machineType") != 1 || f.Count("template") != 1 {
		t.Errorf("plan read the GCP group %d times, its instances %d, its machine type %d, its template %d", f.Count("get"), f.Count("list"), f.Count("machineType"), f.Count("template"))
	}
	code, out, errOut := cmdline("run", "-config", conf, "-dry-run", "-for", "1ms", "-listen", "127.0.0.1:0")
	if code != 0 || !strings.Contains(out, "Fleetcast controller (dry run: planning only) on 4 pools") {
		t.Fatalf("run -dry-run: exit %d\n%s\n%s", code, out, errOut)
	}
	if f.Count("resize") != 0 {
		t.Fatalf("a dry run resized the GCP group")
	}

	// Compute Engine unreachable (a closed port): the plan is made, the
	// GCP pool counted at its max against the limits.
	closed := "http://" + freeAddr(t)
	conf = localExample(t, withEndpoint(string(src), closed))
	p = planJSON(t, "-config", conf, "-at", "2026-12-03T14:00:00Z")
	if p.Capacity.ReadyGPUs != 32 {
		t.Errorf("plan with GCP unreachable: capacity %+v; want the AWS pools' 32 GPUs ready", p.Capacity)
	}
	// The pool never read (counted at its max: the code's meaning), with
	// the pool and the cloud's error named.
	neverRead := 0
	for _, n := range p.Notes {
		if n.Code == planner.ReasonPoolNeverRead && strings.Contains(n.Text, "gcp-ondemand-a100") && strings.Contains(n.Text, "connection refused") {
			neverRead++
		}
	}
	if neverRead != 1 || slices.ContainsFunc(p.Actions, func(a planner.Action) bool { return a.Pool == "gcp-ondemand-a100" }) {
		t.Errorf("plan with GCP unreachable: notes %+v, actions %v; want gcp-ondemand-a100 never read (connection refused), and left alone", p.Notes, actionsOf(p))
	}
}

// TestRunFailsOverAcrossClouds runs the controller (`run`) against AWS
// (moto, behind a proxy that answers as AWS does when it is out of GPUs)
// and GCP (the fake) at once, with a scheduler pushing its pending GPUs:
//
//  1. 16 GPUs wait. The cheapest pool, AWS spot, refuses the launch
//     (InsufficientInstanceCapacity): it is backed off, and the next cycle
//     buys the GPUs in the GCP managed instance group, cheaper than AWS
//     on-demand.
//  2. 16 more wait, and the GCP zone has run out of A100s: the resize
//     succeeds, and the VMs fail their last attempt
//     (ZONE_RESOURCE_POOL_EXHAUSTED). They are deleted at once, the GCP
//     pool backed off, and the GPUs bought in AWS on-demand.
//
// Nothing is launched twice; every step is in the output's action lines,
// in the logged notes' codes and in the metrics.
func TestRunFailsOverAcrossClouds(t *testing.T) {
	proxy := mototest.NewProxy(t)
	ec, as := motoAccount(t, proxy.URL)
	ctx := context.Background()
	for _, name := range []string{"fleetcast-spot-a100", "fleetcast-ondemand-a100"} {
		if _, err := ec.CreateLaunchTemplate(ctx, &ec2.CreateLaunchTemplateInput{LaunchTemplateName: aws.String(name),
			LaunchTemplateData: &ec2types.RequestLaunchTemplateData{ImageId: aws.String("ami-12c6146b"), InstanceType: ec2types.InstanceType("p4d.24xlarge")}}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := as.CreateAutoScalingGroup(ctx, &autoscaling.CreateAutoScalingGroupInput{
		AutoScalingGroupName: aws.String("fleetcast-ondemand-a100"),
		LaunchTemplate:       &astypes.LaunchTemplateSpecification{LaunchTemplateName: aws.String("fleetcast-ondemand-a100")},
		MinSize:              aws.Int32(0), MaxSize: aws.Int32(4), DesiredCapacity: aws.Int32(0), AvailabilityZones: []string{"us-east-1a"},
		Tags: []astypes.Tag{{Key: aws.String("fleetcast/managed"), Value: aws.String("true"), PropagateAtLaunch: aws.Bool(true)},
			{Key: aws.String("fleetcast/pool"), Value: aws.String("aws-ondemand-a100"), PropagateAtLaunch: aws.Bool(true)}},
	}); err != nil {
		t.Fatal(err)
	}
	proxy.Inject("RunInstances", mototest.Fault{Status: 500, Code: "InsufficientInstanceCapacity",
		Message: "We currently do not have sufficient p4d.24xlarge capacity in the Availability Zone you requested (us-east-1a)."})
	f := gcpAccount(t)
	mig := f.AddGroup(&gcptest.Group{Project: "ml", Zone: "us-central1-a", Name: "fleetcast-ondemand-a100",
		Template: "https://www.googleapis.com/compute/v1/projects/ml/global/instanceTemplates/a100-template",
		Labels:   map[string]string{gcptest.LabelFleet: "prod"}}, 0)

	dir := t.TempDir()
	addr := freeAddr(t)
	conf := filepath.Join(dir, "fleet.hcl")
	if err := os.WriteFile(conf, []byte(fmt.Sprintf(`
pool "aws-spot-a100" {
  provider       = "aws"
  region         = "us-east-1"
  zones          = ["us-east-1a"]
  instance_type  = "p4d.24xlarge"
  gpus_per_node  = 8
  capacity       = "spot"
  price_per_hour = 12.50
  lead_time      = "8m"
  max            = 8
  aws {
    launch_template = "fleetcast-spot-a100"
  }
}
pool "gcp-ondemand-a100" {
  provider       = "gcp"
  region         = "us-central1"
  zones          = ["us-central1-a"]
  instance_type  = "a2-highgpu-8g"
  gpus_per_node  = 8
  price_per_hour = 29.39
  lead_time      = "12m"
  max            = 4
  gcp {
    project  = "ml"
    zone     = "us-central1-a"
    mig      = "fleetcast-ondemand-a100"
    endpoint = %q
  }
}
pool "aws-ondemand-a100" {
  provider       = "aws"
  region         = "us-east-1"
  zones          = ["us-east-1a"]
  instance_type  = "p4d.24xlarge"
  gpus_per_node  = 8
  price_per_hour = 32.77
  lead_time      = "9m"
  max            = 4
  aws {
    asg = "fleetcast-ondemand-a100"
  }
}
controller {
  fleet     = "prod"
  interval  = "1s"
  listen    = %q
  state_dir = %q
}
`, f.URL(), addr, filepath.Join(dir, "state"))), 0o600); err != nil {
		t.Fatal(err)
	}
	// The counts below hold when the run (about 10 s) falls in one step
	// of the forecast (the default, 10m).
	clearOfStepEdge(t, 10*time.Minute, time.Minute)
	ctl, _ := startRunCLI(t, filepath.Join(dir, "controller.log"), conf, addr, filepath.Join(dir, "state"))
	waitFor := func(what string, ok func() bool) { t.Helper(); ctl.waitFor(what, time.Minute, ok) }
	api, output := ctl.api, ctl.output
	desired := func() int32 {
		g, err := as.DescribeAutoScalingGroups(ctx, &autoscaling.DescribeAutoScalingGroupsInput{AutoScalingGroupNames: []string{"fleetcast-ondemand-a100"}})
		if err != nil || len(g.AutoScalingGroups) != 1 {
			t.Fatalf("the on-demand group: %+v, %v", g, err)
		}
		return aws.ToInt32(g.AutoScalingGroups[0].DesiredCapacity)
	}
	target := func() (n int32) {
		f.Do(func() { n = mig.Target })
		return n
	}

	// 1. Spot refuses; GCP takes the launch.
	api("POST", "/v1/demand", `{"source": "slurm", "pending": [{"gpus": 16}]}`)
	waitFor("the launch falling back to GCP", func() bool { return target() == 2 })
	if n := proxy.Count("RunInstances"); n != 1 || desired() != 0 {
		t.Fatalf("%d spot launches, on-demand desired %d; want the one refused, and none", n, desired())
	}
	f.Boot(mig)

	// 2. The GCP zone stocks out; AWS on-demand takes the launch.
	f.Do(func() { mig.Stockout = "ZONE_RESOURCE_POOL_EXHAUSTED" })
	api("POST", "/v1/demand", `{"source": "slurm", "pending": [{"gpus": 32}]}`)
	waitFor("the launch falling back to AWS on-demand", func() bool { return desired() == 2 })
	waitFor("the VMs GCP cannot make deleted", func() bool { _, creating, _ := f.Members(mig); return creating == 0 && target() == 2 })

	// Settled: nothing more is launched, anywhere.
	time.Sleep(3 * time.Second)
	running, _, deleting := f.Members(mig)
	if n := proxy.Count("RunInstances"); n != 1 || desired() != 2 || target() != 2 || running != 2 || deleting != 2 || f.Count("resize") != 2 {
		t.Fatalf("spot launches %d, on-demand desired %d, GCP target %d (%d running, %d deleted) after %d resizes; want 1, 2, 2 (2, 2) after 2\n%s",
			n, desired(), target(), running, deleting, f.Count("resize"), output())
	}
	// The action lines, each as often as it happened (their reasons'
	// words are the planner's: planner.TestReasonTexts); the failing
	// launches' terminations are counted as capacity errors below (their
	// code, launch_failing), and the pool skipped while failing is a note
	// of code pool_failing naming it.
	got := output()
	for _, want := range []struct {
		line string
		n    int
	}{
		{"launch     2 x p4d.24xlarge in aws-spot-a100 REFUSED ", 1},
		{"launch     2 x a2-highgpu-8g in gcp-ondemand-a100: ", 2},
		{"terminate  fleetcast-ondemand-a100-0005 in gcp-ondemand-a100: ", 1},
		{"launch     2 x p4d.24xlarge in aws-ondemand-a100: ", 1},
	} {
		if n := strings.Count(got, want.line); n != want.n {
			t.Errorf("the controller's output has %d lines with %q, want %d:\n%s", n, want.line, want.n, got)
		}
	}
	if !regexp.MustCompile(`plan note: note="[^"]*\bgcp-ondemand-a100\b[^"]*" code=pool_failing`).MatchString(got) {
		t.Errorf("the controller's log has no note of code pool_failing naming gcp-ondemand-a100:\n%s", got)
	}
	metrics := api("GET", "/metrics", "")
	for _, want := range []*regexp.Regexp{
		regexp.MustCompile(`fleetcast_capacity_errors_total\{pool="aws-spot-a100"\} 1\b`),
		regexp.MustCompile(`fleetcast_capacity_errors_total\{pool="gcp-ondemand-a100"\} 1\b`),
		regexp.MustCompile(`fleetcast_actions_total\{kind="launch",pool="gcp-ondemand-a100",result="ok"\} 2\b`),
		regexp.MustCompile(`fleetcast_actions_total\{kind="launch",pool="aws-ondemand-a100",result="ok"\} 1\b`),
		regexp.MustCompile(`fleetcast_actions_total\{kind="terminate",pool="gcp-ondemand-a100",result="ok"\} 2\b`),
	} {
		if !want.MatchString(metrics) {
			t.Errorf("metrics lack %s:\n%s", want, grepLines(metrics, "fleetcast_"))
		}
	}
}

// grepLines are the lines of text that contain sub.
func grepLines(text, sub string) string {
	var out []string
	for _, line := range strings.Split(text, "\n") {
		if strings.Contains(line, sub) && !strings.HasPrefix(line, "#") {
			out = append(out, line)
		}
	}
	return strings.Join(out, "\n")
}
