package controller

import (
	"context"
	"fmt"
	"math"
	"net/http"
	"runtime"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/fleetcast/autoscaler/agent/report"
	"github.com/fleetcast/autoscaler/fleet"
	"github.com/fleetcast/autoscaler/planner"
	"github.com/fleetcast/autoscaler/providers"
	"github.com/fleetcast/autoscaler/usage"
)

// scraped is one gathering of the controller's registry: each sample's
// value by series (`name{label="value",...}`, labels sorted by name; a
// histogram's by its name and labels, as its sample count), each
// family's help, and each label's values across the fleetcast_ families.
type scraped struct {
	value  map[string]float64
	help   map[string]string
	labels map[string]map[string]bool // label name -> values seen
	series []string
}

func scrape(t *testing.T, c *Controller) scraped {
	t.Helper()
	mfs, err := c.metrics.reg.Gather()
	if err != nil {
		t.Fatalf("gathering the metrics: %v", err)
	}
	s := scraped{value: map[string]float64{}, help: map[string]string{}, labels: map[string]map[string]bool{}}
	for _, mf := range mfs {
		name := mf.GetName()
		s.help[name] = mf.GetHelp()
		for _, m := range mf.GetMetric() {
			var ls []string
			for _, lp := range m.GetLabel() {
				ls = append(ls, fmt.Sprintf("%s=%q", lp.GetName(), lp.GetValue()))
				if strings.HasPrefix(name, "fleetcast_") {
					if s.labels[lp.GetName()] == nil {
						s.labels[lp.GetName()] = map[string]bool{}
					}
					s.labels[lp.GetName()][lp.GetValue()] = true
				}
			}
			key := name
			if len(ls) > 0 {
				key += "{" + strings.Join(ls, ",") + "}"
			}
			v := m.GetGauge().GetValue() + m.GetCounter().GetValue() + m.GetUntyped().GetValue() + float64(m.GetHistogram().GetSampleCount())
			s.value[key] = v
			s.series = append(s.series, key)
		}
	}
	sort.Strings(s.series)
	return s
}

// want checks one series' value, within 1e-9.
func (s scraped) want(t *testing.T, series string, want float64) {
	t.Helper()
	got, ok := s.value[series]
	switch {
	case !ok:
		t.Errorf("%s: absent; want %v", series, want)
	case math.Abs(got-want) > 1e-9:
		t.Errorf("%s = %v; want %v", series, got, want)
	}
}

// TestMetricLabelsFixed: every fleetcast_ series is labelled from a small
// fixed set of words or by a configured pool's name, never by a number
// (before, the forecast was labelled by its quantile levels, which follow
// the pools' prices, quantile="0.9657..."), nor by a name an instance's
// tags carry (an orphan's old pool). The quantiles are samples.
func TestMetricLabelsFixed(t *testing.T) {
	kept, spot, gone := gpuPool("kept", 8, 10, 5*time.Minute), gpuPool("spot", 8, 10, 3*time.Minute), gpuPool("gone", 8, 10, 5*time.Minute)
	spot.Capacity, spot.PricePerHour = fleet.Spot, 3.7
	l := newLoop(t, false, kept, spot, gone)
	ctx := context.Background()
	if err := l.c.act.Launch(ctx, "gone", 1); err != nil {
		t.Fatal(err)
	}
	l.now = l.now.Add(5 * time.Minute)
	// The pool is taken out of the config: its instance is an orphan,
	// reaped once idle.
	l.set.Pools, l.also = []fleet.Pool{kept, spot}, []fleet.Pool{gone}
	l.restart(t, l.cloud)
	var plan planner.Plan
	orphanSeen := false
	for range 20 {
		l.pending.Set(l.now, DemandPush{Source: "slurm", Pending: []PendingDemand{{GPUs: 16}}})
		plan = l.cycle(t)
		if len(plan.Orphans) > 0 && !orphanSeen {
			orphanSeen = true
			scrape(t, l.c).want(t, "fleetcast_orphan_nodes", 1)
		}
	}
	if !orphanSeen || plan.Forecast == nil {
		t.Fatalf("no orphan seen (%v) or no forecast (%v): the test sees nothing", orphanSeen, plan.Forecast)
	}
	s := scrape(t, l.c)
	allowed := map[string][]string{
		// An orphan's time is charged to the pool "orphaned", a word.
		"pool":  {"kept", "spot", usage.OrphanPool},
		"state": {"pending", "ready", "draining", "terminating"},
		"kind":  {"running", "pending", "launch", "drain", "terminate", "cancel_drain", "used", "bought_for", "idle"},
		// Teams and tiers are bounded by the usage block's caps; these
		// jobs and pushes name none.
		"team":   {usage.Unattributed, usage.IdleLabel},
		"tier":   {usage.Unattributed, usage.IdleLabel},
		"result": {"ok", "error", "refused"},
		"when":   {"now", "planned"},
		"level":  {"p10", "p50", "p90", "keep"},
	}
	for name, values := range s.labels {
		for v := range values {
			if !slices.Contains(allowed[name], v) {
				t.Errorf("a fleetcast_ series is labelled %s=%q; want one of %q", name, v, allowed[name])
			}
		}
	}
	settings := *l.set
	fc := l.c.Last().Forecast
	for _, tt := range []struct {
		series string
		want   float64
	}{
		{`fleetcast_pool_quantile{pool="kept"}`, settings.Forecast.QuantileFor(&kept)},
		{`fleetcast_pool_quantile{pool="spot"}`, settings.Forecast.QuantileFor(&spot)},
		{"fleetcast_keep_quantile", plan.Quantile},
		{`fleetcast_forecast_gpus{level="keep"}`, fc.Quantile(plan.Quantile)[fc.Steps()-1]},
		{`fleetcast_pool_forecast_gpus{pool="kept"}`, plan.Forecast.At(settings.Forecast.QuantileFor(&kept), plan.At.Add(kept.LeadTime))},
		{`fleetcast_pool_forecast_gpus{pool="spot"}`, plan.Forecast.At(settings.Forecast.QuantileFor(&spot), plan.At.Add(spot.LeadTime))},
		{`fleetcast_orphan_actions_total{kind="terminate",result="ok"}`, 1},
	} {
		s.want(t, tt.series, tt.want)
	}
	if s.value[`fleetcast_forecast_gpus{level="keep"}`] == 0 {
		t.Errorf("the forecast at the keep level is 0: the test checks no forecast")
	}
	if t.Failed() {
		t.Logf("series:\n%s", strings.Join(s.series, "\n"))
	}
}

