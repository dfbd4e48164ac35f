package main

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/fleetcast/autoscaler/fleet"
	"github.com/fleetcast/autoscaler/internal/cli"
	"github.com/fleetcast/autoscaler/loop"
	"github.com/fleetcast/autoscaler/state"
	"github.com/fleetcast/autoscaler/trace"
)

// maxInterpolatedSteps is the longest run of steps with no row that an
// import fills by interpolation, as `forecast` fills its gaps; a longer one
// is left empty, and the controller carries the value before it flat, as
// it does over its own gaps.
const maxInterpolatedSteps = 6

// runHistory is `autoscaler history import`: the controller's demand
// history, so that a new controller forecasts from its first cycle.
func runHistory(e *env, args []string) int {
	if len(args) == 0 || strings.HasPrefix(args[0], "-") {
		fmt.Fprintln(e.stderr, "history: want a command: import")
		return cli.ExitUsage
	}
	if args[0] != "import" {
		fmt.Fprintf(e.stderr, "history: unknown command %q; want import\n", args[0])
		return cli.ExitUsage
	}
	return runHistoryImport(e, args[1:])
}

// runHistoryImport reads a demand series as `forecast` does and records it
// in the controller's state store, one sample per forecast step, within
// forecast.history before now; what the store holds already wins.
func runHistoryImport(e *env, args []string) int {
	fs := cli.NewFlagSet(e.stderr, "autoscaler", "history import", "history import -config FILE -series FILE [-value-column a+b] [-where column=value] [-scale X] [-skip-bad-rows] [-state-dir DIR]")
	path := fs.String("config", "", "fleet config file (HCL): its forecast.step, forecast.history and controller.state_dir")
	seriesPath := fs.String("series", "", "demand series to import: CSV with a time column of dates and value columns, as the forecast command reads it")
	valueCol := fs.String("value-column", "", "the value column, or columns to sum as a+b (e.g. running+pending)")
	scale := fs.Float64("scale", 1, "multiply values by this")
	skipBad := fs.Bool("skip-bad-rows", false, "skip rows that do not parse, and count them, instead of failing")
	var where whereFlag
	fs.Var(&where, "where", "read only the rows whose column has this value, column=value (repeat for several), as forecast does")
	stateDir := fs.String("state-dir", "", "directory of the controller's state (default: controller.state_dir)")
	log, code, ok := cli.Setup(e.stderr, fs, args)
	if !ok {
		return code
	}
	if *seriesPath == "" {
		fmt.Fprintln(e.stderr, "history import: -series FILE is required")
		return cli.ExitUsage
	}
	cfg, ok := loadConfig(e, log, *path)
	if !ok {
		return cli.ExitError
	}
	if *stateDir != "" {
		cfg.Controller.StateDir = *stateDir
	}
	raw, err := trace.OpenSeries(*seriesPath, trace.Options{ValueColumns: trace.ParseValueColumns(*valueCol), Scale: *scale, SkipBadRows: *skipBad, Where: where})
	if err != nil {
		fmt.Fprintln(e.stderr, "history import:", err)
		return cli.ExitError
	}
	step, length := cfg.Forecast.Step, cfg.Forecast.History
	now := time.Now().UTC()
	im, err := importSteps(raw, *seriesPath, now, step, length)
	if err != nil {
		fmt.Fprintln(e.stderr, "history import:", err)
		return cli.ExitError
	}
	// The series is checked before the store is opened: a bad file
	// changes nothing, not even a state directory that did not exist.
	if cfg.Controller.HA != nil && *stateDir == "" {
		// Into etcd, as the fleet's leader while it writes.
		ctx, cancel := context.WithTimeout(context.Background(), stateTimeout)
		defer cancel()
		return asLeader(ctx, e, "history import", cfg.Controller, func(store *state.Store) error {
			added, kept, err := loop.Import(store, step, im.samples...)
			if err == nil {
				log.Info("history imported", "series", *seriesPath, "state", store.Path(), "added", len(added), "kept", kept)
				printImport(e, raw, im, added, kept, store.Path(), step, length)
			}
			return err
		})
	}
	store, err := state.Open(cfg.Controller.StateDir)
	if errors.Is(err, state.ErrInUse) {
		fmt.Fprintf(e.stderr, "history import: %v: stop the controller first (it holds its state while it runs, and reads the history at its start), import, and start it again\n", err)
		return cli.ExitError
	}
	if err != nil {
		fmt.Fprintln(e.stderr, "history import:", err)
		return cli.ExitError
	}
	defer store.Close()
	added, kept, err := loop.Import(store, step, im.samples...)
	if err != nil {
		fmt.Fprintln(e.stderr, "history import:", err)
		return cli.ExitError
	}
	log.Info("history imported", "series", *seriesPath, "state", store.Path(), "added", len(added), "kept", kept)
	printImport(e, raw, im, added, kept, store.Path(), step, length)
	return cli.ExitOK
}

