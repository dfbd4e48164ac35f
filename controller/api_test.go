package controller

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/fleetcast/autoscaler/providers"
	"github.com/fleetcast/autoscaler/providers/plugin"

	"github.com/fleetcast/autoscaler/agent/report"
	"github.com/fleetcast/autoscaler/apiauth"
	"github.com/fleetcast/autoscaler/fleet"
	"github.com/fleetcast/autoscaler/nodeauth"
	"github.com/fleetcast/autoscaler/nodeauth/nodeauthtest"
	"github.com/fleetcast/autoscaler/planner"
)

func get(t *testing.T, h http.Handler, path string) (int, string) {
	t.Helper()
	w := httptest.NewRecorder()
	h.ServeHTTP(w, httptest.NewRequest(http.MethodGet, path, nil))
	body, _ := io.ReadAll(w.Body)
	return w.Code, string(body)
}

func TestAPI(t *testing.T) {
	p := gpuPool("g5", 1, 200, 5*time.Minute)
	l := newLoop(t, false, p)
	tok, api := nodeauthtest.New(t), nodeauthtest.NewAPI(t)
	dr := &DemandReceiver{Pools: l.set.Pools, Pending: l.pending, Now: func() time.Time { return l.now }}
	h := l.c.Handler(APIOptions{Credentials: tok, Demand: dr, Tokens: api.Tokens, OpenReads: true})

	// Before any cycle the reads are 503; /healthz, liveness, is 200 and
	// says so (TestHealthBeforeFirstCycle).
	for _, path := range []string{"/readyz", "/v1/plan", "/v1/fleet", "/v1/forecast"} {
		if code, body := get(t, h, path); code != http.StatusServiceUnavailable || !strings.Contains(body, "no control cycle yet") {
			t.Errorf("GET %s before any cycle: %d %q, want 503", path, code, body)
		}
	}
	// A scheduler pushes 8 waiting GPUs through the API; the cycle
	// launches for them.
	if w := push(t, h, api.Of[apiauth.Demand], "application/json", `{"source": "slurm", "pending": [{"pool": "g5", "gpus": 8}]}`); w.Code != http.StatusNoContent {
		t.Fatalf("POST /v1/demand: %d %s", w.Code, w.Body)
	}
	if w := push(t, h, "wrong-token-but-long", "application/json", `{"source": "x", "pending": [{"pool": "g5", "gpus": 100}]}`); w.Code != http.StatusUnauthorized {
		t.Errorf("POST /v1/demand with a wrong token: %d", w.Code)
	}
	l.cycle(t)
	// One cycle of history: the forecaster falls back, and says so.
	if code, body := get(t, h, "/v1/forecast"); code != http.StatusOK || !strings.Contains(body, `"model": "naive"`) || !strings.Contains(body, "too little history") {
		t.Errorf("GET /v1/forecast with one cycle of history: %d %q", code, body)
	}
	if code, body := get(t, h, "/healthz"); code != http.StatusOK {
		t.Errorf("GET /healthz after a cycle: %d %q", code, body)
	}
	code, body := get(t, h, "/v1/plan")
	var pv PlanView
	if code != http.StatusOK || json.Unmarshal([]byte(body), &pv) != nil {
		t.Fatalf("GET /v1/plan: %d %q", code, body)
	}
	plan := planner.Plan{Demand: pv.Demand, Actions: pv.Actions}
	if plan.Demand.PendingGPUs != 8 || plan.Counts()[planner.Launch] != 8 {
		t.Errorf("plan: pending %d, launches %d; want 8 and 8", plan.Demand.PendingGPUs, plan.Counts()[planner.Launch])
	}
	if pv.Forecast == nil || pv.Forecast.Step != "10m" || !strings.Contains(body, `"step": "10m"`) {
		t.Errorf("GET /v1/plan: the forecast's step is not \"10m\":\n%s", body)
	}
	code, body = get(t, h, "/v1/fleet")
	var fv struct {
		Pools []struct{ Name string }
		State struct {
			Nodes []struct{ ID, State string }
		}
	}
	if code != http.StatusOK || json.Unmarshal([]byte(body), &fv) != nil || len(fv.Pools) != 1 {
		t.Fatalf("GET /v1/fleet: %d %q", code, body)
	}
	// Durations are text in the config's syntax, not nanoseconds.
	for _, want := range []string{`"lead_time": "5m"`, `"provision_timeout": "15m"`, `"agent_timeout": "3m"`, `"step": "10m"`} {
		if !strings.Contains(body, want) {
			t.Errorf("GET /v1/fleet lacks %s:\n%s", want, body)
		}
	}
	if _, body := get(t, h, "/v1/forecast"); !strings.Contains(body, `"step": "10m"`) {
		t.Errorf("GET /v1/forecast: the step is not \"10m\":\n%s", body)
	}

	// An agent reports through the API with its node's token.
	l.now = l.now.Add(6 * time.Minute)
	g, _ := l.cloud.Describe(t.Context(), p)
	node := g.Instances[0].ID
	rep, _ := json.Marshal(report.Report{Node: node, SentAt: l.now, Healthy: true,
		GPUs: []report.GPU{{Index: 0, UUID: "GPU-0", MemoryTotal: 1}}, Drain: report.DrainStatus{State: report.NotDraining}})
	post := func(token string) int {
		req := httptest.NewRequest(http.MethodPost, "/v1/agents/"+node+"/report", bytes.NewReader(rep))
		req.Header.Set("Authorization", "Bearer "+token)
		req.Header.Set("Content-Type", "application/json")
		w := httptest.NewRecorder()
		h.ServeHTTP(w, req)
		return w.Code
	}
	if code := post(tok.For("some-other-node")); code != http.StatusForbidden {
		t.Errorf("report with another node's token: %d, want 403", code)
	}
	if code := post(tok.For(node)); code != http.StatusOK {
		t.Errorf("report with the node's token: %d", code)
	}
	if _, err := l.c.Cycle(t.Context()); err != nil {
		t.Fatal(err)
	}
	code, body = get(t, h, "/metrics")
	for _, want := range []string{
		`fleetcast_gpus{pool="g5",state="ready"} 1`,
		`fleetcast_gpus{pool="g5",state="pending"} 7`,
		`fleetcast_actions_total{kind="launch",pool="g5",result="ok"} 1`,
		`fleetcast_demand_gpus{kind="pending"} 8`,
		"fleetcast_fragment_gpus 0", // the node reports no job
		`fleetcast_plan_seconds_count 2`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("GET /metrics (%d) lacks %s", code, want)
		}
	}
	if t.Failed() {
		t.Log(body)
	}
}

