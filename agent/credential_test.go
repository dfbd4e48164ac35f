package agent

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fleetcast/autoscaler/agent/report"
	"github.com/fleetcast/autoscaler/apiauth"
	"github.com/fleetcast/autoscaler/controller/reports"
	"github.com/fleetcast/autoscaler/nodeauth"
	"github.com/fleetcast/autoscaler/state"
)

// TestCredential: a missing credential is bootstrapped (with the secret
// and the identity) and kept mode 0600; files others may read are
// refused; a 401 bootstraps again, a 403 does not; rotation rewrites the
// file.
func TestCredential(t *testing.T) {
	dir := t.TempDir()
	const secret = "0123456789abcdef0123456789abcdef"
	var issued atomic.Int32
	var nextHash atomic.Value
	var loseAnswer atomic.Bool
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		bearer := strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")
		switch r.URL.Path {
		case "/v1/agents/i-1/credential":
			var req report.CredentialRequest
			if bearer != secret || json.NewDecoder(r.Body).Decode(&req) != nil || req.AWS == nil || req.AWS.Document != "doc" || len(req.Nonce) < 32 {
				w.Header().Set(report.CodeHeader, "bad-secret")
				http.Error(w, "no", http.StatusUnauthorized)
				return
			}
		case "/v1/agents/i-1/credential/rotate":
			var req report.RotateRequest
			if !strings.HasPrefix(bearer, "cred-") && !strings.HasPrefix(bearer, "fcn1.") || json.NewDecoder(r.Body).Decode(&req) != nil {
				http.Error(w, "no", http.StatusUnauthorized)
				return
			}
			nextHash.Store(req.Next)
			if loseAnswer.Load() {
				panic(http.ErrAbortHandler) // committed; the answer is lost
			}
			json.NewEncoder(w).Encode(report.CredentialAnswer{Node: "i-1"})
			return
		default:
			http.NotFound(w, r)
			return
		}
		n := issued.Add(1)
		json.NewEncoder(w).Encode(report.CredentialAnswer{Node: "i-1", Credential: "cred-" + string(rune('0'+n))})
	}))
	defer srv.Close()
	boot := filepath.Join(dir, "bootstrap")
	os.WriteFile(boot, []byte(secret+"\n"), 0o600)
	file := filepath.Join(dir, "credential")
	c := &Credential{File: file, BootstrapFile: boot, Controller: srv.URL, Node: "i-1",
		Identity: func(context.Context) (*report.CredentialRequest, error) {
			return &report.CredentialRequest{AWS: &report.AWSIdentity{Document: "doc", Signature: "sig"}}, nil
		}}
	ctx := context.Background()
	tok, err := c.Token(ctx)
	if err != nil || tok != "cred-1" {
		t.Fatalf("bootstrap: %q, %v", tok, err)
	}
	if fi, err := os.Stat(file); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("credential file: %v, %v", fi, err)
	}
	if err := c.Refused(ctx, &RefusedError{Status: 401, Code: "revoked"}); err != nil {
		t.Fatal(err)
	}
	if tok, _ := c.Token(ctx); tok != "cred-2" {
		t.Fatalf("after a 401: %q, want a new credential", tok)
	}
	if err := c.Refused(ctx, &RefusedError{Status: 403, Code: "wrong-node", Reason: "not yours"}); err == nil || issued.Load() != 2 {
		t.Fatalf("a 403 bootstrapped again: %v", err)
	}
	if err := c.Rotate(ctx); err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(file)
	rotated := strings.TrimSpace(string(b))
	if report.Hash(rotated) != nextHash.Load() || !strings.HasPrefix(rotated, "fcn1.") {
		t.Fatalf("after rotation the file holds %q, whose hash is not the one sent", rotated)
	}
	if tok, _ := c.Token(ctx); tok != rotated {
		t.Fatalf("after rotation the agent uses %q", tok)
	}
	// A rotation whose answer is lost: the controller took the new one, the
	// agent kept it aside, and takes it up at the next refusal rather than
	// bootstrapping.
	loseAnswer.Store(true)
	if err := c.Rotate(ctx); err == nil {
		t.Fatal("a lost answer: want an error")
	}
	loseAnswer.Store(false)
	if err := c.Refused(ctx, &RefusedError{Status: 401, Code: "superseded"}); err != nil {
		t.Fatal(err)
	}
	tok, _ = c.Token(ctx)
	if report.Hash(tok) != nextHash.Load() || issued.Load() != 2 {
		t.Fatalf("after a lost rotation answer the agent uses %q (bootstraps %d), not the credential it made", tok, issued.Load())
	}
	// A credential an operator put in the file is taken up at a refusal.
	os.WriteFile(file, []byte("fcn1.from-the-operator\n"), 0o600)
	if err := c.Refused(ctx, &RefusedError{Status: 401, Code: "superseded"}); err != nil {
		t.Fatal(err)
	}
	if tok, _ := c.Token(ctx); tok != "fcn1.from-the-operator" || issued.Load() != 2 {
		t.Fatalf("the operator's credential was not taken up: %q", tok)
	}
	// A fresh agent reads the file.
	c2 := &Credential{File: file, Node: "i-1"}
	if tok, err := c2.Token(ctx); err != nil || tok != "fcn1.from-the-operator" {
		t.Fatalf("reading the file: %q, %v", tok, err)
	}
	// Files others may read are refused.
	os.Chmod(file, 0o644)
	if _, err := (&Credential{File: file, Node: "i-1"}).Token(ctx); err == nil || !strings.Contains(err.Error(), "chmod 600") {
		t.Fatalf("a credential others may read: %v", err)
	}
	os.Chmod(boot, 0o640)
	if err := c.Bootstrap(ctx); err == nil || !strings.Contains(err.Error(), "chmod 600") {
		t.Fatalf("a bootstrap secret others may read: %v", err)
	}
	// No file and no bootstrap: say how to get one.
	_, err = (&Credential{File: filepath.Join(dir, "none"), Node: "i-1"}).Token(ctx)
	if err == nil || !strings.Contains(err.Error(), "autoscaler token issue i-1") {
		t.Fatalf("no credential and no bootstrap: %v", err)
	}
	// A wrong secret: the refusal, typed.
	os.WriteFile(boot, []byte("wrong-secret-wrong-secret-wrong!!"), 0o600)
	os.Chmod(boot, 0o600)
	var refused *RefusedError
	if err := c.Bootstrap(ctx); !errors.As(err, &refused) || refused.Code != "bad-secret" {
		t.Fatalf("a wrong secret: %v", err)
	}
}

