package main

import (
	"context"
	"errors"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/fleetcast/autoscaler/fleet"
	"github.com/fleetcast/autoscaler/providers"
	"github.com/fleetcast/autoscaler/providers/plugin"
)

func TestParseList(t *testing.T) {
	tests := []struct {
		name, out, err string
		want           int
	}{
		{"empty", `{"nodes": []}`, "", 0},
		{"servers", `{"nodes": [{"name": "gpu-01", "state": "off"}, {"name": "gpu-02", "state": "on", "zone": "r7", "since": "2026-12-03T09:00:00Z"}]}`, "", 2},
		{"every state", `{"nodes": [{"name": "a", "state": "off"}, {"name": "b", "state": "booting"}, {"name": "c", "state": "on"}, {"name": "d", "state": "stopping"}, {"name": "e", "state": "failed"}]}`, "", 5},
		{"not json", `gpu-01 on`, "its output is not", 0},
		{"no nodes", `{}`, `no "nodes" list`, 0},
		{"null nodes", `{"nodes": null}`, `no "nodes" list`, 0},
		{"unknown field", `{"nodes": [{"name": "a", "state": "on", "power": 1}]}`, "unknown field", 0},
		{"twice", `{"nodes": [{"name": "a", "state": "on"}, {"name": "a", "state": "off"}]}`, `"a" is listed twice`, 0},
		{"bad name", `{"nodes": [{"name": "a b", "state": "on"}]}`, `nodes[0]: name "a b"`, 0},
		{"no name", `{"nodes": [{"state": "on"}]}`, `nodes[0]: name ""`, 0},
		{"bad state", `{"nodes": [{"name": "a", "state": "ON"}]}`, `state "ON": want off, booting`, 0},
		{"trailing object", `{"nodes": []}` + "\n" + `{"nodes": []}`, "goes on after", 0},
		{"trailing words", `{"nodes": []} done`, "goes on after", 0},
		{"bad since", `{"nodes": [{"name": "a", "state": "on", "since": "yesterday"}]}`, `since "yesterday"`, 0},
		{"addresses", `{"nodes": [{"name": "a", "state": "on", "address": "10.0.0.7"}, {"name": "b", "state": "on", "address": "gpu-b.rack7"}, {"name": "c", "state": "on", "address": "fd00::7"}]}`, "", 3},
		{"bad address", `{"nodes": [{"name": "a", "state": "on", "address": "10.0.0.7 -x"}]}`, `nodes[0] (a): address "10.0.0.7 -x": want an IP address or a host name`, 0},
		{"address an option", `{"nodes": [{"name": "a", "state": "on", "address": "-x"}]}`, `address "-x"`, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			nodes, err := parseList([]byte(tt.out))
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("parseList(%s) = %v; want an error with %q", tt.out, err, tt.err)
				}
				return
			}
			if err != nil || len(nodes) != tt.want {
				t.Fatalf("parseList(%s) = %d nodes, %v; want %d", tt.out, len(nodes), err, tt.want)
			}
		})
	}
}

// FuzzParseList: whatever list_command prints, parseList answers without
// panicking, and what it accepts has valid, distinct names and known
// states.
func FuzzParseList(f *testing.F) {
	f.Add([]byte(`{"nodes": [{"name": "gpu-01", "state": "off"}]}`))
	f.Add([]byte(`{"nodes": [{"name": "a", "state": "on", "since": "2026-12-03T09:00:00Z"}, {"name": "a", "state": "on"}]}`))
	f.Add([]byte(`{"nodes": null}`))
	f.Fuzz(func(t *testing.T, out []byte) {
		nodes, err := parseList(out)
		if err != nil {
			return
		}
		seen := map[string]bool{}
		for _, n := range nodes {
			if !nameRE.MatchString(n.Name) || seen[n.Name] {
				t.Fatalf("accepted %q: name %q", out, n.Name)
			}
			seen[n.Name] = true
			if !slices.Contains([]string{stateOff, stateBooting, stateOn, stateStopping, stateFailed}, n.State) {
				t.Fatalf("accepted %q: state %q", out, n.State)
			}
		}
	})
}

