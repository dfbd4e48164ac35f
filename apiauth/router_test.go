package apiauth_test

import (
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/fleetcast/autoscaler/agent/report"
	"github.com/fleetcast/autoscaler/apiauth"
)

// TestReadOrSession: a ReadOrSession route judges a request with an
// Authorization header as a NeedRead route does, and hands one without it
// to its handler (which checks a session of its own) instead of refusing
// it; with OpenReads it serves everyone, as NeedRead does.
func TestReadOrSession(t *testing.T) {
	c := &clock{time.Date(2026, 12, 6, 9, 0, 0, 0, time.UTC)}
	tokens, st := open(t, t.TempDir(), c)
	defer st.Close()
	read, _, err := tokens.Create("grafana", apiauth.Read, "root")
	if err != nil {
		t.Fatal(err)
	}
	demand, _, err := tokens.Create("slurm", apiauth.Demand, "root")
	if err != nil {
		t.Fatal(err)
	}
	const handled = http.StatusTeapot // what the handler answers
	for _, tt := range []struct {
		name      string
		auth      string // the Authorization header; "" for none
		openReads bool
		status    int
		code      apiauth.Code
		caller    string // the token the handler sees; "" for none
	}{
		{"no header: the handler decides", "", false, handled, "", ""},
		{"a read token", "Bearer " + read, false, handled, "", "grafana"},
		{"the root token", "Bearer " + root, false, handled, "", "root"},
		{"a demand token", "Bearer " + demand, false, http.StatusForbidden, apiauth.WrongScope, ""},
		{"an unknown token", "Bearer fca1.nope", false, http.StatusUnauthorized, apiauth.BadToken, ""},
		{"not a bearer", "Basic dXNlcjpwYXNz", false, http.StatusUnauthorized, apiauth.NoToken, ""},
		{"open reads, no header", "", true, handled, "", ""},
		{"open reads, an unknown token", "Bearer fca1.nope", true, handled, "", ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			rt := &apiauth.Router{Tokens: tokens, OpenReads: tt.openReads}
			var caller string
			rt.HandleFunc("GET /ui", apiauth.ReadOrSession, func(w http.ResponseWriter, r *http.Request) {
				tok, _ := apiauth.Caller(r.Context())
				caller = tok.Name
				w.WriteHeader(handled)
			})
			req := httptest.NewRequest(http.MethodGet, "/ui", nil)
			if tt.auth != "" {
				req.Header.Set("Authorization", tt.auth)
			}
			w := httptest.NewRecorder()
			rt.ServeHTTP(w, req)
			if w.Code != tt.status || apiauth.Code(w.Header().Get(report.CodeHeader)) != tt.code || caller != tt.caller {
				t.Errorf("%d %q, caller %q; want %d %q, caller %q (%s)", w.Code, w.Header().Get(report.CodeHeader), caller, tt.status, tt.code, tt.caller, w.Body)
			}
			if got := rt.Routes(); len(got) != 1 || got[0].Access != apiauth.ReadOrSession {
				t.Errorf("routes %+v", got)
			}
		})
	}
}
