package plugin

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/fleetcast/autoscaler/fleet"
	"github.com/fleetcast/autoscaler/internal/proctest"
	"github.com/fleetcast/autoscaler/providers"
)

// testPlugin is the test plugin's binary (testdata/plugin, built once by
// TestMain) and its SHA-256.
var testPlugin struct{ path, sum string }

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "fcplugin")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	testPlugin.path = filepath.Join(dir, "test-racks")
	if out, err := exec.Command("go", "build", "-o", testPlugin.path, "./testdata/plugin").CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "building the test plugin: %v\n%s", err, out)
		os.Exit(1)
	}
	b, _ := os.ReadFile(testPlugin.path)
	sum := sha256.Sum256(b)
	testPlugin.sum = hex.EncodeToString(sum[:])
	code := m.Run()
	// No plugin process outlives the tests.
	if left := proctest.Running(testPlugin.path); len(left) > 0 && code == 0 {
		fmt.Fprintf(os.Stderr, "plugin processes left running: %v\n", left)
		code = 1
	}
	os.RemoveAll(dir)
	os.Exit(code)
}

// start starts the test plugin in mode, its state in dir, configured with
// rackPool; it is closed when the test ends.
func start(t *testing.T, mode, dir string, timeout time.Duration) (*Client, error) {
	t.Helper()
	// The controller's own environment is not the plugin's.
	t.Setenv("AWS_SECRET_ACCESS_KEY", "the controller's")
	c, err := Start(context.Background(), Spec{Name: "racks", Path: testPlugin.path, SHA256: testPlugin.sum,
		Config: map[string]any{"endpoint": "https://bmc.example"}, CallTimeout: timeout,
		Env: []string{"FLEETCAST_TEST_PLUGIN_MODE=" + mode, "FLEETCAST_TEST_PLUGIN_STATE=" + filepath.Join(dir, "state.json")}}, nil)
	if c != nil {
		t.Cleanup(c.Close)
		if diags, err := c.Configure(context.Background(), []fleet.Pool{rackPool()}, "prod"); err != nil || len(diags) > 0 {
			t.Fatalf("configure: %+v, %v", diags, err)
		}
	}
	return c, err
}

func rackPool() fleet.Pool {
	return fleet.Pool{Name: "onprem-a100", Provider: fleet.ProviderPlugin, InstanceType: "dgx-a100", GPUsPerNode: 8, Capacity: fleet.Reserved,
		PricePerHour: 10, LeadTime: 15 * time.Minute, Max: 4, Settings: Settings{Plugin: "racks", Target: map[string]any{"rack": "r7"}}}
}

