package agent

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
)

// deadPID returns the ID of a process that has exited and been reaped.
func deadPID(t *testing.T) int {
	t.Helper()
	bin, err := exec.LookPath("true")
	if err != nil {
		t.Skip("no true(1) to start and reap")
	}
	cmd := exec.Command(bin)
	if err := cmd.Run(); err != nil {
		t.Fatal(err)
	}
	return cmd.Process.Pid
}

// TestRegisterRefusesMissingProcess: a job whose process does not exist is
// refused, at the agent and over its local API (422, with the reason), and
// nothing is registered; one whose processes all exist registers.
func TestRegisterRefusesMissingProcess(t *testing.T) {
	dead := deadPID(t)
	for _, tt := range []struct {
		name string
		pids []int
		want string // "" registers
	}{
		{"alive", []int{os.Getpid()}, ""},
		{"gone", []int{dead}, fmt.Sprintf("job j: process %d does not exist", dead)},
		{"one of two gone", []int{os.Getpid(), dead}, fmt.Sprintf("job j: process %d does not exist", dead)},
	} {
		t.Run(tt.name, func(t *testing.T) {
			a, err := New(Config{Node: "i-1"})
			if err != nil {
				t.Fatal(err)
			}
			err = a.RegisterJob(JobRequest{ID: "j", GPUs: []int{0}, PIDs: tt.pids})
			if tt.want == "" {
				if err != nil {
					t.Fatalf("register: %v", err)
				}
				if jobs := a.Report().Jobs; len(jobs) != 1 {
					t.Fatalf("jobs %+v after registering", jobs)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("register: %v; want %q", err, tt.want)
			}
			if jobs := a.Report().Jobs; len(jobs) != 0 {
				t.Fatalf("jobs %+v after a refused registration", jobs)
			}

			// The same over the socket's API: 422 with the reason.
			srv := httptest.NewServer(a.Handler())
			defer srv.Close()
			body := fmt.Sprintf(`{"id": "j", "gpus": [0], "pids": %s}`, strings.Join(strings.Fields(fmt.Sprint(tt.pids)), ", "))
			resp, err := http.Post(srv.URL+"/v1/jobs", "application/json", strings.NewReader(body))
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			var msg bytes.Buffer
			_, _ = msg.ReadFrom(resp.Body)
			if resp.StatusCode != http.StatusUnprocessableEntity || !strings.Contains(msg.String(), tt.want) {
				t.Fatalf("POST /v1/jobs: %d %q; want 422 and %q", resp.StatusCode, msg.String(), tt.want)
			}
		})
	}
}

// TestRegisterMissingProcessOverClient: the client a job's launcher uses
// (Dial, Register) returns the agent's reason as its error.
func TestRegisterMissingProcessOverClient(t *testing.T) {
	_, _, _, dir := setup(t)
	dead := deadPID(t)
	err := Dial(dir+"/agent.sock").Register(context.Background(), JobRequest{ID: "j", PIDs: []int{dead}})
	if want := fmt.Sprintf("process %d does not exist", dead); err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("register: %v; want %q", err, want)
	}
	if errors.Is(err, os.ErrNotExist) {
		t.Fatalf("register: %v: the socket was not reached", err)
	}
}

// TestListenUnixAccess: the socket has the mode and group asked for, and
// an access a socket cannot have is refused, naming the socket and why,
// with nothing left listening.
func TestListenUnixAccess(t *testing.T) {
	other := -1 // a group other than the process's own, when it may give one
	if os.Geteuid() == 0 {
		for _, name := range []string{"daemon", "bin", "sys", "adm", "users"} {
			if g, err := user.LookupGroup(name); err == nil {
				other, _ = strconv.Atoi(g.Gid)
				break
			}
		}
	}
	for _, tt := range []struct {
		name    string
		access  SocketAccess
		wantGID int    // -1: the process's own
		want    string // an error
	}{
		{name: "owner only", access: SocketAccess{Mode: 0o600, GID: -1}, wantGID: -1},
		{name: "own group", access: SocketAccess{Mode: 0o660, GID: os.Getegid()}, wantGID: os.Getegid()},
		{name: "another group", access: SocketAccess{Mode: 0o660, GID: other}, wantGID: other},
		{name: "group may read only", access: SocketAccess{Mode: 0o640, GID: -1}, wantGID: -1},
		{name: "owner cannot write", access: SocketAccess{Mode: 0o460, GID: -1}, want: "mode 0460: the owner must be able to read and write"},
		{name: "setgid bit", access: SocketAccess{Mode: 0o2660, GID: -1}, want: "want permission bits, at most 0777"},
		{name: "bad group ID", access: SocketAccess{Mode: 0o660, GID: -2}, want: "group ID -2"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if tt.name == "another group" && other < 0 {
				t.Skip("needs root and a group such as daemon to give the socket")
			}
			dir, err := os.MkdirTemp("", "fc") // a short path: unix sockets allow about 100 bytes
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { os.RemoveAll(dir) })
			socket := filepath.Join(dir, "agent.sock")
			l, err := ListenUnixAccess(socket, tt.access)
			if tt.want != "" {
				if err == nil || !strings.Contains(err.Error(), tt.want) || !strings.Contains(err.Error(), socket) {
					t.Fatalf("listen: %v; want an error naming %s and %q", err, socket, tt.want)
				}
				if _, err := os.Stat(socket); !errors.Is(err, os.ErrNotExist) {
					t.Fatalf("a refused socket exists: %v", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			defer l.Close()
			var st syscall.Stat_t
			if err := syscall.Stat(socket, &st); err != nil {
				t.Fatal(err)
			}
			wantGID := tt.wantGID
			if wantGID < 0 {
				wantGID = os.Getegid()
			}
			if fs.FileMode(st.Mode).Perm() != tt.access.Mode || int(st.Gid) != wantGID {
				t.Fatalf("socket mode %#o, group %d; want %#o, group %d", fs.FileMode(st.Mode).Perm(), st.Gid, tt.access.Mode, wantGID)
			}
		})
	}
}
