package apiauth

import (
	"errors"
	"net/http"
	"time"

	"github.com/fleetcast/autoscaler/agent/report"
	"github.com/fleetcast/autoscaler/fleet"
)

// The routes of API tokens, an operator's alone.
const (
	ListPattern   = "GET /v1/api-tokens"
	CreatePattern = "POST /v1/api-tokens"
	RotatePattern = "POST /v1/api-tokens/{name}/rotate"
	RevokePattern = "DELETE /v1/api-tokens/{name}"
)

// CreateRequest is the body of POST /v1/api-tokens.
type CreateRequest struct {
	Name  string `json:"name"`
	Scope Scope  `json:"scope"`
}

// RotateRequest is the body of a rotation (it may be empty).
type RotateRequest struct {
	// Grace is how long the old secret stays good ("1h"; empty or "0":
	// it is refused at once), at most MaxGrace.
	Grace string `json:"grace,omitempty"`
}

// Answer is the answer to a creation or rotation: the token's secret,
// shown once.
type Answer struct {
	Name          string    `json:"name"`
	Scope         Scope     `json:"scope"`
	Token         string    `json:"token"`
	Created       time.Time `json:"created"`
	PreviousUntil time.Time `json:"previous_until,omitzero"`
}

// Routes adds the API tokens' routes to rt, for operators.
func (t *Tokens) Routes(rt *Router) {
	rt.HandleFunc(ListPattern, NeedOperator, func(w http.ResponseWriter, r *http.Request) { report.WriteJSON(w, t.List()) })
	rt.HandleFunc(CreatePattern, NeedOperator, t.create)
	rt.HandleFunc(RotatePattern, NeedOperator, t.rotate)
	rt.HandleFunc(RevokePattern, NeedOperator, t.revoke)
}

// fail answers err: a refusal with its status and code, else 500.
func fail(w http.ResponseWriter, err error) {
	var e *Error
	if errors.As(err, &e) {
		deny(w, e)
		return
	}
	http.Error(w, "the controller could not do it: "+err.Error(), http.StatusInternalServerError)
}

// decode reads r's JSON body into v; an empty body leaves v as it is.
func decode(w http.ResponseWriter, r *http.Request, v any) error {
	if r.ContentLength == 0 {
		return nil
	}
	body, status, reason := report.ReadJSON(w, r, 4<<10, "request")
	if status != http.StatusOK {
		return refuse(status, Malformed, "%s", reason)
	}
	if len(body) == 0 {
		return nil
	}
	if err := fleet.DecodeJSON(body, v); err != nil {
		return refuse(http.StatusBadRequest, Malformed, "%v", err)
	}
	return nil
}

// by is the name of the token r came with.
func by(r *http.Request) string {
	tok, _ := Caller(r.Context())
	return tok.Name
}

func (t *Tokens) create(w http.ResponseWriter, r *http.Request) {
	var req CreateRequest
	if err := decode(w, r, &req); err != nil {
		fail(w, err)
		return
	}
	secret, rec, err := t.Create(req.Name, req.Scope, by(r))
	if err != nil {
		fail(w, err)
		return
	}
	report.WriteJSON(w, Answer{Name: rec.Name, Scope: Scope(rec.Scope), Token: secret, Created: rec.Created})
}

func (t *Tokens) rotate(w http.ResponseWriter, r *http.Request) {
	var req RotateRequest
	if err := decode(w, r, &req); err != nil {
		fail(w, err)
		return
	}
	var grace time.Duration
	if req.Grace != "" {
		var err error
		if grace, err = fleet.ParseDuration(req.Grace); err != nil {
			fail(w, refuse(http.StatusBadRequest, Malformed, "grace: %v", err))
			return
		}
	}
	secret, rec, err := t.Rotate(r.PathValue("name"), grace, by(r))
	if err != nil {
		fail(w, err)
		return
	}
	report.WriteJSON(w, Answer{Name: rec.Name, Scope: Scope(rec.Scope), Token: secret, Created: rec.Created, PreviousUntil: rec.PreviousUntil})
}

func (t *Tokens) revoke(w http.ResponseWriter, r *http.Request) {
	rec, err := t.Revoke(r.PathValue("name"), by(r))
	if err != nil {
		fail(w, err)
		return
	}
	report.WriteJSON(w, Listed{Name: rec.Name, Scope: Scope(rec.Scope), Created: rec.Created, Rotated: rec.Rotated, Rotations: rec.Rotations, By: rec.By})
}
