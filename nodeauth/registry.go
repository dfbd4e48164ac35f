// Package nodeauth issues, checks, rotates and revokes the agents' node
// credentials.
//
// A node gets its credential once, by bootstrapping, as a kubelet does with
// its TLS bootstrap and as Vault's AWS auth does with the instance identity
// document: it presents the fleet's bootstrap secret, which can do nothing
// but ask for a node credential, together with the cloud's signed identity
// of the instance, and the controller issues a credential only when the
// signature checks out against the configured trust root, the instance is a
// live instance of a managed pool as the controller last observed it, and
// the node holds no credential yet. A stolen bootstrap secret therefore
// impersonates no node that already registered, and no instance that is
// not in the fleet.
//
// A credential is random, names its node, and is kept by the controller
// only as a SHA-256: the controller has no secret that makes credentials,
// and a copy of its state file impersonates no node. Agents rotate theirs
// (the old one is refused once the new one was used, or after a grace);
// an operator revokes one (`autoscaler token revoke`), after which the node
// may bootstrap again. A controller that lost its state directory has no
// credentials: every agent bootstraps again. Every issue, rotation and
// revocation is logged.
package nodeauth

import (
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/fleetcast/autoscaler/state"
)

// Code is the typed reason of a refusal, sent in report.CodeHeader.
type Code string

// The refusals' codes.
const (
	// Malformed: not a Fleetcast credential at all.
	Malformed Code = "malformed"
	// Unknown: no credential was issued to the node (or the controller
	// lost its state): bootstrap again.
	Unknown Code = "unknown"
	// Revoked: an operator revoked the node's credential; the node may
	// bootstrap again.
	Revoked Code = "revoked"
	// Superseded: not the node's current credential (rotated out, or
	// never issued).
	Superseded Code = "superseded"
	// WrongNode: a good credential, for another node.
	WrongNode Code = "wrong-node"
	// Registered: the node holds a credential already, so the bootstrap
	// secret cannot get it another.
	Registered Code = "registered"
	// BadSecret: the bootstrap secret (or API token) is wrong or missing.
	BadSecret Code = "bad-secret"
	// BadIdentity: the instance's identity does not check out.
	BadIdentity Code = "bad-identity"
	// NotLive: the instance is no live instance of a managed pool.
	NotLive Code = "not-live"
	// Disabled: bootstrapping is not configured on this controller.
	Disabled Code = "disabled"
)

// Error is a refusal: the HTTP status to answer with, its code and the
// reason in words.
type Error struct {
	Status int
	Code   Code
	Reason string
}

func (e *Error) Error() string { return e.Reason }

// HTTPStatus is the status to answer with (report.Refusal).
func (e *Error) HTTPStatus() int { return e.Status }

// ErrorCode is the refusal's code (report.Refusal).
func (e *Error) ErrorCode() string { return string(e.Code) }

func refuse(status int, code Code, format string, args ...any) *Error {
	return &Error{Status: status, Code: code, Reason: fmt.Sprintf(format, args...)}
}

// Store keeps the credential records (state.Store does).
type Store interface {
	PutCredential(state.Credential) error
	DeleteCredentials(nodes ...string) error
	Credentials() ([]state.Credential, error)
}

// DefaultGrace is how long a rotated-out credential stays good when the
// node has not used the new one yet (the rotation's answer may be lost).
const DefaultGrace = 10 * time.Minute

// Via says how a credential was issued.
const (
	ViaBootstrap = "bootstrap"
	ViaOperator  = "operator"
)

// Registry holds the nodes' credentials. Its methods are safe for
// concurrent use; every change is written to the store before it counts.
type Registry struct {
	store Store
	now   func() time.Time
	log   hclog.Logger
	// Grace is how long a rotated-out credential stays good (DefaultGrace
	// when 0).
	Grace time.Duration

	mu     sync.Mutex
	byNode map[string]state.Credential
}

