package main

import (
	"fmt"
	"io"
	"math"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/fleetcast/autoscaler/forecast"
	"github.com/fleetcast/autoscaler/internal/cli"
	"github.com/fleetcast/autoscaler/trace"
)

// tierBacktest is forecast -backtest -tiers: the series file's columns,
// one per tier in rank order, each that tier's own demand.
type tierBacktest struct {
	path          string
	columns       []string
	opt           trace.Options // without ValueColumns
	step, horizon time.Duration
	shareOver     time.Duration            // 0: one step
	backtest      forecast.BacktestOptions // without Season and Horizon
	json          bool
}

// tierBacktestJSON is forecast -backtest -tiers -json's report.
type tierBacktestJSON struct {
	backtestHead
	ShareS float64              `json:"share_over_s"`
	Tiers  []forecast.TierScore `json:"tiers"`
}

// runTierBacktest backtests the two ways to forecast tiers' demand
// (forecast.BacktestShares) on the columns of one series file: each
// tier's demand summed with the higher tiers', as the controller records
// it.
func runTierBacktest(e *env, tb tierBacktest) int {
	var cum [][]float64
	var name string
	step := tb.step
	for k, col := range tb.columns {
		opt := tb.opt
		opt.ValueColumns = []string{col}
		raw, s, st, code := openResampled(e, tb.path, opt, step, fmt.Sprintf("forecast: tier %q:", col))
		if code != cli.ExitOK {
			return code
		}
		if k == 0 {
			skipped(e, raw)
		}
		step = st
		if k > 0 {
			prev := cum[k-1]
			if len(prev) != len(s.Values) {
				fmt.Fprintf(e.stderr, "forecast: tier %q has %d steps, tier %q %d\n", col, len(s.Values), tb.columns[0], len(prev))
				return cli.ExitError
			}
			for i := range s.Values {
				s.Values[i] += prev[i]
			}
		}
		cum, name = append(cum, s.Values), raw.Name
	}
	h := int((tb.horizon + step - 1) / step)
	over := max(1, int((tb.shareOver+step-1)/step))
	opt := tb.backtest
	opt.Season, opt.Horizon = int(forecast.Day/step), h
	scores, origins, err := forecast.BacktestShares(tb.columns, cum, over, forecast.DefaultModels(), opt)
	if err != nil {
		fmt.Fprintln(e.stderr, "forecast:", err)
		return cli.ExitError
	}
	for _, t := range scores {
		if math.IsNaN(t.Cumulative.MASE) || math.IsNaN(t.Share.MASE) {
			fmt.Fprintf(e.stderr, "forecast: tier %q: no model forecast at any origin\n", t.Tier)
			return cli.ExitError
		}
	}
	out := tierBacktestJSON{backtestHead: backtestHead{Series: name, StepS: step.Seconds(), HorizonS: (time.Duration(h) * step).Seconds(), Origins: origins},
		ShareS: (time.Duration(over) * step).Seconds(), Tiers: scores}
	if tb.json {
		return writeJSON(e, out)
	}
	writeTierBacktest(e.stdout, out)
	return cli.ExitOK
}

func writeTierBacktest(w io.Writer, out tierBacktestJSON) {
	fmt.Fprintf(w, "%s: %d origins, step %v, horizon %v; each tier's demand with the higher tiers' (%s), forecast by itself\n(as the controller does) and as its share of the total over the %v before each origin\n\n",
		out.Series, out.Origins, time.Duration(out.StepS)*time.Second, time.Duration(out.HorizonS)*time.Second, strings.Join(tierNames(out.Tiers), ", "),
		time.Duration(out.ShareS)*time.Second)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "tier\tMASE itself\tMASE share\tpinball itself\tpinball share\t80% itself\t80% share\tbetter\t")
	for _, t := range out.Tiers {
		c, s := t.Cumulative, t.Share
		better := "share"
		switch {
		case c.Pinball == s.Pinball:
			better = "alike"
		case c.Pinball < s.Pinball:
			better = "itself"
		}
		fmt.Fprintf(tw, "%s\t%.3f\t%.3f\t%.3f\t%.3f\t%.2f\t%.2f\t%s\t\n", t.Tier, c.MASE, s.MASE, c.Pinball, s.Pinball, c.Coverage80, s.Coverage80, better)
	}
	tw.Flush()
	fmt.Fprintln(w, "\nbetter: by the pinball loss at the quantile, what the planner's level reads; the last tier is the total, alike both ways.")
}

func tierNames(ts []forecast.TierScore) []string {
	out := make([]string, len(ts))
	for i, t := range ts {
		out[i] = t.Tier
	}
	return out
}
