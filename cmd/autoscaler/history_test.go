package main

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/fleetcast/autoscaler/internal/cli"
	"github.com/fleetcast/autoscaler/loop"
	"github.com/fleetcast/autoscaler/state"
)

// historyCSV is a demand series of rows every gap from from to to (times
// as RFC 3339), the value of each row being value(its time).
func historyCSV(from, to time.Time, gap time.Duration, value func(time.Time) float64) string {
	var b strings.Builder
	b.WriteString("time,running,pending\n")
	for t := from; !t.After(to); t = t.Add(gap) {
		v := value(t)
		fmt.Fprintf(&b, "%s,%g,%g\n", t.UTC().Format(time.RFC3339), v-1, 1.0)
	}
	return b.String()
}

// recorded is the fleet's demand history in the state directory dir.
func recorded(t *testing.T, dir string) []state.Sample {
	t.Helper()
	s, err := state.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	got, err := s.Demand(loop.DemandSeries, time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	return got
}

// TestHistoryImport: `history import` records a series in the state
// store, one sample per forecast step (the peak of its rows) at the step's
// start, within forecast.history before now, and says what it left out and
// why; what the store had recorded wins; a series it cannot take (a row in
// the future, times without dates, an absurd value, a bad row) is refused
// with its file and line, and nothing is recorded.
func TestHistoryImport(t *testing.T) {
	const step = 10 * time.Minute // examples/local.hcl's forecast.step
	now := time.Now().UTC()
	end := now.Truncate(step).Add(-time.Hour)
	// Rows every 5 minutes: the second row of a step is the higher.
	rising := func(t time.Time) float64 { return float64(10 + t.Minute()%10) }
	for _, tt := range []struct {
		name string
		csv  string
		args []string
		// before is recorded before the import, at these steps before end.
		before []int
		code   int
		// out and errOut are what the output must hold.
		out, errOut []string
		// steps is how many samples must be recorded after, or up to slack
		// fewer (the command's now may be a step later than the test's);
		// peak, if set, what each imported one must be.
		steps, slack int
		peak         float64
	}{
		{name: "a day of 5-minute rows", csv: historyCSV(end.Add(-24*time.Hour+step), end.Add(5*time.Minute), 5*time.Minute, rising), args: []string{"-value-column", "running+pending"},
			out:   []string{"Imported 144 samples of demand.csv into ", "one per 10m step (the peak of its rows)", " to " + end.Format("2006-01-02 15:04 UTC") + ".", "Skipped none."},
			steps: 144, peak: 15},
		{name: "rows older than the history left out", csv: historyCSV(end.Add(-15*24*time.Hour), end, step, rising), args: []string{"-value-column", "running+pending"},
			out:   []string{"Imported 20", "rows older than forecast.history (14d) before now."},
			steps: 14*24*6 - 6 + 1, slack: 2, peak: 10},
		{name: "recorded steps win", csv: historyCSV(end.Add(-2*time.Hour+step), end, step, rising), args: []string{"-value-column", "running+pending"}, before: []int{0, 3},
			out:   []string{"Imported 10 samples", "Skipped 2 steps the store had recorded already (its samples kept)."},
			steps: 12},
		{name: "hourly rows interpolated", csv: historyCSV(end.Add(-3*time.Hour), end, time.Hour, func(time.Time) float64 { return 7 }), args: []string{"-value-column", "running+pending"},
			out: []string{"Imported 19 samples", "; 15 steps with no row interpolated from their neighbours)"}, steps: 19, peak: 7},
		{name: "bad rows skipped when asked", csv: "time,gpus\n" + end.Add(-step).Format(time.RFC3339) + ",3\n" + end.Format(time.RFC3339) + ",x\n" + end.Format(time.RFC3339) + ",4\n",
			args: []string{"-skip-bad-rows"}, out: []string{"Imported 2 samples", "Skipped 1 bad row(s)."}, steps: 2},
		{name: "one model of several", csv: "model,time,gpus\n" + "a," + end.Add(-step).Format(time.RFC3339) + ",3\n" + "b," + end.Add(-step).Format(time.RFC3339) + ",30\n" +
			"a," + end.Format(time.RFC3339) + ",4\n" + "b," + end.Format(time.RFC3339) + ",40\n",
			args: []string{"-value-column", "gpus", "-where", "model=b"}, out: []string{"Imported 2 samples", "Skipped none."}, steps: 2},
		{name: "a row in the future refused", csv: historyCSV(end, now.Add(2*time.Hour), time.Hour, rising), args: []string{"-value-column", "running+pending"}, code: 1,
			errOut: []string{"demand.csv:4: ", "is after now (", "a demand history holds no future; check the time zone"}},
		{name: "times without dates refused", csv: "time,gpus\n0,1\n600,2\n", code: 1,
			errOut: []string{"demand.csv: its times are seconds, not dates: the history needs dates"}},
		{name: "an absurd value refused", csv: "time,gpus\n" + end.Add(-step).Format(time.RFC3339) + ",1\n" + end.Format(time.RFC3339) + ",2e6\n", code: 1,
			errOut: []string{"demand.csv:3: demand 2e+06 GPUs is more than 1000000; -scale it to GPUs"}},
		{name: "a bad row refused", csv: "time,gpus\n" + end.Add(-step).Format(time.RFC3339) + ",1\n" + end.Format(time.RFC3339) + ",x\n", code: 1,
			errOut: []string{`demand.csv:3: gpus "x" is not a number`}},
		{name: "only rows older than the history", csv: historyCSV(end.Add(-20*24*time.Hour), end.Add(-15*24*time.Hour), time.Hour, rising), args: []string{"-value-column", "running+pending"},
			out: []string{"Imported nothing of demand.csv", "Skipped 121 rows older than forecast.history (14d) before now."}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "state")
			if tt.before != nil {
				s, err := state.Open(dir)
				if err != nil {
					t.Fatal(err)
				}
				for _, k := range tt.before {
					// The controller records at its cycles' times, within a step.
					if err := s.AppendDemand(loop.DemandSeries, state.Sample{Time: end.Add(-time.Duration(k)*step + 3*time.Minute), Value: 99}); err != nil {
						t.Fatal(err)
					}
				}
				s.Close()
			}
			series := writeFile(t, "demand.csv", tt.csv)
			code, out, errOut := cmdline(append([]string{"history", "import", "-config", localConfig, "-state-dir", dir, "-series", series}, tt.args...)...)
			if code != tt.code {
				t.Fatalf("exit %d, want %d:\n%s%s", code, tt.code, out, errOut)
			}
			for _, want := range tt.out {
				if !strings.Contains(out, want) {
					t.Errorf("output lacks %q:\n%s", want, out)
				}
			}
			for _, want := range tt.errOut {
				if !strings.Contains(errOut, want) {
					t.Errorf("errors lack %q:\n%s", want, errOut)
				}
			}
			if tt.code != 0 {
				if _, err := os.Stat(dir); err == nil {
					t.Errorf("a refused import made the state directory %s", dir)
				}
				return
			}
			got := recorded(t, dir)
			if len(got) > tt.steps || len(got) < tt.steps-tt.slack {
				t.Fatalf("recorded %d samples, want %d (or up to %d fewer)", len(got), tt.steps, tt.slack)
			}
			for i, x := range got {
				if x.Value == 99 {
					continue // recorded before
				}
				switch {
				case !x.Time.Equal(x.Time.Truncate(step)) || x.Time.After(now) || x.Time.Before(now.Add(-14*24*time.Hour)):
					t.Fatalf("sample %d at %s: want a step's start within 14d before now", i, x.Time)
				case i > 0 && !x.Time.After(got[i-1].Time):
					t.Fatalf("sample %d at %s is not after the one before", i, x.Time)
				case tt.peak != 0 && x.Value != tt.peak:
					t.Fatalf("sample %d at %s is %v, want %v", i, x.Time, x.Value, tt.peak)
				}
			}
			for _, k := range tt.before {
				at := end.Add(-time.Duration(k)*step + 3*time.Minute)
				if !containsSample(got, state.Sample{Time: at, Value: 99}) {
					t.Errorf("the sample recorded at %s is gone", at)
				}
			}
			// Again: everything is recorded now, and nothing changes.
			code, out, errOut = cmdline(append([]string{"history", "import", "-config", localConfig, "-state-dir", dir, "-series", series}, tt.args...)...)
			if again := recorded(t, dir); code != 0 || len(again) != len(got) {
				t.Errorf("a second import: exit %d, %d samples, want %d:\n%s%s", code, len(again), len(got), out, errOut)
			}
		})
	}
}

