package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"slices"
	"sort"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/fleetcast/autoscaler/controller"
	"github.com/fleetcast/autoscaler/forecast"
	"github.com/fleetcast/autoscaler/internal/cli"
	"github.com/fleetcast/autoscaler/trace"
)

func runForecast(e *env, args []string) int {
	fs := cli.NewFlagSet(e.stderr, "autoscaler", "forecast", "forecast -series FILE [-value-column a+b] [-where column=value] [-step 10m] [-horizon 1h] [-quantile 0.9] [-backtest [-per-origin FILE | -tiers a,b,c [-share-over 1h]]] [-json] [-plot FILE]")
	path := fs.String("series", "", "demand series (CSV with a time column and value columns)")
	valueCol := fs.String("value-column", "", "the value column, or columns to sum as a+b")
	scale := fs.Float64("scale", 1, "multiply values by this")
	skipBad := fs.Bool("skip-bad-rows", false, "skip rows that do not parse, and count them, instead of failing")
	var where whereFlag
	fs.Var(&where, "where", "read only the rows whose column has this value, column=value (repeat for several): one series of a file holding several, such as model=m-large")
	stepFlag := cli.Duration{Positive: true}
	horizonFlag := cli.Duration{D: time.Hour, Positive: true}
	trainFlag := cli.Duration{D: 14 * forecast.Day, Positive: true}
	fs.Var(&stepFlag, "step", "resample to this step (default: the series' own median step)")
	fs.Var(&horizonFlag, "horizon", "how far ahead to forecast")
	quantile := fs.Float64("quantile", 0.9, "the quantile for the pinball loss and the forecast's upper line")
	backtest := fs.Bool("backtest", false, "score every model by rolling-origin backtest instead of forecasting from the end")
	origins := fs.Int("origins", 30, "backtest origins")
	fs.Var(&trainFlag, "train", "backtest training window")
	asJSON := fs.Bool("json", false, "print JSON")
	plotPath := fs.String("plot", "", "draw history, forecast and 80% band to this file (.svg, .png or .pdf)")
	perOrigin := fs.String("per-origin", "", "with -backtest, write every model's figures at every origin to this CSV file (for paired comparisons)")
	shareOver := cli.Duration{Positive: true}
	fs.Var(&shareOver, "share-over", "with -tiers, the time before each origin over which a tier's share of the total is taken (default: one step)")
	tiers := fs.String("tiers", "", "with -backtest, the value columns holding each tier's own demand, in rank order, such as critical,standard,best_effort: backtest each tier's demand with the higher tiers' forecast by itself and as its share of the total")
	log, code, ok := cli.Setup(e.stderr, fs, args)
	if !ok {
		return code
	}
	if *path == "" {
		fmt.Fprintln(e.stderr, "forecast: -series FILE is required")
		return cli.ExitUsage
	}
	if !(*quantile > 0 && *quantile < 1) {
		fmt.Fprintf(e.stderr, "forecast: -quantile %v: want a number in (0, 1)\n", *quantile)
		return cli.ExitUsage
	}
	if *perOrigin != "" && !*backtest {
		fmt.Fprintln(e.stderr, "forecast: -per-origin needs -backtest")
		return cli.ExitUsage
	}
	step, horizon, train := stepFlag.D, horizonFlag.D, trainFlag.D
	if shareOver.D > 0 && *tiers == "" {
		fmt.Fprintln(e.stderr, "forecast: -share-over needs -tiers")
		return cli.ExitUsage
	}
	if *tiers != "" {
		if !*backtest || *valueCol != "" || *perOrigin != "" || *plotPath != "" {
			fmt.Fprintln(e.stderr, "forecast: -tiers needs -backtest, and takes no -value-column, -per-origin or -plot")
			return cli.ExitUsage
		}
		cols := strings.Split(*tiers, ",")
		if len(cols) < 2 || slices.Contains(cols, "") {
			fmt.Fprintf(e.stderr, "forecast: -tiers %q: want two or more value columns, comma-separated\n", *tiers)
			return cli.ExitUsage
		}
		return runTierBacktest(e, tierBacktest{path: *path, columns: cols, step: step, horizon: horizon, shareOver: shareOver.D, json: *asJSON,
			opt:      trace.Options{Scale: *scale, SkipBadRows: *skipBad, Where: where},
			backtest: forecast.BacktestOptions{Origins: *origins, TrainDays: train.Hours() / 24, Quantile: *quantile}})
	}

	raw, series, step, code := openResampled(e, *path, trace.Options{ValueColumns: trace.ParseValueColumns(*valueCol), Scale: *scale, SkipBadRows: *skipBad, Where: where}, step, "forecast:")
	if code != cli.ExitOK {
		return code
	}
	skipped(e, raw)
	if series.Filled+series.Carried > 0 {
		log.Info("filled gaps", "interpolated", series.Filled, "carried", series.Carried)
	}
	h := int((horizon + step - 1) / step)
	season := int(forecast.Day / step)

	if *backtest {
		var perOriginFile *os.File
		var err error
		if *perOrigin != "" {
			// Created first, so that an unwritable path fails before a
			// long backtest rather than after it.
			if perOriginFile, err = os.Create(*perOrigin); err != nil {
				fmt.Fprintln(e.stderr, "forecast: -per-origin:", err)
				return cli.ExitError
			}
		}
		rep, err := forecast.Backtest(series.Values, forecast.DefaultModels(), forecast.BacktestOptions{
			Season: season, Horizon: h, Origins: *origins, TrainDays: train.Hours() / 24, Quantile: *quantile, Now: time.Now})
		if err != nil {
			if perOriginFile != nil {
				perOriginFile.Close()
				os.Remove(*perOrigin) // nothing to write
			}
			fmt.Fprintln(e.stderr, "forecast:", err)
			return cli.ExitError
		}
		if perOriginFile != nil {
			err := writePerOrigin(perOriginFile, rep.PerOrigin, step)
			if cerr := perOriginFile.Close(); err == nil {
				err = cerr
			}
			if err != nil {
				fmt.Fprintf(e.stderr, "forecast: -per-origin %s: %v\n", *perOrigin, err)
				return cli.ExitError
			}
		}
		out := backtestJSON{backtestHead: backtestHead{Series: raw.Name, StepS: step.Seconds(), HorizonS: (time.Duration(h) * step).Seconds(), Origins: rep.Origins},
			Selected: forecast.AutoName}
		for _, s := range rep.Scores {
			if !math.IsNaN(s.MASE) {
				out.Models = append(out.Models, s)
			}
		}
		if *asJSON {
			return writeJSON(e, out)
		}
		writeBacktest(e.stdout, out, rep)
		return cli.ExitOK
	}

	levels, _ := forecast.Levels(*quantile)
	// For a person: a short history's band is never of no width.
	f, err := forecast.AutoWith(series.Series, time.Duration(h)*step, levels, forecast.Options{FewChangesBand: true})
	if err != nil {
		fmt.Fprintln(e.stderr, "forecast:", err)
		return cli.ExitError
	}
	if *plotPath != "" {
		if err := plotForecast(*plotPath, raw.Name, series.Series, f); err != nil {
			fmt.Fprintln(e.stderr, "forecast:", err)
			return cli.ExitError
		}
	}
	if *asJSON {
		if raw.Start.IsZero() {
			// A series timed from its start has no dates: its origin is
			// an offset, never a date in year 1.
			return writeJSON(e, relativeForecast{ForecastView: controller.NewForecastView(&f),
				Origin: seriesTime(f.Origin, false, f.Step), OriginOffsetS: f.Origin.Sub(time.Time{}).Seconds()})
		}
		return writeJSON(e, controller.NewForecastView(&f))
	}
	writeForecast(e.stdout, raw.Name, f, *quantile, !raw.Start.IsZero())
	return cli.ExitOK
}

