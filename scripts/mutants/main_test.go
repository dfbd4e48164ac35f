package main

import (
	"os"
	"strings"
	"testing"
)

// TestCatalogueParses: the catalogue in the tree reads, every record has
// its six lines, no two mutants share a name, and each one's old code is
// in its file once.
func TestCatalogueParses(t *testing.T) {
	f, err := os.Open("../mutants.txt")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	all, err := parse(f)
	if err != nil {
		t.Fatal(err)
	}
	if len(all) < 200 {
		t.Errorf("%d mutants read, want the whole catalogue", len(all))
	}
	names := map[string]bool{}
	for _, m := range all {
		if m.Name == "" || m.File == "" || m.Old == "" || len(m.Pkgs) == 0 || m.Run == "" {
			t.Errorf("line %d: a record with an empty field: %+v", m.Line, m)
		}
		if !strings.HasSuffix(m.File, ".go") {
			t.Errorf("line %d: %q mutates %s, not a Go file", m.Line, m.Name, m.File)
		}
		if names[m.Name] {
			t.Errorf("line %d: the name %q twice", m.Line, m.Name)
		}
		names[m.Name] = true
		// The code a mutant replaces is in its file, once: a record left
		// behind by a change to that code mutates nothing.
		src, err := os.ReadFile("../../" + m.File)
		if err != nil {
			t.Errorf("line %d: %q: %v", m.Line, m.Name, err)
		} else if n := strings.Count(string(src), m.Old); n != 1 {
			t.Errorf("line %d: %q: its old code occurs %d times in %s, want 1 (update scripts/mutants.txt)", m.Line, m.Name, n, m.File)
		}
	}
}