func containsSample(xs []state.Sample, x state.Sample) bool {
	for _, y := range xs {
		if y.Time.Equal(x.Time) && y.Value == x.Value {
			return true
		}
	}
	return false
}

// TestHistoryImportRefusedWhileRunning: a state store held by a
// controller is not written to, and the error says what to do.
func TestHistoryImportRefusedWhileRunning(t *testing.T) {
	dir := t.TempDir()
	s, err := state.Open(dir) // the running controller's hold
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	end := time.Now().UTC().Add(-time.Hour)
	series := writeFile(t, "demand.csv", historyCSV(end.Add(-time.Hour), end, 10*time.Minute, func(time.Time) float64 { return 3 }))
	code, out, errOut := cmdline("history", "import", "-config", localConfig, "-state-dir", dir, "-series", series, "-value-column", "running+pending")
	// The error names the store; its words (in use, what to do) are those
	// of testdata/history-in-use.golden.
	if code != 1 || !strings.Contains(errOut, dir) {
		t.Fatalf("exit %d, want 1 with the store in use and what to do:\n%s%s", code, out, errOut)
	}
	pinned(t, "history-in-use.golden", strings.ReplaceAll(errOut, dir, "$DIR"))
	if got, err := s.Demand(loop.DemandSeries, time.Time{}); err != nil || len(got) != 0 {
		t.Errorf("recorded %d samples, %v; want none", len(got), err)
	}
}

