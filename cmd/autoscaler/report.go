package main

import (
	"context"
	"encoding/csv"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/url"
	"strconv"
	"text/tabwriter"
	"time"

	"github.com/fleetcast/autoscaler/config"
	"github.com/fleetcast/autoscaler/controller"
	"github.com/fleetcast/autoscaler/daemon"
	"github.com/fleetcast/autoscaler/fleet"
	"github.com/fleetcast/autoscaler/internal/cli"
	"github.com/fleetcast/autoscaler/state"
	"github.com/fleetcast/autoscaler/usage"
)

// runReport is `autoscaler report`: who used what over a window, by team,
// tier, pool or job, from the running controller (-addr) or a state
// directory (-state-dir, or -config's controller.state_dir).
func runReport(e *env, args []string) int {
	fs := cli.NewFlagSet(e.stderr, "autoscaler", "report", "report -addr URL [-config FILE] [-ca-file FILE] | -state-dir DIR | -config FILE  [-from TIME|DURATION] [-to TIME] [-by team|tier|pool|job] [-share-idle] [-json|-csv]")
	path := fs.String("config", "", "the fleet config: its controller.state_dir (without -addr), or its certificate and state directory (API token) with -addr")
	addr := fs.String("addr", "", "the running controller's API URL, such as https://fleetcast.internal:8790 (a token of scope read from FLEETCAST_API_TOKEN, else the root token in -config's state directory)")
	caFile := fs.String("ca-file", "", "PEM file of the CA(s) of the controller's certificate (default: controller.tls_cert_file itself)")
	stateDir := fs.String("state-dir", "", "the controller's state directory, read while the controller is stopped (default: -config's controller.state_dir)")
	from := fs.String("from", "30d", "the window's start: an RFC 3339 time, or a duration before -to (7d, 12h)")
	to := fs.String("to", "", "the window's end, an RFC 3339 time (default now)")
	by := fs.String("by", "team", "group by team, tier, pool or job")
	shareIdle := fs.Bool("share-idle", false, "share each pool's idle cost among the teams that used it, in proportion to their use (default: the usage block's share_idle)")
	asJSON := fs.Bool("json", false, "print JSON")
	asCSV := fs.Bool("csv", false, "print CSV")
	timeout := cli.Duration{D: 30 * time.Second, Positive: true}
	fs.Var(&timeout, "timeout", "how long the answer may take, all told")
	log, code, ok := cli.Setup(e.stderr, fs, args)
	if !ok {
		return code
	}
	if *asJSON && *asCSV {
		fmt.Fprintln(e.stderr, "report: -json and -csv: want one of them")
		return cli.ExitUsage
	}
	if *addr == "" && *stateDir == "" && *path == "" {
		fmt.Fprintln(e.stderr, "report: want -addr URL (ask the running controller), -state-dir DIR or -config FILE (read a stopped controller's state)")
		return cli.ExitUsage
	}
	shared := false
	fs.Visit(func(f *flag.Flag) {
		if f.Name == "share-idle" {
			shared = true
		}
	})
	cfg := &config.Config{Controller: config.Defaults().Controller, Usage: config.Defaults().Usage}
	if *path != "" {
		if cfg, ok = loadConfig(e, log, *path); !ok {
			return cli.ExitError
		}
	}
	if _, err := usage.ParseBy(*by); err != nil {
		fmt.Fprintf(e.stderr, "report: -by %v\n", err)
		return cli.ExitUsage
	}
	params := map[string]string{"by": *by}
	now := time.Now().UTC()
	q, err := reportWindow(*from, *to, now)
	if err != nil {
		fmt.Fprintln(e.stderr, "report:", err)
		return cli.ExitUsage
	}
	params["from"], params["to"] = q.From.Format(time.RFC3339), q.To.Format(time.RFC3339)
	if shared {
		params["share_idle"] = strconv.FormatBool(*shareIdle)
	}
	var rep usage.Report
	if *addr != "" {
		ctx, cancel := context.WithTimeout(context.Background(), timeout.D)
		defer cancel()
		v := url.Values{}
		for k, x := range params {
			v.Set(k, x)
		}
		body, code, err := callController(ctx, cfg.Controller, *addr, *caFile, "GET", "/v1/usage?"+v.Encode(), nil, false)
		if err != nil {
			fmt.Fprintln(e.stderr, "report:", err)
			return code
		}
		if err := json.Unmarshal(body, &rep); err != nil {
			fmt.Fprintln(e.stderr, "report: the controller's answer:", err)
			return cli.ExitError
		}
	} else {
		if *stateDir != "" {
			cfg.Controller.StateDir = *stateDir
		}
		q, err := controller.ParseUsageQuery(func(k string) string { return params[k] }, now, cfg.Usage.ShareIdle)
		if err != nil {
			fmt.Fprintln(e.stderr, "report:", err)
			return cli.ExitUsage
		}
		// With controller.ha, the books in etcd, read while the replicas
		// run; else the state file, while the controller is stopped.
		ctl := cfg.Controller
		if *stateDir != "" {
			ctl.HA = nil
		}
		ctx, cancel := context.WithTimeout(context.Background(), timeout.D)
		defer cancel()
		store, closeStore, err := daemon.OpenState(ctx, ctl, nil, ctl.HA != nil)
		if errors.Is(err, state.ErrInUse) {
			fmt.Fprintf(e.stderr, "report: %v: the controller holds its state while it runs; ask it instead (-addr URL)\n", err)
			return cli.ExitError
		}
		if err != nil {
			fmt.Fprintln(e.stderr, "report:", err)
			return cli.ExitError
		}
		defer closeStore()
		if rep, err = controller.BuildUsageReport(store, q, usage.Live{}); err != nil {
			fmt.Fprintln(e.stderr, "report:", err)
			return cli.ExitError
		}
	}
	switch {
	case *asJSON:
		enc := json.NewEncoder(e.stdout)
		enc.SetIndent("", "  ")
		if rep.Rows == nil {
			rep.Rows = []usage.Row{}
		}
		err = enc.Encode(rep)
	case *asCSV:
		err = writeReportCSV(e.stdout, rep)
	default:
		err = writeReport(e.stdout, rep)
	}
	if err != nil {
		fmt.Fprintln(e.stderr, "report:", err)
		return cli.ExitError
	}
	return cli.ExitOK
}

