// Package slurmtest runs a real Slurm cluster on loopback for tests:
// Debian's munged, slurmctld and one slurmd per node (`slurmd -N NAME`,
// each on its own port), with a generated slurm.conf and gres.conf whose
// GPUs are character devices made with mknod (slurmd requires devices for
// GPU gres). It needs root (mknod, and slurmd's own needs) and the
// packages slurm-wlm and munge; without them a test skips, or, under
// FLEETCAST_REQUIRE_SLURM=1 (CI), fails.
package slurmtest

import (
	"cmp"
	"context"
	"crypto/rand"
	"fmt"
	mrand "math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"
)

// Options shape the cluster.
type Options struct {
	// Nodes are the node names, each with GPUs GPUs of type GPUType
	// (default one node "gpu-1" of 8 "a100").
	Nodes   []string
	GPUs    int
	GPUType string
	// Partition is the one partition holding every node (default
	// "train").
	Partition string
	// Budget bounds the start, registration included (default 90 s).
	Budget time.Duration
	// CloudNodes are nodes of the partition too, of the same shape,
	// declared State=CLOUD: powered down at start, no slurmd running,
	// shown by the commands all the same (PrivateData=cloud). With them,
	// Slurm's power saving is on: slurmctld runs Resume to power nodes up
	// and Suspend to power them down (each given a hostlist; scripts, as
	// Script writes them), waiting ResumeTimeout (default 60 s) for a
	// resumed node's slurmd to register. Suspend is also run for nodes
	// idle an hour. Resume must start a slurmd for each node, and
	// Suspend stop it (PowerFunctions).
	CloudNodes      []string
	Resume, Suspend string
	ResumeTimeout   time.Duration
	// Conf is more of slurm.conf, lines before the nodes
	// ("SuspendExcNodes=cloud-1\n").
	Conf string
}

// Cluster is a running test cluster.
type Cluster struct {
	// Dir holds its files; Conf is its slurm.conf, for SLURM_CONF.
	Dir, Conf string
	o         Options
	ctld      *proc
	procs     []*proc
}

// proc is a daemon of the cluster; done closes once it has exited.
type proc struct {
	cmd  *exec.Cmd
	done chan struct{}
}

// Start starts a cluster, or skips the test where it cannot run (fails
// under FLEETCAST_REQUIRE_SLURM=1). The cluster is stopped when the test
// ends.
func Start(t testing.TB, o Options) *Cluster {
	t.Helper()
	if len(o.Nodes) == 0 {
		o.Nodes = []string{"gpu-1"}
	}
	if o.GPUs <= 0 {
		o.GPUs = 8
	}
	if o.GPUType == "" {
		o.GPUType = "a100"
	}
	if o.Partition == "" {
		o.Partition = "train"
	}
	if o.Budget <= 0 {
		o.Budget = 90 * time.Second
	}
	for _, bin := range []string{"munged", "slurmctld", "slurmd", "squeue", "sinfo", "sbatch"} {
		if _, err := exec.LookPath(bin); err != nil {
			unavailable(t, fmt.Sprintf("%s not found (Debian packages slurm-wlm and munge)", bin))
		}
	}
	if os.Geteuid() != 0 {
		unavailable(t, "a Slurm test cluster needs root (mknod for its GPU devices; slurmd)")
	}
	// A short directory: munge's socket path must fit in a sockaddr.
	dir, err := os.MkdirTemp("", "slurm")
	if err != nil {
		t.Fatal(err)
	}
	c := &Cluster{Dir: dir, Conf: filepath.Join(dir, "slurm.conf"), o: o}
	t.Cleanup(func() {
		c.Stop()
		os.RemoveAll(dir)
	})
	if err := c.write(); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(o.Budget)
	if err := c.start(deadline); err != nil {
		t.Fatalf("starting the Slurm test cluster in %s: %v\n%s", dir, err, c.Logs())
	}
	return c
}

// unavailable skips the test, or fails it under FLEETCAST_REQUIRE_SLURM=1.
func unavailable(t testing.TB, why string) {
	t.Helper()
	if os.Getenv("FLEETCAST_REQUIRE_SLURM") == "1" {
		t.Fatalf("FLEETCAST_REQUIRE_SLURM=1, but %s", why)
	}
	t.Skip(why)
}

// freePorts finds n consecutive free TCP ports on loopback.
func freePorts(n int) (int, error) {
	for try := 0; try < 50; try++ {
		base := 20000 + mrand.IntN(20000)
		ok := true
		for p := base; p < base+n && ok; p++ {
			ln, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", p))
			if err != nil {
				ok = false
				continue
			}
			ln.Close()
		}
		if ok {
			return base, nil
		}
	}
	return 0, fmt.Errorf("no %d free consecutive ports", n)
}