func TestParse(t *testing.T) {
	const rec = "name: a\nfile: p/f.go\nold:  \"x\\ty\\n\\\"z\\\"\"\nnew:  \"\"\npkgs: ./p ./q\nrun:  TestA|TestB\n"
	for _, tc := range []struct {
		name, in string
		want     []mutant // nil: an error whose text holds err
		err      string
	}{
		{"one record", "# a comment\n\n" + rec, []mutant{{Name: "a", File: "p/f.go", Old: "x\ty\n\"z\"", New: "", Pkgs: []string{"./p", "./q"}, Run: "TestA|TestB", Line: 3}}, ""},
		{"two records", rec + "\n" + strings.Replace(rec, "name: a", "name: b", 1), []mutant{
			{Name: "a", File: "p/f.go", Old: "x\ty\n\"z\"", Pkgs: []string{"./p", "./q"}, Run: "TestA|TestB", Line: 1},
			{Name: "b", File: "p/f.go", Old: "x\ty\n\"z\"", Pkgs: []string{"./p", "./q"}, Run: "TestA|TestB", Line: 8},
		}, ""},
		{"five lines", strings.Replace(rec, "run:  TestA|TestB\n", "", 1), nil, "has 5 of its 6 lines"},
		{"no blank line between", rec + strings.Replace(rec, "name: a", "name: b", 1), nil, "after the record \"a\"'s six lines"},
		{"lines out of order", strings.Replace(rec, "file:", "pkgs:", 1), nil, "where the record's line \"file\" was due"},
		{"python quoting", strings.Replace(rec, `new:  ""`, `new:  ''`, 1), nil, "not a Go double-quoted string"},
		{"bad escape", strings.Replace(rec, `new:  ""`, `new:  "\q"`, 1), nil, "not a Go double-quoted string"},
		{"same name twice", rec + "\n" + rec, nil, "is the record's at line 1 too"},
		{"nothing replaced", strings.Replace(rec, `new:  ""`, `new:  "x\ty\n\"z\""`, 1), nil, "with itself"},
		{"a file outside", strings.Replace(rec, "p/f.go", "../f.go", 1), nil, "not a path inside the module"},
		{"no tests", strings.Replace(rec, "TestA|TestB", "", 1), nil, "empty name, file, pkgs or run"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := parse(strings.NewReader(tc.in))
			if tc.want == nil {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("got %v, %v; want an error saying %q", got, err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != len(tc.want) {
				t.Fatalf("got %d mutants, want %d: %+v", len(got), len(tc.want), got)
			}
			for i := range got {
				g, w := got[i], tc.want[i]
				if g.Name != w.Name || g.File != w.File || g.Old != w.Old || g.New != w.New || strings.Join(g.Pkgs, " ") != strings.Join(w.Pkgs, " ") || g.Run != w.Run || g.Line != w.Line {
					t.Errorf("mutant %d: got %+v, want %+v", i, g, w)
				}
			}
		})
	}
}

// TestClassify: what counts as a kill in a failing go test's output.
func TestClassify(t *testing.T) {
	for _, tc := range []struct {
		name, out, verdict, detail string
	}{
		{"assertion", `--- FAIL: TestSilentAgentsHaltScaleIn (0.01s)
    controller_test.go:120: scale-in not halted with 3 of 4 agents silent
FAIL
FAIL	github.com/fleetcast/autoscaler/controller	0.412s
FAIL
`, killed, "controller_test.go:120: scale-in not halted with 3 of 4 agents silent"},
		{"assertion in a subtest, tab-indented", "--- FAIL: TestGroupFromWire (0.00s)\n    --- FAIL: TestGroupFromWire/min_above (0.00s)\n\twire_test.go:44: got nil error\nFAIL\n", killed, "wire_test.go:44: got nil error"},
		{"rapid's lines skipped for the assertion", `--- FAIL: TestPropertySafety (1.20s)
    property_test.go:88: [rapid] draw nodes: 3
    property_test.go:91: terminated a node with jobs
    property_test.go:50: [rapid] failed after 12 tests: terminated a node with jobs
FAIL
`, killed, "property_test.go:91: terminated a node with jobs"},
		{"rapid's lines only", `--- FAIL: TestPropertySafety (1.20s)
    property_test.go:88: [rapid] draw nodes: 3
    property_test.go:50: [rapid] failed after 12 tests
FAIL
FAIL	github.com/fleetcast/autoscaler/planner	1.3s
`, notKilled, "go test failed with no failed assertion:     property_test.go:50: [rapid] failed after 12 tests FAIL FAIL	github.com/fleetcast/autoscaler/planner	1.3s"},
		{"build failed", `# github.com/fleetcast/autoscaler/planner
planner/scalein.go:40:2: declared and not used: share
FAIL	github.com/fleetcast/autoscaler/planner [build failed]
FAIL
`, notBuilt, ""},
		{"build failed, with an error line", `# github.com/fleetcast/autoscaler/planner
planner/scalein.go:40:2: undefined: share
FAIL	github.com/fleetcast/autoscaler/planner [build failed]
`, notBuilt, "planner/scalein.go:40:2: undefined: share"},
		{"setup failed", "FAIL\tgithub.com/fleetcast/autoscaler/x [setup failed]\n# cannot find package\n", notBuilt, "# cannot find package"},
		{"panic", `--- FAIL: TestLoop (0.00s)
panic: runtime error: index out of range [3] with length 3 [recovered]
	panic: runtime error: index out of range [3] with length 3
FAIL	github.com/fleetcast/autoscaler/loop	0.1s
`, notKilled, "the tests panicked or timed out, no assertion failed: panic: runtime error: index out of range [3] with length 3 [recovered]"},
		{"panic after an assertion is no kill", "--- FAIL: TestA (0.00s)\n    a_test.go:3: wrong\npanic: boom\n", notKilled, "the tests panicked or timed out, no assertion failed: panic: boom"},
		{"timeout", "panic: test timed out after 10m0s\n\trunning tests:\n\t\tTestPluginPools (10m0s)\n", notKilled, "the tests panicked or timed out, no assertion failed: panic: test timed out after 10m0s"},
		{"no --- FAIL", "    a_test.go:3: logged\nFAIL\tgithub.com/fleetcast/autoscaler/a\t0.1s\n", notKilled, "go test failed with no failed assertion:     a_test.go:3: logged FAIL	github.com/fleetcast/autoscaler/a	0.1s"},
		{"not indented is no assertion", "--- FAIL: TestA (0.00s)\na_test.go:3: at the margin\nFAIL\n", notKilled, "go test failed with no failed assertion: --- FAIL: TestA (0.00s) a_test.go:3: at the margin FAIL"},
		{"a non-test file is no assertion", "--- FAIL: TestA (0.00s)\n    helper.go:3: wrong\nFAIL\n", notKilled, "go test failed with no failed assertion: --- FAIL: TestA (0.00s)     helper.go:3: wrong FAIL"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			verdict, detail := classify([]byte(tc.out))
			if verdict != tc.verdict || detail != tc.detail {
				t.Errorf("got %s %q, want %s %q", verdict, detail, tc.verdict, tc.detail)
			}
		})
	}
}

func TestIsAssertion(t *testing.T) {
	for line, want := range map[string]bool{
		"    a_test.go:12: x":         true,
		"\t\tdir/a_test.go:1: ":       true,
		"    a_test.go:12:x":          false,
		"    a_test.go:: x":           false,
		"    a_test.go:1a: x":         false,
		"    a.go:12: x":              false,
		"a_test.go:12: x":             false,
		"    see a_test.go:12: x":     false,
		"    a_test.go:12: [rapid] x": true, // classify skips rapid's lines itself
	} {
		if got := isAssertion(line); got != want {
			t.Errorf("isAssertion(%q) = %v, want %v", line, got, want)
		}
	}
}

func TestBaselineReason(t *testing.T) {
	for out, want := range map[string]string{
		"# github.com/fleetcast/autoscaler/fleet\nfleet/settings.go:4:2: \"fmt\" imported and not used\nFAIL\tgithub.com/fleetcast/autoscaler/planner [build failed]\n": "does not build: fleet/settings.go:4:2: \"fmt\" imported and not used",
		"--- FAIL: TestA (0.00s)\n    a_test.go:3: wrong\nFAIL\n": "--- FAIL: TestA (0.00s)",
		"ok\n": "no line says why",
	} {
		if got := baselineReason([]byte(out)); got != want {
			t.Errorf("baselineReason(%q) = %q, want %q", out, got, want)
		}
	}
}
