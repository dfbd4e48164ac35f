package main

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/fleetcast/autoscaler/controller"
	"github.com/fleetcast/autoscaler/internal/cli"
	"github.com/fleetcast/autoscaler/internal/golden"
	"github.com/fleetcast/autoscaler/planner"
)

// The words a user reads are pinned in golden files, apart from the
// tests of behaviour, which assert exit statuses, codes and numbers (a
// plan's -json, metrics): testdata/NAME for this package's new ones,
// test-fixtures/NAME for the older. A test run with -update rewrites the
// files it compares with (go test ./cmd/autoscaler -run '^TestName$'
// -update); read the diff before committing it.

// pinned compares got with the golden file testdata/NAME.
func pinned(t testing.TB, name, got string) {
	t.Helper()
	golden.CheckString(t, filepath.Join("testdata", name), got)
}

// fixture compares got with the golden file test-fixtures/NAME.
func fixture(t testing.TB, name, got string) {
	t.Helper()
	golden.CheckString(t, filepath.Join("test-fixtures", name), got)
}

// transcript gathers the outputs of a test's commands (a table's cases)
// for one golden file, in the order added.
type transcript struct {
	b strings.Builder
	n int
	// normalize, if set, rewrites what varies from run to run (a
	// temporary directory, an address) before it is written down.
	normalize func(string) string
}

// add writes down a command's exit status (none when code is negative:
// not a command's output) and output under title.
func (tr *transcript) add(title string, code int, stdout, stderr string) {
	norm := tr.normalize
	if norm == nil {
		norm = func(s string) string { return s }
	}
	title = strings.TrimSuffix(norm(title+"\n"), "\n")
	if code < 0 {
		fmt.Fprintf(&tr.b, "== %s\n", title)
	} else {
		fmt.Fprintf(&tr.b, "== %s (exit %d)\n", title, code)
	}
	if stdout != "" {
		fmt.Fprintf(&tr.b, "-- stdout\n%s", norm(ensureNewline(stdout)))
	}
	if stderr != "" {
		fmt.Fprintf(&tr.b, "-- stderr\n%s", norm(withoutFlags(ensureNewline(stderr))))
	}
	tr.b.WriteString("\n")
	tr.n++
}

// check compares the transcript with testdata/NAME once it holds all the
// want commands: when -run picked some of a table's cases, it compares
// nothing.
func (tr *transcript) check(t *testing.T, name string, want int) {
	t.Helper()
	if tr.n != want {
		t.Logf("%d of %d commands ran: testdata/%s not compared", tr.n, want, name)
		return
	}
	pinned(t, name, tr.b.String())
}

// withoutFlags is a command's stderr with its list of flags, which
// follows a usage error, cut to its heading: the flags' help is not an
// error's words.
func withoutFlags(s string) string {
	if i := strings.Index(s, "\nFlags:\n"); i >= 0 {
		return s[:i] + "\nFlags: ...\n"
	}
	return s
}

// logLine is a line of the commands' log (hclog's format): a time, then
// a level in brackets.
var logLine = regexp.MustCompile(`(?m)^\d{4}-\d\d-\d\dT\S+ \[[A-Z]+\] .*\n`)

// withoutLogs is s without its log lines, whose times (and warnings about
// the machine) differ from run to run.
func withoutLogs(s string) string { return logLine.ReplaceAllString(s, "") }

func ensureNewline(s string) string {
	if strings.HasSuffix(s, "\n") {
		return s
	}
	return s + "\n"
}

// sha256Hex is a SHA-256 in hex, which differs from machine to machine
// for a system file.
var sha256Hex = regexp.MustCompile(`\b[0-9a-f]{64}\b`)

// planJSON runs plan with args and -json, and returns the plan it prints.
func planJSON(t *testing.T, args ...string) planner.Plan {
	t.Helper()
	code, out, errOut := cmdline(append(append([]string{"plan"}, args...), "-json")...)
	if code != cli.ExitOK {
		t.Fatalf("plan %s -json: exit %d: %s", strings.Join(args, " "), code, errOut)
	}
	var v controller.PlanView
	if err := json.Unmarshal([]byte(out), &v); err != nil || v.Plan == nil {
		t.Fatalf("plan -json: %v:\n%s", err, out)
	}
	p := *v.Plan
	p.Actions = v.Actions
	if v.Forecast != nil {
		p.Forecast = v.Forecast.Forecast
	}
	return p
}

// planAction is what a plan's action does, by code: kind, pool, node or
// count, and code, for comparing lists of actions.
type planAction struct {
	kind  planner.ActionKind
	pool  string
	node  string
	count int
	code  planner.Reason
}

func (a planAction) String() string {
	if a.kind == planner.Launch {
		return fmt.Sprintf("%s %d in %s [%s]", a.kind, a.count, a.pool, a.code)
	}
	return fmt.Sprintf("%s %s in %s [%s]", a.kind, a.node, a.pool, a.code)
}

// actionsOf are p's actions by code.
func actionsOf(p planner.Plan) []planAction {
	var out []planAction
	for _, a := range p.Actions {
		out = append(out, planAction{a.Kind, a.Pool, a.Node, a.Count, a.Code})
	}
	return out
}

// noteCodes are the codes of p's notes, in order.
func noteCodes(p planner.Plan) []planner.Reason {
	var out []planner.Reason
	for _, n := range p.Notes {
		out = append(out, n.Code)
	}
	return out
}
