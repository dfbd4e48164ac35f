package apiauth

import (
	"context"
	"net/http"

	"github.com/hashicorp/go-hclog"

	"github.com/fleetcast/autoscaler/agent/report"
)

// Route is a pattern the Router serves and the access it asks.
type Route struct {
	Pattern string
	Access  Access
}

// Router is an http.ServeMux whose every route says the access it needs
// (Handle takes one), and which checks it before the route's handler runs.
type Router struct {
	// Tokens are the API tokens; nil: none is good.
	Tokens *Tokens
	// OpenReads serves the NeedRead routes without a token (a controller
	// listening on loopback alone, unless run -loopback-reads=false).
	OpenReads bool
	Log       hclog.Logger

	mux    http.ServeMux
	routes []Route
}

// Handle serves pattern (http.ServeMux's syntax) with h, to callers that
// have access.
func (rt *Router) Handle(pattern string, access Access, h http.Handler) {
	rt.mux.Handle(pattern, rt.guard(pattern, access, h))
	rt.routes = append(rt.routes, Route{Pattern: pattern, Access: access})
}

// HandleFunc is Handle for a function.
func (rt *Router) HandleFunc(pattern string, access Access, h func(http.ResponseWriter, *http.Request)) {
	rt.Handle(pattern, access, http.HandlerFunc(h))
}

// Routes are the routes served, in the order they were added.
func (rt *Router) Routes() []Route { return append([]Route(nil), rt.routes...) }

// ServeHTTP serves a request.
func (rt *Router) ServeHTTP(w http.ResponseWriter, r *http.Request) { rt.mux.ServeHTTP(w, r) }

type callerKey struct{}

// Caller is the API token a request came with, once its route's access
// let it through; ok is false when it came with none (an open read, a node
// credential, a bootstrap).
func Caller(ctx context.Context) (Token, bool) {
	t, ok := ctx.Value(callerKey{}).(Token)
	return t, ok
}

func (rt *Router) log() hclog.Logger {
	if rt.Log == nil {
		return hclog.NewNullLogger()
	}
	return rt.Log
}

// guard wraps h with the check of access.
func (rt *Router) guard(pattern string, access Access, h http.Handler) http.Handler {
	need := access.scope()
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		reads := access == NeedRead || access == ReadOrSession
		if access == Public || reads && rt.OpenReads {
			if bearer, ok := report.BearerToken(r); ok && reads {
				rt.Tokens.Check(bearer) // counted as used, as off loopback
			}
			h.ServeHTTP(w, r)
			return
		}
		bearer, has := report.BearerToken(r)
		if access == ReadOrSession && r.Header.Get("Authorization") == "" {
			// A browser's request: its handler checks its session.
			h.ServeHTTP(w, r)
			return
		}
		tok, known := rt.Tokens.Check(bearer)
		switch {
		case known && (access == Node || !tok.Scope.Allows(need)):
			// A good token out of its scope: someone holds a token for
			// another job. Logged as the security event it may be.
			e := refuse(http.StatusForbidden, WrongScope, "API token %q has scope %s; %s needs %s", tok.Name, tok.Scope, pattern, needs(access))
			rt.log().Warn("API request refused", "route", pattern, "token", tok.Name, "scope", tok.Scope, "remote", r.RemoteAddr, "path", r.URL.Path)
			deny(w, e)
		case known:
			h.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), callerKey{}, tok)))
		case (access == Node || access == Bootstrap) && !IsAPIToken(bearer):
			// Their handlers check the node's credential, or its bootstrap.
			h.ServeHTTP(w, r)
		case !has:
			deny(w, refuse(http.StatusUnauthorized, NoToken, "%s needs an API token of scope %s: -H \"Authorization: Bearer $TOKEN\" (`autoscaler api-token create`)", pattern, needs(access)))
		default:
			rt.log().Info("API request refused: unknown token", "route", pattern, "remote", r.RemoteAddr)
			// An API token it does not hold (a stale one) is told so,
			// on a node's or a bootstrap's route too, rather than be
			// taken for a node's credential or bootstrap secret.
			deny(w, refuse(http.StatusUnauthorized, BadToken, "not an API token this controller holds (wrong, revoked, or rotated out): use a current one (`autoscaler api-token list`; the root token is in the controller's state directory)"))
		}
	})
}

// needs says in words what access asks, for a refusal.
func needs(a Access) string {
	switch a {
	case Node:
		return "the node's own credential (an API token speaks for no node)"
	case Bootstrap:
		return "operator (or a node's bootstrap)"
	case NeedRead, NeedDemand, ReadOrSession:
		return string(a.scope()) + " (or operator)"
	}
	return string(a.scope())
}

// deny answers a refusal, its code in report.CodeHeader.
func deny(w http.ResponseWriter, e *Error) {
	if e.Status == http.StatusUnauthorized {
		w.Header().Set("WWW-Authenticate", "Bearer")
	}
	report.Refuse(w, e, e.Status)
}
