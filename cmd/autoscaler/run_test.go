package main

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/fleetcast/autoscaler/daemon"
	"github.com/fleetcast/autoscaler/fleet"
	"github.com/fleetcast/autoscaler/internal/cli"
	"github.com/fleetcast/autoscaler/loop"
	"github.com/fleetcast/autoscaler/planner"
	"github.com/fleetcast/autoscaler/providers"
	"github.com/fleetcast/autoscaler/providers/registry"
	"github.com/fleetcast/autoscaler/providers/sim"
	"github.com/fleetcast/autoscaler/simfleet"
	"github.com/fleetcast/autoscaler/state"
)

// localConfigIn writes the local example with its state in dir.
func localConfigIn(t *testing.T, dir string) string {
	t.Helper()
	src, err := os.ReadFile(localConfig)
	if err != nil {
		t.Fatal(err)
	}
	cfg := strings.Replace(string(src), `state_dir     = "./fleetcast-state"`, `state_dir     = "`+filepath.Join(dir, "state")+`"`, 1)
	if cfg == string(src) {
		t.Fatal("examples/local.hcl no longer sets state_dir as this test expects")
	}
	path := filepath.Join(dir, "local.hcl")
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestRunLocalExample(t *testing.T) {
	dir := t.TempDir()
	cfg := localConfigIn(t, dir)
	var ends []time.Time
	for i := range 2 { // the second run restarts on the first's state
		// From 9:00, simulated: demand rises through both runs, whatever
		// the time of day the test runs at.
		code, out, errOut := cmdline("run", "-config", cfg, "-for", "3h", "-sim-speed", "1e9", "-sim-start", "2026-11-30T09:00:00Z", "-listen", "127.0.0.1:0")
		if code != 0 {
			t.Fatalf("run %d: exit %d: %s", i, code, errOut)
		}
		s, err := state.Open(filepath.Join(dir, "state"))
		if err != nil {
			t.Fatal(err)
		}
		last, _, err := s.LatestDemand(loop.DemandSeries)
		s.Close()
		if err != nil {
			t.Fatal(err)
		}
		ends = append(ends, last.Time)
		for _, want := range []string{"Fleetcast controller on the simulated cloud", "  launch ", "---- demand", "3h simulated: spent $", "work lost 0.0 GPU-h\n"} {
			if !strings.Contains(out, want) {
				t.Errorf("run %d: output lacks %q:\n%s", i, want, out)
			}
		}
	}
	// The second run resumed simulated time after the first's last cycle.
	if d := ends[1].Sub(ends[0]); d < 3*time.Hour || d > 3*time.Hour+2*time.Minute {
		t.Errorf("the second run's demand ends %v after the first's, want 3h (it resumes where the first stopped)", d)
	}
	for _, f := range []string{"fleetcast.db", "api-token", "sim-cloud.json"} {
		fi, err := os.Stat(filepath.Join(dir, "state", f))
		if err != nil || fi.Mode().Perm() != 0o600 {
			t.Errorf("state/%s: %v; want mode 0600", f, err)
		}
	}
}

func TestRunErrors(t *testing.T) {
	dir := t.TempDir()
	cfg := localConfigIn(t, dir)
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	// want is what each error names (a flag and its value, an address, a
	// file); the words are those of testdata/run-errors.golden.
	tests := []struct {
		args []string
		code int
		want string
	}{
		{[]string{"-config", cfg, "-sim-speed", "0"}, cli.ExitUsage, "-sim-speed 0"},
		{[]string{"-config", cfg, "-for", "soon"}, cli.ExitUsage, `"soon"`},
		{[]string{"-config", cfg, "-sim-start", "9am"}, cli.ExitUsage, `-sim-start "9am"`},
		{[]string{"-config", cfg, "-listen", busy.Addr().String()}, cli.ExitError, busy.Addr().String()},
	}
	tr := &transcript{normalize: func(s string) string {
		return strings.ReplaceAll(renameDir(s, dir, "$DIR"), busy.Addr().String(), "$ADDR")
	}}
	for _, tt := range tests {
		code, out, errOut := cmdline(append([]string{"run"}, tt.args...)...)
		tr.add(strings.Join(tt.args[2:], " "), code, "", errOut)
		if code != tt.code || !strings.Contains(errOut, tt.want) {
			t.Errorf("run %v: exit %d %q; want %d with %q", tt.args, code, errOut, tt.code, tt.want)
		}
		if out != "" {
			t.Errorf("run %v: stdout %q; want none", tt.args, out)
		}
	}
	token := filepath.Join(dir, "state", "api-token")
	if err := os.Chmod(token, 0o644); err == nil {
		code, _, errOut := cmdline("run", "-config", cfg, "-for", "1m", "-listen", "127.0.0.1:0")
		tr.add("a token file others may read", code, "", errOut)
		if code != cli.ExitError || !strings.Contains(errOut, token) {
			t.Errorf("readable token file: exit %d %q", code, errOut)
		}
		tr.check(t, "run-errors.golden", len(tests)+1)
	}
}

// startRun starts the command in a child process and returns it with the
// API address it prints.
func startRun(t *testing.T, args string) (*exec.Cmd, string, *bufio.Reader) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), "FLEETCAST_TEST_CLI="+args)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = io.Discard
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	r := bufio.NewReader(stdout)
	line, err := r.ReadString('\n')
	m := regexp.MustCompile(`API on http://(\S+);`).FindStringSubmatch(line)
	if err != nil || m == nil {
		cmd.Process.Kill()
		t.Fatalf("first line %q (%v)", line, err)
	}
	return cmd, m[1], r
}

