package nodeauth

import (
	"bytes"
	"context"
	"crypto/x509"
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
	"github.com/fleetcast/autoscaler/fleet"
	"github.com/fleetcast/autoscaler/internal/identitytest"
	"github.com/fleetcast/autoscaler/providers"
	"github.com/fleetcast/autoscaler/providers/gcp"
	"github.com/fleetcast/autoscaler/state"
	"google.golang.org/api/idtoken"
	"google.golang.org/api/option"
)

type clock struct{ t time.Time }

func (c *clock) now() time.Time { return c.t }

func openStore(t testing.TB, dir string) *state.Store {
	t.Helper()
	s, err := state.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func code(err error) Code {
	var e *Error
	if errors.As(err, &e) {
		return e.Code
	}
	return ""
}

const (
	nonceA = "nonce-of-a-0123456789abcdef0123456789"
	nonceB = "nonce-of-b-0123456789abcdef0123456789"
)

// rotate rotates node's credential cur to a new one, as an agent does.
func rotate(t *testing.T, r *Registry, node, cur string) string {
	t.Helper()
	next := report.NewCredential(node)
	if _, err := r.Rotate(node, cur, report.Hash(next)); err != nil {
		t.Fatal(err)
	}
	return next
}

func TestRegistryLifecycle(t *testing.T) {
	dir := t.TempDir()
	clk := &clock{time.Date(2026, 12, 2, 9, 0, 0, 0, time.UTC)}
	st := openStore(t, dir)
	r, err := NewRegistry(st, clk.now, nil)
	if err != nil {
		t.Fatal(err)
	}
	a, _, err := r.Issue("i-a", "pool-1", ViaBootstrap, report.Hash(nonceA))
	if err != nil {
		t.Fatal(err)
	}
	b, _, err := r.Issue("i-b", "pool-1", ViaBootstrap, report.Hash(nonceB))
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Check("i-a", a); err != nil {
		t.Fatalf("a's own credential: %v", err)
	}
	for _, tt := range []struct {
		name, node, token string
		want              Code
		status            int
	}{
		{"another node's credential", "i-b", a, WrongNode, 403},
		{"garbage", "i-a", "hello", Malformed, 401},
		{"a forged credential naming a", "i-a", report.NewCredential("i-a"), Superseded, 401},
		{"never issued", "i-c", report.NewCredential("i-c"), Unknown, 401},
	} {
		err := r.Check(tt.node, tt.token)
		var e *Error
		if !errors.As(err, &e) || e.Code != tt.want || e.Status != tt.status {
			t.Errorf("%s: %v, want %s (%d)", tt.name, err, tt.want, tt.status)
		}
	}
	// The bootstrap secret cannot get a registered node another one; an
	// operator can.
	if _, _, err := r.Issue("i-a", "pool-1", ViaBootstrap, report.Hash(nonceA)); code(err) != Registered {
		t.Fatalf("a second bootstrap of a registered node: %v, want %s", err, Registered)
	}

	// Rotation: the old credential is good until the new one is used.
	a2 := rotate(t, r, "i-a", a)
	if err := r.Check("i-a", a); err != nil {
		t.Fatalf("the old credential within the grace, before the new one was used: %v", err)
	}
	if err := r.Check("i-a", a2); err != nil {
		t.Fatal(err)
	}
	if err := r.Check("i-a", a); code(err) != Superseded {
		t.Fatalf("the rotated-out credential after the new one was used: %v, want %s", err, Superseded)
	}
	// ... or until the grace ends.
	b2 := rotate(t, r, "i-b", b)
	clk.t = clk.t.Add(DefaultGrace + time.Second)
	if err := r.Check("i-b", b); code(err) != Superseded {
		t.Fatalf("the rotated-out credential after the grace: %v, want %s", err, Superseded)
	}

	// Revocation: refused at once, and the node may bootstrap again.
	if _, err := r.Revoke("i-b", false); err != nil {
		t.Fatal(err)
	}
	if err := r.Check("i-b", b2); code(err) != Revoked {
		t.Fatalf("a revoked credential: %v, want %s", err, Revoked)
	}
	// Only the agent that registered the node (its nonce) bootstraps it
	// again: a copy of the identity document and the secret is not enough.
	if _, _, err := r.Issue("i-b", "pool-1", ViaBootstrap, report.Hash("someone-else-0123456789abcdef0123")); code(err) != Registered {
		t.Fatalf("a bootstrap of a revoked node with another nonce: %v, want %s", err, Registered)
	}
	b3, _, err := r.Issue("i-b", "pool-1", ViaBootstrap, report.Hash(nonceB))
	if err != nil {
		t.Fatalf("bootstrap after a revocation: %v", err)
	}
	// An operator's credential binds no nonce: once revoked, the node
	// bootstraps only after an operator's forget.
	if _, _, err := r.Issue("i-c", "", ViaOperator, ""); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Revoke("i-c", false); err != nil {
		t.Fatal(err)
	}
	if _, _, err := r.Issue("i-c", "pool-1", ViaBootstrap, report.Hash(nonceA)); code(err) != Registered {
		t.Fatalf("a bootstrap of a revoked node with no nonce bound: %v, want %s", err, Registered)
	}
	// Only the current credential rotates: one in grace cannot evict it.
	a3 := rotate(t, r, "i-a", a2)
	if _, err := r.Rotate("i-a", a2, report.Hash(report.NewCredential("i-a"))); code(err) != Superseded {
		t.Fatalf("rotating with the credential in grace: %v, want %s", err, Superseded)
	}
	if err := r.Check("i-a", a3); err != nil {
		t.Fatal(err)
	}
	a2 = a3

	// A restarted controller knows them all; the state holds no credential.
	st.Close()
	raw, err := os.ReadFile(filepath.Join(dir, state.FileName))
	if err != nil {
		t.Fatal(err)
	}
	for _, tok := range []string{a2, b3} {
		if bytes.Contains(raw, []byte(tok)) || bytes.Contains(raw, []byte(strings.Split(tok, ".")[2])) {
			t.Fatal("the state file holds a credential")
		}
	}
	r2, err := NewRegistry(openStore(t, dir), clk.now, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := r2.Check("i-a", a2); err != nil {
		t.Fatalf("after a restart: %v", err)
	}
	if err := r2.Check("i-b", b3); err != nil {
		t.Fatalf("after a restart: %v", err)
	}
	if err := r2.Check("i-b", b2); code(err) != Superseded {
		t.Fatalf("after a restart, the revoked line's credential: %v", err)
	}
	// A lost state directory: nothing is known, so every node bootstraps
	// again.
	r3, err := NewRegistry(openStore(t, t.TempDir()), clk.now, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := r3.Check("i-a", a2); code(err) != Unknown {
		t.Fatalf("with a lost state: %v, want %s", err, Unknown)
	}
	for _, c := range r2.List() {
		if c.Hash != "" || c.Previous != "" {
			t.Fatalf("List shows a hash: %+v", c)
		}
	}
}

// fixture is a credential server with a signer, a bootstrap secret and
// two live instances.
type fixture struct {
	srv    *Server
	tokens *apiauth.Tokens
	h      http.Handler
	signer *identitytest.Signer
	secret string
}

const apiToken = "operator-token-0123456789"

func newFixture(t testing.TB) *fixture {
	t.Helper()
	dir := t.TempDir()
	st := openStore(t, dir)
	reg, err := NewRegistry(st, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	secret := strings.Repeat("b", 64)
	file := filepath.Join(dir, "bootstrap")
	if err := os.WriteFile(file, []byte(secret+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	f := &fixture{signer: identitytest.New(t), secret: secret}
	live := map[string]fleet.Pool{"i-a": {Name: "gpu", Region: "us-east-1"}, "i-b": {Name: "gpu", Region: "us-east-1"}}
	f.srv = &Server{Registry: reg, BootstrapFile: file, AWSRoots: []*x509.Certificate{f.signer.Cert},
		Live: func(node string) (fleet.Pool, string, bool) { p, ok := live[node]; return p, "us-east-1a", ok }}
	tokens, err := apiauth.NewTokens(st, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := tokens.SetRoot(apiToken, "FLEETCAST_API_TOKEN"); err != nil {
		t.Fatal(err)
	}
	rt := &apiauth.Router{Tokens: tokens}
	f.srv.Routes(rt)
	f.h, f.tokens = rt, tokens
	return f
}

func (f *fixture) identity(t testing.TB, instance, region string) *report.AWSIdentity {
	doc, _ := json.MarshalIndent(map[string]any{"instanceId": instance, "region": region, "accountId": "0123456789", "pendingTime": "2026-12-02T08:00:00Z"}, "", "  ")
	return &report.AWSIdentity{Document: string(doc), Signature: f.signer.Sign(t, doc)}
}

// req is a bootstrap request with the identity and nonce nonceA.
func req(id *report.AWSIdentity) report.CredentialRequest {
	return report.CredentialRequest{Nonce: nonceA, AWS: id}
}

func (f *fixture) do(t *testing.T, method, path, bearer string, body any) *httptest.ResponseRecorder {
	t.Helper()
	var b []byte
	if body != nil {
		var err error
		if b, err = json.Marshal(body); err != nil {
			t.Fatal(err)
		}
	}
	req := httptest.NewRequest(method, path, bytes.NewReader(b))
	req.Header.Set("Content-Type", "application/json")
	if bearer != "" {
		req.Header.Set("Authorization", "Bearer "+bearer)
	}
	rec := httptest.NewRecorder()
	f.h.ServeHTTP(rec, req)
	return rec
}

func credential(t *testing.T, rec *httptest.ResponseRecorder) string {
	t.Helper()
	var a report.CredentialAnswer
	if rec.Code != 200 || json.Unmarshal(rec.Body.Bytes(), &a) != nil || a.Credential == "" {
		t.Fatalf("status %d: %s", rec.Code, rec.Body)
	}
	return a.Credential
}

func TestBootstrap(t *testing.T) {
	f := newFixture(t)
	other := identitytest.New(t)
	forged := f.identity(t, "i-a", "us-east-1")
	forged.Signature = other.Sign(t, []byte(forged.Document))
	tampered := f.identity(t, "i-a", "us-east-1")
	tampered.Document = strings.Replace(tampered.Document, "i-a", "i-b", 1)
	for _, tt := range []struct {
		name, node, bearer string
		req                report.CredentialRequest
		status             int
		code               Code
	}{
		{"no secret", "i-a", "", req(f.identity(t, "i-a", "us-east-1")), 401, BadSecret},
		{"wrong secret", "i-a", strings.Repeat("x", 64), req(f.identity(t, "i-a", "us-east-1")), 401, BadSecret},
		{"no identity", "i-a", f.secret, report.CredentialRequest{Nonce: nonceA}, 400, BadIdentity},
		{"no nonce", "i-a", f.secret, report.CredentialRequest{AWS: f.identity(t, "i-a", "us-east-1")}, 400, Malformed},
		{"signed by another key", "i-a", f.secret, req(forged), 403, BadIdentity},
		{"tampered document", "i-b", f.secret, req(tampered), 403, BadIdentity},
		{"another instance's document", "i-b", f.secret, req(f.identity(t, "i-a", "us-east-1")), 403, BadIdentity},
		{"no live instance", "i-gone", f.secret, req(f.identity(t, "i-gone", "us-east-1")), 403, NotLive},
		{"another region", "i-a", f.secret, req(f.identity(t, "i-a", "eu-west-1")), 403, BadIdentity},
	} {
		rec := f.do(t, "POST", "/v1/agents/"+tt.node+"/credential", tt.bearer, tt.req)
		if rec.Code != tt.status || rec.Header().Get(report.CodeHeader) != string(tt.code) {
			t.Errorf("%s: %d %s %q, want %d %s", tt.name, rec.Code, rec.Header().Get(report.CodeHeader), rec.Body, tt.status, tt.code)
		}
	}
	if n := len(f.srv.Registry.List()); n != 0 {
		t.Fatalf("refusals issued %d credentials", n)
	}
	a := credential(t, f.do(t, "POST", "/v1/agents/i-a/credential", f.secret, req(f.identity(t, "i-a", "us-east-1"))))
	if err := f.srv.Registry.Check("i-a", a); err != nil {
		t.Fatal(err)
	}
	// The secret again, for the registered node: refused.
	rec := f.do(t, "POST", "/v1/agents/i-a/credential", f.secret, req(f.identity(t, "i-a", "us-east-1")))
	if rec.Code != 409 || rec.Header().Get(report.CodeHeader) != string(Registered) || !strings.Contains(rec.Body.String(), "autoscaler token revoke -forget i-a") {
		t.Fatalf("a second bootstrap: %d %q", rec.Code, rec.Body)
	}
	// A node's credential cannot revoke or list.
	if rec := f.do(t, "DELETE", "/v1/agents/i-a/credential", a, nil); rec.Code != 401 {
		t.Fatalf("revocation with a node credential: %d", rec.Code)
	}
	if rec := f.do(t, "GET", "/v1/credentials", a, nil); rec.Code != 401 {
		t.Fatalf("listing with a node credential: %d", rec.Code)
	}
	// The operator revokes; the node bootstraps again.
	if rec := f.do(t, "DELETE", "/v1/agents/i-a/credential", apiToken, nil); rec.Code != 200 || strings.Contains(rec.Body.String(), `"hash"`) {
		t.Fatalf("revocation: %d %s", rec.Code, rec.Body)
	}
	if err := f.srv.Registry.Check("i-a", a); code(err) != Revoked {
		t.Fatalf("after revocation: %v", err)
	}
	a2 := credential(t, f.do(t, "POST", "/v1/agents/i-a/credential", f.secret, req(f.identity(t, "i-a", "us-east-1"))))
	// Rotation over HTTP: the agent sends the hash of the credential it
	// made, never the credential; the answer holds none.
	a3 := report.NewCredential("i-a")
	rec = f.do(t, "POST", "/v1/agents/i-a/credential/rotate", a2, report.RotateRequest{Next: report.Hash(a3)})
	if rec.Code != 200 || strings.Contains(rec.Body.String(), `"credential"`) {
		t.Fatalf("rotation: %d %s", rec.Code, rec.Body)
	}
	if err := f.srv.Registry.Check("i-a", a3); err != nil {
		t.Fatal(err)
	}
	if rec := f.do(t, "POST", "/v1/agents/i-b/credential/rotate", a3, report.RotateRequest{Next: report.Hash("x")}); rec.Code != 403 {
		t.Fatalf("rotating another node's credential: %d", rec.Code)
	}
	if rec := f.do(t, "POST", "/v1/agents/i-a/credential/rotate", a3, report.RotateRequest{Next: "not-a-hash"}); rec.Code != 400 {
		t.Fatalf("rotating to something not a hash: %d", rec.Code)
	}
	// Revoked with forget: any agent may bootstrap the node again (a node
	// that lost its nonce); without, only the one with the nonce.
	f.do(t, "DELETE", "/v1/agents/i-a/credential", apiToken, nil)
	stranger := req(f.identity(t, "i-a", "us-east-1"))
	stranger.Nonce = nonceB
	if rec := f.do(t, "POST", "/v1/agents/i-a/credential", f.secret, stranger); rec.Code != 409 {
		t.Fatalf("a bootstrap of a revoked node with another nonce: %d %s", rec.Code, rec.Body)
	}
	f.do(t, "DELETE", "/v1/agents/i-a/credential?forget=true", apiToken, nil)
	credential(t, f.do(t, "POST", "/v1/agents/i-a/credential", f.secret, stranger))
	// An operator issues for any node, without an identity.
	op := credential(t, f.do(t, "POST", "/v1/agents/rack-7/credential", apiToken, nil))
	if err := f.srv.Registry.Check("rack-7", op); err != nil {
		t.Fatal(err)
	}
	var list []state.Credential
	rec = f.do(t, "GET", "/v1/credentials", apiToken, nil)
	if strings.Contains(rec.Body.String(), `"nonce"`) {
		t.Fatalf("the list shows nonces: %s", rec.Body)
	}
	if json.Unmarshal(rec.Body.Bytes(), &list) != nil || len(list) != 2 || list[0].Node != "i-a" || list[0].Via != ViaBootstrap || list[1].Via != ViaOperator {
		t.Fatalf("list: %s", rec.Body)
	}

	// A bootstrap secret others may read is refused; a replaced one counts
	// at once.
	if err := os.Chmod(f.srv.BootstrapFile, 0o644); err != nil {
		t.Fatal(err)
	}
	if rec := f.do(t, "POST", "/v1/agents/i-b/credential", f.secret, req(f.identity(t, "i-b", "us-east-1"))); rec.Code != 500 {
		t.Fatalf("a world-readable secret: %d %s", rec.Code, rec.Body)
	}
	fresh := strings.Repeat("c", 64)
	if err := os.WriteFile(f.srv.BootstrapFile, []byte(fresh), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(f.srv.BootstrapFile, 0o600); err != nil {
		t.Fatal(err)
	}
	if rec := f.do(t, "POST", "/v1/agents/i-b/credential", f.secret, req(f.identity(t, "i-b", "us-east-1"))); rec.Code != 401 {
		t.Fatalf("the replaced secret: %d", rec.Code)
	}
	credential(t, f.do(t, "POST", "/v1/agents/i-b/credential", fresh, req(f.identity(t, "i-b", "us-east-1"))))
	// Two secrets, one per line: both count (the old one while nodes that
	// carry it remain).
	if err := os.WriteFile(f.srv.BootstrapFile, []byte(fresh+"\n"+f.secret+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	f.do(t, "DELETE", "/v1/agents/i-b/credential", apiToken, nil)
	credential(t, f.do(t, "POST", "/v1/agents/i-b/credential", f.secret, req(f.identity(t, "i-b", "us-east-1"))))
}

func TestLoadCertificates(t *testing.T) {
	dir := t.TempDir()
	s := identitytest.New(t)
	good := s.WriteCert(t, dir)
	certs, err := LoadCertificates(good)
	if err != nil || len(certs) != 1 {
		t.Fatalf("%v, %d", err, len(certs))
	}
	empty := filepath.Join(dir, "empty.pem")
	os.WriteFile(empty, []byte("not pem"), 0o644)
	if _, err := LoadCertificates(empty); err == nil || !strings.Contains(err.Error(), "no PEM CERTIFICATE") {
		t.Fatalf("a file with no certificate: %v", err)
	}
}

// BenchmarkCheck is the cost a report pays for its credential.
func BenchmarkCheck(b *testing.B) {
	st, err := state.Open(b.TempDir())
	if err != nil {
		b.Fatal(err)
	}
	defer st.Close()
	r, _ := NewRegistry(st, nil, nil)
	tok, _, _ := r.Issue("i-1", "p", ViaOperator, "")
	b.ReportAllocs()
	for b.Loop() {
		if err := r.Check("i-1", tok); err != nil {
			b.Fatal(err)
		}
	}
}

// FuzzBootstrap: no body crashes the bootstrap route, and none but a
// request with an identity the trust root signed, for the node named,
// gets a credential.
func FuzzBootstrap(f *testing.F) {
	good, _ := json.Marshal(req(&report.AWSIdentity{Document: `{"instanceId":"i-a","region":"us-east-1"}`, Signature: "AAAA"}))
	f.Add(good)
	f.Add([]byte(`{"nonce":"0123456789abcdef0123456789abcdef","aws":{"document":"","signature":""}}`))
	f.Add([]byte(`{"aws":null}`))
	f.Add([]byte(`{"gcp":{}}`))
	fx := newFixture(f)
	f.Fuzz(func(t *testing.T, body []byte) {
		req := httptest.NewRequest("POST", "/v1/agents/i-a/credential", bytes.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Authorization", "Bearer "+fx.secret)
		rec := httptest.NewRecorder()
		fx.h.ServeHTTP(rec, req)
		if rec.Code == 200 {
			t.Fatalf("a credential for an unsigned request: %q", body)
		}
		if rec.Code < 400 || rec.Code >= 500 {
			t.Fatalf("status %d for a bad request %q", rec.Code, body)
		}
	})
}

// TestForget: an operator's forget lets any agent bootstrap the node (it
// lost its files), and a gone node's record goes.
func TestForget(t *testing.T) {
	r, err := NewRegistry(openStore(t, t.TempDir()), nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := r.Issue("i-a", "p", ViaBootstrap, report.Hash(nonceA)); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Revoke("i-a", true); err != nil {
		t.Fatal(err)
	}
	if _, _, err := r.Issue("i-a", "p", ViaBootstrap, report.Hash(nonceB)); err != nil {
		t.Fatalf("a bootstrap with a new nonce after forget: %v", err)
	}
	if err := r.Forget("i-a"); err != nil {
		t.Fatal(err)
	}
	if len(r.List()) != 0 {
		t.Fatal("Forget left the record")
	}
}

// TestRotateRacesOperatorIssue: a rotation and an operator's re-issue at
// once end in either order, never mixed: the rotated-out credential is
// never good again after the operator's issue voided it.
func TestRotateRacesOperatorIssue(t *testing.T) {
	for i := range 300 {
		r, _ := NewRegistry(openStore(t, t.TempDir()), nil, nil)
		stolen, _, _ := r.Issue("i-a", "gpu", ViaBootstrap, report.Hash(nonceA))
		next := report.NewCredential("i-a")
		var wg sync.WaitGroup
		start := make(chan struct{})
		var rotErr error
		var issued string
		wg.Add(2)
		go func() { defer wg.Done(); <-start; issued, _, _ = r.Issue("i-a", "", ViaOperator, "") }()
		go func() { defer wg.Done(); <-start; _, rotErr = r.Rotate("i-a", stolen, report.Hash(next)) }()
		close(start)
		wg.Wait()
		cur := r.byNode["i-a"]
		if rotErr == nil && cur.Hash == report.Hash(next) {
			continue // the rotation came last: fine
		}
		if r.Check("i-a", stolen) == nil || r.Check("i-a", next) == nil || r.Check("i-a", issued) != nil {
			t.Fatalf("iteration %d: after the operator's issue, the old credential %v, the rotation's %v, the operator's %v",
				i, r.Check("i-a", stolen), r.Check("i-a", next), r.Check("i-a", issued))
		}
	}
}

// TestBootstrapGCP: a Compute Engine identity token, signed by Google (the
// real idtoken validation, against a stand-in for Google's keys) for the
// controller's audience, gets a live GCP instance its credential with no
// bootstrap secret; a token for another audience, expired, from another
// issuer or key, naming another instance, project or zone, or a node that
// is not a live GCP instance, is refused; without the audience
// configured, GCP identities are refused, and AWS bootstraps still need
// the secret.
func TestBootstrapGCP(t *testing.T) {
	const aud = "https://fleetcast.internal:8790"
	f := newFixture(t)
	google := identitytest.NewGoogle(t)
	v, err := idtoken.NewValidator(context.Background(), option.WithHTTPClient(google.Client()))
	if err != nil {
		t.Fatal(err)
	}
	gcpPool := fleet.Pool{Name: "gcp-a100", Provider: fleet.ProviderGCP, Region: "us-central1",
		Settings: gcp.Settings{Project: "ml", Zone: "us-central1-a", MIG: "a100"}}
	regional := fleet.Pool{Name: "gcp-regional", Provider: fleet.ProviderGCP, Region: "us-central1",
		Settings: gcp.Settings{Project: "ml", Region: "us-central1", MIG: "a100-r"}}
	type liveNode struct {
		pool fleet.Pool
		zone string
	}
	live := map[string]liveNode{"a100-x1": {gcpPool, "us-central1-a"}, "a100-x2": {gcpPool, "us-central1-a"},
		"a100-r1": {regional, "us-central1-b"}, "i-a": {fleet.Pool{Name: "gpu", Provider: fleet.ProviderAWS, Region: "us-east-1"}, "us-east-1a"}}
	f.srv.Live = func(node string) (fleet.Pool, string, bool) { n, ok := live[node]; return n.pool, n.zone, ok }
	f.srv.GCP = &GCPVerifier{Audience: aud, Validator: v}
	node := identitytest.Instance{Name: "a100-x1", ID: "8152740126359720177", Project: "ml", Zone: "us-central1-a"}
	// The machine the group lists under a100-x1's name.
	listed := node.ID
	f.srv.Machine = func(name string) string {
		if name == node.Name {
			return listed
		}
		return ""
	}
	gcpReq := func(token string) report.CredentialRequest {
		return report.CredentialRequest{Nonce: nonceA, GCP: &report.GCPIdentity{Token: token}}
	}
	other := identitytest.NewGoogle(t)
	for _, tt := range []struct {
		name, node string
		token      string
		status     int
		code       Code
	}{
		{"another audience", "a100-x1", google.Token(t, "https://elsewhere:8790", node, nil), 403, BadIdentity},
		{"expired", "a100-x1", google.Token(t, aud, node, func(c map[string]any) { c["exp"] = time.Now().Add(-time.Minute).Unix() }), 403, BadIdentity},
		{"issued in the future", "a100-x1", google.Token(t, aud, node, func(c map[string]any) { c["iat"] = time.Now().Add(time.Hour).Unix() }), 403, BadIdentity},
		{"another issuer", "a100-x1", google.Token(t, aud, node, func(c map[string]any) { c["iss"] = "https://attacker.example" }), 403, BadIdentity},
		{"another key", "a100-x1", other.Token(t, aud, node, nil), 403, BadIdentity},
		{"no instance claims", "a100-x1", google.Token(t, aud, node, func(c map[string]any) { delete(c, "google") }), 403, BadIdentity},
		{"another instance's token", "a100-x2", google.Token(t, aud, node, nil), 403, BadIdentity},
		// A VM made under the name outside the group (by someone who may
		// create VMs in the project): not the machine the group lists.
		{"another machine under the name", "a100-x1", google.Token(t, aud, identitytest.Instance{Name: "a100-x1", ID: "666", Project: "ml", Zone: "us-central1-a", Created: time.Now()}, nil), 403, BadIdentity},
		// The listed machine's ID, so that only the project or the zone
		// can refuse them.
		{"another project", "a100-x1", google.Token(t, aud, identitytest.Instance{Name: "a100-x1", ID: listed, Project: "other", Zone: "us-central1-a"}, nil), 403, BadIdentity},
		{"another zone", "a100-x1", google.Token(t, aud, identitytest.Instance{Name: "a100-x1", ID: listed, Project: "ml", Zone: "us-central1-b"}, nil), 403, BadIdentity},
		// A VM of the same name in another zone of a regional pool's
		// region: not the one the group lists.
		{"a regional pool's name in another zone", "a100-r1", google.Token(t, aud, identitytest.Instance{Name: "a100-r1", Project: "ml", Zone: "us-central1-c"}, nil), 403, BadIdentity},
		{"no live instance", "a100-gone", google.Token(t, aud, identitytest.Instance{Name: "a100-gone", Project: "ml", Zone: "us-central1-a"}, nil), 403, NotLive},
		{"an AWS pool's node", "i-a", google.Token(t, aud, identitytest.Instance{Name: "i-a", Project: "ml", Zone: "us-central1-a"}, nil), 403, NotLive},
		{"not a token", "a100-x1", "a.b", 403, BadIdentity},
		{"not RS256", "a100-x1", google.SignWith(t, "ES256", map[string]any{"iss": "https://accounts.google.com", "aud": aud}), 403, BadIdentity},
	} {
		rec := f.do(t, "POST", "/v1/agents/"+tt.node+"/credential", "", gcpReq(tt.token))
		if rec.Code != tt.status || rec.Header().Get(report.CodeHeader) != string(tt.code) {
			t.Errorf("%s: %d %s %q, want %d %s", tt.name, rec.Code, rec.Header().Get(report.CodeHeader), rec.Body, tt.status, tt.code)
		}
	}
	if n := len(f.srv.Registry.List()); n != 0 {
		t.Fatalf("refusals issued %d credentials", n)
	}
	// An AWS bootstrap still needs the secret.
	if rec := f.do(t, "POST", "/v1/agents/i-a/credential", "", req(f.identity(t, "i-a", "us-east-1"))); rec.Code != 401 || rec.Header().Get(report.CodeHeader) != string(BadSecret) {
		t.Fatalf("an AWS bootstrap without the secret: %d %q", rec.Code, rec.Body)
	}
	credential(t, f.do(t, "POST", "/v1/agents/a100-r1/credential", "", gcpReq(google.Token(t, aud, identitytest.Instance{Name: "a100-r1", Project: "ml", Zone: "us-central1-b"}, nil))))
	f.srv.Registry.Revoke("a100-r1", true) //nolint:errcheck // the regional node's, to count a100-x1's alone below
	a := credential(t, f.do(t, "POST", "/v1/agents/a100-x1/credential", "", gcpReq(google.Token(t, aud, node, nil))))
	if err := f.srv.Registry.Check("a100-x1", a); err != nil {
		t.Fatal(err)
	}
	if c := f.srv.Registry.List(); len(c) != 1 || c[0].Pool != "gcp-a100" || c[0].Via != ViaBootstrap {
		t.Fatalf("credentials %+v; want a100-x1's, bootstrapped, of pool gcp-a100", c)
	}
	// A second token for the registered node (a copy, replayed within its
	// hour, with another nonce): refused.
	replay := gcpReq(google.Token(t, aud, node, nil))
	replay.Nonce = nonceB
	if rec := f.do(t, "POST", "/v1/agents/a100-x1/credential", "", replay); rec.Code != 409 {
		t.Fatalf("a second bootstrap of a registered node: %d %q", rec.Code, rec.Body)
	}
	// The group recreates the VM (autohealing, a recreate): a new machine
	// under the name, with a new instance ID, whose agent has no nonce.
	// Its token proves another machine: it registers afresh, and the old
	// machine's credential is void (before: 409, and the new VM stayed
	// silent, counted as capacity).
	listed = "2291054187347120553"
	recreated := gcpReq(google.Token(t, aud, identitytest.Instance{Name: "a100-x1", ID: listed, Project: "ml", Zone: "us-central1-a", Created: time.Now()}, nil))
	recreated.Nonce = nonceB
	b := credential(t, f.do(t, "POST", "/v1/agents/a100-x1/credential", "", recreated))
	if err := f.srv.Registry.Check("a100-x1", b); err != nil {
		t.Fatalf("the recreated VM's credential: %v", err)
	}
	if err := f.srv.Registry.Check("a100-x1", a); err == nil {
		t.Fatal("the old VM's credential still checks after the recreate")
	}
	// And the old VM's token (a copy, within its hour) cannot take the
	// name back: not the machine listed, and older.
	replay.Nonce = nonceA
	if rec := f.do(t, "POST", "/v1/agents/a100-x1/credential", "", replay); rec.Code != 403 {
		t.Fatalf("the old VM's token after the recreate: %d %q", rec.Code, rec.Body)
	}
	f.srv.Machine = nil
	if rec := f.do(t, "POST", "/v1/agents/a100-x1/credential", "", replay); rec.Code != 409 {
		t.Fatalf("the old VM's token after the recreate, no listing to check: %d %q", rec.Code, rec.Body)
	}
	f.srv.GCP = nil
	if rec := f.do(t, "POST", "/v1/agents/a100-x2/credential", "", gcpReq(google.Token(t, aud, identitytest.Instance{Name: "a100-x2", Project: "ml", Zone: "us-central1-a"}, nil))); rec.Header().Get(report.CodeHeader) != string(BadSecret) {
		t.Fatalf("a GCP bootstrap with no audience configured: %d %q", rec.Code, rec.Body)
	}
}

// hostKeys is a provider plugin's identity check, as the plugin set
// answers it: each node's document, a refusal for another, and an error
// that is no refusal while the plugin is down.
type hostKeys struct {
	docs map[string]string
	down bool
	// hold, when set, holds each check until it is closed; inside counts
	// the checks held.
	hold   chan struct{}
	inside atomic.Int32
}

func (h *hostKeys) VerifyIdentity(_ context.Context, pool fleet.Pool, node, doc string) error {
	if h.hold != nil {
		h.inside.Add(1)
		<-h.hold
	}
	if h.down {
		return errors.New("pool onprem: the plugin is down")
	}
	if want, ok := h.docs[node]; !ok || doc != want {
		return &providers.RefusedError{Pool: pool.Name, Err: errors.New("not its host key")}
	}
	return nil
}

// TestBootstrapPlugin: a node of a plugin pool bootstraps with the
// bootstrap secret and a document its pool's plugin accepts; without the
// secret, for a node no plugin pool lists, with a document the plugin
// refuses, or with no plugins, it is refused; while the plugin cannot
// answer, it is not refused (it tries again).
func TestBootstrapPlugin(t *testing.T) {
	f := newFixture(t)
	onprem := fleet.Pool{Name: "onprem", Provider: fleet.ProviderPlugin}
	live := map[string]fleet.Pool{"gpu-01": onprem, "gpu-02": onprem, "i-a": {Name: "gpu", Provider: fleet.ProviderAWS, Region: "us-east-1"}}
	f.srv.Live = func(node string) (fleet.Pool, string, bool) { p, ok := live[node]; return p, "", ok }
	keys := &hostKeys{docs: map[string]string{"gpu-01": "key-of-gpu-01", "gpu-02": "key-of-gpu-02", "i-a": "key-of-i-a"}}
	preq := func(doc string) report.CredentialRequest {
		return report.CredentialRequest{Nonce: nonceA, Plugin: &report.PluginIdentity{Document: doc}}
	}
	// No plugins to ask.
	if rec := f.do(t, "POST", "/v1/agents/gpu-01/credential", f.secret, preq("key-of-gpu-01")); rec.Code != 403 || rec.Header().Get(report.CodeHeader) != string(Disabled) {
		t.Fatalf("with no plugins: %d %s %q", rec.Code, rec.Header().Get(report.CodeHeader), rec.Body)
	}
	f.srv.Plugins = keys
	for _, tt := range []struct {
		name, node, secret, doc string
		status                  int
		code                    Code
	}{
		{"no secret", "gpu-01", "", "key-of-gpu-01", 401, BadSecret},
		{"a wrong secret", "gpu-01", strings.Repeat("c", 64), "key-of-gpu-01", 401, BadSecret},
		{"another node's document", "gpu-01", f.secret, "key-of-gpu-02", 403, BadIdentity},
		{"a guess", "gpu-02", f.secret, "guess", 403, BadIdentity},
		{"no live instance", "gpu-09", f.secret, "key-of-gpu-09", 403, NotLive},
		{"an AWS pool's node", "i-a", f.secret, "key-of-i-a", 403, NotLive},
	} {
		// With GCP identities taken too (which need no secret), the
		// secret is still required of a plugin pool's node.
		for _, withGCP := range []bool{false, true} {
			f.srv.GCP = nil
			if withGCP {
				f.srv.GCP = &GCPVerifier{Audience: "https://fleetcast.internal:8790"}
			}
			rec := f.do(t, "POST", "/v1/agents/"+tt.node+"/credential", tt.secret, preq(tt.doc))
			if rec.Code != tt.status || rec.Header().Get(report.CodeHeader) != string(tt.code) {
				t.Errorf("%s (GCP too: %v): %d %s %q, want %d %s", tt.name, withGCP, rec.Code, rec.Header().Get(report.CodeHeader), rec.Body, tt.status, tt.code)
			}
		}
	}
	f.srv.GCP = nil
	// A few checks at a time: one more is told to try again.
	keys.hold = make(chan struct{})
	var wg sync.WaitGroup
	for range MaxPluginVerifies {
		wg.Add(1)
		go func() { defer wg.Done(); f.do(t, "POST", "/v1/agents/gpu-02/credential", f.secret, preq("guess")) }()
	}
	for keys.inside.Load() < MaxPluginVerifies {
		time.Sleep(time.Millisecond)
	}
	if rec := f.do(t, "POST", "/v1/agents/gpu-01/credential", f.secret, preq("key-of-gpu-01")); rec.Code != 503 || rec.Header().Get(report.CodeHeader) != string(Busy) {
		t.Errorf("a check beyond %d at once: %d %s %q; want 503 busy", MaxPluginVerifies, rec.Code, rec.Header().Get(report.CodeHeader), rec.Body)
	}
	close(keys.hold)
	wg.Wait()
	keys.hold = nil
	keys.down = true
	if rec := f.do(t, "POST", "/v1/agents/gpu-01/credential", f.secret, preq("key-of-gpu-01")); rec.Code < 500 {
		t.Fatalf("while the plugin is down: %d %q; want a server error, no refusal", rec.Code, rec.Body)
	}
	keys.down = false
	if n := len(f.srv.Registry.List()); n != 0 {
		t.Fatalf("refusals issued %d credentials", n)
	}
	a := credential(t, f.do(t, "POST", "/v1/agents/gpu-01/credential", f.secret, preq("key-of-gpu-01")))
	if err := f.srv.Registry.Check("gpu-01", a); err != nil {
		t.Fatal(err)
	}
	if c := f.srv.Registry.List(); len(c) != 1 || c[0].Pool != "onprem" || c[0].Via != ViaBootstrap {
		t.Fatalf("credentials %+v; want gpu-01's, bootstrapped, of pool onprem", c)
	}
}

// TestBootstrapRecreatedMachine: a node's record names the machine that
// registered it, or (a record from before machines were kept) none. A
// bootstrap proving a machine made after that one, or after the
// registration, is a new node's and registers afresh; the same machine,
// an older one, or one that does not say when it was made, is refused.
func TestBootstrapRecreatedMachine(t *testing.T) {
	r, err := NewRegistry(openStore(t, t.TempDir()), nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now().UTC()
	if _, _, err := r.Bootstrap("vm-1", "gcp", report.Hash(nonceA), Machine{ID: "1", Created: now.Add(-time.Hour)}); err != nil {
		t.Fatal(err)
	}
	// Issued without a machine, as before machines were kept.
	if _, _, err := r.Issue("vm-2", "gcp", ViaBootstrap, report.Hash(nonceA)); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		name, node string
		m          Machine
		ok         bool
	}{
		{"the same machine", "vm-1", Machine{ID: "1", Created: now.Add(-time.Hour)}, false},
		{"an older machine", "vm-1", Machine{ID: "0", Created: now.Add(-2 * time.Hour)}, false},
		{"a machine that does not say when it was made", "vm-1", Machine{ID: "2"}, false},
		{"no machine", "vm-1", Machine{}, false},
		{"made before the registration, no machine on record", "vm-2", Machine{ID: "5", Created: now.Add(-time.Hour)}, false},
		{"made after the registration, no machine on record", "vm-2", Machine{ID: "5", Created: now.Add(time.Minute)}, true},
		{"a newer machine", "vm-1", Machine{ID: "3", Created: now}, true},
	} {
		_, _, err := r.Bootstrap(tt.node, "gcp", report.Hash(nonceB), tt.m)
		if (err == nil) != tt.ok || err != nil && code(err) != Registered {
			t.Errorf("%s: %v, want accepted %v", tt.name, err, tt.ok)
		}
	}
}
