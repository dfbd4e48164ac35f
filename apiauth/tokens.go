package apiauth

import (
	"crypto/rand"
	"crypto/subtle"
	"encoding/base64"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/fleetcast/autoscaler/agent/report"
	"github.com/fleetcast/autoscaler/state"
)

// RootName names the root token: the operator token the controller reads
// at start from FLEETCAST_API_TOKEN, or else from api-token in its state
// directory. It is not managed through the API (it has no record), so an
// operator cannot lock the controller out of itself.
const RootName = "root"

// MinRootSecret is the shortest root token accepted, in characters.
const MinRootSecret = 16

// MaxGrace bounds how long a rotated-out secret may stay good.
const MaxGrace = 7 * 24 * time.Hour

// secretPrefix marks a Fleetcast API token (version 1); node credentials
// start "fcn1.".
const secretPrefix = "fca1."

// IsAPIToken reports whether secret has the form of a Fleetcast API
// token (held by this controller or not): never a node credential or a
// bootstrap secret.
func IsAPIToken(secret string) bool { return strings.HasPrefix(secret, secretPrefix) }

// Store keeps the API tokens' records (state.Store does).
type Store interface {
	PutAPIToken(state.APIToken) error
	DeleteAPIToken(name string) error
	APITokens() ([]state.APIToken, error)
}

// Token is who a request's API token says its caller is.
type Token struct {
	Name  string
	Scope Scope
}

// Listed is an API token as `api-token list` shows it: no secret, no hash.
type Listed struct {
	Name  string `json:"name"`
	Scope Scope  `json:"scope"`
	// Source says where the root token comes from
	// ("FLEETCAST_API_TOKEN", or its file); "" for the others.
	Source        string    `json:"source,omitempty"`
	Created       time.Time `json:"created,omitzero"`
	Rotated       time.Time `json:"rotated,omitzero"`
	Rotations     int       `json:"rotations,omitempty"`
	PreviousUntil time.Time `json:"previous_until,omitzero"`
	By            string    `json:"by,omitempty"`
	// LastUsed is when the token last got a request through, since the
	// controller started (zero: not since then).
	LastUsed time.Time `json:"last_used,omitzero"`
}

// Tokens holds the API tokens. Its methods are safe for concurrent use;
// every change is written to the store before it counts, and a check never
// waits for a write to the store.
type Tokens struct {
	store Store
	now   func() time.Time
	log   hclog.Logger

	// changing serialises the changes (Create, Rotate, Revoke), each with
	// its write to the store.
	changing sync.Mutex
	mu       sync.RWMutex
	byName   map[string]state.APIToken
	// byHash maps each good secret's hash, current or rotated out, to its
	// token's name.
	byHash map[string]string
	root   string   // the root secret's hash; "" when none
	source string   // where the root secret came from
	used   sync.Map // token name -> time.Time it last got a request through
}

// NewTokens loads the API tokens in store. now is the clock (time.Now when
// nil); log gets every change.
func NewTokens(store Store, now func() time.Time, log hclog.Logger) (*Tokens, error) {
	if now == nil {
		now = time.Now
	}
	if log == nil {
		log = hclog.NewNullLogger()
	}
	recs, err := store.APITokens()
	if err != nil {
		return nil, err
	}
	t := &Tokens{store: store, now: now, log: log, byName: map[string]state.APIToken{}, byHash: map[string]string{}}
	for _, r := range recs {
		if r.Name == RootName {
			return nil, fmt.Errorf("API token %q in the state: the root token's name, which no record may have", r.Name)
		}
		if _, err := ParseScope(r.Scope); err != nil {
			return nil, fmt.Errorf("API token %q in the state: %v", r.Name, err)
		}
		t.index(r)
	}
	return t, nil
}

