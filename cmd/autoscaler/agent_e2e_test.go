package main

import (
	"bufio"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/fleetcast/autoscaler/agent"
	"github.com/fleetcast/autoscaler/agent/report"
	"github.com/fleetcast/autoscaler/internal/mototest"
)

// TestMain doubles as a training job when FLEETCAST_TEST_JOB is set
// ("SOCKET ID"): it registers with `autoscaler agent register` and, on
// SIGUSR1, writes a checkpoint file and runs `autoscaler agent checkpoint`.
//
// With FLEETCAST_TEST_CLI set, it is the autoscaler command itself, run with
// the arguments in that variable (separated by spaces).
func TestMain(m *testing.M) {
	if spec := os.Getenv("FLEETCAST_TEST_CLI"); spec != "" {
		os.Exit(run(strings.Fields(spec), os.Stdout, os.Stderr))
	}
	if spec := os.Getenv("FLEETCAST_TEST_JOB"); spec != "" {
		f := strings.Fields(spec)
		os.Exit(trainingJob(f[0], f[1]))
	}
	code := m.Run()
	mototest.Stop()
	os.Exit(code)
}

func trainingJob(socket, id string) int {
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGUSR1)
	if code := run([]string{"agent", "register", "-job", id, "-gpus", "0", "-pid", strconv.Itoa(os.Getpid()), "-socket", socket}, io.Discard, os.Stderr); code != 0 {
		return code
	}
	os.Stdout.WriteString("ready\n")
	for range sigs {
		if err := os.WriteFile(filepath.Join(filepath.Dir(socket), id+".ckpt"), []byte("weights"), 0o600); err != nil {
			return 1
		}
		if code := run([]string{"agent", "checkpoint", "-job", id, "-step", "1000", "-socket", socket}, io.Discard, os.Stderr); code != 0 {
			return code
		}
	}
	return 0
}

type drainingController struct {
	mu    sync.Mutex
	drain *report.DrainRequest
	state report.DrainState
}

func (c *drainingController) Accept(_ context.Context, r *report.Report) (report.Answer, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.state = r.Drain.State
	return report.Answer{Drain: c.drain}, nil
}

// TestAgentCLIDrain drains a node whose jobs are real processes that
// checkpoint with `autoscaler agent checkpoint` when signalled.
func TestAgentCLIDrain(t *testing.T) {
	dir, err := os.MkdirTemp("", "fc")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(dir)
	socket := filepath.Join(dir, "agent.sock")
	a, err := agent.New(agent.Config{Node: "i-1", LongRunningAfter: time.Nanosecond})
	if err != nil {
		t.Fatal(err)
	}
	l, err := agent.ListenUnix(socket)
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: a.Handler()}
	go srv.Serve(l)
	defer srv.Close()
	tokens, _ := report.NewTokens([]byte(strings.Repeat("s", 32)))
	ctl := &drainingController{}
	cs := httptest.NewServer((&report.Receiver{Tokens: tokens, Store: ctl}).Handler())
	defer cs.Close()
	rep := &agent.Reporter{Agent: a, Controller: cs.URL, Token: tokens.For("i-1")}

	for _, id := range []string{"train-a", "train-b"} {
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), "FLEETCAST_TEST_JOB="+socket+" "+id)
		out, _ := cmd.StdoutPipe()
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
		if line, err := bufio.NewReader(out).ReadString('\n'); err != nil || line != "ready\n" {
			t.Fatalf("job %s: %q %v", id, line, err)
		}
	}
	now := time.Now()
	ctl.mu.Lock()
	ctl.drain = &report.DrainRequest{ID: "d1", Since: now, Deadline: now.Add(time.Minute), Signal: "SIGUSR1"}
	ctl.mu.Unlock()
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		a.Tick()
		if err := rep.Send(context.Background()); err != nil {
			t.Fatal(err)
		}
		ctl.mu.Lock()
		state := ctl.state
		ctl.mu.Unlock()
		if state == report.SafeToTerminate {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("drain state %q after 20 s", state)
		}
	}
	for _, id := range []string{"train-a", "train-b"} {
		if _, err := os.Stat(filepath.Join(dir, id+".ckpt")); err != nil {
			t.Fatalf("safe before %s checkpointed: %v", id, err)
		}
	}
}
