package controller

import (
	"context"
	"fmt"
	"math"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
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

// rangeServer answers Prometheus's HTTP API as Prometheus does: a range
// query (/api/v1/query_range) with a matrix of series, each series's value
// at each step given by value (NaN: no sample there), refusing more than
// 11,000 points a series; an instant query (/api/v1/query) with an empty
// vector. It records the ranges asked.
type rangeServer struct {
	mu     sync.Mutex
	series int // how many series (the GPUs' nodes) answer
	value  func(t time.Time, series int) float64
	// status and body, if set, are the range query's answer instead.
	status int
	body   string
	delay  time.Duration
	asked  []askedRange
}

type askedRange struct {
	query      string
	start, end time.Time
	step       time.Duration
}

func (a askedRange) String() string {
	return fmt.Sprintf("%s from %s to %s every %s", a.query, a.start.Format(time.RFC3339), a.end.Format(time.RFC3339), a.step)
}

func (p *rangeServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if err := r.ParseForm(); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	switch r.URL.Path {
	case "/api/v1/query":
		fmt.Fprint(w, `{"status":"success","data":{"resultType":"vector","result":[]}}`)
		return
	case "/api/v1/query_range":
	default:
		http.NotFound(w, r)
		return
	}
	seconds := func(s string) time.Time {
		f, _ := strconv.ParseFloat(s, 64)
		return time.Unix(0, int64(math.Round(f*1e9))).UTC()
	}
	start, end := seconds(r.Form.Get("start")), seconds(r.Form.Get("end"))
	stepS, _ := strconv.ParseFloat(r.Form.Get("step"), 64)
	step := time.Duration(stepS * float64(time.Second))
	p.mu.Lock()
	p.asked = append(p.asked, askedRange{r.Form.Get("query"), start, end, step})
	status, body, delay := p.status, p.body, p.delay
	p.mu.Unlock()
	if delay > 0 {
		select {
		case <-time.After(delay):
		case <-r.Context().Done():
			return
		}
	}
	if status != 0 {
		w.WriteHeader(status)
		fmt.Fprint(w, body)
		return
	}
	if step <= 0 || end.Sub(start)/step+1 > 11_000 {
		w.WriteHeader(http.StatusBadRequest)
		fmt.Fprint(w, `{"status":"error","errorType":"bad_data","error":"exceeded maximum resolution of 11,000 points per timeseries. Try decreasing the query resolution (?step=XX)"}`)
		return
	}
	var rs []string
	for i := range p.series {
		var vs []string
		for t := start; !t.After(end); t = t.Add(step) {
			if v := p.value(t, i); !math.IsNaN(v) {
				vs = append(vs, fmt.Sprintf(`[%d,"%g"]`, t.Unix(), v))
			}
		}
		if len(vs) > 0 {
			rs = append(rs, fmt.Sprintf(`{"metric":{"Hostname":"node-%d"},"values":[%s]}`, i, strings.Join(vs, ",")))
		}
	}
	fmt.Fprintf(w, `{"status":"success","data":{"resultType":"matrix","result":[%s]}}`, strings.Join(rs, ","))
}

// backfilled is a controller on the simulated cloud, started (New and
// Recover) at t0 on a store holding before, with a Prometheus demand
// source served by ps.
type backfilled struct {
	store *state.Store
	c     *Controller
	now   time.Time
}

func startBackfilled(t *testing.T, ps *rangeServer, cfg *testConfig, before []state.Sample) *backfilled {
	t.Helper()
	srv := httptest.NewServer(ps)
	t.Cleanup(srv.Close)
	b := &backfilled{now: t0}
	clock := func() time.Time { return b.now }
	p := gpuPool("g5", 8, 20, 5*time.Minute)
	cfg.Pools = []fleet.Pool{p}
	var err error
	if b.store, err = state.Open(t.TempDir()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.store.Close() })
	if err := b.store.AppendDemand(loop.DemandSeries, before...); err != nil {
		t.Fatal(err)
	}
	src, err := NewPrometheusDemand(srv.URL, "sum(gpus_busy)", 500*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	b.c, err = New(Options{Settings: &cfg.Settings, Controller: cfg.Controller, Backfill: cfg.Demand.Backfill, Store: b.store, Clouds: map[string]providers.Provider{p.Name: sim.New(cfg.Pools, 1, clock)},
		Agents: NewAgents(clock), Pending: &Pending{}, Demand: src, Now: clock})
	if err != nil {
		t.Fatal(err)
	}
	if err := b.c.Recover(context.Background()); err != nil {
		t.Fatalf("Recover: %v (a demand source that fails is not the start's end)", err)
	}
	return b
}

// TestBackfillAtStart: a controller whose demand history is shorter than
// forecast.history fills the steps it has not recorded, at forecast.step,
// from the Prometheus query's past answers (a range query over the missing
// span, at most forecast.history, in parts Prometheus accepts), the
// series summed at each step as an instant query's are, a step with no
// series left out; what it recorded wins, and the loop forecasts from the
// whole history at its first cycle.
func TestBackfillAtStart(t *testing.T) {
	const step = 10 * time.Minute
	window := 14 * 24 * time.Hour
	first := t0.Add(-window) // t0 is on a step
	steps := int(window/step) + 1
	cycles := func(from, to time.Time) []state.Sample {
		var xs []state.Sample
		for t := from; t.Before(to); t = t.Add(time.Minute) {
			xs = append(xs, state.Sample{Time: t, Value: 99})
		}
		return xs
	}
	daily := func(t time.Time, _ int) float64 { return float64(10 + t.Hour()) }
	for _, tt := range []struct {
		name   string
		cfg    func(*testConfig)
		before []state.Sample
		value  func(time.Time, int) float64
		series int
		// asked are the ranges the controller must ask for; recorded how
		// many samples the store must hold after, hist the steps of
		// history the first cycle must forecast from (at least).
		asked    []askedRange
		recorded int
		hist     int
	}{
		{name: "a new controller", value: daily, series: 2,
			asked:    []askedRange{{"sum(gpus_busy)", first, t0, step}},
			recorded: steps, hist: steps - 1},
		{name: "the steps recorded win", value: daily, series: 1,
			// The last two hours recorded each minute, and an hour a day ago.
			before: append(cycles(t0.Add(-25*time.Hour), t0.Add(-24*time.Hour)), cycles(t0.Add(-2*time.Hour), t0.Add(time.Minute))...),
			asked:  []askedRange{{"sum(gpus_busy)", first, t0.Add(-2*time.Hour - step), step}},
			// 60 + 121 cycles recorded, and every other step filled.
			recorded: 60 + 121 + steps - 6 - 13, hist: steps - 1},
		{name: "no series in the first days", series: 1,
			value: func(t time.Time, _ int) float64 {
				if t.Before(t0.Add(-3 * 24 * time.Hour)) {
					return math.NaN()
				}
				return 4
			},
			asked:    []askedRange{{"sum(gpus_busy)", first, t0, step}},
			recorded: 3*24*6 + 1, hist: 3 * 24 * 6},
		{name: "a whole history asks nothing", value: daily, series: 1,
			before: func() []state.Sample {
				var xs []state.Sample
				for k := range steps {
					xs = append(xs, state.Sample{Time: first.Add(time.Duration(k)*step + time.Minute), Value: 3})
				}
				return xs
			}(),
			recorded: steps, hist: steps - 1},
		{name: "a minute's step in parts of at most 10,000", value: daily, series: 1,
			cfg: func(c *testConfig) { c.Forecast.Step = time.Minute },
			asked: []askedRange{
				{"sum(gpus_busy)", first, first.Add(9999 * time.Minute), time.Minute},
				{"sum(gpus_busy)", first.Add(10000 * time.Minute), first.Add(19999 * time.Minute), time.Minute},
				{"sum(gpus_busy)", first.Add(20000 * time.Minute), t0, time.Minute},
			},
			recorded: 14*24*60 + 1, hist: 14 * 24 * 60},
	} {
		t.Run(tt.name, func(t *testing.T) {
			cfg := testDefaults()
			if tt.cfg != nil {
				tt.cfg(&cfg)
			}
			ps := &rangeServer{series: tt.series, value: tt.value}
			b := startBackfilled(t, ps, &cfg, tt.before)
			ps.mu.Lock()
			asked := ps.asked
			ps.mu.Unlock()
			if fmt.Sprint(asked) != fmt.Sprint(tt.asked) {
				t.Errorf("asked Prometheus for\n%v\nwant\n%v", asked, tt.asked)
			}
			got, err := b.store.Demand(loop.DemandSeries, time.Time{})
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != tt.recorded {
				t.Errorf("the store holds %d samples, want %d", len(got), tt.recorded)
			}
			recorded := map[time.Time]bool{}
			for _, x := range tt.before {
				recorded[x.Time.Truncate(cfg.Forecast.Step)] = true
			}
			for _, x := range got {
				switch {
				case x.Value == 99 || tt.before != nil && x.Value == 3:
					// recorded before
				case recorded[x.Time.Truncate(cfg.Forecast.Step)]:
					t.Fatalf("a sample at %s, a step recorded before: recorded samples win", x.Time)
				case !x.Time.Equal(x.Time.Truncate(cfg.Forecast.Step)) || x.Time.After(t0) || x.Time.Before(t0.Add(-cfg.Forecast.History)):
					t.Fatalf("a sample at %s: want a step's start within forecast.history before the start", x.Time)
				case x.Value != float64(tt.series)*tt.value(x.Time, 0):
					t.Fatalf("a sample at %s is %v, want the %d series' sum %v", x.Time, x.Value, tt.series, float64(tt.series)*tt.value(x.Time, 0))
				}
			}
			b.now = b.now.Add(time.Minute)
			if _, err := b.c.Cycle(context.Background()); err != nil {
				t.Fatal(err)
			}
			if h := b.c.Last().State.History; len(h.Values) < tt.hist {
				t.Errorf("the first cycle forecasts from %d steps of history, want at least %d", len(h.Values), tt.hist)
			}
		})
	}
}

// TestBackfillFailures: a Prometheus that fails, is slow, or answers what
// no demand history may hold is a warning at the start, never its end,
// and nothing of its answer is recorded; demand.backfill = false asks
// nothing.
func TestBackfillFailures(t *testing.T) {
	matrix := func(v string) string {
		return `{"status":"success","data":{"resultType":"matrix","result":[{"metric":{"Hostname":"node-0"},"values":[[` +
			strconv.FormatInt(t0.Add(-time.Hour).Unix(), 10) + `,"1"],[` + strconv.FormatInt(t0.Unix(), 10) + `,"` + v + `"]]}]}}`
	}
	for _, tt := range []struct {
		name    string
		ps      *rangeServer
		off     bool
		wantErr string
	}{
		{name: "unavailable", ps: &rangeServer{status: 503, body: `{"status":"error","errorType":"unavailable","error":"shutting down"}`}, wantErr: "server error: 503"},
		{name: "slow", ps: &rangeServer{status: 200, body: matrix("1"), delay: 2 * time.Second}, wantErr: "context deadline exceeded"},
		{name: "warnings", ps: &rangeServer{status: 200, body: `{"status":"success","warnings":["partial response"],"data":{"resultType":"matrix","result":[]}}`},
			wantErr: "answered the range query with warnings: partial response"},
		{name: "NaN", ps: &rangeServer{status: 200, body: matrix("NaN")}, wantErr: "is NaN at " + t0.Format(time.RFC3339)},
		{name: "absurd", ps: &rangeServer{status: 200, body: matrix("2e6")}, wantErr: "answered 2e+06 at " + t0.Format(time.RFC3339) + "; expected at most 1000000 GPUs"},
		{name: "a vector", ps: &rangeServer{status: 200, body: `{"status":"success","data":{"resultType":"vector","result":[]}}`},
			wantErr: "answered the range query with a vector; expected a range vector"},
		{name: "switched off", ps: &rangeServer{series: 1, value: func(time.Time, int) float64 { return 1 }}, off: true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			cfg := testDefaults()
			cfg.Demand.Backfill = !tt.off
			started := time.Now()
			b := startBackfilled(t, tt.ps, &cfg, nil)
			if took := time.Since(started); took > 1500*time.Millisecond {
				t.Errorf("the start took %v; the query's timeout is 500ms", took)
			}
			res, tried := b.c.Backfilled()
			switch {
			case tt.off && (tried || len(tt.ps.asked) > 0):
				t.Errorf("backfill = false: tried %v, asked %v", tried, tt.ps.asked)
			case !tt.off && (res.Err == nil || !strings.Contains(res.Err.Error(), tt.wantErr) || !strings.Contains(res.Err.Error(), "sum(gpus_busy)")):
				t.Errorf("backfill error %v; want one naming the query, containing %q", res.Err, tt.wantErr)
			}
			if got, err := b.store.Demand(loop.DemandSeries, time.Time{}); err != nil || len(got) != 0 {
				t.Errorf("recorded %d samples, %v; want none", len(got), err)
			}
		})
	}
}

