package controller

import (
	"context"
	"fmt"
	"math"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/dgxa100"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/dgxh100"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/server"

	"github.com/fleetcast/autoscaler/agent"
	"github.com/fleetcast/autoscaler/agent/gpu"
	"github.com/fleetcast/autoscaler/agent/gpu/gpmtest"
	"github.com/fleetcast/autoscaler/agent/report"
	"github.com/fleetcast/autoscaler/usage"
)

// busyGPUs is the activity a test sets for each GPU of a mock machine,
// in percent.
type busyGPUs struct {
	mu  sync.Mutex
	pct [8]int
}

func (b *busyGPUs) set(pct int, gpus ...int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, g := range gpus {
		b.pct[g] = pct
	}
}

func (b *busyGPUs) get(g int) int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.pct[g]
}

// utilMachine is a DGX A100 whose GPUs' utilisation rates are b's: NVML
// has no SM activity for them.
func utilMachine(b *busyGPUs) nvml.Interface {
	srv := dgxa100.New()
	for i, d := range srv.Devices {
		dev := d.(*server.Device)
		dev.GetUtilizationRatesFunc = func() (nvml.Utilization, nvml.Return) {
			return nvml.Utilization{Gpu: uint32(b.get(i)), Memory: 10}, nvml.SUCCESS
		}
		dev.GetComputeRunningProcessesFunc = func() ([]nvml.ProcessInfo, nvml.Return) { return nil, nvml.SUCCESS }
	}
	return srv
}

// smMachine is a DGX H100 whose GPUs' SM activity, read through GPM, is
// b's; their utilisation rates read 100% throughout, so a test that sees
// them idle has read the SM activity.
func smMachine(b *busyGPUs) nvml.Interface {
	srv := dgxh100.New()
	gpmtest.Install(srv, func(g int) float64 { return float64(b.get(g)) })
	for _, d := range srv.Devices {
		dev := d.(*server.Device)
		dev.GetUtilizationRatesFunc = func() (nvml.Utilization, nvml.Return) {
			return nvml.Utilization{Gpu: 100, Memory: 10}, nvml.SUCCESS
		}
		dev.GetComputeRunningProcessesFunc = func() ([]nvml.ProcessInfo, nvml.Return) { return nil, nvml.SUCCESS }
	}
	return srv
}

