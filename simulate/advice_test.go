package simulate

import (
	"bytes"
	"math"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/fleetcast/autoscaler/trace"
)

// TestAdviceCheck: the check weighs the advised reservation against every
// fixed size from the configured one to the trace's peak, committed at the
// same moment. Three 8-GPU nodes busy for 10 days: the advice, after 2
// days, reserves all three, which is the best fixed size too; no
// commitment (the configured single node) costs more.
func TestAdviceCheck(t *testing.T) {
	cfg, tr := threeBusyNodes()
	c, err := RunAdviceCheck(cfg, tr, Options{AdviceAfter: 2 * 24 * time.Hour, Interval: 10 * time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	if len(c.Commitments) != 1 || c.Commitments[0].Nodes != 3 || c.Commitments[0].Day < 2 || c.Commitments[0].Day > 2.01 {
		t.Fatalf("commitments %+v; want 3 nodes on day 2", c.Commitments)
	}
	if len(c.Fixed) != 3 || c.Fixed[0].Nodes != 1 || c.Fixed[2].Nodes != 3 || c.Best != 2 {
		t.Fatalf("fixed %+v, best %d; want 1 to 3 nodes, the best the last", c.Fixed, c.Best)
	}
	// $4/h reserved against $8/h on demand: from day 2, each of the two
	// more reserved nodes saves $4/h (an hour or so less: the burst nodes
	// they replace were launched a lead time after the start).
	if f := c.Fixed; math.Abs(f[0].CostUSD-f[2].CostUSD-2*4*192) > 2*4*1.5 || !near(c.Advised.CostUSD, f[2].CostUSD) {
		t.Errorf("fixed 1 node $%.0f, 3 nodes $%.0f, advised $%.0f; want the advice at 3 nodes' cost, $%d below 1 node's",
			f[0].CostUSD, f[2].CostUSD, c.Advised.CostUSD, 2*4*192)
	}
	if !c.Passed() || !near(c.VsBest, 1) || c.VsNone >= 1 {
		t.Errorf("vs best %.3f, vs none %.3f, passed %v; want 1, below 1, passed", c.VsBest, c.VsNone, c.Passed())
	}
	var out bytes.Buffer
	if err := c.WriteTable(&out); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"advised: 24 GPUs on day 2", "vs the best fixed reservation (24 GPUs): 1.000x", "holds", "none", "best"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("table lacks %q:\n%s", want, out.String())
		}
	}
	if err := c.Plot(filepath.Join(t.TempDir(), "advice.svg")); err != nil {
		t.Error(err)
	}
	// A check that misses says so: the advice at twice the best's cost.
	c.VsBest = 2
	out.Reset()
	c.WriteTable(&out)
	if c.Passed() || !strings.Contains(out.String(), "misses") {
		t.Errorf("a miss reads:\n%s", out.String())
	}
}

// TestAdviceCheckRefuses: no reserved pool to advise on, or a first
// commitment at or after the trace's end, is an error naming it.
func TestAdviceCheckRefuses(t *testing.T) {
	tr := jobsTrace(trace.Job{GPUs: 8, Duration: 3 * 24 * time.Hour})
	for _, tc := range []struct {
		name string
		cfg  func() *Options
		res  bool
		want string
	}{
		{"no reserved pool", func() *Options { return &Options{AdviceAfter: 24 * time.Hour} }, false, "needs a reserved pool"},
		{"after the end", func() *Options { return &Options{AdviceAfter: 3 * 24 * time.Hour} }, true, "at or after the trace's end"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := onePool()
			if tc.res {
				cfg = withReservation(1)
			}
			if _, err := RunAdviceCheck(cfg, tr, *tc.cfg()); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v; want %q", err, tc.want)
			}
		})
	}
}