// TestHistoryUsage: the command line's mistakes are usage errors.
func TestHistoryUsage(t *testing.T) {
	// want is what each error names (the command, a flag); the words are
	// those of testdata/history-usage.golden.
	tests := []struct {
		args []string
		want string
	}{
		{nil, "history: "},
		{[]string{"export"}, `"export"`},
		{[]string{"import", "-config", localConfig}, "history import: -series"},
	}
	tr := &transcript{}
	for _, tt := range tests {
		code, out, errOut := cmdline(append([]string{"history"}, tt.args...)...)
		tr.add(strings.TrimSpace("history "+strings.Join(tt.args, " ")), code, out, errOut)
		if code != cli.ExitUsage || !strings.Contains(errOut, tt.want) {
			t.Errorf("history %s: exit %d, %q; want %d with %q", strings.Join(tt.args, " "), code, errOut, cli.ExitUsage, tt.want)
		}
	}
	tr.check(t, "history-usage.golden", len(tests))
}

// readmeHistoryImport runs the docs' import as written, in a directory
// holding a demand.csv of 15 days of minutes up to an hour ago, with the
// state in a temporary directory, and checks that its output is the one
// the docs show (but for the figures, the dates and the state directory);
// then that the same import again adds nothing, as the docs say.
func readmeHistoryImport(t *testing.T, args []string, shown string) {
	args = fromRoot(args)
	for i, a := range args {
		if strings.HasSuffix(a, ".hcl") {
			abs, err := filepath.Abs(a)
			if err != nil {
				t.Fatal(err)
			}
			args[i] = abs
		}
	}
	dir := t.TempDir()
	end := time.Now().UTC().Truncate(time.Minute).Add(-time.Hour)
	if err := os.WriteFile(filepath.Join(dir, "demand.csv"), []byte(historyCSV(end.Add(-15*24*time.Hour), end, time.Minute,
		func(t time.Time) float64 { return float64(40 + t.Hour()) })), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Chdir(dir)
	stateDir := filepath.Join(dir, "state")
	args = append(args, "-state-dir", stateDir)
	code, out, errOut := cmdline(args...)
	if code != 0 {
		t.Fatalf("autoscaler %s: exit %d: %s", strings.Join(args, " "), code, errOut)
	}
	shape := func(s string) string {
		s = strings.ReplaceAll(strings.TrimSpace(s), stateDir, "/var/lib/fleetcast")
		s = regexp.MustCompile(`\d{4}-\d\d-\d\d \d\d:\d\d UTC`).ReplaceAllString(s, "DATE")
		return regexp.MustCompile(`\d+`).ReplaceAllString(s, "N")
	}
	if shape(out) != shape(shown) {
		t.Errorf("the docs show\n%s\nthe command now prints\n%s", shown, out)
	}
	code, out, errOut = cmdline(args...)
	if code != 0 || !strings.Contains(out, "Imported nothing") || !strings.Contains(out, "steps the store had recorded already (its samples kept)") {
		t.Errorf("the same import again: exit %d, want it to add nothing:\n%s%s", code, out, errOut)
	}
}
