package planner

import (
	"os/exec"
	"strings"
	"testing"
)

// TestNoHCL: the planner and the forecaster take plain values; neither
// links the HCL stack the config is read with.
func TestNoHCL(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", ".", "../forecast").CombinedOutput()
	if err != nil {
		t.Skipf("go list: %v: %s", err, out)
	}
	for _, dep := range strings.Fields(string(out)) {
		if strings.Contains(dep, "/hcl") || strings.Contains(dep, "go-cty") || strings.HasSuffix(dep, "autoscaler/config") {
			t.Errorf("planner or forecast depends on %s", dep)
		}
	}
}
