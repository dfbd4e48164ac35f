package main

import (
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/fleetcast/autoscaler/fleet"
	"github.com/fleetcast/autoscaler/internal/testpki"
)

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

// TestTokenAPIClient: the token command reaches the controller where it
// listens, and never sends the API token in the clear off loopback.
func TestTokenAPIClient(t *testing.T) {
	ca := testpki.New(t, t.TempDir())
	for _, tt := range []struct {
		listen, addr string
		tls, insec   bool
		want, err    string
	}{
		{":8790", "", false, false, "http://127.0.0.1:8790", ""},
		{"0.0.0.0:8790", "", true, false, "https://127.0.0.1:8790", ""},
		{"10.0.0.5:8790", "", true, false, "https://10.0.0.5:8790", ""},
		{"[::1]:8790", "", false, false, "http://[::1]:8790", ""},
		{"10.0.0.5:8790", "", false, true, "http://10.0.0.5:8790", ""},
		{"127.0.0.1:8790", "http://fleetcast.example.internal:8790", false, false, "", "plain http to a host other than loopback"},
		{"127.0.0.1:8790", "fleetcast:8790", false, false, "", "want the controller's URL"},
	} {
		c := fleet.ControllerSettings{Listen: tt.listen, Insecure: tt.insec}
		if tt.tls {
			c.TLSCertFile, c.TLSKeyFile = ca.CertFile, ca.KeyFile
		}
		base, _, err := apiClient(c, tt.addr, "")
		if tt.err != "" {
			if err == nil || !strings.Contains(err.Error(), tt.err) {
				t.Errorf("%s %s: %v, want %q", tt.listen, tt.addr, err, tt.err)
			}
			continue
		}
		if err != nil || base != tt.want {
			t.Errorf("%s %s: %q, %v; want %q", tt.listen, tt.addr, base, err, tt.want)
		}
	}
}
