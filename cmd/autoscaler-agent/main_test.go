package main

import (
	"errors"
	"os"
	"testing"

	"github.com/fleetcast/autoscaler/internal/agentcmd"
)

// TestOpenGPUsWithoutNVML: on a machine without libnvidia-ml, the agent's
// binary opens no GPUs and says why in the error the command turns into
// its own exit status (agentcmd.ExitNoNVML).
func TestOpenGPUsWithoutNVML(t *testing.T) {
	for _, lib := range []string{"/usr/lib/x86_64-linux-gnu/libnvidia-ml.so.1", "/usr/lib64/libnvidia-ml.so.1", "/usr/lib/aarch64-linux-gnu/libnvidia-ml.so.1"} {
		if _, err := os.Stat(lib); err == nil {
			t.Skip("this machine has libnvidia-ml")
		}
	}
	r, err := openGPUs()
	var noLib *agentcmd.NoNVMLError
	if r != nil || !errors.As(err, &noLib) {
		t.Fatalf("openGPUs() = %v, %v; want a *agentcmd.NoNVMLError", r, err)
	}
}