// FuzzPrometheusRange: no answer to a range query crashes the reading of
// it, and what is read is in time order, one sample a time, each a finite
// number of 0 to fleet.MaxDemandGPUs GPUs.
func FuzzPrometheusRange(f *testing.F) {
	f.Add(`{"status":"success","data":{"resultType":"matrix","result":[{"metric":{"a":"1"},"values":[[1764500000,"3"],[1764500600,"4"]]},{"metric":{"a":"2"},"values":[[1764500600,"1.5"]]}]}}`)
	f.Add(`{"status":"success","data":{"resultType":"matrix","result":[{"metric":{},"values":[[1764500000,"NaN"]]}]}}`)
	f.Add(`{"status":"success","data":{"resultType":"matrix","result":[{"metric":{},"values":[[1764500000,"-1"],[1764500000,"2"]]}]}}`)
	f.Add(`{"status":"success","warnings":["w"],"data":{"resultType":"matrix","result":[]}}`)
	f.Add(`{"status":"success","data":{"resultType":"scalar","result":[1764500000,"1"]}}`)
	f.Add(`{"status":"error","errorType":"bad_data","error":"x"}`)
	var body atomic.Value
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, body.Load())
	}))
	defer srv.Close()
	p, err := NewPrometheusDemand(srv.URL, "q", time.Second)
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, answer string) {
		body.Store(answer)
		xs, err := p.GPUsInUseOver(context.Background(), t0.Add(-time.Hour), t0, 10*time.Minute)
		if err != nil {
			if !strings.Contains(err.Error(), srv.URL) {
				t.Fatalf("error %q does not name the server", err)
			}
			return
		}
		for i, x := range xs {
			if math.IsNaN(x.Value) || math.IsInf(x.Value, 0) || x.Value < 0 || x.Value > fleet.MaxDemandGPUs || i > 0 && !x.Time.After(xs[i-1].Time) {
				t.Fatalf("sample %d: %+v", i, x)
			}
		}
	})
}
