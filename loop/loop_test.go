package loop

import (
	"context"
	"errors"
	"math"
	"slices"
	"testing"
	"time"

	"github.com/fleetcast/autoscaler/fleet"
	"github.com/fleetcast/autoscaler/forecast"
	"github.com/fleetcast/autoscaler/planner"
	"github.com/fleetcast/autoscaler/providers"
	"github.com/fleetcast/autoscaler/state"
)

var t0 = time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)

// scripted is a Fleet of one pool whose state the test sets, and which
// records what it is asked to do and answers launches with launchErr.
// It also checks the loop's order: a drain is in the books before the
// fleet hears of it, a cancelled one out of them.
type scripted struct {
	t         *testing.T
	books     *state.Memory
	st        fleet.State
	demand    float64
	launchErr error
	followUp  error // the terminate's bookkeeping error
	// gone are the nodes Commit reports gone; commitErr its error.
	gone      []string
	commitErr error
	calls     []string
}

func (s *scripted) Commit(ctx context.Context, now time.Time) ([]string, error) {
	s.calls = append(s.calls, "commit")
	return s.gone, s.commitErr
}

func (s *scripted) Observe(ctx context.Context, now time.Time) (Observation, error) {
	st := s.st
	st.CapturedAt = now
	st.Pools = slices.Clone(s.st.Pools)
	return Observation{State: &st, InUse: s.demand}, nil
}

func (s *scripted) Launch(ctx context.Context, pool string, count int) error {
	s.calls = append(s.calls, "launch "+pool)
	return s.launchErr
}

func (s *scripted) Terminate(ctx context.Context, now time.Time, a *planner.Action) error {
	s.calls = append(s.calls, "terminate "+a.Node)
	return s.followUp
}

func (s *scripted) Drain(ctx context.Context, d state.Drain) error {
	if !hasDrain(s.books, d.Node) {
		s.t.Errorf("drain of %s: not in the books before the fleet hears of it", d.Node)
	}
	s.calls = append(s.calls, "drain "+d.Node)
	return nil
}

func (s *scripted) CancelDrain(ctx context.Context, now time.Time, a *planner.Action) error {
	if hasDrain(s.books, a.Node) {
		s.t.Errorf("cancel of %s: still in the books when the fleet hears of it", a.Node)
	}
	s.calls = append(s.calls, "cancel "+a.Node)
	return nil
}

// hasDrain says whether books hold a drain of node in progress.
func hasDrain(books *state.Memory, node string) bool {
	ds, _ := books.Drains()
	return slices.ContainsFunc(ds, func(d state.Drain) bool { return d.Node == node })
}

// testSettings are the defaults with one on-demand pool.
func testSettings() *fleet.Settings {
	s := fleet.DefaultSettings()
	s.Pools = []fleet.Pool{{Name: "od", Provider: "sim", InstanceType: "x", GPUsPerNode: 8, Capacity: fleet.OnDemand,
		PricePerHour: 8, LeadTime: 5 * time.Minute, ProvisionTimeout: 15 * time.Minute, Max: 100}}
	s.Limits.MaxGPUs = 10000
	return &s
}

func newScripted(t *testing.T, dryRun bool) (*Loop, *scripted) {
	t.Helper()
	books := &state.Memory{}
	l, err := New(Options{Settings: testSettings(), Books: books, DryRun: dryRun})
	if err != nil {
		t.Fatal(err)
	}
	return l, &scripted{t: t, books: books, st: fleet.State{Pools: []fleet.PoolStatus{{Name: "od"}}}}
}

