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
	"cmp"
	"crypto/subtle"
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
	// BadSecret: the bootstrap secret (or an operator's API token) is
	// wrong or missing.
	BadSecret Code = "bad-secret"
	// BadIdentity: the instance's identity does not check out.
	BadIdentity Code = "bad-identity"
	// NotLive: the instance is no live instance of a managed pool.
	NotLive Code = "not-live"
	// Disabled: bootstrapping is not configured on this controller.
	Disabled Code = "disabled"
	// Busy: the controller is checking as many identities as it will at
	// once; try again shortly.
	Busy Code = "busy"
)

// Error is a refusal: the HTTP status to answer with, its code and the
// reason in words.
type Error = report.Denial[Code]

func refuse(status int, code Code, format string, args ...any) *Error {
	return report.Deny(status, code, format, args...)
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

func same(a, b string) bool { return subtle.ConstantTimeCompare([]byte(a), []byte(b)) == 1 }

// Check returns nil when token is node's credential (its current one, or
// the one a rotation replaced within the grace), otherwise an *Error: 401
// for a credential that is malformed, unknown, revoked or rotated out, 403
// for another node's good credential. A node's first use of a rotated
// credential ends the old one's grace.
func (r *Registry) Check(node, token string) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	_, _, err := r.checkLocked(node, token)
	return err
}

// checkLocked is Check with r.mu held; it returns the node's record and
// whether token is its current credential (not the one in grace).
func (r *Registry) checkLocked(node, token string) (state.Credential, bool, error) {
	owner, ok := report.CredentialNode(token)
	if !ok {
		return state.Credential{}, false, refuse(http.StatusUnauthorized, Malformed, "malformed credential: not a Fleetcast node credential (bootstrap the node, or issue one with `autoscaler token issue`)")
	}
	c, ok := r.byNode[owner]
	if !ok {
		return state.Credential{}, false, refuse(http.StatusUnauthorized, Unknown, "no credential was issued to this node (or the controller lost its state): bootstrap again")
	}
	h := report.Hash(token)
	current := same(h, c.Hash)
	previous := c.Previous != "" && same(h, c.Previous) && r.now().Before(c.PreviousUntil)
	switch {
	case !c.Revoked.IsZero():
		return state.Credential{}, false, refuse(http.StatusUnauthorized, Revoked, "the node's credential was revoked: bootstrap again")
	case !current && !previous:
		return state.Credential{}, false, refuse(http.StatusUnauthorized, Superseded, "not the node's current credential (rotated out, or never issued)")
	case owner != node:
		return state.Credential{}, false, refuse(http.StatusForbidden, WrongNode, "credential is node %q's, not %q's: an agent speaks only for its own node", owner, node)
	}
	if current && c.Previous != "" {
		// The node has the new credential: the old one is done.
		c.Previous, c.PreviousUntil = "", time.Time{}
		if err := r.store.PutCredential(c); err != nil {
			r.log.Warn("ending a rotated credential's grace", "node", owner, "error", err)
		} else {
			r.byNode[owner] = c
		}
	}
	return c, current, nil
}

// Issue issues node a new credential and returns it (shown once).
//
// It is refused while the node holds a credential that is not revoked:
// its agent would be cut off (an operator replaces one with Replace).
// Through the bootstrap secret (via ViaBootstrap), after a revocation only
// the node that first registered may bootstrap again, proved by its
// bootstrap nonce (nonce is its hash; the first bootstrap binds it), so a
// copy of the instance's identity document cannot take the node over. An
// operator (ViaOperator) issues for a revoked or new node, keeping the
// nonce.
func (r *Registry) Issue(node, pool, via, nonce string) (string, state.Credential, error) {
	return r.issue(node, pool, via, nonce, Machine{}, "")
}

// Machine is the machine a bootstrap proved, where the cloud names it: its
// ID (a Compute Engine instance's numeric ID) and when it was created, on
// the cloud's clock.
type Machine struct {
	ID      string
	Created time.Time
}

