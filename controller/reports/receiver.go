// Package reports is the controller's receiver for the agents' reports
// (the wire format is agent/report's): an http.Handler that authenticates
// each agent with a per-node credential, limits and validates every
// report, and answers with any drain the controller wants.
//
// An agent may report only about its own node (docs/design.md rule 11): its
// credential is its node's, so one node's is refused for another with 403.
// Drain and cordon state belong to the controller: the agent reports how a
// drain it was asked for is going, and the controller decides.
package reports

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/fleetcast/autoscaler/agent/report"
	"github.com/fleetcast/autoscaler/fleet"
)

// Credentials checks the agents' bearer credentials (nodeauth.Registry
// does).
type Credentials interface {
	// Check returns nil when token is node's credential. Otherwise its
	// error may say the status to answer with and a typed code (see
	// report.Refusal); other errors answer 401.
	Check(node, token string) error
}

// Receiver is the controller's endpoint for agent reports: POST
// /v1/agents/{node}/report with a bearer token. Every refusal is a 4xx with
// the reason as text and changes nothing; an accepted report goes to the
// Store and the answer back to the agent as JSON.
type Receiver struct {
	Credentials Credentials
	Store       report.Store
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
	// may hold (see report.Report.Validate).
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
		report.Refuse(w, err, http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(answer)
}

// refusal is a report.Refusal of this package's.
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

func (rc *Receiver) receive(w http.ResponseWriter, r *http.Request) (report.Answer, error) {
	node := r.PathValue("node")
	if node == "" {
		return report.Answer{}, refused(http.StatusNotFound, "no node in the path")
	}
	token, ok := report.BearerToken(r)
	if !ok {
		return report.Answer{}, &refusal{status: http.StatusUnauthorized, code: "malformed", reason: "missing bearer credential"}
	}
	if err := rc.Credentials.Check(node, token); err != nil {
		var rf report.Refusal
		if !errors.As(err, &rf) {
			err = &refusal{status: http.StatusUnauthorized, reason: err.Error()}
		}
		return report.Answer{}, err
	}
	limit := rc.MaxBytes
	if limit <= 0 {
		limit = 256 << 10
	}
	body, status, reason := report.ReadJSON(w, r, limit, "report")
	if status != http.StatusOK {
		return report.Answer{}, refused(status, "%s", reason)
	}
	var rep report.Report
	if err := fleet.DecodeJSON(body, &rep); err != nil {
		return report.Answer{}, refused(http.StatusBadRequest, "report: %v", err)
	}
	if rep.Node != node {
		return report.Answer{}, refused(http.StatusForbidden, "report is about node %q, sent for %q: an agent reports only about its own node", rep.Node, node)
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
		return report.Answer{}, refused(http.StatusUnprocessableEntity, "report: %v", err)
	}
	answer, err := rc.Store.Accept(r.Context(), &rep)
	if err != nil {
		if rc.Log != nil {
			rc.Log.Error("storing a report", "node", node, "error", err)
		}
		return report.Answer{}, refused(http.StatusInternalServerError, "the controller could not take the report; send it again")
	}
	return answer, nil
}
