package agent

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"time"

	"github.com/fleetcast/autoscaler/agent/report"
)

// Link is how the agent's reports to its controller are going, as its
// reporter last found: what `autoscaler-agent status` shows beside the
// report.
type Link struct {
	// Controller is the controller's URL; empty before the reporter runs.
	Controller string `json:"controller,omitempty"`
	// LastAttempt is when the agent last sent a report, LastSuccess when
	// the controller last took one; LastError is why the last attempt
	// failed (empty when it did not).
	LastAttempt time.Time `json:"last_attempt,omitzero"`
	LastSuccess time.Time `json:"last_success,omitzero"`
	LastError   string    `json:"last_error,omitempty"`
	// CredentialIssued is when the node's credential file was last
	// written (a bootstrap, a rotation, an operator's issue); zero when
	// there is none.
	CredentialIssued time.Time `json:"credential_issued,omitzero"`
}

// Status is what the agent knows: the report it would send now (its
// jobs, their checkpoints, the drain, the GPUs) and how its reports are
// going.
type Status struct {
	report.Report
	Link Link `json:"link"`
	// At is when the status was taken, by the agent's clock.
	At time.Time `json:"at"`
}

// Status returns what the agent knows now.
func (a *Agent) Status() Status {
	s := Status{Report: a.Report(), At: a.cfg.Now()}
	a.linkMu.Lock()
	s.Link = a.link
	a.linkMu.Unlock()
	return s
}

// noteReport records a report's attempt at time at, and its error (nil:
// the controller took it).
func (a *Agent) noteReport(controller string, at time.Time, err error, credentialIssued time.Time) {
	a.linkMu.Lock()
	defer a.linkMu.Unlock()
	a.link.Controller, a.link.LastAttempt, a.link.CredentialIssued = controller, at, credentialIssued
	if err != nil {
		a.link.LastError = err.Error()
		return
	}
	a.link.LastSuccess, a.link.LastError = at, ""
}

// Status reads what the agent knows.
func (c *Client) Status(ctx context.Context) (Status, error) {
	var s Status
	body, err := c.do(ctx, http.MethodGet, "/v1/status", nil)
	if err != nil {
		return s, err
	}
	if err := json.Unmarshal(body, &s); err != nil {
		return s, fmt.Errorf("agent: its status: %w", err)
	}
	return s, nil
}
