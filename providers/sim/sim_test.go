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

func simPool(name string, target map[string]string) fleet.Pool {
	return fleet.Pool{Name: name, Provider: "sim", InstanceType: "p4d.24xlarge", GPUsPerNode: 8, Capacity: fleet.OnDemand,
		PricePerHour: 32, LeadTime: 9 * time.Minute, ProvisionTimeout: 27 * time.Minute, Max: 10, Target: target}
}

// clock is a settable clock.
type clock struct{ now time.Time }

func (c *clock) Now() time.Time { return c.now }

func TestCloudLaunchDescribeTerminate(t *testing.T) {
	ctx := context.Background()
	clk := &clock{now: t0}
	p := simPool("od", map[string]string{"capacity": "3"})
	c, err := New([]fleet.Pool{p}, 1, clk.Now)
	if err != nil {
		t.Fatal(err)
	}
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
	err = c.Launch(ctx, p, providers.LaunchRequest{Count: 2, Target: 4, Key: "k2"})
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
	p := simPool("od", map[string]string{"capacity_error_rate": "0.5"})
	outcomes := func() []bool {
		c, err := New([]fleet.Pool{p}, 42, func() time.Time { return t0 })
		if err != nil {
			t.Fatal(err)
		}
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

func TestSettingsOf(t *testing.T) {
	for _, tt := range []struct {
		target  map[string]string
		want    Settings
		wantErr bool
	}{
		{nil, Settings{Capacity: 10, Initial: 0}, false},
		{map[string]string{"capacity": "4", "initial": "2", "capacity_error_rate": "0.1"}, Settings{Capacity: 4, Initial: 2, ErrorRate: 0.1}, false},
		{map[string]string{"capacity": "-1"}, Settings{}, true},
		{map[string]string{"capacity_error_rate": "2"}, Settings{}, true},
	} {
		got, err := SettingsOf(simPool("p", tt.target))
		if (err != nil) != tt.wantErr || (!tt.wantErr && got != tt.want) {
			t.Fatalf("SettingsOf(%v) = %+v, %v", tt.target, got, err)
		}
	}
}

func localConfig(t *testing.T) *config.Config {
	t.Helper()
	cfg, diags := config.Load("../../examples/local.hcl")
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	return cfg
}

func TestGenerate(t *testing.T) {
	cfg := localConfig(t)
	cloud, st, err := Generate(cfg, t0)
	if err != nil {
		t.Fatal(err)
	}
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
	_, again, _ := Generate(cfg, t0)
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
