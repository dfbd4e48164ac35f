package planner

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/fleetcast/autoscaler/fleet"
	"github.com/fleetcast/autoscaler/forecast"
)

// TestQuantileByCost: with no forecast.quantile, each burst pool is
// bought to its own quantile by cost, and scale-in keeps what the
// highest of them needs.
func TestQuantileByCost(t *testing.T) {
	spot := pool("spot", fleet.Spot, 12.50, 8*time.Minute, 0, 100)
	od := pool("od", fleet.OnDemand, 55.04, 10*time.Minute, 0, 100)
	// The median is 8 GPUs, the 99th percentile 108: q reads 8 + (q-0.5)/0.49*100.
	fc := flat(8)
	fc.Levels = []float64{0.5, 0.99}
	fc.Values[1] = slices.Repeat([]float64{108}, len(fc.Values[0]))
	idle := func(n int) []fleet.Node {
		var out []fleet.Node
		for i := range n {
			out = append(out, ready(fmt.Sprintf("od-%02d", i), od.Name))
		}
		return out
	}
	backedOff := []fleet.PoolStatus{{Name: spot.Name, BackoffUntil: t0.Add(time.Hour)}}
	tests := []struct {
		name     string
		nodes    []fleet.Node
		statuses []fleet.PoolStatus
		spotMax  int // 0: 100
		launch   map[string]int
		code     Reason // of the first launch or drain
		ready    int    // GPUs ready: what the fleet has (its words: TestReasonTexts)
		drains   int
		quantile float64 // the plan's
	}{{
		// spot: 500*(8/60) / (500*(8/60) + 1.5625*(38/60)) = p98.5, 107.06 GPUs.
		name:     "the cheap pool is bought high",
		launch:   map[string]int{spot.Name: 14},
		code:     ReasonForecast,
		quantile: 0.9854,
	}, {
		// od: p94.8, 99.4 GPUs.
		name:     "the dear pool is bought lower",
		statuses: backedOff,
		launch:   map[string]int{od.Name: 13},
		code:     ReasonForecast,
		quantile: 0.9478, // spot cannot buy: scale-in keeps for od's
	}, {
		// Spot holds 5 nodes at most: on-demand buys the rest of its own
		// 100, not of spot's 108.
		name:     "each pool for its own",
		spotMax:  5,
		launch:   map[string]int{spot.Name: 5, od.Name: 8},
		code:     ReasonForecast,
		quantile: 0.9854,
	}, {
		name:     "scale-in keeps for the cheap pool's quantile",
		nodes:    idle(20),
		drains:   6, // 160 - 108 GPUs
		code:     ReasonIdle,
		ready:    160,
		quantile: 0.9854,
	}, {
		// A drain would let spot buy again: its level counts.
		name:     "and for a cheap pool at its max",
		nodes:    append(idle(20), ready("spot-1", spot.Name)),
		spotMax:  1,
		drains:   7, // 168 - 108 GPUs
		code:     ReasonIdle,
		ready:    168,
		quantile: 0.9854,
	}, {
		// While the cheap pool's cloud refuses it (backed off), capacity
		// kept for its level would be bought by no one: scale-in keeps
		// for the dear pool's own. Once the cheap pool may buy again, it
		// buys to its level at its price (a spot pool out of capacity is
		// refused again and backed off longer).
		name:     "but not for the cheap pool's while it is backed off",
		nodes:    idle(20),
		statuses: backedOff,
		drains:   7, // 160 - 100 GPUs
		code:     ReasonIdle,
		ready:    160,
		quantile: 0.9478,
	}, {
		name:     "nor while it is failing to create a node",
		nodes:    append(idle(20), fleet.Node{ID: "spot-1", Pool: spot.Name, State: fleet.Pending, LaunchedAt: t0.Add(-2 * time.Minute), LaunchFailing: "capacity-not-available"}),
		drains:   7, // 160 - 100 GPUs (the failing launch is terminated, not counted)
		code:     ReasonIdle,
		ready:    160,
		quantile: 0.9478,
	}, {
		// Refused, but no longer backed off: it launches in this plan, so
		// its level counts.
		name:     "but it does once it may launch again",
		nodes:    idle(20),
		statuses: []fleet.PoolStatus{{Name: spot.Name, Refused: true, HeldSinceRefusal: 0, BackoffUntil: t0}},
		launch:   map[string]int{},
		drains:   6, // 160 - 108 GPUs
		code:     ReasonIdle,
		ready:    160,
		quantile: 0.9854,
	}, {
		name:     "and every pool's, when every pool is refused",
		nodes:    idle(20),
		statuses: []fleet.PoolStatus{{Name: spot.Name, BackoffUntil: t0.Add(time.Hour)}, {Name: od.Name, BackoffUntil: t0.Add(time.Hour)}},
		drains:   6, // 160 - 108 GPUs
		code:     ReasonIdle,
		ready:    160,
		quantile: 0.9854,
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			spot := spot
			if tt.spotMax > 0 {
				spot.Max = tt.spotMax
			}
			cfg := withLimits(testConfig(spot, od), func(l *fleet.Limits) { l.ScaleInShare, l.MaxScaleInPerCycle = 1, 20 })
			cfg.Forecast.Quantile = 0 // by cost, $500 a waiting GPU-hour
			st := fleet.State{Nodes: tt.nodes, Pools: tt.statuses}
			p := Make(Input{Settings: cfg.Settings(), State: &st, Forecast: fc, Now: t0})
			got := map[string]int{}
			var first []Action
			for _, a := range p.Actions {
				if a.Kind == Launch {
					got[a.Pool] += a.Count
				}
				if a.Kind == Launch || a.Kind == Drain {
					first = append(first, a)
				}
			}
			if len(got) > 0 || len(tt.launch) > 0 {
				if fmt.Sprint(got) != fmt.Sprint(tt.launch) {
					t.Errorf("launches %v, want %v\n%s", got, tt.launch, describe(p))
				}
			}
			if n := len(actions(p, Drain)); n != tt.drains {
				t.Errorf("%d drains, want %d\n%s", n, tt.drains, describe(p))
			}
			if len(first) == 0 || first[0].Code != tt.code || p.Capacity.ReadyGPUs != tt.ready {
				t.Errorf("first action's code: want %s, %d GPUs ready (have %d)\n%s", tt.code, tt.ready, p.Capacity.ReadyGPUs, describe(p))
			}
			if math.Abs(p.Quantile-tt.quantile) > 5e-5 {
				t.Errorf("plan quantile %.5f, want %.4f", p.Quantile, tt.quantile)
			}
		})
	}
}

