package agent

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
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
}

// Handler serves the local API, for jobs and their launchers:
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
		if err := a.RegisterJob(req); err != nil {
			status := http.StatusUnprocessableEntity
			var draining *DrainingError
			if errors.As(err, &draining) {
				status = http.StatusConflict
			}
			http.Error(w, err.Error(), status)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	})
	mux.HandleFunc("DELETE /v1/jobs/{id}", func(w http.ResponseWriter, r *http.Request) {
		if err := a.Unregister(r.PathValue("id")); err != nil {
			http.Error(w, err.Error(), http.StatusNotFound)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	})
	mux.HandleFunc("POST /v1/jobs/{id}/checkpoint", func(w http.ResponseWriter, r *http.Request) {
		if err := a.Checkpoint(r.PathValue("id")); err != nil {
			http.Error(w, err.Error(), http.StatusNotFound)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	})
	mux.HandleFunc("POST /v1/notice", func(w http.ResponseWriter, r *http.Request) {
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
	return mux
}

// ListenUnix listens on a unix socket at path that only its owner may use
// (mode 0600 from the moment it exists), replacing a stale socket left by
// an agent that died, in a directory it creates when missing.
func ListenUnix(path string) (net.Listener, error) {
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
	return l, nil
}

// Client talks to an agent's local API over its unix socket: what
// `autoscaler agent checkpoint` and job launchers use.
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
	return c.do(ctx, http.MethodPost, "/v1/jobs", body)
}

// Checkpoint reports that a job saved its state.
func (c *Client) Checkpoint(ctx context.Context, id string) error {
	return c.do(ctx, http.MethodPost, "/v1/jobs/"+url.PathEscape(id)+"/checkpoint", nil)
}

// Unregister reports that a job ended.
func (c *Client) Unregister(ctx context.Context, id string) error {
	return c.do(ctx, http.MethodDelete, "/v1/jobs/"+url.PathEscape(id), nil)
}

func (c *Client) do(ctx context.Context, method, path string, body []byte) error {
	req, err := http.NewRequestWithContext(ctx, method, "http://agent"+path, bytes.NewReader(body))
	if err != nil {
		return err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return fmt.Errorf("agent: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode >= 300 {
		msg, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		return fmt.Errorf("agent: %s", strings.TrimSpace(string(msg)))
	}
	return nil
}