// TestNotifyStatusIsOneLine: the controller's words in a STATUS= line can
// add no assignment (READY=1) for the service manager.
func TestNotifyStatusIsOneLine(t *testing.T) {
	var got string
	r := &Reporter{Notify: func(s string) { got = s }}
	r.notify("STATUS=not reporting: refused\nREADY=1\n" + strings.Repeat("x", 500))
	if strings.Contains(got, "\n") || len(got) > 220 || !strings.HasPrefix(got, "STATUS=not reporting: refused READY=1 x") {
		t.Fatalf("%q", got)
	}
	r.notify("READY=1\nSTATUS=reporting")
	if got != "READY=1\nSTATUS=reporting" {
		t.Fatalf("%q", got)
	}
}

// TestRotationLostAnswer runs the agent's credential against the real
// credential routes, through a proxy that loses the rotation's answer
// after the controller took it: the agent's next rotation offers the same
// new credential again (and the controller takes it as the same
// rotation), and reports go on past the old one's grace. A credential an
// operator put in the file wins over a rotation's kept one.
func TestRotationLostAnswer(t *testing.T) {
	dir := t.TempDir()
	var mu sync.Mutex
	now := time.Now()
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	st, err := state.Open(filepath.Join(dir, "state"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	reg, err := nodeauth.NewRegistry(st, clock, nil)
	if err != nil {
		t.Fatal(err)
	}
	mux := &apiauth.Router{}
	(&nodeauth.Server{Registry: reg}).Routes(mux)
	mux.Handle(reports.Pattern, apiauth.Node, &reports.Receiver{Credentials: reg, Store: &controller{}, Now: clock})
	var lose atomic.Bool
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rec := httptest.NewRecorder()
		mux.ServeHTTP(rec, r)
		if lose.Load() && strings.HasSuffix(r.URL.Path, "/rotate") {
			panic(http.ErrAbortHandler) // done at the controller; the answer is lost
		}
		for k, v := range rec.Header() {
			w.Header()[k] = v
		}
		w.WriteHeader(rec.Code)
		w.Write(rec.Body.Bytes())
	}))
	defer srv.Close()
	first, _, err := reg.Issue("i-1", "", nodeauth.ViaOperator, "")
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(dir, "credential")
	os.WriteFile(file, []byte(first+"\n"), 0o600)
	c := &Credential{File: file, Controller: srv.URL, Node: "i-1"}
	a, err := New(Config{Node: "i-1", MarkerFile: filepath.Join(dir, "draining"), Now: clock})
	if err != nil {
		t.Fatal(err)
	}
	rep := &Reporter{Agent: a, Controller: srv.URL, Credential: c}
	ctx := context.Background()
	send := func(what string) {
		t.Helper()
		err := rep.Send(ctx)
		var refused *RefusedError
		if errors.As(err, &refused) {
			if err = c.Refused(ctx, refused); err == nil {
				err = rep.Send(ctx)
			}
		}
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	}
	send("the first report")
	lose.Store(true)
	if err := c.Rotate(ctx); err == nil {
		t.Fatal("a lost answer: want an error")
	}
	lose.Store(false)
	send("a report with the old credential, in its grace")
	// The reporter rotates again: the same new credential is offered.
	if err := c.Rotate(ctx); err != nil {
		t.Fatalf("the rotation again: %v", err)
	}
	mu.Lock()
	now = now.Add(nodeauth.DefaultGrace + time.Minute)
	mu.Unlock()
	send("a report past the old credential's grace")
	if err := reg.Check("i-1", first); err == nil {
		t.Fatal("the old credential is still good")
	}
	// A rotation whose answer is lost leaves a kept credential; an
	// operator's, put in the file, is taken up first and the kept one
	// dropped.
	lose.Store(true)
	c.Rotate(ctx)
	lose.Store(false)
	op, _, _, err := reg.Replace("i-1")
	if err != nil {
		t.Fatal(err)
	}
	os.WriteFile(file, []byte(op+"\n"), 0o600)
	send("a report after the operator's issue")
	if tok, _ := c.Token(ctx); tok != op {
		t.Fatalf("the agent uses %q, not the operator's credential", tok)
	}
	if _, err := os.Stat(file + ".next"); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the kept credential outlived the operator's: %v", err)
	}
}
