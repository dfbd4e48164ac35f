package controller

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fleetcast/autoscaler/loop"
	"github.com/fleetcast/autoscaler/state"
)

// promServer answers Prometheus's HTTP API (/api/v1/query) with a fixed
// JSON body and status, recording the last query and time asked.
type promServer struct {
	mu          sync.Mutex
	status      int
	body        string
	delay       time.Duration
	query, when string
}

func (p *promServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path != "/api/v1/query" {
		http.NotFound(w, r)
		return
	}
	if err := r.ParseForm(); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	p.mu.Lock()
	p.query, p.when = r.Form.Get("query"), r.Form.Get("time")
	status, body, delay := p.status, p.body, p.delay
	p.mu.Unlock()
	if delay > 0 {
		select {
		case <-time.After(delay):
		case <-r.Context().Done():
			return
		}
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	fmt.Fprint(w, body)
}

func vectorBody(values ...string) string {
	var rs []string
	for i, v := range values {
		rs = append(rs, fmt.Sprintf(`{"metric":{"__name__":"DCGM_FI_DEV_GPU_UTIL","gpu":"%d","Hostname":"node-%d"},"value":[1764500000,"%s"]}`, i, i, v))
	}
	return `{"status":"success","data":{"resultType":"vector","result":[` + strings.Join(rs, ",") + `]}}`
}

func TestPrometheusDemand(t *testing.T) {
	at := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	for _, tt := range []struct {
		name    string
		status  int
		body    string
		delay   time.Duration
		want    float64
		wantErr string
	}{
		{name: "vector summed", status: 200, body: vectorBody("3", "4.5", "0"), want: 7.5},
		{name: "empty vector is none in use", status: 200, body: vectorBody(), want: 0},
		{name: "scalar", status: 200, body: `{"status":"success","data":{"resultType":"scalar","result":[1764500000,"12"]}}`, want: 12},
		{name: "matrix refused", status: 200,
			body:    `{"status":"success","data":{"resultType":"matrix","result":[{"metric":{},"values":[[1764500000,"1"]]}]}}`,
			wantErr: "answered a matrix; expected a scalar or an instant vector"},
		{name: "string refused", status: 200, body: `{"status":"success","data":{"resultType":"string","result":[1764500000,"x"]}}`,
			wantErr: `unexpected value type "string"`},
		{name: "NaN refused", status: 200, body: vectorBody("NaN"), wantErr: "is NaN; expected a finite number of GPUs"},
		{name: "negative refused", status: 200, body: vectorBody("2", "-1"), wantErr: "is -1; expected a finite number of GPUs"},
		// The bound pushed demand has: 1e300 GPUs is no reading.
		{name: "absurd scalar refused", status: 200, body: `{"status":"success","data":{"resultType":"scalar","result":[1764500000,"1e300"]}}`,
			wantErr: "answered 1e+300; expected at most 1000000 GPUs"},
		{name: "absurd vector refused", status: 200, body: vectorBody("600000", "600000"), wantErr: "answered 1.2e+06; expected at most 1000000 GPUs"},
		{name: "infinite scalar refused", status: 200, body: `{"status":"success","data":{"resultType":"scalar","result":[1764500000,"+Inf"]}}`,
			wantErr: "answered +Inf"},
		{name: "warnings refused", status: 200,
			body:    `{"status":"success","warnings":["partial response: store down"],"data":{"resultType":"vector","result":[]}}`,
			wantErr: "answered with warnings: partial response: store down"},
		{name: "bad query", status: 400, body: `{"status":"error","errorType":"bad_data","error":"1:7: parse error: unexpected <EOF>"}`,
			wantErr: "parse error: unexpected <EOF>"},
		{name: "not Prometheus", status: 200, body: `<html>login</html>`, wantErr: "prometheus "},
		{name: "timeout", status: 200, body: vectorBody("1"), delay: 2 * time.Second, wantErr: "context deadline exceeded"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			ps := &promServer{status: tt.status, body: tt.body, delay: tt.delay}
			srv := httptest.NewServer(ps)
			defer srv.Close()
			q := "count(DCGM_FI_DEV_GPU_UTIL > 0)"
			p, err := NewPrometheusDemand(srv.URL, q, 200*time.Millisecond)
			if err != nil {
				t.Fatal(err)
			}
			got, err := p.GPUsInUse(context.Background(), at)
			switch {
			case tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)):
				t.Fatalf("GPUsInUse = %v, %v; want an error containing %q", got, err, tt.wantErr)
			case tt.wantErr != "" && !strings.Contains(err.Error(), srv.URL):
				t.Fatalf("error %q does not name the server", err)
			case tt.wantErr == "" && (err != nil || got != tt.want):
				t.Fatalf("GPUsInUse = %v, %v; want %v", got, err, tt.want)
			}
			ps.mu.Lock()
			defer ps.mu.Unlock()
			if want := fmt.Sprint(at.Unix()); ps.query != q || ps.when != want {
				t.Errorf("asked query %q at %q; want %q at %s", ps.query, ps.when, q, want)
			}
		})
	}
}

// TestDemandSourceFeedsHistory: the demand history counts the Prometheus
// reading when it is above the agents' count, the agents' count when it is
// below, and the agents' count when the query fails.
func TestDemandSourceFeedsHistory(t *testing.T) {
	ps := &promServer{status: 200}
	srv := httptest.NewServer(ps)
	defer srv.Close()
	p := gpuPool("g5", 8, 20, 5*time.Minute)
	l := newLoop(t, false, p)
	src, err := NewPrometheusDemand(srv.URL, "sum(gpus_busy)", time.Second)
	if err != nil {
		t.Fatal(err)
	}
	l.c.source = src
	if err := l.c.act.Launch(context.Background(), "g5", 2); err != nil {
		t.Fatal(err)
	}
	g, _ := l.cloud.Describe(context.Background(), p)
	l.busy[g.Instances[0].ID] = true // the agents count 8 GPUs in use
	l.now = l.now.Add(5 * time.Minute)
	for _, tt := range []struct {
		status int
		body   string
		want   float64
	}{
		{200, vectorBody("6", "6"), 12},
		{200, vectorBody("5"), 8},
		{503, `{"status":"error","errorType":"unavailable","error":"shutting down"}`, 8},
	} {
		ps.mu.Lock()
		ps.status, ps.body = tt.status, tt.body
		ps.mu.Unlock()
		l.cycle(t)
		got, _, err := l.store.LatestDemand(loop.DemandSeries)
		if err != nil || got != (state.Sample{Time: l.now, Value: tt.want}) {
			t.Errorf("with %s: recorded %+v, %v; want %v", tt.body, got, err, tt.want)
		}
	}
}
