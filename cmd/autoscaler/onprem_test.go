package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/autoscaling"
	astypes "github.com/aws/aws-sdk-go-v2/service/autoscaling/types"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"

	"github.com/fleetcast/autoscaler/internal/mototest"
	"github.com/fleetcast/autoscaler/internal/proctest"
)

// commandsPlugin builds the example on-prem plugin
// (examples/plugins/commands) and returns its path and SHA-256.
func commandsPlugin(t *testing.T) (path, sum string) {
	return buildPlugin(t, "../../examples/plugins/commands", "fleetcast-commands")
}

// onpremConfig is a fleet of an on-prem pool, two servers powered on and
// off by the example plugin running examples/plugins/commands/racks.sh
// (their power states in files in racks), cheapest, and an AWS burst pool
// (an Auto Scaling group on moto).
func onpremConfig(t *testing.T, dir, racks, addr string) (conf, bin string) {
	t.Helper()
	bin, sum := commandsPlugin(t)
	script, err := filepath.Abs("../../examples/plugins/commands/racks.sh")
	if err != nil {
		t.Fatal(err)
	}
	conf = filepath.Join(dir, "fleet.hcl")
	src := fmt.Sprintf(`
pool "onprem-a100" {
  provider       = "plugin"
  plugin         = "racks"
  instance_type  = "dgx-a100"
  gpus_per_node  = 8
  price_per_hour = 9.00
  lead_time      = "2m"
  max            = 4
  target {
    rack_dir = %q
  }
}
pool "aws-burst-a100" {
  provider       = "aws"
  region         = "us-east-1"
  zones          = ["us-east-1a"]
  instance_type  = "p4d.24xlarge"
  gpus_per_node  = 8
  price_per_hour = 32.77
  lead_time      = "2m"
  max            = 4
  aws {
    asg = "fleetcast-burst-a100"
  }
}
plugin "racks" {
  path   = %q
  sha256 = %q
  config {
    list_command      = [%q, "list"]
    launch_command    = [%q, "power-on"]
    terminate_command = [%q, "power-off"]
    verify_command    = [%q, "verify"]
  }
}
limits {
  scale_in_share = 1
  # Scale-in's waits at the test's clock (a cycle a second).
  scale_in_delay_after_launch = "5s"
  scale_in_unneeded_time      = "5s"
}
forecast {
  step       = "1m"
  horizon    = "10m"
  hysteresis = "1m"
  # Bought for the pending GPUs alone: a history of a few minutes has an
  # upper quantile far above them when the first cycles straddle a step,
  # and the test counts the nodes that serve the 32 GPUs pending.
  quantile   = 0.1
}
controller {
  fleet         = "prod"
  interval      = "1s"
  listen        = %q
  state_dir     = %q
  agent_timeout = "30s"
  bootstrap_token_file = %q
}
`, racks, bin, sum, script, script, script, script, addr, filepath.Join(dir, "state"), filepath.Join(dir, "bootstrap-token"))
	if err := os.WriteFile(conf, []byte(src), 0o600); err != nil {
		t.Fatal(err)
	}
	return conf, bin
}

