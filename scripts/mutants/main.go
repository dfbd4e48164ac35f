// Command mutants checks that the safety rules' tests can fail: each
// mutant of the catalogue (scripts/mutants.txt, whose head describes its
// records) replaces one rule's code, and the tests it names, which must
// pass on the tree unmutated, must then fail on an assertion.
//
//	go run ./scripts/mutants                every mutant (make mutants)
//	go run ./scripts/mutants -only halt     the mutants whose name contains "halt" (make mutants ONLY=halt)
//	go run ./scripts/mutants -list          their names, nothing run
//
// The mutated package is built first (go build, through the same
// overlay): a mutant that does not build is NOT BUILT even where the
// named tests would only fail building a binary of it themselves.
//
// The working tree is never written: the mutated file goes to a temporary
// directory and `go test -count=1 -run '^(RUN)$' PKGS` runs in the module
// root with -overlay in GOFLAGS, so that what the tests build themselves
// with `go build` (the plugins) is built mutated too; a test that reads
// the source itself reads it through the same overlay (state's scan of
// the records' writers does).
//
// Each mutant is counted once, as one of:
//
//	killed     a named test failed on an assertion: a line "NAME_test.go:N: "
//	           that is not one of rapid's own [rapid] lines, and a --- FAIL
//	SURVIVED   the named tests pass on the mutant
//	NOT BUILT  the mutant does not build ([build failed] or [setup failed])
//	NOT KILLED the tests panicked or timed out, or failed with no assertion
//	BROKEN     the named tests fail on the tree unmutated (checked once for
//	           each set of packages and tests): a test failing already would
//	           make every mutant look killed
//	NOT MADE   the file does not hold the code to replace exactly once
//
// and the command exits 1 unless every mutant run was killed.
package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// mutant is one record of the catalogue.
type mutant struct {
	Name string
	File string // relative to the module root
	Old  string // unquoted
	New  string
	Pkgs []string
	Run  string
	Line int // the record's first line in the catalogue
}

// keys are a record's lines, in order.
var keys = []string{"name", "file", "old", "new", "pkgs", "run"}

// parse reads a catalogue: records of six "key: value" lines in the order
// of keys, separated by blank lines, with comment lines (#) between
// records.
func parse(r io.Reader) ([]mutant, error) {
	var (
		out   []mutant
		rec   []string // the values read so far of the record being read
		start int
		names = map[string]int{}
		n     int
	)
	finish := func() error {
		if rec == nil {
			return nil
		}
		defer func() { rec = nil }()
		if len(rec) < len(keys) {
			return fmt.Errorf("line %d: the record %q has %d of its %d lines (%s); records are separated by one blank line", start, rec[0], len(rec), len(keys), strings.Join(keys, ", "))
		}
		m := mutant{Name: rec[0], File: rec[1], Pkgs: strings.Fields(rec[4]), Run: rec[5], Line: start}
		var err error
		if m.Old, err = strconv.Unquote(rec[2]); err != nil || !strings.HasPrefix(rec[2], `"`) {
			return fmt.Errorf("line %d: old of %q is not a Go double-quoted string: %s", start+2, m.Name, rec[2])
		}
		if m.New, err = strconv.Unquote(rec[3]); err != nil || !strings.HasPrefix(rec[3], `"`) {
			return fmt.Errorf("line %d: new of %q is not a Go double-quoted string: %s", start+3, m.Name, rec[3])
		}
		switch {
		case m.Name == "" || m.File == "" || m.Run == "" || len(m.Pkgs) == 0:
			return fmt.Errorf("line %d: the record %q has an empty name, file, pkgs or run", start, m.Name)
		case filepath.IsAbs(m.File) || !filepath.IsLocal(m.File):
			return fmt.Errorf("line %d: the file of %q is not a path inside the module: %s", start+1, m.Name, m.File)
		case m.Old == "":
			return fmt.Errorf("line %d: the code %q replaces is empty", start+2, m.Name)
		case m.Old == m.New:
			return fmt.Errorf("line %d: %q replaces its code with itself", start+3, m.Name)
		}
		if at, ok := names[m.Name]; ok {
			return fmt.Errorf("line %d: the name %q is the record's at line %d too", start, m.Name, at)
		}
		names[m.Name] = start
		out = append(out, m)
		return nil
	}
	sc := bufio.NewScanner(r)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		n++
		line := sc.Text()
		switch {
		case line == "":
			if err := finish(); err != nil {
				return nil, err
			}
			continue
		case rec == nil && strings.HasPrefix(line, "#"):
			continue
		}
		key, value, ok := strings.Cut(line, ":")
		value = strings.Trim(value, " ")
		switch {
		case !ok:
			return nil, fmt.Errorf("line %d: %q is no \"key: value\" line", n, line)
		case len(rec) < len(keys) && key != keys[len(rec)]:
			return nil, fmt.Errorf("line %d: %q where the record's line %q was due", n, line, keys[len(rec)])
		case len(rec) < len(keys):
			if rec == nil {
				start = n
			}
			rec = append(rec, value)
		default:
			return nil, fmt.Errorf("line %d: %q after the record %q's six lines (records are separated by one blank line)", n, line, rec[0])
		}
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	if err := finish(); err != nil {
		return nil, err
	}
	return out, nil
}

