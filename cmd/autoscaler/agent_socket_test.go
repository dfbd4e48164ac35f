package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/fleetcast/autoscaler/agent"
	"github.com/fleetcast/autoscaler/internal/agentcmd"
	"github.com/fleetcast/autoscaler/internal/cli"
)

// nobody is the user (and group) the job runs as in the tests below.
const nobody = 65534

// TestRegisterAsJobUser runs the agent command as a process (this test
// binary as the autoscaler, as root) with -socket-group naming an existing
// group, and `autoscaler-agent register` as an unprivileged user (uid and
// gid 65534): with the socket's group among its groups the job registers,
// without it the socket refuses it. The agent with the default group,
// where the machine has no such group, keeps the socket owner-only and
// says so.
func TestRegisterAsJobUser(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: the test runs the job as another user")
	}
	group := jobGroup(t)
	gid, _ := strconv.Atoi(group.Gid)
	dir, bin := shareTestBinary(t)

	t.Run("default group missing", func(t *testing.T) {
		if _, err := user.LookupGroup(agentcmd.DefaultSocketGroup); err == nil {
			t.Skipf("this machine has a group %s", agentcmd.DefaultSocketGroup)
		}
		socket, log := startAgentProcess(t, bin, dir, "a")
		st := socketStat(t, socket)
		if st.Mode&0o777 != 0o600 {
			t.Errorf("socket mode %#o; want 0600 (owner only) when the default group is missing", st.Mode&0o777)
		}
		// The warning names the group (its words: the "default group
		// missing" case of internal/agentcmd/testdata/socket-access.golden).
		waitFor(t, log, "[WARN]")
		waitFor(t, log, strconv.Quote(agentcmd.DefaultSocketGroup))
		if code, out := registerAs(t, bin, socket, "j0", nobody, []uint32{uint32(gid)}); code == 0 || !strings.Contains(out, "permission denied") {
			t.Errorf("register as uid %d: exit %d: %s; want permission denied", nobody, code, out)
		}
	})

	t.Run("socket group", func(t *testing.T) {
		socket, _ := startAgentProcess(t, bin, dir, "b", "-socket-group", group.Name)
		st := socketStat(t, socket)
		if st.Mode&0o777 != 0o660 || int(st.Gid) != gid || st.Uid != 0 {
			t.Fatalf("socket mode %#o, owner %d:%d; want 0660 root:%s (%d)", st.Mode&0o777, st.Uid, st.Gid, group.Name, gid)
		}
		for _, tt := range []struct {
			name   string
			groups []uint32
			want   string // "" registers
		}{
			{"in the group", []uint32{uint32(gid)}, ""},
			{"not in the group", nil, "permission denied"},
		} {
			t.Run(tt.name, func(t *testing.T) {
				code, out := registerAs(t, bin, socket, "job-"+strings.ReplaceAll(tt.name, " ", "-"), nobody, tt.groups)
				id := "job-" + strings.ReplaceAll(tt.name, " ", "-")
				switch {
				case tt.want == "" && code != 0:
					t.Fatalf("register as uid %d in group %s: exit %d: %s", nobody, group.Name, code, out)
				case tt.want != "" && (code == 0 || !strings.Contains(out, tt.want)):
					t.Fatalf("register as uid %d, groups %v: exit %d: %s; want %q", nobody, tt.groups, code, out, tt.want)
				}
				if got := slices.Contains(reportedJobs(t, socket), id); got != (tt.want == "") {
					t.Fatalf("job %s in the agent's report: %v", id, got)
				}
			})
		}
		// A member of the group may register and end its own processes'
		// jobs only: not another user's process (the agent, as root,
		// would signal it in a drain), nor another user's job.
		// Each refusal names the process or the job, its user and the
		// caller's; the words are those of testdata/register-as-user.golden.
		refusals := &transcript{normalize: func(s string) string {
			s = strings.ReplaceAll(s, socket, "$SOCKET")
			s = regexp.MustCompile(`\b`+strconv.Itoa(os.Getpid())+`\b`).ReplaceAllString(s, "$$PID")
			return regexp.MustCompile(`\b`+strconv.Itoa(nobody)+`\b`).ReplaceAllString(s, "$$UID")
		}}
		refused := func(out string, data ...string) bool {
			for _, d := range data {
				if !regexp.MustCompile(`\b` + regexp.QuoteMeta(d) + `\b`).MatchString(out) {
					return false
				}
			}
			return true
		}
		in := []uint32{uint32(gid)}
		args := "agent register -job theirs -pid " + strconv.Itoa(os.Getpid()) + " -socket " + socket
		code, out := runAs(t, bin, socket, args, nobody, in)
		refusals.add("register another user's process", code, out, "")
		if code == 0 || !refused(out, "process "+strconv.Itoa(os.Getpid()), "user 0", strconv.Itoa(nobody)) {
			t.Errorf("%s as uid %d: exit %d: %s; want refused: another user's process", args, nobody, code, out)
		}
		if code, _, errOut := cmdline("agent", "register", "-job", "roots", "-pid", strconv.Itoa(os.Getpid()), "-socket", socket); code != 0 {
			t.Fatalf("register as root: exit %d: %s", code, errOut)
		}
		for _, cmd := range []string{"done", "checkpoint"} {
			args := "agent " + cmd + " -job roots -socket " + socket
			code, out := runAs(t, bin, socket, args, nobody, in)
			refusals.add(cmd+" another user's job", code, out, "")
			if code == 0 || !refused(out, "job roots", "user 0", strconv.Itoa(nobody)) {
				t.Errorf("%s as uid %d: exit %d: %s; want refused: another user's job", args, nobody, code, out)
			}
		}
		refusals.check(t, "register-as-user.golden", 3)
		if !slices.Contains(reportedJobs(t, socket), "roots") || slices.Contains(reportedJobs(t, socket), "theirs") {
			t.Errorf("jobs %v; want root's job kept and none registered for another user's process", reportedJobs(t, socket))
		}
		args = "agent done -job job-in-the-group -socket " + socket
		if code, out := runAs(t, bin, socket, args, nobody, in); code != 0 {
			t.Errorf("%s as its own user: exit %d: %s", args, code, out)
		}
	})
}

