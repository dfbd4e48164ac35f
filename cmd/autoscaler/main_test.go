package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/fleetcast/autoscaler/agent/gpu"
	"github.com/fleetcast/autoscaler/controller"
	"github.com/fleetcast/autoscaler/internal/agentcmd"
	"github.com/fleetcast/autoscaler/internal/cli"
	"github.com/fleetcast/autoscaler/planner"
)

const localConfig = "../../examples/local.hcl"

// testRun runs the command line args: the autoscaler command's, or with
// "agent" first the agent's (autoscaler-agent, internal/agentcmd), so that
// the tests run controllers and agents from this one test binary. With
// FLEETCAST_TEST_NVML=dgxa100 the agent reads go-nvml's mock DGX A100
// (eight idle A100s) for the machine's GPUs; without, the machine's NVML,
// as the agent's binary does.
func testRun(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 || args[0] != "agent" {
		return run(args, stdout, stderr)
	}
	e := &agentcmd.Env{Stdout: stdout, Stderr: stderr, Version: version, OpenGPUs: agentcmd.OpenWith(gpu.OpenSystem)}
	if os.Getenv("FLEETCAST_TEST_NVML") == "dgxa100" {
		e.OpenGPUs = agentcmd.OpenWith(func() (*gpu.Reader, error) { return gpu.Open(idleDGXA100()) })
	}
	return agentcmd.Run(e, args[1:])
}

// cmdline runs the command line and returns its exit status and output.
func cmdline(args ...string) (int, string, string) {
	var out, errOut bytes.Buffer
	code := testRun(args, &out, &errOut)
	return code, out.String(), errOut.String()
}

// TestPlanLocalExample: the local example's plan at 14:11 launches and
// holds, each action with a known code; its words are those of
// testdata/plan-local.golden.
func TestPlanLocalExample(t *testing.T) {
	args := []string{"-config", localConfig, "-at", "2026-11-30T14:11:00Z"}
	code, out, errOut := cmdline(append([]string{"plan"}, args...)...)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	p := planJSON(t, args...)
	if n := p.Counts(); !p.At.Equal(time.Date(2026, 11, 30, 14, 11, 0, 0, time.UTC)) || n[planner.Launch] == 0 || n[planner.Hold] == 0 || p.CostPerHourBefore <= 0 {
		t.Errorf("plan at %s: counts %v, cost per hour %v; want a launch and a hold", p.At, n, p.CostPerHourBefore)
	}
	for _, a := range p.Actions {
		if !a.Code.Known() {
			t.Errorf("action without a known code: %+v", a)
		}
	}
	pinned(t, "plan-local.golden", out)
}

// TestPlanLocalExampleAllDay checks the acceptance line at every hour of a
// week: the local example's plan has a launch and a hold or drain, with
// reasons, and its JSON parses.
func TestPlanLocalExampleAllDay(t *testing.T) {
	start := time.Date(2026, 11, 30, 0, 7, 0, 0, time.UTC)
	for h := 0; h < 7*24; h += 5 {
		at := start.Add(time.Duration(h) * time.Hour).Format(time.RFC3339)
		code, out, errOut := cmdline("plan", "-config", localConfig, "-at", at, "-json")
		if code != 0 {
			t.Fatalf("%s: exit %d: %s", at, code, errOut)
		}
		var v controller.PlanView
		if err := json.Unmarshal([]byte(out), &v); err != nil {
			t.Fatalf("%s: -json output does not parse: %v", at, err)
		}
		p := planner.Plan{Actions: v.Actions, Baseline: v.Baseline}
		if v.Forecast != nil {
			p.Forecast = v.Forecast.Forecast
			if v.Forecast.Step != "10m" {
				t.Fatalf("%s: forecast step %q, want 10m", at, v.Forecast.Step)
			}
		}
		n := p.Counts()
		if n[planner.Launch] == 0 || n[planner.Hold]+n[planner.Drain] == 0 {
			t.Fatalf("%s: counts %v, want a launch and a hold or drain", at, n)
		}
		for _, a := range p.Actions {
			if a.Reason == "" || !a.Code.Known() {
				t.Fatalf("%s: action without a reason or its code: %+v", at, a)
			}
		}
		if p.Forecast == nil || p.Baseline == nil {
			t.Fatalf("%s: plan lacks its forecast or baseline", at)
		}
	}
}

