// Package metadatamock runs AWS's EC2 instance metadata mock
// (github.com/aws/amazon-ec2-metadata-mock, a tool dependency in go.mod)
// for tests: a fresh process per Start, on a free 127.0.0.1 port, killed
// when the test ends.
//
// The mock is a command-line program with process-wide state (its router,
// its configuration, the start time its delays count from), so it runs as
// a separate process, never inside the test binary. It is built once per
// test process, through the go command's tool cache, from the module that
// holds the calling package.
//
// Flags worth knowing, from the mock's own help (the subcommand first, then
// its flags and the global ones, e.g. Start(t, "spot", "-d", "2")):
//
//	spot                        serve only the spot paths (and the static metadata)
//	-d, --mock-delay-sec N      spot/instance-action answers 404 for N s after the mock starts
//	--mock-trigger-time T       ... or until the RFC 3339 time T
//	-a, --action A              the action announced: terminate (default), stop or hibernate
//	-t, --time T                the instance-action time (default: each request's time + 2 min)
//	--rebalance-delay-sec N     events/recommendations/rebalance answers 404 for N s
//	--rebalance-trigger-time T  ... or until T
//	-r, --rebalance-rec-time T  the rebalance noticeTime (default: each request's time)
//	-I, --imdsv2                refuse requests without an IMDSv2 session token
//	-x, --mock-ip-count N       how many client IPs get notices (default 2; all of 127.0.0.1 is one)
//
// Without a delay both notices are served at once.
package metadatamock

import (
	"bytes"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// Tool is the import path of the mock's main package, as the tool
// directive in go.mod names it.
const Tool = "github.com/aws/amazon-ec2-metadata-mock/cmd/ec2-metadata-mock"

// ReadyTimeout bounds how long Start waits for a started mock to answer.
const ReadyTimeout = 15 * time.Second

var binary struct {
	once sync.Once
	path string
	err  error
}

// Binary returns the path of the mock's executable, building it on first
// use; a build failure fails the test with the go command's output.
func Binary(t testing.TB) string {
	t.Helper()
	binary.once.Do(build)
	if binary.err != nil {
		t.Fatal(binary.err)
	}
	return binary.path
}

// build asks the go command for the mock's executable: "go tool -n" builds
// a tool into the build cache (or finds it there) and prints its path, so
// the binary is shared by test runs and nothing is left in a temp dir.
func build() {
	goBin, err := exec.LookPath("go")
	if err != nil {
		binary.err = fmt.Errorf("metadatamock: the go command is needed to build the mock: %w", err)
		return
	}
	out, err := exec.Command(goBin, "env", "GOMOD").Output()
	gomod := strings.TrimSpace(string(out))
	if err != nil || gomod == "" || gomod == os.DevNull {
		binary.err = fmt.Errorf("metadatamock: no module root found (go env GOMOD: %q, %v)", gomod, err)
		return
	}
	var stdout, stderr bytes.Buffer
	cmd := exec.Command(goBin, "tool", "-n", Tool)
	cmd.Dir = filepath.Dir(gomod)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		binary.err = fmt.Errorf("metadatamock: building %s in %s: %w\n%s%s", Tool, cmd.Dir, err, stdout.String(), stderr.String())
		return
	}
	path := strings.TrimSpace(stdout.String())
	if fi, err := os.Stat(path); err != nil || fi.IsDir() {
		binary.err = fmt.Errorf("metadatamock: go tool -n %s printed %q, which is not an executable (%v)\n%s", Tool, path, err, stderr.String())
		return
	}
	binary.path = path
}

// Start runs the mock with args followed by the hostname and port flags
// (so those two are the harness's to set), waits until it answers, and
// returns its endpoint, e.g. "http://127.0.0.1:41234", for
// imds.Options.Endpoint. The mock is killed when the test ends (on Linux,
// also when the test process dies first); if the test failed, its log is
// logged first.
//
// The mock's delays count from its process start, which is shortly before
// Start returns. It runs with an empty HOME and without the AEMM_*
// variables of the environment, so no config file or variable of the
// machine running the tests changes what it serves.
func Start(t testing.TB, args ...string) (endpoint string) {
	t.Helper()
	bin := Binary(t)
	const attempts = 3 // a free port may be taken between picking and binding
	var lastErr error
	for range attempts {
		endpoint, err := start(t, bin, args)
		if err == nil {
			return endpoint
		}
		lastErr = err
		if !strings.Contains(err.Error(), "address already in use") {
			break
		}
	}
	t.Fatal(lastErr)
	return ""
}

// start runs one mock process; on failure it has already been reaped.
func start(t testing.TB, bin string, args []string) (string, error) {
	port, err := freePort()
	if err != nil {
		return "", fmt.Errorf("metadatamock: picking a port: %w", err)
	}
	home := t.TempDir()
	log := &syncBuffer{}
	cmd := exec.Command(bin, append(append([]string(nil), args...),
		"--hostname", "127.0.0.1", "--port", strconv.Itoa(port))...)
	cmd.Dir = home
	cmd.Env = environ(home)
	cmd.Stdout, cmd.Stderr = log, log
	dieWithParent(cmd)
	if err := cmd.Start(); err != nil {
		return "", fmt.Errorf("metadatamock: starting %s: %w", bin, err)
	}
	exited := make(chan struct{})
	var waitErr error
	go func() { waitErr = cmd.Wait(); close(exited) }()
	stop := func() {
		cmd.Process.Kill()
		<-exited
	}

	endpoint := "http://127.0.0.1:" + strconv.Itoa(port)
	client := &http.Client{Timeout: time.Second}
	deadline := time.Now().Add(ReadyTimeout)
	for {
		// Any HTTP answer will do: with --imdsv2 even "/" is a 401.
		if resp, err := client.Get(endpoint + "/"); err == nil {
			resp.Body.Close()
			break
		}
		select {
		case <-exited:
			return "", fmt.Errorf("metadatamock: the mock (%s %s) exited before answering: %v\n%s",
				bin, strings.Join(cmd.Args[1:], " "), waitErr, log.String())
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			stop()
			return "", fmt.Errorf("metadatamock: the mock (%s %s) did not answer on %s within %v:\n%s",
				bin, strings.Join(cmd.Args[1:], " "), endpoint, ReadyTimeout, log.String())
		}
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("metadatamock: log of the mock at %s (%s):\n%s", endpoint, strings.Join(cmd.Args[1:], " "), log.String())
		}
		stop()
	})
	return endpoint, nil
}

// environ is the test's environment less the mock's own AEMM_* variables,
// with HOME (where the mock looks for aemm-config.json) set to home.
func environ(home string) []string {
	var env []string
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		if strings.HasPrefix(strings.ToUpper(k), "AEMM_") || k == "HOME" {
			continue
		}
		env = append(env, kv)
	}
	return append(env, "HOME="+home)
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// syncBuffer is the mock's log: written by exec's copying goroutine, read
// by the test.
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