// Verdicts. Only killed counts as a pass.
const (
	killed    = "killed"
	survived  = "SURVIVED"
	notBuilt  = "NOT BUILT"
	notKilled = "NOT KILLED"
	broken    = "BROKEN"
	notMade   = "NOT MADE"
)

// classify reads the output of a go test that failed on a mutant: a kill
// is a named test failing on an assertion, not a build error, a panic or
// a timeout, which say nothing of the rule (nor rapid's own log lines, its
// draws and fail files).
func classify(out []byte) (verdict, detail string) {
	lines := strings.Split(string(out), "\n")
	first := func(match func(string) bool) string {
		for _, l := range lines {
			if match(l) {
				return l
			}
		}
		return ""
	}
	assertion := strings.TrimLeft(first(func(l string) bool {
		return isAssertion(l) && !strings.Contains(l, "[rapid]")
	}), " \t")
	switch {
	case bytes.Contains(out, []byte("[build failed]")) || bytes.Contains(out, []byte("[setup failed]")):
		return notBuilt, cut(first(func(l string) bool {
			return strings.Contains(l, "error") || strings.Contains(l, "cannot") || strings.Contains(l, "undefined")
		}), 160)
	case first(func(l string) bool {
		return strings.HasPrefix(l, "panic: ") || strings.Contains(l, "test timed out after")
	}) != "":
		return notKilled, "the tests panicked or timed out, no assertion failed: " + cut(first(func(l string) bool {
			return strings.HasPrefix(l, "panic: ") || strings.Contains(l, "test timed out")
		}), 150)
	case !bytes.Contains(out, []byte("--- FAIL")) || assertion == "":
		tail := strings.Split(strings.TrimRight(string(out), "\n"), "\n")
		tail = tail[max(0, len(tail)-3):]
		return notKilled, "go test failed with no failed assertion: " + cut(strings.Join(tail, " "), 160)
	}
	return killed, cut(assertion, 150)
}