// TestAPIReadsNeedTokenOffLoopback: without OpenReads (as run serves off
// loopback, or with -loopback-reads=false), the /v1/ reads need a token
// that may read; /healthz, /readyz and /metrics do not.
func TestAPIReadsNeedTokenOffLoopback(t *testing.T) {
	l := newLoop(t, false, gpuPool("g5", 1, 200, 5*time.Minute))
	api := nodeauthtest.NewAPI(t)
	h := l.c.Handler(APIOptions{Tokens: api.Tokens})
	l.cycle(t)
	for _, path := range []string{"/v1/plan", "/v1/fleet", "/v1/forecast", "/v1/plugins"} {
		if code, _ := get(t, h, path); code != http.StatusUnauthorized {
			t.Errorf("GET %s without the token: %d, want 401", path, code)
		}
		req := httptest.NewRequest(http.MethodGet, path, nil)
		req.Header.Set("Authorization", "Bearer wrong-token-but-long")
		w := httptest.NewRecorder()
		h.ServeHTTP(w, req)
		if w.Code != http.StatusUnauthorized {
			t.Errorf("GET %s with a wrong token: %d, want 401", path, w.Code)
		}
		for _, scope := range []apiauth.Scope{apiauth.Read, apiauth.Operator} {
			req.Header.Set("Authorization", "Bearer "+api.Of[scope])
			w = httptest.NewRecorder()
			h.ServeHTTP(w, req)
			if w.Code != http.StatusOK {
				t.Errorf("GET %s with a token of scope %s: %d, want 200", path, scope, w.Code)
			}
		}
	}
	for _, path := range []string{"/healthz", "/metrics"} {
		if code, _ := get(t, h, path); code != http.StatusOK {
			t.Errorf("GET %s without a token: %d, want 200", path, code)
		}
	}
}