// TestAnnounced: demand announced ahead is provisioned one lead time
// before it starts, on top of current demand, and kept from scale-in
// until it is over.
func TestAnnounced(t *testing.T) {
	od := pool("od", fleet.OnDemand, 32, 9*time.Minute, 0, 10)
	run := func(start, dur time.Duration, gpus int) fleet.Announcement {
		return fleet.Announcement{ID: fmt.Sprint("run-", start), StartAt: t0.Add(start), GPUs: gpus, Duration: dur}
	}
	tests := []struct {
		name      string
		nodes     []fleet.Node
		announced []fleet.Announcement
		fc        forecast.Forecast
		launch    int
		drains    int
		code      Reason // of the first launch or drain
		// underWay and unannounced: a forecast of the demand not
		// announced (Input.Unannounced), with announcements under way.
		underWay    []fleet.Announcement
		unannounced bool
	}{{
		name:      "starting within the lead time: bought now",
		announced: []fleet.Announcement{run(5*time.Minute, time.Hour, 16)},
		launch:    2,
		code:      ReasonAnnounced,
	}, {
		name:      "beyond the lead time: not yet",
		announced: []fleet.Announcement{run(20*time.Minute, time.Hour, 16)},
	}, {
		name:      "two at once add up, one over does not",
		announced: []fleet.Announcement{run(time.Minute, 2*time.Minute, 8), run(5*time.Minute, 0, 8), run(6*time.Minute, time.Hour, 8)},
		launch:    2,
		code:      ReasonAnnounced,
	}, {
		name:      "on top of current demand",
		nodes:     []fleet.Node{ready("a", od.Name, time.Minute)},
		announced: []fleet.Announcement{run(5*time.Minute, time.Hour, 8)},
		launch:    1,
	}, {
		name:      "not below the forecast",
		announced: []fleet.Announcement{run(5*time.Minute, time.Hour, 8)},
		fc:        flat(24),
		launch:    3,
		code:      ReasonForecast,
	}, {
		name:        "on top of a forecast of the demand not announced",
		announced:   []fleet.Announcement{run(5*time.Minute, time.Hour, 16)},
		fc:          flat(24),
		unannounced: true,
		launch:      5,
		code:        ReasonForecast,
	}, {
		name:        "and those under way",
		underWay:    []fleet.Announcement{run(-30*time.Minute, time.Hour, 16)},
		fc:          flat(24),
		unannounced: true,
		launch:      5,
	}, {
		name:     "under way, on a forecast of all the demand: nothing on top",
		underWay: []fleet.Announcement{run(-30*time.Minute, time.Hour, 16)},
		fc:       flat(24),
		launch:   3,
	}, {
		name:        "one under way keeps its nodes from scale-in",
		nodes:       []fleet.Node{ready("a", od.Name), ready("b", od.Name)},
		underWay:    []fleet.Announcement{run(-30*time.Minute, time.Hour, 16)},
		fc:          flat(0),
		unannounced: true,
	}, {
		name:        "until it is over",
		nodes:       []fleet.Node{ready("a", od.Name), ready("b", od.Name)},
		underWay:    []fleet.Announcement{run(-2*time.Hour, time.Hour, 16)},
		fc:          flat(0),
		unannounced: true,
		drains:      1,
	}, {
		// The window is 9m + 30m: idle nodes stay for a run at 14:30.
		name:      "kept for a start within the scale-in window",
		nodes:     []fleet.Node{ready("a", od.Name), ready("b", od.Name)},
		announced: []fleet.Announcement{run(30*time.Minute, time.Hour, 16)},
	}, {
		name:      "released for one beyond it",
		nodes:     []fleet.Node{ready("a", od.Name), ready("b", od.Name)},
		announced: []fleet.Announcement{run(50*time.Minute, time.Hour, 16)},
		drains:    1, // the share allows one of two
	}, {
		name:      "released when it is over",
		nodes:     []fleet.Node{ready("a", od.Name), ready("b", od.Name)},
		announced: []fleet.Announcement{run(-2*time.Hour, time.Hour, 16)},
		drains:    1,
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			st := fleet.State{Nodes: tt.nodes, Announced: tt.announced, UnderWay: tt.underWay}
			if err := st.Validate([]fleet.Pool{od}); err != nil {
				t.Fatal(err)
			}
			p := Make(Input{Settings: testConfig(od).Settings(), State: &st, Forecast: tt.fc, Now: t0, Unannounced: tt.unannounced})
			launched := 0
			var first []Action
			for _, a := range p.Actions {
				if a.Kind == Launch {
					launched += a.Count
				}
				if a.Kind == Launch || a.Kind == Drain {
					first = append(first, a)
				}
			}
			if launched != tt.launch || len(actions(p, Drain)) != tt.drains {
				t.Errorf("launched %d, drained %d; want %d and %d\n%s", launched, len(actions(p, Drain)), tt.launch, tt.drains, describe(p))
			}
			if tt.code != 0 && (len(first) == 0 || first[0].Code != tt.code) {
				t.Errorf("first action's code: want %s\n%s", tt.code, describe(p))
			}
		})
	}
}

