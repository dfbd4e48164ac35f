package agent

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/fleetcast/autoscaler/fleet"
)

// JobRequest registers a job through the local API.
type JobRequest struct {
	ID   string `json:"id"`
	GPUs []int  `json:"gpus"`
	PIDs []int  `json:"pids"`
	// Checkpoints, when set, is a glob of the job's checkpoint files: a
	// newer file counts as a checkpoint.
	Checkpoints string `json:"checkpoints,omitempty"`
	// ExpectedEnd, when set, is when the job expects to end (its
	// scheduler's time limit): a hint the controller may wait for instead
	// of launching for pending jobs, or instead of draining the node when
	// it is soon, never a reason to drain.
	ExpectedEnd time.Time `json:"expected_end,omitzero"`
	// Team, Tier and Name, when set, say who the job belongs to, its
	// class of service and what its owner calls it: labels
	// (fleet.ValidLabel) that attribute its cost and queue time.
	Team string `json:"team,omitempty"`
	Tier string `json:"tier,omitempty"`
	Name string `json:"name,omitempty"`
	// Submitted, when set, is when the job was submitted to its
	// scheduler, for its queue time: not after the job's start (its
	// first registration), by the agent's clock.
	Submitted time.Time `json:"submitted,omitzero"`
}

// Handler serves the local API, for jobs and their launchers (serve it
// with NewLocalServer, which tells it who each caller is: see peer.go):
//
//	POST   /v1/jobs                   register a job (JobRequest); 409 on a draining node
//	DELETE /v1/jobs/{id}              a job ended
//	POST   /v1/jobs/{id}/checkpoint   a job saved its state
//	POST   /v1/notice?deadline=RFC3339  a spot interruption notice: checkpoint now
//	GET    /v1/report                 the report the controller would get
//	GET    /metrics                   Prometheus metrics
func (a *Agent) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/jobs", func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, 64<<10))
		if err != nil {
			http.Error(w, "reading the request: "+err.Error(), http.StatusRequestEntityTooLarge)
			return
		}
		var req JobRequest
		if err := fleet.DecodeJSON(body, &req); err != nil {
			http.Error(w, "job: "+err.Error(), http.StatusBadRequest)
			return
		}
		if err := a.registerJob(req, callerOf(r)); err != nil {
			status := http.StatusUnprocessableEntity
			var draining *DrainingError
			var no *ForbiddenError
			switch {
			case errors.As(err, &draining):
				status = http.StatusConflict
			case errors.As(err, &no):
				status = http.StatusForbidden
			}
			http.Error(w, err.Error(), status)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	})
	mux.HandleFunc("DELETE /v1/jobs/{id}", func(w http.ResponseWriter, r *http.Request) {
		if err := a.unregister(r.PathValue("id"), callerOf(r)); err != nil {
			http.Error(w, err.Error(), notFoundOrForbidden(err))
			return
		}
		w.WriteHeader(http.StatusNoContent)
	})
	mux.HandleFunc("POST /v1/jobs/{id}/checkpoint", func(w http.ResponseWriter, r *http.Request) {
		if err := a.checkpoint(r.PathValue("id"), callerOf(r)); err != nil {
			http.Error(w, err.Error(), notFoundOrForbidden(err))
			return
		}
		w.WriteHeader(http.StatusNoContent)
	})
	mux.HandleFunc("POST /v1/notice", func(w http.ResponseWriter, r *http.Request) {
		if c := callerOf(r); c.restricted {
			http.Error(w, fmt.Sprintf("an interruption notice signals every job: only root or the agent's user may send one, not user %d", c.uid), http.StatusForbidden)
			return
		}
		deadline, err := time.Parse(time.RFC3339, r.URL.Query().Get("deadline"))
		if err != nil {
			http.Error(w, "deadline: want an RFC 3339 time", http.StatusBadRequest)
			return
		}
		if err := a.Notice(deadline); err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	})
	mux.Handle("GET /metrics", a.MetricsHandler())
	mux.HandleFunc("GET /v1/report", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(a.Report())
	})
	mux.HandleFunc("GET /v1/status", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(a.Status())
	})
	return mux
}

// notFoundOrForbidden is the status of a refused action on a job.
func notFoundOrForbidden(err error) int {
	var no *ForbiddenError
	if errors.As(err, &no) {
		return http.StatusForbidden
	}
	return http.StatusNotFound
}

