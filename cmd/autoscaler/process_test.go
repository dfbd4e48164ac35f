package main

import (
	"net"
	"os"
	"os/exec"
	"sync"
	"syscall"
	"testing"
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
