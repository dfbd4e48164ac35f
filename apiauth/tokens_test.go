package apiauth_test

import (
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/fleetcast/autoscaler/agent/report"
	"github.com/fleetcast/autoscaler/apiauth"
	"github.com/fleetcast/autoscaler/state"
)

const root = "root-token-0123456789"

type clock struct{ t time.Time }

func (c *clock) now() time.Time { return c.t }

// open returns the tokens kept in dir, with the root token set.
func open(t *testing.T, dir string, c *clock) (*apiauth.Tokens, *state.Store) {
	t.Helper()
	st, err := state.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	tokens, err := apiauth.NewTokens(st, c.now, nil)
	if err != nil {
		st.Close()
		t.Fatal(err)
	}
	if err := tokens.SetRoot(root, "FLEETCAST_API_TOKEN"); err != nil {
		t.Fatal(err)
	}
	return tokens, st
}

func code(err error) apiauth.Code {
	var e *apiauth.Error
	if errors.As(err, &e) {
		return e.Code
	}
	return ""
}

// TestTokensLifecycle: tokens are created with a scope, checked, rotated
// (the old secret good for the grace only), revoked, and kept across a
// restart as hashes only; the root token is set at start and not managed
// through them.
func TestTokensLifecycle(t *testing.T) {
	dir := t.TempDir()
	c := &clock{time.Date(2026, 12, 6, 9, 0, 0, 0, time.UTC)}
	tokens, st := open(t, dir, c)
	if tok, ok := tokens.Check(root); !ok || tok != (apiauth.Token{Name: "root", Scope: apiauth.Operator}) {
		t.Fatalf("the root token: %+v %v", tok, ok)
	}
	sched, rec, err := tokens.Create("slurm-prod", apiauth.Demand, "root")
	if err != nil || !strings.HasPrefix(sched, "fca1.") || rec.Hash != report.Hash(sched) || rec.By != "root" {
		t.Fatalf("create: %q %+v %v", sched, rec, err)
	}
	if tok, ok := tokens.Check(sched); !ok || tok.Scope != apiauth.Demand || tok.Name != "slurm-prod" {
		t.Fatalf("the new token: %+v %v", tok, ok)
	}
	for _, tt := range []struct {
		name  string
		scope apiauth.Scope
		want  apiauth.Code
	}{
		{"slurm-prod", apiauth.Read, apiauth.Exists},
		{"root", apiauth.Read, apiauth.Root},
		{"", apiauth.Read, apiauth.Malformed},
		{"has space", apiauth.Read, apiauth.Malformed},
		{strings.Repeat("x", 65), apiauth.Read, apiauth.Malformed},
		{"grafana", "admin", apiauth.Malformed},
	} {
		if _, _, err := tokens.Create(tt.name, tt.scope, "root"); code(err) != tt.want {
			t.Errorf("create %q %q: %v, want %s", tt.name, tt.scope, err, tt.want)
		}
	}
	for _, bad := range []string{"", sched + "x", "fca1.", root[:len(root)-1]} {
		if tok, ok := tokens.Check(bad); ok {
			t.Errorf("Check(%q) = %+v, want refused", bad, tok)
		}
	}
	// Rotation with a grace: both good until it ends, then the new only.
	next, rec, err := tokens.Rotate("slurm-prod", time.Hour, "ops")
	if err != nil || next == sched || rec.Rotations != 1 || !rec.PreviousUntil.Equal(c.t.Add(time.Hour)) {
		t.Fatalf("rotate: %+v %v", rec, err)
	}
	if _, ok := tokens.Check(sched); !ok {
		t.Error("the old secret within its grace is refused")
	}
	c.t = c.t.Add(time.Hour)
	if _, ok := tokens.Check(sched); ok {
		t.Error("the old secret after its grace is good")
	}
	if tok, ok := tokens.Check(next); !ok || tok.Scope != apiauth.Demand {
		t.Errorf("the new secret: %+v %v", tok, ok)
	}
	// Rotation without a grace: the old one is refused at once.
	third, _, err := tokens.Rotate("slurm-prod", 0, "ops")
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := tokens.Check(next); ok {
		t.Error("a secret rotated out with no grace is good")
	}
	for _, tt := range []struct {
		name  string
		grace time.Duration
		want  apiauth.Code
	}{
		{"root", 0, apiauth.Root},
		{"nobody", 0, apiauth.Unknown},
		{"slurm-prod", -time.Second, apiauth.Malformed},
		{"slurm-prod", apiauth.MaxGrace + time.Second, apiauth.Malformed},
	} {
		if _, _, err := tokens.Rotate(tt.name, tt.grace, "ops"); code(err) != tt.want {
			t.Errorf("rotate %q %s: %v, want %s", tt.name, tt.grace, err, tt.want)
		}
	}
	grafana, _, err := tokens.Create("grafana", apiauth.Read, "root")
	if err != nil {
		t.Fatal(err)
	}
	// The state keeps hashes only, and a restart reads them back.
	st.Close()
	raw, err := os.ReadFile(filepath.Join(dir, state.FileName))
	if err != nil {
		t.Fatal(err)
	}
	for _, secret := range []string{sched, next, third, grafana, root} {
		if strings.Contains(string(raw), secret) {
			t.Errorf("the state file holds a secret")
		}
	}
	tokens, st = open(t, dir, c)
	defer st.Close()
	if tok, ok := tokens.Check(third); !ok || tok.Name != "slurm-prod" {
		t.Errorf("after a restart, the token: %+v %v", tok, ok)
	}
	list := tokens.List()
	if len(list) != 3 || list[0].Name != "root" || list[0].Source != "FLEETCAST_API_TOKEN" || list[1].Name != "grafana" || list[2].Name != "slurm-prod" || list[2].Rotations != 2 || list[2].By != "ops" {
		t.Errorf("list: %+v", list)
	}
	if _, err := tokens.Revoke("root", "ops"); code(err) != apiauth.Root {
		t.Errorf("revoking the root token: %v", err)
	}
	if _, err := tokens.Revoke("nobody", "ops"); code(err) != apiauth.Unknown {
		t.Errorf("revoking no token: %v", err)
	}
	if _, err := tokens.Revoke("slurm-prod", "ops"); err != nil {
		t.Fatal(err)
	}
	if _, ok := tokens.Check(third); ok {
		t.Error("a revoked token is good")
	}
	st.Close()
	tokens, st = open(t, dir, c)
	defer st.Close()
	if _, ok := tokens.Check(third); ok {
		t.Error("a revoked token is good after a restart")
	}
	if err := tokens.SetRoot("short", "FLEETCAST_API_TOKEN"); err == nil || !strings.Contains(err.Error(), "FLEETCAST_API_TOKEN has 5 characters; want at least 16") {
		t.Errorf("a short root token: %v", err)
	}
}

