package agentcmd

import (
	"bytes"
	"context"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/fleetcast/autoscaler/internal/testpki"
)

// TestExpectedEndFlag: -expected-end takes a time or a duration from now.
func TestExpectedEndFlag(t *testing.T) {
	now := time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC)
	for in, want := range map[string]time.Time{
		"6h":                   now.Add(6 * time.Hour),
		"2d":                   now.Add(48 * time.Hour),
		"2026-12-03T00:00:00Z": time.Date(2026, 12, 3, 0, 0, 0, 0, time.UTC),
	} {
		if got, err := expectedEnd(in, now); err != nil || !got.Equal(want) {
			t.Errorf("expectedEnd(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
}

// TestCommandIdentity: -identity-command's output is the node's identity
// document, trimmed; a command that fails, prints nothing or too much is
// an error naming it.
func TestCommandIdentity(t *testing.T) {
	ctx := context.Background()
	r, err := commandIdentity(ctx, []string{"/bin/echo", " host-key-signature "})
	if err != nil || r.Plugin == nil || r.Plugin.Document != "host-key-signature" || r.AWS != nil || r.GCP != nil {
		t.Fatalf("commandIdentity(echo) = %+v, %v", r, err)
	}
	big := writeFile(t, "big", strings.Repeat("x", 17<<10))
	binary := writeFile(t, "binary", "\xff\xfe signature")
	for _, argv := range [][]string{{"/bin/false"}, {"/bin/true"}, {"/bin/cat", big}, {"/bin/cat", binary}, {"/nonexistent/identity"}} {
		if _, err := commandIdentity(ctx, argv); err == nil || !strings.Contains(err.Error(), "-identity-command "+argv[0]) {
			t.Errorf("commandIdentity(%v): %v; want an error naming it", argv, err)
		}
	}
}

func TestControllerClient(t *testing.T) {
	dir := t.TempDir()
	ca := testpki.New(t, dir)
	bad := filepath.Join(dir, "bad.pem")
	os.WriteFile(bad, []byte("nope"), 0o644)
	for _, tt := range []struct {
		url, ca  string
		insecure bool
		err      string
	}{
		{"https://fleetcast.internal:8790", ca.CAFile, false, ""},
		{"https://fleetcast.internal:8790", "", false, ""},
		{"http://127.0.0.1:8790", "", false, ""},
		{"http://localhost:8790", "", false, ""},
		{"http://fleetcast.internal:8790", "", false, "plain http to a host other than loopback"},
		{"http://10.0.0.5:8790", "", true, ""},
		{"fleetcast.internal:8790", "", false, "want an https URL"},
		{"https://fleetcast.internal:8790", bad, false, "holds no PEM certificate"},
		{"https://fleetcast.internal:8790", filepath.Join(dir, "none.pem"), false, "-ca-file"},
	} {
		_, err := controllerClient(tt.url, tt.ca, tt.insecure)
		if (tt.err == "") != (err == nil) || err != nil && !strings.Contains(err.Error(), tt.err) {
			t.Errorf("%s (ca %q, insecure %v): %v, want %q", tt.url, tt.ca, tt.insecure, err, tt.err)
		}
	}
}

// TestSDNotify: the agent tells systemd over $NOTIFY_SOCKET.
func TestSDNotify(t *testing.T) {
	path := filepath.Join(t.TempDir(), "notify")
	conn, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: path, Net: "unixgram"})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	t.Setenv("NOTIFY_SOCKET", path)
	sdNotify("READY=1\nSTATUS=reporting")
	conn.SetReadDeadline(time.Now().Add(5 * time.Second))
	buf := make([]byte, 256)
	n, err := conn.Read(buf)
	if err != nil || string(buf[:n]) != "READY=1\nSTATUS=reporting" {
		t.Fatalf("got %q, %v", buf[:n], err)
	}
}

// writeFile writes body to the file name in a temporary directory and
// returns its path.
func writeFile(t *testing.T, name, body string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(path, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestNoGPUReader: an agent whose build reads no GPUs (no OpenGPUs) says
// so and exits with ExitNoNVML, unless told to run without GPU data.
func TestNoGPUReader(t *testing.T) {
	dir := t.TempDir()
	token := writeFile(t, "credential", "x")
	var stdout, stderr bytes.Buffer
	code := Run(&Env{Stdout: &stdout, Stderr: &stderr}, []string{"-controller", "http://127.0.0.1:1", "-token-file", token, "-node", "i-1",
		"-socket", filepath.Join(dir, "a.sock"), "-marker", filepath.Join(dir, "draining"), "-state", ""})
	if code != ExitNoNVML || !strings.Contains(stderr.String(), "-no-gpu") {
		t.Fatalf("exit %d: %s; want %d and -no-gpu", code, stderr.String(), ExitNoNVML)
	}
}
