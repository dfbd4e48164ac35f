package planner

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/fleetcast/autoscaler/fleet"
)

// TestScaleInWaits: scale-in for demand waits while a pool's launches
// boot and for limits.scale_in_delay_after_launch after its latest launch,
// holds idle nodes until they have been idle for
// limits.scale_in_unneeded_time, and keeps the GPUs demand reached within
// that time; each setting at 0 turns its rule off. Four idle nodes of 8
// GPUs and a forecast of 8 GPUs: without the rules, two drain (the pool's
// share, half of four, per scale_in_window).
func TestScaleInWaits(t *testing.T) {
	od := pool("od", fleet.OnDemand, 30, 10*time.Minute, 0, 10)
	spot := pool("spot", fleet.Spot, 12, 10*time.Minute, 0, 10)
	idle := func(id string, idleFor time.Duration) fleet.Node {
		n := ready(id, od.Name)
		n.IdleSince = t0.Add(-idleFor)
		return n
	}
	launched := func(n fleet.Node, ago time.Duration) fleet.Node {
		n.LaunchedAt = t0.Add(-ago)
		return n
	}
	old := []fleet.Node{idle("o1", time.Hour), idle("o2", time.Hour), idle("o3", time.Hour), idle("o4", time.Hour)}
	with := func(extra ...fleet.Node) []fleet.Node { return append(append([]fleet.Node{}, old...), extra...) }
	booting := fleet.Node{ID: "o5", Pool: od.Name, State: fleet.Pending, LaunchedAt: t0.Add(-15 * time.Minute)}
	history := func(vals ...float64) fleet.Series {
		// The last value stands for the 10 minutes before now.
		return fleet.Series{Start: t0.Add(-time.Duration(len(vals)) * 10 * time.Minute), Step: 10 * time.Minute, Values: vals}
	}
	tests := []struct {
		name        string
		nodes       []fleet.Node
		history     fleet.Series
		delay, idle time.Duration // the limits; -1: off
		drained     []string
		holds       int  // holds for unneeded_time
		delayed     bool // a scale_in_delay note holds pool od back
		// until, for a pool held back by a launch: when it may scale in
		// (planned again then, it drains what it would have).
		until time.Duration
	}{
		{name: "idle an hour: drained", nodes: old, drained: []string{"o1", "o2"}},
		{name: "a node launched 5m ago holds its pool", nodes: with(launched(idle("o5", time.Minute), 5*time.Minute)),
			delayed: true, until: 5 * time.Minute},
		{name: "a launch time ahead of the clock does not hold the pool", nodes: with(launched(idle("o5", time.Minute), -time.Hour)),
			drained: []string{"o1", "o2"}, holds: 1},
		{name: "nor an instance not launched here that is not up", nodes: with(fleet.Node{ID: "u1", Pool: od.Name, State: fleet.Pending, LaunchedAt: t0, Unknown: true}),
			drained: []string{"o1", "o2"}},
		{name: "a held pool's surplus is not drained in a cheaper pool", nodes: []fleet.Node{idle("o1", time.Hour), idle("o2", time.Hour), idle("o3", time.Hour), idle("o4", time.Hour),
			launched(idle("o5", time.Minute), 5*time.Minute), func() fleet.Node { n := idle("s1", time.Hour); n.Pool = spot.Name; return n }()},
			delayed: true, until: 5 * time.Minute},
		{name: "a launch booting holds its pool", nodes: with(booting),
			delayed: true},
		{name: "a launch in another pool does not", nodes: with(fleet.Node{ID: "s1", Pool: spot.Name, State: fleet.Pending, LaunchedAt: t0.Add(-time.Minute)}),
			drained: []string{"o1", "o2"}},
		{name: "delay off: the new node is held, the old drained", nodes: with(launched(idle("o5", time.Minute), 5*time.Minute)), delay: -1,
			drained: []string{"o1", "o2"}, holds: 1},
		{name: "idle 5m: held", nodes: []fleet.Node{idle("o1", 5*time.Minute), idle("o2", 5*time.Minute), idle("o3", 5*time.Minute), idle("o4", 5*time.Minute)},
			holds: 3},
		{name: "idle since an unknown time: held", nodes: with(func() fleet.Node { n := idle("o0", 0); n.IdleSince = time.Time{}; return n }()),
			drained: []string{"o1", "o2"}, holds: 1},
		{name: "unneeded time off: idle 5m drained", nodes: []fleet.Node{idle("o1", 5*time.Minute), idle("o2", 6*time.Minute), idle("o3", 7*time.Minute), idle("o4", 8*time.Minute)}, idle: -1,
			drained: []string{"o4", "o3"}},
		{name: "demand reached 32 GPUs within the unneeded time: kept", nodes: old, history: history(8, 8, 8, 32)},
		{name: "and 24: one drained", nodes: old, history: history(8, 8, 8, 24), drained: []string{"o1"}},
		{name: "a peak older than the unneeded time: drained", nodes: old, history: history(32, 8, 8, 8), drained: []string{"o1", "o2"}},
		{name: "unneeded time off: a recent peak does not keep", nodes: old, history: history(8, 8, 8, 32), idle: -1, drained: []string{"o1", "o2"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := withLimits(testConfig(od, spot), func(l *fleet.Limits) {
				if tt.delay < 0 {
					l.ScaleInDelayAfterLaunch = 0
				}
				if tt.idle < 0 {
					l.ScaleInUnneededTime = 0
				}
			})
			st := fleet.State{Nodes: tt.nodes, History: tt.history}
			p := Make(Input{Settings: cfg.Settings(), State: &st, Forecast: flat(8), Now: t0})
			var drained []string
			holds := 0
			for _, a := range p.Actions {
				switch {
				case a.Kind == Drain:
					drained = append(drained, a.Node)
				case a.Kind == Hold && a.Code == ReasonUnneededTime:
					holds++
				case a.Kind == Launch:
					t.Errorf("launch: %+v", a)
				}
			}
			if fmt.Sprint(drained) != fmt.Sprint(tt.drained) || holds != tt.holds {
				t.Errorf("drained %v and %d held for unneeded_time, want %v and %d:\n%s", drained, holds, tt.drained, tt.holds, describe(p))
			}
			if n := len(notesCoded(p, ReasonScaleInDelay)); n != map[bool]int{false: 0, true: 1}[tt.delayed] {
				t.Errorf("%d scale_in_delay notes, want delayed %v:\n%s", n, tt.delayed, describe(p))
			}
			if tt.until == 0 {
				return
			}
			// The delay ends at the latest launch plus
			// limits.scale_in_delay_after_launch: not before.
			for _, at := range []time.Duration{tt.until - time.Second, tt.until} {
				st := fleet.State{Nodes: slices.Clone(tt.nodes), History: tt.history}
				for i := range st.Nodes {
					st.Nodes[i].LastReport = t0.Add(at - time.Minute) // the agents still report
				}
				p := Make(Input{Settings: cfg.Settings(), State: &st, Forecast: flat(8), Now: t0.Add(at)})
				if held := len(notesCoded(p, ReasonScaleInDelay)) == 1; held != (at < tt.until) || held == (len(actions(p, Drain)) > 0) {
					t.Errorf("%s on: scale_in_delay noted %v, drains %+v; want the pool held before %s only\n%s", at, held, actions(p, Drain), tt.until, describe(p))
				}
			}
		})
	}
	// A launch still booting holds its pool until it is up.
	up := booting
	up.State, up.LastReport, up.IdleSince = fleet.Ready, t0.Add(-time.Minute), t0.Add(-time.Minute)
	st := fleet.State{Nodes: with(up)}
	p := Make(Input{Settings: testConfig(od, spot).Settings(), State: &st, Forecast: flat(8), Now: t0})
	if len(notesCoded(p, ReasonScaleInDelay)) != 0 || len(actions(p, Drain)) == 0 {
		t.Errorf("the launch up 15m after it was made: want the pool scaled in\n%s", describe(p))
	}
}