// TestLaunchBooks: a refused launch backs its pool off, longer each time
// in a row (providers.Backoff), and the next plan sees it; a launch that
// succeeds ends the back-off. A dry run asks nothing of the fleet.
func TestLaunchBooks(t *testing.T) {
	l, f := newScripted(t, false)
	ctx := context.Background()
	f.st.PendingGPUs, f.demand = 16, 16
	f.launchErr = &providers.InsufficientCapacityError{Pool: "od", Err: errors.New("no GPUs")}
	now := t0
	r, err := l.Cycle(ctx, f, now)
	if err != nil || len(r.Outcomes) != 1 || r.Outcomes[0].Result != Refused || r.Plan.Actions[0].Kind != planner.Launch {
		t.Fatalf("outcomes %+v, %v; want one launch, refused", r.Outcomes, err)
	}
	bs, _ := f.books.Backoffs()
	if len(bs) != 1 || bs[0].Failures != 1 || !bs[0].Until.Equal(now.Add(providers.Backoff(1))) {
		t.Fatalf("back-offs %+v; want od, 1 failure, until %v", bs, now.Add(providers.Backoff(1)))
	}
	// Backed off: the next plan does not launch there, and says why.
	now = now.Add(time.Minute)
	r, _ = l.Cycle(ctx, f, now)
	if ps := r.State.Pools[0]; !ps.BackoffUntil.Equal(bs[0].Until) || ps.BackoffReason == "" {
		t.Fatalf("pool status %+v; want the back-off", ps)
	}
	if n := r.Plan.Counts()[planner.Launch]; n != 0 {
		t.Fatalf("%d launches while backed off", n)
	}
	// Once it has passed, a second refusal backs off longer.
	now = bs[0].Until
	l.Cycle(ctx, f, now)
	bs, _ = f.books.Backoffs()
	if len(bs) != 1 || bs[0].Failures != 2 || !bs[0].Until.Equal(now.Add(providers.Backoff(2))) {
		t.Fatalf("back-offs %+v; want 2 failures, until %v", bs, now.Add(providers.Backoff(2)))
	}
	refused := now
	// A launch that goes through ends it, but the refusal is remembered,
	// with what the pool held since, and its failures in a row until a node
	// comes up (a cloud that takes launches it then cannot make backs off
	// longer each time).
	f.launchErr = nil
	now = bs[0].Until
	r, _ = l.Cycle(ctx, f, now)
	if bs, _ = f.books.Backoffs(); len(bs) != 1 || bs[0].Failures != 2 || !bs[0].Until.IsZero() || !bs[0].Refused.Equal(refused) || r.Outcomes[0].Result != Done {
		t.Fatalf("back-offs %+v, outcomes %+v after a launch; want the refusal at %v remembered, 2 failures, done", bs, r.Outcomes, refused)
	}
	f.st.PendingGPUs, f.demand = 0, 0
	f.st.Nodes = []fleet.Node{{ID: "i-1", Pool: "od", State: fleet.Ready, LaunchedAt: now}, {ID: "i-2", Pool: "od", State: fleet.Ready, LaunchedAt: now}}
	now = now.Add(time.Minute)
	r, _ = l.Cycle(ctx, f, now)
	if ps := r.State.Pools[0]; !ps.Refused || ps.HeldSinceRefusal != 2 || !ps.BackoffUntil.IsZero() {
		t.Fatalf("pool status %+v; want refused, held 2 since, not backed off", ps)
	}
	if bs, _ = f.books.Backoffs(); len(bs) != 1 || bs[0].Failures != 0 {
		t.Fatalf("back-offs %+v once nodes came up; want no failures in a row", bs)
	}
	f.st.Nodes = f.st.Nodes[:1]
	now = now.Add(time.Minute)
	if r, _ = l.Cycle(ctx, f, now); r.State.Pools[0].HeldSinceRefusal != 2 {
		t.Fatalf("held since refusal %d after a node went; want still 2", r.State.Pools[0].HeldSinceRefusal)
	}
	// Forgotten RefusalMemory after the refusal.
	now = refused.Add(RefusalMemory)
	r, _ = l.Cycle(ctx, f, now)
	if bs, _ = f.books.Backoffs(); len(bs) != 0 || r.State.Pools[0].Refused {
		t.Fatalf("back-offs %+v, status %+v %v after the refusal memory; want none, not refused", bs, r.State.Pools[0], RefusalMemory)
	}

	d, df := newScripted(t, true)
	df.st.PendingGPUs, df.demand = 16, 16
	r, err = d.Cycle(ctx, df, t0)
	if err != nil || !slices.Equal(df.calls, []string{"commit"}) || len(r.Outcomes) != 1 || r.Outcomes[0].Result != DryRun {
		t.Fatalf("dry run: calls %v, outcomes %+v, %v; want the commit alone (which writes nothing in a dry run), one dry run", df.calls, r.Outcomes, err)
	}
}

