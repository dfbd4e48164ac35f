package main

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/fleetcast/autoscaler/fleet"
	"github.com/fleetcast/autoscaler/internal/cli"
	"github.com/fleetcast/autoscaler/internal/slurmtest"
	"github.com/fleetcast/autoscaler/planner"
)

// slurmConfig is the local example with a slurm block whose commands
// print a capture of Slurm 22.05's JSON (squeue's with three reasons
// edited, as slurm.TestDemandLimits says), or, failing, exit as squeue
// does when slurmctld is down; partition train is served by the
// reservation and AWS's on-demand pool.
func slurmConfig(t *testing.T, failing bool) string {
	t.Helper()
	dir := t.TempDir()
	local, err := os.ReadFile(localConfig)
	if err != nil {
		t.Fatal(err)
	}
	script := func(name, body string) string { return slurmtest.Script(t, dir, name, body) }
	squeue := "cat " + slurmtest.Capture(t, "squeue-22.05-limits.json")
	if failing {
		squeue = `echo "squeue: error: slurm_load_jobs error: Unable to contact slurm controller (connect failure)" >&2; exit 1`
	}
	cfg := string(local) + `
slurm {
  squeue = "` + script("squeue", squeue) + `"
  sinfo  = "` + script("sinfo", "cat "+slurmtest.Capture(t, "sinfo-22.05.json")) + `"

  partition "train" {
    pools = ["reserved-a100", "aws-ondemand-a100"]
  }
}
`
	path := filepath.Join(dir, "fleet.hcl")
	if err := os.WriteFile(path, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestPlanSlurm: `plan` with a slurm block reads the queue once: the job
// waiting for priority is pending demand scoped to partition train's
// pools, the jobs blocked by limits and the one too wide for the
// partition buy nothing, and the plan shows them by reason, the running
// job and the nodes by state (testdata/plan-slurm.golden); with squeue
// failing the plan is still made, and says the source is degraded.
func TestPlanSlurm(t *testing.T) {
	var tr transcript
	tr.normalize = func(s string) string { return s }
	at := "2026-11-30T14:11:00Z"
	base := planJSON(t, "-config", localConfig, "-at", at)
	for _, failing := range []bool{false, true} {
		path := slurmConfig(t, failing)
		tr.normalize = func(s string) string { return strings.ReplaceAll(s, filepath.Dir(path), "$TMP") }
		args := []string{"-config", path, "-at", at}
		code, out, errOut := cmdline(append([]string{"plan"}, args...)...)
		tr.add("plan with squeue failing="+map[bool]string{false: "no", true: "yes"}[failing], code, out, "")
		if code != cli.ExitOK {
			t.Fatalf("exit %d: %s", code, errOut)
		}
		p := planJSON(t, args...)
		q := p.Queue
		switch {
		case q == nil:
			t.Fatal("the plan has no queue")
		case failing:
			if !strings.Contains(q.Degraded, "Unable to contact slurm controller") || p.Demand.PendingGPUs != base.Demand.PendingGPUs ||
				!slices.ContainsFunc(p.Notes, func(n planner.Note) bool { return n.Code == planner.ReasonQueueDegraded }) {
				t.Errorf("failing: queue %+v, pending %d (without slurm %d), notes %+v", q, p.Demand.PendingGPUs, base.Demand.PendingGPUs, p.Notes)
			}
		default:
			want := []fleet.QueueLine{
				{Partition: "train", Reason: "PartitionNodeLimit", Jobs: 1, GPUs: 24},
				{Partition: "train", Reason: "AssocGrpGRES", Jobs: 1, GPUs: 2},
				{Partition: "train", Reason: "QOSMaxGRESPerUser", Jobs: 1, GPUs: 2},
				{Partition: "train", Reason: "Priority", Jobs: 1, GPUs: 1, Bought: true, DemandGPUs: 1},
			}
			if q.Degraded != "" || !slices.Equal(q.Pending, want) || q.RunningJobs != 1 || p.Demand.PendingGPUs != base.Demand.PendingGPUs+1 {
				t.Errorf("queue %+v, pending %d (without slurm %d)", q, p.Demand.PendingGPUs, base.Demand.PendingGPUs)
			}
		}
	}
	tr.check(t, "plan-slurm.golden", 2)
}

// TestPlanSlurmLive: `plan` on a real Slurm 22.05 (two nodes of eight
// A100s, both taken by a running job): a two-node job waiting for
// resources is two whole nodes' GPUs pending for partition train's pools;
// a held job and one waiting on the running one are counted by reason and
// bought nothing.
func TestPlanSlurmLive(t *testing.T) {
	c := slurmtest.Start(t, slurmtest.Options{Nodes: []string{"gpu-1", "gpu-2"}})
	local, err := os.ReadFile(localConfig)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "fleet.hcl")
	cfg := string(local) + `
slurm {
  conf    = "` + c.Conf + `"
  timeout = "5s"

  partition "train" {
    pools = ["reserved-a100", "aws-ondemand-a100"]
  }
}
`
	if err := os.WriteFile(path, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	running := c.Submit(t, "--gres=gpu:8", "-N", "2", "-t", "60", "-A", "team-b", "-p", "train")
	wide := c.Submit(t, "--gres=gpu:4", "-N", "2", "-A", "team-a", "-p", "train")
	c.Submit(t, "-H", "--gres=gpu:2", "-A", "team-c")
	c.Submit(t, "--dependency=afterok:"+running, "--gres=gpu:1", "-A", "team-c")
	at := "2026-11-30T14:11:00Z"
	base := planJSON(t, "-config", localConfig, "-at", at)
	deadline := time.Now().Add(30 * time.Second)
	for {
		p := planJSON(t, "-config", path, "-at", at)
		got := map[string]fleet.QueueLine{}
		for _, l := range p.Queue.Pending {
			got[l.Reason] = l
		}
		held, dep := got["JobHeldUser"], got["Dependency"]
		waiting := got["Resources"]
		if waiting.Jobs == 0 {
			waiting = got["Priority"]
		}
		if p.Queue.RunningJobs == 1 && held.Jobs == 1 && dep.Jobs == 1 && waiting.Jobs == 1 {
			if held.GPUs != 2 || held.Bought || dep.GPUs != 1 || dep.Bought || !waiting.Bought || waiting.DemandGPUs != 16 ||
				p.Demand.PendingGPUs != base.Demand.PendingGPUs+16 || p.Queue.Degraded != "" {
				t.Errorf("job %s: pending %d (without slurm %d), queue %+v", wide, p.Demand.PendingGPUs, base.Demand.PendingGPUs, p.Queue)
			}
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the queue not as submitted within 30 s: %+v", p.Queue)
		}
		time.Sleep(500 * time.Millisecond)
	}
}

// TestSlurmProgramUsage: `autoscaler slurm resume|suspend` says what is
// wrong with its command line, and exits 2; a controller it cannot reach
// is exit 1, naming the hostlist. (Run by slurmctld: TestRunSlurmNodes.)
func TestSlurmProgramUsage(t *testing.T) {
	t.Setenv("FLEETCAST_API_TOKEN", "")
	token := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(token, []byte("fca1.x\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"slurm"}, cli.ExitUsage, "slurm: want resume or suspend"},
		{[]string{"slurm", "restart", "dgx-1"}, cli.ExitUsage, "slurm: want resume or suspend"},
		{[]string{"slurm", "resume", "-addr", "http://127.0.0.1:1", "-token-file", token}, cli.ExitUsage, "slurm resume: name the hostlist: slurm resume HOSTLIST"},
		{[]string{"slurm", "suspend", "-token-file", token, "dgx-1"}, cli.ExitUsage, "slurm suspend: -addr is required"},
		{[]string{"slurm", "resume", "-addr", "http://127.0.0.1:1", "dgx-1"}, cli.ExitUsage, "slurm resume: no API token: give -token-file"},
		{[]string{"slurm", "resume", "-addr", "http://127.0.0.1:1", "-token-file", token, "dgx-[1-2]"}, cli.ExitError, "slurm resume dgx-[1-2]: "},
	} {
		code, _, errOut := cmdline(tt.args...)
		if code != tt.code || !strings.Contains(errOut, tt.want) {
			t.Errorf("%q: exit %d, %q; want %d with %q", tt.args, code, errOut, tt.code, tt.want)
		}
	}
}
