package controller

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/fleetcast/autoscaler/agent/report"
	"github.com/fleetcast/autoscaler/apiauth"
	"github.com/fleetcast/autoscaler/controller/reports"
	"github.com/fleetcast/autoscaler/fleet"
	"github.com/fleetcast/autoscaler/nodeauth"
	"github.com/fleetcast/autoscaler/nodeauth/nodeauthtest"
)

// routeAccess is who may call each route the API serves: the oracle of
// TestAPIScopes, written out here rather than read from the code.
var routeAccess = map[string]apiauth.Access{
	"GET /healthz":                             apiauth.Public,
	"GET /readyz":                              apiauth.Public,
	"GET /metrics":                             apiauth.Public,
	"GET /v1/plan":                             apiauth.NeedRead,
	"GET /v1/fleet":                            apiauth.NeedRead,
	"GET /v1/forecast":                         apiauth.NeedRead,
	"GET /v1/plugins":                          apiauth.NeedRead,
	"GET /v1/usage":                            apiauth.NeedRead,
	"POST /v1/demand":                          apiauth.NeedDemand,
	"POST /v1/slurm/resume":                    apiauth.NeedDemand,
	"POST /v1/slurm/suspend":                   apiauth.NeedDemand,
	"POST /v1/agents/{node}/report":            apiauth.Node,
	"POST /v1/agents/{node}/credential":        apiauth.Bootstrap,
	"POST /v1/agents/{node}/credential/rotate": apiauth.Node,
	"DELETE /v1/agents/{node}/credential":      apiauth.NeedOperator,
	"GET /v1/credentials":                      apiauth.NeedOperator,
	"GET /v1/api-tokens":                       apiauth.NeedOperator,
	"POST /v1/api-tokens":                      apiauth.NeedOperator,
	"POST /v1/api-tokens/{name}/rotate":        apiauth.NeedOperator,
	"DELETE /v1/api-tokens/{name}":             apiauth.NeedOperator,
	"GET /ui":                                  apiauth.ReadOrSession,
	"GET /ui/login":                            apiauth.Public,
	"POST /ui/login":                           apiauth.Public,
	"POST /ui/logout":                          apiauth.Public,
}

// apiRig is the whole API of a controller: API tokens of every scope, a
// node with its credential, and a bootstrap secret.
type apiRig struct {
	l      *cycler
	h      *apiauth.Router
	api    *nodeauthtest.API
	creds  *nodeauthtest.Tokens
	node   string // a node with a credential
	secret string // the bootstrap secret
	log    *bytes.Buffer
}