// TestSocketGroupFlag: a -socket-group that does not exist, or a
// -socket-mode that is not one, stops the agent before it starts, saying
// which.
func TestSocketGroupFlag(t *testing.T) {
	token := writeFile(t, "token", "x")
	base := []string{"agent", "-controller", "http://127.0.0.1:1", "-token-file", token, "-node", "i-1", "-no-gpu",
		"-socket", filepath.Join(t.TempDir(), "a.sock"), "-state", ""}
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"missing group", []string{"-socket-group", "no-such-group-fc"}, `-socket-group "no-such-group-fc": `},
		{"missing gid", []string{"-socket-group", "4000123"}, `-socket-group "4000123": `},
		{"mode not octal", []string{"-socket-mode", "rw-rw----"}, `-socket-mode "rw-rw----": `},
		{"mode beyond permissions", []string{"-socket-mode", "4660"}, `-socket-mode "4660": `},
		{"owner cannot write", []string{"-socket-mode", "0460"}, `-socket-mode "0460": `},
	}
	// want is the flag and its value; the words are those of
	// testdata/socket-flags.golden.
	tr := &transcript{}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, _, errOut := cmdline(append(base, tt.args...)...)
			tr.add(tt.name, code, "", errOut)
			if code != cli.ExitUsage || !strings.Contains(errOut, tt.want) {
				t.Fatalf("exit %d: %s\nwant exit %d and %q", code, errOut, cli.ExitUsage, tt.want)
			}
		})
	}
	tr.check(t, "socket-flags.golden", len(tests))
}

// TestRegisterMissingProcess: `autoscaler-agent register -pid N` for a process that
// does not exist is refused by the agent, and the command says why.
func TestRegisterMissingProcess(t *testing.T) {
	socket := startTestAgent(t)
	gone := exec.Command("true")
	if err := gone.Run(); err != nil {
		t.Skip("no true(1) to start and reap:", err)
	}
	pid := gone.Process.Pid
	code, _, errOut := cmdline("agent", "register", "-job", "train-7", "-pid", strconv.Itoa(pid), "-socket", socket)
	// It names the job and the process; the words are those of
	// testdata/register-missing-process.golden.
	want := fmt.Sprintf("job train-7: process %d ", pid)
	if code != cli.ExitError || !strings.Contains(errOut, want) {
		t.Fatalf("exit %d: %s\nwant exit %d and %q", code, errOut, cli.ExitError, want)
	}
	pinned(t, "register-missing-process.golden", strings.ReplaceAll(errOut, strconv.Itoa(pid), "$PID"))
}

// jobGroup returns an existing group other than root's and nobody's, for
// the agent's socket.
func jobGroup(t *testing.T) *user.Group {
	t.Helper()
	for _, name := range []string{"daemon", "bin", "sys", "adm", "users", "staff"} {
		if g, err := user.LookupGroup(name); err == nil && g.Gid != "0" && g.Gid != strconv.Itoa(nobody) {
			return g
		}
	}
	t.Skip("no group to give the agent's socket (daemon, bin, sys, adm, users, staff)")
	return nil
}

