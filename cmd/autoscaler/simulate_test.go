package main

import (
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/fleetcast/autoscaler/config"
	"github.com/fleetcast/autoscaler/fleet"
	"github.com/fleetcast/autoscaler/internal/cli"
)

// jobsCSV is a small jobs trace: a burst at 0 and another at 4h.
const jobsCSV = `job_id,submit_s,gpus,duration_s,team
a,0,8,7200,vision
b,0,8,7200,vision
c,14400,8,7200,nlp
d,14400,4,3600,nlp
`

func writeFile(t *testing.T, name, body string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(path, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestSimulateJSON(t *testing.T) {
	tr := writeFile(t, "jobs.csv", jobsCSV)
	pic := filepath.Join(t.TempDir(), "where.svg")
	code, out, errOut := cmdline("simulate", "-config", localConfig, "-trace", tr, "-json", "-plot", pic)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	var rep map[string]any
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("-json does not parse: %v\n%s", err, out)
	}
	for _, k := range []string{"trace", "jobs", "days", "seed", "reservations", "headroom_gpus", "headroom_placeholders"} {
		if _, ok := rep[k]; !ok {
			t.Errorf("report lacks %q", k)
		}
	}
	fields := []string{"policy", "cost_usd", "cost_vs_oracle", "gpu_hours_provisioned", "gpu_hours_used", "utilization",
		"wait_p50_s", "wait_p95_s", "wait_p99_s", "jobs_waiting_over_1h", "wait_gpu_hours", "lost_gpu_hours", "lost_gpu_hours_scale_in", "lost_gpu_hours_reclaim", "unsafe_terminations",
		"launches", "drains", "moved_jobs", "unserved_gpu_hours", "reserved_gpus", "limited_cycles"}
	policies := rep["policies"].([]any)
	if len(policies) != 5 || rep["reservations"] != "configured" || rep["headroom_gpus"] != 128.0 {
		t.Fatalf("%d policies, reservations %v, headroom %v; want 5, configured, 128", len(policies), rep["reservations"], rep["headroom_gpus"])
	}
	for _, p := range policies {
		m := p.(map[string]any)
		want := len(fields) + 1 // and its teams: jobsCSV has a team column
		if m["policy"] != "oracle" {
			want++ // and its pools
			if pools, _ := m["pools"].([]any); len(pools) != 4 {
				t.Errorf("policy %v has pools %v, want examples/local.hcl's 4", m["policy"], m["pools"])
			}
		}
		if len(m) != want {
			t.Errorf("policy %v has %d fields, want exactly %d", m["policy"], len(m), want)
		}
		for _, f := range fields {
			if _, ok := m[f]; !ok {
				t.Errorf("policy %v lacks %q", m["policy"], f)
			}
		}
		if lost, split := m["lost_gpu_hours"].(float64), m["lost_gpu_hours_scale_in"].(float64)+m["lost_gpu_hours_reclaim"].(float64); lost != split {
			t.Errorf("policy %v lost %v GPU-h, but %v by cause", m["policy"], lost, split)
		}
		if m["reserved_gpus"].(float64) != 32 { // examples/local.hcl's reservation: 4 nodes of 8
			t.Errorf("policy %v holds %v reserved GPUs, want the configured 32", m["policy"], m["reserved_gpus"])
		}
		if m["gpu_hours_used"].(float64) != 52 {
			t.Errorf("policy %v used %v GPU-h, want the trace's 52", m["policy"], m["gpu_hours_used"])
		}
		if teams, _ := m["teams"].([]any); len(teams) != 2 || teams[0].(map[string]any)["team"] != "nlp" || teams[1].(map[string]any)["team"] != "vision" {
			t.Errorf("policy %v has teams %v; want nlp and vision", m["policy"], m["teams"])
		}
	}
	if b, err := os.ReadFile(pic); err != nil || !strings.Contains(string(b), "<svg") {
		t.Errorf("picture %s: %v", pic, err)
	}
}

func TestSimulateTable(t *testing.T) {
	tr := writeFile(t, "jobs.csv", jobsCSV)
	code, out, errOut := cmdline("simulate", "-config", localConfig, "-trace", tr, "-policies", "reactive,predictive")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	for _, want := range []string{"trace jobs.csv: 4 jobs", "reactive", "predictive", "lost GPU-h  scale-in  reclaim  unsafe"} {
		if !strings.Contains(out, want) {
			t.Errorf("table lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "  static ") {
		t.Errorf("table shows a policy not asked for:\n%s", out)
	}
}

// teamsFixture is a small jobs trace with team and tier columns: vision's
// two 8-GPU jobs at 0; at 4h nlp's two 16-GPU jobs and an 8-GPU one, and
// a 4-GPU job of no team, beyond examples/local.hcl's 32 reserved GPUs.
const teamsFixture = "../../trace/test-fixtures/teams.csv"

// simulatedTeams is the per-team split of each policy of a `simulate
// -json` report.
type simulatedTeams struct {
	LabelTeams int `json:"label_teams"`
	Policies   []struct {
		Policy       string  `json:"policy"`
		CostUSD      float64 `json:"cost_usd"`
		WaitGPUHours float64 `json:"wait_gpu_hours"`
		Teams        []struct {
			Team         string  `json:"team"`
			Jobs         int     `json:"jobs"`
			UsedUSD      float64 `json:"used_usd"`
			IdleShareUSD float64 `json:"idle_share_usd"`
			CostUSD      float64 `json:"cost_usd"`
			WaitGPUHours float64 `json:"wait_gpu_hours"`
		} `json:"teams"`
	} `json:"policies"`
}

// TestSimulateTeams: on a trace with a team column, the table splits each
// policy's cost and waiting by team (testdata/simulate-teams.golden), and
// the JSON's teams add up to each policy: cost to the cent, waited
// GPU-hours, jobs.
func TestSimulateTeams(t *testing.T) {
	args := []string{"simulate", "-config", localConfig, "-trace", teamsFixture, "-policies", "static,reactive,oracle"}
	code, out, errOut := cmdline(args...)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	pinned(t, "simulate-teams.golden", out)
	code, out, errOut = cmdline(append(args, "-json")...)
	var rep simulatedTeams
	if code != 0 || json.Unmarshal([]byte(out), &rep) != nil || len(rep.Policies) != 3 || rep.LabelTeams != 0 {
		t.Fatalf("exit %d: %s\n%s", code, errOut, out)
	}
	for _, p := range rep.Policies {
		var names []string
		var cost, wait float64
		jobs := 0
		for _, tm := range p.Teams {
			names = append(names, tm.Team)
			cost += tm.CostUSD
			wait += tm.WaitGPUHours
			jobs += tm.Jobs
		}
		if strings.Join(names, ",") != "nlp,vision,unattributed" || jobs != 6 {
			t.Errorf("%s: teams %v over %d jobs; want nlp, vision and unattributed, over the 6", p.Policy, names, jobs)
		}
		if math.Abs(cost-p.CostUSD) >= 0.005 || math.Abs(wait-p.WaitGPUHours) > 1e-9 {
			t.Errorf("%s: teams cost $%v and waited %v GPU-h; the policy $%v and %v", p.Policy, cost, wait, p.CostUSD, p.WaitGPUHours)
		}
	}
}

// TestSimulateLabelTeams: -label-teams labels a trace without teams, the
// same teams for every run of a seed, and its JSON says so.
func TestSimulateLabelTeams(t *testing.T) {
	tr := writeFile(t, "jobs.csv", "submit_s,gpus,duration_s\n"+strings.Repeat("0,1,3600\n600,2,1800\n", 20))
	run := func() simulatedTeams {
		t.Helper()
		code, out, errOut := cmdline("simulate", "-config", localConfig, "-trace", tr, "-policies", "reactive", "-label-teams", "4", "-seed", "3", "-json")
		var rep simulatedTeams
		if code != 0 || json.Unmarshal([]byte(out), &rep) != nil || len(rep.Policies) != 1 {
			t.Fatalf("exit %d: %s\n%s", code, errOut, out)
		}
		return rep
	}
	a, b := run(), run()
	if a.LabelTeams != 4 || len(a.Policies[0].Teams) == 0 || len(a.Policies[0].Teams) > 4 {
		t.Fatalf("label_teams %d, teams %+v; want 4, and up to 4 teams", a.LabelTeams, a.Policies[0].Teams)
	}
	jobs := 0
	for i, tm := range a.Policies[0].Teams {
		jobs += tm.Jobs
		if !regexp.MustCompile(`^team-0[1-4]$`).MatchString(tm.Team) || tm != b.Policies[0].Teams[i] {
			t.Errorf("team %+v, then %+v; want one of team-01 .. team-04, the same twice", tm, b.Policies[0].Teams[i])
		}
	}
	if jobs != 40 {
		t.Errorf("%d jobs labelled; want the trace's 40", jobs)
	}
}

func TestSimulateErrors(t *testing.T) {
	bad := writeFile(t, "bad.csv", jobsCSV+"e,20000,many,60,nlp\n")
	wide := writeFile(t, "wide.csv", "submit_s,gpus,duration_s\n0,9000,60\n")
	busy := writeFile(t, "busy.csv", "submit_s,gpus,duration_s\n"+strings.Repeat("0,8,60\n", 520))
	// want is what each error names (a flag and its value, a file and
	// its line and column, a job, a count); the words are those of
	// testdata/simulate-errors.golden.
	tests := []struct {
		name string
		args []string
		code int
		want string
	}{
		{"no trace", []string{"simulate", "-config", localConfig}, 2, "-trace"},
		{"bad row", []string{"simulate", "-config", localConfig, "-trace", bad}, 1, "bad.csv:6: gpus"},
		{"bad duration flag", []string{"simulate", "-config", localConfig, "-trace", bad, "-from", "soon"}, 2, `"soon" for flag -from`},
		{"negative checkpoint duration", []string{"simulate", "-config", localConfig, "-trace", bad, "-checkpoint-duration", "-5m"}, 2, `"-5m" for flag -checkpoint-duration`},
		{"unresponsive share over 1", []string{"simulate", "-config", localConfig, "-trace", bad, "-unresponsive-jobs", "1.5"}, 2, "-unresponsive-jobs 1.5"},
		{"negative unresponsive share", []string{"simulate", "-config", localConfig, "-trace", bad, "-unresponsive-jobs", "-0.5"}, 2, "-unresponsive-jobs -0.5"},
		{"unknown policy", []string{"simulate", "-config", localConfig, "-trace", writeFile(t, "ok.csv", jobsCSV), "-policies", "psychic"}, 1, `"psychic"`},
		{"bad plot", []string{"simulate", "-config", localConfig, "-trace", writeFile(t, "ok.csv", jobsCSV), "-plot", "x.txt"}, 1, `".txt"`},
		{"negative headroom", []string{"simulate", "-config", localConfig, "-trace", bad, "-headroom", "-8"}, 2, "-headroom -8"},
		{"headroom -1", []string{"simulate", "-config", localConfig, "-trace", bad, "-headroom", "-1"}, 2, "-headroom -1"},
		{"absurd headroom", []string{"simulate", "-config", localConfig, "-trace", bad, "-headroom", "999999999"}, 2, "-headroom 999999999"},
		{"margin not a number", []string{"simulate", "-config", localConfig, "-trace", bad, "-perfect-margin", "NaN"}, 2, `"NaN" for flag -perfect-margin`},
		{"infinite margin", []string{"simulate", "-config", localConfig, "-trace", bad, "-perfect-margin", "Inf"}, 2, `"Inf" for flag -perfect-margin`},
		{"frontier advised", []string{"simulate", "-config", localConfig, "-trace", bad, "-frontier", "-reservations", "advised"}, 2, "-frontier"},
		{"unknown placeholders", []string{"simulate", "-config", localConfig, "-trace", bad, "-headroom-placeholders", "4"}, 2, `-headroom-placeholders "4"`},
		{"unknown reservations", []string{"simulate", "-config", localConfig, "-trace", bad, "-reservations", "grown"}, 2, `-reservations "grown"`},
		{"negative margin", []string{"simulate", "-config", localConfig, "-trace", bad, "-perfect-margin", "-0.1"}, 2, `"-0.1" for flag -perfect-margin`},
		{"margin not a share", []string{"simulate", "-config", localConfig, "-trace", bad, "-perfect-margin", "5%"}, 2, `"5%" for flag -perfect-margin`},
		{"margins without the frontier", []string{"simulate", "-config", localConfig, "-trace", bad, "-perfect-margin", "0,0.05"}, 2, "-perfect-margin 0,0.05"},
		{"margins with the advice check", []string{"simulate", "-config", localConfig, "-trace", bad, "-advice-check", "-perfect-margin", "0,0.05"}, 2, "-perfect-margin"},
		{"a bad margin in the frontier's", []string{"simulate", "-config", localConfig, "-trace", bad, "-frontier", "-perfect-margin", "0, -1"}, 2, `"-1"`},
		{"an empty margin in the frontier's", []string{"simulate", "-config", localConfig, "-trace", bad, "-frontier", "-perfect-margin", "0,"}, 2, `"0," for flag -perfect-margin`},
		{"an empty margin", []string{"simulate", "-config", localConfig, "-trace", bad, "-perfect-margin", ""}, 2, `"" for flag -perfect-margin`},
		{"a margin twice", []string{"simulate", "-config", localConfig, "-trace", bad, "-frontier", "-perfect-margin", "0.05,5e-2"}, 2, `"5e-2"`},
		{"announce share over 1", []string{"simulate", "-config", localConfig, "-trace", bad, "-announce-share", "1.5"}, 2, "-announce-share 1.5"},
		{"announce share not a number", []string{"simulate", "-config", localConfig, "-trace", bad, "-announce-share", "NaN"}, 2, "-announce-share NaN"},
		{"negative label teams", []string{"simulate", "-config", localConfig, "-trace", bad, "-label-teams", "-1"}, 2, "-label-teams -1"},
		{"too many label teams", []string{"simulate", "-config", localConfig, "-trace", bad, "-label-teams", "1001"}, 2, "-label-teams 1001"},
		{"announce ahead not positive", []string{"simulate", "-config", localConfig, "-trace", bad, "-announce-ahead", "0s"}, 2, "-announce-ahead"},
		{"frontier with policies", []string{"simulate", "-config", localConfig, "-trace", bad, "-frontier", "-policies", "reactive"}, 2, "-policies"},
		{"zero advice", []string{"simulate", "-config", localConfig, "-trace", bad, "-advice-after", "0s"}, 2, `"0s" for flag -advice-after`},
		{"bad frontier plot", []string{"simulate", "-config", localConfig, "-trace", writeFile(t, "ok.csv", jobsCSV), "-frontier", "-plot", "x.txt"}, 1, `".txt"`},
		{"job too wide", []string{"simulate", "-config", localConfig, "-trace", wide}, 1, "job 2 needs 9000 GPUs, more than the 4000 "},
		{"peak too high", []string{"simulate", "-config", localConfig, "-trace", busy, "-policies", "static"}, 0, " 4160 "},
	}
	tmp := filepath.Dir(filepath.Dir(bad))
	tr := &transcript{normalize: func(s string) string { return strings.ReplaceAll(s, tmp, "$TMP") }}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, _, errOut := cmdline(tt.args...)
			tr.add(tt.name, code, "", errOut)
			if code != tt.code || !strings.Contains(errOut, tt.want) {
				t.Fatalf("exit %d, stderr:\n%s\nwant exit %d and %q", code, errOut, tt.code, tt.want)
			}
		})
	}
	// Skipping bad rows says how many, of which file.
	code, _, errOut := cmdline("simulate", "-config", localConfig, "-trace", bad, "-skip-bad-rows", "-policies", "static")
	tr.add("skip bad rows", code, "", errOut)
	if code != 0 || !regexp.MustCompile(`\b1\b.*\bbad\.csv\b`).MatchString(errOut) {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	tr.check(t, "simulate-errors.golden", len(tests)+1)
}

// TestSimulateFrontier: -frontier prints headroom over its buffers and
// predictive over its quantiles and at the config's choice by cost, as a
// table or JSON, with its picture.
func TestSimulateFrontier(t *testing.T) {
	tr := writeFile(t, "jobs.csv", jobsCSV)
	pic := filepath.Join(t.TempDir(), "frontier.svg")
	code, out, errOut := cmdline("simulate", "-config", localConfig, "-trace", tr, "-frontier", "-json", "-plot", pic)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	var f struct {
		Reservations string `json:"reservations"`
		Points       []struct {
			Policy       string   `json:"policy"`
			Level        float64  `json:"level"`
			Cost         float64  `json:"cost_usd"`
			WaitGPUHours *float64 `json:"wait_gpu_hours"`
		} `json:"points"`
	}
	if err := json.Unmarshal([]byte(out), &f); err != nil || len(f.Points) != 14 || f.Reservations != "configured" { // with local.hcl's choice by cost
		t.Fatalf("-frontier -json: %v, %+v", err, f)
	}
	for _, p := range f.Points {
		if p.Cost <= 0 || p.WaitGPUHours == nil {
			t.Errorf("point %+v", p)
		}
	}
	if b, err := os.ReadFile(pic); err != nil || !strings.Contains(string(b), "<svg") {
		t.Errorf("picture %s: %v", pic, err)
	}
	code, out, errOut = cmdline("simulate", "-config", localConfig, "-trace", tr, "-frontier", "-headroom-placeholders", "gpu")
	if code != 0 || !strings.Contains(out, "headroom in gpu-wide placeholders") || !strings.Contains(out, "headroom  512 GPUs") || !strings.Contains(out, "predictive       p50") ||
		!strings.Contains(out, "at each buffer's waiting") || !strings.Contains(out, "predictive by cost: ") || strings.Contains(out, "perfect") {
		t.Fatalf("exit %d: %s\n%s", code, errOut, out)
	}
	// With -perfect-margin, the perfect ablation at each margin, read at
	// each buffer's waiting too.
	code, out, errOut = cmdline("simulate", "-config", localConfig, "-trace", tr, "-frontier", "-perfect-margin", "0,0.05")
	if code != 0 || !strings.Contains(out, "perfect       +0%") || !strings.Contains(out, "perfect       +5%") || !strings.Contains(out, "perfect $") {
		t.Fatalf("exit %d: %s\n%s", code, errOut, out)
	}
}

// TestSimulatePerfectMargin: one -perfect-margin, without -frontier, is
// the perfect policy's margin: more capacity than at none, so it costs
// more.
func TestSimulatePerfectMargin(t *testing.T) {
	// 96 GPUs for two hours from the second: beyond the reservation's 32.
	tr := writeFile(t, "jobs.csv", "submit_s,gpus,duration_s\n"+strings.Repeat("3600,8,7200\n", 12))
	cost := func(margin string) float64 {
		t.Helper()
		code, out, errOut := cmdline("simulate", "-config", localConfig, "-trace", tr, "-policies", "perfect", "-perfect-margin", margin, "-json")
		var rep struct {
			Policies []struct {
				Cost float64 `json:"cost_usd"`
			} `json:"policies"`
		}
		if code != 0 || json.Unmarshal([]byte(out), &rep) != nil || len(rep.Policies) != 1 {
			t.Fatalf("-perfect-margin %s: exit %d: %s\n%s", margin, code, errOut, out)
		}
		return rep.Policies[0].Cost
	}
	if none, half := cost("0"), cost("0.5"); !(half > none) {
		t.Errorf("perfect at a margin of 0.5 costs $%v, at none $%v", half, none)
	}
}

// TestSimulateAdviceCheck: -advice-check weighs the advice against fixed
// reservations (a table, -json, a picture), and refuses what does not
// apply to it.
func TestSimulateAdviceCheck(t *testing.T) {
	tr := writeFile(t, "jobs.csv", jobsCSV)
	pic := filepath.Join(t.TempDir(), "advice.svg")
	code, out, errOut := cmdline("simulate", "-config", localConfig, "-trace", tr, "-advice-check", "-advice-after", "1h", "-json", "-plot", pic)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	var c struct {
		Pool  string `json:"pool"`
		Fixed []struct {
			GPUs int     `json:"gpus"`
			Cost float64 `json:"cost_usd"`
		} `json:"fixed"`
		VsBest float64 `json:"vs_best"`
	}
	if err := json.Unmarshal([]byte(out), &c); err != nil || c.Pool != "reserved-a100" || len(c.Fixed) < 2 || c.Fixed[0].GPUs != 32 || c.VsBest <= 0 {
		t.Fatalf("-advice-check -json: %v, %+v", err, c)
	}
	if b, err := os.ReadFile(pic); err != nil || !strings.Contains(string(b), "<svg") {
		t.Errorf("picture %s: %v", pic, err)
	}
	code, out, errOut = cmdline("simulate", "-config", localConfig, "-trace", tr, "-advice-check", "-advice-after", "1h")
	if code != 0 || !strings.Contains(out, "advice vs the best fixed reservation") || !strings.Contains(out, "fixed reserved GPUs") {
		t.Fatalf("exit %d: %s\n%s", code, errOut, out)
	}
	// What each refusal names (the flags); the words are those of
	// testdata/simulate-advice-errors.golden.
	words := &transcript{normalize: func(s string) string { return strings.ReplaceAll(s, tr, "$TRACE") }}
	for _, tc := range []struct {
		args []string
		want []string
	}{
		{[]string{"-frontier"}, []string{"-frontier", "-advice-check"}},
		{[]string{"-policies", "reactive"}, []string{"-policies", "-advice-check"}},
		{[]string{"-reservations", "configured"}, []string{"-reservations advised"}},
	} {
		args := append([]string{"simulate", "-config", localConfig, "-trace", tr, "-advice-check"}, tc.args...)
		code, _, errOut := cmdline(args...)
		words.add(strings.Join(tc.args, " "), code, "", errOut)
		for _, want := range tc.want {
			if code != cli.ExitUsage || !strings.Contains(errOut, want) {
				t.Errorf("%v: exit %d, %q; want usage, %q", tc.args, code, errOut, want)
			}
		}
	}
	// The advice's first commitment after the trace's end: nothing to
	// weigh (the default advice_after, 14d, against a 5-hour trace).
	code, _, errOut = cmdline("simulate", "-config", localConfig, "-trace", tr, "-advice-check")
	words.add("the default advice_after", code, "", errOut)
	if code != cli.ExitError || !strings.Contains(errOut, " 14d ") || !strings.Contains(errOut, "(0.2 days)") {
		t.Errorf("default advice_after on a 5-hour trace: exit %d, %q; want exit 1 naming 14d and the trace's 0.2 days", code, errOut)
	}
	words.check(t, "simulate-advice-errors.golden", 4)
}

// TestSimulateHeadroomFlag: -headroom sets the buffer, 0 for none (the
// headroom policy is then reactive, figure for figure).
func TestSimulateHeadroomFlag(t *testing.T) {
	tr := writeFile(t, "jobs.csv", jobsCSV)
	code, out, errOut := cmdline("simulate", "-config", localConfig, "-trace", tr, "-policies", "reactive,headroom", "-headroom", "0", "-json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	var rep struct {
		Headroom int              `json:"headroom_gpus"`
		Policies []map[string]any `json:"policies"`
	}
	if err := json.Unmarshal([]byte(out), &rep); err != nil || len(rep.Policies) != 2 || rep.Headroom != 0 {
		t.Fatalf("%v %+v", err, rep)
	}
	if a, b := rep.Policies[0]["cost_usd"], rep.Policies[1]["cost_usd"]; a != b {
		t.Errorf("reactive costs %v, headroom with no buffer %v", a, b)
	}
	code, out, _ = cmdline("simulate", "-config", localConfig, "-trace", tr, "-policies", "headroom", "-headroom", "64")
	if code != 0 || !strings.Contains(out, "headroom 64 GPUs") {
		t.Fatalf("exit %d:\n%s", code, out)
	}
}

// TestDrainModel: the flags override the config's simulate block, and a 0
// from either reaches simulate.Options as "at once" / "none", not as the
// default.
func TestDrainModel(t *testing.T) {
	cfg := config.Defaults().Simulate // 2m, 0.02
	zero := fleet.SimulateSettings{}
	flag := func(d time.Duration) cli.Duration { return cli.Duration{D: d, Given: true} }
	tests := []struct {
		name         string
		cfg          fleet.SimulateSettings
		ckptDur      cli.Duration
		unresponsive float64
		wantDur      time.Duration
		wantShare    float64
	}{
		{"the config's defaults", cfg, cli.Duration{}, -1, 2 * time.Minute, 0.02},
		{"the config's zeros", zero, cli.Duration{}, -1, -1, -1},
		{"flags", cfg, flag(5 * time.Minute), 0.2, 5 * time.Minute, 0.2},
		{"zero flags", cfg, flag(0), 0, -1, -1},
		{"all jobs unresponsive", zero, flag(time.Hour), 1, time.Hour, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d, u := drainModel(tt.cfg, tt.ckptDur, tt.unresponsive)
			if d != tt.wantDur || u != tt.wantShare {
				t.Errorf("got %v, %v; want %v, %v", d, u, tt.wantDur, tt.wantShare)
			}
		})
	}
}