// Bootstrap is Issue through the bootstrap secret or a cloud's signed
// identity (ViaBootstrap), with the machine that proved it, where the
// cloud names one. A node whose record names another, older machine was
// given a new one under its name (a managed instance group recreated or
// autohealed it): the new machine's agent registers afresh, and the old
// credential, the old machine's, is replaced. An older machine (a copy of
// the old one's identity) never takes the name back; for a record that
// names no machine (or no creation time), a machine made after the node
// registered is a new one.
func (r *Registry) Bootstrap(node, pool, nonce string, m Machine) (string, state.Credential, error) {
	return r.issue(node, pool, ViaBootstrap, nonce, m, "")
}

// Replace is an operator's Issue that replaces the node's credential even
// while it is good (its agent lost its files, or is not the node's): the
// agent that holds it is refused from then on. replaced says whether the
// node held a good credential.
func (r *Registry) Replace(node string) (token string, c state.Credential, replaced bool, err error) {
	r.mu.Lock()
	old, had := r.byNode[node]
	r.mu.Unlock()
	token, c, err = r.issue(node, "", ViaOperator, "", Machine{}, old.Hash)
	return token, c, err == nil && had && old.Revoked.IsZero(), err
}

// issue issues node a credential. An operator's issue (via ViaOperator)
// replaces a good credential only when replace is its hash, as the caller
// saw it: a credential issued since is not replaced unseen.
func (r *Registry) issue(node, pool, via, nonce string, m Machine, replace string) (string, state.Credential, error) {
	if node == "" || len(node) > report.MaxNode {
		return "", state.Credential{}, refuse(http.StatusBadRequest, Malformed, "a node name of 1 to %d bytes is needed", report.MaxNode)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	old, had := r.byNode[node]
	if had && via == ViaBootstrap && m.ID != "" && !m.Created.IsZero() && m.ID != old.Instance && m.Created.After(cmp.Or(old.InstanceCreated, old.Registered)) {
		// A newer machine under the name, as the cloud signed it: the
		// old one was replaced (recreated), and this is a new node.
		r.log.Warn("node recreated: a newer machine under its name registers afresh", "node", node, "instance", m.ID, "was", old.Instance)
		had = false
	}
	if via == ViaOperator && had && old.Revoked.IsZero() && (replace == "" || replace != old.Hash) {
		return "", state.Credential{}, refuse(http.StatusConflict, Registered,
			"node %q registered at %s (%s) and holds a good credential: issuing another cuts its agent off. If that is what you want (its agent lost its files, or is not the node's), run `autoscaler token issue -replace REASON %s`",
			node, old.Registered.UTC().Format(time.RFC3339), old.Via, node)
	}
	if via == ViaBootstrap && had {
		switch {
		case old.Revoked.IsZero():
			return "", state.Credential{}, refuse(http.StatusConflict, Registered,
				"node %q registered at %s (%s) and holds a credential: the bootstrap secret cannot get it another. If its agent lost its files, or this agent is not the one that registered, an operator runs `autoscaler token revoke -forget %s` (and reads the controller's log for who registered)",
				node, old.Registered.UTC().Format(time.RFC3339), old.Via, node)
		case old.Nonce == "" || !same(nonce, old.Nonce):
			// A record with no nonce bound (an operator's) proves no agent:
			// only an operator's forget opens it to a bootstrap.
			return "", state.Credential{}, refuse(http.StatusConflict, Registered,
				"node %q was revoked, and only the agent that registered it (by its bootstrap nonce) may bootstrap it again. If that agent lost its files, an operator lets any bootstrap it with `autoscaler token revoke -forget %s`",
				node, node)
		}
	}
	now := r.now().UTC()
	token := report.NewCredential(node)
	c := state.Credential{Node: node, Pool: pool, Hash: report.Hash(token), Issued: now, Registered: now, Via: via, Nonce: nonce, Instance: m.ID, InstanceCreated: m.Created}
	if had {
		if c.Nonce == "" {
			c.Nonce = old.Nonce
		}
		if c.Instance == "" {
			c.Instance, c.InstanceCreated = old.Instance, old.InstanceCreated
		}
		if old.Revoked.IsZero() {
			c.Registered = old.Registered
		}
	}
	if err := r.store.PutCredential(c); err != nil {
		return "", state.Credential{}, fmt.Errorf("recording node %s's credential: %w", node, err)
	}
	r.byNode[node] = c
	r.log.Info("node credential issued", "node", node, "pool", pool, "via", via, "replaced", had)
	return token, c, nil
}

// Rotate replaces node's credential token, which must be its current one,
// with the one whose hash is next (the agent made it and keeps it first, so
// a lost answer costs nothing). The old one stays good for the grace, or
// until the new one is first used.
func (r *Registry) Rotate(node, token, next string) (state.Credential, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	// The caller first: nobody else learns what a rotation takes.
	c, current, err := r.checkLocked(node, token)
	if err != nil {
		return state.Credential{}, err
	}
	if len(next) != 64 || strings.Trim(next, "0123456789abcdef") != "" {
		return state.Credential{}, refuse(http.StatusBadRequest, Malformed, "rotation: next must be the hex SHA-256 of the new credential")
	}
	if !current && same(next, c.Hash) {
		// The same rotation again (its answer was lost): already done.
		return c, nil
	}
	if !current {
		return state.Credential{}, refuse(http.StatusUnauthorized, Superseded, "rotation: only the node's current credential rotates (this one was rotated out)")
	}
	grace := r.Grace
	if grace <= 0 {
		grace = DefaultGrace
	}
	c.Previous, c.PreviousUntil = c.Hash, r.now().Add(grace).UTC()
	c.Hash, c.Issued = next, r.now().UTC()
	c.Rotations++
	if err := r.store.PutCredential(c); err != nil {
		return state.Credential{}, fmt.Errorf("recording node %s's rotated credential: %w", node, err)
	}
	r.byNode[node] = c
	r.log.Info("node credential rotated", "node", node, "rotations", c.Rotations)
	return c, nil
}

// Revoke revokes node's credential (and any a rotation replaced): it is
// refused from now on, and the agent that registered the node may
// bootstrap again. With forget, the record goes too, so that any agent
// with the secret and the instance's identity may (the node lost its
// files).
func (r *Registry) Revoke(node string, forget bool) (state.Credential, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	c, ok := r.byNode[node]
	if !ok {
		return state.Credential{}, refuse(http.StatusNotFound, Unknown, "no credential was issued to node %q", node)
	}
	if c.Revoked.IsZero() {
		c.Revoked = r.now().UTC()
	}
	c.Previous, c.PreviousUntil = "", time.Time{}
	if forget {
		if err := r.store.DeleteCredentials(node); err != nil {
			return state.Credential{}, fmt.Errorf("forgetting node %s's credential: %w", node, err)
		}
		delete(r.byNode, node)
		r.log.Warn("node credential revoked and forgotten", "node", node)
		return c, nil
	}
	if err := r.store.PutCredential(c); err != nil {
		return state.Credential{}, fmt.Errorf("recording node %s's revocation: %w", node, err)
	}
	r.byNode[node] = c
	r.log.Warn("node credential revoked", "node", node)
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

// PoolOf is the pool node's credential was bootstrapped for; "" for
// none (issued by an operator, or no credential).
func (r *Registry) PoolOf(node string) string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.byNode[node].Pool
}

// List returns the credential records, by node, without their hashes.
func (r *Registry) List() []state.Credential {
	r.mu.Lock()
	out := make([]state.Credential, 0, len(r.byNode))
	for _, c := range r.byNode {
		c.Hash, c.Previous, c.Nonce = "", "", ""
		out = append(out, c)
	}
	r.mu.Unlock()
	slices.SortFunc(out, func(a, b state.Credential) int { return strings.Compare(a.Node, b.Node) })
	return out
}
