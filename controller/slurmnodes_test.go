package controller

import (
	"context"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	dto "github.com/prometheus/client_model/go"

	"github.com/fleetcast/autoscaler/fleet"
	"github.com/fleetcast/autoscaler/internal/slurmtest"
	"github.com/fleetcast/autoscaler/slurm"
)

// TestSlurmNodesLive: on a real Slurm whose cloud nodes are a pool's, the
// source powers up the names a launch is bound to before it is made;
// drains a node in Slurm while its instance drains, and resumes it when
// the drain is cancelled; powers a node down once its instance is gone;
// takes a node Slurm powers up for a job with no instance as a request,
// a whole node of demand in its pool, which the next launch is bound to;
// and never touches a node an administrator drained.
func TestSlurmNodesLive(t *testing.T) {
	dir := t.TempDir()
	// With Fleetcast, Slurm's resume and suspend programs act on nothing
	// here: the controller launches and terminates the instances, whose
	// slurmds the test starts and stops (bootSlurmd).
	noop := slurmtest.Script(t, dir, "noop", "exit 0")
	c := slurmtest.Start(t, slurmtest.Options{Nodes: []string{"gpu-1"}, CloudNodes: []string{"dgx-1", "dgx-2", "dgx-3"},
		Resume: noop, Suspend: noop, ResumeTimeout: 60 * time.Second})
	boot := slurmtest.Script(t, dir, "boot", "export PATH=/usr/sbin:/usr/bin:/sbin:/bin\n"+c.PowerFunctions()+"\nresume_slurmd \"$1\"")
	halt := slurmtest.Script(t, dir, "halt", "export PATH=/usr/sbin:/usr/bin:/sbin:/bin\n"+c.PowerFunctions()+"\nsuspend_slurmd \"$1\"")
	run := func(script, node string) {
		t.Helper()
		if out, err := exec.Command(script, node).CombinedOutput(); err != nil {
			t.Fatalf("%s %s: %v: %s", script, node, err, out)
		}
	}
	set := fleet.DefaultSlurmSettings()
	set.Conf, set.Timeout = c.Conf, 10*time.Second
	pool := fleet.Pool{Name: "dgx", Provider: "plugin", InstanceType: "dgx", GPUsPerNode: 8, Max: 3,
		ProvisionTimeout: 10 * time.Minute, SlurmNodes: []string{"dgx-1", "dgx-2", "dgx-3"}}
	now := t0
	pending := &Pending{}
	src, err := NewSlurmSource(SlurmOptions{Settings: set, Pools: []fleet.Pool{pool}, Pending: pending,
		Now: func() time.Time { return now }, Log: hclog.NewNullLogger(), Act: true})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	read := func() map[string]slurm.Node {
		t.Helper()
		if err := src.Read(ctx); err != nil {
			t.Fatal(err)
		}
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
	// until reads, as the source, until ok holds of the nodes (Slurm
	// takes its changes in a few seconds).
	until := func(what string, ok func(map[string]slurm.Node) bool) map[string]slurm.Node {
		t.Helper()
		deadline := time.Now().Add(60 * time.Second)
		for {
			nodes := read()
			if ok(nodes) {
				return nodes
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: not within 60 s: %+v\n%s", what, nodes, c.Logs())
			}
			time.Sleep(time.Second)
		}
	}
	admin := func() {
		t.Helper()
		if out, err := c.Command(ctx, "scontrol", "update", "nodename=dgx-3", "state=drain", "reason=bad HBM").CombinedOutput(); err != nil {
			t.Fatalf("an administrator's drain: %v: %s", err, out)
		}
	}
	admin()
	read()
	if changesOf(src, "power_down", "ok") != 0 {
		t.Fatal("changes before a cycle handed the fleet over")
	}
	src.SetFleet(now, nil, nil)

	// A launch of two: dgx-1 and dgx-2, powered up first; dgx-3 is the
	// administrator's.
	names, err := src.Bind(ctx, "dgx", 3, now)
	if err != nil || !slices.Equal(names, []string{"dgx-1", "dgx-2"}) {
		t.Fatalf("bind: %q, %v; want dgx-1 and dgx-2", names, err)
	}
	until("dgx-1 and dgx-2 powering up", func(n map[string]slurm.Node) bool {
		return has(n["dgx-1"], "POWERING_UP") && has(n["dgx-2"], "POWERING_UP")
	})
	if gpus, _ := pending.Demand(now); gpus != 0 {
		t.Fatalf("pending %d GPUs while the bound nodes power up; want none", gpus)
	}
	// The instances boot: their slurmds register.
	run(boot, "dgx-1")
	run(boot, "dgx-2")
	until("dgx-1 and dgx-2 up", func(n map[string]slurm.Node) bool {
		return n["dgx-1"].State == "IDLE" && len(n["dgx-1"].Flags) == 1 && n["dgx-2"].State == "IDLE" && len(n["dgx-2"].Flags) == 1
	})
	live := []fleet.Node{{ID: "dgx-1", Pool: "dgx", State: fleet.Ready}, {ID: "dgx-2", Pool: "dgx", State: fleet.Ready}}
	src.SetFleet(now, live, nil)

	// dgx-1 drains, and the drain is cancelled.
	live[0].State = fleet.Draining
	src.SetFleet(now, live, nil)
	until("dgx-1 drained in Slurm", func(n map[string]slurm.Node) bool {
		return has(n["dgx-1"], "DRAIN") && n["dgx-1"].Reason == "fleetcast: scale-in"
	})
	live[0].State = fleet.Ready
	src.SetFleet(now, live, nil)
	until("dgx-1 resumed", func(n map[string]slurm.Node) bool { return !has(n["dgx-1"], "DRAIN") })

	// dgx-2's instance is terminated: it is powered down.
	run(halt, "dgx-2")
	src.SetFleet(now, live[:1], nil)
	until("dgx-2 powered down", func(n map[string]slurm.Node) bool { return has(n["dgx-2"], "POWERED_DOWN") })

	// A job no node up can take: Slurm powers dgx-2 up for it (its
	// resume program does nothing), a request the next launch is bound
	// to, with nothing more powered up.
	c.Submit(t, "--gres=gpu:8", "-w", "gpu-1")
	c.Submit(t, "--gres=gpu:8", "-w", "dgx-1")
	c.Submit(t, "--gres=gpu:8")
	until("a request for dgx-2", func(map[string]slurm.Node) bool {
		src.mu.Lock()
		defer src.mu.Unlock()
		return slices.Equal(src.names.requested, []slurm.Request{{Pool: "dgx", Node: "dgx-2"}})
	})
	if _, scoped := pending.Demand(now); !slices.Equal(scoped, []fleet.ScopedDemand{{Pool: "dgx", Nodes: 1, GPUs: 8}}) {
		t.Errorf("pending demand %+v; want one whole node of dgx", scoped)
	}
	ups := changesOf(src, "power_up", "ok")
	if names, err := src.Bind(ctx, "dgx", 1, now); err != nil || !slices.Equal(names, []string{"dgx-2"}) {
		t.Fatalf("bind after the request: %q, %v; want dgx-2", names, err)
	}
	if got := changesOf(src, "power_up", "ok"); got != ups {
		t.Errorf("%g power-ups for a node Slurm powers up already", got-ups)
	}
	run(boot, "dgx-2")
	nodes := until("dgx-2 up, running the job", func(n map[string]slurm.Node) bool { return n["dgx-2"].GPUsUsed == 8 })

	// The administrator's node was never touched.
	if n := nodes["dgx-3"]; n.Reason != "bad HBM" || !n.HasFlag("DRAIN") || !n.HasFlag("POWERED_DOWN") {
		t.Errorf("dgx-3: %+v; want it as the administrator left it", n)
	}
	src.mu.Lock()
	why := src.names.untouched["dgx-3"]
	src.mu.Unlock()
	if !strings.Contains(why, "drained in Slurm by someone else (reason: bad HBM)") {
		t.Errorf("dgx-3 left alone because %q", why)
	}
	for _, op := range []string{"power_up", "power_down", "drain", "resume"} {
		if changesOf(src, op, "ok") == 0 || changesOf(src, op, "error") != 0 {
			t.Errorf("%s: %g ok, %g failed; want some, none failed", op,
				changesOf(src, op, "ok"), changesOf(src, op, "error"))
		}
	}
}

// TestSlurmBind: a launch takes Slurm's requests in its pool first, then
// powered-down names in the pool's order, passing over names with an
// instance (terminating too) or a launch, an administrator's, and those
// powering up or down; it powers up only the names it chose that were
// powered down, and binds nothing if that fails. A refused launch's names
// are released. In a pool of no names it names nothing.
func TestSlurmBind(t *testing.T) {
	dir := t.TempDir()
	calls := filepath.Join(dir, "calls")
	scontrol := slurmtest.Script(t, dir, "scontrol", `echo "$@" >> `+calls+`; [ ! -e `+dir+`/fail ]`)
	set := fleet.DefaultSlurmSettings()
	set.Scontrol = scontrol
	pool := fleet.Pool{Name: "dgx", GPUsPerNode: 8, ProvisionTimeout: time.Hour, SlurmNodes: []string{"d1", "d2", "d3", "d4", "d5", "d6", "d7", "d8"}}
	src, err := NewSlurmSource(SlurmOptions{Settings: set, Pools: []fleet.Pool{pool, simPool("other", 4)}, Pending: &Pending{}, Now: func() time.Time { return t0 }, Act: true})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	down := func(name string, flags ...string) slurm.Node {
		return slurm.Node{Name: name, State: "IDLE", Flags: append([]string{"CLOUD", "POWERED_DOWN"}, flags...)}
	}
	src.names.nodes = []slurm.Node{
		down("d1"), // its instance was just launched
		{Name: "d2", State: "MIXED", Flags: []string{"CLOUD", "POWERING_UP"}}, // Slurm's request
		down("d3", "POWERING_DOWN"),
		down("d4", "POWER_UP"),
		{Name: "d5", State: "IDLE", Flags: []string{"CLOUD", "POWERED_DOWN", "DRAIN"}, Reason: "bad HBM"},
		down("d6"),
		down("d7"),
		down("d8"),
	}
	src.names.requested = []slurm.Request{{Pool: "dgx", Node: "d2"}}
	src.SetFleet(t0, []fleet.Node{{ID: "d1", Pool: "dgx", State: fleet.Pending}, {ID: "d7", Pool: "dgx", State: fleet.Terminating}}, nil)
	// scontrol failing: nothing bound.
	if err := os.WriteFile(filepath.Join(dir, "fail"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if names, err := src.Bind(ctx, "dgx", 3, t0); err == nil || names != nil || !strings.Contains(err.Error(), "pool dgx: powering up Slurm nodes d[6,8] for a launch: ") {
		t.Fatalf("bind with scontrol failing: %q, %v; want an error, and nothing bound", names, err)
	}
	os.Remove(filepath.Join(dir, "fail"))
	names, err := src.Bind(ctx, "dgx", 4, t0)
	if err != nil || !slices.Equal(names, []string{"d2", "d6", "d8"}) {
		t.Fatalf("bind of 4: %q, %v; want d2 (requested), d6 and d8, no more", names, err)
	}
	if b, _ := os.ReadFile(calls); string(b) != "update nodename=d[6,8] state=POWER_UP\nupdate nodename=d[6,8] state=POWER_UP\n" {
		t.Errorf("scontrol run as %q; want d6 and d8 powered up (twice: once failing)", b)
	}
	// Bound names are taken until their instances are listed; a refused
	// launch's are released at the next SetFleet, but for one listed.
	if names, err := src.Bind(ctx, "dgx", 1, t0); err != nil || names != nil {
		t.Fatalf("bind with every name taken: %q, %v", names, err)
	}
	src.Refused([]string{"d2", "d6", "d8"})
	src.SetFleet(t0, []fleet.Node{{ID: "d1", Pool: "dgx", State: fleet.Pending}, {ID: "d6", Pool: "dgx", State: fleet.Pending}}, nil)
	src.mu.Lock()
	bound := slices.Sorted(maps.Keys(src.names.bound))
	src.mu.Unlock()
	if len(bound) != 0 {
		t.Errorf("bound after a refusal and a listing: %q; want none", bound)
	}
	if names, err := src.Bind(ctx, "other", 2, t0); err != nil || names != nil {
		t.Errorf("bind in a pool of no names: %q, %v", names, err)
	}
	// A pool the cycle did not read: its nodes are not changed, though
	// none of its instances is known.
	src.SetFleet(t0, nil, []fleet.PoolStatus{{Name: "dgx", Unobserved: fleet.Unobserved{Code: fleet.UnobservedNeverRead}}, {Name: "other"}})
	src.mu.Lock()
	changes := src.syncNodes(src.names.nodes, t0)
	src.mu.Unlock()
	if len(changes) != 0 {
		t.Errorf("changes in a pool not read: %+v", changes)
	}
	src.SetFleet(t0, nil, []fleet.PoolStatus{{Name: "dgx"}})
	src.mu.Lock()
	changes = src.syncNodes(src.names.nodes, t0)
	src.mu.Unlock()
	if len(changes) == 0 {
		t.Error("no change once the pool is read with no instances")
	}
}

// TestSlurmDrainedIdle: in a pool of Slurm nodes a drain is confirmed
// only where the last read says the node holds no job and can take none
// (drained by the controller and idle, or powered down); any other pool's
// node, and every node where the source only reads, has no say from it.
func TestSlurmDrainedIdle(t *testing.T) {
	pool := fleet.Pool{Name: "dgx", GPUsPerNode: 8, SlurmNodes: []string{"d1"}}
	for _, tt := range []struct {
		name string
		node slurm.Node
		act  bool
		want bool
	}{
		{"drained by the controller, idle", slurm.Node{State: "IDLE", Flags: []string{"DRAIN"}, Reason: "fleetcast: scale-in"}, true, true},
		{"drained by the controller, a job running", slurm.Node{State: "MIXED", Flags: []string{"DRAIN"}, Reason: "fleetcast: scale-in"}, true, false},
		{"drained by the controller, a job completing", slurm.Node{State: "IDLE", Flags: []string{"DRAIN", "COMPLETING"}, Reason: "fleetcast: scale-in"}, true, false},
		{"idle, not drained: a job may start", slurm.Node{State: "IDLE"}, true, false},
		{"drained by someone else", slurm.Node{State: "IDLE", Flags: []string{"DRAIN"}, Reason: "bad HBM"}, true, false},
		{"powered down", slurm.Node{State: "IDLE", Flags: []string{"POWERED_DOWN"}}, true, true},
		{"not listed", slurm.Node{}, true, false},
		{"the source only reads", slurm.Node{State: "MIXED"}, false, true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			src, err := NewSlurmSource(SlurmOptions{Settings: fleet.DefaultSlurmSettings(), Pools: []fleet.Pool{pool, simPool("other", 4)},
				Pending: &Pending{}, Now: func() time.Time { return t0 }, Act: tt.act})
			if err != nil {
				t.Fatal(err)
			}
			if tt.node.State != "" {
				tt.node.Name = "d1"
				src.names.nodes = []slurm.Node{tt.node}
			}
			if got := src.DrainedIdle("dgx", "d1"); got != tt.want {
				t.Errorf("DrainedIdle = %v, want %v", got, tt.want)
			}
			if !src.DrainedIdle("other", "d1") {
				t.Error("a node of a pool of no names held")
			}
		})
	}
}

// changesOf is how many changes of op the source counted with result.
func changesOf(src *SlurmSource, op, result string) float64 {
	var m dto.Metric
	if err := src.changes.WithLabelValues(op, result).Write(&m); err != nil {
		return -1
	}
	return m.GetCounter().GetValue()
}

// has reports whether n's state carries flag.
func has(n slurm.Node, flag string) bool { return n.HasFlag(flag) }
