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
)

// Store takes accepted reports and returns the answer for the agent: any
// drain the controller wants of the node (the controller's agents view,
// behind its receiver, controller/reports). It must be safe for concurrent
// use.
type Store interface {
	Accept(ctx context.Context, r *Report) (Answer, error)
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
