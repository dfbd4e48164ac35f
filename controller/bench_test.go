package controller

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/fleetcast/autoscaler/agent/report"
	"github.com/fleetcast/autoscaler/fleet"
	"github.com/fleetcast/autoscaler/loop"
	"github.com/fleetcast/autoscaler/providers"
	"github.com/fleetcast/autoscaler/providers/sim"
	"github.com/fleetcast/autoscaler/state"
)

// BenchmarkCycle is one full control cycle over 10,000 eight-GPU nodes in
// four pools, every agent's report fresh and holding jobs, with two weeks
// of demand history: observe, record demand, forecast, plan and act.
func BenchmarkCycle(b *testing.B) {
	now := t0
	clock := func() time.Time { return now }
	var pools []fleet.Pool
	for i := range 4 {
		p := gpuPool(fmt.Sprint("pool-", i), 8, 2500, 10*time.Minute)
		p.PricePerHour += float64(i)
		pools = append(pools, p)
	}
	cfg := testDefaults()
	cfg.Pools = pools
	cfg.Limits.MaxGPUs = 200_000
	cloud := sim.New(pools, 1, clock)
	ctx := context.Background()
	for _, p := range pools {
		if err := cloud.Launch(ctx, p, providers.LaunchRequest{Count: 2500, Target: 2500}); err != nil {
			b.Fatal(err)
		}
	}
	now = now.Add(time.Hour)
	store, err := state.Open(b.TempDir())
	if err != nil {
		b.Fatal(err)
	}
	defer store.Close()
	w := sim.Workload{Base: 60000, Peak: 80000, PeakHour: 15, Noise: 0.05, Seed: 1}
	h := w.History(now, cfg.Forecast.Step, cfg.Forecast.History)
	var samples []state.Sample
	for i, v := range h.Values {
		samples = append(samples, state.Sample{Time: h.Start.Add(time.Duration(i) * h.Step), Value: v})
	}
	if err := store.AppendDemand(loop.DemandSeries, samples...); err != nil {
		b.Fatal(err)
	}
	agents, pending := NewAgents(clock), &Pending{}
	clouds := map[string]providers.Provider{}
	for _, p := range pools {
		clouds[p.Name] = cloud
	}
	c, err := New(Options{Settings: &cfg.Settings, Controller: cfg.Controller, Backfill: cfg.Demand.Backfill, Store: store, Clouds: clouds, Agents: agents, Pending: pending, Now: clock})
	if err != nil {
		b.Fatal(err)
	}
	reportAll := func() {
		for _, p := range pools {
			g, _ := cloud.Describe(ctx, p)
			for _, in := range g.Instances {
				r := &report.Report{Node: in.ID, SentAt: now, Healthy: true, Drain: report.DrainStatus{State: report.NotDraining},
					Jobs: []report.Job{{ID: "j-" + in.ID, GPUs: []int{0, 1, 2, 3, 4, 5, 6, 7}, Start: t0, LastCheckpoint: now.Add(-10 * time.Minute), LongRunning: true}}}
				for g := range 8 {
					r.GPUs = append(r.GPUs, report.GPU{Index: g, UUID: fmt.Sprint("GPU-", g), MemoryTotal: 80 << 30})
				}
				agents.Accept(ctx, r)
			}
		}
	}
	reportAll()
	if _, err := c.Cycle(ctx); err != nil { // the first cycle fits the forecaster
		b.Fatal(err)
	}
	for b.Loop() {
		b.StopTimer()
		now = now.Add(time.Minute)
		reportAll()
		b.StartTimer()
		if _, err := c.Cycle(ctx); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(len(c.Last().State.Nodes)), "nodes")
}
