package main

import (
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"unicode"
)

// anchorOf is the anchor GitHub gives a heading: lower case, punctuation
// but hyphens and underscores dropped, spaces as hyphens.
func anchorOf(heading string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(strings.TrimSpace(heading)) {
		switch {
		case r == ' ':
			b.WriteByte('-')
		case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r):
			b.WriteRune(r)
		}
	}
	return b.String()
}

// anchors are a page's headings' anchors (outside fenced blocks), with
// GitHub's -1, -2 for repeats.
func anchors(text string) map[string]bool {
	out := map[string]bool{}
	seen := map[string]int{}
	in := false
	for _, line := range strings.Split(text, "\n") {
		if strings.HasPrefix(line, "```") {
			in = !in
			continue
		}
		if in || !strings.HasPrefix(line, "#") {
			continue
		}
		h := strings.TrimLeft(line, "#")
		if !strings.HasPrefix(h, " ") {
			continue
		}
		a := anchorOf(h)
		if n := seen[a]; n > 0 {
			out[a+"-"+strconv.Itoa(n)] = true
		} else {
			out[a] = true
		}
		seen[a]++
	}
	return out
}

var mdLink = regexp.MustCompile(`\]\(([^)\s]+)\)`)

// TestDocsLinks: every relative link of the README, the CHANGELOG, the
// pages under docs/ and the Terraform examples' READMEs names a file or
// folder that exists, and every anchor a heading of its page.
func TestDocsLinks(t *testing.T) {
	pages := append(docPages(t), "CHANGELOG.md", "examples/terraform/aws/README.md", "examples/terraform/gcp/README.md")
	texts := map[string]string{}
	for _, p := range pages {
		b, err := os.ReadFile(filepath.Join(repoRoot, p))
		if err != nil {
			t.Fatal(err)
		}
		texts[p] = string(b)
	}
	for _, p := range pages {
		in := false
		for n, line := range strings.Split(texts[p], "\n") {
			if strings.HasPrefix(line, "```") {
				in = !in
			}
			if in {
				continue
			}
			for _, m := range mdLink.FindAllStringSubmatch(line, -1) {
				target := m[1]
				if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
					continue
				}
				path, frag, _ := strings.Cut(target, "#")
				dest := p
				if path != "" {
					dest = filepath.Clean(filepath.Join(filepath.Dir(p), path))
					if _, err := os.Stat(filepath.Join(repoRoot, dest)); err != nil {
						t.Errorf("%s:%d: link %q: %s does not exist", p, n+1, target, dest)
						continue
					}
				}
				if frag == "" {
					continue
				}
				text, ok := texts[dest]
				if !ok {
					b, err := os.ReadFile(filepath.Join(repoRoot, dest))
					if err != nil {
						t.Errorf("%s:%d: link %q: %v", p, n+1, target, err)
						continue
					}
					text = string(b)
				}
				if !anchors(text)[frag] {
					t.Errorf("%s:%d: link %q: %s has no heading #%s", p, n+1, target, dest, frag)
				}
			}
		}
	}
}

