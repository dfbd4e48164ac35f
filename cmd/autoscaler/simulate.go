package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/fleetcast/autoscaler/fleet"
	"github.com/fleetcast/autoscaler/internal/cli"
	"github.com/fleetcast/autoscaler/simulate"
	"github.com/fleetcast/autoscaler/trace"
)

func runSimulate(e *env, args []string) int {
	fs := cli.NewFlagSet(e.stderr, "autoscaler", "simulate", "simulate -config FILE -trace FILE [flags]")
	path := fs.String("config", "", "fleet config file (HCL)")
	tracePath := fs.String("trace", "", "workload trace (CSV): jobs, philly, openb or series")
	format := fs.String("trace-format", "", "trace format: jobs, philly, openb or series (default: detected from the header)")
	valueCol := fs.String("value-column", "", "series: the value column, or columns to sum as a+b")
	scale := fs.Float64("scale", 1, "series: multiply values by this (e.g. requests/s to GPUs)")
	skipBad := fs.Bool("skip-bad-rows", false, "skip rows that do not parse, and count them, instead of failing")
	var from, interval, ckpt, spotNotice, ckptDur cli.Duration
	fs.Var(&from, "from", "start the window this long after the trace start, e.g. 40d")
	days := fs.Float64("days", 0, "window length in days (default: to the end)")
	seed := fs.Int64("seed", 1, "random seed (capacity errors)")
	policies := fs.String("policies", "", "comma-separated policies to run, of "+strings.Join(simulate.Policies, ",")+" (default: "+strings.Join(simulate.DefaultPolicies, ",")+")")
	headroom := fs.Int("headroom", -1, "the headroom policy's buffer: GPUs kept free as whole empty nodes (default: simulate.headroom_gpus, 128)")
	placeholders := fs.String("headroom-placeholders", "", "the headroom policy's placeholders: node (each as wide as a node: the buffer is whole empty nodes) or gpu (one GPU each: it also fills busy nodes' fragments) (default: simulate.headroom_placeholders, node)")
	reservations := fs.String("reservations", "", "how policies hold reservations: configured (every policy the configured ones) or advised (predictive follows the baseline advice; default: simulate.reservations, configured)")
	adviceAfter := cli.Duration{Positive: true}
	fs.Var(&adviceAfter, "advice-after", "history before the advised reservation's first review (default: simulate.advice_after, 14d)")
	var margins marginsFlag
	fs.Var(&margins, "perfect-margin", "the perfect policy's margin over the true demand, as a share, e.g. 0.05; with -frontier, a comma-separated list of margins to run the perfect ablation at beside the frontier, e.g. 0,0.05,0.1")
	announceShare := fs.Float64("announce-share", 0, "share of jobs, 0 to 1, a scheduler announces ahead of their submission (predictive and perfect see them as announced demand)")
	announceAhead := cli.Duration{Positive: true}
	fs.Var(&announceAhead, "announce-ahead", "how long before its submission an announced job is announced (default 30m)")
	estimates := fs.String("runtime-estimates", "", "what the scheduler tells of running jobs' ends, which predictive and perfect read as a hint: none, exact (their true ends) or limits (time limits: the true runtime times 1 + e^N(0,1), never less) (default none)")
	adviceCheck := fs.Bool("advice-check", false, "weigh the reservation advice against hindsight: predictive following the advice, and at fixed reservations committed at its first review (-advice-after), instead of the policy table (implies -reservations advised)")
	frontier := fs.Bool("frontier", false, "cost against waited GPU-hours for predictive over its quantiles and headroom over its buffers (and perfect over -perfect-margin's margins), read at each buffer's waiting, instead of the policy table")
	fs.Var(&interval, "interval", "control interval of the reactive and predictive policies (default: controller.interval)")
	fs.Var(&ckpt, "checkpoint-interval", "how often jobs checkpoint, unless the trace says (default: simulate.checkpoint_interval, 30m)")
	spotRate := fs.Float64("spot-interruptions", -1, "rate at which the cloud reclaims each spot node, per node-hour, e.g. 0.05 (default: simulate.spot_interruptions_per_hour, 0)")
	fs.Var(&spotNotice, "spot-notice", "warning the cloud gives before reclaiming a spot node (default: simulate.spot_notice, 2m)")
	fs.Var(&ckptDur, "checkpoint-duration", "how long a checkpoint asked for by a drain or a spot notice takes to be durable, 0 for at once (default: simulate.checkpoint_duration, 2m)")
	unresponsive := fs.Float64("unresponsive-jobs", -1, "share of jobs, 0 to 1, that ignore drains and checkpoint only on their own schedule (default: simulate.unresponsive_jobs, 0.02)")
	labelTiers := fs.String("label-tiers", "", "label each job the trace gives no tier with one of the config's tiers, drawn from its ID and -seed with these shares, such as critical=0.2,standard=0.5,best_effort=0.3 (the examples'); empty (off): such a job is the default tier's")
	wholeGPUs := fs.Bool("whole-gpus", false, "round each job's share of one GPU (a trace's gpu_milli, gpus below 1) up to a whole GPU, as a fleet that does not share GPUs runs it: what sharing is compared with (the work and waiting are still counted at each job's share)")
	anyType := fs.Bool("ignore-gpu-types", false, "run every job on any GPU type, whatever types it accepts (a trace's gpu_types or gpu_spec): what the constraints are compared with")
	placement := fs.String("share-placement", simulate.PlaceBestFit, "how the simulated scheduler places shares of one GPU: best-fit (the shared GPU with the least left that holds it) or fragmentation (where the fragmentation the trace's jobs would leave grows the least, as Alibaba's scheduler does)")
	untiered := fs.Bool("untiered", false, "predictive provisions as if the config had no tiers (all demand alike, at forecast.wait_value_per_gpu_hour, on any capacity type), the scheduler still favouring the higher tiers: what tiered provisioning is compared with")
	labelTeams := fs.Int("label-teams", 0, fmt.Sprintf("label each job the trace gives no team as one of team-01 .. team-N, drawn from its ID and -seed with Zipf weights (team k's weight 1/k), for the report's split by team; 0 (off) to %d", simulate.MaxLabelTeams))
	asJSON := fs.Bool("json", false, "print the report as JSON")
	plotPath := fs.String("plot", "", "draw demand and each policy's capacity over time (with -frontier: cost against waiting) to this file (.svg, .png or .pdf)")
	log, code, ok := cli.Setup(e.stderr, fs, args)
	if !ok {
		return code
	}
	if *tracePath == "" {
		fmt.Fprintln(e.stderr, "simulate: -trace FILE is required")
		return cli.ExitUsage
	}
	opt := simulate.Options{Seed: *seed, SpotInterruptionsPerHour: *spotRate,
		Interval: interval.D, CheckpointInterval: ckpt.D, SpotNotice: spotNotice.D,
		Reservations: *reservations, AdviceAfter: adviceAfter.D,
		AnnounceShare: *announceShare, AnnounceAhead: announceAhead.D, RuntimeEstimates: *estimates}
	if *estimates != "" && !slices.Contains(simulate.RuntimeEstimateModes, *estimates) {
		fmt.Fprintf(e.stderr, "simulate: -runtime-estimates %q: want one of %s\n", *estimates, strings.Join(simulate.RuntimeEstimateModes, ", "))
		return cli.ExitUsage
	}
	if *headroom < -1 || (*headroom == -1 && flagSet(fs, "headroom")) || *headroom > simulate.MaxHeadroomGPUs {
		fmt.Fprintf(e.stderr, "simulate: -headroom %d: want GPUs from 0 to %d\n", *headroom, simulate.MaxHeadroomGPUs)
		return cli.ExitUsage
	}
	if *placeholders != "" && !slices.Contains(fleet.PlaceholderSizes, *placeholders) {
		fmt.Fprintf(e.stderr, "simulate: -headroom-placeholders %q: want one of %s\n", *placeholders, strings.Join(fleet.PlaceholderSizes, ", "))
		return cli.ExitUsage
	}
	if a := *announceShare; !(a >= 0 && a <= 1) {
		fmt.Fprintf(e.stderr, "simulate: -announce-share %v: want a share of jobs from 0 to 1\n", a)
		return cli.ExitUsage
	}
	if *reservations != "" && !slices.Contains(fleet.ReservationModes, *reservations) {
		fmt.Fprintf(e.stderr, "simulate: -reservations %q: want one of %s\n", *reservations, strings.Join(fleet.ReservationModes, ", "))
		return cli.ExitUsage
	}
	if *spotRate < 0 && *spotRate != -1 {
		fmt.Fprintf(e.stderr, "simulate: -spot-interruptions %v: want a rate >= 0\n", *spotRate)
		return cli.ExitUsage
	}
	if n := *labelTeams; n < 0 || n > simulate.MaxLabelTeams {
		fmt.Fprintf(e.stderr, "simulate: -label-teams %d: want a number of teams from 0 (off) to %d\n", n, simulate.MaxLabelTeams)
		return cli.ExitUsage
	}
	opt.LabelTeams = *labelTeams
	opt.Untiered = *untiered
	opt.WholeGPUs = *wholeGPUs
	opt.IgnoreGPUTypes = *anyType
	if *placement != simulate.PlaceBestFit && *placement != simulate.PlaceFragmentation {
		fmt.Fprintf(e.stderr, "simulate: -share-placement %q: want %s or %s\n", *placement, simulate.PlaceBestFit, simulate.PlaceFragmentation)
		return cli.ExitUsage
	}
	opt.SharePlacement = *placement
	if *labelTiers != "" {
		shares, err := simulate.ParseLabelTiers(*labelTiers)
		if err != nil {
			fmt.Fprintf(e.stderr, "simulate: -label-tiers: %v\n", err)
			return cli.ExitUsage
		}
		opt.LabelTiers = shares
	}
	if u := *unresponsive; u != -1 && !(u >= 0 && u <= 1) {
		fmt.Fprintf(e.stderr, "simulate: -unresponsive-jobs %v: want a share of jobs from 0 to 1\n", u)
		return cli.ExitUsage
	}
	topt := trace.Options{Format: *format, ValueColumns: trace.ParseValueColumns(*valueCol), Scale: *scale, SkipBadRows: *skipBad, Days: *days, From: from.D}
	if *policies != "" {
		opt.Policies = strings.Split(*policies, ",")
	}
	if *frontier && *adviceCheck {
		fmt.Fprintln(e.stderr, "simulate: -frontier and -advice-check are two reports; run them apart")
		return cli.ExitUsage
	}
	if *adviceCheck {
		// The check runs the predictive policy only, with advised reservations.
		for _, name := range []string{"policies", "headroom", "perfect-margin"} {
			if flagSet(fs, name) {
				fmt.Fprintf(e.stderr, "simulate: -%s does not apply to -advice-check, which runs only the predictive policy\n", name)
				return cli.ExitUsage
			}
		}
		if *reservations == fleet.ReservationsConfigured {
			fmt.Fprintln(e.stderr, "simulate: -advice-check weighs the advice, so it needs -reservations advised (or none)")
			return cli.ExitUsage
		}
		*reservations = fleet.ReservationsAdvised
	}
	if *frontier {
		// The frontier runs its own policies and levels.
		for _, name := range []string{"policies", "headroom"} {
			if flagSet(fs, name) {
				fmt.Fprintf(e.stderr, "simulate: -%s does not apply to -frontier, which runs headroom over %v GPUs and predictive over the quantiles %v\n",
					name, simulate.FrontierBuffers, simulate.FrontierQuantiles)
				return cli.ExitUsage
			}
		}
	}
	switch {
	case *frontier:
		opt.FrontierPerfect = margins.m
	case len(margins.m) > 1:
		fmt.Fprintf(e.stderr, "simulate: -perfect-margin %s: one margin, except with -frontier\n", margins.String())
		return cli.ExitUsage
	case len(margins.m) == 1:
		opt.PerfectMargin = margins.m[0]
	}
	cfg, ok := loadConfig(e, log, *path)
	if !ok {
		return cli.ExitError
	}
	// The config's simulate and controller blocks, where no flag
	// overrides them.
	if opt.Interval == 0 {
		opt.Interval = cfg.Controller.Interval
	}
	opt.Fleet = cfg.Controller.Fleet
	if opt.CheckpointInterval == 0 {
		opt.CheckpointInterval = cfg.Simulate.CheckpointInterval
	}
	if opt.SpotNotice == 0 {
		opt.SpotNotice = cfg.Simulate.SpotNotice
	}
	if opt.SpotInterruptionsPerHour < 0 {
		opt.SpotInterruptionsPerHour = cfg.Simulate.SpotInterruptionsPerHour
	}
	opt.CheckpointDuration, opt.UnresponsiveJobs = drainModel(cfg.Simulate, ckptDur, *unresponsive)
	if opt.Reservations == "" {
		opt.Reservations = cfg.Simulate.Reservations
	}
	if opt.AdviceAfter == 0 {
		opt.AdviceAfter = cfg.Simulate.AdviceAfter
	}
	opt.HeadroomGPUs = cfg.Simulate.HeadroomGPUs
	if *headroom >= 0 {
		opt.HeadroomGPUs = *headroom
	}
	if opt.HeadroomGPUs == 0 {
		opt.HeadroomGPUs = -1 // none: Options' zero is the default
	}
	if *frontier && opt.Reservations == fleet.ReservationsAdvised {
		fmt.Fprintln(e.stderr, "simulate: -frontier compares policies holding the configured reservations: the headroom policy does not follow the baseline advice; use -reservations configured")
		return cli.ExitUsage
	}
	opt.HeadroomPlaceholders = cfg.Simulate.HeadroomPlaceholders
	if *placeholders != "" {
		opt.HeadroomPlaceholders = *placeholders
	}
	tr, err := trace.Open(*tracePath, topt)
	if err != nil {
		fmt.Fprintln(e.stderr, "simulate:", err)
		return cli.ExitError
	}
	if tr.SkippedRows > 0 {
		fmt.Fprintf(e.stderr, "simulate: skipped %d bad row(s) of %s\n", tr.SkippedRows, tr.Name)
	}
	set := cfg.Settings()
	if w := simulate.CapacityWarning(&set, tr); w != "" {
		fmt.Fprintln(e.stderr, "simulate: warning:", w)
	}
	log.Info("simulating", "trace", tr.Name, "jobs", len(tr.Jobs), "days", tr.Span().Hours()/24)
	if isTerminal(e.stderr) && !*frontier && !*adviceCheck { // the frontier's and the check's runs report no progress
		bar := newProgressBar(e.stderr, opt.Policies)
		opt.Progress = bar.update
		defer bar.done()
	}
	var out simulateOutput
	switch {
	case *frontier:
		out, err = simulate.RunFrontier(&set, tr, opt)
	case *adviceCheck:
		out, err = simulate.RunAdviceCheck(&set, tr, opt)
	default:
		out, err = simulate.Run(&set, tr, opt)
	}
	if err != nil {
		fmt.Fprintln(e.stderr, err)
		return cli.ExitError
	}
	return writeSimulated(e, log, out, *asJSON, *plotPath)
}