// shareTestBinary returns a directory any user may enter, holding a copy
// (or a link) of this test binary that any user may run: go test's own
// directories are its user's alone.
func shareTestBinary(t *testing.T) (dir, bin string) {
	t.Helper()
	dir, err := os.MkdirTemp("", "fcj") // a short path: unix sockets allow about 100 bytes
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	bin = filepath.Join(dir, "autoscaler.test")
	if os.Link(self, bin) != nil {
		src, err := os.Open(self)
		if err != nil {
			t.Fatal(err)
		}
		defer src.Close()
		dst, err := os.OpenFile(bin, os.O_CREATE|os.O_WRONLY, 0o755)
		if err != nil {
			t.Fatal(err)
		}
		_, err = io.Copy(dst, src)
		if cerr := dst.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Chmod(bin, 0o755); err != nil {
		t.Fatal(err)
	}
	return dir, bin
}

// syncBuffer is a buffer a process writes to while the test reads it.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// startAgentProcess starts the agent command (bin as the autoscaler) with
// its socket, state and marker in dir (named after name) and the extra
// flags, without GPUs, reporting to a controller that is not there; it
// waits for the socket and returns its path and the agent's log. The agent
// is stopped when the test ends.
func startAgentProcess(t *testing.T, bin, dir, name string, flags ...string) (string, *syncBuffer) {
	t.Helper()
	token := filepath.Join(dir, name+".token")
	if err := os.WriteFile(token, []byte("x\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	socket := filepath.Join(dir, name+".sock")
	args := append([]string{"agent", "-controller", "http://127.0.0.1:1", "-token-file", token, "-node", "i-" + name,
		"-no-gpu", "-notices", "none", "-metrics", "127.0.0.1:0", "-interval", "1h", "-log-level", "info",
		"-state", filepath.Join(dir, name+".state"), "-marker", filepath.Join(dir, name+".draining"), "-socket", socket}, flags...)
	cmd := exec.Command(bin, "-test.run=^$")
	cmd.Env = append(os.Environ(), "FLEETCAST_TEST_CLI="+strings.Join(args, " "))
	log := &syncBuffer{}
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			<-exited
		}
	})
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if _, err := os.Stat(socket); err == nil {
			return socket, log
		}
		select {
		case <-exited:
			t.Fatalf("the agent exited before listening:\n%s", log)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("no socket %s after 20 s:\n%s", socket, log)
		}
	}
}

// socketStat is the socket's mode and owner.
func socketStat(t *testing.T, socket string) *syscall.Stat_t {
	t.Helper()
	var st syscall.Stat_t
	if err := syscall.Stat(socket, &st); err != nil {
		t.Fatal(err)
	}
	return &st
}

// waitFor waits until the log holds want.
func waitFor(t *testing.T, log *syncBuffer, want string) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); !strings.Contains(log.String(), want); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the agent's log lacks %q:\n%s", want, log)
		}
	}
}

// reportedJobs are the IDs of the jobs in the report of the agent at
// socket.
func reportedJobs(t *testing.T, socket string) []string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	r, err := agent.Dial(socket).Status(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, j := range r.Jobs {
		ids = append(ids, j.ID)
	}
	return ids
}

// registerAs runs `autoscaler-agent register` (bin) as uid and gid uid
// with the supplementary groups given, registering job id with this
// process's PID, and returns its exit status and output.
func registerAs(t *testing.T, bin, socket, id string, uid int, groups []uint32) (int, string) {
	t.Helper()
	// A process of the job's user, to register (a job registers its own).
	job := exec.Command("sleep", "60")
	job.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(uid), Gid: uint32(uid)}}
	if err := job.Start(); err != nil {
		t.Fatalf("starting a process as uid %d: %v", uid, err)
	}
	t.Cleanup(func() { _ = job.Process.Kill(); _ = job.Wait() })
	return runAs(t, bin, socket, "agent register -job "+id+" -pid "+strconv.Itoa(job.Process.Pid)+" -socket "+socket, uid, groups)
}

// runAs runs the autoscaler command args (this test binary) as user uid
// with exactly the supplementary groups given, and returns its exit
// status and output.
func runAs(t *testing.T, bin, socket, args string, uid int, groups []uint32) (int, string) {
	t.Helper()
	cmd := exec.Command(bin, "-test.run=^$")
	cmd.Env = []string{"FLEETCAST_TEST_CLI=" + args}
	cmd.Dir = filepath.Dir(socket)
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(uid), Gid: uint32(uid), Groups: groups}}
	out, err := cmd.CombinedOutput()
	var exit *exec.ExitError
	switch {
	case err == nil:
		return 0, string(out)
	case errors.As(err, &exit):
		return exit.ExitCode(), string(out)
	default:
		t.Fatalf("running %s as uid %d: %v", bin, uid, err)
		return -1, ""
	}
}