// rack is a rack of servers for racks.sh, in a temporary directory: its
// pool, and the plugin configured for it.
func rack(t *testing.T, states map[string]string, config map[string]any) (*commands, fleet.Pool, string) {
	t.Helper()
	dir := t.TempDir()
	for name, s := range states {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(s+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	script, err := filepath.Abs("racks.sh")
	if err != nil {
		t.Fatal(err)
	}
	cfg := map[string]any{
		"list_command":      []any{script, "list"},
		"launch_command":    []any{script, "power-on"},
		"terminate_command": []any{script, "power-off"},
	}
	for k, v := range config {
		cfg[k] = v
	}
	pool := fleet.Pool{Name: "onprem", Provider: fleet.ProviderPlugin, Max: 8, Settings: plugin.Settings{Plugin: "racks", Target: map[string]any{"rack_dir": dir}}}
	c := &commands{seen: map[string]time.Time{}, now: func() time.Time { return time.Date(2026, 12, 3, 9, 0, 0, 0, time.UTC) }, log: hclog.NewNullLogger()}
	if diags := c.configure(context.Background(), cfg, []fleet.Pool{pool}, "prod"); len(diags) > 0 {
		t.Fatalf("configure: %v", diags)
	}
	return c, pool, dir
}

func powerStates(t *testing.T, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		b, _ := os.ReadFile(filepath.Join(dir, e.Name()))
		out[e.Name()] = strings.TrimSpace(string(b))
	}
	return out
}

// TestLaunchAndTerminate: a launch powers on free servers in name order
// up to the target, again nothing (a retry), and with too few free those
// there are and a typed lack of capacity; a termination powers off what
// it names, and refuses a server not listed.
func TestLaunchAndTerminate(t *testing.T) {
	ctx := context.Background()
	c, pool, dir := rack(t, map[string]string{"gpu-01": "off", "gpu-02": "on", "gpu-03": "off", "gpu-04": "failed", "gpu-05": "booting"}, nil)
	g, err := c.Describe(ctx, pool)
	slices.SortFunc(g.Instances, func(a, b providers.Instance) int { return strings.Compare(a.ID, b.ID) })
	if err != nil || g.Target != 2 || len(g.Instances) != 2 || g.Instances[0].ID != "gpu-02" || g.Instances[0].State != providers.InstanceRunning ||
		g.Instances[1].ID != "gpu-05" || g.Instances[1].State != providers.InstancePending {
		t.Fatalf("Describe = %+v, %v; want gpu-02 running and gpu-05 booting, target 2", g, err)
	}
	if err := c.Launch(ctx, pool, providers.LaunchRequest{Count: 1, Target: 3, Key: "k1"}); err != nil {
		t.Fatal(err)
	}
	if s := powerStates(t, dir); s["gpu-01"] != "on" || s["gpu-03"] != "off" {
		t.Fatalf("after a launch to 3: %v; want gpu-01 on, gpu-03 off (gpu-05 booting counts)", s)
	}
	// The same request again (a retry, a restarted controller): nothing.
	if err := c.Launch(ctx, pool, providers.LaunchRequest{Count: 1, Target: 3, Key: "k1"}); err != nil {
		t.Fatal(err)
	}
	if s := powerStates(t, dir); s["gpu-03"] != "off" {
		t.Fatalf("a retried launch powered on more: %v", s)
	}
	// Two more asked, one free: it is powered on, and capacity ran out.
	err = c.Launch(ctx, pool, providers.LaunchRequest{Count: 2, Target: 5, Key: "k2"})
	var ice *providers.InsufficientCapacityError
	if !errors.As(err, &ice) || ice.Granted != 1 || !providers.ShouldBackOff(err) {
		t.Fatalf("launch past the free servers: %v; want insufficient capacity, 1 granted", err)
	}
	if s := powerStates(t, dir); s["gpu-03"] != "on" || s["gpu-04"] != "failed" {
		t.Fatalf("after running out: %v", s)
	}
	if err := c.Terminate(ctx, pool, []string{"gpu-01", "gpu-02"}); err != nil {
		t.Fatal(err)
	}
	if s := powerStates(t, dir); s["gpu-01"] != "off" || s["gpu-02"] != "off" || s["gpu-03"] != "on" {
		t.Fatalf("after terminating gpu-01 and gpu-02: %v", s)
	}
	// Off already: done.
	if err := c.Terminate(ctx, pool, []string{"gpu-01"}); err != nil {
		t.Fatal(err)
	}
	var nf *providers.NotFoundError
	if err := c.Terminate(ctx, pool, []string{"gpu-99"}); !errors.As(err, &nf) {
		t.Fatalf("terminating a server not listed: %v; want not found", err)
	}
	// A failed server is set aside for repair: not the pool's, left as it is.
	if err := c.Terminate(ctx, pool, []string{"gpu-04"}); !errors.As(err, &nf) || powerStates(t, dir)["gpu-04"] != "failed" {
		t.Fatalf("terminating a failed server: %v, %v; want not found, and it left failed", err, powerStates(t, dir))
	}
}

// TestLaunchNames: a launch that names servers (a pool of Slurm nodes)
// powers on those of them that are free, and no other: with too few, it
// answers that capacity ran out.
func TestLaunchNames(t *testing.T) {
	ctx := context.Background()
	c, pool, dir := rack(t, map[string]string{"gpu-01": "off", "gpu-02": "on", "gpu-03": "off", "gpu-04": "off", "gpu-05": "off"}, nil)
	if err := c.Launch(ctx, pool, providers.LaunchRequest{Count: 1, Target: 2, Key: "k1", Names: []string{"gpu-05"}}); err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"gpu-01": "off", "gpu-02": "on", "gpu-03": "off", "gpu-04": "off", "gpu-05": "on"}
	if s := powerStates(t, dir); !maps.Equal(s, want) {
		t.Fatalf("after a launch of gpu-05: %v; want %v", s, want)
	}
	err := c.Launch(ctx, pool, providers.LaunchRequest{Count: 2, Target: 4, Key: "k2", Names: []string{"gpu-04", "gpu-02", "gpu-04"}})
	var ice *providers.InsufficientCapacityError
	if !errors.As(err, &ice) || ice.Granted != 1 || !strings.Contains(err.Error(), "2 server(s) asked for, 1 powered off and free of those named (gpu-04, gpu-02, gpu-04)") {
		t.Fatalf("a launch of 2 naming gpu-04 and gpu-02 (on): %v; want capacity ran out, 1 granted", err)
	}
	want["gpu-04"] = "on"
	if s := powerStates(t, dir); !maps.Equal(s, want) {
		t.Fatalf("after a launch of 2 naming gpu-04 and gpu-02 (on): %v; want %v", s, want)
	}
}

