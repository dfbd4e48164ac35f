package controller

import (
	"cmp"
	"context"
	"encoding/json"
	"maps"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	dto "github.com/prometheus/client_model/go"

	"github.com/fleetcast/autoscaler/apiauth"
	"github.com/fleetcast/autoscaler/fleet"
	"github.com/fleetcast/autoscaler/internal/slurmtest"
	"github.com/fleetcast/autoscaler/nodeauth/nodeauthtest"
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
	// read reads the nodes, then has the source read them: what the
	// source knows is never older than what the test checks.
	read := func() map[string]slurm.Node {
		t.Helper()
		s, err := (&slurm.Reader{Conf: c.Conf}).Read(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if err := src.Read(ctx); err != nil {
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

	// A launch bound to dgx-1 that the cloud refused: dgx-1, powering up
	// with no job, is powered down at once, never left to go DOWN.
	if names, err := src.Bind(ctx, "dgx", 1, now); err != nil || !slices.Equal(names, []string{"dgx-1"}) {
		t.Fatalf("bind of 1: %q, %v", names, err)
	}
	until("dgx-1 powering up", func(n map[string]slurm.Node) bool { return has(n["dgx-1"], "POWERING_UP") })
	src.Refused([]string{"dgx-1"})
	src.SetFleet(now, nil, nil)
	until("dgx-1 powered down", func(n map[string]slurm.Node) bool {
		d := n["dgx-1"]
		if d.State == "DOWN" {
			t.Fatalf("dgx-1 DOWN: %+v", d)
		}
		return d.Flags != nil && slices.Equal(d.Flags, []string{"CLOUD", "POWERED_DOWN"})
	})

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
		return reflect.DeepEqual(src.names.requested, []slurm.Request{{Pools: []string{"dgx"}, Node: "dgx-2"}})
	})
	if _, scoped := pending.Demand(now); !slices.Equal(scoped, []fleet.ScopedDemand{{Pool: "dgx", Nodes: 1, GPUs: 8, Requested: true}}) {
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
	for _, op := range []string{"power_up", "power_down", "power_down_force", "drain", "resume"} {
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
	// Fails for the nodes named in the file fail.
	scontrol := slurmtest.Script(t, dir, "scontrol", `echo "$@" >> `+calls+`; [ ! -e `+dir+`/fail ] || ! grep -qx "$2" `+dir+`/fail`)
	set := fleet.DefaultSlurmSettings()
	set.Scontrol = scontrol
	pool := fleet.Pool{Name: "dgx", GPUsPerNode: 8, ProvisionTimeout: time.Hour, SlurmNodes: []string{"d1", "d2", "d3", "d4", "d5", "d6", "d7", "d8"}}
	src, err := NewSlurmSource(SlurmOptions{Settings: set, Pools: []fleet.Pool{pool, simPool("other", 4)}, Pending: &Pending{}, Now: func() time.Time { return t0 }, Act: true})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if names, err := src.Bind(ctx, "dgx", 1, t0); err == nil || names != nil || !strings.Contains(err.Error(), "no read of the Slurm cluster yet") {
		t.Fatalf("bind before any read: %q, %v", names, err)
	}
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
	src.names.requested = []slurm.Request{{Pools: []string{"dgx"}, Node: "d2"}}
	src.SetFleet(t0, []fleet.Node{{ID: "d1", Pool: "dgx", State: fleet.Pending}, {ID: "d7", Pool: "dgx", State: fleet.Terminating}}, nil)
	// scontrol failing for every node: nothing bound.
	fail := func(nodes string) {
		t.Helper()
		if err := os.WriteFile(filepath.Join(dir, "fail"), []byte(nodes), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	fail("nodename=d[6,8]\nnodename=d6\nnodename=d8\n")
	src.names.requested = nil
	if names, err := src.Bind(ctx, "dgx", 3, t0); err == nil || names != nil || !strings.Contains(err.Error(), "pool dgx: powering up Slurm nodes for a launch: ") {
		t.Fatalf("bind with scontrol failing: %q, %v; want an error, and nothing bound", names, err)
	}
	// Failing for d6 alone: d8 is bound without it.
	fail("nodename=d[6,8]\nnodename=d6\n")
	src.names.requested = []slurm.Request{{Pools: []string{"dgx"}, Node: "d2"}}
	names, err := src.Bind(ctx, "dgx", 4, t0)
	if err != nil || !slices.Equal(names, []string{"d2", "d8"}) {
		t.Fatalf("bind of 4, d6 failing: %q, %v; want d2 (requested) and d8, no more", names, err)
	}
	os.Remove(filepath.Join(dir, "fail"))
	if b, _ := os.ReadFile(calls); string(b) != strings.Repeat("update nodename=d[6,8] state=POWER_UP\nupdate nodename=d6 state=POWER_UP\nupdate nodename=d8 state=POWER_UP\n", 2) {
		t.Errorf("scontrol run as %q; want d6 and d8 powered up together, then each alone, twice", b)
	}
	names, err = src.Bind(ctx, "dgx", 1, t0)
	if err != nil || !slices.Equal(names, []string{"d6"}) {
		t.Fatalf("bind of 1: %q, %v; want d6, free again", names, err)
	}
	// Bound names are taken until their instances are listed; a refused
	// launch's are released at the next SetFleet, but for one listed.
	if names, err := src.Bind(ctx, "dgx", 1, t0); err != nil || names != nil {
		t.Fatalf("bind with every name taken: %q, %v", names, err)
	}
	src.Refused([]string{"d2", "d8"})
	src.SetFleet(t0, []fleet.Node{{ID: "d1", Pool: "dgx", State: fleet.Pending}, {ID: "d8", Pool: "dgx", State: fleet.Pending}}, nil)
	src.mu.Lock()
	bound := slices.Sorted(maps.Keys(src.names.bound))
	src.mu.Unlock()
	if !slices.Equal(bound, []string{"d6"}) {
		t.Errorf("bound after a refusal (d2, d8) and a listing (d8): %q; want d6 alone", bound)
	}
	if names, err := src.Bind(ctx, "other", 2, t0); err != nil || names != nil {
		t.Errorf("bind in a pool of no names: %q, %v", names, err)
	}
	// A pool the cycle did not read: its nodes are not changed, though
	// none of its instances is known.
	src.SetFleet(t0, nil, []fleet.PoolStatus{{Name: "dgx", Unobserved: fleet.Unobserved{Code: fleet.UnobservedNeverRead}}, {Name: "other"}})
	src.mu.Lock()
	changes := src.syncNodes(src.names.nodes, nil, t0).changes
	src.mu.Unlock()
	if len(changes) != 0 {
		t.Errorf("changes in a pool not read: %+v", changes)
	}
	src.SetFleet(t0, nil, []fleet.PoolStatus{{Name: "dgx"}})
	src.mu.Lock()
	changes = src.syncNodes(src.names.nodes, nil, t0).changes
	src.mu.Unlock()
	if len(changes) == 0 {
		t.Error("no change once the pool is read with no instances")
	}
}

// TestSlurmDrainedIdle: in a pool of Slurm nodes a drain is confirmed
// only where the last read says the node holds no job and can start none
// (drained by anyone, down, failed or powered down, and idle; or not
// listed), never before a whole read; any other pool's node, and every
// node where the source only reads, has no say from it.
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
		{"drained by someone else, idle", slurm.Node{State: "IDLE", Flags: []string{"DRAIN"}, Reason: "bad HBM"}, true, true},
		{"drained by someone else, a job running", slurm.Node{State: "MIXED", Flags: []string{"DRAIN"}, Reason: "bad HBM"}, true, false},
		{"down", slurm.Node{State: "DOWN", Reason: "ResumeTimeout reached"}, true, true},
		{"failed", slurm.Node{State: "IDLE", Flags: []string{"FAIL"}}, true, true},
		{"powered down", slurm.Node{State: "IDLE", Flags: []string{"POWERED_DOWN"}}, true, true},
		{"not listed", slurm.Node{Name: "other-node", State: "IDLE"}, true, true},
		{"no read yet", slurm.Node{}, true, false},
		{"the source only reads", slurm.Node{State: "MIXED"}, false, true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			src, err := NewSlurmSource(SlurmOptions{Settings: fleet.DefaultSlurmSettings(), Pools: []fleet.Pool{pool, simPool("other", 4)},
				Pending: &Pending{}, Now: func() time.Time { return t0 }, Act: tt.act})
			if err != nil {
				t.Fatal(err)
			}
			if tt.node.State != "" {
				tt.node.Name = cmp.Or(tt.node.Name, "d1")
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

// TestSlurmProgramRoutes: Slurm's resume program's hostlist, with a
// demand token, has the source read the cluster at once; its suspend
// program's is taken and logged; a hostlist naming a node of no pool of
// Slurm nodes, or not a hostlist, is refused saying why; a controller that
// changes no Slurm node refuses both.
func TestSlurmProgramRoutes(t *testing.T) {
	dir := t.TempDir()
	set := fleet.DefaultSlurmSettings()
	set.Squeue = slurmtest.Script(t, dir, "squeue", "cat "+slurmtest.Capture(t, "squeue-22.05.json"))
	set.Sinfo = slurmtest.Script(t, dir, "sinfo", "cat "+slurmtest.Capture(t, "sinfo-22.05.json"))
	set.Scontrol = slurmtest.Script(t, dir, "scontrol", "exit 0")
	pool := gpuPool("dgx", 8, 3, 5*time.Minute)
	pool.SlurmNodes = []string{"dgx-1", "dgx-2", "dgx-3"}
	for _, act := range []bool{true, false} {
		var src *SlurmSource
		l := newLoopWith(t, false, nil, func(l *cycler, o *Options) {
			var err error
			if src, err = NewSlurmSource(SlurmOptions{Settings: set, Pools: []fleet.Pool{pool}, Pending: o.Pending, Now: o.Now, Act: act}); err != nil {
				t.Fatal(err)
			}
			o.Slurm = src
		}, pool)
		api := nodeauthtest.NewAPI(t)
		h := l.c.Handler(APIOptions{Tokens: api.Tokens})
		call := func(route, bearer, body string) (int, string) {
			req := httptest.NewRequest(http.MethodPost, route, strings.NewReader(body))
			req.Header.Set("Authorization", "Bearer "+bearer)
			w := httptest.NewRecorder()
			h.ServeHTTP(w, req)
			return w.Code, w.Body.String()
		}
		demand := api.Of[apiauth.Demand]
		if !act {
			if code, body := call("/v1/slurm/resume", demand, `{"nodes": "dgx-1"}`); code != http.StatusConflict || !strings.Contains(body, "changes no Slurm node") {
				t.Errorf("resume where no Slurm node is changed: %d %s", code, body)
			}
			continue
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() { defer close(done); src.Run(ctx) }()
		for src.Reads() == 0 {
			time.Sleep(10 * time.Millisecond)
		}
		reads := src.Reads()
		code, body := call("/v1/slurm/resume", demand, `{"nodes": "dgx-[2-3],dgx-2"}`)
		var ans SlurmAnswer
		if err := json.Unmarshal([]byte(body), &ans); code != http.StatusOK || err != nil || !slices.Equal(ans.Nodes, []string{"dgx-2", "dgx-3"}) {
			t.Errorf("resume: %d %s", code, body)
		}
		deadline := time.Now().Add(5 * time.Second) // the interval is 30 s
		for src.Reads() == reads {
			if time.Now().After(deadline) {
				t.Fatal("no read after a resume")
			}
			time.Sleep(10 * time.Millisecond)
		}
		cancel()
		<-done
		if code, body := call("/v1/slurm/suspend", demand, `{"nodes": "dgx-1"}`); code != http.StatusOK || !strings.Contains(body, "decides when an instance goes") {
			t.Errorf("suspend: %d %s", code, body)
		}
		for _, tt := range []struct{ body, want string }{
			{`{"nodes": "gpu-1"}`, `slurm resume: node "gpu-1" is in no pool of Slurm nodes`},
			{`{"nodes": "dgx-[1-"}`, `slurm resume: nodes: hostlist`},
			{`{"nodes": ""}`, `slurm resume: nodes: hostlist "": an empty name`},
			{`{"hosts": "dgx-1"}`, `slurm resume: want {"nodes": "HOSTLIST"}: json: unknown field "hosts"`},
		} {
			if code, body := call("/v1/slurm/resume", demand, tt.body); code != http.StatusBadRequest || !strings.Contains(body, tt.want) {
				t.Errorf("resume %s: %d %s; want 400 with %q", tt.body, code, body, tt.want)
			}
		}
		if code, _ := call("/v1/slurm/resume", api.Of[apiauth.Read], `{"nodes": "dgx-1"}`); code != http.StatusForbidden {
			t.Errorf("resume with a read token: %d, want 403", code)
		}
	}
}

// TestSlurmBindShared: a name two pools share, bound to a launch the
// cloud refused, is carried for one cycle: a launch of the other pool
// takes it, powered up in Slurm still (no second power-up, no power-down
// between); one no pool takes is released and powered down at once; one
// Slurm placed a job on is a request of either pool, a whole node of any
// pool that has the name.
func TestSlurmBindShared(t *testing.T) {
	dir := t.TempDir()
	calls := filepath.Join(dir, "calls")
	set := fleet.DefaultSlurmSettings()
	set.Scontrol = slurmtest.Script(t, dir, "scontrol", `echo "$@" >> `+calls)
	spot := fleet.Pool{Name: "spot", GPUsPerNode: 8, ProvisionTimeout: time.Hour, SlurmNodes: []string{"d1", "d2"}}
	od := spot
	od.Name = "od"
	src, err := NewSlurmSource(SlurmOptions{Settings: set, Pools: []fleet.Pool{spot, od}, Pending: &Pending{}, Now: func() time.Time { return t0 }, Act: true})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	node := func(name, state string, flags ...string) slurm.Node {
		return slurm.Node{Name: name, State: state, Flags: append([]string{"CLOUD"}, flags...)}
	}
	sync := func(nodes ...slurm.Node) nodeWork {
		src.mu.Lock()
		defer src.mu.Unlock()
		return src.syncNodes(nodes, nil, t0)
	}
	called := func() string {
		b, _ := os.ReadFile(calls)
		os.Remove(calls)
		return string(b)
	}
	src.SetFleet(t0, nil, nil)
	sync(node("d1", "IDLE", "POWERED_DOWN"), node("d2", "IDLE", "POWERED_DOWN"))
	if names, err := src.Bind(ctx, "spot", 1, t0); err != nil || !slices.Equal(names, []string{"d1"}) {
		t.Fatalf("bind in spot: %q, %v; want d1", names, err)
	}
	if got := called(); got != "update nodename=d1 state=POWER_UP\n" {
		t.Fatalf("scontrol run as %q; want d1 powered up", got)
	}
	// Refused: carried to the next cycle, powered up still.
	src.Refused([]string{"d1"})
	src.SetFleet(t0, nil, nil)
	if w := sync(node("d1", "IDLE", "POWERING_UP"), node("d2", "IDLE", "POWERED_DOWN")); len(w.changes) != 0 {
		t.Fatalf("changes to a carried name: %+v; want none", w.changes)
	}
	if names, err := src.Bind(ctx, "spot", 1, t0); err != nil || !slices.Equal(names, []string{"d2"}) {
		t.Fatalf("bind in spot again: %q, %v; want d2 (d1 is carried to another pool)", names, err)
	}
	called()
	// Not while Slurm has it down: no longer the controller's.
	sync(node("d1", "DOWN", "POWERING_UP"), node("d2", "IDLE", "POWERING_UP"))
	if names, err := src.Bind(ctx, "od", 1, t0); err != nil || len(names) != 0 {
		t.Fatalf("bind in od with the carried d1 down: %q, %v; want none", names, err)
	}
	sync(node("d1", "IDLE", "POWERING_UP"), node("d2", "IDLE", "POWERING_UP"))
	if names, err := src.Bind(ctx, "od", 1, t0); err != nil || !slices.Equal(names, []string{"d1"}) {
		t.Fatalf("bind in od: %q, %v; want d1, carried from spot", names, err)
	}
	if got := called(); got != "" {
		t.Errorf("scontrol run as %q for a carried name; want nothing", got)
	}
	// d2 refused too, and no pool takes it: released at the second
	// cycle, and powered down at once.
	src.Refused([]string{"d2"})
	src.SetFleet(t0, []fleet.Node{{ID: "d1", Pool: "od", State: fleet.Pending}}, nil)
	up := []slurm.Node{node("d1", "IDLE", "POWERING_UP"), node("d2", "IDLE", "POWERING_UP")}
	if w := sync(up...); len(w.changes) != 0 {
		t.Fatalf("changes a cycle after the refusal: %+v; want none", w.changes)
	}
	src.SetFleet(t0, []fleet.Node{{ID: "d1", Pool: "od", State: fleet.Pending}}, nil)
	if w := sync(up...); len(w.changes) != 1 || w.changes[0].Node != "d2" || w.changes[0].Op != slurm.OpPowerDownForce {
		t.Fatalf("changes two cycles after the refusal: %+v; want d2 powered down at once", w.changes)
	}
	// A carried name Slurm placed a job on: a request of either pool.
	src.SetFleet(t0, []fleet.Node{{ID: "d1", Pool: "od", State: fleet.Pending}}, nil)
	sync(node("d1", "IDLE", "POWERING_UP"), node("d2", "IDLE", "POWERED_DOWN"))
	if names, err := src.Bind(ctx, "spot", 1, t0); err != nil || !slices.Equal(names, []string{"d2"}) {
		t.Fatalf("bind in spot once more: %q, %v; want d2", names, err)
	}
	// Refused: a request at the very next read, and the cycle after.
	src.Refused([]string{"d2"})
	for _, at := range []string{"before the next cycle", "after it"} {
		if at == "after it" {
			src.SetFleet(t0, []fleet.Node{{ID: "d1", Pool: "od", State: fleet.Pending}}, nil)
		}
		sync(node("d1", "IDLE", "POWERING_UP"), node("d2", "MIXED", "POWERING_UP"))
		src.mu.Lock()
		requested, demand := src.names.requested, src.requestedDemand()
		src.mu.Unlock()
		if !reflect.DeepEqual(requested, []slurm.Request{{Pools: []string{"spot", "od"}, Node: "d2"}}) ||
			!slices.Equal(demand, []PendingDemand{{SlurmNode: "d2", Nodes: 1, GPUs: 8, Requested: true}}) {
			t.Errorf("%s: requested %+v, demand %+v; want d2 of spot or od, a whole node of either", at, requested, demand)
		}
	}
	if names, err := src.Bind(ctx, "od", 2, t0); err != nil || !slices.Equal(names, []string{"d2"}) {
		t.Errorf("bind of 2 in od: %q, %v; want d2, the request (d1 is od's)", names, err)
	}
}

// TestSlurmSignalJobs: with slurm.signal_jobs, each batch job Slurm runs
// on a draining node that no agent knows is sent the signal once
// (scancel --signal --batch, a call each), a job on two draining nodes
// too; one whose call failed is sent it at the next read; without it,
// none is.
func TestSlurmSignalJobs(t *testing.T) {
	dir := t.TempDir()
	calls := filepath.Join(dir, "calls")
	pool := fleet.Pool{Name: "dgx", GPUsPerNode: 8, ProvisionTimeout: time.Hour, SlurmNodes: []string{"d1", "d2"}}
	fleetNodes := []fleet.Node{{ID: "d1", Pool: "dgx", State: fleet.Draining, Jobs: []fleet.Job{{ID: "5"}}}, {ID: "d2", Pool: "dgx", State: fleet.Ready}}
	nodes := []slurm.Node{{Name: "d1", State: "ALLOCATED", Flags: []string{"DRAIN"}, Reason: "fleetcast: scale-in"}, {Name: "d2", State: "ALLOCATED"}}
	jobs := []slurm.Job{{ID: "4", State: "RUNNING", NodeList: "d1"}, {ID: "5", State: "RUNNING", NodeList: "d1"}, {ID: "6", State: "RUNNING", NodeList: "d2"},
		{ID: "9", State: "RUNNING", NodeList: "d[1-2]"}}
	for _, signal := range []string{"USR1", ""} {
		os.Remove(calls)
		set := fleet.DefaultSlurmSettings()
		set.Scancel = slurmtest.Script(t, dir, "scancel", `echo "$@" >> `+calls+`; [ ! -e `+dir+`/fail ]`)
		set.SignalJobs = signal
		src, err := NewSlurmSource(SlurmOptions{Settings: set, Pools: []fleet.Pool{pool}, Pending: &Pending{}, Now: func() time.Time { return t0 }, Act: true})
		if err != nil {
			t.Fatal(err)
		}
		read := func(jobs []slurm.Job) string {
			t.Helper()
			src.mu.Lock()
			w := src.syncNodes(nodes, jobs, t0)
			src.mu.Unlock()
			src.signalJobs(context.Background(), w.signal)
			b, _ := os.ReadFile(calls)
			os.Remove(calls)
			return string(b)
		}
		src.SetFleet(t0, fleetNodes, nil)
		if signal == "" {
			if got := read(jobs); got != "" {
				t.Errorf("without signal_jobs: scancel run as %q", got)
			}
			continue
		}
		if got := read(jobs); got != "--signal=USR1 --batch 4\n--signal=USR1 --batch 9\n" {
			t.Errorf("scancel run as %q; want jobs 4 and 9 signalled (5 is its agent's, 6 on a node that does not drain)", got)
		}
		// d2 drains too: 9 is on it, and was sent the signal already.
		src.SetFleet(t0, []fleet.Node{fleetNodes[0], {ID: "d2", Pool: "dgx", State: fleet.Draining}}, nil)
		if got := read(jobs); got != "--signal=USR1 --batch 6\n" {
			t.Errorf("with d2 draining: scancel run as %q; want job 6 alone (each job once)", got)
		}
		if err := os.WriteFile(filepath.Join(dir, "fail"), nil, 0o600); err != nil {
			t.Fatal(err)
		}
		more := append(slices.Clone(jobs), slurm.Job{ID: "7", State: "RUNNING", NodeList: "d1"}, slurm.Job{ID: "8", State: "RUNNING", NodeList: "d1"})
		if got := read(more); got != "--signal=USR1 --batch 7\n--signal=USR1 --batch 8\n" {
			t.Errorf("scancel failing: run as %q; want 7 and 8, each once", got)
		}
		os.Remove(filepath.Join(dir, "fail"))
		if got := read(more); got != "--signal=USR1 --batch 7\n--signal=USR1 --batch 8\n" {
			t.Errorf("after a failure: scancel run as %q; want 7 and 8 again", got)
		}
		// A job that ended is forgotten: one of its ID later is sent it.
		read(jobs[:1])
		if got := read(jobs); !strings.Contains(got, "--batch 9\n") {
			t.Errorf("job 9 run again after it ended: scancel run as %q; want it signalled", got)
		}
		var m dto.Metric
		if err := src.signals.WithLabelValues("error").Write(&m); err != nil || m.GetCounter().GetValue() != 2 {
			t.Errorf("signals failed, counted: %v", m.GetCounter().GetValue())
		}
	}
}

// TestSharedSlurmNodeCredential: a plugin server's name comes back after
// it is powered off, so its credential is kept (TestPluginServerKeepsCredential);
// a Slurm node that two pools share is a machine of either next, so its
// credential goes with the instance, and the next one registers afresh.
func TestSharedSlurmNodeCredential(t *testing.T) {
	pools := []fleet.Pool{
		{Name: "spot", Provider: fleet.ProviderPlugin, SlurmNodes: []string{"dgx-1", "dgx-2"}},
		{Name: "od", Provider: fleet.ProviderPlugin, SlurmNodes: []string{"dgx-1"}},
	}
	c := &Controller{set: &fleet.Settings{Pools: pools}, reused: map[string]bool{"dgx-1": true, "dgx-2": true}}
	if c.namesReused("dgx-1") || !c.namesReused("dgx-2") {
		t.Errorf("names reused: dgx-1 %v (shared), dgx-2 %v (spot's alone); want false, true", c.namesReused("dgx-1"), c.namesReused("dgx-2"))
	}
}
