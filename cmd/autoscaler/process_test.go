package main

import (
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// startCLI runs this test binary as the autoscaler command with args
// (split at blanks, as TestMain does), with env added to the test's, its
// stdout and stderr in the file logPath. It returns a function that reads
// what the process wrote so far, and one that stops it (SIGTERM, then
// waits), which also runs when the test ends.
func startCLI(t *testing.T, logPath, args string, env ...string) (output func() string, stop func()) {
	t.Helper()
	logFile, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(append(os.Environ(), env...), "FLEETCAST_TEST_CLI="+args)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var once sync.Once
	stop = func() {
		once.Do(func() {
			_ = cmd.Process.Signal(syscall.SIGTERM)
			_ = cmd.Wait()
			logFile.Close()
		})
	}
	t.Cleanup(stop)
	return func() string { b, _ := os.ReadFile(logPath); return string(b) }, stop
}

// freeAddr is a loopback address whose port was free a moment ago.
func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// liveRun is a controller (`run`) a test started as a process: its API
// at base, its state directory, and what it wrote so far.
type liveRun struct {
	t        *testing.T
	base     string
	stateDir string
	output   func() string
	token    string
}

// startRunCLI starts `run -config conf -log-level info` and extra flags
// (startCLI), its output in logPath, serving at addr, and waits until it
// serves.
func startRunCLI(t *testing.T, logPath, conf, addr, stateDir string, extra ...string) (*liveRun, func()) {
	t.Helper()
	output, stop := startCLI(t, logPath, strings.Join(append([]string{"run -config " + conf + " -log-level info"}, extra...), " "))
	r := &liveRun{t: t, base: "http://" + addr, stateDir: stateDir, output: output}
	r.waitFor("the controller serving", time.Minute, func() bool {
		b, err := os.ReadFile(filepath.Join(stateDir, "api-token"))
		if err != nil {
			return false
		}
		r.token = strings.TrimSpace(string(b))
		resp, err := http.Get(r.base + "/healthz")
		if err != nil {
			return false
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		// Live from the start; serving the fleet once a cycle has run.
		return resp.StatusCode == 200 && !strings.Contains(string(body), "no control cycle yet")
	})
	return r, stop
}

// waitFor polls ok every 100 ms until it holds, and fails the test with
// the controller's output if it does not within that long.
func (r *liveRun) waitFor(what string, within time.Duration, ok func() bool) {
	r.t.Helper()
	for start := time.Now(); !ok(); time.Sleep(100 * time.Millisecond) {
		if time.Since(start) > within {
			r.t.Fatalf("%s: not within %s\n%s", what, within, r.output())
		}
	}
}

// api calls the controller's API with its API token, and fails the test
// on an answer that is no success.
func (r *liveRun) api(method, path, body string) string {
	r.t.Helper()
	code, b := r.call(method, path, r.token, body)
	if code >= 300 {
		r.t.Fatalf("%s %s: %d %s", method, path, code, b)
	}
	return b
}

// call is one request to r's API with bearer; it returns the status and
// body.
func (r *liveRun) call(method, path, bearer, body string) (int, string) {
	r.t.Helper()
	req, _ := http.NewRequest(method, r.base+path, strings.NewReader(body))
	if bearer != "" {
		req.Header.Set("Authorization", "Bearer "+bearer)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		r.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// clearOfStepEdge waits, where it must, until the next boundary of the
// forecast's step is at least need away, for a test that counts a
// controller's launches exactly and runs in less than need: its demand
// history then stays within one step. A history that straddles a step
// holds the change from the first cycle's empty fleet to the demand the
// test pushed, and the naive forecast's band, drawn from that one change,
// buys twice the demand.
func clearOfStepEdge(t *testing.T, step, need time.Duration) {
	t.Helper()
	now := time.Now()
	if left := now.Truncate(step).Add(step).Sub(now); left < need {
		t.Logf("waiting %s for a new %s step, so the run falls in one", left.Round(time.Millisecond), step)
		time.Sleep(left + 100*time.Millisecond)
	}
}
