// Package apiauth guards the controller's HTTP API: API tokens, each with
// a name and a scope, and the access each route asks of its caller.
//
// A token's scope is what its holder may do: a scheduler pushes demand
// (Demand), monitoring reads the fleet, its plans and forecasts (Read), an
// operator issues, revokes and replaces credentials and reads (Operator).
// Agents hold no API token: each holds its node's credential (nodeauth),
// good for that node's reports only. Every /v1/ route is registered on a
// Router with the Access it needs, so a route cannot be served without one.
//
// The controller keeps only the SHA-256 of each token's secret, as it does
// for node credentials: a copy of the state file holds no token.
package apiauth

import (
	"net/http"

	"github.com/fleetcast/autoscaler/agent/report"
)

// Scope is what an API token may do.
type Scope string

// The scopes.
const (
	// Demand pushes pending, announced and running demand
	// (POST /v1/demand).
	Demand Scope = "demand"
	// Read reads the fleet, its plans, forecasts and plugins.
	Read Scope = "read"
	// Operator issues, revokes and replaces node credentials, manages API
	// tokens, and may do all that Read and Demand may.
	Operator Scope = "operator"
)

// Scopes are the scopes, in the order the docs list them.
var Scopes = []Scope{Demand, Read, Operator}

// ParseScope reads a scope's name.
func ParseScope(s string) (Scope, error) {
	for _, sc := range Scopes {
		if string(sc) == s {
			return sc, nil
		}
	}
	return "", refuse(http.StatusBadRequest, Malformed, "scope %q: want demand, read or operator", s)
}

// Allows says whether a token of scope s may do what need asks: its own
// scope, or anything for an operator.
func (s Scope) Allows(need Scope) bool { return s == need || s == Operator }

// Access is what a route asks of its caller.
type Access string

// The accesses a route may ask.
const (
	// Public routes need nothing and carry no secret: /healthz, /readyz,
	// /metrics.
	Public Access = "public"
	// NeedRead routes need a token that may read (open on loopback when
	// the Router's OpenReads is set).
	NeedRead Access = "read"
	// NeedDemand routes need a token that may push demand.
	NeedDemand Access = "demand"
	// NeedOperator routes need an operator's token.
	NeedOperator Access = "operator"
	// Node routes take a node's own credential, which their handler checks
	// (nodeauth); every API token is refused there.
	Node Access = "node"
	// Bootstrap routes take an operator's token, or else what their handler
	// checks (a node's bootstrap secret and its cloud's signed identity); an
	// API token of another scope is refused.
	Bootstrap Access = "operator-or-bootstrap"
	// ReadOrSession routes are NeedRead routes for a browser: a request
	// with an Authorization header is judged as on a NeedRead route (open
	// when the Router's OpenReads is set), and one without it, off
	// loopback, goes to the handler, which takes a session of its own (the
	// web page's cookie, made from a read token) or sends the browser to
	// log in. No other route takes that session.
	ReadOrSession Access = "read-or-session"
)

// scope is the token scope an access needs; "" for the accesses whose
// handlers check the caller.
func (a Access) scope() Scope {
	switch a {
	case NeedRead, ReadOrSession:
		return Read
	case NeedDemand:
		return Demand
	case NeedOperator, Bootstrap:
		return Operator
	}
	return ""
}

// Code is the typed reason of a refusal, sent in the Fleetcast-Error
// header beside the reason in words.
type Code string

// The refusals' codes.
const (
	// NoToken: the route needs a token and the request has none.
	NoToken Code = "no-token"
	// BadToken: not a token this controller knows (wrong, revoked, or
	// rotated out).
	BadToken Code = "bad-token"
	// WrongScope: a good token whose scope does not allow the route.
	WrongScope Code = "wrong-scope"
	// Malformed: a request that does not parse or names nothing valid.
	Malformed Code = "malformed"
	// Exists: a token of that name exists already.
	Exists Code = "exists"
	// Unknown: no token of that name.
	Unknown Code = "unknown"
	// Root: the root token is not managed through the API.
	Root Code = "root"
)

// Error is a refusal: the HTTP status to answer with, its code and the
// reason in words.
type Error = report.Denial[Code]

func refuse(status int, code Code, format string, args ...any) *Error {
	return report.Deny(status, code, format, args...)
}