// write writes the munge key, the GPU devices, slurm.conf and gres.conf.
func (c *Cluster) write() error {
	for _, d := range []string{"state", "spool", "log", "dev", "munge"} {
		if err := os.MkdirAll(filepath.Join(c.Dir, d), 0o755); err != nil {
			return err
		}
	}
	if err := os.Chmod(filepath.Join(c.Dir, "munge"), 0o700); err != nil {
		return err
	}
	key := make([]byte, 1024)
	rand.Read(key)
	if err := os.WriteFile(filepath.Join(c.Dir, "munge", "munge.key"), key, 0o400); err != nil {
		return err
	}
	for i := range c.o.GPUs {
		dev := filepath.Join(c.Dir, "dev", fmt.Sprintf("nvidia%d", i))
		if err := syscall.Mknod(dev, syscall.S_IFCHR|0o666, int(195<<8|i)); err != nil {
			return fmt.Errorf("mknod %s: %w", dev, err)
		}
	}
	base, err := freePorts(2 + len(c.o.Nodes) + len(c.o.CloudNodes))
	if err != nil {
		return err
	}
	var conf strings.Builder
	fmt.Fprintf(&conf, `ClusterName=fleetcast
SlurmctldHost=localhost(127.0.0.1)
SlurmctldPort=%d
SlurmdPort=%d
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
AuthInfo=socket=%[3]s/munge/sock
CredType=cred/munge
StateSaveLocation=%[3]s/state
SlurmdSpoolDir=%[3]s/spool/%%n
SlurmctldPidFile=%[3]s/slurmctld.pid
SlurmdPidFile=%[3]s/slurmd-%%n.pid
SlurmctldLogFile=%[3]s/log/slurmctld.log
SlurmdLogFile=%[3]s/log/slurmd-%%n.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SchedulerType=sched/backfill
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
GresTypes=gpu
ReturnToService=2
MpiDefault=none
JobCompType=jobcomp/none
AccountingStorageType=accounting_storage/none
JobAcctGatherType=jobacct_gather/none
SlurmctldTimeout=30
SlurmdTimeout=30
MessageTimeout=5
`, base, base+1, c.Dir)
	conf.WriteString(c.o.Conf)
	for i, n := range c.o.Nodes {
		fmt.Fprintf(&conf, "NodeName=%s NodeHostname=localhost NodeAddr=127.0.0.1 Port=%d CPUs=2 RealMemory=1000 Gres=gpu:%s:%d State=UNKNOWN\n",
			n, base+2+i, c.o.GPUType, c.o.GPUs)
	}
	if len(c.o.CloudNodes) > 0 {
		fmt.Fprintf(&conf, "PrivateData=cloud\nSuspendProgram=%s\nResumeProgram=%s\nSuspendTime=3600\nSuspendTimeout=10\nResumeTimeout=%d\n",
			c.o.Suspend, c.o.Resume, int(cmp.Or(c.o.ResumeTimeout, time.Minute).Seconds()))
		for i, n := range c.o.CloudNodes {
			fmt.Fprintf(&conf, "NodeName=%s NodeHostname=localhost NodeAddr=127.0.0.1 Port=%d CPUs=2 RealMemory=1000 Gres=gpu:%s:%d State=CLOUD\n",
				n, base+2+len(c.o.Nodes)+i, c.o.GPUType, c.o.GPUs)
		}
	}
	fmt.Fprintf(&conf, "PartitionName=%s Nodes=%s Default=YES MaxTime=INFINITE State=UP\n", c.o.Partition, strings.Join(append(slices.Clone(c.o.Nodes), c.o.CloudNodes...), ","))
	if err := os.WriteFile(c.Conf, []byte(conf.String()), 0o644); err != nil {
		return err
	}
	gres := fmt.Sprintf("Name=gpu Type=%s File=%s/dev/nvidia[0-%d]\n", c.o.GPUType, c.Dir, c.o.GPUs-1)
	if c.o.GPUs == 1 {
		gres = fmt.Sprintf("Name=gpu Type=%s File=%s/dev/nvidia0\n", c.o.GPUType, c.Dir)
	}
	return os.WriteFile(filepath.Join(c.Dir, "gres.conf"), []byte(gres), 0o644)
}

// start starts munged, slurmctld and the slurmds, and waits until every
// node is idle.
func (c *Cluster) start(deadline time.Time) error {
	m := filepath.Join(c.Dir, "munge")
	munged := exec.Command("munged", "-F", "--force", "--key-file="+filepath.Join(m, "munge.key"), "--socket="+filepath.Join(m, "sock"),
		"--pid-file="+filepath.Join(m, "pid"), "--log-file="+filepath.Join(m, "log"), "--seed-file="+filepath.Join(m, "seed"))
	if _, err := c.spawn(munged); err != nil {
		return err
	}
	if err := waitFor(deadline, func() bool { _, err := os.Stat(filepath.Join(m, "sock")); return err == nil }); err != nil {
		return fmt.Errorf("munged: %w", err)
	}
	if err := c.StartController(); err != nil {
		return err
	}
	for _, n := range c.o.Nodes {
		if _, err := c.spawn(exec.Command("slurmd", "-D", "-N", n)); err != nil {
			return err
		}
	}
	return waitFor(deadline, func() bool {
		out, err := c.Command(context.Background(), "sinfo", "-h", "-N", "-o", "%N %T").Output()
		if err != nil {
			return false
		}
		idle := 0
		for line := range strings.Lines(string(out)) {
			name, state, _ := strings.Cut(strings.TrimSpace(line), " ")
			if slices.Contains(c.o.Nodes, name) && state == "idle" {
				idle++
			}
		}
		return idle == len(c.o.Nodes)
	})
}