// TestRunStopsOnSignal: SIGTERM stops the controller after its cycle, with
// the state flushed; killed with SIGKILL instead, it starts again on the
// same state.
func TestRunStopsOnSignal(t *testing.T) {
	dir := t.TempDir()
	cfg := localConfigIn(t, dir)
	args := "run -config " + cfg + " -sim-speed 600 -listen 127.0.0.1:0"
	for _, sig := range []syscall.Signal{syscall.SIGKILL, syscall.SIGTERM} {
		cmd, addr, out := startRun(t, args)
		// The API answers once a cycle has run.
		deadline := time.Now().Add(20 * time.Second)
		for {
			resp, err := http.Get("http://" + addr + "/v1/plan")
			if err == nil {
				resp.Body.Close()
				if resp.StatusCode == http.StatusOK {
					break
				}
			}
			if time.Now().After(deadline) {
				cmd.Process.Kill()
				t.Fatalf("GET /v1/plan never answered 200 (%v)", err)
			}
			time.Sleep(50 * time.Millisecond)
		}
		if err := cmd.Process.Signal(sig); err != nil {
			t.Fatal(err)
		}
		rest, _ := io.ReadAll(out)
		err := cmd.Wait()
		if sig == syscall.SIGTERM {
			// It exits 0, its state flushed and let go: the store opens,
			// holding the demand it recorded and no action half done.
			if err != nil {
				t.Errorf("after SIGTERM: %v\n%s", err, rest)
			}
			s, err := state.Open(filepath.Join(dir, "state"))
			if err != nil {
				t.Fatalf("the state after SIGTERM: %v", err)
			}
			_, recorded, err := s.LatestDemand(loop.DemandSeries)
			intents, _ := s.Intents()
			s.Close()
			if err != nil || !recorded || len(intents) != 0 {
				t.Errorf("the state after SIGTERM: demand recorded %v (%v), %d intents left", recorded, err, len(intents))
			}
			// What it says as it stops (its lines that carry no figure)
			// are the words of testdata/run-stop.golden.
			var words []string
			for _, l := range strings.Split(string(rest), "\n") {
				if strings.TrimSpace(l) != "" && !strings.ContainsAny(l, "0123456789") {
					words = append(words, l)
				}
			}
			pinned(t, "run-stop.golden", strings.Join(words, "\n")+"\n")
		}
	}
}