// openResampled reads a series file as forecast does and resamples it to
// step (its own median step when 0): the file's series, the resampled one
// and its step, or the exit code of what failed, said with prefix.
func openResampled(e *env, path string, opt trace.Options, step time.Duration, prefix string) (*trace.Series, forecast.Resampled, time.Duration, int) {
	raw, err := trace.OpenSeries(path, opt)
	if err != nil {
		fmt.Fprintln(e.stderr, prefix, err)
		return nil, forecast.Resampled{}, 0, cli.ExitError
	}
	if step == 0 {
		step = raw.Step
	}
	if forecast.Day%step != 0 {
		fmt.Fprintf(e.stderr, "forecast: step %v does not divide a day; resample with -step (e.g. 10m)\n", step)
		return nil, forecast.Resampled{}, 0, cli.ExitUsage
	}
	series, err := forecast.Resample(raw.Start, raw.Offsets, raw.Values, step, 6)
	if err != nil {
		fmt.Fprintln(e.stderr, prefix, err)
		return nil, forecast.Resampled{}, 0, cli.ExitError
	}
	return raw, series, step, cli.ExitOK
}

// skipped says how many bad rows reading the series skipped, if any
// (-skip-bad-rows).
func skipped(e *env, raw *trace.Series) {
	if raw.SkippedRows > 0 {
		fmt.Fprintf(e.stderr, "forecast: skipped %d bad row(s) of %s\n", raw.SkippedRows, raw.Name)
	}
}

// relativeForecast is the -json forecast of a series timed from its
// start: the origin as the days and time since then ("+31d 00:00") and in
// seconds.
type relativeForecast struct {
	*controller.ForecastView
	Origin        string  `json:"origin"`
	OriginOffsetS float64 `json:"origin_offset_s"`
}

// backtestHead is what every -backtest -json report starts with.
type backtestHead struct {
	Series   string  `json:"series"`
	StepS    float64 `json:"step_s"`
	HorizonS float64 `json:"horizon_s"`
	Origins  int     `json:"origins"`
}

// backtestJSON is the -backtest -json report.
type backtestJSON struct {
	backtestHead
	Selected string           `json:"selected"`
	Models   []forecast.Score `json:"models"`
}