// isAssertion: an indented "FILE_test.go:N: " line, as t.Error and
// t.Fatal print them.
func isAssertion(l string) bool {
	rest := strings.TrimLeft(l, " \t")
	if len(rest) == len(l) {
		return false
	}
	file, after, ok := strings.Cut(rest, ":")
	if !ok || !strings.HasSuffix(file, "_test.go") || strings.ContainsAny(file, " \t") {
		return false
	}
	digits, _, ok := strings.Cut(after, ": ")
	if !ok || digits == "" {
		return false
	}
	for _, c := range digits {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}

// cut shortens s to n runes.
func cut(s string, n int) string {
	if r := []rune(s); len(r) > n {
		return string(r[:n])
	}
	return s
}

// baselineReason is why the named tests fail unmutated: the first telling
// line of the output (the first compiler error, if it did not build).
func baselineReason(out []byte) string {
	lines := strings.Split(string(out), "\n")
	if bytes.Contains(out, []byte("[build failed]")) {
		for _, l := range lines {
			if file, _, ok := strings.Cut(l, ":"); ok && strings.HasSuffix(file, ".go") && !strings.ContainsAny(file, " \t") {
				return "does not build: " + cut(l, 160)
			}
		}
	}
	for _, l := range lines {
		for _, s := range []string{"--- FAIL", "panic:", "build failed", "cannot", "undefined"} {
			if strings.Contains(l, s) {
				return cut(l, 160)
			}
		}
	}
	return "no line says why"
}

// runner runs mutants of one tree.
type runner struct {
	root    string // the module root, symbolic links resolved
	scratch string // the temporary directory, removed at the end
	env     []string
	goflags string // go env GOFLAGS, which -overlay is added to

	mu        sync.Mutex
	baselines map[string]*baseline
}

// baseline is whether a pkgs|run key's tests pass unmutated, found once.
type baseline struct {
	once   sync.Once
	reason string // "" when they pass
}

// goTest runs m's named tests in the module root, with env beside the
// runner's, and reports whether they passed, with go's output.
func (r *runner) goTest(ctx context.Context, m mutant, env ...string) (bool, []byte, error) {
	return r.goCmd(ctx, env, append([]string{"test", "-count=1", "-run", "^(" + m.Run + ")$"}, m.Pkgs...)...)
}

// goBuild builds the package of m's file, with env, and reports whether
// it built, with go's output.
func (r *runner) goBuild(ctx context.Context, m mutant, env ...string) (bool, []byte, error) {
	return r.goCmd(ctx, env, "build", "-o", os.DevNull, "./"+filepath.ToSlash(filepath.Dir(m.File)))
}

// goCmd runs go with args in the module root, with env beside the
// runner's, and reports whether it succeeded, with its output; an error
// is go not running at all, or ctx ending (the command is interrupted).
func (r *runner) goCmd(ctx context.Context, env []string, args ...string) (bool, []byte, error) {
	cmd := exec.CommandContext(ctx, "go", args...)
	cmd.Dir = r.root
	cmd.Env = append(append(append([]string(nil), r.env...), "PWD="+r.root), env...)
	cmd.Cancel = func() error { return cmd.Process.Signal(os.Interrupt) }
	cmd.WaitDelay = 10 * time.Second
	out, err := cmd.CombinedOutput()
	if ctx.Err() != nil {
		return false, out, ctx.Err()
	}
	var exit *exec.ExitError
	if err != nil && !errors.As(err, &exit) {
		return false, out, err // go itself did not run
	}
	return err == nil, out, nil
}

// firstLine is go's first line of output that says what is wrong.
func firstLine(out []byte) string {
	for _, l := range strings.Split(string(out), "\n") {
		if l = strings.TrimSpace(l); l != "" && !strings.HasPrefix(l, "#") {
			return cut(l, 160)
		}
	}
	return "go build failed"
}

// baseline says why m's tests fail on the tree unmutated, or "".
func (r *runner) baseline(ctx context.Context, m mutant) (string, error) {
	key := strings.Join(m.Pkgs, " ") + "|" + m.Run
	r.mu.Lock()
	b := r.baselines[key]
	if b == nil {
		b = &baseline{}
		r.baselines[key] = b
	}
	r.mu.Unlock()
	var err error
	b.once.Do(func() {
		var ok bool
		var out []byte
		ok, out, err = r.goTest(ctx, m)
		if err == nil && !ok {
			b.reason = baselineReason(out)
		}
	})
	return b.reason, err
}

// run makes and tests one mutant, and returns its result line's verdict
// and detail.
func (r *runner) run(ctx context.Context, i int, m mutant) (verdict, detail string, err error) {
	src, err := os.ReadFile(filepath.Join(r.root, m.File))
	if err != nil {
		return notMade, fmt.Sprintf("%s: %v", m.File, err), nil
	}
	if n := bytes.Count(src, []byte(m.Old)); n != 1 {
		return notMade, fmt.Sprintf("%s: the code to replace occurs %d times, want 1 (update scripts/mutants.txt)", m.File, n), nil
	}
	// The named tests must pass on the tree unmutated: a test that fails
	// already would make every mutant look killed.
	reason, err := r.baseline(ctx, m)
	if err != nil {
		return "", "", err
	}
	if reason != "" {
		return broken, fmt.Sprintf("go test %s -run %s fails unmutated: %s", strings.Join(m.Pkgs, " "), m.Run, reason), nil
	}
	dir := filepath.Join(r.scratch, strconv.Itoa(i))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", "", err
	}
	defer os.RemoveAll(dir)
	mutated := bytes.Replace(src, []byte(m.Old), []byte(m.New), 1)
	var ok bool
	var out []byte
	file := filepath.Join(dir, filepath.Base(m.File))
	if err := os.WriteFile(file, mutated, 0o644); err != nil {
		return "", "", err
	}
	overlay, err := json.Marshal(map[string]map[string]string{"Replace": {filepath.Join(r.root, m.File): file}})
	if err != nil {
		return "", "", err
	}
	overlayFile := filepath.Join(dir, "overlay.json")
	if err := os.WriteFile(overlayFile, overlay, 0o644); err != nil {
		return "", "", err
	}
	goflags := "GOFLAGS=" + strings.TrimSpace(r.goflags+" -overlay="+overlayFile)
	// The mutated package must build on its own: a test that builds it
	// with `go build` (a plugin) and fails on that is no assertion.
	if built, out, err := r.goBuild(ctx, m, goflags); err != nil {
		return "", "", err
	} else if !built {
		return notBuilt, firstLine(out), nil
	}
	ok, out, err = r.goTest(ctx, m, goflags)
	if err != nil {
		return "", "", err
	}
	if ok {
		return survived, fmt.Sprintf("go test %s -run %s passes", strings.Join(m.Pkgs, " "), m.Run), nil
	}
	verdict, detail = classify(out)
	return verdict, detail, nil
}

