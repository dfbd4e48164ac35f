package slurm

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/fleetcast/autoscaler/internal/slurmtest"
)

// TestControlRefuses: what is not a node's name, or a drain without a
// reason, is refused before scontrol runs.
func TestControlRefuses(t *testing.T) {
	c := &Control{Scontrol: "/nonexistent/scontrol", Scancel: "/nonexistent/scancel"}
	ctx := context.Background()
	for _, tt := range []struct {
		err  error
		want string
	}{
		{c.PowerUp(ctx, nil), "no node"},
		{c.PowerUp(ctx, []string{"gpu-[1-2]"}), `node name "gpu-[1-2]"`},
		{c.Resume(ctx, []string{""}), `node name ""`},
		{c.Drain(ctx, []string{"gpu-1"}, " \n"), "a reason of 1 to 200 characters"},
		{c.SetAddress(ctx, "gpu-1", "", ""), "no address"},
		{c.PowerDown(ctx, []string{"gpu-1"}, true), "/nonexistent/scontrol update nodename=gpu-1 state=POWER_DOWN_ASAP: "},
		{c.Signal(ctx, []string{"12"}, "SIGUSR1 "), `signal "SIGUSR1 ": want a signal's name`},
		{c.Signal(ctx, []string{"12"}, ""), `signal "": want a signal's name`},
		{c.Signal(ctx, nil, "USR1"), "no job"},
		{c.Signal(ctx, []string{"12", "-u"}, "USR1"), `job "-u": want a job's ID`},
		{c.Signal(ctx, []string{"12_3"}, "USR1"), "/nonexistent/scancel --signal=USR1 --batch 12_3: "},
	} {
		if tt.err == nil || !strings.Contains(tt.err.Error(), tt.want) {
			t.Errorf("%v; want an error saying %q", tt.err, tt.want)
		}
	}
}