// NewRegistry loads the credentials in store. now is the controller's
// clock (time.Now when nil); log gets every change.
func NewRegistry(store Store, now func() time.Time, log hclog.Logger) (*Registry, error) {
	if now == nil {
		now = time.Now
	}
	if log == nil {
		log = hclog.NewNullLogger()
	}
	recs, err := store.Credentials()
	if err != nil {
		return nil, fmt.Errorf("node credentials: %w", err)
	}
	r := &Registry{store: store, now: now, log: log, byNode: map[string]state.Credential{}}
	for _, c := range recs {
		r.byNode[c.Node] = c
	}
	return r, nil
}

// tokenPrefix marks a Fleetcast node credential (version 1).
const tokenPrefix = "fcn1"

// newToken returns a fresh credential for node: its name and 32 random
// bytes.
func newToken(node string) string {
	raw := make([]byte, 32)
	rand.Read(raw)
	return tokenPrefix + "." + base64.RawURLEncoding.EncodeToString([]byte(node)) + "." + base64.RawURLEncoding.EncodeToString(raw)
}

// tokenNode returns the node a credential names.
func tokenNode(token string) (string, bool) {
	parts := strings.Split(token, ".")
	if len(parts) != 3 || parts[0] != tokenPrefix || parts[2] == "" {
		return "", false
	}
	node, err := base64.RawURLEncoding.DecodeString(parts[1])
	if err != nil || len(node) == 0 {
		return "", false
	}
	return string(node), true
}

func hash(token string) string {
	sum := sha256.Sum256([]byte(token))
	return hex.EncodeToString(sum[:])
}

func same(a, b string) bool { return subtle.ConstantTimeCompare([]byte(a), []byte(b)) == 1 }