func writeJSON(e *env, v any) int {
	enc := json.NewEncoder(e.stdout)
	enc.SetIndent("", "  ")
	if err := enc.Encode(v); err != nil {
		fmt.Fprintln(e.stderr, err)
		return cli.ExitError
	}
	return cli.ExitOK
}

// writePerOrigin writes the backtest's per-origin figures to out as CSV:
// origin (the index of the first value forecast), time_s (its offset from
// the start of the resampled series), model, mase, pinball, coverage80.
func writePerOrigin(out io.Writer, scores []forecast.OriginScore, step time.Duration) error {
	w := bufio.NewWriter(out)
	fmt.Fprintln(w, "origin,time_s,model,mase,pinball,coverage80")
	for _, s := range scores {
		ts := strconv.FormatFloat((time.Duration(s.Origin) * step).Seconds(), 'f', -1, 64)
		fmt.Fprintf(w, "%d,%s,%s,%.6g,%.6g,%.6g\n", s.Origin, ts, s.Model, s.MASE, s.Pinball, s.Coverage80)
	}
	return w.Flush()
}

func writeBacktest(w io.Writer, out backtestJSON, rep forecast.BacktestReport) {
	fmt.Fprintf(w, "%s: %d origins, step %v, horizon %v\n\n", out.Series, out.Origins,
		time.Duration(out.StepS)*time.Second, time.Duration(out.HorizonS)*time.Second)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "model\tMASE\t± se\tsMAPE %\tpinball\t80% coverage\tfit ms\tfailed\t")
	for _, s := range rep.Scores {
		fmt.Fprintf(tw, "%s\t%.3f\t%.3f\t%.1f\t%.3f\t%.2f\t%.1f\t%d\t\n", s.Model, s.MASE, s.MASESE, s.SMAPE, s.Pinball, s.Coverage80, s.FitMS, s.Failed)
	}
	tw.Flush()
	fmt.Fprintf(w, "\n± se: MASE's standard error over the %d origins, how far another draw of origins could move it (gaps to figures from\nother origins under about twice it are noise; the models here share their origins, so gaps between them are surer).\n", out.Origins)
	var picks []string
	for m, n := range rep.Picks {
		picks = append(picks, fmt.Sprintf("%s %d", m, n))
	}
	sort.Strings(picks)
	fmt.Fprintf(w, "\nselected: %s (at each origin, the models with the smallest errors on the last days before it, per step and level; one step ahead: %s)\n", out.Selected, strings.Join(picks, ", "))
}

// writeForecast writes the forecast as a table: a row per step, columns
// for the 80% band, the median and the quantile q. A series with dates
// (absolute) has its times printed as dates; one timed in seconds from its
// start (whose forecast starts at the zero time plus that offset), as the
// days and time since its start.
func writeForecast(w io.Writer, name string, f forecast.Forecast, q float64, absolute bool) {
	from := f.Origin.UTC().Format(time.RFC3339)
	if !absolute {
		from = seriesTime(f.Origin, false, f.Step) + ", times from the start of the series"
	}
	fmt.Fprintf(w, "%s: %s forecast from %s", name, f.Model, from)
	if f.Note != "" {
		fmt.Fprintf(w, " (%s)", f.Note)
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	// The 80% band and the median, and -quantile's column where it is
	// another.
	qs := []float64{0.1, 0.5, 0.9}
	if !slices.Contains(qs, q) {
		qs = append(qs, q)
		slices.Sort(qs)
	}
	cols := make([][]float64, len(qs))
	fmt.Fprint(tw, "time\t")
	for i, l := range qs {
		cols[i] = f.Quantile(l)
		fmt.Fprintf(tw, "p%g\t", math.Round(l*1000)/10)
	}
	fmt.Fprintln(tw)
	for k := range cols[0] {
		fmt.Fprintf(tw, "%s\t", seriesTime(f.Origin.Add(time.Duration(k)*f.Step), absolute, f.Step))
		for _, c := range cols {
			fmt.Fprintf(tw, "%.1f\t", c[k])
		}
		fmt.Fprintln(tw)
	}
	tw.Flush()
}

// seriesTime formats t, a time of a series in steps of step: a date and
// time for a series with dates (absolute), else the days and time since
// the series' start, which is the zero time ("+3d 04:10"); with seconds
// where the step has them.
func seriesTime(t time.Time, absolute bool, step time.Duration) string {
	clock := "15:04"
	if step%time.Minute != 0 {
		clock = "15:04:05"
	}
	if absolute {
		return t.UTC().Format("2006-01-02 " + clock)
	}
	off := t.Sub(time.Time{})
	return fmt.Sprintf("+%dd %s", off/forecast.Day, time.Time{}.Add(off%forecast.Day).Format(clock))
}

// whereFlag is a repeated -where column=value.
type whereFlag []trace.Where

func (f *whereFlag) String() string {
	var parts []string
	for _, w := range *f {
		parts = append(parts, w.Column+"="+w.Value)
	}
	return strings.Join(parts, ",")
}

func (f *whereFlag) Set(s string) error {
	w, err := trace.ParseWhere(s)
	if err != nil {
		return err
	}
	*f = append(*f, w)
	return nil
}
