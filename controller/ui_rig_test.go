package controller

import (
	"context"
	"fmt"
	"math"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/fleetcast/autoscaler/agent/report"
	"github.com/fleetcast/autoscaler/apiauth"
	"github.com/fleetcast/autoscaler/fleet"
	"github.com/fleetcast/autoscaler/loop"
	"github.com/fleetcast/autoscaler/nodeauth/nodeauthtest"
	"github.com/fleetcast/autoscaler/providers"
	"github.com/fleetcast/autoscaler/state"
)

// uiRig is a controller and its API, for the web page's tests.
type uiRig struct {
	l      *cycler
	tokens *apiauth.Tokens
	// secrets are the secret of a token of each scope, by scope.
	secrets map[apiauth.Scope]string
	h       *apiauth.Router
	// clock is the API tokens' clock (rotation graces).
	clock time.Time
}

// newUIRig is a controller of one pool that has run no cycle, with API
// tokens of every scope on their own clock.
func newUIRig(t *testing.T, openReads bool, pools ...fleet.Pool) *uiRig {
	t.Helper()
	if len(pools) == 0 {
		pools = []fleet.Pool{gpuPool("g5", 1, 10, 5*time.Minute)}
	}
	r := &uiRig{l: newLoop(t, false, pools...), secrets: map[apiauth.Scope]string{}, clock: t0}
	var err error
	if r.tokens, err = apiauth.NewTokens(&nodeauthtest.APIMemory{}, func() time.Time { return r.clock }, nil); err != nil {
		t.Fatal(err)
	}
	if err := r.tokens.SetRoot(nodeauthtest.RootToken, "FLEETCAST_API_TOKEN"); err != nil {
		t.Fatal(err)
	}
	for _, s := range apiauth.Scopes {
		if r.secrets[s], _, err = r.tokens.Create(string(s), s, apiauth.RootName); err != nil {
			t.Fatal(err)
		}
	}
	r.h = r.l.c.Handler(APIOptions{Tokens: r.tokens, OpenReads: openReads})
	return r
}

// do serves req.
func (r *uiRig) do(req *http.Request) *httptest.ResponseRecorder {
	w := httptest.NewRecorder()
	r.h.ServeHTTP(w, req)
	return w
}

// get is GET path with cookie and bearer (each if set).
func (r *uiRig) get(path string, cookie *http.Cookie, bearer string) *httptest.ResponseRecorder {
	req := httptest.NewRequest(http.MethodGet, path, nil)
	if cookie != nil {
		req.AddCookie(cookie)
	}
	if bearer != "" {
		req.Header.Set("Authorization", "Bearer "+bearer)
	}
	return r.do(req)
}

