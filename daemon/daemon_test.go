package daemon

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/fleetcast/autoscaler/config"
	"github.com/fleetcast/autoscaler/loop"
	"github.com/fleetcast/autoscaler/providers/registry"
)

// monday is where the tests' simulated time starts.
var monday = time.Date(2026, 11, 30, 9, 0, 0, 0, time.UTC)

func localConfig(t *testing.T) *config.Config {
	t.Helper()
	cfg, diags := registry.Load("../examples/local.hcl")
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	return cfg
}

// TestStartRunClose: the local example starts on the simulated cloud with
// its API served, runs a cycle every simulated interval for the time asked,
// its jobs with it, and a second start on the same state resumes after the
// demand the first recorded.
func TestStartRunClose(t *testing.T) {
	cfg, dir := localConfig(t), t.TempDir()
	ctx := context.Background()
	o := Options{Config: cfg, Speed: 1e6, SimStart: monday, Listen: "127.0.0.1:0", StateDir: dir, LoopbackReads: true}
	d, err := Start(ctx, o)
	if err != nil {
		t.Fatal(err)
	}
	in := d.Info()
	if in.Live || in.Scheme != "http" || in.Pools != len(cfg.Pools) || in.FirstPool != cfg.Pools[0].Name ||
		in.Interval != cfg.Controller.Interval || !strings.HasPrefix(in.StatePath, dir) || !strings.HasPrefix(in.RootTokenSource, dir) {
		t.Fatalf("info %+v", in)
	}
	resp, err := http.Get("http://" + in.Addr + "/v1/plan")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusServiceUnavailable && resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /v1/plan before a cycle: %d", resp.StatusCode)
	}
	var cycles []time.Time
	if err := d.Run(ctx, 30*time.Minute, func(now time.Time, r loop.CycleResult) { cycles = append(cycles, now) }); err != nil {
		t.Fatal(err)
	}
	if len(cycles) != 30 || !cycles[0].Equal(d.Started().Add(time.Minute)) || d.Elapsed() != 30*time.Minute {
		t.Fatalf("%d cycles from %v, %v elapsed; want 30, one a minute from a minute after %v", len(cycles), cycles[0], d.Elapsed(), d.Started())
	}
	if s, ok := d.Stats(); !ok || s.Started == 0 {
		t.Fatalf("the simulated fleet's stats: %+v, %v", s, ok)
	}
	resp, err = http.Get("http://" + in.Addr + "/v1/plan")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /v1/plan after the cycles: %d", resp.StatusCode)
	}
	end := cycles[len(cycles)-1]
	d.Close()
	if _, err := http.Get("http://" + in.Addr + "/v1/plan"); err == nil {
		t.Fatal("the API still answers after Close")
	}

	again, err := Start(ctx, o)
	if err != nil {
		t.Fatal(err)
	}
	defer again.Close()
	if !again.Started().After(end.Add(-time.Minute)) {
		t.Fatalf("restarted at %v; want after the last demand recorded, %v", again.Started(), end)
	}
}

// TestStartRefuses: what Start cannot run on is an error, and leaves the
// state free for the next start.
func TestStartRefuses(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	for _, tt := range []struct {
		name string
		o    Options
		want string
	}{
		{"no speed on the simulated cloud", Options{Speed: 0}, "simulated speed 0"},
		{"plain HTTP off loopback", Options{Speed: 1, Listen: "10.0.0.1:0"}, "not a loopback address"},
		{"an address it cannot listen on", Options{Speed: 1, Listen: "127.0.0.1:-1"}, "HTTP API on 127.0.0.1:-1"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			tt.o.Config, tt.o.StateDir, tt.o.SimStart = localConfig(t), dir, monday
			if _, err := Start(ctx, tt.o); err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("Start: %v; want an error saying %q", err, tt.want)
			}
		})
	}
	d, err := Start(ctx, Options{Config: localConfig(t), Speed: 1, SimStart: monday, Listen: "127.0.0.1:0", StateDir: dir})
	if err != nil {
		t.Fatalf("a start after the refused ones: %v", err)
	}
	d.Close()
}
