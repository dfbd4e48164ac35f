package main

import (
	"context"
	"os"
	"os/exec"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/fleetcast/autoscaler/internal/mototest"
)

// TestTryMotoScript runs scripts/try-moto.sh as it is, as a person would
// from a clone: plan, a dry run that changes nothing, and a live run that
// scales a group out on a plain moto_server (which does not implement
// DescribeInstanceRefreshes).
func TestTryMotoScript(t *testing.T) {
	mototest.Require(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", "../try-moto.sh")
	// On a timeout the script is asked to stop, so that its trap stops
	// moto_server and the controller.
	cmd.Cancel = func() error { return cmd.Process.Signal(syscall.SIGTERM) }
	cmd.WaitDelay = 30 * time.Second
	// A free port, whatever the caller's environment says.
	cmd.Env = slices.DeleteFunc(os.Environ(), func(kv string) bool { return strings.HasPrefix(kv, "MOTO_PORT=") })
	start := time.Now()
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("scripts/try-moto.sh: %v after %s:\n%s", err, time.Since(start).Round(time.Second), out)
	}
	for _, want := range []string{
		"auto scaling group  fleetcast-spot-a100",
		"+ launch 2 x p5.48xlarge in h100-capacity-block",
		"Fleetcast controller (dry run: planning only) on 4 pools",
		"unchanged: every group has the desired capacity it was made with, and no instance was launched",
		"pushed: 80 GPUs pending in aws-ondemand-a100",
		"the endpoint does not implement DescribeInstanceRefreshes",
		"scaled out: fleetcast-",
		"stopping: the cycle in progress finished",
		"==> Done",
	} {
		if !strings.Contains(string(out), want) {
			t.Errorf("the script's output lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(string(out), "action failed") {
		t.Errorf("an action failed:\n%s", out)
	}
	t.Logf("scripts/try-moto.sh took %s", time.Since(start).Round(time.Second))
}