// moduleRoot is the directory above the working directory holding go.mod.
func moduleRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	if dir, err = filepath.EvalSymlinks(dir); err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		if dir == filepath.Dir(dir) {
			return "", errors.New("no go.mod above the working directory")
		}
		dir = filepath.Dir(dir)
	}
}

func main() {
	only := flag.String("only", "", "run only the mutants whose name contains this")
	list := flag.Bool("list", false, "list the mutants' names, run nothing")
	catalogue := flag.String("catalogue", "", "the catalogue (default scripts/mutants.txt in the module root)")
	jobs := flag.Int("jobs", 1, "mutants tested at once (timing-sensitive tests may fail under load: keep 1 unless the machine has cores to spare)")
	flag.Usage = func() {
		fmt.Fprintln(os.Stderr, "usage: go run ./scripts/mutants [-only SUBSTRING] [-list] [-catalogue FILE] [-jobs N]")
		flag.PrintDefaults()
	}
	flag.Parse()
	if flag.NArg() > 0 || *jobs < 1 {
		flag.Usage()
		os.Exit(2)
	}
	os.Exit(run(*only, *list, *catalogue, *jobs))
}

func run(only string, list bool, catalogue string, jobs int) int {
	root, err := moduleRoot()
	if err != nil {
		fmt.Fprintln(os.Stderr, "mutants:", err)
		return 2
	}
	if catalogue == "" {
		catalogue = filepath.Join(root, "scripts", "mutants.txt")
	}
	f, err := os.Open(catalogue)
	if err != nil {
		fmt.Fprintln(os.Stderr, "mutants:", err)
		return 2
	}
	all, err := parse(f)
	f.Close()
	if err != nil {
		fmt.Fprintf(os.Stderr, "mutants: the catalogue %s is malformed: %v\n", catalogue, err)
		return 2
	}
	var chosen []mutant
	for _, m := range all {
		if strings.Contains(m.Name, only) {
			chosen = append(chosen, m)
		}
	}
	if len(chosen) == 0 {
		fmt.Printf("no mutant's name contains %q\n", only)
		return 1
	}
	if list {
		for _, m := range chosen {
			fmt.Println(m.Name)
		}
		return 0
	}
	// GOFLAGS as go sees it, from the environment or go env -w: setting
	// it in the environment replaces what go env -w set.
	goenv := exec.Command("go", "env", "GOFLAGS")
	goenv.Dir = root
	goflags, err := goenv.Output()
	if err != nil {
		fmt.Fprintln(os.Stderr, "mutants: go env GOFLAGS:", err)
		return 2
	}
	if strings.Contains(string(goflags), "-overlay") {
		fmt.Fprintln(os.Stderr, "mutants: GOFLAGS already has an -overlay; the mutants are made with their own")
		return 2
	}
	env := os.Environ()
	if os.Getenv("CGO_CFLAGS") == "" {
		env = append(env, "CGO_CFLAGS=-O2 -g -Wno-deprecated-declarations")
	}
	// rapid keeps a failing case in the package's testdata/rapid and
	// replays every one it finds there: a mutant's would land in the tree
	// and be replayed against the mutants after it.
	env = append(env, "RAPID_NOFAILFILE=1")
	scratch, err := os.MkdirTemp("", "mutants")
	if err != nil {
		fmt.Fprintln(os.Stderr, "mutants:", err)
		return 2
	}
	defer os.RemoveAll(scratch)
	if strings.ContainsAny(scratch, " \t") {
		fmt.Fprintf(os.Stderr, "mutants: the temporary directory %s has a space, which GOFLAGS cannot carry: set TMPDIR\n", scratch)
		return 2
	}
	r := &runner{root: root, scratch: scratch, env: env, goflags: strings.TrimSpace(string(goflags)), baselines: map[string]*baseline{}}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	type result struct{ verdict, detail string }
	results := make([]chan result, len(chosen))
	for i := range results {
		results[i] = make(chan result, 1)
	}
	todo := make(chan int)
	go func() {
		defer close(todo)
		for i := range chosen {
			select {
			case todo <- i:
			case <-ctx.Done():
				return
			}
		}
	}()
	failures := make(chan error, 1) // what stopped the run, other than a signal
	// The workers are waited for before the scratch directory goes: an
	// interrupted go test still reads its overlay.
	var workers sync.WaitGroup
	defer workers.Wait()
	for range jobs {
		workers.Add(1)
		go func() {
			defer workers.Done()
			for i := range todo {
				v, d, err := r.run(ctx, i, chosen[i])
				if err != nil {
					if ctx.Err() == nil {
						select {
						case failures <- err:
						default:
						}
						stop()
					}
					v, d = "", ""
				}
				results[i] <- result{v, d}
			}
		}()
	}
	bad := 0
	for i, m := range chosen {
		var res result
		select {
		case res = <-results[i]:
		case <-ctx.Done():
		}
		if res.verdict == "" {
			break
		}
		fmt.Printf("%-9s %s: %s\n", res.verdict, m.Name, res.detail)
		if res.verdict != killed {
			bad++
		}
	}
	if ctx.Err() != nil {
		select {
		case err := <-failures:
			fmt.Fprintln(os.Stderr, "mutants:", err)
			return 2
		default:
			fmt.Fprintln(os.Stderr, "mutants: interrupted")
			return 130
		}
	}
	if bad > 0 {
		fmt.Printf("%d of %d mutant(s) survived, broke, or were not made, built or killed by an assertion\n", bad, len(chosen))
		return 1
	}
	fmt.Printf("every mutant killed by an assertion (%d), each named test passing unmutated\n", len(chosen))
	return 0
}