// TestBusyIsNoRefusal: a pool backed off for a busy group (no lack of
// capacity) is not counted as refused, and a launch ends its back-off
// with nothing remembered; after a refusal, only nodes that came up count
// as what the pool held, not launches it may still fail to make.
func TestBusyIsNoRefusal(t *testing.T) {
	l, f := newScripted(t, false)
	ctx := context.Background()
	f.st.PendingGPUs, f.demand = 16, 16
	f.launchErr = &providers.GroupBusyError{Pool: "od", Reason: "an instance refresh"}
	now := t0
	l.Cycle(ctx, f, now)
	bs, _ := f.books.Backoffs()
	if len(bs) != 1 || !bs[0].Refused.IsZero() {
		t.Fatalf("back-offs %+v; want one, not a refusal", bs)
	}
	now = bs[0].Until
	if r, _ := l.Cycle(ctx, f, now); r.State.Pools[0].Refused {
		t.Fatalf("pool status %+v; want not refused", r.State.Pools[0])
	}
	f.launchErr = nil
	now = now.Add(providers.Backoff(2))
	l.Cycle(ctx, f, now)
	if bs, _ := f.books.Backoffs(); len(bs) != 0 {
		t.Fatalf("back-offs %+v after a launch; want none", bs)
	}

	f.launchErr = &providers.InsufficientCapacityError{Pool: "od", Err: errors.New("no GPUs")}
	now = now.Add(time.Hour)
	l.Cycle(ctx, f, now)
	f.st.PendingGPUs, f.demand = 0, 0
	f.st.Nodes = []fleet.Node{{ID: "i-1", Pool: "od", State: fleet.Ready, LaunchedAt: now},
		{ID: "i-2", Pool: "od", State: fleet.Pending, LaunchedAt: now, LaunchFailing: "ZONE_RESOURCE_POOL_EXHAUSTED"}}
	now = now.Add(time.Minute)
	if r, _ := l.Cycle(ctx, f, now); !r.State.Pools[0].Refused || r.State.Pools[0].HeldSinceRefusal != 1 {
		t.Fatalf("pool status %+v; want refused, held 1 (the node that came up)", r.State.Pools[0])
	}
}

// TestStockoutBacksOffLonger: a cloud that takes each launch and then
// cannot make it (a managed instance group in a stockout: the launch
// succeeds, the node fails at once) backs the pool off longer each time.
func TestStockoutBacksOffLonger(t *testing.T) {
	l, f := newScripted(t, false)
	now := t0
	for i := 1; i <= 3; i++ {
		if err := l.launched("od"); err != nil {
			t.Fatal(err)
		}
		plan := planner.Plan{Actions: []planner.Action{{Kind: planner.Terminate, Pool: "od", Node: "a", BackOff: true, Reason: "the cloud is failing to create it"}}}
		if _, err := l.act(context.Background(), f, now, &plan); err != nil {
			t.Fatal(err)
		}
		bs, _ := f.books.Backoffs()
		if len(bs) != 1 || bs[0].Failures != i || !bs[0].Until.Equal(now.Add(providers.Backoff(i))) {
			t.Fatalf("after stockout %d: back-offs %+v; want %d failures, until %v", i, bs, i, now.Add(providers.Backoff(i)))
		}
		now = bs[0].Until
	}
}

// TestBackOffOncePerCycle: two launches of a pool failing in one cycle
// back it off once, as one failure.
func TestBackOffOncePerCycle(t *testing.T) {
	l, f := newScripted(t, false)
	plan := planner.Plan{Actions: []planner.Action{
		{Kind: planner.Terminate, Pool: "od", Node: "a", BackOff: true, Reason: "the cloud is failing to create it"},
		{Kind: planner.Terminate, Pool: "od", Node: "b", BackOff: true, Reason: "the cloud is failing to create it"},
	}}
	if _, err := l.act(context.Background(), f, t0, &plan); err != nil {
		t.Fatal(err)
	}
	if bs, _ := f.books.Backoffs(); len(bs) != 1 || bs[0].Failures != 1 || !bs[0].Until.Equal(t0.Add(providers.Backoff(1))) || !bs[0].Refused.Equal(t0) {
		t.Fatalf("back-offs %+v; want one failure, refused at %v", bs, t0)
	}
}

