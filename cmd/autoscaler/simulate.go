package main

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/fleetcast/autoscaler/config"
	"github.com/fleetcast/autoscaler/simulate"
	"github.com/fleetcast/autoscaler/trace"
)

func runSimulate(e *env, args []string) int {
	fs := newFlagSet(e, "simulate", "simulate -config FILE -trace FILE [flags]")
	path := fs.String("config", "", "fleet config file (HCL)")
	tracePath := fs.String("trace", "", "workload trace (CSV): jobs, philly or series")
	format := fs.String("trace-format", "", "trace format: jobs, philly or series (default: detected from the header)")
	valueCol := fs.String("value-column", "", "series: the value column, or columns to sum as a+b")
	scale := fs.Float64("scale", 1, "series: multiply values by this (e.g. requests/s to GPUs)")
	skipBad := fs.Bool("skip-bad-rows", false, "skip rows that do not parse, and count them, instead of failing")
	from := fs.String("from", "", "start the window this long after the trace start, e.g. 40d")
	days := fs.Float64("days", 0, "window length in days (default: to the end)")
	seed := fs.Int64("seed", 1, "random seed (capacity errors)")
	policies := fs.String("policies", "", "comma-separated policies to run (default: "+strings.Join(simulate.Policies, ",")+")")
	interval := fs.String("interval", "", "control interval of the reactive and predictive policies (default: controller.interval)")
	ckpt := fs.String("checkpoint-interval", "30m", "how often jobs checkpoint, unless the trace says")
	asJSON := fs.Bool("json", false, "print the report as JSON")
	log, code, ok := setup(e, fs, args)
	if !ok {
		return code
	}
	if *tracePath == "" {
		fmt.Fprintln(e.stderr, "simulate: -trace FILE is required")
		return exitUsage
	}
	opt := simulate.Options{Seed: *seed}
	topt := trace.Options{Format: *format, ValueColumns: trace.ParseValueColumns(*valueCol), Scale: *scale, SkipBadRows: *skipBad, Days: *days}
	for _, d := range []struct {
		flag, value string
		dst         *time.Duration
	}{{"-from", *from, &topt.From}, {"-interval", *interval, &opt.Interval}, {"-checkpoint-interval", *ckpt, &opt.CheckpointInterval}} {
		if d.value == "" {
			continue
		}
		v, err := config.ParseDuration(d.value)
		if err != nil || v < 0 {
			fmt.Fprintf(e.stderr, "simulate: %s %q: want a duration such as 40d, 10m or 1h30m\n", d.flag, d.value)
			return exitUsage
		}
		*d.dst = v
	}
	if *policies != "" {
		opt.Policies = strings.Split(*policies, ",")
	}
	cfg, ok := loadConfig(e, log, *path)
	if !ok {
		return exitError
	}
	tr, err := trace.Open(*tracePath, topt)
	if err != nil {
		fmt.Fprintln(e.stderr, "simulate:", err)
		return exitError
	}
	if tr.SkippedRows > 0 {
		fmt.Fprintf(e.stderr, "simulate: skipped %d bad row(s) of %s\n", tr.SkippedRows, tr.Name)
	}
	if w := simulate.CapacityWarning(cfg, tr); w != "" {
		fmt.Fprintln(e.stderr, "simulate: warning:", w)
	}
	log.Info("simulating", "trace", tr.Name, "jobs", len(tr.Jobs), "days", tr.Span().Hours()/24)
	rep, err := simulate.Run(cfg, tr, opt)
	if err != nil {
		fmt.Fprintln(e.stderr, err)
		return exitError
	}
	if *asJSON {
		enc := json.NewEncoder(e.stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(rep); err != nil {
			fmt.Fprintln(e.stderr, "simulate:", err)
			return exitError
		}
		return exitOK
	}
	if err := rep.WriteTable(e.stdout); err != nil {
		fmt.Fprintln(e.stderr, "simulate:", err)
		return exitError
	}
	return exitOK
}
