package main

import (
	"bufio"
	"bytes"
	"errors"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/fleetcast/autoscaler/agent"
)

// repoRoot is the repository's root, seen from this package's directory
// (where go test runs its tests).
const repoRoot = "../.."

// docPages are the pages whose commands TestReadmeCommands accounts for:
// the README and every page under docs/.
func docPages(t *testing.T) []string {
	t.Helper()
	pages := []string{"README.md"}
	err := filepath.WalkDir(filepath.Join(repoRoot, "docs"), func(path string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() && strings.HasSuffix(path, ".md") {
			rel, _ := filepath.Rel(repoRoot, path)
			pages = append(pages, rel)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return pages
}

// readmeCommand is one command line found in a page's fenced blocks.
type readmeCommand struct {
	page string // the page, from the repository's root
	line int    // the page's line number where the command starts
	text string // as written, continuation lines joined
	// cmd is text normalised: no "$ " prompt, no trailing comment, no
	// "/usr/bin/time -v " in front, and "go run ./cmd/autoscaler" or
	// "bin/autoscaler" as "autoscaler" ("make run" as the command it runs).
	cmd string
	// output is what the page shows after the command in the same
	// block ("$ " prompts only), up to the next prompt or the block's end.
	output string
}

// readmeCommands extracts the command lines of a page (its path from the
// repository's root): every line of a ```sh block (or bash, shell), and in
// any other fenced block the lines that start with "autoscaler ",
// "autoscaler-agent ", "go run
// ./cmd/autoscaler" or a "$ " prompt. A line ending in a backslash
// continues on the next. A block with no language whose lines look like
// commands is an error: tag it sh, or text if it is not run.
// shellCommands are the first words of command lines a block with no
// language must not hold unchecked.
var shellCommands = map[string]bool{"go": true, "make": true, "cp": true, "mkdir": true, "sha256sum": true, "curl": true,
	"terraform": true, "sudo": true, "systemctl": true, "docker": true, "pip": true, "apt-get": true, "autoscaler": true, "autoscaler-agent": true,
	"scripts/try-moto.sh": true, "export": true, "cd": true, "git": true}

func readmeCommands(t *testing.T, page string) []readmeCommand {
	t.Helper()
	f, err := os.Open(filepath.Join(repoRoot, page))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var (
		cmds    []readmeCommand
		inBlock bool
		lang    string
		pending = -1 // the index of a command whose line ends in a backslash
		out     = -1 // the index of the prompted command whose output follows
		outBuf  []string
	)
	flushOut := func() {
		if out >= 0 {
			cmds[out].output = strings.Join(outBuf, "\n")
		}
		out, outBuf = -1, nil
	}
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		if strings.HasPrefix(strings.TrimSpace(line), "```") {
			if inBlock {
				flushOut()
				if pending >= 0 {
					t.Fatalf("%s:%d: a command ends in a backslash at the end of its block", page, cmds[pending].line)
				}
			}
			inBlock, lang = !inBlock, strings.TrimPrefix(strings.TrimSpace(line), "```")
			if lang == "bash" || lang == "shell" {
				lang = "sh"
			}
			continue
		}
		if !inBlock {
			continue
		}
		if pending >= 0 {
			cmds[pending].text += " " + strings.TrimSpace(line)
		} else {
			trimmed := strings.TrimSpace(line)
			if f := strings.Fields(trimmed); inBlock && lang == "" && len(f) > 0 && shellCommands[f[0]] {
				t.Errorf("%s:%d: %q in a block with no language: tag the block sh (its commands are then checked) or text", page, n, trimmed)
			}
			prompted := strings.HasPrefix(line, "$ ")
			isCmd := lang == "sh" && trimmed != "" && !strings.HasPrefix(trimmed, "#") ||
				prompted || strings.HasPrefix(line, "autoscaler ") || strings.HasPrefix(line, "autoscaler-agent ") || strings.HasPrefix(line, "bin/autoscaler ") || strings.HasPrefix(line, "go run ./cmd/autoscaler")
			if !isCmd {
				if out >= 0 {
					outBuf = append(outBuf, line)
				}
				continue
			}
			flushOut()
			cmds = append(cmds, readmeCommand{page: page, line: n, text: strings.TrimPrefix(line, "$ ")})
			pending = len(cmds) - 1
			if prompted {
				out = pending
			}
		}
		if c := &cmds[pending]; strings.HasSuffix(c.text, `\`) {
			c.text = strings.TrimSpace(strings.TrimSuffix(c.text, `\`))
			continue
		}
		pending = -1
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	for i := range cmds {
		c := &cmds[i]
		words, err := shellWords(c.text)
		if err != nil {
			t.Fatalf("%s:%d: %v: %s", page, c.line, err, c.text)
		}
		if len(words) >= 2 && words[0] == "/usr/bin/time" && words[1] == "-v" {
			words = words[2:]
		}
		if len(words) >= 2 && words[0] == "go" && words[1] == "run" && len(words) > 2 && words[2] == "./cmd/autoscaler" {
			words = append([]string{"autoscaler"}, words[3:]...)
		}
		if len(words) > 0 && words[0] == "bin/autoscaler" {
			words[0] = "autoscaler"
		}
		if len(words) == 2 && words[0] == "make" && words[1] == "run" {
			// The Makefile's run target, as TestMakeRun holds it.
			words = strings.Fields("autoscaler run -config examples/local.hcl")
		}
		c.cmd = strings.Join(words, " ")
	}
	return cmds
}

// shellWords splits s as sh would into words (single and double quotes,
// no expansion), up to an unquoted "#" that starts a word (a comment).
func shellWords(s string) ([]string, error) {
	var (
		words []string
		w     strings.Builder
		inW   bool
		quote rune
	)
	for _, r := range s {
		switch {
		case quote != 0:
			if r == quote {
				quote = 0
			} else {
				w.WriteRune(r)
			}
		case r == '\'' || r == '"':
			quote, inW = r, true
		case r == ' ' || r == '\t':
			if inW {
				words, inW = append(words, w.String()), false
				w.Reset()
			}
		case r == '#' && !inW:
			return words, nil
		default:
			w.WriteRune(r)
			inW = true
		}
	}
	if quote != 0 {
		return nil, errors.New("unterminated quote")
	}
	if inW {
		words = append(words, w.String())
	}
	return words, nil
}

// testRef names a test (or benchmark) in a package directory, relative to
// the repository's root.
type testRef struct{ dir, name string }

// readmeCoverage says how the docs' commands that start with prefix are
// accounted for: run here (run, given the command's words after
// "autoscaler" and the output the page shows after it), or exercised by
// the tests named, or not runnable offline (why).
type readmeCoverage struct {
	prefix string
	run    func(t *testing.T, args []string, shown string)
	tests  []testRef
	why    string
}

// readmeCoverages accounts for every command in README.md and docs/. A command
// matches the entry with the longest prefix of its normalised form.
func readmeCoverages() []readmeCoverage {
	sharesTests := []testRef{{"trace", "TestRealOpenb"}, {"simulate", "TestSharesPackOnOneGPU"}, {"simulate", "TestShareQueuePacked"},
		{"simulate", "TestSharesAndTypesProperty"}, {"simulate", "TestTypedJobsBuyTheirType"}}
	return []readmeCoverage{
		{prefix: "autoscaler run -config examples/local.hcl", run: readmeRun},
		{prefix: "autoscaler history import -config examples/cloud.hcl -series demand.csv", run: readmeHistoryImport},
		{prefix: "autoscaler plan -config examples/local.hcl -at ", run: readmePlan},
		{prefix: "autoscaler simulate -config examples/local.hcl -trace ", run: readmeSimulate},
		{prefix: "autoscaler simulate -config examples/philly-fair.hcl -trace ", run: readmeSimulate},
		{prefix: "autoscaler simulate -config examples/philly-fair.hcl -trace ../shared/traces/philly_rfold/philly_trace.csv -frontier", why: frontierWhy, tests: frontierTests},
		{prefix: "autoscaler simulate -config examples/local.hcl -trace ../shared/traces/helios_earth_vc_sequence_derived/earth_16vc_sum_per_minute.csv -value-column running_gpu_num_sum16vc+pending_gpu_num_sum16vc -frontier", why: frontierWhy, tests: frontierTests},
		{prefix: "autoscaler simulate -config examples/local.hcl -trace ../shared/bench/series/servegen_msmall_10m.csv -scale 0.1 -frontier", why: frontierWhy, tests: frontierTests},
		{prefix: "autoscaler simulate -config examples/philly-fair.hcl -trace ../shared/traces/philly_rfold/philly_trace.csv -policies reactive,predictive,oracle -announce-share ",
			why: "the sensitivity to announcements: whole Philly runs (minutes each under the race detector), rewritten by make bench", tests: []testRef{{"simulate", "TestAnnouncedJobs"}}},
		{prefix: "autoscaler simulate -config examples/philly-fair.hcl -trace ../shared/traces/philly_rfold/philly_trace.csv -advice-check", why: adviceWhy, tests: adviceTests},
		{prefix: "autoscaler simulate -config examples/openb.hcl -trace ../shared/traces/alibaba_openb_v2023/openb_pod_list_default.csv -frontier",
			why: "a frontier on the whole openb pod list: 24 simulations, two minutes", tests: append([]testRef{{"simulate", "TestFrontierRunsUntiered"}, {"simulate", "TestFrontierTiers"}}, frontierTests...)},
		{prefix: "autoscaler simulate -config examples/openb.hcl -trace ../shared/traces/alibaba_openb_v2023/openb_pod_list_default.csv -policies predictive",
			why:   "the whole openb pod list (a minute a run); the trace's reading and the tiers' workings are tested on it and on small traces",
			tests: []testRef{{"trace", "TestRealOpenb"}, {"simulate", "TestTiersOrderTheQueue"}, {"simulate", "TestBestEffortBuysNoOnDemand"}, {"simulate", "TestPendingShapes"}}},
		{prefix: "autoscaler simulate -config examples/openb.hcl -trace ../shared/traces/alibaba_openb_v2023/openb_pod_list_default.csv -policies reactive,predictive",
			why:   "GPU shares on the whole openb pod list (20 seconds a run); placement, packing and the report are tested on small and generated traces",
			tests: sharesTests},
		{prefix: "autoscaler simulate -config examples/openb.hcl -trace ../shared/traces/alibaba_openb_v2023/openb_pod_list_gpuspec33.csv -policies reactive,predictive",
			why:   "GPU types on the whole openb pod list (20 seconds a run); that every job runs on a type it accepts is a property over generated runs",
			tests: sharesTests},
		{prefix: "autoscaler simulate -config philly-budgets.hcl -trace ../shared/traces/philly_rfold/philly_trace.csv -policies predictive -label-teams 16",
			why:   "team budgets on the whole Philly trace (philly-fair.hcl with the page's team blocks appended; 15 seconds a run); budgets, shares and their report are tested on generated traces",
			tests: []testRef{{"simulate", "TestBudgetsHeld"}, {"simulate", "TestSharesKept"}, {"simulate", "TestBudgetBook"}, {"controller", "TestTeamOverBudget"}}},
		{prefix: "go run ./scripts/tierdemand ", why: "a trace's demand by tier, for the tiers' backtest", tests: []testRef{{"scripts/tierdemand", "TestTierDemand"}}},
		{prefix: "autoscaler forecast -series openb-tiers.csv -tiers ", why: "the tiers' backtest on openb's demand by tier (written by scripts/tierdemand; 30 origins, seconds)",
			tests: []testRef{{"forecast", "TestBacktestSharesByHand"}, {"cmd/autoscaler", "TestForecastTiers"}}},
		{prefix: "autoscaler simulate -config examples/local.hcl -trace ../shared/traces/helios_earth_vc_sequence_derived/earth_16vc_sum_per_minute.csv -value-column running_gpu_num_sum16vc+pending_gpu_num_sum16vc -advice-check", why: adviceWhy, tests: adviceTests},
		{prefix: "autoscaler simulate -config examples/local.hcl -trace ../shared/bench/series/servegen_msmall_10m.csv -scale 0.1 -advice-check", why: adviceWhy, tests: adviceTests},
		{prefix: "autoscaler simulate -config examples/philly-fair.hcl -trace ../shared/traces/philly_rfold/philly_trace.csv -policies reactive,predictive,oracle -runtime-estimates ",
			why: "the sensitivity to runtime estimates: whole Philly runs (minutes each under the race detector), rewritten by make bench", tests: []testRef{{"simulate", "TestRuntimeEstimates"}}},
		{prefix: "autoscaler report -addr ", why: "asks a running controller; its rows and figures are pinned in testdata/report.golden from a state directory",
			tests: []testRef{{"cmd/autoscaler", "TestReportLive"}, {"cmd/autoscaler", "TestReportStateDir"}}},
		{prefix: "autoscaler report -config ", why: "reads a stopped controller's records; its rows and figures are pinned in testdata/report.golden",
			tests: []testRef{{"cmd/autoscaler", "TestReportStateDir"}, {"controller", "TestUsageThreeTeams"}}},
		{prefix: "autoscaler validate -config onprem.hcl", run: readmeOnPrem},
		{prefix: "autoscaler plugins -config onprem.hcl", run: readmeOnPrem},
		{prefix: "autoscaler-agent register ", run: readmeAgentJob},
		{prefix: "autoscaler-agent checkpoint ", run: readmeAgentJob},
		{prefix: "autoscaler-agent done ", run: readmeAgentJob},
		{prefix: "autoscaler-agent status ", why: "asks a running agent over its socket; its words are pinned in internal/agentcmd/testdata/agent-status.txt",
			tests: []testRef{{"cmd/autoscaler", "TestAgentStatus"}, {"internal/agentcmd", "TestPrintAgentStatus"}}},
		{prefix: "go build -o /tmp/ex/fleetcast-commands ", why: onPremSetupWhy, tests: onPremSetupTests},
		{prefix: "cp examples/plugins/commands/racks.sh /tmp/ex/", why: onPremSetupWhy, tests: onPremSetupTests},
		{prefix: "mkdir -p /tmp/ex/racks ", why: onPremSetupWhy, tests: onPremSetupTests},
		{prefix: "sha256sum /tmp/ex/fleetcast-commands", why: onPremSetupWhy, tests: onPremSetupTests},
		{prefix: "make test", why: "CI runs it (.ci/run)", tests: []testRef{{".ci", "run"}}},
		{prefix: "scripts/try-moto.sh", why: "runs the script against moto_server", tests: []testRef{{"scripts/trymoto", "TestTryMotoScript"}}},
		{prefix: "autoscaler-agent -controller ", why: "the agent command on a node: run as a process against a controller, on AWS's metadata mock and on moto's instances, and on a stand-in for Compute Engine's metadata server",
			tests: []testRef{{"cmd/autoscaler", "TestAgentSpotNotice"}, {"cmd/autoscaler", "TestDeployOnAWS"}, {"cmd/autoscaler", "TestAgentCLIDrain"}, {"cmd/autoscaler", "TestAgentGCPBootstrap"}}},
		{prefix: "exec /usr/local/bin/autoscaler slurm ", why: "Slurm's resume and suspend programs: slurmctld runs them in TestRunSlurmNodes; their routes are TestSlurmProgramRoutes'",
			tests: []testRef{{"cmd/autoscaler", "TestRunSlurmNodes"}, {"controller", "TestSlurmProgramRoutes"}}},
		{prefix: "python train.py &", why: "a batch script whose job checkpoints on SIGUSR1: TestRunSlurmNodes's job and TestControlLiveCluster's trap it so, and are sent it through Slurm",
			tests: []testRef{{"cmd/autoscaler", "TestRunSlurmNodes"}, {"slurm", "TestControlLiveCluster"}}},
		{prefix: "pid=$!", why: "the same batch script", tests: []testRef{{"cmd/autoscaler", "TestRunSlurmNodes"}}},
		{prefix: "trap ", why: "the same batch script", tests: []testRef{{"cmd/autoscaler", "TestRunSlurmNodes"}}},
		{prefix: "wait $pid", why: "the same batch script", tests: []testRef{{"cmd/autoscaler", "TestRunSlurmNodes"}}},
		{prefix: "autoscaler api-token ", why: "calls the running controller's API", tests: []testRef{{"cmd/autoscaler", "TestAPITokensCLI"}, {"apiauth", "TestTokenRoutes"}}},
		{prefix: "curl ", why: "POST /v1/demand to the running controller's API",
			tests: []testRef{{"controller", "TestDemandPushes"}, {"controller", "TestDemandRefusals"}, {"controller", "TestDemandAnnouncements"}, {"controller", "TestAPI"}}},
		{prefix: "go test ./planner -run ^$ -bench ^BenchmarkPlan ", why: "a benchmark, re-measured by hand or make bench", tests: []testRef{{"planner", "BenchmarkPlan"}}},
		{prefix: "go test ./controller -run ^$ -bench ^BenchmarkCycle$ ", why: "a benchmark, re-measured by hand or make bench", tests: []testRef{{"controller", "BenchmarkCycle"}}},
		{prefix: "go test ./controller -run ^$ -bench ^BenchmarkCycleUsage$ ", why: "a benchmark, re-measured by hand", tests: []testRef{{"controller", "BenchmarkCycleUsage"}}},
		{prefix: "go test ./controller -run ^$ -bench ^BenchmarkUsageReport$ ", why: "a benchmark, re-measured by hand", tests: []testRef{{"controller", "BenchmarkUsageReport"}}},
		{prefix: "go test ./simulate -run ^$ -bench ^BenchmarkSimulatePhilly$ ", why: "a benchmark (seconds: the whole Philly trace), re-measured by hand or make bench", tests: []testRef{{"simulate", "BenchmarkSimulatePhilly"}}},
		{prefix: "go test ./agent/gpu -run ^$ -bench ^BenchmarkRead ", why: "a benchmark, re-measured by hand or make bench", tests: []testRef{{"agent/gpu", "BenchmarkRead"}}},
		{prefix: "go test ./controller/reports -run ^$ -bench ^BenchmarkReceiver ", why: "a benchmark, re-measured by hand or make bench", tests: []testRef{{"controller/reports", "BenchmarkReceiver"}}},
		{prefix: "go test ./agent -run ^$ -bench ^BenchmarkSample ", why: "a benchmark, re-measured by hand or make bench", tests: []testRef{{"agent", "BenchmarkSample"}}},
		{prefix: "autoscaler-agent -no-gpu -interval 1s ", why: "the agent's memory, measured by make bench; the agent without GPUs runs as a process in these tests",
			tests: []testRef{{"cmd/autoscaler", "TestAgentSpotNotice"}, {"cmd/autoscaler", "TestAgentGCEPreemption"}}},
		{prefix: "go test ./forecast -run ^$ -bench ^BenchmarkAuto ", why: "a benchmark, re-measured by hand or make bench", tests: []testRef{{"forecast", "BenchmarkAuto14d10m"}, {"forecast", "BenchmarkAuto90d1m"}}},
		{prefix: "autoscaler forecast -series ../shared/traces/servegen_bailian/servegen_aggregate_rate_10min.csv -value-column total_rate_rps -where model=", why: "one model's series of the shared ServeGen file, chosen by a column",
			tests: []testRef{{"trace", "TestRealServeGen"}, {"cmd/autoscaler", "TestForecastWhere"}}},
		{prefix: "autoscaler forecast -series ../shared/bench/series/", why: "a backtest on a shared series (30 origins, seconds each; the scorecard and make bench run them)", tests: []testRef{{"forecast", "TestBacktestProtocol"}, {"cmd/autoscaler", "TestForecastBacktestJSON"}}},
	}
}

// frontierWhy and frontierTests account for the docs' frontiers: 14
// or 15 whole simulations each (tens of seconds on Philly, minutes under the race
// detector), written into docs/benchmarks.md by make bench (scripts/bench.sh) and
// exercised on a small trace by these tests.
const frontierWhy = "a frontier: 14 or 15 simulations, rewritten by make bench"

var frontierTests = []testRef{{"simulate", "TestFrontier"}, {"cmd/autoscaler", "TestSimulateFrontier"}}

// adviceWhy and adviceTests account for the docs' advice checks: 10
// to 15 whole simulations each, like a frontier.
const adviceWhy = "an advice check: 10 to 15 simulations, rewritten by make bench"

var adviceTests = []testRef{{"simulate", "TestAdviceCheck"}, {"cmd/autoscaler", "TestSimulateAdviceCheck"}}

// onPremSetupWhy and onPremSetupTests account for the set-up of the
// on-prem worked example, which readmeOnPrem does itself in a temporary
// directory before it runs validate and plugins as the page does.
const onPremSetupWhy = "the on-prem example's set-up, done by readmeOnPrem in a temporary directory"

var onPremSetupTests = []testRef{{"cmd/autoscaler", "TestReadmeCommands"}}

// coverageFor returns the entry whose prefix is the longest of those
// cmd starts with, or nil.
func coverageFor(cmd string, covs []readmeCoverage) *readmeCoverage {
	var best *readmeCoverage
	for i := range covs {
		if strings.HasPrefix(cmd, covs[i].prefix) && (best == nil || len(covs[i].prefix) > len(best.prefix)) {
			best = &covs[i]
		}
	}
	return best
}

// TestReadmeCommands runs every command line of the README and the pages
// under docs/ that runs offline, in a bounded form, and checks that each
// of the others is exercised by a test that exists.
func TestReadmeCommands(t *testing.T) {
	var cmds []readmeCommand
	for _, page := range docPages(t) {
		cmds = append(cmds, readmeCommands(t, page)...)
	}
	if len(cmds) < 10 {
		t.Fatalf("found only %d commands in the docs: the extraction is broken", len(cmds))
	}
	covs := readmeCoverages()
	used := map[string]bool{}
	for _, c := range cmds {
		cov := coverageFor(c.cmd, covs)
		if cov == nil {
			t.Errorf("%s:%d: command %q is neither run by TestReadmeCommands nor listed in readmeCoverages with the test that exercises it", c.page, c.line, c.text)
			continue
		}
		used[cov.prefix] = true
		if cov.run == nil {
			continue
		}
		words := strings.Fields(c.cmd)[1:]
		t.Run(strings.TrimSuffix(filepath.Base(c.page), ".md")+"_"+strconv.Itoa(c.line)+"_"+words[0], func(t *testing.T) {
			t.Logf("%s:%d: %s", c.page, c.line, c.text)
			cov.run(t, words, c.output)
		})
	}
	for _, cov := range covs {
		if !used[cov.prefix] {
			t.Errorf("readmeCoverages lists %q, which no command of the docs starts with: remove it", cov.prefix)
		}
		for _, ref := range cov.tests {
			if !testExists(t, ref) {
				t.Errorf("readmeCoverages: %q is exercised by %s in %s, which does not exist", cov.prefix, ref.name, ref.dir)
			}
		}
	}
}

// testExists reports whether ref's test or benchmark function is declared
// in a _test.go file of its directory; a ref in .ci names a file there.
func testExists(t *testing.T, ref testRef) bool {
	t.Helper()
	dir := filepath.Join(repoRoot, ref.dir)
	if ref.dir == ".ci" {
		_, err := os.Stat(filepath.Join(dir, ref.name))
		return err == nil
	}
	files, err := filepath.Glob(filepath.Join(dir, "*_test.go"))
	if err != nil {
		t.Fatal(err)
	}
	decl := regexp.MustCompile(`(?m)^func ` + regexp.QuoteMeta(ref.name) + `\(`)
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if decl.Match(b) {
			return true
		}
	}
	return false
}

// fromRoot rewrites args that name files relative to the repository's
// root (examples/local.hcl, ../shared/...) to paths from here.
func fromRoot(args []string) []string {
	out := make([]string, len(args))
	for i, a := range args {
		out[i] = a
		if strings.HasPrefix(a, "-") || i > 0 && args[i-1] == "-plot" {
			continue
		}
		if strings.HasPrefix(a, "examples/") || strings.HasPrefix(a, "../shared/") {
			out[i] = filepath.Join(repoRoot, a)
		}
	}
	return out
}

// readmeRun runs the controller as the quick start does, bounded: two
// simulated hours at full speed, on a free port, with its state in a
// temporary directory.
func readmeRun(t *testing.T, args []string, _ string) {
	args = append(fromRoot(args), "-for", "2h", "-sim-speed", "1e9", "-sim-start", "2026-11-30T09:00:00Z",
		"-listen", "127.0.0.1:0", "-state-dir", t.TempDir())
	code, out, errOut := cmdline(args...)
	if code != 0 {
		t.Fatalf("autoscaler %s: exit %d: %s", strings.Join(args, " "), code, errOut)
	}
	for _, want := range []string{"Fleetcast controller on the simulated cloud: 4 pools", "---- demand "} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q (the quick start shows it):\n%s", want, out)
		}
	}
}

// readmePlan runs plan as written and checks that its output is the
// one shown, line for line (-at makes it reproducible), when the page
// shows one.
func readmePlan(t *testing.T, args []string, shown string) {
	code, out, errOut := cmdline(fromRoot(args)...)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	if shown != "" && strings.TrimRight(out, "\n") != strings.TrimRight(shown, "\n") {
		t.Errorf("the docs show a plan that is no longer this command's: update it to\n%s", out)
	}
}

// readmeBlock is the fenced block of page (its fence starting fence) that
// follows the first line containing after.
func readmeBlock(t *testing.T, page, after, fence string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(repoRoot, page))
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := strings.Cut(string(b), after)
	if !ok {
		t.Fatalf("%s has no %q", page, after)
	}
	_, rest, _ = strings.Cut(rest, "\n"+fence)
	_, rest, _ = strings.Cut(rest, "\n") // the rest of the fence's line
	block, _, ok := strings.Cut(rest, "```")
	if !ok {
		t.Fatalf("%s: no fenced block after %q", page, after)
	}
	return block
}

// pluginsPage is the page of the on-prem worked example.
const pluginsPage = "docs/providers/plugins.md"

// readmeOnPrem runs a command of the docs' on-prem worked example in a
// directory set up as it says (the example plugin built, racks.sh, three
// servers off, its config with the plugin's checksum) and checks that the
// output is the docs'; for validate, also that a config with the two
// mistakes the docs show gets the errors they show.
func readmeOnPrem(t *testing.T, args []string, shown string) {
	dir := t.TempDir()
	bin, sum := commandsPlugin(t)
	script, _ := os.ReadFile(filepath.Join(repoRoot, "examples/plugins/commands/racks.sh"))
	if err := os.WriteFile(filepath.Join(dir, "racks.sh"), script, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(dir, "racks"), 0o700); err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{"gpu-01", "gpu-02", "gpu-03"} {
		if err := os.WriteFile(filepath.Join(dir, "racks", s), []byte("off\n"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	hcl := readmeBlock(t, pluginsPage, "## On-prem servers with your own commands", "```hcl")
	want := readmeBlock(t, pluginsPage, "is found by `validate`, at its place:", "```")
	hcl = strings.ReplaceAll(strings.Replace(hcl, `sha256 = "..."`, `sha256 = "`+sum+`"`, 1), "/tmp/ex/fleetcast-commands", bin)
	hcl = strings.ReplaceAll(hcl, "/tmp/ex", dir)
	if err := os.WriteFile(filepath.Join(dir, "onprem.hcl"), []byte(hcl), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Chdir(dir)
	code, out, errOut := cmdline(args...)
	if code != 0 || strings.TrimRight(out, "\n") != strings.TrimRight(shown, "\n") {
		t.Errorf("autoscaler %s: exit %d; the docs show\n%s\nnow\n%s\n%s", strings.Join(args, " "), code, shown, out, errOut)
	}
	if args[0] != "validate" {
		return
	}
	bad := strings.Replace(strings.Replace(hcl, `["`+dir+`/racks.sh", "list"]`, `["racks.sh", "list"]`, 1), "rack_dir =", "rack-dir =", 1)
	if err := os.WriteFile("onprem.hcl", []byte(bad), 0o600); err != nil {
		t.Fatal(err)
	}
	if code, _, errOut := cmdline(args...); code == 0 || strings.TrimRight(renameDir(errOut, dir, "/tmp/ex"), "\n") != strings.TrimRight(want, "\n") {
		t.Errorf("validate with the docs' mistakes: exit %d; the docs show\n%s\nnow\n%s", code, want, errOut)
	}
}

// simulated remembers the output of each simulate run by its arguments
// without -plot: the docs run the whole Philly trace several times.
var simulated = map[string]string{}

// readmeSimulate runs simulate as written (a -plot into a temporary
// directory) when the shared traces are present, and checks that the
// output the docs show, if any, is the command's. With -short it runs
// none.
func readmeSimulate(t *testing.T, args []string, shown string) {
	args = fromRoot(args)
	var key []string
	for i := 0; i < len(args); i++ {
		switch {
		case args[i] == "-plot" && i+1 < len(args):
			args[i+1] = filepath.Join(t.TempDir(), filepath.Base(args[i+1]))
			i++
		default:
			key = append(key, args[i])
		}
		if i > 0 && args[i-1] == "-trace" {
			if _, err := os.Stat(args[i]); err != nil {
				t.Skipf("the shared traces are not here (%v): not run", err)
			}
		}
	}
	out, ok := simulated[strings.Join(key, " ")]
	if !ok && testing.Short() {
		t.Skip("-short: a whole trace takes seconds")
	}
	if !ok {
		// In a child process (see TestMain): a whole trace in this one
		// would raise its peak memory, which the children of later tests
		// (TestValidateBounded's) start from.
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), "FLEETCAST_TEST_CLI="+strings.Join(args, " "))
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		if err := cmd.Run(); err != nil {
			t.Fatalf("autoscaler %s: %v: %s", strings.Join(args, " "), err, stderr.String())
		}
		out = stdout.String()
		simulated[strings.Join(key, " ")] = out
	}
	if !strings.Contains(out, "  predictive ") || !strings.Contains(out, "      oracle ") {
		t.Errorf("output lacks the predictive and oracle rows:\n%s", out)
	}
	// docs/benchmarks.md's Speed section shows /usr/bin/time's lines, not the table.
	if shown = strings.TrimSpace(shown); shown != "" && !strings.Contains(shown, "Elapsed (wall clock)") && strings.TrimSpace(out) != shown {
		t.Errorf("the docs show output that is no longer this command's (make bench rewrites it): now\n%s", out)
	}
}

// readmeAgentJob runs a job's agent command (register, checkpoint, done) as
// written, its optional flags in, against an agent listening on a
// temporary socket; register's -pid is this process, a live one.
func readmeAgentJob(t *testing.T, args []string, _ string) {
	socket := startTestAgent(t)
	run := []string{"agent"} // autoscaler-agent's words, as testRun takes them
	for i := 0; i < len(args); i++ {
		a := strings.Trim(args[i], "[]")
		run = append(run, a)
		if a == "-pid" && i+1 < len(args) {
			run = append(run, strconv.Itoa(os.Getpid()))
			i++
		}
	}
	if run[1] != "register" { // checkpoint and done need the job registered
		if code, _, errOut := cmdline("agent", "register", "-job", "train-7", "-gpus", "0", "-pid", strconv.Itoa(os.Getpid()), "-socket", socket); code != 0 {
			t.Fatalf("agent register: exit %d: %s", code, errOut)
		}
	}
	run = append(run, "-socket", socket)
	if code, _, errOut := cmdline(run...); code != 0 {
		t.Fatalf("autoscaler-agent %s: exit %d: %s", strings.Join(run[1:], " "), code, errOut)
	}
}

// startTestAgent starts an agent (no GPUs, no controller) serving its
// local API on a unix socket, and returns the socket's path.
func startTestAgent(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "fc") // a short path: unix sockets allow about 100 bytes
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	a, err := agent.New(agent.Config{Node: "i-0abc"})
	if err != nil {
		t.Fatal(err)
	}
	socket := filepath.Join(dir, "agent.sock")
	l, err := agent.ListenUnix(socket)
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: a.Handler()}
	go srv.Serve(l)
	t.Cleanup(func() { srv.Close() })
	return socket
}

func TestShellWords(t *testing.T) {
	tests := []struct {
		in   string
		want []string
	}{
		{"autoscaler plan -config examples/local.hcl", []string{"autoscaler", "plan", "-config", "examples/local.hcl"}},
		{"make test     # every test", []string{"make", "test"}},
		{"go test ./planner -run '^$' -bench X", []string{"go", "test", "./planner", "-run", "^$", "-bench", "X"}},
		{`curl -H "Authorization: Bearer $T" -d '{"a": 1}' URL`, []string{"curl", "-H", "Authorization: Bearer $T", "-d", `{"a": 1}`, "URL"}},
		{"a b#c", []string{"a", "b#c"}},
	}
	for _, tt := range tests {
		got, err := shellWords(tt.in)
		if err != nil || strings.Join(got, "|") != strings.Join(tt.want, "|") {
			t.Errorf("shellWords(%q) = %q, %v; want %q", tt.in, got, err, tt.want)
		}
	}
	if _, err := shellWords("echo 'open"); err == nil {
		t.Error("shellWords accepted an unterminated quote")
	}
}