// SocketAccess is who may use the local API's unix socket: its permission
// bits and its group. Connecting to a unix socket takes write permission
// on it, so 0600 lets the agent's own user alone register jobs, and 0660
// the members of the socket's group too.
type SocketAccess struct {
	// Mode is the socket's permission bits: at most 0777, and the owner
	// may read and write.
	Mode fs.FileMode
	// GID is the socket's group; -1 keeps the group it is created with
	// (the agent's own).
	GID int
}

// Validate says what is wrong with the access, if anything.
func (s SocketAccess) Validate() error {
	switch {
	case s.Mode&^fs.ModePerm != 0:
		return fmt.Errorf("mode %#o: want permission bits, at most 0777", uint32(s.Mode))
	case s.Mode&0o600 != 0o600:
		return fmt.Errorf("mode %#o: the owner must be able to read and write", uint32(s.Mode))
	case s.GID < -1:
		return fmt.Errorf("group ID %d: want a group ID, or -1 for the agent's own group", s.GID)
	}
	return nil
}

// ListenUnix listens on a unix socket at path that only its owner may use
// (mode 0600 from the moment it exists), replacing a stale socket left by
// an agent that died, in a directory it creates when missing.
func ListenUnix(path string) (net.Listener, error) {
	return ListenUnixAccess(path, SocketAccess{Mode: 0o600, GID: -1})
}

// ListenUnixAccess is ListenUnix for a socket that others may use too:
// created with mode 0600, it is given its group and then its mode, so it is
// never open to more than access allows. A socket that cannot be given
// them is removed, and the error says why.
func ListenUnixAccess(path string, access SocketAccess) (net.Listener, error) {
	if err := access.Validate(); err != nil {
		return nil, fmt.Errorf("agent socket %s: %w", path, err)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return nil, fmt.Errorf("agent socket %s: %w", path, err)
	}
	if err := os.Remove(path); err != nil && !os.IsNotExist(err) {
		return nil, fmt.Errorf("agent socket %s: %w", path, err)
	}
	old := syscall.Umask(0o177)
	l, err := net.Listen("unix", path)
	syscall.Umask(old)
	if err != nil {
		return nil, fmt.Errorf("agent socket %s: %w", path, err)
	}
	fail := func(err error) (net.Listener, error) {
		l.Close() // removes the socket's file
		return nil, fmt.Errorf("agent socket %s: %w", path, err)
	}
	if access.GID >= 0 {
		if err := os.Lchown(path, -1, access.GID); err != nil {
			return fail(fmt.Errorf("giving it group %d: %w (the agent must run as root, or as a member of the group)", access.GID, err))
		}
	}
	if access.Mode != 0o600 {
		if err := os.Chmod(path, access.Mode); err != nil {
			return fail(fmt.Errorf("giving it mode %#o: %w", uint32(access.Mode), err))
		}
	}
	return l, nil
}

// Client talks to an agent's local API over its unix socket: what
// `autoscaler-agent checkpoint` and job launchers use.
type Client struct {
	http *http.Client
}

// Dial returns a client for the agent listening on socket.
func Dial(socket string) *Client {
	return &Client{http: &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", socket)
		},
	}}}
}

// Register registers a job.
func (c *Client) Register(ctx context.Context, req JobRequest) error {
	body, err := json.Marshal(req)
	if err != nil {
		return err
	}
	_, err = c.do(ctx, http.MethodPost, "/v1/jobs", body)
	return err
}

// Checkpoint reports that a job saved its state.
func (c *Client) Checkpoint(ctx context.Context, id string) error {
	_, err := c.do(ctx, http.MethodPost, "/v1/jobs/"+url.PathEscape(id)+"/checkpoint", nil)
	return err
}

// Unregister reports that a job ended.
func (c *Client) Unregister(ctx context.Context, id string) error {
	_, err := c.do(ctx, http.MethodDelete, "/v1/jobs/"+url.PathEscape(id), nil)
	return err
}

// do makes a request of the agent and returns its answer's body (at most
// 16 MiB), or the agent's refusal as an error.
func (c *Client) do(ctx context.Context, method, path string, body []byte) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, method, "http://agent"+path, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return nil, fmt.Errorf("agent: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode >= 300 {
		msg, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		return nil, fmt.Errorf("agent: %s", strings.TrimSpace(string(msg)))
	}
	answer, err := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
	if err != nil {
		return nil, fmt.Errorf("agent: %w", err)
	}
	return answer, nil
}