// marginsFlag is -perfect-margin: shares of demand >= 0, separated by
// commas, each at most once.
type marginsFlag struct{ m []float64 }

func (f *marginsFlag) String() string {
	if f == nil {
		return ""
	}
	s := make([]string, len(f.m))
	for i, m := range f.m {
		s[i] = strconv.FormatFloat(m, 'g', -1, 64)
	}
	return strings.Join(s, ",")
}

func (f *marginsFlag) Set(s string) error {
	var out []float64
	for i, item := range strings.Split(s, ",") {
		item = strings.TrimSpace(item)
		m, err := strconv.ParseFloat(item, 64)
		switch {
		case item == "":
			return fmt.Errorf("item %d is empty: want shares >= 0 such as 0.05, separated by commas", i+1)
		case err != nil, !(m >= 0), math.IsInf(m, 1):
			return fmt.Errorf("%q is not a share >= 0 such as 0.05", item)
		}
		m += 0 // -0 is 0
		if slices.Contains(out, m) {
			return fmt.Errorf("%q is given twice", item)
		}
		out = append(out, m)
	}
	f.m = out
	return nil
}

// simulateOutput is what `simulate` prints: a *simulate.Report, or with
// -frontier a *simulate.Frontier.
type simulateOutput interface {
	WriteTable(w io.Writer) error
	Plot(path string) error
}

