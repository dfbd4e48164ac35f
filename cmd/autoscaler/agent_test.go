package main

import (
	"context"
	"encoding/json"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/fleetcast/autoscaler/agent/report"
	"github.com/fleetcast/autoscaler/internal/agentcmd"
)

func TestAgentCommands(t *testing.T) {
	token := writeFile(t, "token", "x")
	tests := []struct {
		name string
		args []string
		code int
		want string
	}{
		{"no controller", []string{"agent", "-token-file", token}, 2, "-controller, -token-file and -node "},
		{"unknown subcommand", []string{"agent", "explode"}, 2, `"explode"`},
		{"unknown identity", []string{"agent", "-controller", "http://127.0.0.1:1", "-token-file", token, "-node", "n", "-identity", "tpm"}, 2, `-identity "tpm"`},
		{"identity command without its command", []string{"agent", "-controller", "http://127.0.0.1:1", "-token-file", token, "-node", "n", "-identity", "command", "-bootstrap-token-file", token}, 2, "-identity command, -identity-command and -bootstrap-token-file "},
		{"identity command without the secret", []string{"agent", "-controller", "http://127.0.0.1:1", "-token-file", token, "-node", "n", "-identity", "command", "-identity-command", "/bin/true"}, 2, "-bootstrap-token-file"},
		{"identity command of blanks", []string{"agent", "-controller", "http://127.0.0.1:1", "-token-file", token, "-node", "n", "-identity", "command", "-identity-command", " ", "-bootstrap-token-file", token}, 2, "-identity-command"},
		{"identity command with another identity", []string{"agent", "-controller", "http://127.0.0.1:1", "-token-file", token, "-node", "n", "-identity-command", "/bin/true"}, 2, "-identity command"},
		{"checkpoint without job", []string{"agent", "checkpoint"}, 2, "-job"},
		{"bad gpus", []string{"agent", "register", "-job", "j", "-gpus", "0,x"}, 2, `"x"`},
		{"no pid", []string{"agent", "register", "-job", "j", "-gpus", "0"}, 2, "-pid"},
		{"bad expected end", []string{"agent", "register", "-job", "j", "-pid", "1", "-expected-end", "soon"}, 2, `-expected-end "soon"`},
		{"expected end passed", []string{"agent", "register", "-job", "j", "-pid", "1", "-expected-end", "2020-01-01T00:00:00Z"}, 2, "2020-01-01T00:00:00Z"},
		{"team with a space", []string{"agent", "register", "-job", "j", "-pid", "1", "-team", "ml research"}, 2, `-team: "ml research": want letters, digits and ._-:@+ only`},
		{"tier with a comma", []string{"agent", "register", "-job", "j", "-pid", "1", "-tier", "batch,low"}, 2, `-tier: "batch,low"`},
		{"name too long", []string{"agent", "register", "-job", "j", "-pid", "1", "-name", strings.Repeat("n", 65)}, 2, "-name: 65 bytes, at most 64"},
		{"bad submitted", []string{"agent", "register", "-job", "j", "-pid", "1", "-submitted", "yesterday"}, 2, `-submitted "yesterday": want an RFC 3339 time`},
		{"submitted in the future", []string{"agent", "register", "-job", "j", "-pid", "1", "-submitted", "2999-01-01T00:00:00Z"}, 2, "2999-01-01T00:00:00Z is in the future"},
		{"no agent listening", []string{"agent", "checkpoint", "-job", "j", "-socket", filepath.Join(t.TempDir(), "none.sock")}, 1, "none.sock"},
	}
	// want is what each error names (flags, a value, a file); the words
	// are those of testdata/agent-errors.golden.
	tmp := filepath.Dir(filepath.Dir(token))
	tr := &transcript{normalize: func(s string) string { return strings.ReplaceAll(s, tmp, "$TMP") }}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, _, errOut := cmdline(tt.args...)
			tr.add(tt.name, code, "", errOut)
			if code != tt.code || !strings.Contains(errOut, tt.want) {
				t.Fatalf("exit %d, stderr:\n%s\nwant exit %d and %q", code, errOut, tt.code, tt.want)
			}
		})
	}
	tr.check(t, "agent-errors.golden", len(tests))
}

// TestRegisterExpectedEnd: `autoscaler-agent register -expected-end` reaches the
// agent, whose report carries it; so do -team, -tier, -name and
// -submitted.
func TestRegisterExpectedEnd(t *testing.T) {
	socket := startTestAgent(t)
	before := time.Now()
	submitted := before.Add(-time.Hour).UTC().Truncate(time.Second)
	if code, _, errOut := cmdline("agent", "register", "-job", "train", "-pid", strconv.Itoa(os.Getpid()), "-expected-end", "6h",
		"-team", "ml-research", "-tier", "batch", "-name", "llama-ft.7", "-submitted", submitted.Format(time.RFC3339), "-socket", socket); code != 0 {
		t.Fatalf("register: exit %d: %s", code, errOut)
	}
	hc := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, "unix", socket)
	}}}
	resp, err := hc.Get("http://agent/v1/report")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var r report.Report
	if err := json.NewDecoder(resp.Body).Decode(&r); err != nil {
		t.Fatal(err)
	}
	if len(r.Jobs) != 1 || r.Jobs[0].ExpectedEnd.Before(before.Add(6*time.Hour)) || r.Jobs[0].ExpectedEnd.After(time.Now().Add(6*time.Hour)) {
		t.Fatalf("report jobs %+v; want train expected to end 6h after its registration", r.Jobs)
	}
	if j := r.Jobs[0]; j.Team != "ml-research" || j.Tier != "batch" || j.Name != "llama-ft.7" || !j.Submitted.Equal(submitted) {
		t.Fatalf("report job %+v; want team ml-research, tier batch, name llama-ft.7, submitted %v", j, submitted)
	}
}

// TestAgentWithoutNVML: on a machine without libnvidia-ml the agent says
// so plainly and exits with its own status (3).
func TestAgentWithoutNVML(t *testing.T) {
	for _, lib := range []string{"/usr/lib/x86_64-linux-gnu/libnvidia-ml.so.1", "/usr/lib64/libnvidia-ml.so.1"} {
		if _, err := os.Stat(lib); err == nil {
			t.Skip("this machine has libnvidia-ml")
		}
	}
	token := writeFile(t, "token", "x")
	code, _, errOut := cmdline("agent", "-controller", "http://127.0.0.1:1", "-token-file", token, "-node", "i-1", "-socket", filepath.Join(t.TempDir(), "a.sock"))
	// It names the library and the flag to run without it; the words are
	// those of testdata/agent-no-nvml.golden (the log's lines left out).
	if code != agentcmd.ExitNoNVML || !strings.Contains(errOut, "libnvidia-ml.so") || !strings.Contains(errOut, "-no-gpu") {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	pinned(t, "agent-no-nvml.golden", withoutLogs(errOut))
}
