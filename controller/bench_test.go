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
	"github.com/fleetcast/autoscaler/usage"
)

// BenchmarkCycle is one full control cycle over 10,000 eight-GPU nodes in
// four pools, every agent's report fresh and holding jobs, with two weeks
// of demand history: observe, record demand, forecast, plan and act.
func BenchmarkCycle(b *testing.B) {
	c, step := benchFleet(b, 8, 1)
	benchCycles(b, c, step)
	b.ReportMetric(float64(len(c.Last().State.Nodes)), "nodes")
}

// benchCycles times c's cycles, step untimed before each.
func benchCycles(b *testing.B, c *Controller, step func()) {
	for b.Loop() {
		b.StopTimer()
		step()
		b.StartTimer()
		if _, err := c.Cycle(context.Background()); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkCycleUsage is BenchmarkCycle with 100,000 jobs (ten 1-GPU
// jobs on each of 10,000 ten-GPU nodes, of ten teams, each checkpointing
// every 15 minutes): each cycle without the charging of who used what,
// then that charging (keepUsage) on its result, timed apart in one run:
// ms-cycle, ms-usage and the time it adds to a cycle, added-%.
func BenchmarkCycleUsage(b *testing.B) {
	c, step := benchFleet(b, 10, 10)
	var cycle, usage time.Duration
	for b.Loop() {
		b.StopTimer()
		step()
		c.usageOff = true
		b.StartTimer()
		start := time.Now()
		r, err := c.RunCycle(context.Background())
		if err != nil {
			b.Fatal(err)
		}
		cycle += time.Since(start)
		c.usageOff = false
		start = time.Now()
		c.keepUsage(c.now(), &r)
		usage += time.Since(start)
	}
	n := float64(b.N)
	b.ReportMetric(cycle.Seconds()*1000/n, "ms-cycle")
	b.ReportMetric(usage.Seconds()*1000/n, "ms-usage")
	b.ReportMetric(100*usage.Seconds()/cycle.Seconds(), "added-%")
}

// BenchmarkCycleBudgets is BenchmarkCycleUsage's fleet (100,000 jobs of
// ten teams) with each team's burst budget and share in the config, so
// that each cycle reads the day's usage hours and the books in progress
// for the teams' spend, and the planner withholds for those over: the
// whole cycle, charging included (compare BenchmarkCycleUsage's ms-cycle
// plus ms-usage, in the same run).
func BenchmarkCycleBudgets(b *testing.B) {
	var teams []fleet.Team
	for k := range 10 {
		teams = append(teams, fleet.Team{Name: fmt.Sprint("team-", k), Budgeted: true, BurstBudgetPerDay: 1000, ReservedShare: 0.05})
	}
	c, step := benchFleet(b, 10, 10, teams...)
	c.pending.Budgeted = fleet.BudgetedTeams(teams)
	benchCycles(b, c, step)
	b.ReportMetric(float64(len(c.Last().Plan.OverBudget)), "teams-over")
}

// benchFleet is a controller over 10,000 nodes of gpus GPUs in four pools
// (with teams, the config's team blocks),
// each node's agent reporting jobs 1-GPU jobs of ten teams (one job of
// every GPU when jobs is 1), their GPUs 80% busy, with two weeks of demand history, after its
// first cycle; step moves the clock a minute and has every agent report
// again.
func benchFleet(b *testing.B, gpus, jobs int, teams ...fleet.Team) (*Controller, func()) {
	now := t0
	clock := func() time.Time { return now }
	var pools []fleet.Pool
	for i := range 4 {
		p := gpuPool(fmt.Sprint("pool-", i), gpus, 2500, 10*time.Minute)
		p.PricePerHour += float64(i)
		pools = append(pools, p)
	}
	cfg := testDefaults()
	cfg.Pools = pools
	cfg.Limits.MaxGPUs = 200_000
	cfg.Teams = teams
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
	b.Cleanup(func() { store.Close() })
	peak := float64(10_000 * gpus)
	w := sim.Workload{Base: 0.75 * peak, Peak: peak, PeakHour: 15, Noise: 0.05, Seed: 1}
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
	all := make([]int, gpus)
	for g := range all {
		all[g] = g
	}
	reportAll := func() {
		for _, p := range pools {
			g, _ := cloud.Describe(ctx, p)
			for n, in := range g.Instances {
				r := &report.Report{Node: in.ID, SentAt: now, Healthy: true, Drain: report.DrainStatus{State: report.NotDraining}}
				if jobs == 1 {
					r.Jobs = []report.Job{{ID: "j-" + in.ID, GPUs: all, Start: t0, LastCheckpoint: now.Add(-10 * time.Minute), LongRunning: true}}
				} else {
					for k := range jobs {
						// Each job checkpoints every 15 minutes, the jobs
						// of a node at staggered minutes.
						cp := now.Truncate(time.Minute).Add(-time.Duration((int(now.Unix()/60)+n+k)%15) * time.Minute)
						r.Jobs = append(r.Jobs, report.Job{ID: fmt.Sprint("j-", in.ID, "-", k), GPUs: all[k : k+1], Start: t0, Submitted: t0.Add(-time.Duration(k) * time.Minute),
							LastCheckpoint: cp, LongRunning: true, Team: fmt.Sprint("team-", (n+k)%10), Tier: "standard"})
					}
				}
				for g := range gpus {
					r.GPUs = append(r.GPUs, report.GPU{Index: g, UUID: fmt.Sprint("GPU-", g), MemoryTotal: 80 << 30, UtilGPU: 80}) // at work
				}
				agents.Accept(ctx, r)
			}
		}
	}
	reportAll()
	if _, err := c.Cycle(ctx); err != nil { // the first cycle fits the forecaster
		b.Fatal(err)
	}
	return c, func() {
		now = now.Add(time.Minute)
		reportAll()
	}
}

// BenchmarkUsageReport is the report of who used what over 30 days of
// a fleet's records: 100,000 job records and an hour of each of ten
// teams, three tiers and four pools for every hour, read from the bbolt
// state file and grouped by team, and by job.
func BenchmarkUsageReport(b *testing.B) {
	store, err := state.Open(b.TempDir())
	if err != nil {
		b.Fatal(err)
	}
	defer store.Close()
	end := t0.Truncate(time.Hour)
	from := end.Add(-30 * 24 * time.Hour)
	var hours []state.UsageHour
	for h := from; h.Before(end); h = h.Add(time.Hour) {
		for team := range 10 {
			for _, tier := range []string{"critical", "standard", "best_effort"} {
				r := state.UsageHour{Hour: h, Team: fmt.Sprint("team-", team), Tier: tier, Started: 5, Queue: []int64{30, 90, 120, 150, 210}, WaitedGPUHours: 1}
				for p := range 4 {
					r.Charges = append(r.Charges, state.UsageCharge{Pool: fmt.Sprint("pool-", p), Kind: "used", Micros: 1_000_000, GPUHours: 1})
				}
				hours = append(hours, r)
			}
		}
	}
	if err := store.PutUsage(hours, nil); err != nil {
		b.Fatal(err)
	}
	for i := 0; i < 100_000; i += 10_000 {
		var jobs []state.UsageJob
		for k := i; k < i+10_000; k++ {
			start := from.Add(time.Duration(k) * 25 * time.Second)
			jobs = append(jobs, state.UsageJob{ID: fmt.Sprint("job-", k), Team: fmt.Sprint("team-", k%10), Tier: "standard", Pool: fmt.Sprint("pool-", k%4), Nodes: 1, GPUs: 1,
				Submitted: start.Add(-time.Duration(k%600) * time.Second), Start: start, End: start.Add(time.Hour), Micros: 4_000_000, GPUHours: 1})
		}
		if err := store.PutUsage(nil, jobs); err != nil {
			b.Fatal(err)
		}
	}
	for _, by := range []usage.By{usage.ByTeam, usage.ByJob} {
		b.Run(string(by), func(b *testing.B) {
			for b.Loop() {
				rep, err := BuildUsageReport(store, usage.Query{From: from, To: end, By: by}, usage.Live{})
				if err != nil || rep.Total.CostMicros == 0 {
					b.Fatal(rep.Total, err)
				}
			}
		})
	}
}
