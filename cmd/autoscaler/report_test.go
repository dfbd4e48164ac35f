package main

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/fleetcast/autoscaler/internal/cli"
	"github.com/fleetcast/autoscaler/state"
	"github.com/fleetcast/autoscaler/usage"
)

// reportState writes two hours of a fleet's usage into a state directory:
// alpha's and beta's jobs on an on-demand pool (alpha's idle before its
// execution for half a GPU-hour, beta's stalled for a third), gamma's on
// a reserved one, a purchase bought for delta, and idle time.
func reportState(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	s, err := state.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	h10 := time.Date(2026, 11, 30, 10, 0, 0, 0, time.UTC)
	h11 := h10.Add(time.Hour)
	charge := func(pool string, kind usage.Kind, dollars, gpuHours float64) state.UsageCharge {
		return state.UsageCharge{Pool: pool, Kind: string(kind), Micros: int64(usage.MicrosOf(dollars)), GPUHours: gpuHours}
	}
	hours := []state.UsageHour{
		{Hour: h10, Team: "alpha", Tier: "critical", Charges: []state.UsageCharge{charge("od", usage.Used, 16, 4), charge("od", usage.IdleBeforeExecution, 2, 0.5)}, Started: 1, Queue: []int64{900}},
		{Hour: h10, Team: "beta", Tier: "standard", Charges: []state.UsageCharge{charge("od", usage.Used, 8, 2)}, Started: 1, Queue: []int64{120}, WaitedGPUHours: 0.5},
		{Hour: h10, Team: "gamma", Tier: "standard", Charges: []state.UsageCharge{charge("rs", usage.Used, 1.5, 1)}, Started: 1},
		{Hour: h10, Team: usage.IdleLabel, Tier: usage.IdleLabel, Charges: []state.UsageCharge{charge("od", usage.Idle, 8, 2), charge("rs", usage.Idle, 4.5, 3)}},
		{Hour: h11, Team: "alpha", Tier: "critical", Charges: []state.UsageCharge{charge("od", usage.Used, 16, 4)}},
		{Hour: h11, Team: "beta", Tier: "standard", Charges: []state.UsageCharge{charge("od", usage.Used, 8, 2), charge("od", usage.Stalled, 1.33, 0.33)}},
		{Hour: h11, Team: "delta", Tier: "best_effort", Charges: []state.UsageCharge{charge("od", usage.BoughtFor, 32, 8)}, WaitedGPUHours: 8},
		{Hour: h11, Team: usage.IdleLabel, Tier: usage.IdleLabel, Charges: []state.UsageCharge{charge("od", usage.Idle, 8, 2), charge("rs", usage.Idle, 6, 4)}},
	}
	jobs := []state.UsageJob{
		{ID: "a1", Team: "alpha", Tier: "critical", Pool: "od", Nodes: 1, GPUs: 4, Submitted: h10.Add(-15 * time.Minute), Start: h10, Micros: 32_000_000, GPUHours: 8,
			IdleBeforeMicros: 2_000_000, IdleBeforeGPUHours: 0.5},
		{ID: "b1", Team: "beta", Tier: "standard", Pool: "od", Nodes: 1, GPUs: 2, Submitted: h10.Add(-2 * time.Minute), Start: h10, Micros: 16_000_000, GPUHours: 4,
			StalledMicros: 1_330_000, StalledGPUHours: 0.33},
		{ID: "c1", Team: "gamma", Tier: "standard", Pool: "rs", Nodes: 1, GPUs: 1, Start: h10, End: h11, Micros: 1_500_000, GPUHours: 1},
	}
	if err := s.PutUsage(hours, jobs); err != nil {
		t.Fatal(err)
	}
	return dir
}