// TestActBooks: each kind of action keeps its books, and what became of
// it is its outcome: a failure Failed, a failure after it was done Done
// with the error; a drain is counted in its pool's recent drains for the
// scale-in window.
func TestActBooks(t *testing.T) {
	l, f := newScripted(t, false)
	ctx := context.Background()
	plan := planner.Plan{Actions: []planner.Action{
		{Kind: planner.Drain, Pool: "od", Node: "a"},
		{Kind: planner.Drain, Pool: "od", Node: "b"},
		{Kind: planner.CancelDrain, Pool: "od", Node: "b"},
		{Kind: planner.Terminate, Pool: "od", Node: "c", BackOff: true, Reason: "missed its deadline"},
	}}
	if err := f.books.PutDrain(state.Drain{Node: "c", Pool: "od", Started: t0.Add(-time.Hour), Deadline: t0}); err != nil {
		t.Fatal(err)
	}
	out, err := l.act(ctx, f, t0, &plan)
	if err != nil || !slices.Equal(f.calls, []string{"drain a", "drain b", "cancel b", "terminate c"}) {
		t.Fatalf("calls %v, %v", f.calls, err)
	}
	for i, o := range out {
		if o.Result != Done || o.Err != nil {
			t.Fatalf("outcome %d: %+v; want done", i, o)
		}
	}
	if ds, _ := f.books.Drains(); len(ds) != 1 || ds[0].Node != "a" {
		t.Fatalf("drains %+v; want a only (b cancelled, c terminated)", ds)
	}
	if bs, _ := f.books.Backoffs(); len(bs) != 1 || bs[0].Reason != "missed its deadline" {
		t.Fatalf("back-offs %+v; want od's, for the missed deadline", bs)
	}
	// The drains begun count within the window, and not after it.
	st := fleet.State{Pools: []fleet.PoolStatus{{Name: "od"}, {Name: "other"}}}
	if err := l.annotate(t0.Add(time.Minute), &st); err != nil || len(st.Pools[0].RecentDrains) != 2 || len(st.Pools[1].RecentDrains) != 0 {
		t.Fatalf("recent drains %v, %v; want 2 in od", st.Pools, err)
	}
	if l.annotate(t0.Add(l.o.Settings.Limits.ScaleInWindow+time.Second), &st); len(st.Pools[0].RecentDrains) != 0 {
		t.Fatalf("recent drains %v past the window; want none", st.Pools[0].RecentDrains)
	}

	// A terminate done whose bookkeeping failed is done, with the error,
	// and backs its pool off (the node never came up); one that failed is
	// failed, and backs nothing off.
	for _, tt := range []struct {
		err  error
		want Result
	}{{&FollowUpError{Err: errors.New("disk full")}, Done}, {errors.New("cloud said no"), Failed}} {
		l, f := newScripted(t, false)
		f.followUp = tt.err
		out, err := l.act(ctx, f, t0, &planner.Plan{Actions: []planner.Action{{Kind: planner.Terminate, Pool: "od", Node: "c", BackOff: true}}})
		if out[0].Result != tt.want || !errors.Is(out[0].Err, tt.err) || !errors.Is(err, tt.err) {
			t.Fatalf("%v: outcome %+v, %v; want %s with it", tt.err, out[0], err, tt.want)
		}
		if bs, _ := f.books.Backoffs(); (len(bs) != 0) != (tt.want == Done) {
			t.Fatalf("%v: back-offs %+v; want the pool's only if the node was terminated", tt.err, bs)
		}
	}
}

