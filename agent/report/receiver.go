package report

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
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

// Tokens issues and checks per-node credentials. A node's token names the
// node and carries an HMAC-SHA256 of the name under the controller's
// secret, so the controller issues a token for any node without storing
// it, and a token is good for its node only.
type Tokens struct {
	secret []byte
}

// NewTokens makes a token issuer; the secret must be at least 32 bytes.
func NewTokens(secret []byte) (*Tokens, error) {
	if len(secret) < 32 {
		return nil, fmt.Errorf("token secret: %d bytes, want at least 32", len(secret))
	}
	return &Tokens{secret: append([]byte(nil), secret...)}, nil
}

// For returns the token of a node.
func (t *Tokens) For(node string) string {
	return base64.RawURLEncoding.EncodeToString([]byte(node)) + "." + hex.EncodeToString(t.mac(node))
}

// Node returns the node a token was issued for, or an error when the token
// is malformed or was not issued by this controller.
func (t *Tokens) Node(token string) (string, error) {
	name, sum, ok := strings.Cut(token, ".")
	if !ok {
		return "", errors.New("malformed token")
	}
	node, err := base64.RawURLEncoding.DecodeString(name)
	if err != nil {
		return "", errors.New("malformed token")
	}
	got, err := hex.DecodeString(sum)
	if err != nil || !hmac.Equal(got, t.mac(string(node))) {
		return "", errors.New("token not issued by this controller")
	}
	return string(node), nil
}

func (t *Tokens) mac(node string) []byte {
	m := hmac.New(sha256.New, t.secret)
	m.Write([]byte(node))
	return m.Sum(nil)
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
	Tokens *Tokens
	Store  Store
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
	status, reason, answer := rc.receive(w, r)
	if status != http.StatusOK {
		if rc.Log != nil {
			rc.Log.Debug("report refused", "node", r.PathValue("node"), "status", status, "reason", reason)
		}
		http.Error(w, reason, status)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(answer)
}

func (rc *Receiver) receive(w http.ResponseWriter, r *http.Request) (int, string, Answer) {
	node := r.PathValue("node")
	if node == "" {
		return http.StatusNotFound, "no node in the path", Answer{}
	}
	token, ok := BearerToken(r)
	if !ok {
		return http.StatusUnauthorized, "missing bearer token", Answer{}
	}
	owner, err := rc.Tokens.Node(token)
	if err != nil {
		return http.StatusUnauthorized, err.Error(), Answer{}
	}
	if owner != node {
		return http.StatusForbidden, fmt.Sprintf("token is for node %q, not %q: an agent reports only about its own node", owner, node), Answer{}
	}
	limit := rc.MaxBytes
	if limit <= 0 {
		limit = 256 << 10
	}
	body, status, reason := ReadJSON(w, r, limit, "report")
	if status != http.StatusOK {
		return status, reason, Answer{}
	}
	var rep Report
	if err := fleet.DecodeJSON(body, &rep); err != nil {
		return http.StatusBadRequest, "report: " + err.Error(), Answer{}
	}
	if rep.Node != node {
		return http.StatusForbidden, fmt.Sprintf("report is about node %q, sent for %q: an agent reports only about its own node", rep.Node, node), Answer{}
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
		return http.StatusUnprocessableEntity, "report: " + err.Error(), Answer{}
	}
	answer, err := rc.Store.Accept(r.Context(), &rep)
	if err != nil {
		if rc.Log != nil {
			rc.Log.Error("storing a report", "node", node, "error", err)
		}
		return http.StatusInternalServerError, "the controller could not take the report; send it again", Answer{}
	}
	return http.StatusOK, "", answer
}
