package main

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/fleetcast/autoscaler/agent"
	"github.com/fleetcast/autoscaler/agent/report"
	"github.com/fleetcast/autoscaler/controller"
)

// TestPrintAgentStatus pins the words `agent status` prints, for an
// agent reporting well and for one whose reports fail.
func TestPrintAgentStatus(t *testing.T) {
	at := time.Date(2026, 12, 6, 10, 0, 0, 0, time.UTC)
	s := agent.Status{At: at, Report: report.Report{Node: "i-0abc", Healthy: true,
		GPUs: make([]report.GPU, 8), Unknown: []report.Process{{PID: 77}},
		Drain: report.DrainStatus{State: report.Draining, Waiting: []string{"train-7"}},
		Jobs: []report.Job{
			{ID: "train-7", GPUs: []int{0, 1, 2, 3}, PIDs: []int{3221}, Start: at.Add(-26 * time.Hour), LastCheckpoint: at.Add(-4 * time.Minute), LongRunning: true, ExpectedEnd: at.Add(6 * time.Hour)},
			{ID: "eval-2", GPUs: []int{4}, PIDs: []int{4100, 4101}, Start: at.Add(-10 * time.Minute)},
		}},
		Link: agent.Link{Controller: "https://fleetcast.internal:8790", LastAttempt: at.Add(-3 * time.Second), LastSuccess: at.Add(-3 * time.Second), CredentialIssued: at.Add(-49 * time.Hour)}}
	var b bytes.Buffer
	printAgentStatus(&b, s)
	s.Link.LastAttempt, s.Link.LastError = at.Add(-time.Second), `Post "https://fleetcast.internal:8790/v1/agents/i-0abc/report": dial tcp 10.0.0.5:8790: connect: connection refused`
	s.Healthy, s.GPUs, s.GPUError, s.Drain, s.Jobs = false, nil, "NVML: GPU is lost", report.DrainStatus{State: report.NotDraining}, nil
	b.WriteString("\n")
	printAgentStatus(&b, s)
	fixture(t, "agent-status.txt", b.String())
}

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
			code, out, errOut = cli("agent", "status", "-socket", socket)
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
	code, js, errOut := cli("agent", "status", "-socket", socket, "-json")
	var s agent.Status
	if code != 0 || json.Unmarshal([]byte(js), &s) != nil || s.Node != "i-1" || len(s.Jobs) != 1 || s.Link.LastSuccess.IsZero() || s.Link.CredentialIssued.IsZero() {
		t.Fatalf("agent status -json: exit %d: %s%s", code, js, errOut)
	}
	cs.Close()
	status(": last report ", " FAILED: ", "(last taken ")
	stop()
	// The error names the socket; the words (what to check) are those of
	// testdata/agent-status-down.golden.
	code, _, errOut = cli("agent", "status", "-socket", socket)
	if code != exitError || !strings.Contains(errOut, socket) {
		t.Errorf("agent status with no agent: exit %d: %s", code, errOut)
	}
	pinned(t, "agent-status-down.golden", strings.ReplaceAll(errOut, socket, "$SOCKET"))
}