// TestReportStateDir: `report -state-dir` over a stopped controller's
// records, as a table by team (idle apart, and shared back by use), by
// tier, pool and job, and as CSV; its words and figures are those of
// testdata/report.golden. The rows add up to the fleet's spend: $108 (od $48 and $56, rs $6 and $6).
func TestReportStateDir(t *testing.T) {
	dir := reportState(t)
	window := []string{"-state-dir", dir, "-from", "2026-11-30T10:00:00Z", "-to", "2026-11-30T12:00:00Z"}
	tr := &transcript{normalize: func(s string) string { return strings.ReplaceAll(s, dir, "$DIR") }}
	for _, extra := range [][]string{nil, {"-share-idle"}, {"-by", "tier"}, {"-by", "pool"}, {"-by", "job"}, {"-csv"}} {
		args := append(append([]string{"report"}, window...), extra...)
		code, out, errOut := cmdline(args...)
		tr.add(strings.Join(args, " "), code, out, errOut)
		if code != cli.ExitOK {
			t.Errorf("%s: exit %d: %s", strings.Join(args, " "), code, errOut)
		}
	}
	tr.check(t, "report.golden", 6)

	code, out, errOut := cmdline(append(append([]string{"report"}, window...), "-json", "-share-idle")...)
	if code != cli.ExitOK {
		t.Fatalf("report -json: exit %d: %s", code, errOut)
	}
	var rep usage.Report
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatal(err)
	}
	sum := usage.Micros(0)
	for _, r := range rep.Rows {
		sum += r.CostMicros
	}
	if want := usage.MicrosOf(108); sum != want || rep.Total.CostMicros != want {
		t.Errorf("rows add up to %d, total %d; want the fleet's spend %d", sum, rep.Total.CostMicros, want)
	}
}

// TestReportErrors: the command line's mistakes are usage errors naming
// the flag; a state directory in use sends the reader to -addr. The
// words are those of testdata/report-errors.golden.
func TestReportErrors(t *testing.T) {
	dir := reportState(t)
	s, err := state.Open(filepath.Join(t.TempDir(), "busy"))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	busy := filepath.Dir(s.Path())
	tr := &transcript{normalize: func(x string) string {
		return strings.ReplaceAll(strings.ReplaceAll(x, busy, "$BUSY"), dir, "$DIR")
	}}
	for _, tt := range []struct {
		args []string
		code int
	}{
		{[]string{"report"}, cli.ExitUsage},
		{[]string{"report", "-state-dir", dir, "-by", "user"}, cli.ExitUsage},
		{[]string{"report", "-state-dir", dir, "-from", "yesterday"}, cli.ExitUsage},
		{[]string{"report", "-state-dir", dir, "-from", "2026-12-01T00:00:00Z", "-to", "2026-11-30T00:00:00Z"}, cli.ExitUsage},
		{[]string{"report", "-state-dir", dir, "-json", "-csv"}, cli.ExitUsage},
		{[]string{"report", "-state-dir", busy}, cli.ExitError},
	} {
		code, out, errOut := cmdline(tt.args...)
		tr.add(strings.Join(tt.args, " "), code, out, errOut)
		if code != tt.code {
			t.Errorf("%s: exit %d, want %d: %s", strings.Join(tt.args, " "), code, tt.code, errOut)
		}
	}
	tr.check(t, "report-errors.golden", 6)
}

// TestReportLive: `report -addr` asks a running controller (the local
// example, on the simulated cloud at 60 times speed, with a read token):
// its rows add up to its total, which grows as the fleet runs.
func TestReportLive(t *testing.T) {
	conf, r := tokenRun(t, "")
	t.Setenv("FLEETCAST_API_TOKEN", "")
	code, tok, errOut := cmdline("api-token", "create", "-config", conf, "-scope", "read", "finance")
	if code != cli.ExitOK {
		t.Fatalf("api-token create: exit %d %s", code, errOut)
	}
	t.Setenv("FLEETCAST_API_TOKEN", strings.TrimSpace(tok))
	var rep usage.Report
	r.waitFor("a report with a cost", time.Minute, func() bool {
		code, out, errOut := cmdline("report", "-addr", r.base, "-json", "-by", "pool")
		if code != cli.ExitOK {
			t.Fatalf("report -addr: exit %d: %s", code, errOut)
		}
		if err := json.Unmarshal([]byte(out), &rep); err != nil {
			t.Fatal(err)
		}
		return rep.Total.CostMicros > 0
	})
	sum := usage.Micros(0)
	for _, x := range rep.Rows {
		sum += x.CostMicros
	}
	if sum != rep.Total.CostMicros || rep.By != usage.ByPool {
		t.Errorf("rows add up to %d, total %d, by %s; want the total, by pool", sum, rep.Total.CostMicros, rep.By)
	}
	if code, out, errOut := cmdline("report", "-addr", r.base); code != cli.ExitOK || !strings.Contains(out, "by team") || !strings.Contains(out, "\n total ") && !strings.Contains(out, "total") {
		t.Errorf("report -addr as a table: exit %d\n%s%s", code, out, errOut)
	}
	if _, body := r.call("GET", "/metrics", "", ""); !strings.Contains(body, "fleetcast_usage_cost_dollars_total{") {
		t.Errorf("/metrics lacks the usage cost")
	}
}