// writeSimulated draws out's picture when asked for, and prints out as a
// table or as JSON.
func writeSimulated(e *env, log hclog.Logger, out simulateOutput, asJSON bool, plotPath string) int {
	if plotPath != "" {
		if err := out.Plot(plotPath); err != nil {
			fmt.Fprintln(e.stderr, "simulate:", err)
			return cli.ExitError
		}
		log.Info("picture written", "path", plotPath)
	}
	if asJSON {
		enc := json.NewEncoder(e.stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(out); err != nil {
			fmt.Fprintln(e.stderr, "simulate:", err)
			return cli.ExitError
		}
		return cli.ExitOK
	}
	if err := out.WriteTable(e.stdout); err != nil {
		fmt.Fprintln(e.stderr, "simulate:", err)
		return cli.ExitError
	}
	return cli.ExitOK
}

// drainModel is the checkpoint duration and the share of unresponsive jobs
// for simulate.Options: the flags where given (unresponsive -1: not
// given), else the config's simulate block; a 0 becomes the Options' "at
// once" or "none" (negative), where zero would take the default.
func drainModel(cfg fleet.SimulateSettings, ckptDur cli.Duration, unresponsive float64) (time.Duration, float64) {
	d, u := cfg.CheckpointDuration, cfg.UnresponsiveJobs
	if ckptDur.Given {
		d = ckptDur.D
	}
	if unresponsive != -1 {
		u = unresponsive
	}
	if d == 0 {
		d = -1
	}
	if u == 0 {
		u = -1
	}
	return d, u
}

// isTerminal reports whether w is a terminal (a character device).
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}

