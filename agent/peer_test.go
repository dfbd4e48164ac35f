package agent

import (
	"context"
	"errors"
	"net/http/httptest"
	"strings"
	"syscall"
	"testing"
)

// TestCallerLimits: a caller other than root or the agent's user (as the
// socket's peer credentials name it) registers only processes it owns,
// acts only on the jobs it registered, and sends no interruption notice;
// root does all of it. Process owners come from a table here.
func TestCallerLimits(t *testing.T) {
	owners := map[int]int{100: 1000, 200: 2000, 1: 0}
	a, err := New(Config{Node: "i-1", Signal: func(int, syscall.Signal) error { return nil }, ProcOwner: func(pid int) (int, error) {
		if uid, ok := owners[pid]; ok {
			return uid, nil
		}
		return -1, errors.New("no such process")
	}})
	if err != nil {
		t.Fatal(err)
	}
	h := a.Handler()
	user := func(uid int) caller { return caller{uid: uid, restricted: true} }
	do := func(c caller, method, path, body string) (int, string) {
		r := httptest.NewRequest(method, path, strings.NewReader(body)).WithContext(context.WithValue(context.Background(), callerKey{}, c))
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		return w.Code, strings.TrimSpace(w.Body.String())
	}
	for _, tt := range []struct {
		name         string
		c            caller
		method, path string
		body         string
		status       int
		says         string
	}{
		{"a user's own process", user(1000), "POST", "/v1/jobs", `{"id": "a", "pids": [100]}`, 204, ""},
		{"PID 1", user(1000), "POST", "/v1/jobs", `{"id": "b", "pids": [1]}`, 403, "job b: process 1 is user 0's, not yours (1000)"},
		{"another user's process among its own", user(1000), "POST", "/v1/jobs", `{"id": "c", "pids": [100, 200]}`, 403, "process 200 is user 2000's"},
		{"another user's job, registered again", user(2000), "POST", "/v1/jobs", `{"id": "a", "pids": [200]}`, 403, "job a was registered by user 1000, not by you (2000)"},
		{"another user's checkpoint", user(2000), "POST", "/v1/jobs/a/checkpoint", ``, 403, "job a was registered by user 1000"},
		{"another user's end", user(2000), "DELETE", "/v1/jobs/a", ``, 403, "job a was registered by user 1000"},
		{"a user's notice", user(1000), "POST", "/v1/notice?deadline=2026-12-06T10:00:00Z", ``, 403, "only root or the agent's user may send one, not user 1000"},
		{"its own checkpoint", user(1000), "POST", "/v1/jobs/a/checkpoint", ``, 204, ""},
		{"root's process for root", trusted, "POST", "/v1/jobs", `{"id": "r", "pids": [1]}`, 204, ""},
		{"root ends a user's job", trusted, "DELETE", "/v1/jobs/a", ``, 204, ""},
	} {
		status, body := do(tt.c, tt.method, tt.path, tt.body)
		if status != tt.status || !strings.Contains(body, tt.says) {
			t.Errorf("%s: %d %q; want %d %q", tt.name, status, body, tt.status, tt.says)
		}
	}
	if got := a.jobIDs(); strings.Join(got, ",") != "r" {
		t.Errorf("jobs %v; want root's r alone", got)
	}
}
