package sim

import (
	"context"
	"errors"
	"reflect"
	"testing"
	"time"

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

// TestSettingsOf: a pool made without settings, or of another provider,
// takes the defaults.
func TestSettingsOf(t *testing.T) {
	aws := simPool("p", nil)
	aws.Provider, aws.Min = fleet.ProviderAWS, 2
	if got := SettingsOf(aws); got != (Settings{Capacity: 10, Initial: 2}) {
		t.Errorf("SettingsOf a pool without settings = %+v", got)
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