// TestAnnouncedMax: the sweep over starts and ends finds the most GPUs
// announced for one moment, as looking at every second would.
func TestAnnouncedMax(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	gen := func() []fleet.Announcement {
		var as []fleet.Announcement
		for i := range rng.IntN(6) {
			as = append(as, fleet.Announcement{ID: fmt.Sprint(i), StartAt: t0.Add(time.Duration(rng.IntN(20)) * time.Second),
				GPUs: rng.IntN(4), Duration: time.Duration(rng.IntN(6)) * time.Second})
		}
		return as
	}
	for range 300 {
		st := fleet.State{Announced: gen(), UnderWay: gen()}
		p := &planner{in: Input{State: &st}}
		from := t0.Add(time.Duration(rng.IntN(20)) * time.Second)
		to := from.Add(time.Duration(rng.IntN(10)) * time.Second)
		for _, all := range []bool{false, true} {
			list := st.Announced
			if all {
				list = append(slices.Clone(list), st.UnderWay...)
			}
			want := 0
			for at := from; !at.After(to); at = at.Add(time.Second) {
				want = max(want, fleet.UnderWayGPUs(list, at))
			}
			// Twice: the sweep is made once and read again.
			for range 2 {
				if got := p.announcedMax(all, from, to); got != want {
					t.Fatalf("announcedMax(%v, %v, %v) = %d, want %d, of %+v and %+v", all, from.Sub(t0), to.Sub(t0), got, want, st.Announced, st.UnderWay)
				}
			}
		}
	}
}