// TestRunOnPremAndAWS runs the controller (`run`) on an on-prem pool
// driven by the example plugin, whose commands are racks.sh, and an AWS
// pool on moto, with a scheduler pushing its pending GPUs and a real
// agent (on go-nvml's mock DGX A100) on every node:
//
//  1. 32 GPUs wait. The on-prem pool, cheapest, is asked for 4 servers
//     and has 2: the plugin powers them on and answers that capacity ran
//     out; the pool is backed off, and the next cycle buys the other 16
//     GPUs in AWS.
//  2. The controller restarts with the GPUs still pending: nothing is
//     launched again.
//  3. The demand ends, and the nodes idle: each is drained (its agent
//     confirms), then powered off through the plugin or terminated in
//     its Auto Scaling group.
//
// Nothing is launched twice, and every step is in the output and the
// metrics.
func TestRunOnPremAndAWS(t *testing.T) {
	proxy := mototest.NewProxy(t)
	ec, as := motoAccount(t, proxy.URL)
	ctx := context.Background()
	if _, err := ec.CreateLaunchTemplate(ctx, &ec2.CreateLaunchTemplateInput{LaunchTemplateName: aws.String("fleetcast-burst-a100"),
		LaunchTemplateData: &ec2types.RequestLaunchTemplateData{ImageId: aws.String("ami-12c6146b"), InstanceType: ec2types.InstanceType("p4d.24xlarge")}}); err != nil {
		t.Fatal(err)
	}
	if _, err := as.CreateAutoScalingGroup(ctx, &autoscaling.CreateAutoScalingGroupInput{
		AutoScalingGroupName: aws.String("fleetcast-burst-a100"),
		LaunchTemplate:       &astypes.LaunchTemplateSpecification{LaunchTemplateName: aws.String("fleetcast-burst-a100")},
		MinSize:              aws.Int32(0), MaxSize: aws.Int32(4), DesiredCapacity: aws.Int32(0), AvailabilityZones: []string{"us-east-1a"},
	}); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	racks := filepath.Join(dir, "racks")
	if err := os.MkdirAll(filepath.Join(racks, ".identity"), 0o700); err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{"gpu-01", "gpu-02"} {
		if err := os.WriteFile(filepath.Join(racks, s), []byte("off\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		// Each server's identity, set when it was provisioned (racks.sh
		// verify checks it).
		if err := os.WriteFile(filepath.Join(racks, ".identity", s), []byte("host-key-of-"+s+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	bootstrap := strings.Repeat("fleet-bootstrap-secret-", 3)
	if err := os.WriteFile(filepath.Join(dir, "bootstrap-token"), []byte(bootstrap+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	power := func() string {
		var out []string
		for _, s := range []string{"gpu-01", "gpu-02"} {
			b, _ := os.ReadFile(filepath.Join(racks, s))
			out = append(out, s+" "+strings.TrimSpace(string(b)))
		}
		return strings.Join(out, ", ")
	}
	addr := freeAddr(t)
	conf, bin := onpremConfig(t, dir, racks, addr)
	ctl, stop := startRunCLI(t, filepath.Join(dir, "controller.log"), conf, addr, filepath.Join(dir, "state"))
	// Through ctl, which the restart below replaces.
	base := ctl.base
	api := func(method, path, body string) string { t.Helper(); return ctl.api(method, path, body) }
	output := func() string { return ctl.output() }
	waitFor := func(what string, within time.Duration, ok func() bool) { t.Helper(); ctl.waitFor(what, within, ok) }
	group := func() (desired int32, ids []string) {
		g, err := as.DescribeAutoScalingGroups(ctx, &autoscaling.DescribeAutoScalingGroupsInput{AutoScalingGroupNames: []string{"fleetcast-burst-a100"}})
		if err != nil || len(g.AutoScalingGroups) != 1 {
			t.Fatalf("the burst group: %+v, %v", g, err)
		}
		for _, in := range g.AutoScalingGroups[0].Instances {
			ids = append(ids, aws.ToString(in.InstanceId))
		}
		return aws.ToInt32(g.AutoScalingGroups[0].DesiredCapacity), ids
	}

	// 1. The on-prem pool runs out at 2 servers; AWS takes the rest.
	api("POST", "/v1/demand", `{"source": "slurm", "pending": [{"gpus": 32}]}`)
	waitFor("both servers powered on", 30*time.Second, func() bool { return power() == "gpu-01 on, gpu-02 on" })
	waitFor("the rest launched in AWS", 30*time.Second, func() bool { d, ids := group(); return d == 2 && len(ids) == 2 })
	_, awsNodes := group()

	// The running controller's plugins, and their health.
	code, out, errOut := cmdline("plugins", "-addr", base)
	if ok := regexp.MustCompile(`(?m)^racks +fleetcast-commands 0\.1\.0 +1 +onprem-a100 +ok$`); code != 0 || !ok.MatchString(out) {
		t.Errorf("plugins -addr: exit %d, want %s\n%s\n%s", code, ok, out, errOut)
	}
	metrics := api("GET", "/metrics", "")
	for _, want := range []*regexp.Regexp{
		regexp.MustCompile(`fleetcast_capacity_errors_total\{pool="onprem-a100"\} 1\b`),
		regexp.MustCompile(`fleetcast_actions_total\{kind="launch",pool="aws-burst-a100",result="ok"\} 1\b`),
	} {
		if !want.MatchString(metrics) {
			t.Errorf("metrics lack %s:\n%s", want, grepLines(metrics, "fleetcast_"))
		}
	}

	// The controller restarted (stopped, and run again on its state),
	// with the scheduler's 32 GPUs still pending: nothing is launched
	// again, on-prem or in AWS.
	stop()
	first := output()
	ctl, stop = startRunCLI(t, filepath.Join(dir, "controller-2.log"), conf, addr, filepath.Join(dir, "state"))
	api("POST", "/v1/demand", `{"source": "slurm", "pending": [{"gpus": 32}]}`)
	time.Sleep(3 * time.Second)
	if d, _ := group(); d != 2 || power() != "gpu-01 on, gpu-02 on" || strings.Contains(output(), "  launch ") {
		t.Fatalf("after a restart: AWS desired %d, %s; want 2, both on, and no launch\n%s", d, power(), output())
	}

	// Every node's agent reports its eight idle GPUs. The on-prem
	// servers bootstrap their credentials with the fleet's secret and
	// their identity, which the plugin checks (verify_command); the AWS
	// nodes' are issued by the operator (`token issue`).
	nodes := append([]string{"gpu-01", "gpu-02"}, awsNodes...)
	for _, node := range nodes {
		nd := filepath.Join(dir, "agent-"+node)
		if err := os.Mkdir(nd, 0o700); err != nil {
			t.Fatal(err)
		}
		how := ""
		if strings.HasPrefix(node, "gpu-") {
			if err := os.WriteFile(filepath.Join(nd, "bootstrap"), []byte(bootstrap+"\n"), 0o600); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(nd, "identity"), []byte("host-key-of-"+node+"\n"), 0o600); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(nd, "identity.sh"), []byte("#!/bin/sh\nexec /bin/cat "+filepath.Join(nd, "identity")+"\n"), 0o700); err != nil {
				t.Fatal(err)
			}
			how = " -bootstrap-token-file " + filepath.Join(nd, "bootstrap") + " -identity command -identity-command " + filepath.Join(nd, "identity.sh")
		} else {
			code, out, errOut := cmdline("token", "issue", node, "-config", conf)
			if code != 0 {
				t.Fatalf("token issue %s: exit %d: %s", node, code, errOut)
			}
			if err := os.WriteFile(filepath.Join(nd, "credential"), []byte(out), 0o600); err != nil {
				t.Fatal(err)
			}
		}
		startCLI(t, filepath.Join(nd, "agent.log"), "agent -controller "+base+" -token-file "+filepath.Join(nd, "credential")+" -node "+node+how+
			" -socket "+filepath.Join(nd, "agent.sock")+" -marker "+filepath.Join(nd, "draining")+" -state "+filepath.Join(nd, "state.json")+
			" -metrics 127.0.0.1:0 -interval 500ms -notices none", "FLEETCAST_TEST_NVML=dgxa100")
	}

	// 3. The demand ends: every node is drained, and powered off or
	// terminated.
	api("POST", "/v1/demand", `{"source": "slurm", "pending": []}`)
	waitFor("the servers powered off", 2*time.Minute, func() bool { return power() == "gpu-01 off, gpu-02 off" })
	waitFor("the AWS nodes terminated", 2*time.Minute, func() bool { d, _ := group(); return d == 0 })
	time.Sleep(2 * time.Second)
	if d, _ := group(); d != 0 || power() != "gpu-01 off, gpu-02 off" {
		t.Fatalf("after the scale-in: AWS desired %d, %s; want 0, both off", d, power())
	}
	metrics = api("GET", "/metrics", "")
	stop()
	if left := proctest.Running(bin); len(left) > 0 {
		t.Errorf("plugin processes left running after the controller stopped: %v", left)
	}
	// The action lines (their reasons' words are the planner's:
	// planner.TestReasonTexts; the refusal is counted as a capacity error
	// above), and the log's.
	got := first + output()
	for _, want := range []string{
		`launch     4 x dgx-a100 in onprem-a100 REFUSED `,
		`launch     2 x p4d.24xlarge in aws-burst-a100: `,
		`drain      gpu-01 in onprem-a100`,
		`drain      gpu-02 in onprem-a100`,
		`drain      ` + awsNodes[0] + ` in aws-burst-a100`,
		`drain      ` + awsNodes[1] + ` in aws-burst-a100`,
		// The servers' credentials, bootstrapped with the plugin's check.
		`node registered: node=gpu-01 pool=onprem-a100 via=bootstrap`,
		`node registered: node=gpu-02 pool=onprem-a100 via=bootstrap`,
		// The plugin's own log, tagged with its name.
		// (its fields in any order: go-plugin reads them into a map).
		`[INFO]  autoscaler.plugin.racks.fleetcast-commands: powering on: `,
		`servers=[gpu-01, gpu-02]`,
		`key=fc-launch-onprem-a100-`,
	} {
		if !strings.Contains(got, want) {
			t.Errorf("the controller's output lacks %q:\n%s", want, got)
		}
	}
	if strings.Contains(metrics, `fleetcast_actions_total{kind="launch"`) {
		t.Errorf("launches after the restart:\n%s", grepLines(metrics, "fleetcast_actions_total"))
	}
	for _, want := range []*regexp.Regexp{
		regexp.MustCompile(`fleetcast_actions_total\{kind="terminate",pool="onprem-a100",result="ok"\} [12]\b`),
		regexp.MustCompile(`fleetcast_actions_total\{kind="terminate",pool="aws-burst-a100",result="ok"\} [12]\b`),
	} {
		if !want.MatchString(metrics) {
			t.Errorf("metrics lack %s:\n%s", want, grepLines(metrics, "fleetcast_"))
		}
	}
}
