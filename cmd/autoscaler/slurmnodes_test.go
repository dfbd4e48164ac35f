package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/fleetcast/autoscaler/internal/cli"
	"github.com/fleetcast/autoscaler/internal/slurmtest"
	"github.com/fleetcast/autoscaler/slurm"
)

// TestRunSlurmNodes runs the controller (`run`) on two pools that share
// a real Slurm cluster's cloud nodes dgx-[1-3]: dgx-spot, the cheaper,
// always out of capacity, and dgx, servers the example commands plugin
// powers on and off (racks.sh, whose power-on starts the server's slurmd
// as its node and whose power-off stops it), each with a real agent (on
// go-nvml's mock DGX A100) once on; Slurm's resume and suspend programs
// are `autoscaler slurm resume|suspend`, which hand their hostlists to
// the controller. Jobs no agent knows are asked to checkpoint with
// SIGUSR1 (slurm.signal_jobs). An administrator has drained dgx-3.
//
//  1. A forecast rise (from a history imported before the start, in
//     which demand rises at this time of each day) launches a server
//     before any job asks for it: dgx-1 is powered up in Slurm before
//     the launch in dgx-spot, which is
//     refused, and is launched in dgx, powered up still; Slurm is told
//     its address as the plugin lists it; it is up with no job placed on
//     it.
//  2. A job pinned to dgx-1 runs there; another, that no node up can
//     take, is placed by Slurm on dgx-2, powered down, which Slurm
//     powers up: the controller launches that server by name, and the
//     job runs on it. It is not registered with dgx-2's agent.
//  3. The controller restarts: nothing is launched again.
//  4. dgx-1's job ends: the server is drained in Slurm and by its agent,
//     powered off, and powered down in Slurm. dgx-2, idle as its agent
//     sees it, is drained too; its job is sent SIGUSR1 by Slurm, and its
//     handler writes a checkpoint and ends the job three seconds later;
//     only then is dgx-2 powered off and powered down. No node goes
//     DOWN.
//
// dgx-3 is never touched.
func TestRunSlurmNodes(t *testing.T) {
	dir := t.TempDir()
	addr := freeAddr(t)
	// Slurm's programs: this test binary as the autoscaler command, with
	// a demand token made once the controller runs.
	program := func(name string) string {
		return slurmtest.Script(t, dir, name, `FLEETCAST_TEST_CLI="slurm `+name+` -addr http://`+addr+` -token-file `+dir+`/slurm-token $1" exec `+os.Args[0]+` -test.run='^$' >> `+dir+`/programs.log 2>&1`)
	}
	c := slurmtest.Start(t, slurmtest.Options{Nodes: []string{"gpu-1"}, CloudNodes: []string{"dgx-1", "dgx-2", "dgx-3"},
		Resume: program("resume"), Suspend: program("suspend"), ResumeTimeout: 90 * time.Second})
	ctx := context.Background()
	scontrol := func(args ...string) {
		t.Helper()
		if out, err := c.Command(ctx, "scontrol", args...).CombinedOutput(); err != nil {
			t.Fatalf("scontrol %v: %v: %s", args, err, out)
		}
	}
	scontrol("update", "nodename=dgx-3", "state=drain", "reason=bad HBM")
	// gpu-1, the one static node, is full.
	c.Submit(t, "--gres=gpu:8", "-w", "gpu-1")

	racks, spotRacks := filepath.Join(dir, "racks"), filepath.Join(dir, "spot-racks")
	servers := []string{"dgx-1", "dgx-2", "dgx-3"}
	for _, rd := range []string{racks, spotRacks} {
		if err := os.MkdirAll(rd, 0o700); err != nil {
			t.Fatal(err)
		}
		for _, s := range servers {
			if err := os.WriteFile(filepath.Join(rd, s), []byte("off\n"), 0o600); err != nil {
				t.Fatal(err)
			}
		}
	}
	// dgx-1 is reached at another loopback address than slurm.conf's
	// (127.0.0.1): its instance lists it, and the controller sets it.
	if err := os.MkdirAll(filepath.Join(racks, ".address"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(racks, ".address", "dgx-1"), []byte("127.0.0.2\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	script, err := filepath.Abs("../../examples/plugins/commands/racks.sh")
	if err != nil {
		t.Fatal(err)
	}
	// The servers' power: racks.sh, then each server's slurmd started (two
	// seconds on, as a server boots) or stopped, each logged with its
	// time. The spot pool has no capacity: its power-on exits 75.
	power := slurmtest.Script(t, dir, "power", "export PATH=/usr/sbin:/usr/bin:/sbin:/bin\n"+c.PowerFunctions()+`
cmd=$1
[ "$cmd" = list ] && exec `+script+` list
[ "$FLEETCAST_POOL" = dgx-spot ] && [ "$cmd" = power-on ] && { echo "no spot capacity" >&2; exit 75; }
`+script+` "$@" || exit $?
shift
for n in "$@"; do
	echo "$cmd $n $(date +%s.%N)" >> `+dir+`/power.log
	case $cmd in
	power-on) (sleep 2; resume_slurmd "$n") </dev/null >/dev/null 2>&1 & ;;
	power-off) suspend_slurmd "$n" ;;
	esac
done`)
	bin, sum := commandsPlugin(t)
	conf := filepath.Join(dir, "fleet.hcl")
	if err := os.WriteFile(conf, []byte(fmt.Sprintf(`
pool "dgx-spot" {
  provider       = "plugin"
  plugin         = "racks"
  instance_type  = "dgx-a100"
  gpus_per_node  = 8
  price_per_hour = 3.00
  lead_time      = "30s"
  max            = 3
  target {
    rack_dir = %q
  }
  slurm {
    nodes = "dgx-[1-3]"
  }
}
pool "dgx" {
  provider       = "plugin"
  plugin         = "racks"
  instance_type  = "dgx-a100"
  gpus_per_node  = 8
  price_per_hour = 9.00
  lead_time      = "30s"
  max            = 3
  target {
    rack_dir = %q
  }
  slurm {
    nodes = "dgx-[1-3]"
  }
}
plugin "racks" {
  path   = %q
  sha256 = %q
  config {
    list_command      = [%q, "list"]
    launch_command    = [%q, "power-on"]
    terminate_command = [%q, "power-off"]
  }
}
slurm {
  conf        = %q
  interval    = "1s"
  timeout     = "5s"
  signal_jobs = "USR1"
  partition "train" {
    pools = ["dgx-spot", "dgx"]
  }
}
limits {
  scale_in_share              = 1
  scale_in_delay_after_launch = "5s"
  scale_in_unneeded_time      = "5s"
}
forecast {
  step       = "1m"
  horizon    = "10m"
  hysteresis = "30s"
  quantile   = 0.1
}
controller {
  fleet         = "prod"
  interval      = "1s"
  listen        = %q
  state_dir     = %q
  agent_timeout = "30s"
}
`, spotRacks, racks, bin, sum, power, power, power, c.Conf, addr, filepath.Join(dir, "state"))), 0o600); err != nil {
		t.Fatal(err)
	}
	nodes := func() map[string]slurm.Node {
		s, err := (&slurm.Reader{Conf: c.Conf}).Read(ctx)
		if err != nil {
			t.Fatal(err)
		}
		out := map[string]slurm.Node{}
		for _, n := range s.Nodes {
			out[n.Name] = n
		}
		return out
	}
	jobsOn := func(node string) (n int) {
		s, err := (&slurm.Reader{Conf: c.Conf}).Read(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, j := range s.Jobs {
			if j.NodeList == node && (j.Running() || j.State == "CONFIGURING") {
				n++
			}
		}
		return n
	}
	on := func(s string) bool {
		b, _ := os.ReadFile(filepath.Join(racks, s))
		return strings.TrimSpace(string(b)) == "on"
	}
	up := func(n slurm.Node) bool {
		return n.State != "DOWN" && !n.HasFlag("POWERED_DOWN") && !n.HasFlag("POWERING_UP") && !n.HasFlag("NOT_RESPONDING")
	}
	// gpu-1's job runs before the controller starts: pending, it would be
	// demand.
	deadline := time.Now().Add(time.Minute)
	for jobsOn("gpu-1") != 1 {
		if time.Now().After(deadline) {
			t.Fatalf("gpu-1's job not running within a minute\n%s", c.Logs())
		}
		time.Sleep(200 * time.Millisecond)
	}
	// Two days of history in which demand rises to 8 GPUs for a minute,
	// two minutes from now of each day: the forecast's rise.
	rise := time.Now().UTC().Truncate(time.Minute).Add(2 * time.Minute)
	var series strings.Builder
	series.WriteString("time,gpus\n")
	for at := rise.Add(-48 * time.Hour); at.Before(rise.Add(-2 * time.Minute)); at = at.Add(time.Minute) {
		gpus := 0
		if at.Sub(rise)%(24*time.Hour) == 0 {
			gpus = 8
		}
		fmt.Fprintf(&series, "%s,%d\n", at.Format(time.RFC3339), gpus)
	}
	if err := os.WriteFile(filepath.Join(dir, "history.csv"), []byte(series.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	if code, _, errOut := cmdline("history", "import", "-config", conf, "-series", filepath.Join(dir, "history.csv")); code != cli.ExitOK {
		t.Fatalf("history import: exit %d: %s", code, errOut)
	}
	ctl, stop := startRunCLI(t, filepath.Join(dir, "controller.log"), conf, addr, filepath.Join(dir, "state"))
	base := ctl.base
	t.Setenv("FLEETCAST_API_TOKEN", "")
	if code, out, errOut := cmdline("api-token", "create", "-config", conf, "-scope", "demand", "slurm"); code != cli.ExitOK {
		t.Fatalf("api-token create: exit %d: %s", code, errOut)
	} else if err := os.WriteFile(filepath.Join(dir, "slurm-token"), []byte(out), 0o600); err != nil {
		t.Fatal(err)
	}
	// Each server's agent, started once it is on.
	agent := func(node string) {
		t.Helper()
		nd := filepath.Join(dir, "agent-"+node)
		if err := os.Mkdir(nd, 0o700); err != nil {
			t.Fatal(err)
		}
		code, out, errOut := cmdline("token", "issue", node, "-config", conf)
		if code != 0 {
			t.Fatalf("token issue %s: exit %d: %s", node, code, errOut)
		}
		if err := os.WriteFile(filepath.Join(nd, "credential"), []byte(out), 0o600); err != nil {
			t.Fatal(err)
		}
		startCLI(t, filepath.Join(nd, "agent.log"), "agent -controller "+base+" -token-file "+filepath.Join(nd, "credential")+" -node "+node+
			" -socket "+filepath.Join(nd, "agent.sock")+" -marker "+filepath.Join(nd, "draining")+" -state "+filepath.Join(nd, "state.json")+
			" -metrics 127.0.0.1:0 -interval 500ms -notices none", "FLEETCAST_TEST_NVML=dgxa100")
	}
	// A Slurm job is a training job (TestMain) registered with its node's
	// agent, once the agent is up; cancelled, it tells the agent it is
	// done, as a job's epilogue would.
	job := slurmtest.Script(t, dir, "job", `sock=`+dir+`/agent-$SLURMD_NODENAME/agent.sock
bin=`+os.Args[0]+`
until [ -S "$sock" ]; do sleep 0.2; done
FLEETCAST_TEST_JOB="$sock $SLURM_JOB_ID" "$bin" -test.run='^$' &
pid=$!
trap 'kill $pid; FLEETCAST_TEST_CLI="agent done -job $SLURM_JOB_ID -socket $sock" "$bin" -test.run="^$"; exit 0' TERM
wait $pid`)
	sbatch := func(args ...string) {
		t.Helper()
		if out, err := c.Command(ctx, "sbatch", append(args, "-p", "train", "--gres=gpu:8", "-o", filepath.Join(dir, "job-%j.out"), job)...).CombinedOutput(); err != nil {
			t.Fatalf("sbatch %v: %v: %s", args, err, out)
		}
	}

	// 1. The forecast's rise, before any job: dgx-1 powered up, and on.
	ctl.waitFor("dgx-1 on, and up in Slurm at 127.0.0.2", 3*time.Minute, func() bool {
		n := nodes()["dgx-1"]
		return on("dgx-1") && up(n) && n.Address == "127.0.0.2"
	})
	if n := jobsOn("dgx-1"); n != 0 || on("dgx-2") {
		t.Fatalf("dgx-1 up with %d jobs, dgx-2 on %v; want none, and no", n, on("dgx-2"))
	}
	agent("dgx-1")

	// 2. A job pinned to dgx-1; another that only a powered-down node
	// can take: Slurm resumes dgx-2, and the controller launches it.
	sbatch("-w", "dgx-1")
	ctl.waitFor("a job running on dgx-1", time.Minute, func() bool { return jobsOn("dgx-1") == 1 })
	// A job no agent knows, whose handler of SIGUSR1 writes a checkpoint
	// and ends the job three seconds later, each logged with its time.
	checkpointing := slurmtest.Script(t, dir, "checkpointing", `trap 'echo "checkpoint $(date +%s.%N)" >> `+dir+`/job.log; sleep 3; echo "end $(date +%s.%N)" >> `+dir+`/job.log; exit 0' USR1
sleep 3600 &
wait $!`)
	if out, err := c.Command(ctx, "sbatch", "-p", "train", "--gres=gpu:8", "-o", filepath.Join(dir, "checkpointing-%j.out"), checkpointing).CombinedOutput(); err != nil {
		t.Fatalf("sbatch: %v: %s", err, out)
	}
	ctl.waitFor("dgx-2 on", time.Minute, func() bool { return on("dgx-2") })
	agent("dgx-2")
	ctl.waitFor("the job running on dgx-2", time.Minute, func() bool { return jobsOn("dgx-2") == 1 && up(nodes()["dgx-2"]) })

	// 3. A restart launches nothing.
	stop()
	first := ctl.output()
	ctl, stop = startRunCLI(t, filepath.Join(dir, "controller-2.log"), conf, addr, filepath.Join(dir, "state"))
	time.Sleep(5 * time.Second)
	if strings.Contains(ctl.output(), "  launch ") || on("dgx-3") {
		t.Fatalf("after a restart: a launch, or dgx-3 on\n%s", ctl.output())
	}

	// 4. dgx-1's job ends: it is drained, powered off, powered down.
	// dgx-2 is drained, and kept while Slurm runs its job.
	scancel := func(node string) {
		t.Helper()
		if out, err := c.Command(ctx, "scancel", "-p", "train", "-w", node).CombinedOutput(); err != nil {
			t.Fatalf("scancel: %v: %s", err, out)
		}
	}
	scancel("dgx-1")
	off := func(node string) func() bool {
		return func() bool { n := nodes()[node]; return !on(node) && n.HasFlag("POWERED_DOWN") }
	}
	ctl.waitFor("dgx-1 off, and powered down in Slurm", 3*time.Minute, off("dgx-1"))
	ctl.waitFor("dgx-2 off, and powered down in Slurm", 3*time.Minute, off("dgx-2"))
	// The job's checkpoint, and its end, came before dgx-2's power-off.
	times := func(file string) map[string]float64 {
		b, _ := os.ReadFile(filepath.Join(dir, file))
		out := map[string]float64{}
		for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
			f := strings.Fields(line)
			if len(f) < 2 {
				continue
			}
			at, err := strconv.ParseFloat(f[len(f)-1], 64)
			if err != nil {
				t.Fatalf("%s: %q: %v", file, line, err)
			}
			out[strings.Join(f[:len(f)-1], " ")] = at
		}
		return out
	}
	jt, pw := times("job.log"), times("power.log")
	if jt["checkpoint"] == 0 || jt["end"] < jt["checkpoint"]+3 || pw["power-off dgx-2"] < jt["end"] {
		t.Errorf("dgx-2's job checkpointed at %.1f, ended at %.1f, dgx-2 powered off at %.1f; want a checkpoint, the end 3 s on, then the power-off", jt["checkpoint"], jt["end"], pw["power-off dgx-2"])
	}
	if pw["power-on dgx-1"] == 0 || pw["power-on dgx-2"] == 0 || pw["power-off dgx-1"] == 0 {
		t.Errorf("power log %v: want dgx-1 and dgx-2 powered on, then off", pw)
	}
	n := nodes()
	for _, name := range servers {
		if n[name].State == "DOWN" {
			t.Errorf("%s DOWN in Slurm: %+v", name, n[name])
		}
	}
	if d := n["dgx-3"]; !d.HasFlag("DRAIN") || d.Reason != "bad HBM" || !d.HasFlag("POWERED_DOWN") || on("dgx-3") {
		t.Errorf("dgx-3 %+v (on %v); want it as the administrator left it", d, on("dgx-3"))
	}
	metrics := ctl.api("GET", "/metrics", "")
	stop()
	got := first + ctl.output()
	programs, _ := os.ReadFile(filepath.Join(dir, "programs.log"))
	for _, want := range []string{"resume dgx-1: the cluster is read now", "resume dgx-2: the cluster is read now", "suspend dgx-1: the controller powers down", "suspend dgx-2: the controller powers down"} {
		if !strings.Contains(string(programs), want) {
			t.Errorf("Slurm's programs said no %q:\n%s", want, programs)
		}
	}
	for _, want := range []*regexp.Regexp{
		regexp.MustCompile(`slurm resume: nodes=dgx-2\b`),
		regexp.MustCompile(`powered up for a launch: pool=dgx-spot nodes=dgx-1`),
		regexp.MustCompile(`launch +1 x dgx-a100 in dgx-spot REFUSED by the cloud, pool backed off: [^\n]*no spot capacity`),
		regexp.MustCompile(`launch +1 x dgx-a100 in dgx: forecast p[0-9.]+ needs 8 GPUs at `),
		regexp.MustCompile(`slurm job asked to checkpoint: job=\d+ node=dgx-2 pool=dgx signal=USR1`),
		regexp.MustCompile(`slurm node change: op=set_address nodes=dgx-1 why="its instance is reached at 127.0.0.2"`),
		regexp.MustCompile(`slurm node left alone: pool=dgx-spot node=dgx-3 why="drained in Slurm by someone else \(reason: bad HBM\)"`),
		regexp.MustCompile(`slurm node change: op=drain nodes=dgx-1\b`),
		regexp.MustCompile(`slurm node change: op=drain nodes=dgx-2\b|op=drain nodes=dgx-\[1-2\]`),
		regexp.MustCompile(`slurm node change: op=power_down nodes=dgx-`),
		regexp.MustCompile(`drain      dgx-1 in dgx`),
		regexp.MustCompile(`drain      dgx-2 in dgx`),
	} {
		if !want.MatchString(got) {
			t.Errorf("the controller's output has no line matching %s:\n%s", want, got)
		}
	}
	if regexp.MustCompile(`powered up for a launch: pool=dgx nodes=dgx-1|power_down_force nodes=dgx-1`).MatchString(got) {
		t.Errorf("dgx-1, refused in dgx-spot, powered up again for dgx, or powered down between:\n%s", got)
	}
	if strings.Contains(got, "dgx-3 in dgx") || regexp.MustCompile(`slurm node change: [^\n]*dgx-3`).MatchString(got) {
		t.Errorf("dgx-3 touched:\n%s", got)
	}
	if regexp.MustCompile(`fleetcast_slurm_node_changes_total\{op="[a-z_]+",result="error"\} [1-9]`).MatchString(metrics) {
		t.Errorf("slurm node changes failed:\n%s", grepLines(metrics, "fleetcast_slurm_node_changes_total"))
	}
}