// TestForecastCrossing: quantiles that cross are raised to the one below,
// so each pool's level and scale-in's read one distribution, and no plan
// buys for demand at one level while draining at another.
func TestForecastCrossing(t *testing.T) {
	spot := pool("spot", fleet.Spot, 12.5, 8*time.Minute, 0, 100)
	od := pool("od", fleet.OnDemand, 55.04, 10*time.Minute, 0, 100)
	fc := flat(60)
	fc.Levels = []float64{0.9, 0.99}
	fc.Values[1] = slices.Repeat([]float64{10}, len(fc.Values[0])) // p99 below p90
	st := fleet.State{Nodes: []fleet.Node{ready("od-0", od.Name), ready("od-1", od.Name), ready("od-2", od.Name), ready("od-3", od.Name)}}
	cfg := withLimits(testConfig(spot, od), func(l *fleet.Limits) { l.ScaleInShare, l.MaxScaleInPerCycle = 1, 10 })
	cfg.Forecast.Quantile = 0
	p := Make(Input{Settings: cfg.Settings(), State: &st, Forecast: fc, Now: t0})
	if len(actions(p, Launch)) > 0 && len(actions(p, Drain)) > 0 {
		t.Errorf("the plan buys and drains for demand:\n%s", describe(p))
	}
	if len(notesCoded(p, ReasonForecastCrossing)) != 1 || p.Forecast == nil || p.Forecast.Values[1][0] != 60 {
		t.Errorf("crossing quantiles not raised, or not noted:\n%s", describe(p))
	}
}