// reportWindow reads -from (a time, or a duration before the end) and
// -to (a time; now when empty).
func reportWindow(from, to string, now time.Time) (usage.Query, error) {
	q := usage.Query{To: now}
	if to != "" {
		t, err := time.Parse(time.RFC3339, to)
		if err != nil {
			return q, fmt.Errorf("-to %q: want an RFC 3339 time such as 2026-12-01T00:00:00Z", to)
		}
		q.To = t
	}
	if d, err := fleet.ParseDuration(from); err == nil && d > 0 {
		q.From = q.To.Add(-d)
	} else if t, err := time.Parse(time.RFC3339, from); err == nil {
		q.From = t
	} else {
		return q, fmt.Errorf("-from %q: want an RFC 3339 time such as 2026-11-01T00:00:00Z, or a duration before -to such as 7d", from)
	}
	if !q.From.Before(q.To) {
		return q, fmt.Errorf("-from %s is not before -to %s", q.From.Format(time.RFC3339), q.To.Format(time.RFC3339))
	}
	return q, nil
}

// writeReport prints the report as a table. IDLE BEFORE EXEC and STALLED
// are the parts of USED (of a job's COST, by job) held allocated-idle.
func writeReport(w io.Writer, r usage.Report) error {
	idle := "idle charged to idle"
	if r.ShareIdle {
		idle = "idle shared by use"
	}
	fmt.Fprintf(w, "Who used what from %s to %s, by %s (%s)\n\n", r.From.UTC().Format("2006-01-02 15:04"), r.To.UTC().Format("2006-01-02 15:04 MST"), r.By, idle)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	if r.By == usage.ByJob {
		fmt.Fprintln(tw, "JOB\tTEAM\tTIER\tCOST\tIDLE BEFORE EXEC\tSTALLED\tGPU-HOURS\tQUEUED\t")
		for _, x := range r.Rows {
			queued := "-"
			if x.Queue.N > 0 {
				queued = seconds(x.Queue.P50)
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%.1f\t%s\t\n", x.Group, x.Team, x.Tier, dollars(x.CostMicros),
				dollars(x.IdleBeforeExecution.Micros), dollars(x.Stalled.Micros), x.Used.GPUHours, queued)
		}
		fmt.Fprintf(tw, "total\t\t\t%s\t%s\t%s\t%.1f\t\t\n", dollars(r.Total.CostMicros),
			dollars(r.Total.IdleBeforeExecution.Micros), dollars(r.Total.Stalled.Micros), r.Total.Used.GPUHours)
		return tw.Flush()
	}
	fmt.Fprintf(tw, "%s\tCOST\tUSED\tIDLE BEFORE EXEC\tSTALLED\tBOUGHT FOR\tIDLE\tGPU-HOURS\tJOBS\tQUEUE P50\tP95\tP99\tWAITED GPU-H\tWAITING\t\n", map[usage.By]string{usage.ByTeam: "TEAM", usage.ByTier: "TIER", usage.ByPool: "POOL"}[r.By])
	row := func(x usage.Row) {
		q := [3]string{"-", "-", "-"}
		if x.Queue.N > 0 {
			q = [3]string{seconds(x.Queue.P50), seconds(x.Queue.P95), seconds(x.Queue.P99)}
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%.1f\t%d\t%s\t%s\t%s\t%.1f\t%d\t\n", x.Group, dollars(x.CostMicros), dollars(x.Used.Micros),
			dollars(x.IdleBeforeExecution.Micros), dollars(x.Stalled.Micros), dollars(x.BoughtFor.Micros),
			dollars(x.Idle.Micros+x.IdleShare.Micros), x.Used.GPUHours+x.BoughtFor.GPUHours+x.Idle.GPUHours+x.IdleShare.GPUHours, x.Started, q[0], q[1], q[2], x.WaitedGPUHours, x.Waiting)
	}
	for _, x := range r.Rows {
		row(x)
	}
	row(r.Total)
	return tw.Flush()
}