// TestRunSurvivesSIGKILL kills the controller with SIGKILL again and again
// at different moments of its cycles (the simulated cloud, saved in the
// state directory, lives on), then lets a last run start on what is left:
// the clouds hold no duplicate or half-made group, the journal is empty and
// no drain is left for a node that is gone.
func TestRunSurvivesSIGKILL(t *testing.T) {
	dir := t.TempDir()
	cfg := localConfigIn(t, dir)
	for i := range 6 {
		cmd, addr, _ := startRun(t, "run -config "+cfg+" -sim-speed 6000 -listen 127.0.0.1:0")
		deadline := time.Now().Add(20 * time.Second)
		for {
			if resp, err := http.Get("http://" + addr + "/healthz"); err == nil {
				resp.Body.Close()
				if resp.StatusCode == http.StatusOK {
					break
				}
			}
			if time.Now().After(deadline) {
				cmd.Process.Kill()
				t.Fatal("the controller never ran a cycle")
			}
			time.Sleep(10 * time.Millisecond)
		}
		time.Sleep(time.Duration(37*i%150) * time.Millisecond)
		cmd.Process.Signal(syscall.SIGKILL)
		cmd.Wait()
	}
	code, out, errOut := cmdline("run", "-config", cfg, "-for", "30m", "-sim-speed", "1e9", "-listen", "127.0.0.1:0")
	if code != 0 {
		t.Fatalf("run after the kills: exit %d: %s\n%s", code, errOut, out)
	}
	c, diags := registry.Load(cfg)
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	cloud, err := sim.Load(filepath.Join(dir, "state", "sim-cloud.json"), c.Pools, time.Now)
	if err != nil {
		t.Fatal(err) // Load refuses a group whose target is not its instance count
	}
	present := map[string]bool{}
	for _, p := range c.Pools {
		g, err := cloud.Describe(t.Context(), p)
		if err != nil {
			t.Fatal(err)
		}
		if g.Target > p.Max {
			t.Errorf("pool %s: %d instances, max %d", p.Name, g.Target, p.Max)
		}
		for _, in := range g.Instances {
			if present[in.ID] {
				t.Errorf("instance %s twice", in.ID)
			}
			present[in.ID] = true
		}
	}
	s, err := state.Open(filepath.Join(dir, "state"))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if in, _ := s.Intents(); len(in) != 0 {
		t.Errorf("intents left after a clean run: %+v", in)
	}
	drains, _ := s.Drains()
	for _, d := range drains {
		if !present[d.Node] {
			t.Errorf("drain left for %s, which the cloud no longer has", d.Node)
		}
	}
}

// TestRunStateDir: -state-dir keeps the state in its directory, not in
// the config's state_dir.
func TestRunStateDir(t *testing.T) {
	config, err := filepath.Abs(localConfig)
	if err != nil {
		t.Fatal(err)
	}
	cwd := t.TempDir()
	t.Chdir(cwd) // examples/local.hcl's state_dir is relative: ./fleetcast-state
	dir := filepath.Join(t.TempDir(), "elsewhere")
	code, out, errOut := cmdline("run", "-config", config, "-state-dir", dir, "-for", "1h", "-sim-speed", "1e9", "-sim-start", "2026-11-30T09:00:00Z", "-listen", "127.0.0.1:0")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	if !strings.Contains(out, "state in "+filepath.Join(dir, "fleetcast.db")) {
		t.Errorf("output does not name the state in %s:\n%s", dir, out)
	}
	for _, f := range []string{"fleetcast.db", "api-token", "sim-cloud.json"} {
		if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
			t.Errorf("-state-dir %s: %v", dir, err)
		}
	}
	if _, err := os.Stat(filepath.Join(cwd, "fleetcast-state")); !os.IsNotExist(err) {
		t.Errorf("the config's state_dir was used as well: %v", err)
	}
}

// TestPrintActions: each action's line says what became of it: done,
// only planned in a dry run ("would"), refused by the cloud or failed,
// with the error on one line; holds are not printed. The lines are those
// of testdata/print-actions.golden.
func TestPrintActions(t *testing.T) {
	now := time.Date(2026, 11, 30, 10, 38, 0, 0, time.UTC)
	launch := planner.Action{Kind: planner.Launch, Pool: "aws-spot-a100", Count: 2, InstanceType: "p4d.24xlarge", GPUs: 16, Reason: "forecast p97 needs 157 GPUs at 10:50"}
	drain := planner.Action{Kind: planner.Drain, Pool: "od", Node: "i-1", InstanceType: "p4d.24xlarge", GPUs: 8, Reason: "idle 43m"}
	hold := planner.Action{Kind: planner.Hold, Pool: "od", Node: "i-2", Reason: "agent silent"}
	tests := []struct {
		name     string
		outcomes []loop.Outcome
		data     []string // what the lines carry beside their words: the errors, each on one line
	}{
		{"done", []loop.Outcome{{Result: loop.Done}, {Result: loop.Done}, {Result: loop.Done}}, nil},
		{"dry run", []loop.Outcome{{Result: loop.DryRun}, {Result: loop.DryRun}, {Result: loop.DryRun}}, nil},
		{"refused and failed", []loop.Outcome{
			{Result: loop.Refused, Err: &providers.InsufficientCapacityError{Pool: "aws-spot-a100", Err: errors.New("InsufficientInstanceCapacity")}},
			{Result: loop.Failed, Err: errors.Join(errors.New("store: disk full"), errors.New("second"))},
			{Result: loop.Done}},
			[]string{"InsufficientInstanceCapacity", "store: disk full; second"}},
	}
	tr := &transcript{}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var out bytes.Buffer
			printActions(&env{stdout: &out, stderr: io.Discard}, now, &loop.CycleResult{
				Plan: planner.Plan{Actions: []planner.Action{launch, drain, hold}}, Outcomes: tt.outcomes})
			tr.add(tt.name, -1, out.String(), "")
			lines := strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n")
			if len(lines) != 2 || !strings.HasPrefix(lines[0], "Mon 10:38  ") || !strings.Contains(lines[0], " 2 x p4d.24xlarge in aws-spot-a100") ||
				!strings.Contains(lines[1], " i-1 in od") || strings.Contains(out.String(), "i-2") {
				t.Errorf("got\n%s\nwant a line for the launch and one for the drain, none for the hold", out.String())
			}
			for _, d := range tt.data {
				if !strings.Contains(out.String(), d) {
					t.Errorf("got\n%s\nwant %q", out.String(), d)
				}
			}
		})
	}
	tr.check(t, "print-actions.golden", len(tests))
}

