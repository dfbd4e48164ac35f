package controller

import (
	"encoding/json"
	"fmt"
	"html"
	"math"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

// The oracle of the web page's figures: the JSON API's answers, read
// here into types of the test's own, and each figure the page hooks
// (data-k) read back from its text. TestUIFigures checks the HTML the
// controller serves, TestUIBrowser the DOM a browser made of it.

// uiHook is a hooked element of a page: its text, and its datetime
// attribute (a <time>'s).
type uiHook struct {
	text, datetime string
}

var (
	uiTagRE  = regexp.MustCompile(`<[a-zA-Z][a-zA-Z0-9]*((?:\s+[^\s"'>/=]+(?:\s*=\s*(?:"[^"]*"|'[^']*'|[^\s"'>]+))?)*)\s*/?>([^<]*)`)
	uiAttrRE = regexp.MustCompile(`([^\s"'>/=]+)(?:\s*=\s*(?:"([^"]*)"|'([^']*)'|([^\s"'>]+)))?`)
)

// uiHooks are the hooked elements of page (HTML as served, or a browser's
// DOM serialised), by key; a key hooked twice is an error.
func uiHooks(page string) (map[string]uiHook, error) {
	out := map[string]uiHook{}
	for _, m := range uiTagRE.FindAllStringSubmatch(page, -1) {
		attrs := map[string]string{}
		for _, a := range uiAttrRE.FindAllStringSubmatch(m[1], -1) {
			attrs[strings.ToLower(a[1])] = html.UnescapeString(a[2] + a[3] + a[4])
		}
		k, ok := attrs["data-k"]
		if !ok {
			continue
		}
		if _, dup := out[k]; dup {
			return nil, fmt.Errorf("data-k %q hooks two elements", k)
		}
		out[k] = uiHook{text: strings.TrimSpace(html.UnescapeString(m[2])), datetime: attrs["datetime"]}
	}
	return out, nil
}

// uiWant is what a hook should show: a count, dollars, tenths, a queue
// time (of n jobs) or text.
type uiWant struct {
	kind string
	v    float64
	n    int
	s    string
}

func wantCount(n int) uiWant            { return uiWant{kind: "count", v: float64(n)} }
func wantUSD(v float64) uiWant          { return uiWant{kind: "usd", v: v} }
func wantTenths(v float64) uiWant       { return uiWant{kind: "tenths", v: v} }
func wantText(s string) uiWant          { return uiWant{kind: "text", s: s} }
func wantQueue(s float64, n int) uiWant { return uiWant{kind: "queue", v: s, n: n} }

// check says how text differs from w; "" when it shows w.
func (w uiWant) check(text string) string {
	num := func(s string) (float64, error) {
		return strconv.ParseFloat(strings.NewReplacer(",", "", "$", "").Replace(s), 64)
	}
	switch w.kind {
	case "text":
		if text != w.s {
			return fmt.Sprintf("%q, want %q", text, w.s)
		}
		return ""
	case "queue":
		if w.n == 0 {
			if text != "-" {
				return fmt.Sprintf("%q, want - (no job)", text)
			}
			return ""
		}
		got, tol, err := uiParseQueue(text)
		if err != nil || math.Abs(got-w.v) > tol+1e-9 {
			return fmt.Sprintf("%q (%vs), want %vs (%v)", text, got, w.v, err)
		}
		return ""
	}
	got, err := num(text)
	tol := map[string]float64{"count": 0, "usd": 0.005, "tenths": 0.05}[w.kind]
	if err != nil || math.Abs(got-w.v) > tol+1e-9 || w.kind == "count" && strings.Contains(text, ".") {
		return fmt.Sprintf("%q, want %v (as %s)", text, w.v, w.kind)
	}
	return ""
}

// uiParseQueue reads a queue time as the page shows it ("42s", "4m 10s",
// "1h 05m", "3d 4h"): its seconds, and half its last unit (its rounding).
func uiParseQueue(s string) (seconds, tol float64, err error) {
	units := map[byte]float64{'s': 1, 'm': 60, 'h': 3600, 'd': 86400}
	last := 0.0
	for _, f := range strings.Fields(s) {
		u, ok := units[f[len(f)-1]]
		n, err := strconv.Atoi(f[:len(f)-1])
		if !ok || err != nil {
			return 0, 0, fmt.Errorf("queue time %q", s)
		}
		seconds += float64(n) * u
		last = u
	}
	if last == 0 {
		return 0, 0, fmt.Errorf("queue time %q", s)
	}
	return seconds, last / 2, nil
}

// The API's JSON, as far as the page shows it.
type (
	apiAmount struct {
		Micros   int64   `json:"micros"`
		GPUHours float64 `json:"gpu_hours"`
	}
	apiRow struct {
		Group               string    `json:"group"`
		Used                apiAmount `json:"used"`
		BoughtFor           apiAmount `json:"bought_for"`
		IdleShare           apiAmount `json:"idle_share"`
		Idle                apiAmount `json:"idle"`
		IdleBeforeExecution apiAmount `json:"idle_before_execution"`
		Stalled             apiAmount `json:"stalled"`
		Cost                float64   `json:"cost_usd"`
		Queue               struct {
			Jobs int     `json:"jobs"`
			P50  float64 `json:"p50_s"`
			P95  float64 `json:"p95_s"`
			P99  float64 `json:"p99_s"`
		} `json:"queue"`
		Started     int     `json:"jobs_started"`
		Waited      float64 `json:"waited_gpu_hours"`
		Waiting     int     `json:"jobs_waiting"`
		WaitingGPUs int     `json:"gpus_waiting"`
	}
	apiUsage struct {
		Rows  []apiRow `json:"rows"`
		Total apiRow   `json:"total"`
	}
	apiPlan struct {
		Demand struct {
			Running int `json:"running_gpus"`
			Pending int `json:"pending_gpus"`
		} `json:"demand"`
		Capacity struct {
			Ready     int `json:"ready_gpus"`
			Launching int `json:"launching_gpus"`
			Draining  int `json:"draining_gpus"`
		} `json:"capacity"`
		CostBefore float64 `json:"cost_per_hour_before"`
		CostAfter  float64 `json:"cost_per_hour_after"`
		Actions    []struct {
			Kind, Pool, Node, Reason string
			Count, GPUs              int
		} `json:"actions"`
		Notes    []struct{ Text string } `json:"notes"`
		Baseline *struct{ Nodes int }    `json:"baseline"`
	}
	apiFleet struct {
		Pools []struct {
			Name        string `json:"name"`
			GPUsPerNode int    `json:"gpus_per_node"`
		} `json:"pools"`
		State *struct {
			Nodes []struct {
				Pool, State string
				GPUs        int
				Jobs        []struct {
					ID, Team string
					GPUs     int
				}
			} `json:"nodes"`
		} `json:"state"`
	}
	apiForecast struct {
		Levels []float64   `json:"levels"`
		Values [][]float64 `json:"values"`
	}
)

// uiCheckFigures checks every figure page hooks against the API's JSON
// (get answers a GET of the API), and that each figure the API has for
// the page's sections is hooked; the hooks in must are there.
func uiCheckFigures(t *testing.T, page string, get func(path string) []byte, must ...string) {
	t.Helper()
	hooks, err := uiHooks(page)
	if err != nil {
		t.Fatal(err)
	}
	decode := func(path string, v any) {
		t.Helper()
		if err := json.Unmarshal(get(path), v); err != nil {
			t.Fatalf("GET %s: %v", path, err)
		}
	}
	window := func(name string) (from, to string) {
		t.Helper()
		f, e := hooks[name+":from"].datetime, hooks[name+":to"].datetime
		ft, err1 := time.Parse(time.RFC3339, f)
		et, err2 := time.Parse(time.RFC3339, e)
		if err1 != nil || err2 != nil {
			t.Fatalf("the page's %s window: %q to %q", name, f, e)
		}
		switch {
		case name == "month" && !ft.Equal(time.Date(et.Year(), et.Month(), 1, 0, 0, 0, 0, time.UTC)):
			t.Errorf("the month's window starts %v, want the first of %v's month", ft, et)
		case name == "week" && !ft.Equal(et.Add(-uiQueueWindow)):
			t.Errorf("the week's window starts %v, want a week before %v", ft, et)
		}
		return f, e
	}
	want := map[string]uiWant{}
	var plan apiPlan
	decode("/v1/plan", &plan)
	want["plan:demand_gpus"] = wantCount(plan.Demand.Running + plan.Demand.Pending)
	want["plan:running_gpus"] = wantCount(plan.Demand.Running)
	want["plan:pending_gpus"] = wantCount(plan.Demand.Pending)
	want["plan:capacity_gpus"] = wantCount(plan.Capacity.Ready + plan.Capacity.Launching + plan.Capacity.Draining)
	want["plan:ready_gpus"] = wantCount(plan.Capacity.Ready)
	want["plan:launching_gpus"] = wantCount(plan.Capacity.Launching)
	want["plan:draining_gpus"] = wantCount(plan.Capacity.Draining)
	want["plan:cost_before"] = wantUSD(plan.CostBefore)
	want["plan:cost_after"] = wantUSD(plan.CostAfter)
	want["plan:actions"] = wantCount(len(plan.Actions))
	for i, a := range plan.Actions {
		k := fmt.Sprintf("plan:action:%d:", i)
		want[k+"kind"], want[k+"pool"], want[k+"gpus"], want[k+"reason"] = wantText(a.Kind), wantText(a.Pool), wantCount(a.GPUs), wantText(a.Reason)
		if a.Node == "" {
			want[k+"count"] = wantCount(a.Count)
		}
	}
	for i, n := range plan.Notes {
		want[fmt.Sprintf("plan:note:%d", i)] = wantText(n.Text)
	}
	if plan.Baseline != nil {
		want["plan:baseline_nodes"] = wantCount(plan.Baseline.Nodes)
	}

	var fl apiFleet
	decode("/v1/fleet", &fl)
	perNode := map[string]int{}
	for _, p := range fl.Pools {
		perNode[p.Name] = p.GPUsPerNode
		for _, s := range []string{"pending", "ready", "draining", "terminating", "gpus"} {
			want["pool:"+p.Name+":"+s] = wantCount(0)
		}
	}
	type team struct{ jobs, gpus, waiting, waitingGPUs int }
	teams := map[string]*team{}
	teamOf := func(name string) *team {
		if teams[name] == nil {
			teams[name] = &team{}
		}
		return teams[name]
	}
	seen := map[string]bool{}
	if fl.State != nil {
		for _, n := range fl.State.Nodes {
			gpus, ok := perNode[n.Pool]
			if !ok {
				gpus = n.GPUs
			}
			for _, s := range []string{"pending", "ready", "draining", "terminating", "gpus"} {
				if _, ok := want["pool:"+n.Pool+":"+s]; !ok {
					want["pool:"+n.Pool+":"+s] = wantCount(0)
				}
			}
			w := want["pool:"+n.Pool+":"+n.State]
			w.v++
			want["pool:"+n.Pool+":"+n.State] = w
			if n.State != "terminating" {
				w := want["pool:"+n.Pool+":gpus"]
				w.v += float64(gpus)
				want["pool:"+n.Pool+":gpus"] = w
			}
			for _, j := range n.Jobs {
				name := j.Team
				if name == "" {
					name = "unattributed"
				}
				tm := teamOf(name)
				tm.gpus += j.GPUs
				if !seen[name+"/"+j.ID] {
					seen[name+"/"+j.ID] = true
					tm.jobs++
				}
			}
		}
	}

	var fc apiForecast
	decode("/v1/forecast", &fc)
	for j, q := range fc.Levels {
		if vs := fc.Values[j]; len(vs) > 0 {
			want["forecast:p"+strconv.FormatFloat(math.Round(q*1000)/10, 'f', -1, 64)] = wantTenths(vs[len(vs)-1])
		}
	}

	from, to := window("month")
	var month apiUsage
	decode("/v1/usage?from="+url.QueryEscape(from)+"&to="+url.QueryEscape(to), &month)
	want["month:total:cost"] = wantUSD(month.Total.Cost)
	for i, x := range append(month.Rows, month.Total) {
		g := x.Group
		if i == len(month.Rows) {
			g = "total"
		} else if x.Waiting > 0 || x.WaitingGPUs > 0 {
			tm := teamOf(g)
			tm.waiting, tm.waitingGPUs = x.Waiting, x.WaitingGPUs
		}
		k := "cost:" + g + ":"
		want[k+"cost"] = wantUSD(x.Cost)
		want[k+"used"] = wantUSD(float64(x.Used.Micros) / 1e6)
		want[k+"bought_for"] = wantUSD(float64(x.BoughtFor.Micros) / 1e6)
		want[k+"idle"] = wantUSD(float64(x.Idle.Micros+x.IdleShare.Micros) / 1e6)
		want[k+"gpu_hours"] = wantTenths(x.Used.GPUHours + x.BoughtFor.GPUHours + x.Idle.GPUHours + x.IdleShare.GPUHours)
	}
	for name, tm := range teams {
		k := "team:" + name + ":"
		want[k+"jobs"], want[k+"gpus"], want[k+"waiting_jobs"], want[k+"waiting_gpus"] = wantCount(tm.jobs), wantCount(tm.gpus), wantCount(tm.waiting), wantCount(tm.waitingGPUs)
	}

	from, to = window("week")
	var week apiUsage
	decode("/v1/usage?from="+url.QueryEscape(from)+"&to="+url.QueryEscape(to), &week)
	for i, x := range append(week.Rows, week.Total) {
		g := x.Group
		if i == len(week.Rows) {
			g = "total"
		} else if g == "idle" {
			continue
		}
		k := "queue:" + g + ":"
		want[k+"started"] = wantCount(x.Started)
		want[k+"p50"], want[k+"p95"], want[k+"p99"] = wantQueue(x.Queue.P50, x.Queue.Jobs), wantQueue(x.Queue.P95, x.Queue.Jobs), wantQueue(x.Queue.P99, x.Queue.Jobs)
		want[k+"idle_before_execution_gpu_hours"] = wantTenths(x.IdleBeforeExecution.GPUHours)
		want[k+"idle_before_execution_cost"] = wantUSD(float64(x.IdleBeforeExecution.Micros) / 1e6)
		want[k+"stalled_gpu_hours"] = wantTenths(x.Stalled.GPUHours)
		want[k+"stalled_cost"] = wantUSD(float64(x.Stalled.Micros) / 1e6)
		want[k+"waited_gpu_hours"] = wantTenths(x.Waited)
	}

	for k, w := range want {
		h, ok := hooks[k]
		if !ok {
			t.Errorf("the page does not show %s (the API has %+v)", k, w)
			continue
		}
		if why := w.check(h.text); why != "" {
			t.Errorf("%s: the page shows %s", k, why)
		}
	}
	for k := range hooks {
		if _, ok := want[k]; !ok && !strings.HasPrefix(k, "month:") && !strings.HasPrefix(k, "week:") {
			t.Errorf("the page hooks %s (%q), which the API has no figure for", k, hooks[k].text)
		}
	}
	for _, k := range must {
		if _, ok := hooks[k]; !ok {
			t.Errorf("the page lacks %s", k)
		}
	}
	t.Logf("%d figures compared with the API", len(want))
}