// post posts form to path, with cookie if set.
func (r *uiRig) post(path string, form url.Values, cookie *http.Cookie) *httptest.ResponseRecorder {
	req := httptest.NewRequest(http.MethodPost, path, strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	if cookie != nil {
		req.AddCookie(cookie)
	}
	return r.do(req)
}

// login posts secret to the login form and returns the session cookie.
func (r *uiRig) login(t *testing.T, secret string) *http.Cookie {
	t.Helper()
	w := r.post("/ui/login", url.Values{"token": {secret}}, nil)
	if w.Code != http.StatusSeeOther || w.Header().Get("Location") != "/ui" {
		t.Fatalf("login: %d %q, want 303 to /ui", w.Code, w.Body)
	}
	for _, c := range w.Result().Cookies() {
		if c.Name == uiCookie {
			return c
		}
	}
	t.Fatal("login set no session cookie")
	return nil
}

// uiJob is a job of team and tier on a node's GPUs from first, submitted
// and started as said.
func uiJob(id, team, tier string, first, gpus int, submitted, start time.Time) report.Job {
	j := report.Job{ID: id, Team: team, Tier: tier, Start: start, Submitted: submitted}
	for i := range gpus {
		j.GPUs = append(j.GPUs, first+i)
	}
	return j
}

// newUIFleet is a controller of three pools (on-demand, reserved, spot)
// with three days of demand history and of usage by four teams, two
// hours of cycles with their jobs running and a fourth's waiting, a
// forecast and a plan that launches for the waiting jobs.
func newUIFleet(t *testing.T, openReads bool) *uiRig {
	t.Helper()
	od := simPool("od", 2) // 8 GPUs, $32 an hour
	od.Min = 1
	rs := fleet.Pool{Name: "rs", Provider: "sim", InstanceType: "g6.12xlarge", GPUsPerNode: 4, Capacity: fleet.Reserved,
		PricePerHour: 6, LeadTime: 5 * time.Minute, ProvisionTimeout: 15 * time.Minute, Min: 1, Max: 1}
	sp := simPool("spot", 3)
	sp.Capacity, sp.PricePerHour = fleet.Spot, 12
	r := newUIRig(t, openReads, od, rs, sp)
	l := r.l
	ctx := context.Background()
	for _, p := range []string{"od", "rs"} {
		if err := l.c.act.Launch(ctx, p, 1); err != nil {
			t.Fatal(err)
		}
	}
	// Three days before t0: a daily cycle of demand, and what it cost.
	var samples []state.Sample
	for at := t0.Add(-72 * time.Hour); at.Before(t0); at = at.Add(10 * time.Minute) {
		day := math.Max(0, math.Sin(2*math.Pi*float64(at.Hour()*60+at.Minute()-6*60)/(24*60)))
		noise := math.Abs(math.Mod(math.Sin(float64(at.Unix()/600)*12.9898)*43758.5453, 1)) // the same every run
		samples = append(samples, state.Sample{Time: at, Value: math.Round(7 + 9*day + 4*noise)})
	}
	if _, _, err := loop.Import(l.store, 10*time.Minute, samples...); err != nil {
		t.Fatal(err)
	}
	var hours []state.UsageHour
	for at := t0.Add(-72 * time.Hour); at.Before(t0); at = at.Add(time.Hour) {
		daytime := at.Hour() >= 8 && at.Hour() < 18
		charge := func(pool, kind string, gpus, perGPU float64) state.UsageCharge {
			return state.UsageCharge{Pool: pool, Kind: kind, GPUHours: gpus, Micros: int64(math.Round(gpus * perGPU * 1e6))}
		}
		alpha := state.UsageHour{Hour: at, Team: "alpha", Tier: "critical", Charges: []state.UsageCharge{charge("od", "used", 4, 4)},
			Started: 1, Queue: []int64{int64(60 + at.Hour()*45)}}
		if at.Hour()%6 == 2 {
			// Its input pipeline stalls a quarter of the hour: part of used.
			alpha.Charges = append(alpha.Charges, charge("od", "stalled", 1, 4))
		}
		beta := state.UsageHour{Hour: at, Team: "beta", Tier: "standard", Charges: []state.UsageCharge{charge("od", "used", 2, 4)}}
		if at.Hour()%3 == 0 {
			beta.Started, beta.Queue = 1, []int64{900 + int64(at.Day())*60}
		}
		gamma := state.UsageHour{Hour: at, Team: "gamma", Tier: "standard", Charges: []state.UsageCharge{charge("rs", "used", 1, 1.5)}}
		idle := state.UsageHour{Hour: at, Team: "idle", Tier: "idle", Charges: []state.UsageCharge{charge("od", "idle", 2, 4), charge("rs", "idle", 3, 1.5)}}
		hs := []state.UsageHour{alpha, beta, gamma, idle}
		if daytime {
			hs[0].Charges = append(hs[0].Charges, charge("spot", "used", 6, 1.5))
			hs = append(hs, state.UsageHour{Hour: at, Team: "delta", Tier: "best_effort", Charges: []state.UsageCharge{charge("spot", "bought_for", 2, 1.5)}, WaitedGPUHours: 0.5})
		}
		hours = append(hours, hs...)
	}
	if err := l.store.PutUsage(hours, nil); err != nil {
		t.Fatal(err)
	}
	// Two hours of cycles: alpha's and beta's jobs on the on-demand node,
	// gamma's on the reservation; delta's wait at the last. Beta's GPUs
	// idle for its first 40 minutes (waiting on its data): idle before
	// execution.
	a1 := uiJob("a1", "alpha", "critical", 0, 4, t0.Add(-10*time.Minute), t0.Add(5*time.Minute))
	b1 := uiJob("b1", "beta", "standard", 4, 2, t0, t0.Add(9*time.Minute))
	c1 := uiJob("c1", "gamma", "standard", 0, 1, time.Time{}, t0.Add(time.Minute))
	for i := 1; i <= 12; i++ {
		l.now = t0.Add(time.Duration(i) * 10 * time.Minute)
		var push []PendingDemand
		if i == 12 {
			push = []PendingDemand{{GPUs: 16, Team: "delta", Tier: "best_effort", Jobs: 2}}
		}
		l.pending.Set(l.now, DemandPush{Source: "queue", Pending: push})
		idle := map[int]bool{}
		if i <= 4 {
			idle[4], idle[5] = true, true
		}
		uiReportJobs(t, l, map[string][]report.Job{"od": {a1, b1}, "rs": {c1}}, idle)
		if _, err := l.c.Cycle(ctx); err != nil {
			t.Fatalf("cycle at %v: %v", l.now, err)
		}
	}
	return r
}

// uiReportJobs has each running instance's agent report: the first of
// each pool with the jobs jobs gives its pool, the others none; its GPUs
// 90% busy, those of the on-demand pool's first node that idle says at 1%.
func uiReportJobs(t *testing.T, l *cycler, jobs map[string][]report.Job, idle map[int]bool) {
	t.Helper()
	for _, p := range l.set.Pools {
		g, err := l.cloud.Describe(context.Background(), p)
		if err != nil {
			t.Fatal(err)
		}
		first := true
		for _, in := range g.Instances {
			if in.State != providers.InstanceRunning {
				continue
			}
			rep := &report.Report{Node: in.ID, SentAt: l.now, Healthy: true, Drain: report.DrainStatus{State: report.NotDraining}}
			for i := range p.GPUsPerNode {
				util := 90
				if first && p.Name == "od" && idle[i] {
					util = 1
				}
				rep.GPUs = append(rep.GPUs, report.GPU{Index: i, UUID: fmt.Sprint("GPU-", i), MemoryTotal: 80 << 30, UtilGPU: util})
			}
			if first {
				rep.Jobs = jobs[p.Name]
				first = false
			}
			l.send(t, rep)
		}
	}
}

// uiMustShow are figures newUIFleet's page shows, whatever else it does.
var uiMustShow = []string{"cost:alpha:cost", "cost:total:cost", "team:alpha:gpus", "team:delta:waiting_gpus", "queue:alpha:p50",
	"queue:beta:p99", "pool:od:ready", "pool:rs:ready", "forecast:p50", "plan:action:0:reason", "plan:cost_before"}
