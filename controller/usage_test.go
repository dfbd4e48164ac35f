package controller

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"

	"github.com/fleetcast/autoscaler/agent/report"
	"github.com/fleetcast/autoscaler/fleet"
	"github.com/fleetcast/autoscaler/providers"
	"github.com/fleetcast/autoscaler/state"
	"github.com/fleetcast/autoscaler/usage"
)

// reportJobs has each running instance's agent report the jobs jobs
// gives it (by pool: one node per pool in these tests), each holding the
// GPUs from 0 up.
func (l *cycler) reportJobs(t *testing.T, jobs map[string][]report.Job) {
	t.Helper()
	for _, p := range l.set.Pools {
		g, err := l.cloud.Describe(context.Background(), p)
		if err != nil {
			t.Fatal(err)
		}
		for _, in := range g.Instances {
			if in.State != providers.InstanceRunning {
				continue
			}
			r := &report.Report{Node: in.ID, SentAt: l.now, Healthy: true, Drain: report.DrainStatus{State: report.NotDraining}}
			for i := range p.GPUsPerNode {
				r.GPUs = append(r.GPUs, report.GPU{Index: i, UUID: fmt.Sprint("GPU-", i), MemoryTotal: 80 << 30})
			}
			r.Jobs = jobs[p.Name]
			l.send(t, r)
		}
	}
}

// job is a registered job holding gpus GPUs of its node, from the first.
func job(id, team, tier string, first, gpus int, submitted, start time.Time) report.Job {
	j := report.Job{ID: id, Team: team, Tier: tier, Start: start, Submitted: submitted}
	for i := range gpus {
		j.GPUs = append(j.GPUs, first+i)
	}
	return j
}