// TestPlanFromState: the plan of examples/state.json, at its captured_at:
// the reservation filled, the idle node drained, the node whose job's
// checkpoint is old held, and the cost per hour before and after; its
// words are those of testdata/plan-state.golden.
func TestPlanFromState(t *testing.T) {
	args := []string{"-config", localConfig, "-state", "../../examples/state.json"}
	code, out, errOut := cmdline(append([]string{"plan"}, args...)...)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	p := planJSON(t, args...)
	want := []planAction{
		{planner.Launch, "reserved-a100", "", 2, planner.ReasonReservedBaseline},
		{planner.Drain, "aws-ondemand-a100", "i-0abc", 0, planner.ReasonIdle},
		{planner.Hold, "aws-ondemand-a100", "i-0def", 0, planner.ReasonCheckpointTooOld},
	}
	if got := actionsOf(p); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("actions %v, want %v", got, want)
	}
	if !p.At.Equal(time.Date(2026, 11, 30, 14, 0, 0, 0, time.UTC)) || p.CostPerHourBefore != 142.42 || p.CostPerHourAfter != 109.65 {
		t.Errorf("plan at %s, cost per hour $%.2f -> $%.2f; want 14:00, $142.42 -> $109.65", p.At, p.CostPerHourBefore, p.CostPerHourAfter)
	}
	pinned(t, "plan-state.golden", out)
}

func TestPlanErrors(t *testing.T) {
	dir := t.TempDir()
	pluginConfig := filepath.Join(dir, "plugin.hcl")
	if err := os.WriteFile(pluginConfig, []byte(`pool "burst" {
  provider = "plugin"
  instance_type = "rack"
  gpus_per_node = 8
  price_per_hour = 10
  max = 4
  plugin = "racks"
}
plugin "racks" {
  path   = "/bin/true"
  sha256 = "`+strings.Repeat("0", 64)+`"
}
`), 0o600); err != nil {
		t.Fatal(err)
	}
	// want is what each error names (a flag, its value, a file and its
	// line, column or field); the words are those of
	// testdata/plan-errors.golden.
	tests := []struct {
		name string
		args []string
		code int
		want string
	}{
		{"no config", []string{"plan"}, 1, "-config"},
		{"missing config", []string{"plan", "-config", "nope.hcl"}, 1, "nope.hcl"},
		{"bad state", []string{"plan", "-config", localConfig, "-state", "test-fixtures/bad-state.json"}, 1,
			"state test-fixtures/bad-state.json: line 5, column 41: field nodes.jobs.gpus: "},
		{"missing state", []string{"plan", "-config", localConfig, "-state", "nope.json"}, 1, "nope.json"},
		{"a plugin whose checksum is not its block's", []string{"plan", "-config", pluginConfig}, 1, pluginConfig + `:11:12: error: `},
		{"bad -at", []string{"plan", "-config", localConfig, "-at", "noon"}, 2, `-at "noon"`},
		{"bad log level", []string{"plan", "-config", localConfig, "-log-level", "loud"}, 2, `-log-level "loud"`},
		{"extra argument", []string{"plan", "-config", localConfig, "now"}, 2, `"now"`},
		{"unknown command", []string{"frobnicate"}, 2, `"frobnicate"`},
		{"the agent, now its own command", []string{"agent", "-controller", "https://fleetcast.internal:8790"}, 2, "autoscaler-agent -controller https://fleetcast.internal:8790"},
		{"no command", nil, 2, "autoscaler COMMAND"},
	}
	// The checksum /bin/true has differs from machine to machine.
	tr := &transcript{normalize: func(s string) string { return sha256Hex.ReplaceAllString(renameDir(s, dir, "$DIR"), "$$SHA256") }}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var out, errOut strings.Builder
			code := run(tt.args, &out, &errOut) // the autoscaler command's own: "agent" too
			tr.add(tt.name, code, out.String(), errOut.String())
			if code != tt.code || !strings.Contains(errOut.String(), tt.want) {
				t.Fatalf("exit %d, stderr:\n%s\nwant exit %d and %q", code, errOut.String(), tt.code, tt.want)
			}
		})
	}
	tr.check(t, "plan-errors.golden", len(tests))
}