// TestHistory: the history holds each whole step's peak, the step in
// progress apart (provisional); a step with no sample carries the last
// value; a sample from a clock that went back counts in the step in
// progress; one loaded from the books is the same as one recorded.
func TestHistory(t *testing.T) {
	step := 10 * time.Minute
	f := fleet.ForecastSettings{Step: step, History: 6 * step}
	h := newHistory(f)
	at := func(m int) time.Time { return t0.Add(time.Duration(m) * time.Minute) }
	var samples []state.Sample
	add := func(m int, v float64) {
		h.add(at(m), v)
		samples = append(samples, state.Sample{Time: at(m), Value: v})
	}
	for m, v := range []float64{3, 9, 4, 1, 1, 1, 1, 1, 1, 1, 2, 5} { // minutes 0-11
		add(m, v)
	}
	if c := h.current(); !slices.Equal(h.series.Values, []float64{9}) || !slices.Equal(c.Values, []float64{9, 5}) || !c.Start.Equal(t0) {
		t.Fatalf("series %v, current %v from %v; want [9] and [9 5] from %v", h.series.Values, c.Values, c.Start, t0)
	}
	add(5, 7)  // the clock went back: into the step in progress
	add(40, 2) // steps 20 and 30 had no sample
	if want := []float64{9, 7, 7, 7}; !slices.Equal(h.series.Values, want) || h.curMax != 2 || !h.cur.Equal(at(40)) {
		t.Fatalf("series %v, in progress %v at %v; want %v, then 2 at 40m", h.series.Values, h.curMax, h.cur, want)
	}
	for m := 41; m < 100; m += 3 {
		add(m, float64(m))
	}
	if len(h.series.Values) != 6 || !h.series.End().Equal(at(90)) || h.curMax != 98 {
		t.Fatalf("series %v from %v, in progress %v; want the last 6 steps, to 90m, then 98", h.series.Values, h.series.Start, h.curMax)
	}
	// Loaded from the books, it is the same as recorded (the books keep
	// samples in time order: the one from the clock that went back
	// replaced the first at 5m, and is left out here).
	samples = slices.DeleteFunc(samples, func(s state.Sample) bool { return s.Time.Equal(at(5)) && s.Value == 7 })
	recorded, loaded := newHistory(f), newHistory(f)
	for _, s := range samples {
		recorded.add(s.Time, s.Value)
	}
	if err := loaded.load(samples, at(99)); err != nil {
		t.Fatal(err)
	}
	if g, h := loaded, recorded; !slices.Equal(g.series.Values, h.series.Values) || !g.series.Start.Equal(h.series.Start) || g.curMax != h.curMax || !g.cur.Equal(h.cur) {
		t.Fatalf("loaded %v from %v, %v at %v; recorded %v from %v, %v at %v", g.series.Values, g.series.Start, g.curMax, g.cur,
			h.series.Values, h.series.Start, h.curMax, h.cur)
	}
}

// TestForecastFollowsAndRefits: the loop forecasts from the history with
// the step in progress, again only when it changes, and chooses its model
// again a day after it last did.
func TestForecastFollowsAndRefits(t *testing.T) {
	l, f := newScripted(t, false)
	ctx := context.Background()
	// Two days of a daily cycle, a sample a minute, in the books.
	var samples []state.Sample
	start := t0.Add(-2 * 24 * time.Hour)
	for m := range 2 * 24 * 60 {
		at := start.Add(time.Duration(m) * time.Minute)
		samples = append(samples, state.Sample{Time: at, Value: 100 + 50*math.Sin(2*math.Pi*float64(m)/1440)})
	}
	f.books.AppendDemand(DemandSeries, samples...)
	f.demand = 100
	r, _ := l.Cycle(ctx, f, t0)
	fitted := l.main.fittedAt
	if len(r.Forecast.Values) == 0 || !fitted.Equal(t0) || !r.Forecast.Origin.Equal(t0.Add(l.o.Settings.Forecast.Step)) {
		t.Fatalf("forecast %+v fitted at %v; want one from the step in progress, fitted at %v", r.Forecast, fitted, t0)
	}
	first := r.Forecast
	r, _ = l.Cycle(ctx, f, t0.Add(time.Minute)) // the same peak in the same step: the same forecast
	if &r.Forecast.Values[0][0] != &first.Values[0][0] {
		t.Fatal("a forecast made again from the same history")
	}
	f.demand = 190 // a higher peak in the step in progress: followed
	if r, _ = l.Cycle(ctx, f, t0.Add(2*time.Minute)); &r.Forecast.Values[0][0] == &first.Values[0][0] {
		t.Fatal("the forecast was not made again for a new peak in the step in progress")
	}
	for m := 3; m < 24*60; m++ {
		if l.Cycle(ctx, f, t0.Add(time.Duration(m)*time.Minute)); !l.main.fittedAt.Equal(fitted) {
			t.Fatalf("refitted at %v, before a day had passed", l.main.fittedAt)
		}
	}
	if l.Cycle(ctx, f, t0.Add(24*time.Hour)); !l.main.fittedAt.Equal(t0.Add(24 * time.Hour)) {
		t.Fatalf("fitted at %v a day on; want a refit", l.main.fittedAt)
	}
}