// TestAllocatedIdle: on a DGX A100 (utilisation rates) and a DGX H100 (SM
// activity), the real agent reads its GPUs through NVML and reports every
// five minutes, each report followed by a cycle, on a node of $32 an hour
// (8 GPUs: $4 a GPU-hour). From 10:00, vision's job "prep" holds GPUs 0
// and 1 at 0% until 10:30, then works; nlp's job "train" holds GPUs 2
// and 3, works, stalls from 10:20 to 10:40, works, and idles again from
// 10:50 to 10:55, shorter than the 10-minute window; vision's "viz" holds
// GPU 4 from 10:05 and works. Worked by hand:
//
//	prep:  idle before execution 10:00-10:30: 2 GPUs x 0.5 h = 1 GPU-hour, $4.00
//	train: stalled 10:20-10:40: 2 GPUs x 1/3 h = 2/3 GPU-hour, $2.67; 10:50-10:55 not
//
// Both parts of used, by job and by team; the node says which activity it
// read, and at 10:35 that train's 2 GPUs are stalled; the counters carry
// the same.
func TestAllocatedIdle(t *testing.T) {
	for _, tc := range []struct {
		name    string
		machine func(*busyGPUs) nvml.Interface
		source  string
	}{
		{"DGX A100", utilMachine, report.ActivityUtil},
		{"DGX H100", smMachine, report.ActivitySM},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l := newLoop(t, false, simPool("od", 1))
			ctx := context.Background()
			if err := l.c.act.Launch(ctx, "od", 1); err != nil {
				t.Fatal(err)
			}
			g, err := l.cloud.Describe(ctx, l.set.Pools[0])
			if err != nil || len(g.Instances) != 1 {
				t.Fatalf("instances %v, %v", g.Instances, err)
			}
			node := g.Instances[0].ID
			busy := &busyGPUs{}
			r, err := gpu.Open(tc.machine(busy))
			if err != nil {
				t.Fatal(err)
			}
			defer r.Close()
			r.Clock(func() time.Time { return l.now })
			a, err := agent.New(agent.Config{Node: node, GPUs: r, Now: func() time.Time { return l.now }})
			if err != nil {
				t.Fatal(err)
			}
			start := t0.Add(time.Hour) // 10:00
			step := func(at time.Duration) {
				t.Helper()
				l.now = start.Add(at)
				rep := a.Report()
				if err := rep.Validate(l.now, time.Minute, 8); err != nil {
					t.Fatalf("the agent's report at %v: %v", at, err)
				}
				l.send(t, &rep)
				if _, err := l.c.Cycle(ctx); err != nil {
					t.Fatal(err)
				}
			}
			step(-10 * time.Minute) // the node runs, no jobs; the agent has read its GPUs once
			l.now = start
			for _, j := range []agent.JobRequest{{ID: "prep", GPUs: []int{0, 1}, Team: "vision"}, {ID: "train", GPUs: []int{2, 3}, Team: "nlp"}} {
				if err := a.RegisterJob(j); err != nil {
					t.Fatal(err)
				}
			}
			busy.set(90, 2, 3)
			for at := time.Duration(0); at <= time.Hour; at += 5 * time.Minute {
				switch at {
				case 5 * time.Minute:
					// A job more on the node: its cost is split anew, prep's
					// idle five minutes not yet as long as the window.
					busy.set(90, 4)
					if err := a.RegisterJob(agent.JobRequest{ID: "viz", GPUs: []int{4}, Team: "vision"}); err != nil {
						t.Fatal(err)
					}
				case 30 * time.Minute:
					busy.set(80, 0, 1)
				case 20 * time.Minute, 50 * time.Minute:
					busy.set(0, 2, 3)
				case 40 * time.Minute, 55 * time.Minute:
					busy.set(90, 2, 3)
				}
				step(at)
				if at == 35*time.Minute {
					// Now: train stalled for 15 minutes, prep working.
					n := l.c.Last().State.Nodes
					if len(n) != 1 || n[0].ActivitySource != tc.source {
						t.Fatalf("nodes %+v, want one reading %s", n, tc.source)
					}
					v := newFleetView(l.now, l.set, l.c.Last().State, 10*time.Minute)
					if got := v.State.Nodes[0].AllocatedIdle; got == nil || *got != (idleGPUs{Stalled: 2}) {
						t.Errorf("at 10:35 the node's allocated-idle GPUs %+v, want 2 stalled", got)
					}
					for _, j := range n[0].Jobs {
						idle, before := j.AllocatedIdle(l.now, 10*time.Minute)
						if want := j.ID == "train"; idle != want || before {
							t.Errorf("at 10:35 job %s allocated-idle %v (before execution %v), want %v (false)", j.ID, idle, before, want)
						}
					}
				}
			}
			rep, err := l.c.UsageReport(usage.Query{From: start.Add(-time.Hour), To: start.Add(2 * time.Hour), By: usage.ByJob})
			if err != nil {
				t.Fatal(err)
			}
			want := map[string][2]usage.Amount{
				"prep":  {{Micros: 4_000_000, GPUHours: 1}, {}},
				"train": {{}, {Micros: usage.MicrosOf(8.0 / 3), GPUHours: 2.0 / 3}},
				"viz":   {{}, {}},
			}
			for _, x := range rep.Rows {
				w := want[x.Group]
				if !sameAmount(x.IdleBeforeExecution, w[0]) || !sameAmount(x.Stalled, w[1]) {
					t.Errorf("job %s: idle before execution %+v, stalled %+v; want %+v, %+v", x.Group, x.IdleBeforeExecution, x.Stalled, w[0], w[1])
				}
				delete(want, x.Group)
			}
			if len(want) > 0 {
				t.Errorf("jobs missing from the report: %v", want)
			}
			rep, err = l.c.UsageReport(usage.Query{From: start.Add(-time.Hour), To: start.Add(2 * time.Hour), By: usage.ByTeam})
			if err != nil {
				t.Fatal(err)
			}
			for _, x := range rep.Rows {
				switch x.Group {
				case "vision":
					if !sameAmount(x.IdleBeforeExecution, usage.Amount{Micros: 4_000_000, GPUHours: 1}) || x.Stalled != (usage.Amount{}) {
						t.Errorf("vision: %+v", x)
					}
				case "nlp":
					if x.IdleBeforeExecution != (usage.Amount{}) || !sameAmount(x.Stalled, usage.Amount{Micros: usage.MicrosOf(8.0 / 3), GPUHours: 2.0 / 3}) {
						t.Errorf("nlp: %+v", x)
					}
				}
				if x.IdleBeforeExecution.Micros+x.Stalled.Micros > x.Used.Micros {
					t.Errorf("%s: allocated-idle %d over used %d", x.Group, x.IdleBeforeExecution.Micros+x.Stalled.Micros, x.Used.Micros)
				}
			}
			if got := rep.Total.CostMicros; got != usage.MicrosOf(32*70.0/60) {
				t.Errorf("total %d micro-dollars, want the node's $32 an hour from 9:50 to 11:00, %d", got, usage.MicrosOf(32*70.0/60))
			}
			if got := counterOf(t, l.c, "fleetcast_usage_allocated_idle_dollars_total", "vision", "idle_before_execution"); got != 4 {
				t.Errorf("vision's idle before execution counter %v, want 4", got)
			}
			if got := counterOf(t, l.c, "fleetcast_usage_allocated_idle_dollars_total", "nlp", "stalled"); math.Abs(got-8.0/3) > 1e-6 {
				t.Errorf("nlp's stalled counter %v, want %v", got, 8.0/3)
			}
		})
	}
}

// sameAmount reports whether two amounts are the same to the cent and the
// millionth of a GPU-hour.
func sameAmount(a, b usage.Amount) bool {
	return (a.Micros-b.Micros)/10_000 == 0 && math.Abs(a.GPUHours-b.GPUHours) < 1e-6
}

// counterOf sums the counter's series of the team and kind, as scraped.
func counterOf(t *testing.T, c *Controller, name, team, kind string) float64 {
	t.Helper()
	sum := 0.0
	for key, v := range scrape(t, c).value {
		if strings.HasPrefix(key, name+"{") && strings.Contains(key, fmt.Sprintf("team=%q", team)) && strings.Contains(key, fmt.Sprintf("kind=%q", kind)) {
			sum += v
		}
	}
	return sum
}