func TestValidate(t *testing.T) {
	code, out, errOut := cmdline("validate", "-config", localConfig)
	if code != 0 || !strings.Contains(out, "valid: 4 pool(s), up to 4000 GPUs") {
		t.Fatalf("exit %d: %s%s", code, out, errOut)
	}
	// The acceptance case: an unknown attribute, a bad duration and
	// min > max, each with file:line:column, exit status 1.
	code, _, errOut = cmdline("validate", "-config", "test-fixtures/three-errors.hcl")
	if code != 1 {
		t.Fatalf("exit %d, want 1", code)
	}
	// Each at its place; the words are those of
	// test-fixtures/validate-three-errors.golden (TestValidateSourceLines).
	for _, want := range []string{
		"test-fixtures/three-errors.hcl:6:20: error: ",
		"test-fixtures/three-errors.hcl:7:20: error: ",
		"test-fixtures/three-errors.hcl:9:3: error: ",
		"3 error(s)",
	} {
		if !strings.Contains(errOut, want) {
			t.Errorf("stderr lacks %q:\n%s", want, errOut)
		}
	}
}

func TestVersionAndLogging(t *testing.T) {
	code, out, _ := cmdline("version")
	if code != 0 || !strings.HasPrefix(out, "autoscaler dev (go") {
		t.Fatalf("version: exit %d %q", code, out)
	}
	code, _, errOut := cmdline("plan", "-config", localConfig, "-at", "2026-11-30T14:11:00Z", "-log-level", "debug", "-log-json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	lines := strings.Split(strings.TrimSpace(errOut), "\n")
	for _, l := range lines {
		var rec map[string]any
		if err := json.Unmarshal([]byte(l), &rec); err != nil || rec["@level"] != "debug" {
			t.Fatalf("log line %q is not a JSON debug record (%v)", l, err)
		}
	}
	if len(lines) < 2 {
		t.Fatalf("want debug logs, got %q", errOut)
	}
}

// TestPlanShowsOrphans: a snapshot holding an instance of a pool the
// config no longer has, idle for half an hour by its agent's reports:
// plan lists it and reaps it with a drain; one naming a configured pool
// as an orphan is refused.
func TestPlanShowsOrphans(t *testing.T) {
	src, err := os.ReadFile("../../examples/state.json")
	if err != nil {
		t.Fatal(err)
	}
	var st map[string]any
	if err := json.Unmarshal(src, &st); err != nil {
		t.Fatal(err)
	}
	st["nodes"] = append(st["nodes"].([]any), map[string]any{"id": "i-0old", "pool": "old-h100", "state": "ready", "orphan": true,
		"launched_at": "2026-11-20T08:00:00Z", "last_report": "2026-11-30T13:59:40Z", "idle_since": "2026-11-30T13:30:00Z"})
	path := filepath.Join(t.TempDir(), "state.json")
	data, _ := json.Marshal(st)
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	// The words of both plans are those of testdata/plan-orphans.golden.
	tr := &transcript{normalize: func(s string) string { return strings.ReplaceAll(s, path, "$STATE") }}
	code, out, errOut := cmdline("plan", "-config", localConfig, "-state", path)
	tr.add("an idle orphan", code, out, errOut)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	p := planJSON(t, "-config", localConfig, "-state", path)
	reaped := planAction{planner.Drain, "old-h100", "i-0old", 0, planner.ReasonReap}
	if !slices.Contains(actionsOf(p), reaped) || !slices.Equal(p.Orphans, []string{"i-0old"}) {
		t.Errorf("orphans %v, actions %v; want i-0old listed and reaped: %v", p.Orphans, actionsOf(p), reaped)
	}
	nodes := st["nodes"].([]any)
	nodes[len(nodes)-1].(map[string]any)["pool"] = "aws-ondemand-a100"
	data, _ = json.Marshal(st)
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	code, out, errOut = cmdline("plan", "-config", localConfig, "-state", path)
	tr.add("an orphan of a configured pool", code, out, errOut)
	if code != cli.ExitError || !strings.Contains(errOut, `orphan i-0old names pool "aws-ondemand-a100"`) {
		t.Errorf("an orphan of a configured pool: exit %d, %s", code, errOut)
	}
	tr.check(t, "plan-orphans.golden", 2)
}
