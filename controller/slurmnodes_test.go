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
	src.names.requested = []slurm.Request{{Pool: "dgx", Node: "d2"}}
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
	src.names.requested = []slurm.Request{{Pool: "dgx", Node: "d2"}}
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
