package main

import (
	"strings"
	"testing"

	"github.com/fleetcast/autoscaler/fleet"
	"github.com/fleetcast/autoscaler/internal/testpki"
)

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