// TestUnrecorded: a cycle whose demand cannot be counted records none.
func TestUnrecorded(t *testing.T) {
	l, f := newScripted(t, false)
	f.demand = 50
	obs := Observation{State: &f.st, InUse: 50, Unrecorded: "a pool has never been read"}
	if err := l.record(t0, obs); err != nil {
		t.Fatal(err)
	}
	if got, _ := f.books.Demand(DemandSeries, time.Time{}); len(got) != 0 || !l.hist.cur.IsZero() {
		t.Fatalf("recorded %v; want nothing", got)
	}
}

// TestUnannouncedRecorded: the history leaves out the announced demand
// under way (its GPUs covering the cycle's time, at least 0 left): the
// planner adds the announcements to the forecast made of it.
func TestUnannouncedRecorded(t *testing.T) {
	l, f := newScripted(t, true)
	run := fleet.Announcement{ID: "train", StartAt: t0.Add(-time.Hour), GPUs: 16, Duration: 2 * time.Hour}
	for _, c := range []struct {
		at     time.Duration
		inUse  float64
		under  []fleet.Announcement
		record float64
	}{
		{0, 40, []fleet.Announcement{run}, 24},
		{time.Minute, 10, []fleet.Announcement{run}, 0},              // its jobs ended early: nothing left to forecast
		{time.Hour + time.Minute, 40, []fleet.Announcement{run}, 40}, // over
		{2 * time.Minute, 40, nil, 40},
	} {
		f.demand, f.st.UnderWay = c.inUse, c.under
		obs, _ := f.Observe(context.Background(), t0.Add(c.at))
		if err := l.record(t0.Add(c.at), obs); err != nil {
			t.Fatal(err)
		}
		got, _ := f.books.Demand(DemandSeries, time.Time{})
		if v := got[len(got)-1].Value; v != c.record {
			t.Errorf("at %v, %v GPUs in use, under way %v: recorded %v, want %v", c.at, c.inUse, c.under, v, c.record)
		}
	}
}

// TestPrune: once an hour the books lose the demand older than the
// forecaster reads (and a day) and the drains older than the scale-in
// window.
func TestPrune(t *testing.T) {
	l, f := newScripted(t, false)
	cfg := l.o.Settings
	old := t0.Add(-cfg.Forecast.History - forecast.Day - time.Minute)
	kept := t0.Add(-cfg.Forecast.History - forecast.Day + time.Minute)
	f.books.AppendDemand(DemandSeries, state.Sample{Time: old, Value: 1}, state.Sample{Time: kept, Value: 2})
	f.books.PutDrain(state.Drain{Node: "x", Pool: "od", Started: t0.Add(-cfg.Limits.ScaleInWindow - time.Minute), Deadline: t0})
	f.books.PutDrain(state.Drain{Node: "y", Pool: "od", Started: t0.Add(-time.Minute), Deadline: t0})
	if _, err := l.Cycle(context.Background(), f, t0); err != nil {
		t.Fatal(err)
	}
	if got, _ := f.books.Demand(DemandSeries, time.Time{}); len(got) != 2 || !got[0].Time.Equal(kept) {
		t.Fatalf("demand %v; want the sample at %v and the cycle's", got, kept)
	}
	if got, _ := f.books.DrainLog(time.Time{}); len(got) != 1 || got[0].Node != "y" {
		t.Fatalf("drain log %v; want y's only", got)
	}
}