// Check returns nil when token is node's credential (its current one, or
// the one a rotation replaced within the grace), otherwise an *Error: 401
// for a credential that is malformed, unknown, revoked or rotated out, 403
// for another node's good credential. A node's first use of a rotated
// credential ends the old one's grace.
func (r *Registry) Check(node, token string) error {
	owner, ok := tokenNode(token)
	if !ok {
		return refuse(http.StatusUnauthorized, Malformed, "malformed credential: not a Fleetcast node credential (bootstrap the node, or issue one with `autoscaler token issue`)")
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	c, ok := r.byNode[owner]
	if !ok {
		return refuse(http.StatusUnauthorized, Unknown, "no credential was issued to node %q (or the controller lost its state): bootstrap again", owner)
	}
	h := hash(token)
	current := same(h, c.Hash)
	previous := c.Previous != "" && same(h, c.Previous) && r.now().Before(c.PreviousUntil)
	switch {
	case !c.Revoked.IsZero():
		return refuse(http.StatusUnauthorized, Revoked, "node %q's credential was revoked at %s: bootstrap again", owner, c.Revoked.UTC().Format(time.RFC3339))
	case !current && !previous:
		return refuse(http.StatusUnauthorized, Superseded, "not node %q's current credential (rotated out, or never issued)", owner)
	case owner != node:
		return refuse(http.StatusForbidden, WrongNode, "credential is node %q's, not %q's: an agent speaks only for its own node", owner, node)
	}
	if current && c.Previous != "" {
		// The node has the new credential: the old one is done.
		c.Previous, c.PreviousUntil = "", time.Time{}
		if err := r.store.PutCredential(c); err != nil {
			r.log.Warn("ending a rotated credential's grace", "node", owner, "error", err)
			return nil
		}
		r.byNode[owner] = c
	}
	return nil
}

// Issue issues node a new credential and returns it (shown once). Through
// the bootstrap secret (via ViaBootstrap) it is refused while the node
// holds a credential that is not revoked; an operator (ViaOperator)
// replaces any.
func (r *Registry) Issue(node, pool, via string) (string, state.Credential, error) {
	if node == "" {
		return "", state.Credential{}, refuse(http.StatusBadRequest, Malformed, "no node named")
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	old, had := r.byNode[node]
	if via == ViaBootstrap && had && old.Revoked.IsZero() {
		return "", state.Credential{}, refuse(http.StatusConflict, Registered,
			"node %q registered at %s (%s) and holds a credential: the bootstrap secret cannot get it another. If the node lost its credential, revoke it on the controller (`autoscaler token revoke %s`) and the node bootstraps again",
			node, old.Registered.UTC().Format(time.RFC3339), old.Via, node)
	}
	now := r.now().UTC()
	token := newToken(node)
	c := state.Credential{Node: node, Pool: pool, Hash: hash(token), Issued: now, Registered: now, Via: via}
	if err := r.store.PutCredential(c); err != nil {
		return "", state.Credential{}, fmt.Errorf("recording node %s's credential: %w", node, err)
	}
	r.byNode[node] = c
	r.log.Info("node credential issued", "node", node, "pool", pool, "via", via, "replaced", had)
	return token, c, nil
}

// Rotate exchanges node's credential token for a new one, which it
// returns. The old one stays good for the grace, or until the new one is
// first used.
func (r *Registry) Rotate(node, token string) (string, state.Credential, error) {
	if err := r.Check(node, token); err != nil {
		return "", state.Credential{}, err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	c := r.byNode[node]
	grace := r.Grace
	if grace <= 0 {
		grace = DefaultGrace
	}
	fresh := newToken(node)
	c.Previous, c.PreviousUntil = hash(token), r.now().Add(grace).UTC()
	c.Hash, c.Issued = hash(fresh), r.now().UTC()
	c.Rotations++
	if err := r.store.PutCredential(c); err != nil {
		return "", state.Credential{}, fmt.Errorf("recording node %s's rotated credential: %w", node, err)
	}
	r.byNode[node] = c
	r.log.Info("node credential rotated", "node", node, "rotations", c.Rotations)
	return fresh, c, nil
}

// Revoke revokes node's credential (and any a rotation replaced): it is
// refused from now on, and the node may bootstrap again.
func (r *Registry) Revoke(node string) (state.Credential, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	c, ok := r.byNode[node]
	if !ok {
		return state.Credential{}, refuse(http.StatusNotFound, Unknown, "no credential was issued to node %q", node)
	}
	if c.Revoked.IsZero() {
		c.Revoked = r.now().UTC()
		c.Previous, c.PreviousUntil = "", time.Time{}
		if err := r.store.PutCredential(c); err != nil {
			return state.Credential{}, fmt.Errorf("recording node %s's revocation: %w", node, err)
		}
		r.byNode[node] = c
		r.log.Warn("node credential revoked", "node", node)
	}
	return c, nil
}

// Forget drops the credentials of nodes gone from their clouds (instance
// IDs are not reused, so they speak for nothing).
func (r *Registry) Forget(nodes ...string) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	var known []string
	for _, n := range nodes {
		if _, ok := r.byNode[n]; ok {
			known = append(known, n)
		}
	}
	if len(known) == 0 {
		return nil
	}
	if err := r.store.DeleteCredentials(known...); err != nil {
		return fmt.Errorf("forgetting gone nodes' credentials: %w", err)
	}
	for _, n := range known {
		delete(r.byNode, n)
	}
	r.log.Info("credentials of gone nodes forgotten", "nodes", len(known))
	return nil
}

// List returns the credential records, by node, without their hashes.
func (r *Registry) List() []state.Credential {
	r.mu.Lock()
	out := make([]state.Credential, 0, len(r.byNode))
	for _, c := range r.byNode {
		c.Hash, c.Previous = "", ""
		out = append(out, c)
	}
	r.mu.Unlock()
	slices.SortFunc(out, func(a, b state.Credential) int { return strings.Compare(a.Node, b.Node) })
	return out
}
