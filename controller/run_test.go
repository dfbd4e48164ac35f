package controller

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fleetcast/autoscaler/fleet"
	"github.com/fleetcast/autoscaler/loop"
	"github.com/fleetcast/autoscaler/providers"
	"github.com/fleetcast/autoscaler/providers/sim"
	"github.com/fleetcast/autoscaler/state"
)

// TestRun: Run runs a cycle every tick, the first at once when asked,
// after Before, and gives each to After with the time it began; it stops
// once For has passed on the controller's clock, when Before fails (with
// its error), or when the context is done.
func TestRun(t *testing.T) {
	l := newLoop(t, false, gpuPool("g5", 8, 20, 5*time.Minute))
	ctx := context.Background()
	var ats []time.Time
	err := l.c.Run(ctx, RunOptions{Every: time.Millisecond, For: 5 * time.Minute, Immediately: true,
		Before: func(context.Context) error {
			l.now = l.now.Add(time.Minute)
			l.report(t)
			return nil
		},
		After: func(at time.Time, r loop.CycleResult, err error) {
			if err != nil || !r.Plan.At.Equal(at) {
				t.Errorf("cycle at %v: plan at %v, %v", at, r.Plan.At, err)
			}
			ats = append(ats, at)
		}})
	if err != nil || len(ats) != 5 || !ats[0].Equal(t0.Add(time.Minute)) || !ats[4].Equal(t0.Add(5*time.Minute)) {
		t.Fatalf("cycles at %v, %v; want 5, a minute apart from %v", ats, err, t0.Add(time.Minute))
	}
	if last := l.c.Last(); !last.At.Equal(ats[4]) {
		t.Fatalf("last cycle at %v; want %v", last.At, ats[4])
	}

	boom := errors.New("workload broke")
	cycles := 0
	err = l.c.Run(ctx, RunOptions{Every: time.Millisecond, Immediately: true,
		Before: func(context.Context) error { return boom },
		After:  func(time.Time, loop.CycleResult, error) { cycles++ }})
	if !errors.Is(err, boom) || cycles != 0 {
		t.Fatalf("Run with a failing Before: %v after %d cycles; want its error, none", err, cycles)
	}

	done, cancel := context.WithCancel(ctx)
	cancel()
	err = l.c.Run(done, RunOptions{Every: time.Hour, After: func(time.Time, loop.CycleResult, error) { cycles++ }})
	if err != nil || cycles != 0 {
		t.Fatalf("Run with its context done: %v after %d cycles; want nil, none", err, cycles)
	}
}

// TestRunServesWhileItCycles: the API reads each cycle's snapshot (its
// state, the demand history in it, the plan and the forecast) while Run
// goes on to the next; under the race detector this checks that nothing
// the loop goes on changing is shared with what it published.
func TestRunServesWhileItCycles(t *testing.T) {
	p := gpuPool("g5", 8, 20, 5*time.Minute)
	cfg := testDefaults()
	cfg.Pools = []fleet.Pool{p}
	var ns atomic.Int64
	ns.Store(t0.UnixNano())
	clock := func() time.Time { return time.Unix(0, ns.Load()).UTC() }
	cloud := sim.New(cfg.Pools, 1, clock)
	store, err := state.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	// Two days of demand, a sample a minute: the loop forecasts from the
	// first cycle, and its history grows every step.
	var samples []state.Sample
	for m := range 2 * 24 * 60 {
		samples = append(samples, state.Sample{Time: t0.Add(time.Duration(m-2*24*60) * time.Minute), Value: float64(8 + m%16)})
	}
	if err := store.AppendDemand(loop.DemandSeries, samples...); err != nil {
		t.Fatal(err)
	}
	pending := &Pending{}
	c, err := New(Options{Settings: &cfg.Settings, Controller: cfg.Controller, Backfill: cfg.Demand.Backfill, Store: store, Clouds: map[string]providers.Provider{"g5": cloud}, Agents: NewAgents(clock),
		Pending: pending, Now: clock})
	if err != nil {
		t.Fatal(err)
	}
	h := c.Handler(APIOptions{OpenReads: true})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var readers sync.WaitGroup
	for _, path := range []string{"/v1/fleet", "/v1/plan", "/v1/forecast", "/metrics"} {
		readers.Add(1)
		go func() {
			defer readers.Done()
			for ctx.Err() == nil {
				get(t, h, path)
			}
		}()
	}
	cycles := 0
	err = c.Run(ctx, RunOptions{Every: time.Millisecond, For: 40 * time.Minute, Immediately: true,
		Before: func(context.Context) error {
			ns.Add(int64(time.Minute))
			pending.Set(clock(), DemandPush{Source: "s", Pending: []PendingDemand{{Pool: "g5", GPUs: 8 * (cycles % 3)}}})
			return nil
		},
		After: func(time.Time, loop.CycleResult, error) { cycles++ }})
	cancel()
	readers.Wait()
	if err != nil || cycles != 40 {
		t.Fatalf("%d cycles, %v; want 40", cycles, err)
	}
	if fc := c.Last().Forecast; fc == nil || len(c.Last().State.History.Values) == 0 {
		t.Fatalf("no forecast or history in the last snapshot: %+v", c.Last())
	}
}
