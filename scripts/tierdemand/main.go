// Command tierdemand writes a workload trace's demand by tier as a series
// file, for `autoscaler forecast -backtest -tiers`: one row per step (t_start_s,
// seconds from the trace's start), one column per tier in the order
// -tiers gives, each the GPUs that tier's jobs would hold if every job ran
// from its submit time (trace.Trace.DemandOf).
//
//	go run ./scripts/tierdemand -trace FILE -tiers critical,standard,best_effort [-label-tiers critical=0.2,...] [-seed 1] [-step 10m] [-value-column a+b] [-scale 0.1] > tiers.csv
//
// A job's tier is the trace's (a tier column, openb's QoS class), else one
// -label-tiers draws from its ID and -seed as `simulate -label-tiers`
// does; a job left with no tier, or one -tiers does not name, is an error.
package main

import (
	"bufio"
	"flag"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/fleetcast/autoscaler/simulate"
	"github.com/fleetcast/autoscaler/trace"
)

func main() {
	if err := run(os.Args[1:], os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "tierdemand:", err)
		os.Exit(1)
	}
}

func run(args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("tierdemand", flag.ContinueOnError)
	path := fs.String("trace", "", "workload trace (CSV): jobs, philly, openb or series")
	tiers := fs.String("tiers", "", "the tiers, in rank order, comma-separated")
	label := fs.String("label-tiers", "", "label each job the trace gives no tier, such as critical=0.2,standard=0.5,best_effort=0.3")
	seed := fs.Int64("seed", 1, "the labelling's seed")
	step := fs.Duration("step", 10*time.Minute, "the series' step")
	valueCol := fs.String("value-column", "", "a series trace's value column, or columns to sum as a+b")
	scale := fs.Float64("scale", 1, "a series trace's values times this")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *path == "" || *tiers == "" || fs.NArg() > 0 {
		return fmt.Errorf("want -trace FILE -tiers a,b,c and no other arguments")
	}
	if *step <= 0 {
		return fmt.Errorf("-step %v: want above 0", *step)
	}
	names := strings.Split(*tiers, ",")
	for i, n := range names {
		if n == "" || slices.Index(names, n) < i {
			return fmt.Errorf("-tiers %q: want distinct tier names, comma-separated", *tiers)
		}
	}
	var shares []simulate.TierShare
	if *label != "" {
		var err error
		if shares, err = simulate.ParseLabelTiers(*label); err != nil {
			return fmt.Errorf("-label-tiers: %w", err)
		}
		for _, s := range shares {
			if !slices.Contains(names, s.Tier) {
				return fmt.Errorf("-label-tiers names %q, which -tiers does not", s.Tier)
			}
		}
	}
	tr, err := trace.Open(*path, trace.Options{ValueColumns: trace.ParseValueColumns(*valueCol), Scale: *scale})
	if err != nil {
		return err
	}
	of := make(map[*trace.Job]int, len(tr.Jobs))
	for i := range tr.Jobs {
		j := &tr.Jobs[i]
		name := j.Tier
		if name == "" && len(shares) > 0 {
			name = simulate.LabelTier(shares, *seed, j.ID)
		}
		k := slices.Index(names, name)
		if k < 0 {
			return fmt.Errorf("%s: job %s has tier %q, which -tiers does not name (give -label-tiers for a trace without tiers)", tr.Name, j.ID, name)
		}
		of[j] = k
	}
	cols := make([][]float64, len(names))
	for k := range names {
		cols[k] = tr.DemandOf(*step, func(j *trace.Job) bool { return of[j] == k }).Values
	}
	w := bufio.NewWriter(stdout)
	fmt.Fprintf(w, "t_start_s,%s\n", strings.Join(names, ","))
	for i := range cols[0] {
		w.WriteString(strconv.FormatFloat((time.Duration(i) * *step).Seconds(), 'f', -1, 64))
		for k := range cols {
			w.WriteString("," + strconv.FormatFloat(cols[k][i], 'f', 3, 64))
		}
		w.WriteString("\n")
	}
	return w.Flush()
}
