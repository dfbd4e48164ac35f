package sim

import (
	"context"
	"errors"
	"reflect"
	"testing"
	"time"

	"github.com/fleetcast/autoscaler/config"
	"github.com/fleetcast/autoscaler/fleet"
	"github.com/fleetcast/autoscaler/providers"
)

var t0 = time.Date(2026, 11, 30, 14, 0, 0, 0, time.UTC)

func simPool(name string, s fleet.ProviderSettings) fleet.Pool {
	return fleet.Pool{Name: name, Provider: "sim", InstanceType: "p4d.24xlarge", GPUsPerNode: 8, Capacity: fleet.OnDemand,
		PricePerHour: 32, LeadTime: 9 * time.Minute, ProvisionTimeout: 27 * time.Minute, Max: 10, Settings: s}
}

// clock is a settable clock.
type clock struct{ now time.Time }

func (c *clock) Now() time.Time { return c.now }

func TestCloudLaunchDescribeTerminate(t *testing.T) {
	ctx := context.Background()
	clk := &clock{now: t0}
	p := simPool("od", Settings{Capacity: 3})
	c := New([]fleet.Pool{p}, 1, clk.Now)
	if err := c.Launch(ctx, p, providers.LaunchRequest{Count: 2, Target: 2, Key: "k1"}); err != nil {
		t.Fatal(err)
	}
	// The same key again (a controller restart) launches nothing.
	if err := c.Launch(ctx, p, providers.LaunchRequest{Count: 2, Target: 4, Key: "k1"}); err != nil {
		t.Fatal(err)
	}
	g, _ := c.Describe(ctx, p)
	if g.Target != 2 || len(g.Instances) != 2 || g.Instances[0].State != providers.InstancePending {
		t.Fatalf("group = %+v", g)
	}
	clk.now = t0.Add(9 * time.Minute)
	g, _ = c.Describe(ctx, p)
	if g.Instances[0].State != providers.InstanceRunning {
		t.Fatalf("after the lead time: %+v", g.Instances[0])
	}
	// Past the region's capacity: what fits is launched, then a typed error.
	err := c.Launch(ctx, p, providers.LaunchRequest{Count: 2, Target: 4, Key: "k2"})
	var ice *providers.InsufficientCapacityError
	if !errors.As(err, &ice) || ice.Pool != "od" || !errors.Is(err, ErrSimulated) || !providers.ShouldBackOff(err) {
		t.Fatalf("err = %v, want InsufficientCapacityError", err)
	}
	if g, _ = c.Describe(ctx, p); g.Target != 3 {
		t.Fatalf("target = %d, want 3 (capacity)", g.Target)
	}
	id := g.Instances[0].ID
	if err := c.Terminate(ctx, p, []string{id}); err != nil {
		t.Fatal(err)
	}
	if g, _ = c.Describe(ctx, p); g.Target != 2 || len(g.Instances) != 2 {
		t.Fatalf("after terminate: %+v", g)
	}
	var nf *providers.NotFoundError
	if err := c.Terminate(ctx, p, []string{id}); !errors.As(err, &nf) {
		t.Fatalf("terminating a gone instance: %v, want NotFoundError", err)
	}
	if _, err := c.Describe(ctx, simPool("nope", nil)); !errors.As(err, &nf) {
		t.Fatalf("unknown pool: %v, want NotFoundError", err)
	}
}

func TestCloudInjectedErrorsAreDeterministic(t *testing.T) {
	p := simPool("od", Settings{Capacity: 10, ErrorRate: 0.5})
	outcomes := func() []bool {
		c := New([]fleet.Pool{p}, 42, func() time.Time { return t0 })
		var out []bool
		for i := range 40 {
			err := c.Launch(context.Background(), p, providers.LaunchRequest{Count: 1, Target: 0})
			out = append(out, err == nil)
			_ = i
		}
		return out
	}
	a, b := outcomes(), outcomes()
	fails := 0
	for _, ok := range a {
		if !ok {
			fails++
		}
	}
	if !reflect.DeepEqual(a, b) || fails < 10 || fails > 30 {
		t.Fatalf("outcomes %v / %v (%d failures of 40)", a, b, fails)
	}
}

