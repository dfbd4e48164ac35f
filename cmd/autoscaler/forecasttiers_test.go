package main

import (
	"encoding/json"
	"math"
	"strings"
	"testing"

	"github.com/fleetcast/autoscaler/internal/cli"
)

// TestForecastTiers: -backtest -tiers scores each tier's demand with the
// higher tiers' two ways; the last tier's is the total's, which the plain
// backtest of the summed columns scores alike.
func TestForecastTiers(t *testing.T) {
	series := writeFile(t, "tiers.csv", daysCSV(21))
	code, out, errOut := cmdline("forecast", "-series", series, "-tiers", "pending,running", "-horizon", "1h", "-backtest", "-share-over", "1h", "-json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	var rep tierBacktestJSON
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("-json does not parse: %v\n%s", err, out)
	}
	if rep.Series != "tiers.csv" || rep.StepS != 600 || rep.HorizonS != 3600 || rep.ShareS != 3600 || rep.Origins != 30 || len(rep.Tiers) != 2 ||
		rep.Tiers[0].Tier != "pending" || rep.Tiers[1].Tier != "running" {
		t.Fatalf("report %+v", rep)
	}
	total := rep.Tiers[1]
	if total.Cumulative != total.Share {
		t.Errorf("the total scores %+v by itself, %+v as its own share", total.Cumulative, total.Share)
	}
	code, out, errOut = cmdline("forecast", "-series", series, "-value-column", "pending+running", "-horizon", "1h", "-backtest", "-json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	var plain backtestJSON
	if err := json.Unmarshal([]byte(out), &plain); err != nil {
		t.Fatal(err)
	}
	auto := plain.Models[len(plain.Models)-1]
	if auto.Model != "auto" || math.Abs(auto.MASE-total.Cumulative.MASE) > 1e-12 || math.Abs(auto.Pinball-total.Cumulative.Pinball) > 1e-12 {
		t.Errorf("the total: %+v; the summed columns' backtest: %+v", total.Cumulative, auto)
	}

	code, out, errOut = cmdline("forecast", "-series", series, "-tiers", "pending,running", "-horizon", "1h", "-backtest")
	if code != 0 || !strings.Contains(out, "tiers.csv: 30 origins, step 10m0s, horizon 1h0m0s; each tier's demand with the higher tiers' (pending, running)") ||
		!strings.Contains(out, "over the 10m0s before each origin") || !strings.Contains(out, "tier  MASE itself  MASE share") ||
		!strings.Contains(out, "running") || !strings.Contains(out, "alike") {
		t.Errorf("exit %d: %s\n%s", code, out, errOut)
	}
	for _, tt := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"-tiers", "pending,running"}, cli.ExitUsage, "-tiers needs -backtest"},
		{[]string{"-tiers", "pending,running", "-backtest", "-value-column", "running"}, cli.ExitUsage, "takes no -value-column"},
		{[]string{"-tiers", "running", "-backtest"}, cli.ExitUsage, `-tiers "running": want two or more value columns`},
		{[]string{"-tiers", "pending,,running", "-backtest"}, cli.ExitUsage, "want two or more value columns"},
		{[]string{"-tiers", "pending,gold", "-backtest"}, cli.ExitError, `forecast: tier "gold": `},
		{[]string{"-backtest", "-share-over", "1h", "-value-column", "running"}, cli.ExitUsage, "-share-over needs -tiers"},
	} {
		args := append([]string{"forecast", "-series", series}, tt.args...)
		if code, _, errOut := cmdline(args...); code != tt.code || !strings.Contains(errOut, tt.want) {
			t.Errorf("%v: exit %d, %q; want %d, %q", tt.args, code, errOut, tt.code, tt.want)
		}
	}
}
