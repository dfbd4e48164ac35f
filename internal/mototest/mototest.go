// Package mototest runs moto_server (the Python package moto[server]: a
// real EC2 and Auto Scaling API server) for tests: one per test process,
// on a free 127.0.0.1 port, reset to empty for each test that asks for it.
//
// Without moto_server on the PATH the asking test is skipped, saying how to
// install it; with FLEETCAST_REQUIRE_MOTO set (as .ci/run does) it fails
// instead, so CI never passes by skipping.
package mototest

import (
	"bytes"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"sync"
	"testing"
	"time"
)

// RequireEnv, when set in the environment, turns a missing moto_server
// into a test failure.
const RequireEnv = "FLEETCAST_REQUIRE_MOTO"

var server struct {
	once sync.Once
	url  string
	cmd  *exec.Cmd
	err  error
	log  bytes.Buffer
}

var errMissing = errors.New("moto_server not found on PATH")

// URL returns the URL of the running moto_server, started on first use
// and reset to empty now.
func URL(t testing.TB) string {
	t.Helper()
	server.once.Do(start)
	if server.err != nil {
		if errors.Is(server.err, errMissing) && os.Getenv(RequireEnv) == "" {
			t.Skip("moto_server is not installed: pip install 'moto[server]' to run the AWS tests")
		}
		t.Fatal(server.err)
	}
	resp, err := http.Post(server.url+"/moto-api/reset", "", nil)
	if err != nil {
		t.Fatalf("resetting moto_server: %v", err)
	}
	resp.Body.Close()
	return server.url
}

// Require returns the path of moto_server, for a test that runs it itself
// (a script, say). Without it the test is skipped, or fails when
// FLEETCAST_REQUIRE_MOTO is set, as in URL.
func Require(t testing.TB) string {
	t.Helper()
	bin, err := exec.LookPath("moto_server")
	if err != nil {
		if os.Getenv(RequireEnv) == "" {
			t.Skip("moto_server is not installed: pip install 'moto[server]' to run the AWS tests")
		}
		t.Fatalf("%v (%s is set)", errMissing, RequireEnv)
	}
	return bin
}

// Stop stops moto_server if it was started; call it from TestMain.
func Stop() {
	if server.cmd != nil && server.cmd.Process != nil {
		server.cmd.Process.Kill()
		server.cmd.Wait()
	}
}

func start() {
	bin, err := exec.LookPath("moto_server")
	if err != nil {
		server.err = errMissing
		return
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		server.err = err
		return
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	server.cmd = exec.Command(bin, "-H", "127.0.0.1", "-p", fmt.Sprint(port))
	server.cmd.Stdout, server.cmd.Stderr = &server.log, &server.log
	if server.err = server.cmd.Start(); server.err != nil {
		return
	}
	server.url = fmt.Sprintf("http://127.0.0.1:%d", port)
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		if resp, err := http.Get(server.url + "/moto-api/"); err == nil {
			resp.Body.Close()
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	server.err = fmt.Errorf("moto_server did not answer on %s within 60s:\n%s", server.url, server.log.String())
}