// TestExpectedEnds: a pending job waits for a node whose jobs are all
// expected to end within the lead time, instead of a launch; an expected
// end that is unknown for one job, beyond the lead time or passed (the job
// overran), or on a silent node, does not count; and scale-in never
// drains for one.
func TestExpectedEnds(t *testing.T) {
	od := pool("od", fleet.OnDemand, 32, 10*time.Minute, 0, 10)
	full := func(id string, ends ...time.Duration) fleet.Node { // 8 one-GPU jobs; ends[i] for job i, 0 for none
		n := ready(id, od.Name, 0, 0, 0, 0, 0, 0, 0, 0)
		for i, e := range ends {
			if e != 0 {
				n.Jobs[i].ExpectedEnd = t0.Add(e)
			}
		}
		return n
	}
	all := func(e time.Duration) []time.Duration { return []time.Duration{e, e, e, e, e, e, e, e} }
	silent := full("s", all(5*time.Minute)...)
	silent.LastReport = t0.Add(-time.Hour)
	tests := []struct {
		name    string
		nodes   []fleet.Node
		pending int
		launch  int
		note    bool
	}{
		{"every job ends within the lead time: no launch", []fleet.Node{full("a", all(5*time.Minute)...)}, 8, 0, true},
		{"ends as the lead time does", []fleet.Node{full("a", all(10*time.Minute)...)}, 8, 0, true},
		{"one job has no expected end", []fleet.Node{full("a", all(5 * time.Minute)[:7]...)}, 8, 1, false},
		{"beyond the lead time", []fleet.Node{full("a", 5*time.Minute, 5*time.Minute, 5*time.Minute, 5*time.Minute, 5*time.Minute, 5*time.Minute, 5*time.Minute, 11*time.Minute)}, 8, 1, false},
		{"passed: the job overran", []fleet.Node{full("a", all(-time.Minute)...)}, 8, 1, false},
		{"a silent node's hint", []fleet.Node{silent}, 8, 1, false},
		{"more pending than it frees", []fleet.Node{full("a", all(5*time.Minute)...)}, 24, 2, false},
		{"nothing pending", []fleet.Node{full("a", all(5*time.Minute)...)}, 0, 0, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			st := fleet.State{Nodes: tt.nodes, PendingGPUs: tt.pending}
			p := Make(Input{Settings: testConfig(od).Settings(), State: &st, Now: t0})
			launched := 0
			for _, a := range actions(p, Launch) {
				launched += a.Count
			}
			if launched != tt.launch || len(actions(p, Drain)) != 0 {
				t.Errorf("launched %d, drained %d; want %d and none\n%s", launched, len(actions(p, Drain)), tt.launch, describe(p))
			}
			noted := false
			for _, n := range p.Notes {
				noted = noted || n.Code == ReasonExpectedEnds
			}
			if noted != tt.note {
				t.Errorf("expected_ends note %v, want %v\n%s", noted, tt.note, describe(p))
			}
		})
	}
	// A launch for the rest names the ends in its reason.
	st := fleet.State{Nodes: []fleet.Node{full("a", all(5*time.Minute)...)}, PendingGPUs: 24}
	p := Make(Input{Settings: testConfig(od).Settings(), State: &st, Now: t0})
	// 32 GPUs in use or pending, 8 of them held by jobs that end: 2 nodes
	// for the other 16 pending.
	if l := actions(p, Launch); len(l) != 1 || l[0].Code != ReasonDemandNow || l[0].Count != 2 || p.Demand.Total() != 32 || p.Capacity.ReadyGPUs != 8 {
		t.Errorf("launch %+v; want 2 nodes, the 8 GPUs expected free counted\n%s", l, describe(p))
	}
	// The forecast counts the pending jobs too: they start on the node
	// that frees all the same.
	st = fleet.State{Nodes: []fleet.Node{full("a", all(5*time.Minute)...)}, PendingGPUs: 8}
	if p := Make(Input{Settings: testConfig(od).Settings(), State: &st, Forecast: flat(16), Now: t0}); len(actions(p, Launch)) != 0 {
		t.Errorf("launched for a forecast of what is running and pending:\n%s", describe(p))
	}
	// The ends stand in for the pending GPUs only, not for the forecast's
	// rise beyond them: two nodes ending, 8 pending, 40 forecast.
	st = fleet.State{Nodes: []fleet.Node{full("a", all(5*time.Minute)...), full("b", all(5*time.Minute)...)}, PendingGPUs: 8}
	if p := Make(Input{Settings: testConfig(od).Settings(), State: &st, Forecast: flat(40), Now: t0}); countLaunched(p) != 2 {
		t.Errorf("want 2 launched: 40 forecast less the 8 pending the ends serve, 16 held\n%s", describe(p))
	}
	// Pending for a lead time already: the ends count no more, however
	// they are told (overrun, staggered over nodes).
	st = fleet.State{Nodes: []fleet.Node{full("a", all(5*time.Minute)...)}, PendingGPUs: 8, PendingSince: t0.Add(-10 * time.Minute)}
	if p := Make(Input{Settings: testConfig(od).Settings(), State: &st, Now: t0}); countLaunched(p) != 1 {
		t.Errorf("pending for a lead time: want a launch\n%s", describe(p))
	}
	st.PendingSince = t0.Add(-9 * time.Minute)
	if p := Make(Input{Settings: testConfig(od).Settings(), State: &st, Now: t0}); countLaunched(p) != 0 {
		t.Errorf("pending for less than a lead time: want no launch\n%s", describe(p))
	}
	// A pending job that waits for an end within the cheap pool's lead
	// time is not bought for in a dearer pool that boots sooner, before
	// the end.
	fast := pool("fast", fleet.OnDemand, 64, 2*time.Minute, 0, 10)
	st = fleet.State{Nodes: []fleet.Node{full("a", all(5*time.Minute)...)}, PendingGPUs: 8}
	if p := Make(Input{Settings: testConfig(od, fast).Settings(), State: &st, Now: t0}); countLaunched(p) != 0 {
		t.Errorf("a dearer, faster pool bought what an end within the cheaper pool's lead time frees:\n%s", describe(p))
	}
	// A node whose jobs hold no GPUs is free already: not counted twice.
	idleJob := full("a")
	idleJob.Jobs = []fleet.Job{{ID: "x", GPUs: 0, Start: t0.Add(-time.Hour), ExpectedEnd: t0.Add(5 * time.Minute)}}
	st = fleet.State{Nodes: []fleet.Node{idleJob}, PendingGPUs: 16}
	if p := Make(Input{Settings: testConfig(od).Settings(), State: &st, Now: t0}); countLaunched(p) != 1 {
		t.Errorf("a free node's ends counted: want 1 launch for 16 pending on 8 free\n%s", describe(p))
	}
	// Demand pending for another pool is served there; the ends do not
	// stand in for it in the fleet-wide launch.
	other := pool("b", fleet.OnDemand, 40, 10*time.Minute, 0, 10)
	st = fleet.State{Nodes: []fleet.Node{full("a", all(5*time.Minute)...)}, PendingGPUs: 8, Scoped: []fleet.ScopedDemand{{Pool: "b", GPUs: 8}}}
	if p := Make(Input{Settings: testConfig(od, other).Settings(), State: &st, Forecast: flat(24), Now: t0}); countLaunched(p) != 2 {
		t.Errorf("scoped demand: want 1 launch in b for it and 1 in od for the forecast\n%s", describe(p))
	}
	// Idle nodes are kept for the pending jobs as ever: the ends never
	// lower what scale-in keeps.
	st = fleet.State{Nodes: []fleet.Node{full("a", all(5*time.Minute)...), ready("b", od.Name)}, PendingGPUs: 8}
	if p := Make(Input{Settings: testConfig(od).Settings(), State: &st, Now: t0}); len(actions(p, Drain)) != 0 {
		t.Errorf("drained for an expected end:\n%s", describe(p))
	}
}

// countLaunched is the nodes a plan launches.
func countLaunched(p Plan) int {
	n := 0
	for _, a := range actions(p, Launch) {
		n += a.Count
	}
	return n
}