// StartController starts slurmctld (again, after KillController).
func (c *Cluster) StartController() error {
	p, err := c.spawn(exec.Command("slurmctld", "-D", "-i"))
	c.ctld = p
	return err
}

// KillController kills slurmctld, as a crash would.
func (c *Cluster) KillController() {
	if c.ctld != nil {
		c.ctld.cmd.Process.Kill()
		<-c.ctld.done
	}
}

// spawn starts a daemon of the cluster with its SLURM_CONF, in the
// foreground of its own process group, to be stopped with it.
func (c *Cluster) spawn(cmd *exec.Cmd) (*proc, error) {
	cmd.Env = append(os.Environ(), "SLURM_CONF="+c.Conf)
	cmd.Dir = c.Dir
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	log, err := os.OpenFile(filepath.Join(c.Dir, "log", filepath.Base(cmd.Path)+".out"), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		return nil, err
	}
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Start(); err != nil {
		log.Close()
		return nil, fmt.Errorf("%s: %w", cmd.Path, err)
	}
	p := &proc{cmd: cmd, done: make(chan struct{})}
	c.procs = append(c.procs, p)
	go func() { cmd.Wait(); log.Close(); close(p.done) }()
	return p, nil
}

// Stop stops every daemon of the cluster and what runs under them (the
// jobs' steps).
func (c *Cluster) Stop() {
	for i := len(c.procs) - 1; i >= 0; i-- {
		syscall.Kill(-c.procs[i].cmd.Process.Pid, syscall.SIGKILL)
	}
	// The jobs' slurmstepd left the slurmds' groups: find them by the
	// cluster's directory in their environment's SLURM_CONF.
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid := 0
		if _, err := fmt.Sscan(e.Name(), &pid); err != nil || pid <= 1 {
			continue
		}
		env, err := os.ReadFile(filepath.Join("/proc", e.Name(), "environ"))
		if err == nil && strings.Contains(string(env), "SLURM_CONF="+c.Conf+"\x00") {
			syscall.Kill(pid, syscall.SIGKILL)
		}
	}
	for _, p := range c.procs {
		select {
		case <-p.done:
		case <-time.After(10 * time.Second):
		}
	}
	c.procs = nil
}

// PowerFunctions are the shell functions a Resume or Suspend script
// defines and runs for each node it powers up or down, the node's name
// their one argument: `resume_slurmd NAME` starts a slurmd for it, in a
// session of its own (a program slurmctld runs has its group killed when
// it ends), reporting itself booted now (-b), which registers with
// slurmctld as that node; `suspend_slurmd NAME` stops it.
func (c *Cluster) PowerFunctions() string {
	pid := c.Dir + `/resumed-"$1".pid`
	return `resume_slurmd() { SLURM_CONF=` + c.Conf + ` setsid /usr/sbin/slurmd -b -D -N "$1" </dev/null >>` + c.Dir + `/log/resumed.out 2>&1 & echo $! > ` + pid + `; }
suspend_slurmd() { [ -e ` + pid + ` ] && kill "$(cat ` + pid + `)" && rm -f ` + pid + `; true; }`
}

// Command is a client command (sbatch, squeue, scontrol, ...) against the
// cluster.
func (c *Cluster) Command(ctx context.Context, name string, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Env = append(os.Environ(), "SLURM_CONF="+c.Conf)
	cmd.Dir = c.Dir
	return cmd
}

// Submit runs sbatch with args, a job that sleeps an hour, and returns
// the job's ID.
func (c *Cluster) Submit(t testing.TB, args ...string) string {
	t.Helper()
	out, err := c.Command(context.Background(), "sbatch", append(append([]string{"--parsable"}, args...), "--wrap", "sleep 3600")...).CombinedOutput()
	if err != nil {
		t.Fatalf("sbatch %v: %v: %s", args, err, out)
	}
	id, _, _ := strings.Cut(strings.TrimSpace(string(out)), ";")
	return id
}

// Logs is the daemons' logs' ends, for a failure.
func (c *Cluster) Logs() string {
	var b strings.Builder
	files, _ := filepath.Glob(filepath.Join(c.Dir, "log", "*"))
	for _, f := range files {
		data, _ := os.ReadFile(f)
		if len(data) > 2000 {
			data = data[len(data)-2000:]
		}
		fmt.Fprintf(&b, "== %s\n%s\n", f, data)
	}
	return b.String()
}

// waitFor polls ok until it holds or the deadline passes.
func waitFor(deadline time.Time, ok func() bool) error {
	for !ok() {
		if time.Now().After(deadline) {
			return fmt.Errorf("not ready by the deadline")
		}
		time.Sleep(200 * time.Millisecond)
	}
	return nil
}
