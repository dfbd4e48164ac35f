package providers

import (
	"strings"
	"testing"
)

// TestValidAddress: an instance's address is an IP address or a host
// name, never what another program could read as an option or more.
func TestValidAddress(t *testing.T) {
	for addr, want := range map[string]bool{
		"10.0.0.7": true, "fd00::7": true, "gpu-07.rack7.internal": true, "dgx_07": true,
		"0.0.0.0": false, "::": false, "": false, "-x": false, ".x": false, "10.0.0.7 -x": false, "a;b": false, "a/b": false, strings.Repeat("a", 254): false,
	} {
		if got := ValidAddress(addr); got != want {
			t.Errorf("ValidAddress(%q) = %v, want %v", addr, got, want)
		}
	}
}