// TestScaleInAtKnownEnds: scale-in for demand plans a busy node whose jobs
// are all expected to end within its window to leave then: it holds the
// node (ends_soon) and counts it as gone, so no job, its own or another
// node's, is moved for capacity that frees by itself. An end beyond the
// window, passed, unknown for one job or told by a silent node does not
// count; idle nodes go first as ever, and a node the cloud may take soon
// (a rebalance recommendation); the soonest end is planned first; no
// cheaper pool is drained in a held node's place; a pool above its max is
// brought back to it whatever its ends.
func TestScaleInAtKnownEnds(t *testing.T) {
	od := pool("od", fleet.OnDemand, 32, 10*time.Minute, 0, 10)
	// One one-GPU job per node, its checkpoint ck ago (negative: never),
	// expected to end at end (0: no end).
	busy := func(id string, ck, end time.Duration) fleet.Node {
		n := ready(id, od.Name, ck)
		if end != 0 {
			n.Jobs[0].ExpectedEnd = t0.Add(end)
		}
		return n
	}
	silent := busy("a", time.Minute, 5*time.Minute)
	silent.LastReport = t0.Add(-time.Hour)
	two := busy("a", time.Minute, 5*time.Minute)
	two.Jobs = append(two.Jobs, fleet.Job{ID: "a-job1", GPUs: 1, Start: t0.Add(-time.Hour), LastCheckpoint: t0.Add(-time.Minute)})
	withEnd := func(n fleet.Node, end time.Time) fleet.Node {
		n.Jobs = append([]fleet.Job{}, n.Jobs...)
		n.Jobs[1].ExpectedEnd = end
		return n
	}
	tests := []struct {
		name     string
		nodes    []fleet.Node
		forecast float64 // GPUs
		max      int
		drained  string // nodes, in order
		held     string // nodes held for their ends
	}{
		{"ends within the window: held, nothing drained", []fleet.Node{busy("a", time.Minute, 5*time.Minute), busy("b", time.Minute, 0), busy("c", 2*time.Minute, 0)}, 10, 10, "", "a"},
		{"ends as the window does (lead time 10m + hysteresis 30m)", []fleet.Node{busy("a", 3*time.Minute, 40*time.Minute), busy("b", time.Minute, 0), busy("c", 2*time.Minute, 0)}, 10, 10, "", "a"},
		{"beyond the window", []fleet.Node{busy("a", time.Minute, 41*time.Minute), busy("b", 2*time.Minute, 0), busy("c", 3*time.Minute, 0)}, 10, 10, "a", ""},
		{"passed: the job overran", []fleet.Node{busy("a", time.Minute, -time.Minute), busy("b", 2*time.Minute, 0), busy("c", 3*time.Minute, 0)}, 10, 10, "a", ""},
		{"one job has no end", []fleet.Node{withEnd(two, time.Time{}), busy("b", 2*time.Minute, 0), busy("c", 3*time.Minute, 0)}, 10, 10, "a", ""},
		{"every job ends", []fleet.Node{withEnd(two, t0.Add(20*time.Minute)), busy("b", 2*time.Minute, 0), busy("c", 3*time.Minute, 0)}, 10, 10, "", "a"},
		{"a silent node's ends", []fleet.Node{silent, busy("b", time.Minute, 0), busy("c", 2*time.Minute, 0), busy("d", 3*time.Minute, 0)}, 10, 10, "b", ""},
		{"idle first", []fleet.Node{busy("a", time.Minute, 5*time.Minute), ready("i", od.Name), busy("c", 2*time.Minute, 0)}, 10, 10, "i", ""},
		{"soonest first", []fleet.Node{busy("a", time.Minute, 30*time.Minute), busy("b", time.Minute, 5*time.Minute), busy("c", 2*time.Minute, 0)}, 10, 10, "", "b"},
		{"idle first, then the ending node for the rest", []fleet.Node{busy("a", time.Minute, 5*time.Minute), ready("i", od.Name), busy("b", time.Minute, 0), busy("c", 2*time.Minute, 0)}, 10, 10, "i", "a"},
		{"a blocked drain ending soon: blocked nodes come last", []fleet.Node{busy("a", -1, 5*time.Minute), busy("b", time.Minute, 0), busy("c", 2*time.Minute, 0)}, 10, 10, "b", ""},
		{"no surplus: nothing held", []fleet.Node{busy("a", time.Minute, 5*time.Minute), busy("b", time.Minute, 0), busy("c", 2*time.Minute, 0)}, 20, 10, "", ""},
		{"above max: brought back whatever the ends", []fleet.Node{busy("a", time.Minute, 5*time.Minute), busy("b", 2*time.Minute, 0), busy("c", 3*time.Minute, 0)}, 24, 2, "a", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := od
			o.Max = tt.max
			cfg := withLimits(testConfig(o), func(l *fleet.Limits) { l.ScaleInShare = 1 })
			st := fleet.State{Nodes: tt.nodes}
			p := Make(Input{Settings: cfg.Settings(), State: &st, Forecast: flat(tt.forecast), Now: t0})
			var drained, held []string
			for _, a := range actions(p, Drain) {
				drained = append(drained, a.Node)
			}
			for _, a := range actions(p, Hold) {
				if a.Code == ReasonEndsSoon {
					held = append(held, a.Node)
				}
			}
			if strings.Join(drained, ",") != tt.drained || strings.Join(held, ",") != tt.held {
				t.Errorf("drained %v, held for ends %v; want %q and %q\n%s", drained, held, tt.drained, tt.held, describe(p))
			}
		})
	}
	// A dearer pool's node held for its ends counts as gone for the
	// cheaper pools: none of their nodes is drained in its place.
	dear := pool("dear", fleet.OnDemand, 64, 10*time.Minute, 0, 10)
	cheapB, cheapC := busy("b", time.Minute, 0), busy("c", 2*time.Minute, 0)
	heldA := busy("a", time.Minute, 5*time.Minute)
	heldA.Pool = dear.Name
	st0 := fleet.State{Nodes: []fleet.Node{heldA, cheapB, cheapC}}
	p0 := Make(Input{Settings: withLimits(testConfig(od, dear), func(l *fleet.Limits) { l.ScaleInShare = 1 }).Settings(), State: &st0, Forecast: flat(10), Now: t0})
	if d, h := actions(p0, Drain), actions(p0, Hold); len(d) != 0 || len(h) != 1 || h[0].Node != "a" {
		t.Errorf("a cheaper pool drained for what a dearer pool's ending node frees: drains %+v, holds %+v\n%s", d, h, describe(p0))
	}
	// Holds do not spend the cycle's budget (a drain spends it once, a
	// hold would every cycle): the cheaper pool's idle nodes drain.
	st0 = fleet.State{Nodes: []fleet.Node{heldA, ready("i1", od.Name), ready("i2", od.Name)}}
	p0 = Make(Input{Settings: withLimits(testConfig(od, dear), func(l *fleet.Limits) { l.ScaleInShare = 1; l.MaxScaleInPerCycle = 1 }).Settings(), State: &st0, Forecast: flat(2), Now: t0})
	if d, h := actions(p0, Drain), actions(p0, Hold); len(d) != 1 || d[0].Node != "i1" || len(h) != 1 || h[0].Node != "a" {
		t.Errorf("with a budget of 1: drains %+v, holds %+v; want a held and i1 drained\n%s", d, h, describe(p0))
	}
	// Holds count against the pool's share (scale_in_share): with a share
	// of one node per window, one of three ending nodes is held, the
	// others neither held nor drained.
	st0 = fleet.State{Nodes: []fleet.Node{busy("a", time.Minute, 5*time.Minute), busy("b", time.Minute, 6*time.Minute), busy("c", time.Minute, 7*time.Minute), busy("d", time.Minute, 0)}}
	p0 = Make(Input{Settings: withLimits(testConfig(od), func(l *fleet.Limits) { l.ScaleInShare = 0.25 }).Settings(), State: &st0, Forecast: flat(2), Now: t0})
	if d, h := actions(p0, Drain), actions(p0, Hold); len(d) != 0 || len(h) != 1 || h[0].Node != "a" {
		t.Errorf("with a share of one node: drains %+v, holds %+v; want a held only\n%s", d, h, describe(p0))
	}
	// A pool's floor: of four ending nodes, min 2, two are held.
	floored := od
	floored.Min = 2
	st0 = fleet.State{Nodes: []fleet.Node{busy("a", time.Minute, 5*time.Minute), busy("b", time.Minute, 6*time.Minute), busy("c", time.Minute, 7*time.Minute), busy("d", time.Minute, 8*time.Minute)}}
	p0 = Make(Input{Settings: withLimits(testConfig(floored), func(l *fleet.Limits) { l.ScaleInShare = 1 }).Settings(), State: &st0, Forecast: flat(2), Now: t0})
	if d, h := actions(p0, Drain), actions(p0, Hold); len(d) != 0 || len(h) != 2 || h[0].Node != "a" || h[1].Node != "b" {
		t.Errorf("min 2 of 4 ending: drains %+v, holds %+v; want a and b held\n%s", d, h, describe(p0))
	}
	// Held nodes count as gone for the rest of the surplus: with room for
	// two of three nodes to go, the ending one is held and one more, not
	// ending, drained.
	st0 = fleet.State{Nodes: []fleet.Node{busy("a", time.Minute, 5*time.Minute), busy("b", time.Minute, 0), busy("c", 2*time.Minute, 0)}}
	p0 = Make(Input{Settings: withLimits(testConfig(od), func(l *fleet.Limits) { l.ScaleInShare = 1 }).Settings(), State: &st0, Forecast: flat(2), Now: t0})
	if d, h := actions(p0, Drain), actions(p0, Hold); len(d) != 1 || d[0].Node != "b" || len(h) != 1 || h[0].Node != "a" {
		t.Errorf("room for two to go: drains %+v, holds %+v; want a held and b drained\n%s", d, h, describe(p0))
	}
	// A job started within the window: a scheduler placing short jobs on
	// a held node would hold it for ever, so it is not held.
	young := busy("a", time.Minute, 5*time.Minute)
	young.Jobs[0].Start = t0.Add(-39 * time.Minute)
	st0 = fleet.State{Nodes: []fleet.Node{young, busy("b", 2*time.Minute, 0), busy("c", 3*time.Minute, 0)}}
	p0 = Make(Input{Settings: withLimits(testConfig(od), func(l *fleet.Limits) { l.ScaleInShare = 1 }).Settings(), State: &st0, Forecast: flat(10), Now: t0})
	if d, h := actions(p0, Drain), actions(p0, Hold); len(d) != 1 || d[0].Node != "a" || len(h) != 0 {
		t.Errorf("a job started 39m ago: drains %+v, holds %+v; want a drained, none held\n%s", d, h, describe(p0))
	}
	// A node that took a drained node's jobs in this plan is not held:
	// it will not be empty by its jobs' ends. The dearer pool's r is
	// drained and its job placed on a; a is then drained or kept, never
	// held for its ends.
	// (a's one free GPU is the best fit for r's one-GPU job.)
	r := busy("r", time.Minute, 0)
	r.Pool = dear.Name
	wide := busy("a", time.Minute, 5*time.Minute)
	wide.Jobs[0].GPUs = 7
	st0 = fleet.State{Nodes: []fleet.Node{r, wide, busy("b", time.Minute, 0), busy("c", 2*time.Minute, 0)}}
	p0 = Make(Input{Settings: withLimits(testConfig(od, dear), func(l *fleet.Limits) { l.ScaleInShare = 1 }).Settings(), State: &st0, Forecast: flat(2), Now: t0})
	if d, h := actions(p0, Drain), actions(p0, Hold); len(d) != 2 || d[0].Node != "r" || d[1].Node == "a" || len(h) != 0 {
		t.Errorf("a node given a drained node's job: drains %+v, holds %+v; want r and one of b, c drained, a neither held nor drained\n%s", d, h, describe(p0))
	}
	// A node the cloud may take soon (a rebalance recommendation) goes
	// first as ever, its ends or not.
	reb := busy("a", time.Minute, 5*time.Minute)
	reb.Rebalance = true
	st0 = fleet.State{Nodes: []fleet.Node{reb, busy("b", time.Minute, 0), busy("c", 2*time.Minute, 0)}}
	p0 = Make(Input{Settings: withLimits(testConfig(od), func(l *fleet.Limits) { l.ScaleInShare = 1 }).Settings(), State: &st0, Forecast: flat(10), Now: t0})
	if d := actions(p0, Drain); len(d) != 1 || d[0].Node != "a" {
		t.Errorf("a rebalance recommendation's node not drained first: %+v\n%s", d, describe(p0))
	}
	// The hold is for the ends (its words say when, and what scale-in
	// keeps: TestReasonTexts), with the fleet's 24 GPUs of which p90 keeps 10.
	st := fleet.State{Nodes: []fleet.Node{busy("a", time.Minute, 5*time.Minute), busy("b", time.Minute, 0), busy("c", 2*time.Minute, 0)}}
	p := Make(Input{Settings: withLimits(testConfig(od), func(l *fleet.Limits) { l.ScaleInShare = 1 }).Settings(), State: &st, Forecast: flat(10), Now: t0})
	if h := actions(p, Hold); len(h) != 1 || h[0].Node != "a" || h[0].Code != ReasonEndsSoon || p.Capacity.ReadyGPUs != 24 || p.Quantile != 0.9 {
		t.Errorf("hold %+v", h)
	}
}