// TestControlLiveCluster: on a real Slurm 22.05 with power saving, a
// cloud node powered up runs the ResumeProgram and takes jobs once its
// slurmd registers; its job, sent SIGUSR1 (Signal), checkpoints and
// ends; drained with a reason it is Fleetcast's drain, which Resume
// ends; powered down as soon as it is idle, it runs the SuspendProgram
// and is powered down again, though SuspendExcNodes names it (which
// keeps Slurm alone from powering it down); scontrol's refusals are
// errors naming the command.
func TestControlLiveCluster(t *testing.T) {
	dir := t.TempDir()
	resumed, suspended := filepath.Join(dir, "resumed"), filepath.Join(dir, "suspended")
	// Each script is given a hostlist; it logs it, and starts or stops a
	// slurmd for each node. slurmctld runs them with little of an
	// environment: they set their own, once the cluster's slurm.conf is
	// known (they must exist before).
	resume := slurmtest.Script(t, dir, "resume", "exit 1")
	suspend := slurmtest.Script(t, dir, "suspend", "exit 1")
	// SuspendExcNodes keeps Slurm from powering the nodes down on its
	// own; the controller's power-downs still do.
	c := slurmtest.Start(t, slurmtest.Options{CloudNodes: []string{"cloud-1", "cloud-2"}, Resume: resume, Suspend: suspend, ResumeTimeout: 45 * time.Second,
		Conf: "SuspendExcNodes=cloud-[1-2]\n"})
	env := "export PATH=/usr/sbin:/usr/bin:/sbin:/bin SLURM_CONF=" + c.Conf + "\n"
	slurmtest.Script(t, dir, "resume", env+c.PowerFunctions()+`
echo "$1" >> `+resumed+`
for n in $(scontrol show hostnames "$1"); do resume_slurmd "$n"; done`)
	slurmtest.Script(t, dir, "suspend", env+c.PowerFunctions()+`
echo "$1" >> `+suspended+`
for n in $(scontrol show hostnames "$1"); do suspend_slurmd "$n"; done`)
	ctl := &Control{Conf: c.Conf, Timeout: 10 * time.Second}
	r := &Reader{Conf: c.Conf}
	ctx := context.Background()
	node := func(name string) Node {
		s, err := r.Read(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, n := range s.Nodes {
			if n.Name == name {
				return n
			}
		}
		t.Fatalf("no node %s", name)
		return Node{}
	}
	waitNode := func(name, what string, ok func(Node) bool) Node {
		t.Helper()
		deadline := time.Now().Add(60 * time.Second)
		for {
			n := node(name)
			if ok(n) {
				return n
			}
			if time.Now().After(deadline) {
				b, _ := os.ReadFile(resumed)
				t.Logf("ResumeProgram given %q; the cluster's logs:\n%s", b, c.Logs())
				t.Fatalf("%s not %s within 60 s: %+v", name, what, n)
			}
			time.Sleep(500 * time.Millisecond)
		}
	}
	if n := node("cloud-1"); !n.HasFlag("CLOUD") || !n.HasFlag("POWERED_DOWN") {
		t.Fatalf("cloud-1 at start: %+v; want powered down", n)
	}

	if err := ctl.SetAddress(ctx, "cloud-1", "127.0.0.1", "localhost"); err != nil {
		t.Fatal(err)
	}
	if err := ctl.PowerUp(ctx, []string{"cloud-1"}); err != nil {
		t.Fatal(err)
	}
	waitNode("cloud-1", "up", func(n Node) bool {
		return n.State == "IDLE" && !n.HasFlag("POWERED_DOWN") && !n.HasFlag("POWERING_UP")
	})
	if b, _ := os.ReadFile(resumed); strings.TrimSpace(string(b)) != "cloud-1" {
		t.Errorf("ResumeProgram given %q; want cloud-1", b)
	}

	// A job on it, whose handler of SIGUSR1 writes a checkpoint and
	// ends the job: sent it by Signal.
	ckpt, ready := filepath.Join(dir, "checkpoint"), filepath.Join(dir, "ready")
	job := slurmtest.Script(t, dir, "job", `trap 'echo "$SLURM_JOB_ID" > `+ckpt+`; exit 0' USR1
touch `+ready+`
sleep 3600 &
wait $!`)
	out, err := c.Command(ctx, "sbatch", "--parsable", "-w", "cloud-1", "--gres=gpu:1", "-o", "/dev/null", job).CombinedOutput()
	if err != nil {
		t.Fatalf("sbatch: %v: %s", err, out)
	}
	id := strings.TrimSpace(string(out))
	waitNode("cloud-1", "running the job", func(n Node) bool { return n.State == "MIXED" })
	// The node runs the job before its script has set its trap: signal
	// it once the script says it has.
	for start := time.Now(); ; time.Sleep(50 * time.Millisecond) {
		if _, err := os.Stat(ready); err == nil {
			break
		}
		if time.Since(start) > time.Minute {
			t.Fatal("the job's script did not start within a minute")
		}
	}
	if err := ctl.Signal(ctx, []string{id}, "USR1"); err != nil {
		t.Fatal(err)
	}
	waitNode("cloud-1", "idle, the job ended", func(n Node) bool { return n.State == "IDLE" && !n.HasFlag("COMPLETING") })
	if b, _ := os.ReadFile(ckpt); strings.TrimSpace(string(b)) != id {
		t.Errorf("checkpoint %q; want job %s's handler to have written its ID", b, id)
	}
	if err := ctl.Signal(ctx, []string{"999999"}, "USR1"); err == nil || !strings.Contains(err.Error(), "scancel --signal=USR1 --batch 999999") {
		t.Errorf("signal to a job the cluster has not: %v", err)
	}

	if err := ctl.Drain(ctx, []string{"cloud-1"}, "scale-in: \"idle\"\n"); err != nil {
		t.Fatal(err)
	}
	n := waitNode("cloud-1", "drained", func(n Node) bool { return n.HasFlag("DRAIN") })
	if n.Reason != "fleetcast: scale-in:  idle" {
		t.Errorf("drain reason %q", n.Reason)
	}
	if err := ctl.Resume(ctx, []string{"cloud-1"}); err != nil {
		t.Fatal(err)
	}
	waitNode("cloud-1", "resumed", func(n Node) bool { return !n.HasFlag("DRAIN") })

	if err := ctl.PowerDown(ctx, []string{"cloud-1"}, true); err != nil {
		t.Fatal(err)
	}
	waitNode("cloud-1", "powered down", func(n Node) bool { return n.HasFlag("POWERED_DOWN") })
	if b, _ := os.ReadFile(suspended); !slices.Contains(strings.Fields(string(b)), "cloud-1") {
		t.Errorf("SuspendProgram given %q; want cloud-1", b)
	}
	if _, err := os.Stat(filepath.Join(c.Dir, "resumed-cloud-1.pid")); !os.IsNotExist(err) {
		t.Errorf("cloud-1's slurmd not stopped: %v", err)
	}

	err = ctl.Drain(ctx, []string{"no-such-node"}, "x")
	if err == nil || !strings.Contains(err.Error(), "scontrol update nodename=no-such-node state=DRAIN") || !strings.Contains(err.Error(), "exit 1") {
		t.Errorf("drain of a node the cluster has not: %v", err)
	}
}