// TestDamagedHistory: a history the books cannot read is not the loop's
// end: it plans on without one (reactively), and says so.
func TestDamagedHistory(t *testing.T) {
	l, f := newScripted(t, false)
	l.o.Books = damaged{f.books}
	f.st.PendingGPUs = 16
	r, err := l.Cycle(context.Background(), f, t0)
	if err != nil || len(r.Plan.Actions) != 1 || r.Plan.Actions[0].Kind != planner.Launch {
		t.Fatalf("plan %+v, %v; want a launch for the pending GPUs", r.Plan.Actions, err)
	}
}

// damaged is books whose demand history cannot be read.
type damaged struct{ *state.Memory }

func (damaged) Demand(string, time.Time) ([]state.Sample, error) {
	return nil, errors.New("state: demand fleet: the record is damaged")
}

// TestHeld: the held history counts what the fleet would have bought
// without its reservations (burst nodes in every state, reserved nodes
// with a job, not idle reserved ones), is kept in the books, and is
// given to the planner, whose baseline advice rests on it, across a
// restart.
func TestHeld(t *testing.T) {
	cfg := testSettings()
	cfg.Pools = append(cfg.Pools, fleet.Pool{Name: "res", Provider: "sim", InstanceType: "x", GPUsPerNode: 8, Capacity: fleet.Reserved,
		PricePerHour: 2, LeadTime: 5 * time.Minute, ProvisionTimeout: 15 * time.Minute, Min: 3, Max: 3})
	job := []fleet.Job{{ID: "j", GPUs: 1, Start: t0}}
	st := fleet.State{Pools: []fleet.PoolStatus{{Name: "od"}, {Name: "res"}}, Nodes: []fleet.Node{
		{ID: "o1", Pool: "od", State: fleet.Ready, Jobs: job},
		{ID: "o2", Pool: "od", State: fleet.Pending},
		{ID: "o3", Pool: "od", State: fleet.Draining},
		{ID: "r1", Pool: "res", State: fleet.Ready, Jobs: job},
		{ID: "r2", Pool: "res", State: fleet.Ready},
		{ID: "r3", Pool: "res", State: fleet.Ready},
	}}
	if got := HeldGPUs(cfg.Pools, &st); got != 4*8 {
		t.Fatalf("held %v GPUs; want 32: three burst nodes and one busy reserved node", got)
	}
	// Jobs spread over the reservation count as the whole nodes they would
	// fill: three 1-GPU jobs on three reserved nodes are one node's worth.
	spread := fleet.State{Nodes: []fleet.Node{
		{ID: "r1", Pool: "res", State: fleet.Ready, Jobs: job},
		{ID: "o1", Pool: "od", State: fleet.Ready},
		{ID: "r2", Pool: "res", State: fleet.Ready, Jobs: []fleet.Job{{ID: "k", GPUs: 1, Start: t0}}},
		{ID: "r3", Pool: "res", State: fleet.Ready, Jobs: []fleet.Job{{ID: "m", GPUs: 7, Start: t0}}},
	}}
	if got := HeldGPUs(cfg.Pools, &spread); got != 8+2*8 {
		t.Fatalf("held %v GPUs; want 24: the burst node and two nodes' worth of the 9 reserved GPUs in use", got)
	}
	books := &state.Memory{}
	// A week before t0 (the least the advice rests on): 32 GPUs held, 2
	// of demand.
	step := cfg.Forecast.Step
	week := int(planner.MinAdviceHistory / step)
	for k := range week {
		at := t0.Add(-time.Duration(week-k) * step)
		if err := books.AppendDemand(HeldSeries, state.Sample{Time: at, Value: 32}); err != nil {
			t.Fatal(err)
		}
		if err := books.AppendDemand(DemandSeries, state.Sample{Time: at, Value: 2}); err != nil {
			t.Fatal(err)
		}
	}
	l, err := New(Options{Settings: cfg, Books: books, Advise: true, DryRun: true})
	if err != nil {
		t.Fatal(err)
	}
	f := &scripted{t: t, books: books, st: st}
	ctx := context.Background()
	for k := range 3 {
		if _, err := l.Cycle(ctx, f, t0.Add(time.Duration(k)*step)); err != nil {
			t.Fatal(err)
		}
	}
	if got, _ := books.Demand(HeldSeries, t0); len(got) != 3 || got[2].Value != 32 {
		t.Fatalf("held in the books from t0: %v; want 3 samples of 32", got)
	}
	// A restarted loop loads it, and the plan's advice rests on it.
	l, _ = New(Options{Settings: cfg, Books: books, Advise: true, DryRun: true})
	r, err := l.Cycle(ctx, f, t0.Add(3*step))
	if err != nil {
		t.Fatal(err)
	}
	if h := r.State.Held; len(h.Values) != week+4 || h.Values[week] != 32 || !h.Start.Equal(t0.Add(-time.Duration(week)*step)) {
		t.Fatalf("state's held: %d steps from %v; want %d of 32 from a week before %v", len(h.Values), h.Start, week+4, t0)
	}
	if b := r.Plan.Baseline; b == nil || b.TooShort || b.GPUs != 32 {
		t.Fatalf("baseline %+v; want the 32 GPUs held all along reserved, not the 2 GPUs of demand", b)
	}
	if got := l.Held(); len(got.Values) != week+4 {
		t.Fatalf("Held() has %d steps; want %d", len(got.Values), week+4)
	}
}