// TestRecentPeakOfTiers: with tiers, the recent peak scale-in keeps is
// that of the tiers worth something (Input.PeakHistory): a best-effort
// peak in the whole demand keeps nothing; without tiers, or without that
// history, the whole demand's peak keeps.
func TestRecentPeakOfTiers(t *testing.T) {
	od := pool("od", fleet.OnDemand, 30, 10*time.Minute, 0, 10)
	var nodes []fleet.Node
	for _, id := range []string{"o1", "o2", "o3", "o4"} {
		n := ready(id, od.Name)
		n.IdleSince = t0.Add(-time.Hour)
		nodes = append(nodes, n)
	}
	history := func(vals ...float64) fleet.Series {
		return fleet.Series{Start: t0.Add(-time.Duration(len(vals)) * 10 * time.Minute), Step: 10 * time.Minute, Values: vals}
	}
	tiers := []fleet.Tier{{Name: "critical", Rank: 1, WaitValuePerGPUHour: 500}, {Name: "standard", Rank: 2, WaitValuePerGPUHour: 50, Default: true},
		{Name: "best_effort", Rank: 3}}
	for _, tt := range []struct {
		name    string
		tiers   []fleet.Tier
		peak    fleet.Series
		drained int
	}{
		{"tiers: the best-effort peak keeps nothing", tiers, history(8, 8, 8, 8), 2},
		{"tiers, the peak of the tiers worth something keeps", tiers, history(8, 8, 8, 32), 0},
		{"tiers without that history: the whole demand's", tiers, fleet.Series{}, 0},
		{"tiers, that history begun within the window: the whole demand's", tiers,
			fleet.Series{Start: t0.Add(-5 * time.Minute), Step: 10 * time.Minute, Values: []float64{8}}, 0},
		{"no tiers: the whole demand's", nil, history(8, 8, 8, 8), 0},
	} {
		set := testConfig(od).Settings()
		set.Tiers = tt.tiers
		st := fleet.State{Nodes: slices.Clone(nodes), History: history(8, 8, 8, 32)}
		p := Make(Input{Settings: set, State: &st, Forecast: flat(8), Now: t0, PeakHistory: tt.peak})
		if got := len(actions(p, Drain)); got != tt.drained {
			t.Errorf("%s: %d drained, want %d\n%s", tt.name, got, tt.drained, describe(p))
		}
	}
}
