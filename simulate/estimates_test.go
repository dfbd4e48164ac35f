package simulate

import (
	"math"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/fleetcast/autoscaler/trace"
)

// TestRuntimeEstimates: with the running job's true end known, the job
// submitted five minutes before it ends (it started on the node launched
// for it, ten minutes in) waits for its node instead of a launch, which
// would come as late; with no estimates the planner launches for it.
func TestRuntimeEstimates(t *testing.T) {
	tr := func() *trace.Trace {
		return jobsTrace(trace.Job{GPUs: 8, Duration: time.Hour}, trace.Job{Submit: 65 * time.Minute, GPUs: 8, Duration: time.Hour})
	}
	cfg := onePool()
	cfg.Forecast.Quantile = 0.5 // the flat hour of history forecasts no more than it held
	got := map[string]Result{}
	for _, mode := range RuntimeEstimateModes {
		rep, err := Run(cfg, tr(), Options{Policies: []string{"predictive"}, RuntimeEstimates: mode, Seed: 3})
		if err != nil {
			t.Fatal(err)
		}
		got[mode] = byPolicy(t, rep)["predictive"]
	}
	none, exact := got[EstimatesNone], got[EstimatesExact]
	if exact.Launches >= none.Launches || exact.CostUSD >= none.CostUSD || exact.WaitGPUHours > none.WaitGPUHours+1e-9 {
		t.Errorf("exact estimates: %s; none: %s; want fewer launches, less cost, no more waiting", brief(exact), brief(none))
	}
	if exact.LostGPUHours != 0 || none.LostGPUHours != 0 {
		t.Errorf("work lost: exact %v, none %v", exact.LostGPUHours, none.LostGPUHours)
	}
	// What the agents report: the true end, or a time limit from each
	// run's start, never before the true end.
	for _, mode := range []string{EstimatesExact, EstimatesLimits} {
		later := 0
		runWrapped(t, cfg, tr(), Options{RuntimeEstimates: mode, Seed: 3}, "predictive", func(e *engine) {
			for _, n := range e.live {
				for k, fj := range e.reported(n) {
					j := &e.jobs[n.jobs[k]]
					end := e.at(j.start + j.remaining)
					switch {
					case fj.ExpectedEnd.Before(end), mode == EstimatesExact && !fj.ExpectedEnd.Equal(end):
						t.Fatalf("%s: job %s reported to end at %v; it ends at %v", mode, fj.ID, fj.ExpectedEnd, end)
					case fj.ExpectedEnd.After(end):
						later++
					}
				}
			}
		})
		if mode == EstimatesLimits && later == 0 {
			t.Errorf("time limits: no job's limit beyond its end")
		}
	}
	if _, err := Run(onePool(), tr(), Options{RuntimeEstimates: "guess"}); err == nil || !strings.Contains(err.Error(), `runtime estimates "guess"`) {
		t.Errorf("an unknown mode: %v", err)
	}
}

// TestTimeLimitFactor: time limits are never below the true runtime, 2x
// at the median, with a long tail.
func TestTimeLimitFactor(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	var fs []float64
	for range 20000 {
		f := timeLimitFactor(r)
		if f < 1 {
			t.Fatalf("factor %v below 1", f)
		}
		fs = append(fs, f)
	}
	below2, above5 := 0, 0
	for _, f := range fs {
		if f < 2 {
			below2++
		}
		if f > 5 {
			above5++
		}
	}
	if m := float64(below2) / float64(len(fs)); math.Abs(m-0.5) > 0.02 {
		t.Errorf("%.3f of factors below 2; want half", m)
	}
	if s := float64(above5) / float64(len(fs)); s < 0.05 || s > 0.15 {
		t.Errorf("%.3f of factors above 5; want a tail near 8%%", s)
	}
}