// TestPendingSince: the state the planner gets says since when GPUs have
// been pending, across cycles, from the first cycle with any until one
// with none.
func TestPendingSince(t *testing.T) {
	l, f := newScripted(t, true)
	ctx := context.Background()
	for k, tc := range []struct {
		pending int
		since   time.Duration // from t0; -1 for none
	}{{0, -1}, {8, time.Minute}, {16, time.Minute}, {0, -1}, {8, 4 * time.Minute}} {
		f.st.PendingGPUs = tc.pending
		now := t0.Add(time.Duration(k) * time.Minute)
		r, err := l.Cycle(ctx, f, now)
		if err != nil {
			t.Fatal(err)
		}
		want := time.Time{}
		if tc.since >= 0 {
			want = t0.Add(tc.since)
		}
		if !r.State.PendingSince.Equal(want) {
			t.Errorf("cycle %d (%d pending): pending since %v, want %v", k, tc.pending, r.State.PendingSince, want)
		}
	}
}

// TestCommitBeforeActing: a cycle commits what it observed once, after
// planning and before any action, and forgets the drains of the nodes the
// fleet found gone; a commit that fails leaves every action undone and
// failed with its error. A dry run commits too (the fleet writes nothing
// then) and forgets nothing.
func TestCommitBeforeActing(t *testing.T) {
	ctx := context.Background()
	for _, dry := range []bool{false, true} {
		l, f := newScripted(t, dry)
		for _, n := range []string{"gone-1", "kept"} {
			if err := f.books.PutDrain(state.Drain{Node: n, Pool: "od", Started: t0.Add(-time.Hour), Deadline: t0.Add(time.Hour)}); err != nil {
				t.Fatal(err)
			}
		}
		f.gone = []string{"gone-1"}
		f.st.PendingGPUs = 16
		r, err := l.Cycle(ctx, f, t0)
		if err != nil {
			t.Fatal(err)
		}
		want := []string{"commit", "launch od"}
		if dry {
			want = want[:1]
		}
		if !slices.Equal(f.calls, want) || len(r.Plan.Actions) == 0 {
			t.Errorf("dry run %v: calls %v for plan %v; want %v", dry, f.calls, r.Plan.Actions, want)
		}
		if got := hasDrain(f.books, "gone-1"); got != dry {
			t.Errorf("dry run %v: gone node's drain kept: %v", dry, got)
		}
		if !hasDrain(f.books, "kept") {
			t.Errorf("dry run %v: a listed node's drain forgotten", dry)
		}
	}
	l, f := newScripted(t, false)
	f.st.PendingGPUs = 16
	f.commitErr = errors.New("disk full")
	r, err := l.Cycle(ctx, f, t0)
	if !errors.Is(err, f.commitErr) || !slices.Equal(f.calls, []string{"commit"}) {
		t.Fatalf("calls %v, %v; want the commit alone, and its error", f.calls, err)
	}
	for i, o := range r.Outcomes {
		if o.Result != Failed || !errors.Is(o.Err, f.commitErr) {
			t.Errorf("outcome %d: %+v; want failed with the commit's error", i, o)
		}
	}
}