// TestPrintStatus: the status line's demand is running plus waiting, from
// the plan, whatever the simulated workload's own target; on a real cloud
// (no simulated fleet) it claims no lost work.
func TestPrintStatus(t *testing.T) {
	now := time.Date(2026, 11, 30, 11, 0, 0, 0, time.UTC)
	p := &planner.Plan{Demand: planner.Demand{RunningGPUs: 114, PendingGPUs: 6},
		Capacity: planner.Capacity{ReadyGPUs: 160, LaunchingGPUs: 8}, CostPerHourBefore: 527}
	tests := []struct {
		name  string
		stats *simfleet.Stats
		lost  bool // the line says the work lost
	}{
		// The workload asks for 110 GPUs while jobs started earlier
		// still hold 114: the line counts what the controller saw.
		{"simulated", &simfleet.Stats{DemandGPUs: 110, RunningGPUs: 114, LostGPUHours: 1.25}, true},
		{"real cloud", nil, false},
	}
	// The lines are those of testdata/print-status.golden.
	tr := &transcript{}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var out bytes.Buffer
			printStatus(&env{stdout: &out, stderr: io.Discard}, now, p, tt.stats, 287)
			tr.add(tt.name, -1, out.String(), "")
			m := statusLine.FindStringSubmatch(out.String())
			if m == nil || m[1] != "120" || m[2] != "114" || m[3] != "6" || strings.Count(out.String(), "\n") != 1 {
				t.Errorf("got\n%s\nwant one line of demand 120 GPUs: 114 running and 6 waiting", out.String())
			}
			if lost := regexp.MustCompile(`\b1\.2 GPU-h\b`).MatchString(out.String()); lost != tt.lost {
				t.Errorf("got\n%s\nwant the 1.2 GPU-h of work lost said %v", out.String(), tt.lost)
			}
		})
	}
	tr.check(t, "print-status.golden", len(tests))
}

// statusLine is a status line's demand, running and waiting GPUs.
var statusLine = regexp.MustCompile(`---- demand (\d+) GPUs \(running (\d+), waiting (\d+)\)`)

// TestRunOutputAddsUp: eight simulated hours' status lines each say a
// demand that is running plus waiting (they said the workload's target
// with the jobs' GPUs, 51 GPUs "running 53" at 05:00), and a dry run's
// actions each say "would".
func TestRunOutputAddsUp(t *testing.T) {
	for _, dry := range []bool{false, true} {
		cfg := localConfigIn(t, t.TempDir())
		args := []string{"run", "-config", cfg, "-for", "8h", "-sim-speed", "1e9", "-sim-start", "2026-11-30T00:00:00Z", "-listen", "127.0.0.1:0"}
		if dry {
			args = append(args, "-dry-run")
		}
		code, out, errOut := cmdline(args...)
		if code != 0 {
			t.Fatalf("dry run %v: exit %d: %s", dry, code, errOut)
		}
		statuses, actions := 0, 0
		for _, line := range strings.Split(out, "\n") {
			if m := statusLine.FindStringSubmatch(line); m != nil {
				statuses++
				d, _ := strconv.Atoi(m[1])
				r, _ := strconv.Atoi(m[2])
				w, _ := strconv.Atoi(m[3])
				if d != r+w {
					t.Errorf("dry run %v: %q: demand is not running + waiting", dry, line)
				}
				continue
			}
			for _, kind := range []string{"launch", "drain", "terminate", "cancel_drain"} {
				if strings.Contains(line, "  "+kind+" ") || strings.Contains(line, "  would "+kind+" ") {
					actions++
					if dry != strings.Contains(line, "  would ") {
						t.Errorf("dry run %v: %q", dry, line)
					}
				}
			}
		}
		if statuses < 7 || actions == 0 {
			t.Errorf("dry run %v: %d status lines and %d actions in 8h, want 8 and some:\n%s", dry, statuses, actions, out)
		}
	}
}