// TestReadmeShort: the README stays a front page (at most 200 lines and
// 16 KB).
func TestReadmeShort(t *testing.T) {
	b, err := os.ReadFile(filepath.Join(repoRoot, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	if lines := strings.Count(string(b), "\n"); lines > 200 || len(b) > 16<<10 {
		t.Errorf("README.md: %d lines, %d bytes; want at most 200 and 16 KB (the rest goes in docs/)", lines, len(b))
	}
}

var (
	// ruleCitation is "rule N" or "rules N", the number perhaps on the
	// next line of a comment.
	ruleCitation = regexp.MustCompile(`\b[Rr]ules?[\s/#*]+(\d+)`)
	// citedFrom is what must come just before a citation, up to line
	// breaks and comment markers: docs/design.md, or design.md as a
	// link's text in a page beside it.
	citedFrom = regexp.MustCompile(`(docs/|\[)design\.md[\s/#*]*$`)
)

// designRules is how many rules docs/design.md numbers.
const designRules = 13

// TestDesignCitations: no file of the repository cites a design document
// it lacks, and every "rule N" in the code, the scripts and the docs names
// design.md (but in design.md itself, and the CHANGELOG's history).
func TestDesignCitations(t *testing.T) {
	design, err := os.ReadFile(filepath.Join(repoRoot, "docs/design.md"))
	if err != nil {
		t.Fatal(err)
	}
	if n := len(regexp.MustCompile(`(?m)^\d+\. \*\*`).FindAll(design, -1)); n != designRules {
		t.Fatalf("docs/design.md numbers %d rules; designRules says %d", n, designRules)
	}
	err = filepath.WalkDir(repoRoot, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(repoRoot, path)
		if d.IsDir() {
			if rel == ".git" || rel == "bin" {
				return filepath.SkipDir
			}
			return nil
		}
		switch filepath.Ext(path) {
		case ".go", ".md", ".sh", ".hcl", ".tf", ".tftpl", ".py", ".tmpl", ".proto", ".yml", ".yaml", ".txt":
		default:
			if base := filepath.Base(path); base != "Makefile" && base != "run" && base != "Dockerfile" {
				return nil
			}
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		text := string(b)
		if missing := "DESIGN" + ".md"; strings.Contains(text, missing) {
			t.Errorf("%s cites %s, which the repository lacks: cite docs/design.md", rel, missing)
		}
		if rel == "docs/design.md" || rel == "CHANGELOG.md" {
			return nil
		}
		for _, at := range ruleCitation.FindAllStringSubmatchIndex(text, -1) {
			line := strings.Count(text[:at[0]], "\n") + 1
			cited := strings.Join(strings.Fields(text[at[0]:at[1]]), " ")
			if n, _ := strconv.Atoi(text[at[2]:at[3]]); n < 1 || n > designRules {
				t.Errorf("%s:%d: %q: docs/design.md numbers its rules from 1 to %d", rel, line, cited, designRules)
			}
			if !citedFrom.MatchString(text[max(0, at[0]-40):at[0]]) {
				t.Errorf("%s:%d: %q names no document: write \"docs/design.md rule N\"", rel, line, cited)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// benchSummary are the README's summary rows: each names a trace, the
// command of its table in docs/benchmarks.md, and the policies of its
// columns.
var benchSummary = []struct{ row, command string }{
	{"Philly (129 days)", "autoscaler simulate -config examples/philly-fair.hcl -trace ../shared/traces/philly_rfold/philly_trace.csv"},
	{"Helios Earth (31 days)", "autoscaler simulate -config examples/local.hcl -trace ../shared/traces/helios_earth_vc_sequence_derived/earth_16vc_sum_per_minute.csv -value-column running_gpu_num_sum16vc+pending_gpu_num_sum16vc"},
	{"ServeGen m-small (14 days)", "autoscaler simulate -config examples/local.hcl -trace ../shared/bench/series/servegen_msmall_10m.csv -scale 0.1"},
}

// TestReadmeBenchSummary: the README's table of what each policy costs,
// waits and loses is the one docs/benchmarks.md has (which make bench
// remakes): after a make bench that moves a figure, this fails until the
// README says it too.
func TestReadmeBenchSummary(t *testing.T) {
	readme, err := os.ReadFile(filepath.Join(repoRoot, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	bench, err := os.ReadFile(filepath.Join(repoRoot, "docs/benchmarks.md"))
	if err != nil {
		t.Fatal(err)
	}
	policies := []string{"reactive", "headroom", "predictive", "oracle"}
	for _, s := range benchSummary {
		table := simulateTable(t, string(bench), s.command)
		want := "| " + s.row + " |"
		for _, pol := range policies {
			r, ok := table[pol]
			if !ok {
				t.Fatalf("docs/benchmarks.md: %s's table has no %s row", s.row, pol)
			}
			want += fmt.Sprintf(" $%.2fM, %s waited, %.1f lost |", r["cost $"]/1e6, thousands(r["wait GPU-h"]), r["lost GPU-h"])
		}
		if !strings.Contains(string(readme), want+"\n") {
			t.Errorf("README.md's summary lacks the row docs/benchmarks.md gives:\n%s", want)
		}
	}
	// The sentence under the table: on Philly, predictive's cost against
	// reactive's (within 0.5%) and its share of reactive's waiting.
	philly := simulateTable(t, string(bench), benchSummary[0].command)
	said := regexp.MustCompile(`Philly it costs within 0\.5% of what reactive scaling does, for (\d+)% of its waiting`).
		FindStringSubmatch(strings.Join(strings.Fields(string(readme)), " "))
	if said == nil {
		t.Fatal("README.md no longer says what Fleetcast costs on Philly against reactive scaling: update this test")
	}
	ratio := philly["predictive"]["cost $"] / philly["reactive"]["cost $"]
	share := fmt.Sprintf("%.0f", 100*philly["predictive"]["wait GPU-h"]/philly["reactive"]["wait GPU-h"])
	if math.Abs(ratio-1) > 0.005 || share != said[1] {
		t.Errorf("README.md says Fleetcast costs on Philly within 0.5%% of what reactive scaling does, for %s%% of its waiting; docs/benchmarks.md gives %.3f times its cost for %s%%", said[1], ratio, share)
	}
	// And on Helios Earth and ServeGen, less waiting at a higher cost.
	if !strings.Contains(strings.Join(strings.Fields(string(readme)), " "), "it buys its lower waiting at a higher cost") {
		t.Fatal("README.md no longer says what Fleetcast buys on Helios Earth and ServeGen: update this test")
	}
	for _, s := range benchSummary[1:] {
		table := simulateTable(t, string(bench), s.command)
		p, r := table["predictive"], table["reactive"]
		if !(p["cost $"] > r["cost $"] && p["wait GPU-h"] < r["wait GPU-h"]) {
			t.Errorf("README.md says Fleetcast buys lower waiting at a higher cost on %s; docs/benchmarks.md gives $%.0f for %.0f waited against reactive's $%.0f for %.0f",
				s.row, p["cost $"], p["wait GPU-h"], r["cost $"], r["wait GPU-h"])
		}
	}
}

// thousands writes a whole number with commas.
func thousands(v float64) string {
	s := strconv.FormatFloat(v, 'f', 0, 64)
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}

// simulateTable is the table of the first block of page shown under
// "$ command" (exactly), by policy and column.
func simulateTable(t *testing.T, page, command string) map[string]map[string]float64 {
	t.Helper()
	_, rest, ok := strings.Cut(page, "$ "+command+"\n")
	if !ok {
		t.Fatalf("docs/benchmarks.md shows no %q", command)
	}
	block, _, _ := strings.Cut(rest, "```")
	var header []string
	out := map[string]map[string]float64{}
	cols := regexp.MustCompile(`\s{2,}`)
	for _, line := range strings.Split(block, "\n") {
		line = strings.TrimSpace(line)
		if strings.HasPrefix(line, "policy") {
			header = cols.Split(line, -1)
			continue
		}
		f := strings.Fields(line)
		if header == nil || len(f) != len(header) {
			continue
		}
		row := map[string]float64{}
		for i, h := range header[1:] {
			if v, err := strconv.ParseFloat(strings.TrimSuffix(f[i+1], "%"), 64); err == nil {
				row[h] = v
			}
		}
		out[f[0]] = row
	}
	return out
}

// TestDocsBuildThroughMake: no page, and no example's comment, gives a
// build of the binary outside make (go run or go build of
// ./cmd/autoscaler): only make's builds pass gcc the flag that keeps it
// quiet about the deprecated functions NVML's header declares (Go has no
// per-module setting for it), so every other path would print some 150
// lines of warnings on a first build.
func TestDocsBuildThroughMake(t *testing.T) {
	pages := append(docPages(t), "examples/terraform/aws/README.md", "examples/terraform/gcp/README.md")
	hcl, err := filepath.Glob(filepath.Join(repoRoot, "examples", "*.hcl"))
	if err != nil || len(hcl) == 0 {
		t.Fatalf("examples/*.hcl: %v", err)
	}
	for _, f := range hcl {
		rel, _ := filepath.Rel(repoRoot, f)
		pages = append(pages, rel)
	}
	build := regexp.MustCompile(`go (run|build|install)\b[^\n` + "`" + `]*\./cmd/autoscaler`)
	for _, p := range pages {
		b, err := os.ReadFile(filepath.Join(repoRoot, p))
		if err != nil {
			t.Fatal(err)
		}
		for n, line := range strings.Split(string(b), "\n") {
			if m := build.FindString(line); m != "" {
				t.Errorf("%s:%d: %q builds the binary outside make: use make build (bin/autoscaler) or make run", p, n+1, m)
			}
		}
	}
}

// TestMakeRun: the README's first command, make run, builds bin/autoscaler
// with the flag that keeps gcc quiet about NVML's header, then runs the
// controller on the simulated cloud, as the README's tour assumes (the
// docs test runs that command as autoscaler run -config
// examples/local.hcl).
func TestMakeRun(t *testing.T) {
	if _, err := exec.LookPath("make"); err != nil {
		t.Skip("no make here")
	}
	out, err := exec.Command("make", "-C", repoRoot, "--no-print-directory", "-n", "run").CombinedOutput()
	if err != nil {
		t.Fatalf("make -n run: %v\n%s", err, out)
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	if len(lines) != 2 || !strings.Contains(lines[0], " build ") || !strings.HasSuffix(lines[0], "-o bin/autoscaler ./cmd/autoscaler") ||
		strings.TrimSpace(lines[1]) != "bin/autoscaler run -config examples/local.hcl" {
		t.Errorf("make -n run:\n%s\nwant the build of bin/autoscaler, then bin/autoscaler run -config examples/local.hcl", out)
	}
	cflags, err := exec.Command("make", "-C", repoRoot, "-s", "--no-print-directory", "--eval", "cgo-cflags: ; @echo \"$$CGO_CFLAGS\"", "cgo-cflags").Output()
	if err != nil || !strings.Contains(string(cflags), "-Wno-deprecated-declarations") {
		t.Errorf("make's recipes get CGO_CFLAGS=%q (%v); want -Wno-deprecated-declarations in it", strings.TrimSpace(string(cflags)), err)
	}
}