// imported is what an import offers the store: a sample per step within
// the history, and what it left out of the series.
type imported struct {
	// samples are each step's, at the step's start, oldest first.
	samples []state.Sample
	// old counts the rows older than the history before now; filled the
	// steps with no row interpolated from their neighbours.
	old, filled int
}

// importSteps turns a series read by the trace package into the samples
// an import records: each forecast step's peak (the controller records
// each step's highest demand too), at the step's start, from the first
// step that starts within length before now to the step in progress at
// now. Steps with no row between two rows at most maxInterpolatedSteps
// apart get the line between them; rows before the history are counted
// and left out. A series without dates, a row after now and a value over
// fleet.MaxDemandGPUs are errors naming the file and line, and
// nothing is imported.
func importSteps(s *trace.Series, path string, now time.Time, step, length time.Duration) (imported, error) {
	if s.Start.IsZero() {
		return imported{}, fmt.Errorf("%s: its times are seconds, not dates: the history needs dates (RFC 3339, or YYYY-MM-DD HH:MM:SS in UTC)", path)
	}
	cut := now.Add(-length)
	first := cut.Truncate(step)
	if first.Before(cut) {
		first = first.Add(step)
	}
	n := int(now.Truncate(step).Sub(first)/step) + 1
	peak, has := make([]float64, max(n, 0)), make([]bool, max(n, 0))
	var im imported
	// The last step before the history that has rows (beforeK < 0; 0 for
	// none), and its peak: the first step within may be interpolated from it.
	before, beforeK := 0.0, 0
	for i, off := range s.Offsets {
		t, v, line := s.Start.Add(off), s.Values[i], s.Lines[i]
		if t.After(now) {
			return imported{}, fmt.Errorf("%s:%d: %s is after now (%s): a demand history holds no future; check the time zone (times with none are UTC)",
				path, line, t.Format(time.RFC3339), now.Format(time.RFC3339))
		}
		if v > fleet.MaxDemandGPUs {
			return imported{}, fmt.Errorf("%s:%d: demand %v GPUs is more than %d; -scale it to GPUs", path, line, v, fleet.MaxDemandGPUs)
		}
		k := int(t.Truncate(step).Sub(first) / step)
		switch {
		case k < 0 && k == beforeK:
			before = max(before, v)
			im.old++
		case k < 0:
			before, beforeK = v, k
			im.old++
		case has[k]:
			peak[k] = max(peak[k], v)
		default:
			peak[k], has[k] = v, true
		}
	}
	haveLast, last, lastV := beforeK < 0, beforeK, before
	for k := range n {
		if !has[k] {
			continue
		}
		if gap := k - last - 1; haveLast && gap > 0 && gap <= maxInterpolatedSteps {
			for j := max(last+1, 0); j < k; j++ {
				peak[j] = lastV + (peak[k]-lastV)*float64(j-last)/float64(k-last)
				has[j] = true
				im.filled++
			}
		}
		haveLast, last, lastV = true, k, peak[k]
	}
	for k := range n {
		if has[k] {
			im.samples = append(im.samples, state.Sample{Time: first.Add(time.Duration(k) * step), Value: peak[k]})
		}
	}
	return im, nil
}

// printImport says what an import recorded and what it left out, and why.
func printImport(e *env, raw *trace.Series, im imported, added []state.Sample, kept int, where string, step, length time.Duration) {
	const at = "2006-01-02 15:04 MST"
	if len(added) == 0 {
		fmt.Fprintf(e.stdout, "Imported nothing of %s into %s.\n", raw.Name, where)
	} else {
		filled := ""
		if im.filled > 0 {
			filled = fmt.Sprintf("; %d steps with no row interpolated from their neighbours", im.filled)
		}
		fmt.Fprintf(e.stdout, "Imported %d samples of %s into %s, one per %s step (the peak of its rows%s), from %s to %s.\n",
			len(added), raw.Name, where, fleet.FormatDuration(step), filled, added[0].Time.Format(at), added[len(added)-1].Time.Format(at))
	}
	var why []string
	if raw.SkippedRows > 0 {
		why = append(why, fmt.Sprintf("%d bad row(s)", raw.SkippedRows))
	}
	if im.old > 0 {
		why = append(why, fmt.Sprintf("%d rows older than forecast.history (%s) before now", im.old, fleet.FormatDuration(length)))
	}
	if kept > 0 {
		why = append(why, fmt.Sprintf("%d steps the store had recorded already (its samples kept)", kept))
	}
	if len(why) == 0 {
		why = []string{"none"}
	}
	fmt.Fprintf(e.stdout, "Skipped %s.\n", strings.Join(why, "; "))
}
