package agentcmd

import (
	"bytes"
	"path/filepath"
	"testing"
	"time"

	"github.com/fleetcast/autoscaler/agent"
	"github.com/fleetcast/autoscaler/agent/report"
	"github.com/fleetcast/autoscaler/internal/golden"
)

// TestPrintAgentStatus pins the words `autoscaler-agent status` prints, for an
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
	golden.CheckString(t, filepath.Join("testdata", "agent-status.txt"), b.String())
}