type pluginHealth []plugin.Status

func (p pluginHealth) Status() []plugin.Status { return p }

// TestAPIPlugins: GET /v1/plugins is the plugins' health, and an empty
// list where there are none.
func TestAPIPlugins(t *testing.T) {
	l := newLoop(t, false, gpuPool("g5", 1, 200, 5*time.Minute))
	if code, body := get(t, l.c.Handler(APIOptions{OpenReads: true}), "/v1/plugins"); code != http.StatusOK || strings.TrimSpace(body) != "[]" {
		t.Errorf("GET /v1/plugins with no plugins: %d %q; want 200 []", code, body)
	}
	h := l.c.Handler(APIOptions{OpenReads: true, Plugins: pluginHealth{{Name: "racks", Plugin: "fleetcast-commands", Version: "0.1.0", Protocol: 1, Pools: []string{"onprem"}, Healthy: true}}})
	code, body := get(t, h, "/v1/plugins")
	if code != http.StatusOK || !strings.Contains(body, `"name": "racks"`) || !strings.Contains(body, `"protocol": 1`) || !strings.Contains(body, `"healthy": true`) {
		t.Errorf("GET /v1/plugins: %d %s", code, body)
	}
}

// twoUp is a loop on pool p (min 2) with test credentials: before its
// first cycle it calls first, then it runs cycles until the pool's two
// nodes are up, and one more, and returns their group.
func twoUp(t *testing.T, p fleet.Pool, first func(*cycler)) (*cycler, *nodeauthtest.Tokens, providers.Group) {
	t.Helper()
	l := newLoop(t, false, p)
	creds := nodeauthtest.New(t)
	l.c.creds = creds
	first(l)
	for range 3 {
		l.cycle(t)
		l.now = l.now.Add(time.Minute)
	}
	g, err := l.cloud.Describe(context.Background(), p)
	if err != nil || len(g.Instances) < 2 {
		t.Fatalf("%+v, %v", g, err)
	}
	l.cycle(t)
	return l, creds, g
}

// TestLivePoolAndGoneCredentials: a bootstrap is checked against the
// instances the last cycle saw; a credential of an instance gone from its
// cloud is forgotten with it, while an operator's for a node no pool lists
// stays.
func TestLivePoolAndGoneCredentials(t *testing.T) {
	p := gpuPool("g5", 8, 4, time.Minute)
	p.Min = 2
	l, creds, g := twoUp(t, p, func(l *cycler) {
		if _, _, ok := l.c.LivePool("anything"); ok {
			t.Fatal("a node is live before any cycle")
		}
	})
	gone, stays := g.Instances[0].ID, g.Instances[1].ID
	if got, _, ok := l.c.LivePool(gone); !ok || got.Name != "g5" {
		t.Fatalf("LivePool(%s) = %v, %v; want g5", gone, got.Name, ok)
	}
	tokGone, tokStays, tokRack := creds.For(gone), creds.For(stays), creds.For("rack-7")
	if err := l.cloud.Terminate(context.Background(), p, []string{gone}); err != nil {
		t.Fatal(err)
	}
	for range 3 {
		l.now = l.now.Add(time.Minute)
		l.cycle(t)
	}
	// Unlisted for less than GoneGrace: a listing may omit a live
	// instance for a moment; its credential stands.
	if err := creds.Check(gone, tokGone); err != nil {
		t.Errorf("the unlisted instance's credential, within GoneGrace: %v, want it kept", err)
	}
	l.now = l.now.Add(GoneGrace)
	l.cycle(t)
	if _, _, ok := l.c.LivePool(gone); ok {
		t.Error("a terminated instance is live")
	}
	var e *nodeauth.Error
	if err := creds.Check(gone, tokGone); !errors.As(err, &e) || e.Code != nodeauth.Unknown {
		t.Errorf("the gone instance's credential: %v, want it forgotten", err)
	}
	if err := creds.Check(stays, tokStays); err != nil {
		t.Errorf("a live instance's credential: %v", err)
	}
	if err := creds.Check("rack-7", tokRack); err != nil {
		t.Errorf("an operator's credential for a node no pool lists: %v", err)
	}
}