// SetRoot sets the root token's secret (an operator's), and says where it
// came from for `api-token list`.
func (t *Tokens) SetRoot(secret, source string) error {
	if len(secret) < MinRootSecret {
		return fmt.Errorf("%s has %d characters; want at least %d", source, len(secret), MinRootSecret)
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	t.root, t.source = report.Hash(secret), source
	return nil
}

// index adds r to the maps; the caller holds mu (or has not shared t).
func (t *Tokens) index(r state.APIToken) {
	if old, ok := t.byName[r.Name]; ok {
		delete(t.byHash, old.Hash)
		delete(t.byHash, old.Previous)
	}
	t.byName[r.Name] = r
	t.byHash[r.Hash] = r.Name
	if r.Previous != "" {
		t.byHash[r.Previous] = r.Name
	}
}

// Check returns the token secret is; ok is false when it is none this
// controller holds (wrong, revoked, or rotated out past its grace).
func (t *Tokens) Check(secret string) (tok Token, ok bool) {
	if t == nil || secret == "" {
		return Token{}, false
	}
	h := report.Hash(secret)
	now := t.now()
	t.mu.RLock()
	switch name, known := t.byHash[h]; {
	case t.root != "" && subtle.ConstantTimeCompare([]byte(h), []byte(t.root)) == 1:
		tok, ok = Token{Name: RootName, Scope: Operator}, true
	case known:
		r := t.byName[name]
		tok, ok = Token{Name: name, Scope: Scope(r.Scope)}, h != r.Previous || now.Before(r.PreviousUntil)
	}
	t.mu.RUnlock()
	if ok {
		t.used.Store(tok.Name, now)
	}
	return tok, ok
}

// lookup is the record of the token named name.
func (t *Tokens) lookup(name string) (state.APIToken, bool) {
	t.mu.RLock()
	defer t.mu.RUnlock()
	r, ok := t.byName[name]
	return r, ok
}

// checkName refuses a name that cannot be a token's.
func checkName(name string) error {
	switch {
	case name == RootName:
		return refuse(http.StatusConflict, Root, "%q is the root token's name (FLEETCAST_API_TOKEN, or api-token in the state directory): it is set at start, not through the API", RootName)
	case name == "" || len(name) > 64 || strings.Trim(name, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-") != "":
		return refuse(http.StatusBadRequest, Malformed, "token name %q: want 1 to 64 letters, digits, '.', '_' or '-'", name)
	}
	return nil
}

// newSecret returns a fresh API token secret.
func newSecret() string {
	raw := make([]byte, 32)
	rand.Read(raw)
	return secretPrefix + base64.RawURLEncoding.EncodeToString(raw)
}

// Create makes a token named name with scope, and returns its secret
// (shown once) and its record. by names the token that asked.
func (t *Tokens) Create(name string, scope Scope, by string) (string, state.APIToken, error) {
	if err := checkName(name); err != nil {
		return "", state.APIToken{}, err
	}
	if _, err := ParseScope(string(scope)); err != nil {
		return "", state.APIToken{}, err
	}
	t.changing.Lock()
	defer t.changing.Unlock()
	if _, ok := t.lookup(name); ok {
		return "", state.APIToken{}, refuse(http.StatusConflict, Exists, "an API token named %q exists: rotate it (`api-token rotate %s`), or revoke it first", name, name)
	}
	secret := newSecret()
	r := state.APIToken{Name: name, Scope: string(scope), Hash: report.Hash(secret), Created: t.now().UTC(), By: by}
	if err := t.store.PutAPIToken(r); err != nil {
		return "", state.APIToken{}, fmt.Errorf("recording API token %s: %w", name, err)
	}
	t.mu.Lock()
	t.index(r)
	t.mu.Unlock()
	t.log.Info("API token created", "name", name, "scope", scope, "by", by)
	return secret, r, nil
}

// Rotate gives the token named name a new secret and returns it (shown
// once); the old one stays good for grace (0: it is refused at once).
func (t *Tokens) Rotate(name string, grace time.Duration, by string) (string, state.APIToken, error) {
	if name == RootName {
		return "", state.APIToken{}, checkName(name)
	}
	if grace < 0 || grace > MaxGrace {
		return "", state.APIToken{}, refuse(http.StatusBadRequest, Malformed, "grace %s: want 0 to %s", grace, MaxGrace)
	}
	t.changing.Lock()
	defer t.changing.Unlock()
	r, ok := t.lookup(name)
	if !ok {
		return "", state.APIToken{}, refuse(http.StatusNotFound, Unknown, "no API token named %q", name)
	}
	secret := newSecret()
	now := t.now().UTC()
	r.Previous, r.PreviousUntil = "", time.Time{}
	if grace > 0 {
		r.Previous, r.PreviousUntil = r.Hash, now.Add(grace)
	}
	r.Hash, r.Rotated, r.By = report.Hash(secret), now, by
	r.Rotations++
	if err := t.store.PutAPIToken(r); err != nil {
		return "", state.APIToken{}, fmt.Errorf("recording API token %s: %w", name, err)
	}
	t.mu.Lock()
	t.index(r)
	t.mu.Unlock()
	t.log.Info("API token rotated", "name", name, "scope", r.Scope, "by", by, "grace", grace)
	return secret, r, nil
}

// Revoke deletes the token named name: its secrets are refused from now
// on.
func (t *Tokens) Revoke(name, by string) (state.APIToken, error) {
	if name == RootName {
		return state.APIToken{}, checkName(name)
	}
	t.changing.Lock()
	defer t.changing.Unlock()
	r, ok := t.lookup(name)
	if !ok {
		return state.APIToken{}, refuse(http.StatusNotFound, Unknown, "no API token named %q", name)
	}
	if err := t.store.DeleteAPIToken(name); err != nil {
		return state.APIToken{}, fmt.Errorf("revoking API token %s: %w", name, err)
	}
	t.mu.Lock()
	delete(t.byName, name)
	delete(t.byHash, r.Hash)
	delete(t.byHash, r.Previous)
	t.mu.Unlock()
	t.used.Delete(name)
	t.log.Warn("API token revoked", "name", name, "scope", r.Scope, "by", by)
	return r, nil
}

// List returns the tokens, root first, then by name.
func (t *Tokens) List() []Listed {
	lastUsed := func(name string) time.Time {
		at, _ := t.used.Load(name)
		tm, _ := at.(time.Time)
		return tm
	}
	t.mu.RLock()
	defer t.mu.RUnlock()
	now := t.now()
	var out []Listed
	if t.root != "" {
		out = append(out, Listed{Name: RootName, Scope: Operator, Source: t.source, LastUsed: lastUsed(RootName)})
	}
	names := make([]string, 0, len(t.byName))
	for n := range t.byName {
		names = append(names, n)
	}
	slices.Sort(names)
	for _, n := range names {
		r := t.byName[n]
		l := Listed{Name: n, Scope: Scope(r.Scope), Created: r.Created, Rotated: r.Rotated, Rotations: r.Rotations, By: r.By, LastUsed: lastUsed(n)}
		if r.Previous != "" && now.Before(r.PreviousUntil) {
			l.PreviousUntil = r.PreviousUntil
		}
		out = append(out, l)
	}
	return out
}