// TestPluginRoundTrip: through a real plugin process, over go-plugin's
// gRPC with mTLS: its info, its check of its config and pools (with the
// attribute paths), scale-out to a target, the same launch again and
// after a restart (no second launch), scale-in of a chosen instance, and
// an instance it does not have refused with the typed error.
func TestPluginRoundTrip(t *testing.T) {
	dir := t.TempDir()
	c, err := start(t, "", dir, 0)
	if err != nil {
		t.Fatal(err)
	}
	if name, version, protector, reaper := c.Info(); name != "test-racks" || version != "0.0.1" || protector || reaper {
		t.Fatalf("info %s %s %v %v", name, version, protector, reaper)
	}
	ctx := context.Background()
	pool := rackPool()
	noRack := rackPool()
	noRack.Settings = Settings{Plugin: "racks"}
	noRack.Name = "onprem-h100"
	diags, err := c.Configure(ctx, []fleet.Pool{pool, noRack}, "prod")
	if err != nil || len(diags) != 1 || diags[0].Path != "pool.onprem-h100.target.rack" || diags[0].Summary != "Missing rack" {
		t.Fatalf("configure: %+v, %v; want the missing rack of onprem-h100", diags, err)
	}
	// A config refused leaves the one accepted before: a pool not in it
	// is not asked about.
	var busy *providers.GroupBusyError
	if _, err := c.Describe(ctx, noRack); err == nil || !strings.Contains(err.Error(), `pool "onprem-h100" is not among the pools the plugin was configured with`) || errors.As(err, &busy) {
		t.Fatalf("describing a pool the plugin was not configured with: %v", err)
	}
	unconfigured, err := Start(ctx, Spec{Name: "racks", Path: testPlugin.path, SHA256: testPlugin.sum}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer unconfigured.Close()
	if _, err := unconfigured.Describe(ctx, pool); err == nil || !strings.Contains(err.Error(), "not configured yet") {
		t.Fatalf("a call before Configure: %v", err)
	}
	if err := c.Launch(ctx, pool, providers.LaunchRequest{Count: 2, Target: 2, Key: "k1", Fleet: "prod", Names: []string{"dgx-7"}}); err != nil {
		t.Fatal(err)
	}
	g, err := c.Describe(ctx, pool)
	if err != nil || g.Target != 2 || len(g.Instances) != 2 || g.Instances[0].State != providers.InstanceRunning || g.Instances[0].LaunchedAt.IsZero() {
		t.Fatalf("describe: %+v, %v; want 2 running", g, err)
	}
	// The name the launch gave, across the wire.
	if !slices.ContainsFunc(g.Instances, func(in providers.Instance) bool { return in.ID == "dgx-7" }) {
		t.Fatalf("describe: %+v; want an instance named dgx-7, as the launch asked", g)
	}
	// The same launch again, and after a restart of the plugin: done once.
	if err := c.Launch(ctx, pool, providers.LaunchRequest{Count: 2, Target: 2, Key: "k1"}); err != nil {
		t.Fatal(err)
	}
	c.Close()
	if !c.Exited() {
		t.Fatal("the plugin's process outlived Close")
	}
	c, err = start(t, "", dir, 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Launch(ctx, pool, providers.LaunchRequest{Count: 2, Target: 2, Key: "k1"}); err != nil {
		t.Fatal(err)
	}
	if g, _ := c.Describe(ctx, pool); len(g.Instances) != 2 {
		t.Fatalf("after a retry and a restart: %d instances; want 2", len(g.Instances))
	}
	// A node's identity, checked by the plugin across the wire.
	if err := c.VerifyIdentity(ctx, pool, g.Instances[0].ID, "key-"+g.Instances[0].ID); err != nil {
		t.Fatalf("a node's own key: %v", err)
	}
	var refused *providers.RefusedError
	if err := c.VerifyIdentity(ctx, pool, g.Instances[0].ID, "key-"+g.Instances[1].ID); !errors.As(err, &refused) || !strings.Contains(err.Error(), "presented no key of its own") {
		t.Fatalf("another node's key: %v; want refused", err)
	}
	victim := g.Instances[1].ID
	if err := c.Terminate(ctx, pool, []string{victim}); err != nil {
		t.Fatal(err)
	}
	if g, _ := c.Describe(ctx, pool); len(g.Instances) != 1 || g.Instances[0].ID == victim {
		t.Fatalf("after terminating %s: %+v", victim, g.Instances)
	}
	var nf *providers.NotFoundError
	if err := c.Terminate(ctx, pool, []string{"rack-999"}); !errors.As(err, &nf) || nf.Pool != pool.Name || !strings.Contains(err.Error(), "server rack-999") {
		t.Fatalf("terminating what the plugin does not have: %v (%T); want a NotFoundError for the pool", err, err)
	}
}

// TestPluginTypedErrors: a plugin's typed error comes back as the shared
// type, for the pool, with its words, so the pool backs off.
func TestPluginTypedErrors(t *testing.T) {
	c, err := start(t, "capacity", t.TempDir(), 0)
	if err != nil {
		t.Fatal(err)
	}
	err = c.Launch(context.Background(), rackPool(), providers.LaunchRequest{Count: 1, Target: 1, Key: "k"})
	var ice *providers.InsufficientCapacityError
	if !errors.As(err, &ice) || ice.Pool != "onprem-a100" || !strings.Contains(err.Error(), "no powered-off server left in rack r7") || !providers.ShouldBackOff(err) {
		t.Fatalf("launch: %v (%T); want insufficient capacity in rack r7", err, err)
	}
}

// TestPluginRefusedAtStart: a plugin whose checksum is not the config's,
// that answers the handshake with another protocol version, or writes to
// stdout before its handshake, is refused with an error naming it, and
// leaves no process behind.
func TestPluginRefusedAtStart(t *testing.T) {
	t.Run("checksum", func(t *testing.T) {
		_, err := Start(context.Background(), Spec{Name: "racks", Path: testPlugin.path, SHA256: strings.Repeat("0", 64)}, nil)
		if err == nil || !strings.Contains(err.Error(), "plugin racks") || !strings.Contains(err.Error(), "checksum") {
			t.Fatalf("a wrong checksum: %v", err)
		}
	})
	for _, mode := range []string{"protocol99", "noise"} {
		t.Run(mode, func(t *testing.T) {
			c, err := start(t, mode, t.TempDir(), 0)
			if err == nil || c != nil || !strings.Contains(err.Error(), "plugin racks") {
				t.Fatalf("%s: %v, %v; want refused", mode, c, err)
			}
			t.Log(err)
		})
	}
}

// TestPluginStopped: a plugin whose child holds its output open (a
// daemon it started) is stopped all the same, its child with it, within
// the stop timeout.
func TestPluginStopped(t *testing.T) {
	c, err := start(t, "child", t.TempDir(), 0)
	if err != nil {
		t.Fatal(err)
	}
	begun := time.Now()
	c.Close()
	if d := time.Since(begun); d > StopTimeout+2*time.Second {
		t.Fatalf("Close took %v", d)
	}
	for start := time.Now(); len(proctest.Running(testPlugin.path)) > 0; time.Sleep(20 * time.Millisecond) {
		if time.Since(start) > 3*time.Second {
			t.Fatalf("processes left after Close: %v", proctest.Running(testPlugin.path))
		}
	}
}

// TestSupervisorRestarts: a plugin that crashes is started again after its
// backoff, and configured again; meanwhile every call fails, naming it
// (so its pools are left alone), and once it answers, its pools are read
// as they are. A plugin whose config is refused does not start.
func TestSupervisorRestarts(t *testing.T) {
	dir := t.TempDir()
	t.Setenv("AWS_SECRET_ACCESS_KEY", "the controller's")
	spec := Spec{Name: "racks", Path: testPlugin.path, SHA256: testPlugin.sum, Config: map[string]any{"endpoint": "https://bmc.example"},
		Env: []string{"FLEETCAST_TEST_PLUGIN_MODE=crash-once", "FLEETCAST_TEST_PLUGIN_STATE=" + filepath.Join(dir, "state.json")}}
	ctx := context.Background()
	pool := rackPool()
	s, diags, err := Supervise(ctx, spec, []fleet.Pool{pool}, "prod", nil)
	if err != nil || len(diags) > 0 {
		t.Fatalf("supervise: %v, %+v", err, diags)
	}
	t.Cleanup(s.Close)
	now := time.Now()
	s.now = func() time.Time { return now }
	if err := s.Launch(ctx, pool, providers.LaunchRequest{Count: 1, Target: 1, Key: "k1"}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Describe(ctx, pool); err == nil {
		t.Fatal("a Describe the plugin crashed in: no error")
	}
	for start := time.Now(); !s.client.Exited(); time.Sleep(10 * time.Millisecond) {
		if time.Since(start) > 5*time.Second {
			t.Fatal("the crashed plugin is not seen to have exited")
		}
	}
	if st := s.Status(); st.Healthy || !strings.Contains(st.Error, "its process exited") {
		t.Fatalf("status once it exited: %+v", st)
	}
	if _, err := s.Describe(ctx, pool); !errors.Is(err, ErrDown) || !strings.Contains(err.Error(), "starting it again in 1s") || !strings.Contains(err.Error(), "pool onprem-a100") {
		t.Fatalf("a Describe while it is down: %v; want ErrDown, with when it starts again", err)
	}
	if st := s.Status(); st.Healthy || st.NextStart == nil || !st.NextStart.Equal(now.Add(time.Second)) || st.Failures != 1 {
		t.Fatalf("status while it is down: %+v; want down, started again in 1s", st)
	}
	now = now.Add(2 * time.Second)
	g, err := s.Describe(ctx, pool)
	if err != nil || len(g.Instances) != 1 {
		t.Fatalf("once started again: %+v, %v; want the instance it launched before", g, err)
	}
	if st := s.Status(); !st.Healthy || st.Restarts != 1 || st.Failures != 0 || st.Plugin != "test-racks" || st.Protocol != ProtocolVersion || st.Pools[0] != pool.Name {
		t.Fatalf("status once started again: %+v", st)
	}

	refused := spec
	refused.Config = map[string]any{}
	if s, diags, err := Supervise(ctx, refused, []fleet.Pool{pool}, "prod", nil); s != nil || err != nil || len(diags) != 1 || diags[0].Path != "config.endpoint" {
		t.Fatalf("a refused config: %v, %+v, %v; want its diagnostic", s, diags, err)
	}
}

// TestPluginFailures: a plugin that crashes mid-call, hangs, or answers
// garbage is an error for the pool, never a panic; a hang is cut at the
// call's deadline.
func TestPluginFailures(t *testing.T) {
	ctx := context.Background()
	for _, tt := range []struct{ mode, want string }{
		{"crash", "plugin racks describe"},
		{"hang", "did not answer within"},
		{"garbage", "not a group"},
	} {
		t.Run(tt.mode, func(t *testing.T) {
			c, err := start(t, tt.mode, t.TempDir(), time.Second)
			if err != nil {
				t.Fatal(err)
			}
			_, err = c.Describe(ctx, rackPool())
			if err == nil || !strings.Contains(err.Error(), tt.want) || !strings.Contains(err.Error(), "pool onprem-a100") {
				t.Fatalf("%s: %v; want an error with %q", tt.mode, err, tt.want)
			}
			if tt.mode == "crash" {
				for start := time.Now(); !c.Exited(); time.Sleep(10 * time.Millisecond) {
					if time.Since(start) > 5*time.Second {
						t.Fatal("the crashed plugin is not seen to have exited")
					}
				}
			}
		})
	}
}