// TestForecastMetricSaysWhatItHolds: fleetcast_forecast_gpus holds the
// forecast's last step, forecast.horizon out, and its help says so
// (before, it said one lead time ahead).
func TestForecastMetricSaysWhatItHolds(t *testing.T) {
	l := newLoop(t, false, gpuPool("g5", 8, 10, 5*time.Minute))
	l.pending.Set(l.now, DemandPush{Source: "slurm", Pending: []PendingDemand{{GPUs: 8}}})
	for range 3 {
		l.cycle(t)
	}
	s := scrape(t, l.c)
	help := s.help["fleetcast_forecast_gpus"]
	for _, tt := range []struct {
		phrase string
		want   bool
	}{
		{"last step", true},
		{"forecast.horizon", true},
		{"one lead time ahead", false},
	} {
		if strings.Contains(help, tt.phrase) != tt.want {
			t.Errorf("fleetcast_forecast_gpus's help %q: says %q %v; want %v", help, tt.phrase, !tt.want, tt.want)
		}
	}
	fc := l.c.Last().Forecast
	if got := fc.End().Sub(fc.Origin); got != l.set.Forecast.Horizon {
		t.Fatalf("the forecast covers %v; want forecast.horizon, %v", got, l.set.Forecast.Horizon)
	}
	for _, tt := range []struct {
		level string
		q     float64
	}{{"p10", 0.1}, {"p50", 0.5}, {"p90", 0.9}} {
		s.want(t, `fleetcast_forecast_gpus{level="`+tt.level+`"}`, fc.Quantile(tt.q)[fc.Steps()-1])
	}
}

// TestRuntimeCollectors: the controller's registry has the Go runtime's
// and the process's metrics.
func TestRuntimeCollectors(t *testing.T) {
	l := newLoop(t, false, gpuPool("g5", 8, 10, 5*time.Minute))
	wants := []string{"go_goroutines", "go_memstats_heap_alloc_bytes", "go_gc_duration_seconds"}
	if runtime.GOOS == "linux" {
		wants = append(wants, "process_start_time_seconds", "process_resident_memory_bytes", "process_open_fds")
	}
	s := scrape(t, l.c)
	for _, name := range wants {
		if _, ok := s.help[name]; !ok {
			t.Errorf("the registry lacks %s", name)
		}
	}
}

// TestWorkLostMetric: the work a node's jobs had not saved, as its agent
// last reported, counts as lost when the node leaves its cloud without
// this controller terminating it after its drain (a spot reclaim, a
// person); a node the controller terminated, or an idle one, loses none.
func TestWorkLostMetric(t *testing.T) {
	for _, tt := range []struct {
		name string
		busy bool
		// ours: the controller terminates the node (as it does once a
		// drain is confirmed), and its agent's last report, sent before,
		// arrives after.
		ours bool
		want float64
	}{
		// A job on all 8 GPUs, checkpointed a minute before the last report.
		{name: "reclaimed under a job", busy: true, want: 8.0 / 60},
		{name: "reclaimed idle", want: 0},
		{name: "terminated by the controller", busy: true, ours: true, want: 0},
	} {
		t.Run(tt.name, func(t *testing.T) {
			p := gpuPool("g5", 8, 10, 5*time.Minute)
			p.Min = 2
			l := newLoop(t, false, p)
			for range 7 {
				l.cycle(t)
			}
			ctx := context.Background()
			g, _ := l.cloud.Describe(ctx, p)
			node := g.Instances[0].ID
			l.busy[node] = tt.busy
			l.cycle(t)
			if tt.ours {
				f := &cycleFleet{c: l.c}
				if err := f.Terminate(ctx, l.now, &planner.Action{Kind: planner.Terminate, Pool: "g5", Node: node}); err != nil {
					t.Fatal(err)
				}
				late := &report.Report{Node: node, SentAt: l.now.Add(-time.Second), Healthy: true,
					GPUs:  []report.GPU{{Index: 0, UUID: "GPU-0", MemoryTotal: 1}},
					Jobs:  []report.Job{{ID: "train-" + node, GPUs: []int{0, 1, 2, 3, 4, 5, 6, 7}, Start: t0, LastCheckpoint: l.now.Add(-2 * time.Second)}},
					Drain: report.DrainStatus{State: report.SafeToTerminate, ID: "drain-x"}}
				if _, err := l.agents.Accept(ctx, late); err != nil {
					t.Fatal(err)
				}
			} else if err := l.cloud.Terminate(ctx, p, []string{node}); err != nil {
				t.Fatal(err)
			}
			l.cycle(t)
			l.now = l.now.Add(GoneGrace)
			l.cycle(t)
			if _, err := l.c.Cycle(ctx); err != nil {
				t.Fatal(err)
			}
			scrape(t, l.c).want(t, "fleetcast_work_lost_gpu_hours_total", tt.want)
		})
	}
}

