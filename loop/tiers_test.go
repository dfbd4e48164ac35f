package loop

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/fleetcast/autoscaler/fleet"
	"github.com/fleetcast/autoscaler/planner"
	"github.com/fleetcast/autoscaler/state"
)

var tiersForTest = []fleet.Tier{
	{Name: "critical", Rank: 1, WaitValuePerGPUHour: 500},
	{Name: "standard", Rank: 2, WaitValuePerGPUHour: 50, Default: true},
	{Name: "best_effort", Rank: 3},
}

// tieredState is a node running a critical job (2 GPUs), a standard one
// (4) and a best-effort one (1), with 8 critical GPUs pending and 2 of no
// tier (the default's).
func tieredState(now time.Time) *fleet.State {
	return &fleet.State{CapturedAt: now, PendingGPUs: 10, PendingTiers: []fleet.TierGPUs{{Tier: "critical", GPUs: 8}},
		Nodes: []fleet.Node{{ID: "n1", Pool: "od", State: fleet.Ready, LastReport: now, Jobs: []fleet.Job{
			{ID: "a", GPUs: 2, Tier: "critical"}, {ID: "b", GPUs: 4, Tier: "standard"}, {ID: "c", GPUs: 1, Tier: "best_effort"}}}}}
}

// TestTierDemand: each tier's demand is its own and the higher tiers',
// running and pending; the last is all of it, as Demand counts it.
func TestTierDemand(t *testing.T) {
	now := time.Date(2026, 3, 2, 9, 0, 0, 0, time.UTC)
	pools := []fleet.Pool{{Name: "od", GPUsPerNode: 8, Capacity: fleet.OnDemand}}
	st := tieredState(now)
	got := TierDemand(pools, tiersForTest, st, now)
	if want := []float64{10, 16, 17}; !slices.Equal(got, want) {
		t.Errorf("tier demand %v, want %v", got, want)
	}
	if d := Demand(pools, st, 0, now); d != got[2] {
		t.Errorf("demand %v, the last tier's %v", d, got[2])
	}
	if TierDemand(pools, nil, st, now) != nil {
		t.Error("tier demand without tiers")
	}
}

// TestTierHistories: a loop with tiers records each tier's cumulative
// demand but the last's in the books, and a loop made afresh (a restarted
// controller) forecasts from what they hold.
func TestTierHistories(t *testing.T) {
	now := time.Date(2026, 3, 2, 9, 0, 0, 0, time.UTC)
	set := fleet.DefaultSettings()
	set.Pools = []fleet.Pool{{Name: "od", GPUsPerNode: 8, Capacity: fleet.OnDemand, PricePerHour: 8, LeadTime: 10 * time.Minute, Max: 10}}
	set.Tiers = slices.Clone(tiersForTest) // changed below
	books := &state.Memory{}
	l, err := New(Options{Settings: &set, Books: books})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		at := now.Add(time.Duration(i) * set.Forecast.Step)
		if err := l.record(at, Observation{State: tieredState(at)}); err != nil {
			t.Fatal(err)
		}
	}
	for name, want := range map[string]float64{"critical": 10, "standard": 16} {
		got, err := books.Demand(TierSeries(name), now)
		if err != nil || len(got) != 3 || got[2].Value != want {
			t.Errorf("%s: %v %v, want 3 samples of %v", name, got, err, want)
		}
	}
	if got, _ := books.Demand(TierSeries("best_effort"), now); len(got) != 0 {
		t.Errorf("the last tier's series recorded apart: %v", got)
	}
	if fc := l.tierForecasts(now.Add(25 * time.Minute)); len(fc) != 2 {
		t.Errorf("%d tier forecasts, want 2", len(fc))
	}
	again, err := New(Options{Settings: &set, Books: books})
	if err != nil {
		t.Fatal(err)
	}
	at := now.Add(3 * set.Forecast.Step)
	if err := again.record(at, Observation{State: tieredState(at)}); err != nil {
		t.Fatal(err)
	}
	if h := again.tiers[0].hist.current(); len(h.Values) != 4 || h.Values[0] != 10 {
		t.Errorf("a fresh loop's critical history %v, want the 3 recorded steps and this one", h.Values)
	}
	// Scale-in's recent peak reads standard's: the lowest-ranked tier
	// worth something, above best_effort.
	if h := again.peakHistory(); len(h.Values) != 4 || h.Values[3] != 16 {
		t.Errorf("peak history %v, want standard's 4 steps of 16", h.Values)
	}
	set.Tiers[2].WaitValuePerGPUHour = 5 // the last tier worth something: the whole demand's
	if h := again.peakHistory(); h.Step != 0 {
		t.Errorf("peak history %v with every tier worth something, want none", h)
	}
}

// TestPeakHistoryPlanned: a loop with tiers gives the planner the tiers
// worth something's recorded demand for scale-in's recent peak: a
// best-effort burst in the whole demand 5 minutes ago keeps no idle node,
// while the same burst of standard jobs keeps them all.
func TestPeakHistoryPlanned(t *testing.T) {
	for _, tt := range []struct {
		name     string
		standard float64 // the tiers worth something's demand 5 minutes ago
		drains   int
	}{
		{"a best-effort burst", 0, 2},
		{"a standard burst", 32, 0},
	} {
		set := testSettings()
		set.Tiers = slices.Clone(tiersForTest)
		books := &state.Memory{}
		for _, s := range []struct {
			series string
			ago    time.Duration
			v      float64
		}{
			{DemandSeries, 15 * time.Minute, 0}, {DemandSeries, 5 * time.Minute, 32},
			{TierSeries("critical"), 15 * time.Minute, 0}, {TierSeries("critical"), 5 * time.Minute, 0},
			{TierSeries("standard"), 15 * time.Minute, 0}, {TierSeries("standard"), 5 * time.Minute, tt.standard},
		} {
			if err := books.AppendDemand(s.series, state.Sample{Time: t0.Add(-s.ago), Value: s.v}); err != nil {
				t.Fatal(err)
			}
		}
		l, err := New(Options{Settings: set, Books: books, Advise: true, DryRun: true})
		if err != nil {
			t.Fatal(err)
		}
		f := &scripted{t: t, books: books, st: fleet.State{Pools: []fleet.PoolStatus{{Name: "od"}}}}
		for _, id := range []string{"o1", "o2", "o3", "o4"} {
			f.st.Nodes = append(f.st.Nodes, fleet.Node{ID: id, Pool: "od", State: fleet.Ready, LastReport: t0, IdleSince: t0.Add(-time.Hour),
				LaunchedAt: t0.Add(-2 * time.Hour)})
		}
		r, err := l.Cycle(context.Background(), f, t0)
		if err != nil {
			t.Fatal(err)
		}
		if got := r.Plan.Counts()[planner.Drain]; got != tt.drains {
			t.Errorf("%s: %d drains, want %d: %v", tt.name, got, tt.drains, r.Plan.Actions)
		}
	}
}