// TestAPIViews: the API's JSON has durations as text and [] for empty
// lists, never null, before the fleet has a node or the plan an action.
func TestAPIViews(t *testing.T) {
	p := gpuPool("g5", 1, 200, 90*time.Second)
	l := newLoop(t, false, p)
	h := l.c.Handler(APIOptions{OpenReads: true})
	l.cycle(t) // no demand: nothing to do
	tests := []struct {
		path string
		want []string
	}{
		{"/v1/plan", []string{`"actions": []`}},
		{"/v1/fleet", []string{`"nodes": []`, `"pools": [`, `"lead_time": "1m30s"`, `"provision_timeout": "4m30s"`, `"step": "10m"`, `"values": [`}},
	}
	for _, tt := range tests {
		code, body := get(t, h, tt.path)
		if code != http.StatusOK {
			t.Fatalf("GET %s: %d %s", tt.path, code, body)
		}
		for _, want := range tt.want {
			if !strings.Contains(body, want) {
				t.Errorf("GET %s lacks %s:\n%s", tt.path, want, body)
			}
		}
		if strings.Contains(body, "null") {
			t.Errorf("GET %s has a null:\n%s", tt.path, body)
		}
	}
}

// TestFleetViewSeries: both histories show their steps as text, held only
// when the state has one.
func TestFleetViewSeries(t *testing.T) {
	cfg := testDefaults()
	st := &fleet.State{History: fleet.Series{Start: t0, Step: 10 * time.Minute, Values: []float64{1}}}
	b, _ := json.Marshal(newFleetView(t0, &cfg.Settings, st, 10*time.Minute))
	if !strings.Contains(string(b), `"history":{"start":"2026-11-30T10:00:00Z","step":"10m"`) || strings.Contains(string(b), `"held"`) {
		t.Fatalf("view without held: %s", b)
	}
	st.Held = fleet.Series{Start: t0, Step: 10 * time.Minute, Values: []float64{8}}
	b, _ = json.Marshal(newFleetView(t0, &cfg.Settings, st, 10*time.Minute))
	if !strings.Contains(string(b), `"held":{"start":"2026-11-30T10:00:00Z","step":"10m","values":[8]}`) {
		t.Fatalf("view with held: %s", b)
	}
}

// TestPluginServerKeepsCredential: a plugin pool's server that leaves its
// pool's listing (powered off) keeps its credential: it comes back under
// its name, and its agent with it.
func TestPluginServerKeepsCredential(t *testing.T) {
	p := gpuPool("onprem", 8, 4, time.Minute)
	p.Provider, p.Min = fleet.ProviderPlugin, 2
	l, creds, g := twoUp(t, p, func(*cycler) {})
	off := g.Instances[0].ID
	tok := creds.For(off)
	if err := l.cloud.Terminate(context.Background(), p, []string{off}); err != nil {
		t.Fatal(err)
	}
	// Past GoneGrace, when a missing node is forgotten.
	for end := l.now.Add(GoneGrace + 2*time.Minute); l.now.Before(end); {
		l.now = l.now.Add(time.Minute)
		l.cycle(t)
	}
	if _, _, ok := l.c.LivePool(off); ok {
		t.Error("a server powered off is live")
	}
	if err := creds.Check(off, tok); err != nil {
		t.Errorf("the powered-off server's credential: %v; want it kept", err)
	}
}