// TestUsageThreeTeams: an on-demand node ($32 an hour, 8 GPUs) runs
// alpha's 4-GPU job and beta's 2-GPU job; a reserved node ($6 an hour, 4
// GPUs) runs gamma's 1-GPU job until 11:21. Cycles at 10:06, 10:36, 11:21
// and 11:51 charge each interval by what its first cycle saw; delta's 2
// GPUs wait from 10:36 to 11:21. The figures below are worked by hand:
//
//	[10:06,10:36) 0.5 h:  od $16 = alpha 8 + beta 4 + idle 4;         rs $3   = gamma 0.75 + idle 2.25
//	[10:36,11:21) 0.75 h: od $24 = alpha 12 + beta 6 + idle 6;        rs $4.5 = gamma 1.125 + idle 3.375
//	[11:21,11:51) 0.5 h:  od $16 = alpha 8 + beta 4 + idle 4;         rs $3   = idle 3
//
// so alpha $28 (7 GPU-hours), beta $14 (3.5), gamma $1.875 (1.25), idle
// $22.625: $66.50, the fleet's spend (od 1.75 h at $32, rs 1.75 h at $6).
// Shared back by use, od's idle $14 goes 2:1 to alpha and beta, rs's
// $8.625 to gamma.
func TestUsageThreeTeams(t *testing.T) {
	od := simPool("od", 1)
	od.Min = 1
	rs := fleet.Pool{Name: "rs", Provider: "sim", InstanceType: "g6.12xlarge", GPUsPerNode: 4, Capacity: fleet.Reserved,
		PricePerHour: 6, LeadTime: 5 * time.Minute, ProvisionTimeout: 15 * time.Minute, Min: 1, Max: 1}
	l := newLoop(t, false, od, rs)
	ctx := context.Background()
	for _, p := range []string{"od", "rs"} {
		if err := l.c.act.Launch(ctx, p, 1); err != nil {
			t.Fatal(err)
		}
	}
	at := func(hh, mm int) time.Time { return time.Date(2026, 11, 30, hh, mm, 0, 0, time.UTC) }
	a1 := job("a1", "alpha", "critical", 0, 4, at(9, 50), at(10, 5))
	b1 := job("b1", "beta", "standard", 4, 2, at(10, 0), at(10, 2))
	c1 := job("c1", "gamma", "standard", 0, 1, time.Time{}, at(10, 1))
	for _, step := range []struct {
		at   time.Time
		jobs map[string][]report.Job
		push []PendingDemand
	}{
		{at(10, 6), map[string][]report.Job{"od": {a1, b1}, "rs": {c1}}, nil},
		{at(10, 36), map[string][]report.Job{"od": {a1, b1}, "rs": {c1}}, []PendingDemand{{GPUs: 2, Team: "delta", Tier: "best_effort"}}},
		{at(11, 21), map[string][]report.Job{"od": {a1, b1}}, nil},
		{at(11, 51), map[string][]report.Job{"od": {a1, b1}}, nil},
	} {
		l.now = step.at
		l.pending.Set(l.now, DemandPush{Source: "queue", Pending: step.push})
		l.reportJobs(t, step.jobs)
		plan, err := l.c.Cycle(ctx)
		if err != nil {
			t.Fatalf("cycle at %v: %v", l.now, err)
		}
		if len(plan.Actions) > 0 {
			t.Fatalf("at %v: actions %+v; the test wants the two nodes as they are", l.now, plan.Actions)
		}
	}
	q := usage.Query{From: at(10, 0), To: at(12, 0), By: usage.ByTeam}
	rep, err := l.c.UsageReport(q)
	if err != nil {
		t.Fatal(err)
	}
	type want struct {
		used, idle usage.Micros
		gpuHours   float64
		waited     float64
		p50        float64
		started    int
	}
	check := func(rep usage.Report, wants map[string]want, field func(usage.Row) usage.Micros) {
		t.Helper()
		if len(rep.Rows) != len(wants) {
			t.Errorf("rows %+v, want %d", rep.Rows, len(wants))
		}
		for _, r := range rep.Rows {
			w, ok := wants[r.Group]
			if !ok {
				t.Errorf("unexpected row %+v", r)
				continue
			}
			if r.Used.Micros != w.used || field(r) != w.idle || r.CostMicros != w.used+w.idle {
				t.Errorf("%s: used %d, idle %d, cost %d; want %d, %d, %d", r.Group, r.Used.Micros, field(r), r.CostMicros, w.used, w.idle, w.used+w.idle)
			}
			if w.gpuHours != 0 && !near(r.Used.GPUHours, w.gpuHours) {
				t.Errorf("%s: %v GPU-hours, want %v", r.Group, r.Used.GPUHours, w.gpuHours)
			}
			if !near(r.WaitedGPUHours, w.waited) || r.Queue.P50 != w.p50 || r.Started != w.started {
				t.Errorf("%s: waited %v GPU-hours, queue p50 %vs, %d started; want %v, %v, %d", r.Group, r.WaitedGPUHours, r.Queue.P50, r.Started, w.waited, w.p50, w.started)
			}
		}
		if got, spend := rep.Total.CostMicros, usage.MicrosOf(32*1.75+6*1.75); got != spend {
			t.Errorf("the rows add up to %d micro-dollars, want the fleet's spend %d", got, spend)
		}
	}
	check(rep, map[string]want{
		"alpha":         {used: 28_000_000, gpuHours: 7, p50: 900, started: 1},
		"beta":          {used: 14_000_000, gpuHours: 3.5, p50: 120, started: 1},
		"gamma":         {used: 1_875_000, gpuHours: 1.25, started: 1},
		"delta":         {waited: 1.5},
		usage.IdleLabel: {idle: 22_625_000},
	}, func(r usage.Row) usage.Micros { return r.Idle.Micros })

	q.ShareIdle = true
	if rep, err = l.c.UsageReport(q); err != nil {
		t.Fatal(err)
	}
	check(rep, map[string]want{
		"alpha": {used: 28_000_000, idle: 9_333_333, gpuHours: 7, p50: 900, started: 1},
		"beta":  {used: 14_000_000, idle: 4_666_667, gpuHours: 3.5, p50: 120, started: 1},
		"gamma": {used: 1_875_000, idle: 8_625_000, gpuHours: 1.25, started: 1},
		"delta": {waited: 1.5},
	}, func(r usage.Row) usage.Micros { return r.IdleShare.Micros })

	// The job records, by job: each one's whole cost, and c1's end.
	q.By, q.ShareIdle = usage.ByJob, false
	if rep, err = l.c.UsageReport(q); err != nil {
		t.Fatal(err)
	}
	jobs := map[string]usage.Row{}
	for _, r := range rep.Rows {
		jobs[r.Group] = r
	}
	for id, w := range map[string]usage.Micros{"a1": 28_000_000, "b1": 14_000_000, "c1": 1_875_000} {
		if got := jobs[id].CostMicros; got != w {
			t.Errorf("job %s cost %d, want %d", id, got, w)
		}
	}
	recs, err := l.store.UsageJobs(at(10, 0), time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range recs {
		if end := r.End; (r.ID == "c1") != !end.IsZero() || r.ID == "c1" && !end.Equal(at(11, 21)) {
			t.Errorf("job %s ends %v; want c1 alone ended, at 11:21", r.ID, end)
		}
	}
}

// near is a == b within a millionth.
func near(a, b float64) bool { return a-b < 1e-6 && b-a < 1e-6 }

// TestUsageBoughtFor: alpha's pending jobs cause a launch, and then run
// elsewhere (the push goes away): the node idles until it is drained
// and terminated, and all of its time is charged to alpha as bought for
// it, none to idle; the charge is the node's price from its launch to
// the first cycle that no longer sees it.
func TestUsageBoughtFor(t *testing.T) {
	od := simPool("od", 2)
	l := newLoop(t, false, od)
	ctx := context.Background()
	l.now = t0
	l.pending.Set(l.now, DemandPush{Source: "queue", Pending: []PendingDemand{{GPUs: 8, Team: "alpha", Tier: "standard", Jobs: 1}}})
	if _, err := l.c.Cycle(ctx); err != nil {
		t.Fatal(err)
	}
	if got := l.target(t, od); got != 1 {
		t.Fatalf("target %d after alpha's 8 GPUs waited, want 1", got)
	}
	// Waiting now: alpha's one job of 8 GPUs.
	if rep, err := l.c.UsageReport(usage.Query{From: t0.Add(-time.Hour), To: t0.Add(time.Hour)}); err != nil || len(rep.Rows) != 1 || rep.Rows[0].Group != "alpha" ||
		rep.Rows[0].Waiting != 1 || rep.Rows[0].WaitingGPUs != 8 {
		t.Fatalf("report while alpha waits: %+v, %v; want alpha's 1 job and 8 GPUs waiting", rep.Rows, err)
	}
	launched := l.now
	l.pending.Set(l.now, DemandPush{Source: "queue"})
	var gone time.Time
	for range 120 {
		l.now = l.now.Add(time.Minute)
		l.reportJobs(t, nil)
		if _, err := l.c.Cycle(ctx); err != nil {
			t.Fatal(err)
		}
		if len(l.c.Last().State.Nodes) == 0 {
			gone = l.now
			break
		}
	}
	if gone.IsZero() {
		t.Fatal("the idle node was never scaled in")
	}
	rep, err := l.c.UsageReport(usage.Query{From: t0, To: gone.Add(time.Hour), By: usage.ByTeam})
	if err != nil {
		t.Fatal(err)
	}
	spend := usage.MicrosOf(od.PricePerHour * gone.Sub(launched).Hours())
	if len(rep.Rows) != 1 || rep.Rows[0].Group != "alpha" || rep.Rows[0].BoughtFor.Micros != spend || rep.Rows[0].CostMicros != spend {
		t.Fatalf("rows %+v; want alpha alone, bought for, %d micro-dollars (%v at $%v an hour)", rep.Rows, spend, gone.Sub(launched), od.PricePerHour)
	}
	if rep.Total.CostMicros != spend {
		t.Errorf("total %d, want the fleet's spend %d", rep.Total.CostMicros, spend)
	}
}

// TestGrafanaDashboardMetrics: every metric the example Grafana dashboard
// (examples/grafana/fleetcast-usage.json) queries is one the controller
// exports, read from its registry after cycles that charged teams, made
// a team wait and saw a job's queue time.
func TestGrafanaDashboardMetrics(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("..", "examples", "grafana", "fleetcast-usage.json"))
	if err != nil {
		t.Fatal(err)
	}
	var dash struct {
		Panels []struct {
			Title   string `json:"title"`
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
		Templating struct {
			List []struct {
				Definition string `json:"definition"`
			} `json:"list"`
		} `json:"templating"`
	}
	if err := json.Unmarshal(b, &dash); err != nil {
		t.Fatalf("the dashboard: %v", err)
	}
	var exprs []string
	for _, p := range dash.Panels {
		if len(p.Targets) == 0 {
			t.Errorf("panel %q queries nothing", p.Title)
		}
		for _, x := range p.Targets {
			exprs = append(exprs, x.Expr)
		}
	}
	for _, v := range dash.Templating.List {
		exprs = append(exprs, v.Definition)
	}

	l := newLoop(t, false, simPool("od", 2))
	ctx := context.Background()
	if err := l.c.act.Launch(ctx, "od", 1); err != nil {
		t.Fatal(err)
	}
	// Alpha's job's GPUs read 0% throughout: allocated-idle once the
	// window has passed (10:15).
	for _, m := range []time.Duration{6, 7, 20} {
		l.now = t0.Add(m * time.Minute)
		l.pending.Set(l.now, DemandPush{Source: "queue", Pending: []PendingDemand{{GPUs: 2, Team: "beta"}}})
		l.reportJobs(t, map[string][]report.Job{"od": {job("a1", "alpha", "critical", 0, 4, t0, t0.Add(5*time.Minute))}})
		if _, err := l.c.Cycle(ctx); err != nil {
			t.Fatal(err)
		}
	}
	families, err := l.c.metrics.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	exported := map[string]bool{}
	for _, f := range families {
		exported[f.GetName()] = true
		if f.GetType() == dto.MetricType_HISTOGRAM {
			for _, suffix := range []string{"_bucket", "_sum", "_count"} {
				exported[f.GetName()+suffix] = true
			}
		}
	}
	name := regexp.MustCompile(`\bfleetcast_[a-z0-9_]+`)
	queried := 0
	for _, e := range exprs {
		for _, m := range name.FindAllString(e, -1) {
			queried++
			if !exported[m] {
				t.Errorf("the dashboard queries %s, which the controller does not export: %s", m, e)
			}
		}
	}
	if queried < 10 {
		t.Errorf("the dashboard queries %d metrics; is it the usage dashboard?", queried)
	}
}

// failingUsage is a store whose usage writes fail while fail is set.
type failingUsage struct {
	state.Records
	fail *bool
}

func (f failingUsage) PutUsage(hours []state.UsageHour, jobs []state.UsageJob) error {
	if *f.fail {
		return errors.New("disk full")
	}
	return f.Records.PutUsage(hours, jobs)
}

// TestUsageWriteRetried: the write of an hour the books closed fails (a
// full disk); the hour is written with the next write that succeeds,
// whole: nothing the books closed is lost.
func TestUsageWriteRetried(t *testing.T) {
	fail := false
	l := newLoopOn(t, false, func(s state.Records, p providers.Provider) (state.Records, providers.Provider) {
		return failingUsage{Records: s, fail: &fail}, p
	}, simPool("od", 1))
	ctx := context.Background()
	if err := l.c.act.Launch(ctx, "od", 1); err != nil {
		t.Fatal(err)
	}
	for i, at := range []time.Duration{6 * time.Minute, 30 * time.Minute, 70 * time.Minute, 75 * time.Minute, 80 * time.Minute} {
		fail = i >= 1 && i <= 3 // the hour 10:00 closes at 11:15 (two snapshots into 11:00), while writes fail
		l.now = t0.Add(at)
		l.reportJobs(t, map[string][]report.Job{"od": {job("a1", "alpha", "critical", 0, 8, t0, t0.Add(5*time.Minute))}})
		if _, err := l.c.Cycle(ctx); err != nil {
			t.Fatal(err)
		}
	}
	hours, err := l.store.UsageHours(t0, t0.Add(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	got := usage.Micros(0)
	for _, h := range hours {
		for _, c := range h.Charges {
			if !usage.Kind(c.Kind).Part() {
				got += usage.Micros(c.Micros)
			}
		}
	}
	// 10:06 to 11:00 at $32 an hour.
	if want := usage.MicrosOf(32 * 54.0 / 60); got != want {
		t.Errorf("the hour 10:00 in the store: %d micro-dollars, want %d", got, want)
	}
}