// runActionLine is a launch or drain line of run's output: the time, the
// kind, and the pool; a drain's reason follows.
var runActionLine = regexp.MustCompile(`^(\w{3} \d\d:\d\d)  (launch|drain) +(?:(\d+) x \S+|\S+) in (\S+)(: .*)?$`)

// TestRunScaleInWaits runs the local example's first simulated day and
// checks, from its output alone, that no pool drains a node within
// limits.scale_in_delay_after_launch of a launch in it (so no node is
// drained before the work it was launched for could reach it), and that
// the summary's churn adds up to the lines; then runs the day again in
// this process (the daemon run starts), its cycles' results at hand, and
// checks that every idle drain's node was idle
// limits.scale_in_unneeded_time at least, by the state its plan was made
// on.
func TestRunScaleInWaits(t *testing.T) {
	cfg := localConfigIn(t, t.TempDir())
	code, out, errOut := cmdline("run", "-config", cfg, "-for", "24h", "-sim-speed", "1e9", "-sim-start", "2026-11-30T00:00:00Z", "-listen", "127.0.0.1:0")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	const delay, unneeded = 10 * time.Minute, 10 * time.Minute // the defaults
	lastLaunch := map[string]time.Time{}
	launched, drained := 0, 0
	for _, line := range strings.Split(out, "\n") {
		m := runActionLine.FindStringSubmatch(line)
		if m == nil || strings.Contains(line, " REFUSED ") || strings.Contains(line, " FAILED: ") {
			continue
		}
		at, err := time.Parse("Mon 15:04", m[1])
		if err != nil {
			t.Fatalf("%q: %v", line, err)
		}
		// Days of the week, in order from the start (a Monday): one day.
		if strings.HasPrefix(m[1], "Tue") {
			at = at.Add(24 * time.Hour)
		}
		pool := m[4]
		if m[2] == "launch" {
			n, _ := strconv.Atoi(m[3])
			launched += n
			lastLaunch[pool] = at
			continue
		}
		drained++
		if l, ok := lastLaunch[pool]; ok && at.Sub(l) < delay {
			t.Errorf("%q: drained %s after a launch in its pool, within the scale-in delay (%s)", line, at.Sub(l), delay)
		}
	}
	if launched == 0 || drained == 0 {
		t.Fatalf("%d nodes launched and %d drained in a day; want some of each:\n%s", launched, drained, out)
	}
	want := fmt.Sprintf("nodes launched %d, drained %d: %.1f and %.1f per simulated day\n", launched, drained, float64(launched), float64(drained))
	if !strings.Contains(out, want) {
		t.Errorf("summary lacks %q:\n%s", want, out[max(0, len(out)-600):])
	}

	conf, ok := loadConfig(&env{stdout: io.Discard, stderr: io.Discard}, hclog.NewNullLogger(), cfg)
	if !ok {
		t.Fatal("the config does not load")
	}
	d, err := daemon.Start(t.Context(), daemon.Options{Config: conf, Speed: 1e9, SimStart: time.Date(2026, 11, 30, 0, 0, 0, 0, time.UTC),
		Listen: "127.0.0.1:0", StateDir: t.TempDir(), LoopbackReads: true})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	idle := 0
	err = d.Run(t.Context(), 24*time.Hour, func(now time.Time, r loop.CycleResult) {
		for _, a := range r.Plan.Actions {
			if a.Kind != planner.Drain || a.Code != planner.ReasonIdle {
				continue
			}
			idle++
			var n fleet.Node
			if i := slices.IndexFunc(r.State.Nodes, func(n fleet.Node) bool { return n.ID == a.Node }); i >= 0 {
				n = r.State.Nodes[i]
			}
			if n.IdleSince.IsZero() || r.Plan.At.Sub(n.IdleSince) < unneeded {
				t.Errorf("%s: %s drained for idleness, idle since %s; want it idle %s at least (limits.scale_in_unneeded_time)",
					r.Plan.At.Format("Mon 15:04"), a.Node, n.IdleSince.Format("Mon 15:04"), unneeded)
			}
		}
	})
	if err != nil || idle == 0 {
		t.Fatalf("the day in this process: %v, %d idle drains; want some", err, idle)
	}
}
