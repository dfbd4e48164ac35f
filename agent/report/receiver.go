package report

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"strings"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/fleetcast/autoscaler/fleet"
)

// Credentials checks the agents' bearer credentials (nodeauth.Registry
// does).
type Credentials interface {
	// Check returns nil when token is node's credential. Otherwise its
	// error may say the status to answer with and a typed code (see
	// Refusal); other errors answer 401.
	Check(node, token string) error
}

// Refusal is an error that carries the HTTP status to answer with and a
// typed code for CodeHeader.
type Refusal interface {
	error
	HTTPStatus() int
	ErrorCode() string
}

// Denial is a refusal of a request: the HTTP status to answer with, its
// typed code (C, a package's own code type) and the reason in words. It is
// a Refusal; nodeauth.Error and apiauth.Error are Denials.
type Denial[C ~string] struct {
	Status int
	Code   C
	Reason string
}

func (e *Denial[C]) Error() string { return e.Reason }

// HTTPStatus is the status to answer with.
func (e *Denial[C]) HTTPStatus() int { return e.Status }

// ErrorCode is the refusal's code.
func (e *Denial[C]) ErrorCode() string { return string(e.Code) }

// Deny returns a Denial with the reason format makes of args.
func Deny[C ~string](status int, code C, format string, args ...any) *Denial[C] {
	return &Denial[C]{Status: status, Code: code, Reason: fmt.Sprintf(format, args...)}
}

// WriteJSON answers v as indented JSON, never cached (answers may hold
// secrets shown once).
func WriteJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.Encode(v)
}

// Refuse answers a refused request: the status and code of err when it is
// a Refusal (else fallback and no code), the reason as text.
func Refuse(w http.ResponseWriter, err error, fallback int) {
	status := fallback
	var r Refusal
	if errors.As(err, &r) {
		status = r.HTTPStatus()
		w.Header().Set(CodeHeader, r.ErrorCode())
	}
	http.Error(w, err.Error(), status)
}

// BearerToken returns the request's bearer token; ok is false when it has
// none.
func BearerToken(r *http.Request) (token string, ok bool) {
	token, ok = strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	return token, ok && token != ""
}

// ReadJSON reads a JSON request body of at most limit bytes. Otherwise it
// returns the 4xx status and the reason for the caller to answer with: 415
// when the body is not declared JSON, 413 when it is too large, 400 when it
// cannot be read. what names the body in reasons ("report").
func ReadJSON(w http.ResponseWriter, r *http.Request, limit int64, what string) (body []byte, status int, reason string) {
	if mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type")); err != nil || mt != "application/json" {
		return nil, http.StatusUnsupportedMediaType, "want Content-Type: application/json"
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, limit))
	if err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			return nil, http.StatusRequestEntityTooLarge, fmt.Sprintf("%s is larger than %d bytes", what, limit)
		}
		return nil, http.StatusBadRequest, "reading the " + what + ": " + err.Error()
	}
	return body, http.StatusOK, ""
}

// Store takes accepted reports and returns the answer for the agent: any
// drain the controller wants of the node. It must be safe for concurrent
// use.
type Store interface {
	Accept(ctx context.Context, r *Report) (Answer, error)
}

// Receiver is the controller's endpoint for agent reports: POST
// /v1/agents/{node}/report with a bearer token. Every refusal is a 4xx with
// the reason as text and changes nothing; an accepted report goes to the
// Store and the answer back to the agent as JSON.
type Receiver struct {
	Credentials Credentials
	Store       Store
	// Now is the controller's clock (time.Now when nil).
	Now func() time.Time
	// MaxBytes bounds a report's body (256 KiB when 0).
	MaxBytes int64
	// Skew is how far ahead of the controller's clock a report's times may
	// be (5 minutes when 0).
	Skew time.Duration
	// Log gets refusals at debug level and store failures at error level.
	Log hclog.Logger
	// NodeGPUs, if set, returns the GPUs the node's pool gives each node (0
	// when the node is not known yet): the most an unhealthy report's jobs
	// may hold (see Report.Validate).
	NodeGPUs func(node string) int
}

// Pattern is the route the receiver serves, for an http.ServeMux.
const Pattern = "POST /v1/agents/{node}/report"

// Handler returns a handler serving the receiver at Pattern.
func (rc *Receiver) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.Handle(Pattern, rc)
	return mux
}

// ServeHTTP handles one report. The node comes from the request's path
// value "node" (see Pattern).
func (rc *Receiver) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	answer, err := rc.receive(w, r)
	if err != nil {
		if rc.Log != nil {
			rc.Log.Debug("report refused", "node", r.PathValue("node"), "reason", err)
		}
		Refuse(w, err, http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(answer)
}

// refusal is a Refusal of this package's.
type refusal struct {
	status       int
	code, reason string
}

func (r *refusal) Error() string     { return r.reason }
func (r *refusal) HTTPStatus() int   { return r.status }
func (r *refusal) ErrorCode() string { return r.code }

func refused(status int, format string, args ...any) error {
	return &refusal{status: status, reason: fmt.Sprintf(format, args...)}
}

func (rc *Receiver) receive(w http.ResponseWriter, r *http.Request) (Answer, error) {
	node := r.PathValue("node")
	if node == "" {
		return Answer{}, refused(http.StatusNotFound, "no node in the path")
	}
	token, ok := BearerToken(r)
	if !ok {
		return Answer{}, &refusal{status: http.StatusUnauthorized, code: "malformed", reason: "missing bearer credential"}
	}
	if err := rc.Credentials.Check(node, token); err != nil {
		var rf Refusal
		if !errors.As(err, &rf) {
			err = &refusal{status: http.StatusUnauthorized, reason: err.Error()}
		}
		return Answer{}, err
	}
	limit := rc.MaxBytes
	if limit <= 0 {
		limit = 256 << 10
	}
	body, status, reason := ReadJSON(w, r, limit, "report")
	if status != http.StatusOK {
		return Answer{}, refused(status, "%s", reason)
	}
	var rep Report
	if err := fleet.DecodeJSON(body, &rep); err != nil {
		return Answer{}, refused(http.StatusBadRequest, "report: %v", err)
	}
	if rep.Node != node {
		return Answer{}, refused(http.StatusForbidden, "report is about node %q, sent for %q: an agent reports only about its own node", rep.Node, node)
	}
	now := time.Now
	if rc.Now != nil {
		now = rc.Now
	}
	skew := rc.Skew
	if skew <= 0 {
		skew = 5 * time.Minute
	}
	nodeGPUs := 0
	if rc.NodeGPUs != nil {
		nodeGPUs = rc.NodeGPUs(node)
	}
	if err := rep.Validate(now(), skew, nodeGPUs); err != nil {
		return Answer{}, refused(http.StatusUnprocessableEntity, "report: %v", err)
	}
	answer, err := rc.Store.Accept(r.Context(), &rep)
	if err != nil {
		if rc.Log != nil {
			rc.Log.Error("storing a report", "node", node, "error", err)
		}
		return Answer{}, refused(http.StatusInternalServerError, "the controller could not take the report; send it again")
	}
	return answer, nil
}