// TestPoolSpendMetric: each pool's spend per hour is its billed nodes at
// its price, a reserved pool's whole reservation; together they are the
// plan's cost now.
func TestPoolSpendMetric(t *testing.T) {
	res, od := gpuPool("res", 8, 3, 5*time.Minute), gpuPool("od", 8, 10, 5*time.Minute)
	res.Capacity, res.PricePerHour, res.Min = fleet.Reserved, 10, 0
	l := newLoop(t, false, res, od)
	ctx := context.Background()
	if err := l.c.act.Launch(ctx, "od", 2); err != nil {
		t.Fatal(err)
	}
	plan := l.cycle(t)
	g, err := l.cloud.Describe(ctx, od)
	if err != nil {
		t.Fatal(err)
	}
	billed := 0
	for _, in := range g.Instances {
		if in.State != providers.InstanceTerminating {
			billed++
		}
	}
	s := scrape(t, l.c)
	total := 0.0
	for _, tt := range []struct {
		pool string
		want float64
	}{
		{"res", 3 * 10}, // the whole reservation, paid whether used or not
		{"od", float64(billed) * od.PricePerHour}, // its nodes
	} {
		series := `fleetcast_pool_cost_per_hour_dollars{pool="` + tt.pool + `"}`
		s.want(t, series, tt.want)
		total += s.value[series]
	}
	if math.Abs(total-plan.CostPerHourBefore) > 0.005 {
		t.Errorf("the pools' spend sums to %v; the plan's cost now is %v", total, plan.CostPerHourBefore)
	}
}

// TestHealthBeforeFirstCycle: /healthz is liveness, 200 from the start
// (the process is up), saying no cycle has run yet; /readyz is 503 until
// a cycle has completed, as is fleetcast_ready; then both follow their
// rules: a loop with no cycle for three intervals fails both.
func TestHealthBeforeFirstCycle(t *testing.T) {
	l := newLoop(t, false, gpuPool("g5", 8, 10, 5*time.Minute))
	h := l.c.Handler(APIOptions{OpenReads: true})
	type probe struct {
		path     string
		code     int
		contains string
	}
	for _, stage := range []struct {
		name   string
		before func()
		probes []probe
	}{
		{name: "before the first cycle", before: func() {}, probes: []probe{
			{"/healthz", http.StatusOK, "ok\ndegraded: no control cycle yet\n"},
			{"/readyz", http.StatusServiceUnavailable, "not ready: no control cycle yet\n"},
			{"/metrics", http.StatusOK, "\nfleetcast_ready 0\n"},
		}},
		{name: "no first cycle within the grace", before: func() { l.now = l.now.Add(firstCycleGrace + time.Second) }, probes: []probe{
			{"/healthz", http.StatusServiceUnavailable, "no control cycle in the 10m1s since the controller started"},
			{"/readyz", http.StatusServiceUnavailable, "not ready: no control cycle yet\n"},
		}},
		{name: "after a cycle", before: func() { l.cycle(t) }, probes: []probe{
			{"/healthz", http.StatusOK, "ok\n"},
			{"/readyz", http.StatusOK, "ready\n"},
			{"/metrics", http.StatusOK, "\nfleetcast_ready 1\n"},
		}},
		{name: "no cycle for three intervals", before: func() { l.now = l.now.Add(3*l.ctl.Interval + time.Second) }, probes: []probe{
			{"/healthz", http.StatusServiceUnavailable, "last control cycle 3m1s ago"},
			{"/readyz", http.StatusServiceUnavailable, "not ready: last control cycle 3m1s ago"},
			{"/metrics", http.StatusOK, "\nfleetcast_ready 0\n"},
		}},
	} {
		stage.before()
		for _, p := range stage.probes {
			if code, body := get(t, h, p.path); code != p.code || !strings.Contains(body, p.contains) {
				t.Errorf("%s: GET %s: %d %q; want %d with %q", stage.name, p.path, code, body, p.code, p.contains)
			}
		}
	}
}