// progressBar draws one line of per-policy progress on a terminal.
type progressBar struct {
	w        io.Writer
	mu       sync.Mutex
	names    []string
	progress map[string]float64
	last     time.Time
}

func newProgressBar(w io.Writer, policies []string) *progressBar {
	if len(policies) == 0 {
		policies = simulate.DefaultPolicies
	}
	var names []string
	for _, p := range policies {
		if p != "oracle" {
			names = append(names, p)
		}
	}
	return &progressBar{w: w, names: names, progress: map[string]float64{}}
}

// update records a policy's progress and redraws, at most ten times a second.
func (b *progressBar) update(policy string, done float64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.progress[policy] = done
	if time.Since(b.last) < 100*time.Millisecond && done < 1 {
		return
	}
	b.last = time.Now()
	var parts []string
	for _, n := range b.names {
		d := b.progress[n]
		filled := int(d * 20)
		parts = append(parts, fmt.Sprintf("%s [%s%s] %3.0f%%", n, strings.Repeat("#", filled), strings.Repeat(".", 20-filled), 100*d))
	}
	fmt.Fprintf(b.w, "\r%s", strings.Join(parts, "  "))
}

// done clears the bar's line.
func (b *progressBar) done() {
	b.mu.Lock()
	defer b.mu.Unlock()
	fmt.Fprint(b.w, "\r\033[K")
}

// flagSet reports whether the flag name was given on the command line.
func flagSet(fs *flag.FlagSet, name string) bool {
	set := false
	fs.Visit(func(f *flag.Flag) { set = set || f.Name == name })
	return set
}
