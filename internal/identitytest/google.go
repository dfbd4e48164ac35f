package identitytest

import (
	"crypto"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"math/big"
	"net/http"
	"net/http/httptest"
	"net/url"
	"testing"
	"time"
)

// Google stands in for Google's signing of Compute Engine instance
// identity tokens: an RSA key, published as Google publishes its keys (a
// JWK set, https://www.googleapis.com/oauth2/v3/certs) by a test server
// that Client reaches for that URL, so that the validation under test
// (google.golang.org/api/idtoken's) is the real one.
type Google struct {
	Key   *rsa.PrivateKey
	KeyID string
	srv   *httptest.Server
}

// NewGoogle makes a signer with a 2048-bit key, its keys served until the
// test ends.
func NewGoogle(t testing.TB) *Google {
	t.Helper()
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	g := &Google{Key: key, KeyID: "fleetcast-test-key"}
	jwks, _ := json.Marshal(map[string]any{"keys": []map[string]string{{
		"kty": "RSA", "alg": "RS256", "use": "sig", "kid": g.KeyID,
		"n": base64.RawURLEncoding.EncodeToString(key.N.Bytes()),
		"e": base64.RawURLEncoding.EncodeToString(big.NewInt(int64(key.E)).Bytes()),
	}}})
	g.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/oauth2/v3/certs" {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Cache-Control", "public, max-age=3600")
		w.Write(jwks) //nolint:errcheck // a test server
	}))
	t.Cleanup(g.srv.Close)
	return g
}

// Client reaches the test server for Google's keys (any request's host is
// replaced by the server's).
func (g *Google) Client() *http.Client {
	target, _ := url.Parse(g.srv.URL)
	return &http.Client{Transport: roundTripper(func(r *http.Request) (*http.Response, error) {
		r = r.Clone(r.Context())
		r.URL.Scheme, r.URL.Host = target.Scheme, target.Host
		return http.DefaultTransport.RoundTrip(r)
	})}
}

type roundTripper func(*http.Request) (*http.Response, error)

func (f roundTripper) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// Instance is the instance a token names (its google.compute_engine
// claims).
type Instance struct {
	Name, ID, Project, Zone string
	// Created is when the instance was created (a minute before the
	// token when zero).
	Created time.Time
}

// Token is the identity token the metadata server of instance would sign
// for audience (format=full), issued now, good for an hour; change, if
// not nil, edits its claims first.
func (g *Google) Token(t testing.TB, audience string, in Instance, change func(claims map[string]any)) string {
	t.Helper()
	now := time.Now()
	created := in.Created
	if created.IsZero() {
		created = now.Add(-time.Minute)
	}
	claims := map[string]any{
		"iss": "https://accounts.google.com", "aud": audience, "azp": "1234567890", "sub": "1234567890",
		"iat": now.Unix(), "exp": now.Add(time.Hour).Unix(),
		"google": map[string]any{"compute_engine": map[string]any{
			"instance_name": in.Name, "instance_id": in.ID, "project_id": in.Project, "project_number": 1234567890,
			"zone": in.Zone, "instance_creation_timestamp": created.Unix(),
		}},
	}
	if change != nil {
		change(claims)
	}
	return g.sign(t, claims)
}

func (g *Google) sign(t testing.TB, claims map[string]any) string {
	return g.SignWith(t, "RS256", claims)
}

// SignWith signs claims with the key, its header naming alg (the
// signature is RS256's whatever it says).
func (g *Google) SignWith(t testing.TB, alg string, claims map[string]any) string {
	t.Helper()
	header, _ := json.Marshal(map[string]string{"alg": alg, "kid": g.KeyID, "typ": "JWT"})
	payload, err := json.Marshal(claims)
	if err != nil {
		t.Fatal(err)
	}
	signed := base64.RawURLEncoding.EncodeToString(header) + "." + base64.RawURLEncoding.EncodeToString(payload)
	sum := sha256.Sum256([]byte(signed))
	sig, err := rsa.SignPKCS1v15(rand.Reader, g.Key, crypto.SHA256, sum[:])
	if err != nil {
		t.Fatal(err)
	}
	return signed + "." + base64.RawURLEncoding.EncodeToString(sig)
}
