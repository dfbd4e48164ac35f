package golden

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// recorder is a testing.TB that keeps what Check reports.
type recorder struct {
	testing.TB
	errors, logs []string
}

func (r *recorder) Helper() {}
func (r *recorder) Errorf(format string, args ...any) {
	r.errors = append(r.errors, fmt.Sprintf(format, args...))
}
func (r *recorder) Logf(format string, args ...any) {
	r.logs = append(r.logs, fmt.Sprintf(format, args...))
}

// withUpdate runs f with -update set to on.
func withUpdate(on bool, f func()) {
	old := *update
	*update = on
	defer func() { *update = old }()
	f()
}

// TestCheck: the same bytes pass; others fail, saying the first line that
// differs, a diff, and the command that rewrites the file; a missing file
// fails; -update writes the file (and its directory), and the output then
// passes.
func TestCheck(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "testdata", "x.golden")
	want := "one\ntwo\nthree\nfour\nfive\nsix\nseven\n"

	r := &recorder{TB: t}
	Check(r, path, []byte(want))
	if len(r.errors) != 1 || !strings.Contains(r.errors[0], "no such file") || !strings.Contains(r.errors[0], "-run '^TestCheck$' -update") {
		t.Fatalf("missing file: %q", r.errors)
	}

	withUpdate(true, func() {
		r = &recorder{TB: t}
		Check(r, path, []byte(want))
	})
	if b, err := os.ReadFile(path); err != nil || string(b) != want || len(r.errors) != 0 || len(r.logs) != 1 {
		t.Fatalf("-update wrote %q (%v); errors %q, logs %q", b, err, r.errors, r.logs)
	}

	r = &recorder{TB: t}
	CheckString(r, path, want)
	if len(r.errors) != 0 {
		t.Fatalf("the same output: %q", r.errors)
	}

	r = &recorder{TB: t}
	CheckString(r, path, strings.Replace(want, "five", "FIVE", 1))
	if len(r.errors) != 1 {
		t.Fatalf("a changed line: %q", r.errors)
	}
	msg := r.errors[0]
	for _, part := range []string{"x.golden, first at line 5", "@@ line 3\n  three\n  four\n- five\n+ FIVE\n  six\n  seven\n",
		"go test ./internal/golden -run '^TestCheck$' -update"} {
		if !strings.Contains(msg, part) {
			t.Errorf("the report lacks %q:\n%s", part, msg)
		}
	}
	if strings.Contains(msg, "  two\n") {
		t.Errorf("the diff shows lines far from the change:\n%s", msg)
	}

	// -update leaves an unchanged file alone, and rewrites a changed one.
	withUpdate(true, func() {
		r = &recorder{TB: t}
		CheckString(r, path, want)
		if len(r.logs) != 0 {
			t.Errorf("rewrote an unchanged file: %q", r.logs)
		}
		CheckString(r, path, "new\n")
	})
	if b, _ := os.ReadFile(path); string(b) != "new\n" || len(r.errors) != 0 {
		t.Errorf("-update: file %q, errors %q", b, r.errors)
	}
}

// TestDiff: lines added, removed and changed, at the start, in the middle
// and at the end, and a missing final newline.
func TestDiff(t *testing.T) {
	for _, tt := range []struct{ name, want, got, diff string }{
		{"added", "a\nb\n", "a\nx\nb\n", "@@ line 1\n  a\n+ x\n  b\n"},
		{"removed at the start", "a\nb\nc\n", "b\nc\n", "@@ line 1\n- a\n  b\n  c\n"},
		{"changed at the end", "a\nb\n", "a\nc\n", "@@ line 1\n  a\n- b\n+ c\n"},
		{"no final newline", "a\n", "a", "@@ line 1\n- a\n+ a (no newline at end)\n"},
		{"two places", "1\n2\n3\n4\n5\n6\n7\n8\n9\n", "1\nX\n3\n4\n5\n6\n7\nY\n9\n",
			"@@ line 1\n  1\n- 2\n+ X\n  3\n  4\n@@ line 6\n  6\n  7\n- 8\n+ Y\n  9\n"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if got := Diff(tt.want, tt.got); got != tt.diff {
				t.Errorf("Diff:\n%s\nwant:\n%s", got, tt.diff)
			}
		})
	}
	if n := firstDiff("a\nb\nc\n", "a\nb\n"); n != 3 {
		t.Errorf("firstDiff of a line removed at the end: %d, want 3", n)
	}
}