// TestSettings: a sim block's settings, with their defaults (capacity =
// max, no errors, initial = min), and its errors, each at its value.
func TestSettings(t *testing.T) {
	blocks := []config.ProviderBlock{{Name: fleet.ProviderSim, Optional: true, Decode: DecodeBlock}}
	const head = "pool \"p\" {\n  provider = \"sim\"\n  instance_type = \"x\"\n  gpus_per_node = 8\n  price_per_hour = 1\n  min = 1\n  max = 10\n"
	for _, tt := range []struct {
		name, block string
		want        Settings
		err         string // the error's FILE:LINE:COL: error: SUMMARY: DETAIL, or ""
	}{
		{"no block", "", Settings{Capacity: 10, Initial: 1}, ""},
		{"empty block", "  sim {}\n", Settings{Capacity: 10, Initial: 1}, ""},
		{"all set", "  sim {\n    capacity = 4\n    initial = 2\n    capacity_error_rate = 0.1\n  }\n", Settings{Capacity: 4, Initial: 2, ErrorRate: 0.1}, ""},
		{"a stockout", "  sim {\n    capacity = 0\n  }\n", Settings{Capacity: 0, Initial: 1}, ""},
		{"negative capacity", "  sim {\n    capacity = -1\n  }\n", Settings{}, "t.hcl:9:16: error: Invalid value: capacity must be 0 or more, got -1."},
		{"rate above 1", "  sim {\n    capacity_error_rate = 2\n  }\n", Settings{}, "t.hcl:9:27: error: Invalid value: capacity_error_rate must be between 0 and 1, got 2."},
		{"initial above max", "  sim {\n    initial = 11\n  }\n", Settings{}, "t.hcl:9:15: error: Invalid value: initial (11) is greater than the pool's max (10)."},
		{"unknown attribute", "  sim {\n    size = 1\n  }\n", Settings{}, "t.hcl:9:5: error: Unsupported argument: An argument named \"size\" is not expected here."},
	} {
		t.Run(tt.name, func(t *testing.T) {
			cfg, diags := config.Parse("t.hcl", []byte(head+tt.block+"}\n"), blocks)
			if tt.err != "" {
				if len(diags) != 1 || config.FormatDiagnostic(diags[0]) != tt.err {
					t.Fatalf("got %v, want the one error %s", diags, tt.err)
				}
				return
			}
			if diags.HasErrors() {
				t.Fatal(diags)
			}
			if got := SettingsOf(cfg.Pools[0]); got.Capacity != tt.want.Capacity || got.Initial != tt.want.Initial || got.ErrorRate != tt.want.ErrorRate {
				t.Errorf("got %+v, want %+v", got, tt.want)
			}
		})
	}
	// A pool made without settings, or of another provider, takes the
	// defaults.
	aws := simPool("p", nil)
	aws.Provider, aws.Min = fleet.ProviderAWS, 2
	if got := SettingsOf(aws); got != (Settings{Capacity: 10, Initial: 2}) {
		t.Errorf("SettingsOf a pool without settings = %+v", got)
	}
}

func localConfig(t *testing.T) *config.Config {
	t.Helper()
	cfg, diags := config.Load("../../examples/local.hcl", []config.ProviderBlock{{Name: fleet.ProviderSim, Optional: true, Decode: DecodeBlock}})
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	return cfg
}

func TestGenerate(t *testing.T) {
	cfg := localConfig(t)
	cloud, st := Generate(cfg, t0)
	if err := st.Validate(cfg.Pools); err != nil {
		t.Fatalf("generated state is invalid: %v", err)
	}
	// 14 days of 10-minute history, ending at now.
	if len(st.History.Values) != 14*144 || !st.History.End().Equal(t0) {
		t.Fatalf("history: %d values ending %v", len(st.History.Values), st.History.End())
	}
	states := map[fleet.NodeState]int{}
	silent := 0
	for _, n := range st.Nodes {
		states[n.State]++
		if n.State != fleet.Pending && t0.Sub(n.LastReport) > cfg.Controller.AgentTimeout {
			silent++
		}
	}
	if states[fleet.Draining] != 1 || states[fleet.Pending] != 1 || silent != 1 {
		t.Fatalf("states %v, silent %d", states, silent)
	}
	// The spot pool is out of capacity, so it is backed off.
	if len(st.Pools) != 1 || st.Pools[0].Name != "aws-spot-a100" || !st.Pools[0].BackoffUntil.After(t0) {
		t.Fatalf("pool statuses = %+v", st.Pools)
	}
	// The cloud holds exactly the generated nodes.
	ids := map[string]bool{}
	for _, p := range cfg.Pools {
		g, err := cloud.Describe(context.Background(), p)
		if err != nil {
			t.Fatal(err)
		}
		for _, in := range g.Instances {
			ids[in.ID] = true
		}
	}
	if len(ids) != len(st.Nodes) {
		t.Fatalf("cloud has %d instances, state %d nodes", len(ids), len(st.Nodes))
	}
	// Deterministic for the seed.
	_, again := Generate(cfg, t0)
	if !reflect.DeepEqual(st, again) {
		t.Fatal("two fleets generated with the same seed differ")
	}
}

func TestWorkloadDailyCycle(t *testing.T) {
	w := Workload{Base: 40, Peak: 160, PeakHour: 15}
	mon := time.Date(2026, 11, 30, 0, 0, 0, 0, time.UTC) // a Monday
	if got := w.Mean(mon.Add(15 * time.Hour)); got != 160 {
		t.Fatalf("peak = %v", got)
	}
	if got := w.Mean(mon.Add(3 * time.Hour)); got != 40 {
		t.Fatalf("trough = %v", got)
	}
	if got := w.Mean(mon.Add(-9 * time.Hour)); got != 40+120*0.6 { // Sunday 15:00
		t.Fatalf("weekend peak = %v", got)
	}
	w.Noise = 0.1
	if w.At(mon) != w.At(mon.Add(30*time.Second)) {
		t.Fatal("noise differs within a minute")
	}
}