// TestTokenRoutes: an operator creates, lists, rotates and revokes tokens
// over HTTP; the list shows no secret, and every refusal has its code.
func TestTokenRoutes(t *testing.T) {
	c := &clock{time.Date(2026, 12, 6, 9, 0, 0, 0, time.UTC)}
	tokens, st := open(t, t.TempDir(), c)
	defer st.Close()
	rt := &apiauth.Router{Tokens: tokens}
	tokens.Routes(rt)
	do := func(method, path, bearer, body string) *httptest.ResponseRecorder {
		req := httptest.NewRequest(method, path, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Authorization", "Bearer "+bearer)
		w := httptest.NewRecorder()
		rt.ServeHTTP(w, req)
		return w
	}
	w := do("POST", "/v1/api-tokens", root, `{"name": "slurm-prod", "scope": "demand"}`)
	var a apiauth.Answer
	if w.Code != 200 || json.Unmarshal(w.Body.Bytes(), &a) != nil || a.Token == "" || a.Scope != apiauth.Demand || w.Header().Get("Cache-Control") != "no-store" {
		t.Fatalf("create: %d %s", w.Code, w.Body)
	}
	for _, tt := range []struct {
		method, path, bearer, body string
		status                     int
		code                       apiauth.Code
	}{
		{"POST", "/v1/api-tokens", a.Token, `{"name": "mine", "scope": "operator"}`, 403, apiauth.WrongScope},
		{"GET", "/v1/api-tokens", a.Token, ``, 403, apiauth.WrongScope},
		{"POST", "/v1/api-tokens", "", `{"name": "mine", "scope": "operator"}`, 401, apiauth.NoToken},
		{"POST", "/v1/api-tokens", root, `{"name": "slurm-prod", "scope": "read"}`, 409, apiauth.Exists},
		{"POST", "/v1/api-tokens", root, `{"name": "x", "scope": "admin"}`, 400, apiauth.Malformed},
		{"POST", "/v1/api-tokens", root, `{"name": "x", "scope": "read", "extra": 1}`, 400, apiauth.Malformed},
		{"POST", "/v1/api-tokens/slurm-prod/rotate", root, `{"grace": "forever"}`, 400, apiauth.Malformed},
		{"POST", "/v1/api-tokens/nobody/rotate", root, ``, 404, apiauth.Unknown},
		{"DELETE", "/v1/api-tokens/root", root, ``, 409, apiauth.Root},
	} {
		w := do(tt.method, tt.path, tt.bearer, tt.body)
		if w.Code != tt.status || w.Header().Get(report.CodeHeader) != string(tt.code) {
			t.Errorf("%s %s %s: %d %s %q, want %d %s", tt.method, tt.path, tt.body, w.Code, w.Header().Get(report.CodeHeader), w.Body, tt.status, tt.code)
		}
	}
	w = do("POST", "/v1/api-tokens/slurm-prod/rotate", root, `{"grace": "1h"}`)
	var b apiauth.Answer
	if w.Code != 200 || json.Unmarshal(w.Body.Bytes(), &b) != nil || b.Token == a.Token || !b.PreviousUntil.Equal(c.t.Add(time.Hour)) {
		t.Fatalf("rotate: %d %s", w.Code, w.Body)
	}
	w = do("GET", "/v1/api-tokens", b.Token, "")
	if w.Code != 403 {
		t.Errorf("a demand token lists: %d", w.Code)
	}
	w = do("GET", "/v1/api-tokens", root, "")
	if w.Code != 200 || strings.Contains(w.Body.String(), a.Token) || strings.Contains(w.Body.String(), b.Token) || strings.Contains(w.Body.String(), "hash") ||
		!strings.Contains(w.Body.String(), `"name": "slurm-prod"`) || !strings.Contains(w.Body.String(), `"previous_until"`) {
		t.Errorf("list: %d %s", w.Code, w.Body)
	}
	if w := do("DELETE", "/v1/api-tokens/slurm-prod", root, ""); w.Code != 200 {
		t.Fatalf("revoke: %d %s", w.Code, w.Body)
	}
	if w := do("GET", "/v1/api-tokens", b.Token, ""); w.Code != http.StatusUnauthorized || w.Header().Get(report.CodeHeader) != string(apiauth.BadToken) {
		t.Errorf("a revoked token: %d %s", w.Code, w.Header().Get(report.CodeHeader))
	}
}

// TestOpenReadsCountUse: a read served without a token need (OpenReads)
// still counts the token it came with as used, so `api-token list` does
// not show a monitoring token in use as idle.
func TestOpenReadsCountUse(t *testing.T) {
	c := &clock{time.Date(2026, 12, 6, 9, 0, 0, 0, time.UTC)}
	tokens, st := open(t, t.TempDir(), c)
	defer st.Close()
	grafana, _, err := tokens.Create("grafana", apiauth.Read, "root")
	if err != nil {
		t.Fatal(err)
	}
	rt := &apiauth.Router{Tokens: tokens, OpenReads: true}
	rt.HandleFunc("GET /v1/plan", apiauth.NeedRead, func(w http.ResponseWriter, r *http.Request) {})
	req := httptest.NewRequest("GET", "/v1/plan", nil)
	req.Header.Set("Authorization", "Bearer "+grafana)
	w := httptest.NewRecorder()
	rt.ServeHTTP(w, req)
	if w.Code != http.StatusOK {
		t.Fatalf("an open read: %d", w.Code)
	}
	list := tokens.List()
	if len(list) != 2 || list[1].Name != "grafana" || !list[1].LastUsed.Equal(c.t) || !list[0].LastUsed.IsZero() {
		t.Errorf("list: %+v", list)
	}
}