func newAPIRig(t *testing.T, openReads bool) *apiRig {
	t.Helper()
	r := &apiRig{l: newLoop(t, false, gpuPool("g5", 1, 200, 5*time.Minute)), api: nodeauthtest.NewAPI(t), creds: nodeauthtest.New(t),
		node: "n1", secret: strings.Repeat("b", 64), log: &bytes.Buffer{}}
	file := filepath.Join(t.TempDir(), "bootstrap")
	if err := os.WriteFile(file, []byte(r.secret+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	r.creds.For(r.node)
	log := hclog.New(&hclog.LoggerOptions{Output: r.log, Level: hclog.Info})
	r.h = r.l.c.Handler(APIOptions{Credentials: r.creds, Tokens: r.api.Tokens, OpenReads: openReads, Plugins: pluginHealth{},
		Auth:   &nodeauth.Server{Registry: r.creds.Registry, BootstrapFile: file, Live: r.l.c.LivePool, Log: log},
		Demand: &DemandReceiver{Pools: r.l.set.Pools, Pending: r.l.pending, Now: func() time.Time { return r.l.now }, Log: log}})
	return r
}

// call makes a request of pattern's method and path (its {node} the
// rig's node, its {name} the demand token's) with bearer and body.
func (r *apiRig) call(pattern, bearer, body string) *httptest.ResponseRecorder {
	method, path, _ := strings.Cut(pattern, " ")
	path = strings.NewReplacer("{node}", r.node, "{name}", string(apiauth.Demand)).Replace(path)
	req := httptest.NewRequest(method, path, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	if bearer != "" {
		req.Header.Set("Authorization", "Bearer "+bearer)
	}
	w := httptest.NewRecorder()
	r.h.ServeHTTP(w, req)
	return w
}

// caller is who calls, in TestAPIScopes.
type caller struct {
	name string
	// scope is the API token's scope; "" for callers with none.
	scope  apiauth.Scope
	bearer func(*apiRig) string
}

var callers = []caller{
	{"no token", "", func(*apiRig) string { return "" }},
	{"a wrong token", "", func(*apiRig) string { return "fca1.not-a-token-this-controller-holds" }},
	{"the node's credential", "", func(r *apiRig) string { return r.creds.For(r.node) }},
	{"the bootstrap secret", "", func(r *apiRig) string { return r.secret }},
	{"a demand token", apiauth.Demand, func(r *apiRig) string { return r.api.Of[apiauth.Demand] }},
	{"a read token", apiauth.Read, func(r *apiRig) string { return r.api.Of[apiauth.Read] }},
	{"an operator token", apiauth.Operator, func(r *apiRig) string { return r.api.Of[apiauth.Operator] }},
	{"the root token", apiauth.Operator, func(*apiRig) string { return nodeauthtest.RootToken }},
}

// allowed says whether c may call a route of access a, from the rules
// (docs: "API tokens and scopes"), not from the code.
func allowed(a apiauth.Access, c caller, openReads bool) bool {
	switch a {
	case apiauth.Public:
		return true
	case apiauth.NeedRead, apiauth.ReadOrSession:
		// A browser with no token is sent to log in, on a ReadOrSession
		// route (TestAPIScopes checks it apart).
		return openReads || c.scope == apiauth.Read || c.scope == apiauth.Operator
	case apiauth.NeedDemand:
		return c.scope == apiauth.Demand || c.scope == apiauth.Operator
	case apiauth.NeedOperator:
		return c.scope == apiauth.Operator
	case apiauth.Node:
		return c.name == "the node's credential"
	case apiauth.Bootstrap:
		return c.scope == apiauth.Operator || c.name == "the bootstrap secret"
	}
	return false
}

// TestAPIScopes: every route the API serves has an access, and each caller
// gets through exactly where its credential allows: a known API token out
// of its scope gets 403, a request with none or an unknown one 401. The
// routes are the router's own, so a route added without an entry in
// routeAccess fails here.
func TestAPIScopes(t *testing.T) {
	for _, openReads := range []bool{false, true} {
		served := map[string]bool{}
		for _, route := range newAPIRig(t, openReads).h.Routes() {
			served[route.Pattern] = true
			want, ok := routeAccess[route.Pattern]
			if !ok {
				t.Errorf("route %q is served but routeAccess does not say who may call it", route.Pattern)
				continue
			}
			if route.Access != want {
				t.Errorf("route %q: access %s, want %s", route.Pattern, route.Access, want)
			}
			for _, c := range callers {
				r := newAPIRig(t, openReads)
				body := "{}"
				if route.Pattern == reports.Pattern {
					// About the node it is sent for; invalid beyond that.
					body = `{"node": "n1"}`
				}
				w := r.call(route.Pattern, c.bearer(r), body)
				if want == apiauth.ReadOrSession && !openReads && c.bearer(r) == "" {
					// A browser without a session: to the login form.
					if w.Code != http.StatusSeeOther || w.Header().Get("Location") != "/ui/login" {
						t.Errorf("%s with %s: %d to %q, want 303 to /ui/login", route.Pattern, c.name, w.Code, w.Header().Get("Location"))
					}
					continue
				}
				got := w.Code != http.StatusUnauthorized && w.Code != http.StatusForbidden
				if yes := allowed(want, c, openReads); got != yes {
					t.Errorf("open reads %v: %s with %s: %d %s (%s); want allowed %v", openReads, route.Pattern, c.name, w.Code,
						w.Header().Get(report.CodeHeader), strings.TrimSpace(w.Body.String()), yes)
					continue
				}
				// A good token out of its scope is forbidden; no token, or
				// one the controller does not hold, is unauthorized.
				if !got && c.scope != "" && w.Code != http.StatusForbidden {
					t.Errorf("%s with %s: %d, want 403", route.Pattern, c.name, w.Code)
				}
				if !got && c.scope == "" && (want == apiauth.NeedRead || want == apiauth.ReadOrSession || want == apiauth.NeedDemand || want == apiauth.NeedOperator) && w.Code != http.StatusUnauthorized {
					t.Errorf("%s with %s: %d, want 401", route.Pattern, c.name, w.Code)
				}
				// An API token the controller does not hold (a stale one)
				// is told so on every route, a node's or a bootstrap's
				// too, not taken for a bootstrap that is off.
				if !got && c.name == "a wrong token" && (w.Code != http.StatusUnauthorized || w.Header().Get(report.CodeHeader) != string(apiauth.BadToken)) {
					t.Errorf("%s with %s: %d %s %q, want 401 %s", route.Pattern, c.name, w.Code, w.Header().Get(report.CodeHeader), strings.TrimSpace(w.Body.String()), apiauth.BadToken)
				}
			}
		}
		for pattern := range routeAccess {
			if !served[pattern] {
				t.Errorf("routeAccess names %q, which the API does not serve", pattern)
			}
		}
	}
}

// TestDemandTokenCannotTakeANode: the token a scheduler holds can neither
// get a live node a new credential nor report for it; a read token gets
// 403 on every write route. (Before scopes, the one API token did both:
// POST /v1/agents/NODE/credential answered 200 with a fresh credential,
// and the node's agent was refused from then on.)
func TestDemandTokenCannotTakeANode(t *testing.T) {
	r := newAPIRig(t, true)
	good := r.creds.For(r.node)
	w := r.call("POST /v1/agents/{node}/credential", r.api.Of[apiauth.Demand], "")
	if w.Code != http.StatusForbidden || w.Header().Get(report.CodeHeader) != string(apiauth.WrongScope) {
		t.Errorf("a demand token asks for the node's credential: %d %s %q, want 403 wrong-scope", w.Code, w.Header().Get(report.CodeHeader), w.Body)
	}
	if err := r.creds.Check(r.node, good); err != nil {
		t.Errorf("the node's credential after a demand token's request: %v, want it unchanged", err)
	}
	if n := len(r.creds.List()); n != 1 {
		t.Errorf("%d credentials, want the node's 1", n)
	}
	rep := `{"node": "n1", "sent_at": "2026-11-30T00:00:00Z", "healthy": true, "gpus": [], "drain": {"state": "none"}}`
	if w := r.call("POST /v1/agents/{node}/report", r.api.Of[apiauth.Demand], rep); w.Code != http.StatusForbidden {
		t.Errorf("a demand token reports for the node: %d, want 403", w.Code)
	}
	for _, route := range r.h.Routes() {
		if strings.HasPrefix(route.Pattern, "GET ") || route.Access == apiauth.Public {
			continue // the web page's login form is anyone's (TestAPIScopes)
		}
		if w := r.call(route.Pattern, r.api.Of[apiauth.Read], "{}"); w.Code != http.StatusForbidden {
			t.Errorf("a read token: %s answered %d, want 403", route.Pattern, w.Code)
		}
	}
	if err := r.creds.Check(r.node, good); err != nil {
		t.Errorf("the node's credential after the read token's writes: %v", err)
	}
}

// TestOperatorReplacesOnlyWithReason: an operator's issue for a node that
// holds a good credential is refused unless it says to replace it and why;
// a replacement is logged with the token's name and the reason, and
// counted in fleetcast_credential_replacements_total.
func TestOperatorReplacesOnlyWithReason(t *testing.T) {
	r := newAPIRig(t, true)
	good := r.creds.For(r.node)
	op := r.api.Of[apiauth.Operator]
	for _, tt := range []struct {
		name, body string
		status     int
		code       nodeauth.Code
	}{
		{"no body", "", http.StatusConflict, nodeauth.Registered},
		{"no replace", `{}`, http.StatusConflict, nodeauth.Registered},
		{"replace without a reason", `{"replace": true}`, http.StatusBadRequest, nodeauth.Malformed},
		{"replace with a blank reason", `{"replace": true, "reason": "  "}`, http.StatusBadRequest, nodeauth.Malformed},
		{"a reason without replace", `{"reason": "why"}`, http.StatusBadRequest, nodeauth.Malformed},
		{"a reason of two lines", `{"replace": true, "reason": "a\nb"}`, http.StatusBadRequest, nodeauth.Malformed},
	} {
		w := r.call("POST /v1/agents/{node}/credential", op, tt.body)
		if w.Code != tt.status || w.Header().Get(report.CodeHeader) != string(tt.code) {
			t.Errorf("%s: %d %s %q, want %d %s", tt.name, w.Code, w.Header().Get(report.CodeHeader), w.Body, tt.status, tt.code)
		}
		if err := r.creds.Check(r.node, good); err != nil {
			t.Fatalf("%s: the node's credential: %v, want it unchanged", tt.name, err)
		}
	}
	if _, body := get(t, r.h, "/metrics"); !strings.Contains(body, "fleetcast_credential_replacements_total 0\n") {
		t.Errorf("no replacement yet, but /metrics says otherwise or lacks the counter")
	}
	w := r.call("POST /v1/agents/{node}/credential", op, `{"replace": true, "reason": "ticket 42: the agent's disk was replaced"}`)
	if w.Code != http.StatusOK {
		t.Fatalf("a replacement with a reason: %d %q", w.Code, w.Body)
	}
	if err := r.creds.Check(r.node, good); err == nil {
		t.Error("the replaced credential still checks")
	}
	log := r.log.String()
	for _, want := range []string{"node credential replaced by an operator", "node=n1", "token=operator", `reason="ticket 42: the agent's disk was replaced"`} {
		if !strings.Contains(log, want) {
			t.Errorf("the log lacks %s:\n%s", want, log)
		}
	}
	if _, body := get(t, r.h, "/metrics"); !strings.Contains(body, "fleetcast_credential_replacements_total 1\n") {
		t.Errorf("/metrics does not count the replacement")
	}
	// A revoked node's credential is no good: an operator issues one
	// without replace.
	if w := r.call("DELETE /v1/agents/{node}/credential", op, ""); w.Code != http.StatusOK {
		t.Fatalf("revocation: %d %q", w.Code, w.Body)
	}
	if w := r.call("POST /v1/agents/{node}/credential", op, ""); w.Code != http.StatusOK {
		t.Errorf("an issue for a revoked node: %d %q, want 200", w.Code, w.Body)
	}
	// A replace for a node without a good credential replaces nothing:
	// neither warned of nor counted.
	r.node = "n9"
	if w := r.call("POST /v1/agents/{node}/credential", op, `{"replace": true, "reason": "first"}`); w.Code != http.StatusOK {
		t.Errorf("a replace for a new node: %d %q, want 200", w.Code, w.Body)
	}
	if n := strings.Count(r.log.String(), "node credential replaced by an operator"); n != 1 {
		t.Errorf("%d replacements logged, want 1:\n%s", n, r.log)
	}
	if _, body := get(t, r.h, "/metrics"); !strings.Contains(body, "fleetcast_credential_replacements_total 1\n") {
		t.Errorf("/metrics counts a replace that replaced nothing")
	}
}

// TestRootTokenPushWarns: a scheduler that still pushes demand with the
// root token is warned of once per source; one with a demand token is not.
func TestRootTokenPushWarns(t *testing.T) {
	r := newAPIRig(t, true)
	push := func(token, source string) {
		t.Helper()
		if w := r.call(DemandPattern, token, `{"source": "`+source+`", "pending": [{"gpus": 8}]}`); w.Code != http.StatusNoContent {
			t.Fatalf("push: %d %q", w.Code, w.Body)
		}
	}
	push(r.api.Of[apiauth.Demand], "slurm")
	push(nodeauthtest.RootToken, "legacy")
	push(nodeauthtest.RootToken, "legacy")
	push(r.api.Of[apiauth.Operator], "ops")
	log := r.log.String()
	if n := strings.Count(log, "demand pushed with the root token"); n != 1 || !strings.Contains(log, "source=legacy") {
		t.Errorf("%d warnings, want 1 for source legacy:\n%s", n, log)
	}
}

// TestReportOnlyAboutOwnNode: a node's credential, on its own route, with
// a report about another node is refused (403), and the other node's
// view is unchanged: an agent reports only about its own node (docs/design.md rule 11).
func TestReportOnlyAboutOwnNode(t *testing.T) {
	r := newAPIRig(t, true)
	at := r.l.now.Format(time.RFC3339)
	for _, tt := range []struct {
		about string
		want  int
	}{{"n2", http.StatusForbidden}, {"n1", http.StatusOK}} {
		body := `{"node": "` + tt.about + `", "sent_at": "` + at + `", "healthy": true, "gpus": [{"index": 0, "uuid": "GPU-0", "memory_total": 1}], "drain": {"state": "none"}}`
		if w := r.call(reports.Pattern, r.creds.For("n1"), body); w.Code != tt.want {
			t.Errorf("n1's credential, a report about %s: %d %s, want %d", tt.about, w.Code, w.Body, tt.want)
		}
	}
	other := fleet.Node{ID: "n2"}
	if r.l.agents.Observe(&other); !other.LastReport.IsZero() {
		t.Errorf("n2's view took n1's report about it: last report %v", other.LastReport)
	}
	own := fleet.Node{ID: "n1"}
	if r.l.agents.Observe(&own); own.LastReport.IsZero() {
		t.Error("n1's own report was not taken")
	}
}
