package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/fleetcast/autoscaler/agent/gpu"
	"github.com/fleetcast/autoscaler/internal/agentcmd"
)

// TestNoNVML: on a machine without libnvidia-ml, the agent's binary, as
// main wires it (newEnv), says NVML's library is missing
// (gpu.ErrNoLibrary's words) and exits with its own status, 3.
func TestNoNVML(t *testing.T) {
	for _, lib := range []string{"/usr/lib/x86_64-linux-gnu/libnvidia-ml.so.1", "/usr/lib64/libnvidia-ml.so.1", "/usr/lib/aarch64-linux-gnu/libnvidia-ml.so.1"} {
		if _, err := os.Stat(lib); err == nil {
			t.Skip("this machine has libnvidia-ml")
		}
	}
	dir := t.TempDir()
	token := filepath.Join(dir, "credential")
	os.WriteFile(token, []byte("x"), 0o600)
	var stdout, stderr bytes.Buffer
	code := agentcmd.Run(newEnv(&stdout, &stderr), []string{"-controller", "http://127.0.0.1:1", "-token-file", token, "-node", "i-1",
		"-socket", filepath.Join(dir, "a.sock"), "-marker", filepath.Join(dir, "draining"), "-state", ""})
	if code != agentcmd.ExitNoNVML || !strings.Contains(stderr.String(), gpu.ErrNoLibrary.Error()) {
		t.Fatalf("exit %d: %s; want %d and %q", code, stderr.String(), agentcmd.ExitNoNVML, gpu.ErrNoLibrary)
	}
}
