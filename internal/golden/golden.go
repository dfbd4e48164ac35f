// Package golden keeps the words a person reads in files beside the tests
// (golden files), apart from the tests of behaviour: those assert codes and
// numbers, and the words are pinned once, in a golden file, so that a
// rewording changes that file and no behaviour test.
//
// A test renders what it pins (deterministically: fixed clocks, no
// temporary paths) and calls Check with the file's path. When the words
// change on purpose, run the test with -update, which rewrites the file
// instead of comparing, and read the diff before committing it:
//
//	go test ./planner -run '^TestReasonTexts$' -update
//
// The -update flag is registered by this package, so it exists in every
// test binary that imports it. It may import only the standard library.
package golden

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// update is -update: rewrite the golden files instead of comparing.
var update = flag.Bool("update", false, "rewrite the golden files (internal/golden) with what the tests produce, instead of comparing with them")

// Updating reports whether the test binary runs with -update.
func Updating() bool { return *update }

// Check compares got with the golden file at path (relative to the test's
// package directory, e.g. testdata/reasons.golden). On a difference it
// reports the first differing line, a diff, and the command that rewrites
// the file; with -update it writes got there instead (creating the
// directory). A missing file is a failure, unless -update makes it.
func Check(t testing.TB, path string, got []byte) {
	t.Helper()
	if *update {
		if old, err := os.ReadFile(path); err == nil && bytes.Equal(old, got) {
			return
		}
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Errorf("golden: %v", err)
			return
		}
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Errorf("golden: %v", err)
			return
		}
		t.Logf("golden: rewrote %s (-update): review the diff", path)
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Errorf("golden: %v\nto write it: %s", err, UpdateCommand(t))
		return
	}
	if bytes.Equal(got, want) {
		return
	}
	t.Errorf("golden: the output differs from %s, first at line %d:\n%s\nif the new output is right: %s",
		path, firstDiff(string(want), string(got)), Diff(string(want), string(got)), UpdateCommand(t))
}

// CheckString is Check for a string.
func CheckString(t testing.TB, path, got string) {
	t.Helper()
	Check(t, path, []byte(got))
}

// UpdateCommand is the command line that reruns t's top-level test with
// -update, from the module's root: go test ./PKG -run '^TestName$' -update.
func UpdateCommand(t testing.TB) string {
	name, _, _ := strings.Cut(t.Name(), "/")
	return fmt.Sprintf("go test %s -run '^%s$' -update", packageDir(), name)
}

// packageDir is the working directory (the test's package) as ./DIR from
// the module's root, the nearest directory above it holding go.mod; "."
// when none is found.
func packageDir() string {
	wd, err := os.Getwd()
	if err != nil {
		return "."
	}
	for dir := wd; ; {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			rel, err := filepath.Rel(dir, wd)
			if err != nil || rel == "." {
				return "."
			}
			return "./" + filepath.ToSlash(rel)
		}
		up := filepath.Dir(dir)
		if up == dir {
			return "."
		}
		dir = up
	}
}

// firstDiff is the number (from 1) of the first line where got differs
// from want.
func firstDiff(want, got string) int {
	w, g := lines(want), lines(got)
	for i := range min(len(w), len(g)) {
		if w[i] != g[i] {
			return i + 1
		}
	}
	return min(len(w), len(g)) + 1
}

// maxDiffCells bounds the work of Diff's table (lines of want times lines
// of got); past it, Diff shows the lines from the first difference on.
const maxDiffCells = 4 << 20

// diffContext is how many unchanged lines Diff shows around a change.
const diffContext = 2

// Diff is a line diff from want to got: "-" before a line only want has,
// "+" before one only got has, a space before unchanged lines near a
// change, and "@@ line N" where a run of them starts (N in want).
func Diff(want, got string) string {
	w, g := lines(want), lines(got)
	// Drop the common head and tail: the table is of what is left.
	head := 0
	for head < len(w) && head < len(g) && w[head] == g[head] {
		head++
	}
	tail := 0
	for tail < len(w)-head && tail < len(g)-head && w[len(w)-1-tail] == g[len(g)-1-tail] {
		tail++
	}
	mw, mg := w[head:len(w)-tail], g[head:len(g)-tail]
	type op struct {
		sign byte // ' ', '-' or '+'
		text string
		at   int // its line in want, from 1 (for '+', the line it comes before)
	}
	var ops []op
	for i := range head {
		ops = append(ops, op{' ', w[i], i + 1})
	}
	if (len(mw)+1)*(len(mg)+1) > maxDiffCells {
		for i, l := range mw {
			ops = append(ops, op{'-', l, head + i + 1})
		}
		for _, l := range mg {
			ops = append(ops, op{'+', l, head + len(mw) + 1})
		}
	} else {
		// lcs[i][j] is the longest common subsequence of mw[i:] and mg[j:].
		lcs := make([][]int, len(mw)+1)
		for i := range lcs {
			lcs[i] = make([]int, len(mg)+1)
		}
		for i := len(mw) - 1; i >= 0; i-- {
			for j := len(mg) - 1; j >= 0; j-- {
				if mw[i] == mg[j] {
					lcs[i][j] = lcs[i+1][j+1] + 1
				} else {
					lcs[i][j] = max(lcs[i+1][j], lcs[i][j+1])
				}
			}
		}
		i, j := 0, 0
		for i < len(mw) || j < len(mg) {
			switch {
			case i < len(mw) && j < len(mg) && mw[i] == mg[j]:
				ops = append(ops, op{' ', mw[i], head + i + 1})
				i, j = i+1, j+1
			case i < len(mw) && (j == len(mg) || lcs[i+1][j] >= lcs[i][j+1]):
				ops = append(ops, op{'-', mw[i], head + i + 1})
				i++
			default:
				ops = append(ops, op{'+', mg[j], head + i + 1})
				j++
			}
		}
	}
	for i := range tail {
		n := len(w) - tail + i
		ops = append(ops, op{' ', w[n], n + 1})
	}
	// Show the changes with diffContext lines around each.
	show := make([]bool, len(ops))
	for k, o := range ops {
		if o.sign != ' ' {
			for c := max(0, k-diffContext); c <= min(len(ops)-1, k+diffContext); c++ {
				show[c] = true
			}
		}
	}
	var b strings.Builder
	for k, o := range ops {
		if !show[k] {
			continue
		}
		if k == 0 || !show[k-1] {
			fmt.Fprintf(&b, "@@ line %d\n", o.at)
		}
		fmt.Fprintf(&b, "%c %s\n", o.sign, o.text)
	}
	return b.String()
}

// lines splits s into lines; a last line without its newline is marked,
// so that the diff shows a missing final newline.
func lines(s string) []string {
	if s == "" {
		return nil
	}
	l := strings.Split(s, "\n")
	if l[len(l)-1] == "" {
		return l[:len(l)-1]
	}
	l[len(l)-1] += " (no newline at end)"
	return l
}
