package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/fleetcast/autoscaler/controller"
	"github.com/fleetcast/autoscaler/planner"
)

const localConfig = "../../examples/local.hcl"

// cli runs the command line and returns its exit status and output.
func cli(args ...string) (int, string, string) {
	var out, errOut bytes.Buffer
	code := run(args, &out, &errOut)
	return code, out.String(), errOut.String()
}

func TestPlanLocalExample(t *testing.T) {
	code, out, errOut := cli("plan", "-config", localConfig, "-at", "2026-11-30T14:11:00Z")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	for _, want := range []string{"Fleetcast plan at 2026-11-30 14:11 UTC", "+ launch ", "~ hold ", "Plan: ", "Cost per hour: $"} {
		if !strings.Contains(out, want) {
			t.Errorf("plan output lacks %q:\n%s", want, out)
		}
	}
}

// TestPlanLocalExampleAllDay checks the acceptance line at every hour of a
// week: the local example's plan has a launch and a hold or drain, with
// reasons, and its JSON parses.
func TestPlanLocalExampleAllDay(t *testing.T) {
	start := time.Date(2026, 11, 30, 0, 7, 0, 0, time.UTC)
	for h := 0; h < 7*24; h += 5 {
		at := start.Add(time.Duration(h) * time.Hour).Format(time.RFC3339)
		code, out, errOut := cli("plan", "-config", localConfig, "-at", at, "-json")
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
			if a.Reason == "" {
				t.Fatalf("%s: action without a reason: %+v", at, a)
			}
		}
		if p.Forecast == nil || p.Baseline == nil {
			t.Fatalf("%s: plan lacks its forecast or baseline", at)
		}
	}
}

func TestPlanFromState(t *testing.T) {
	code, out, errOut := cli("plan", "-config", localConfig, "-state", "../../examples/state.json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	for _, want := range []string{
		"Fleetcast plan at 2026-11-30 14:00 UTC",
		"+ launch 2 x p4d.24xlarge in reserved-a100 (keep the reserved baseline full",
		"- drain i-0abc in aws-ondemand-a100 (idle 35m;",
		"~ hold i-0def in aws-ondemand-a100: long-running job train-7 last checkpoint 47m ago > 30m",
		"Plan: 2 to launch, 1 to drain, 0 to terminate, 0 drain(s) to cancel, 1 held. Cost per hour: $142.42 -> $109.65 (-32.77).",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("plan output lacks %q:\n%s", want, out)
		}
	}
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
	tests := []struct {
		name string
		args []string
		code int
		want string
	}{
		{"no config", []string{"plan"}, 1, "-config FILE is required"},
		{"missing config", []string{"plan", "-config", "nope.hcl"}, 1, "nope.hcl"},
		{"bad state", []string{"plan", "-config", localConfig, "-state", "test-fixtures/bad-state.json"}, 1,
			"state test-fixtures/bad-state.json: line 5, column 41: field nodes.jobs.gpus: got JSON string, want int"},
		{"missing state", []string{"plan", "-config", localConfig, "-state", "nope.json"}, 1, "nope.json"},
		{"a plugin whose checksum is not its block's", []string{"plan", "-config", pluginConfig}, 1,
			pluginConfig + `:11:12: error: Checksum mismatch: plugin racks: /bin/true has SHA-256 `},
		{"bad -at", []string{"plan", "-config", localConfig, "-at", "noon"}, 2, "want an RFC 3339 time"},
		{"bad log level", []string{"plan", "-config", localConfig, "-log-level", "loud"}, 2, `-log-level "loud"`},
		{"extra argument", []string{"plan", "-config", localConfig, "now"}, 2, `unexpected argument "now"`},
		{"unknown command", []string{"frobnicate"}, 2, `unknown command "frobnicate"`},
		{"no command", nil, 2, "Usage: autoscaler COMMAND"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, _, errOut := cli(tt.args...)
			if code != tt.code || !strings.Contains(errOut, tt.want) {
				t.Fatalf("exit %d, stderr:\n%s\nwant exit %d and %q", code, errOut, tt.code, tt.want)
			}
		})
	}
}

func TestValidate(t *testing.T) {
	code, out, errOut := cli("validate", "-config", localConfig)
	if code != 0 || !strings.Contains(out, "valid: 4 pool(s), up to 4000 GPUs") {
		t.Fatalf("exit %d: %s%s", code, out, errOut)
	}
	// The acceptance case: an unknown attribute, a bad duration and
	// min > max, each with file:line:column, exit status 1.
	code, _, errOut = cli("validate", "-config", "test-fixtures/three-errors.hcl")
	if code != 1 {
		t.Fatalf("exit %d, want 1", code)
	}
	for _, want := range []string{
		"test-fixtures/three-errors.hcl:6:20: error: Invalid duration",
		"test-fixtures/three-errors.hcl:7:20: error: Invalid value: min (5) is greater than max (2)",
		"test-fixtures/three-errors.hcl:9:3: error: Unsupported argument",
		"3 error(s)",
	} {
		if !strings.Contains(errOut, want) {
			t.Errorf("stderr lacks %q:\n%s", want, errOut)
		}
	}
}

func TestVersionAndLogging(t *testing.T) {
	code, out, _ := cli("version")
	if code != 0 || !strings.HasPrefix(out, "autoscaler dev (go") {
		t.Fatalf("version: exit %d %q", code, out)
	}
	code, _, errOut := cli("plan", "-config", localConfig, "-at", "2026-11-30T14:11:00Z", "-log-level", "debug", "-log-json")
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
	code, out, errOut := cli("plan", "-config", localConfig, "-state", path)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	for _, want := range []string{
		"orphans:     1 instance(s) of this fleet in pools the config no longer has (reaped once idle): i-0old",
		"- drain i-0old in old-h100 (orphan: pool old-h100 is no longer in the config; reaping: idle 30m)",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("plan output lacks %q:\n%s", want, out)
		}
	}
	nodes := st["nodes"].([]any)
	nodes[len(nodes)-1].(map[string]any)["pool"] = "aws-ondemand-a100"
	data, _ = json.Marshal(st)
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	if code, _, errOut := cli("plan", "-config", localConfig, "-state", path); code == 0 || !strings.Contains(errOut, `orphan i-0old names pool "aws-ondemand-a100": an orphan's pool is one the config no longer has`) {
		t.Errorf("an orphan of a configured pool: exit %d, %s", code, errOut)
	}
}
