package main

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/fleetcast/autoscaler/agent"
	"github.com/fleetcast/autoscaler/controller"
	"github.com/fleetcast/autoscaler/internal/cli"
)

// TestAgentStatus runs the agent as a process and asks it, as a user on
// the node would, what it knows: its job, how its reports go (taken by a
// controller, then failing once it is gone), its credential's age.
func TestAgentStatus(t *testing.T) {
	a := startReportingAgent(t, &noticeController{agents: controller.NewAgents(time.Now)}, "-interval 200ms -notices none")
	socket, agentLog, cs, stop := a.socket, a.log, a.cs, a.stop
	status := func(want ...string) string {
		t.Helper()
		var out string
		for start := time.Now(); ; time.Sleep(50 * time.Millisecond) {
			var code int
			var errOut string
			code, out, errOut = cmdline("agent", "status", "-socket", socket)
			missing := ""
			for _, w := range want {
				if !strings.Contains(out, w) {
					missing = w
				}
			}
			if code == 0 && missing == "" {
				return out
			}
			if time.Since(start) > 20*time.Second {
				t.Fatalf("agent status: exit %d, lacks %q:\n%s%s\nagent log:\n%s", code, missing, out, errOut, agentLog())
			}
		}
	}
	status("node:        i-1\n", "controller:  "+cs.URL+": last report ", ", taken\n", "credential:  issued ", "jobs:        0\n")
	startJobs(t, socket, "train-a")
	out := status("jobs:        1\n", "  train-a ", "GPUs:        cannot be read: not read (no GPU data)\n")
	if strings.Contains(out, "credential:  issued never") {
		t.Errorf("the credential file's age is unknown:\n%s", out)
	}
	code, js, errOut := cmdline("agent", "status", "-socket", socket, "-json")
	var s agent.Status
	if code != 0 || json.Unmarshal([]byte(js), &s) != nil || s.Node != "i-1" || len(s.Jobs) != 1 || s.Link.LastSuccess.IsZero() || s.Link.CredentialIssued.IsZero() {
		t.Fatalf("agent status -json: exit %d: %s%s", code, js, errOut)
	}
	cs.Close()
	status(": last report ", " FAILED: ", "(last taken ")
	stop()
	// The error names the socket; the words (what to check) are those of
	// testdata/agent-status-down.golden.
	code, _, errOut = cmdline("agent", "status", "-socket", socket)
	if code != cli.ExitError || !strings.Contains(errOut, socket) {
		t.Errorf("agent status with no agent: exit %d: %s", code, errOut)
	}
	pinned(t, "agent-status-down.golden", strings.ReplaceAll(errOut, socket, "$SOCKET"))
}