// TestSharedNames: two pools whose servers have the same names (Slurm
// nodes that two pools share) keep each its own launch times: one
// listing a server off does not make the other's, on, a new launch. A
// server's address (racks.sh: .address/NAME) is its instance's.
func TestSharedNames(t *testing.T) {
	ctx := context.Background()
	c, a, dir := rack(t, map[string]string{"gpu-01": "on"}, nil)
	if err := os.MkdirAll(filepath.Join(dir, ".address"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, ".address", "gpu-01"), []byte("10.0.0.7\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	other := t.TempDir()
	if err := os.WriteFile(filepath.Join(other, "gpu-01"), []byte("off\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	b := a
	b.Name, b.Settings = "spot", plugin.Settings{Plugin: "racks", Target: map[string]any{"rack_dir": other}}
	start := c.now()
	now := start
	c.now = func() time.Time { return now }
	for range 3 {
		g, err := c.Describe(ctx, a)
		if err != nil || len(g.Instances) != 1 || !g.Instances[0].LaunchedAt.Equal(start) || g.Instances[0].Address != "10.0.0.7" {
			t.Fatalf("Describe(%s) at %v = %+v, %v; want gpu-01 launched at %v, at 10.0.0.7", a.Name, now, g, err, start)
		}
		if g, err := c.Describe(ctx, b); err != nil || len(g.Instances) != 0 {
			t.Fatalf("Describe(%s) = %+v, %v; want no instance", b.Name, g, err)
		}
		now = now.Add(time.Minute)
	}
}

// script writes an executable shell script.
func script(t *testing.T, body string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "cmd.sh")
	if err := os.WriteFile(path, []byte("#!/bin/sh\n"+body+"\n"), 0o700); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestCommandFailures: a launch command's EX_TEMPFAIL is a lack of
// capacity, another status an error with its stderr; a command past its
// timeout fails as such.
func TestCommandFailures(t *testing.T) {
	ctx := context.Background()
	tempfail := script(t, `echo "BMC says: no power budget" >&2; exit 75`)
	c, pool, _ := rack(t, map[string]string{"gpu-01": "off"}, map[string]any{"launch_command": []any{tempfail}})
	err := c.Launch(ctx, pool, providers.LaunchRequest{Count: 1, Target: 1, Key: "k"})
	var ice *providers.InsufficientCapacityError
	if !errors.As(err, &ice) || !strings.Contains(err.Error(), "no power budget") {
		t.Fatalf("launch_command exiting 75: %v; want insufficient capacity with its stderr", err)
	}

	fails := script(t, `echo "ipmitool: connection refused" >&2; exit 1`)
	c, pool, _ = rack(t, map[string]string{"gpu-01": "off"}, map[string]any{"launch_command": []any{fails}})
	err = c.Launch(ctx, pool, providers.LaunchRequest{Count: 1, Target: 1, Key: "k"})
	if err == nil || providers.ShouldBackOff(err) || !strings.Contains(err.Error(), "exit status 1: ipmitool: connection refused") {
		t.Fatalf("launch_command exiting 1: %v; want its status and stderr, no back-off", err)
	}

	slow := script(t, "/bin/sleep 5") // a child holding the output open, too
	c, pool, _ = rack(t, map[string]string{"gpu-01": "on"}, map[string]any{"terminate_command": []any{slow}, "timeout": "200ms"})
	start := time.Now()
	err = c.Terminate(ctx, pool, []string{"gpu-01"})
	if err == nil || !strings.Contains(err.Error(), "did not finish within 200ms") {
		t.Fatalf("terminate_command past its timeout: %v", err)
	}
	if d := time.Since(start); d > 4*time.Second {
		t.Fatalf("terminate_command past its timeout held the call %s", d)
	}

	// The call's deadline, less a margin, bounds a command too: it fails
	// as itself, before the controller gives up on the call.
	c, pool, _ = rack(t, map[string]string{"gpu-01": "on"}, map[string]any{"terminate_command": []any{slow}})
	dctx, cancel := context.WithTimeout(ctx, deadlineMargin+500*time.Millisecond)
	defer cancel()
	err = c.Terminate(dctx, pool, []string{"gpu-01"})
	if err == nil || !strings.Contains(err.Error(), "did not finish within") || dctx.Err() != nil {
		t.Fatalf("terminate_command near the call's deadline: %v (the call: %v); want cut before it", err, dctx.Err())
	}
}

// TestCommandEnvironment: a command gets the plugin's environment less
// go-plugin's, its pool's name, fleet and target, and a launch its key.
func TestCommandEnvironment(t *testing.T) {
	out := filepath.Join(t.TempDir(), "env")
	t.Setenv("PLUGIN_CLIENT_CERT", "not for the commands")
	t.Setenv("FLEETCAST_PROVIDER_PLUGIN", "cookie")
	t.Setenv("OPERATOR_SETTING", "kept")
	t.Setenv("PLUGIN_OPERATORS_OWN", "kept too")
	launch := script(t, `for v in FLEETCAST_POOL FLEETCAST_FLEET FLEETCAST_LAUNCH_KEY FLEETCAST_TARGET_RACK_DIR FLEETCAST_TARGET_SLOTS PLUGIN_OPERATORS_OWN OPERATOR_SETTING PLUGIN_CLIENT_CERT FLEETCAST_PROVIDER_PLUGIN; do eval "echo $v=\${$v:-}"; done > `+out+`; echo "$@" >> `+out)
	c, pool, dir := rack(t, map[string]string{"gpu-01": "off", "gpu-02": "off"}, map[string]any{"launch_command": []any{launch, "--now"}})
	pool.Settings = plugin.Settings{Plugin: "racks", Target: map[string]any{"rack_dir": dir, "slots": 1234567.0}}
	if err := c.Launch(context.Background(), pool, providers.LaunchRequest{Count: 2, Target: 2, Key: "key-7", Fleet: "prod"}); err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(out)
	want := "FLEETCAST_POOL=onprem\nFLEETCAST_FLEET=prod\nFLEETCAST_LAUNCH_KEY=key-7\nFLEETCAST_TARGET_RACK_DIR=" + dir +
		"\nFLEETCAST_TARGET_SLOTS=1234567\nPLUGIN_OPERATORS_OWN=kept too\nOPERATOR_SETTING=kept\nPLUGIN_CLIENT_CERT=\nFLEETCAST_PROVIDER_PLUGIN=\n--now gpu-01 gpu-02\n"
	if string(b) != want {
		t.Fatalf("the launch command saw\n%s\nwant\n%s", b, want)
	}
}

// TestConfigure: what the config block and the targets get wrong, each
// at its path.
func TestConfigure(t *testing.T) {
	ok := []any{"/bin/true"}
	failing := script(t, "echo broken >&2; exit 1")
	good := map[string]any{"list_command": []any{"/bin/echo", `{"nodes": []}`}, "launch_command": ok, "terminate_command": ok}
	with := func(k string, v any) map[string]any {
		m := map[string]any{}
		for a, b := range good {
			m[a] = b
		}
		if v == nil {
			delete(m, k)
		} else {
			m[k] = v
		}
		return m
	}
	pool := func(target map[string]any) fleet.Pool {
		return fleet.Pool{Name: "onprem", Provider: fleet.ProviderPlugin, Settings: plugin.Settings{Plugin: "racks", Target: target}}
	}
	tests := []struct {
		name   string
		config map[string]any
		target map[string]any
		want   []string // path: summary
	}{
		{"good", good, map[string]any{"rack": "r7", "slots": 4.0, "dry": false}, nil},
		{"missing", with("launch_command", nil), nil, []string{"config: Missing launch_command"}},
		{"a string", with("list_command", "/bin/list"), nil, []string{"config.list_command: Invalid list_command"}},
		{"relative", with("terminate_command", []any{"power-off"}), nil, []string{"config.terminate_command: Invalid terminate_command"}},
		{"not strings", with("launch_command", []any{"/bin/x", 3.0}), nil, []string{"config.launch_command: Invalid launch_command"}},
		{"timeout", with("timeout", "1h"), nil, []string{"config.timeout: Invalid timeout"}},
		{"unknown", with("lsit_command", ok), nil, []string{"config.lsit_command: Unsupported argument"}},
		{"target list", good, map[string]any{"racks": []any{"r7"}}, []string{"pool.onprem.target.racks: Invalid target attribute"}},
		{"target name", good, map[string]any{"rack-dir": "/x"}, []string{"pool.onprem.target.rack-dir: Invalid target attribute name"}},
		{"list fails", with("list_command", []any{failing}), nil, nil}, // warned of: a BMC may be down a while
		{"not there", with("list_command", []any{"/nonexistent/list"}), nil, []string{"config.list_command: Invalid list_command"}},
		{"not executable", with("terminate_command", []any{filepath.Join(t.TempDir())}), nil, []string{"config.terminate_command: Invalid terminate_command"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := &commands{seen: map[string]time.Time{}, now: time.Now, log: hclog.NewNullLogger()}
			var got []string
			for _, d := range c.configure(context.Background(), tt.config, []fleet.Pool{pool(tt.target)}, "prod") {
				got = append(got, d.Path+": "+d.Summary)
			}
			if !slices.Equal(got, tt.want) {
				t.Fatalf("configure = %q; want %q", got, tt.want)
			}
		})
	}
}

// TestVerifyIdentity: verify_command accepts the identity a server's
// agent presents when it is the server's, and refuses (a RefusedError)
// another; without verify_command every identity is refused, and a
// command that cannot answer is an error that is no refusal.
func TestVerifyIdentity(t *testing.T) {
	ctx := context.Background()
	racks, _ := filepath.Abs("racks.sh")
	c, pool, dir := rack(t, map[string]string{"gpu-01": "on", "gpu-02": "on"}, map[string]any{"verify_command": []any{racks, "verify"}})
	if err := os.Mkdir(filepath.Join(dir, ".identity"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, ".identity", "gpu-01"), []byte("s3cret-of-gpu-01\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := c.VerifyIdentity(ctx, pool, "gpu-01", "s3cret-of-gpu-01"); err != nil {
		t.Fatalf("gpu-01's own identity: %v", err)
	}
	var refused *providers.RefusedError
	for _, tt := range []struct{ node, doc string }{{"gpu-01", "guess"}, {"gpu-02", "s3cret-of-gpu-01"}, {"gpu-01", ""}} {
		if err := c.VerifyIdentity(ctx, pool, tt.node, tt.doc); !errors.As(err, &refused) {
			t.Errorf("%s presenting %q: %v; want refused", tt.node, tt.doc, err)
		}
	}
	c, pool, _ = rack(t, map[string]string{"gpu-01": "on"}, nil)
	if err := c.VerifyIdentity(ctx, pool, "gpu-01", "anything"); !errors.As(err, &refused) || !strings.Contains(err.Error(), "no verify_command") {
		t.Errorf("without verify_command: %v; want refused", err)
	}
	unsure := script(t, "echo the TPM service is down >&2; exit 75")
	c, pool, _ = rack(t, map[string]string{"gpu-01": "on"}, map[string]any{"verify_command": []any{unsure}})
	if err := c.VerifyIdentity(ctx, pool, "gpu-01", "anything"); err == nil || errors.As(err, &refused) {
		t.Errorf("a verify_command that cannot tell now (75): %v; want an error that is no refusal", err)
	}
	slow := script(t, "/bin/sleep 5")
	c, pool, _ = rack(t, map[string]string{"gpu-01": "on"}, map[string]any{"verify_command": []any{slow}, "timeout": "200ms"})
	if err := c.VerifyIdentity(ctx, pool, "gpu-01", "anything"); err == nil || errors.As(err, &refused) {
		t.Errorf("a verify_command that does not answer: %v; want an error that is no refusal", err)
	}
}