// writeReportCSV prints the report as CSV: one line per row and the
// total, money in dollars, times in seconds.
func writeReportCSV(w io.Writer, r usage.Report) error {
	cw := csv.NewWriter(w)
	head := []string{string(r.By)}
	if r.By == usage.ByJob {
		head = append(head, "team", "tier")
	}
	cw.Write(append(head, "cost_usd", "used_usd", "idle_before_execution_usd", "stalled_usd", "bought_for_usd", "idle_share_usd", "idle_usd", "gpu_hours_used", "gpu_hours_bought_for", "gpu_hours_idle",
		"jobs_started", "queue_p50_s", "queue_p95_s", "queue_p99_s", "waited_gpu_hours", "jobs_waiting", "gpus_waiting"))
	f := func(v float64) string { return strconv.FormatFloat(v, 'f', -1, 64) }
	m := func(v usage.Micros) string { return strconv.FormatFloat(v.Dollars(), 'f', 6, 64) }
	for _, x := range append(r.Rows, r.Total) {
		line := []string{x.Group}
		if r.By == usage.ByJob {
			line = append(line, x.Team, x.Tier)
		}
		cw.Write(append(line, m(x.CostMicros), m(x.Used.Micros), m(x.IdleBeforeExecution.Micros), m(x.Stalled.Micros), m(x.BoughtFor.Micros), m(x.IdleShare.Micros), m(x.Idle.Micros),
			f(x.Used.GPUHours), f(x.BoughtFor.GPUHours), f(x.Idle.GPUHours+x.IdleShare.GPUHours),
			strconv.Itoa(x.Started), f(x.Queue.P50), f(x.Queue.P95), f(x.Queue.P99), f(x.WaitedGPUHours), strconv.Itoa(x.Waiting), strconv.Itoa(x.WaitingGPUs)))
	}
	cw.Flush()
	return cw.Error()
}

// dollars is an amount as $1,234.56.
func dollars(m usage.Micros) string {
	cents := (int64(m) + 5000) / 10000
	if m < 0 {
		cents = (int64(m) - 5000) / 10000
	}
	return fmt.Sprintf("$%d.%02d", cents/100, abs(cents%100))
}

func abs(x int64) int64 {
	if x < 0 {
		return -x
	}
	return x
}

// seconds is a queue time in words: 45s, 15m, 2h30m.
func seconds(s float64) string {
	return fleet.FormatDuration(time.Duration(s * float64(time.Second)).Round(time.Second))
}
