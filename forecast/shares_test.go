package forecast

import (
	"math"
	"strings"
	"testing"
)

// TestBacktestSharesConstantShare: a tier that is always 30% of the total
// is forecast as well by its share as the total is by itself, and its own
// forecast, linear in the series, scores the same: MASE and pinball are
// scale-free.
func TestBacktestSharesConstantShare(t *testing.T) {
	total := structured("noise", 5).Values
	part := make([]float64, len(total))
	for i, v := range total {
		part[i] = 0.3 * v
	}
	opt := BacktestOptions{Season: 144, Horizon: 6, Origins: 10}
	got, origins, err := BacktestShares([]string{"critical", "all"}, [][]float64{part, total}, 144, []Model{SeasonalNaiveModel{Days: 1}}, opt)
	if err != nil || origins != 10 || len(got) != 2 {
		t.Fatalf("BacktestShares = %+v, %d origins, %v", got, origins, err)
	}
	tot := got[1].Cumulative
	for _, s := range []Score{got[0].Cumulative, got[0].Share, got[1].Share} {
		if math.Abs(s.MASE-tot.MASE) > 1e-9 || math.Abs(s.Pinball-tot.Pinball) > 1e-9 || s.Coverage80 != tot.Coverage80 {
			t.Fatalf("scores %+v, want the total's %+v", s, tot)
		}
	}
	if got[0].Tier != "critical" || got[0].Share.Model != AutoName {
		t.Fatalf("names %+v", got[0])
	}
}

// TestBacktestSharesByHand: with seasonal naive forecasts, the share
// forecast's MASE at each origin is that of yesterday's total times the
// tier's share of the 6 hours before the origin, computed here by hand.
func TestBacktestSharesByHand(t *testing.T) {
	const season, h, days = 144, 6, 14
	total := structured("noise", 7).Values
	part := structured("trend", 8).Values
	for i := range part {
		part[i] = min(part[i]/3, total[i])
	}
	got, _, err := BacktestShares([]string{"a", "b"}, [][]float64{part, total}, 36, []Model{SeasonalNaiveModel{Days: 1}},
		BacktestOptions{Season: season, Horizon: h, TrainDays: days})
	if err != nil {
		t.Fatal(err)
	}
	ntrain := days * season
	var sum float64
	os := spread(max(ntrain, int(math.Round(float64(len(total))*0.6))), len(total)-h, 30)
	for _, o := range os {
		var a, b float64
		for i := o - 36; i < o; i++ {
			a += part[i]
			b += total[i]
		}
		scale := naiveScale(part[o-ntrain:o], season)
		e := 0.0
		for k := range h {
			e += math.Abs(part[o+k] - a/b*total[o+k-season])
		}
		sum += e / h / scale
	}
	if want := sum / float64(len(os)); math.Abs(got[0].Share.MASE-want) > 1e-9 {
		t.Fatalf("share MASE %v, want %v", got[0].Share.MASE, want)
	}
	if got[0].Cumulative.MASE == got[0].Share.MASE {
		t.Fatalf("the two ways score alike (%v) on a tier whose share drifts", got[0].Share.MASE)
	}
}

func TestBacktestSharesErrors(t *testing.T) {
	y := structured("noise", 1).Values
	bad := append([]float64(nil), y...)
	bad[3] = math.NaN()
	m := []Model{SeasonalNaiveModel{Days: 1}}
	opt := BacktestOptions{Season: 144, Horizon: 6}
	for _, tt := range []struct {
		names []string
		cum   [][]float64
		steps int
		want  string
	}{
		{[]string{"a"}, [][]float64{y, y}, 1, "1 tier name(s) for 2 series"},
		{nil, nil, 1, "0 tier name(s) for 0 series"},
		{[]string{"a", "b"}, [][]float64{y[:100], y}, 1, `tier "b" has 3024 steps, tier "a" 100`},
		{[]string{"a", "b"}, [][]float64{y, bad}, 1, `tier "b": value 3 is NaN`},
		{[]string{"a", "b"}, [][]float64{y[:200], y[:200]}, 1, "too few"},
		{[]string{"a", "b"}, [][]float64{y, y}, 0, "a share over 0 steps: want 1 or more"},
	} {
		if _, _, err := BacktestShares(tt.names, tt.cum, tt.steps, m, opt); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("BacktestShares(%v) = %v, want %q", tt.names, err, tt.want)
		}
	}
}
