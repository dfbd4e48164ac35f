package planner

import (
	"fmt"
	"math"
	"testing"
	"time"

	"github.com/fleetcast/autoscaler/config"
	"github.com/fleetcast/autoscaler/fleet"
)

// live is what the fleet holds and pays for once plan p has launched:
// every node of st that is not gone (terminating ones included, until
// their cloud says they are gone), at gpus and price each, plus the
// launches. The oracle of the limits tests, from the inputs.
func live(st *fleet.State, p Plan, gpus int, price float64) (int, float64) {
	n := len(st.Nodes)
	for _, a := range actions(p, Launch) {
		n += a.Count
	}
	return n * gpus, float64(n) * price
}

// TestOrphansCountAgainstLimits: four busy orphans (their pool is gone
// from the config) of 8 GPUs at $9.60/h; the fleet may hold 48 GPUs and
// spend $57.60/h. Two nodes may be launched for the waiting jobs, not
// six (before, orphans were skipped before counting: 80 GPUs, $96/h).
func TestOrphansCountAgainstLimits(t *testing.T) {
	od := pool("od", fleet.OnDemand, 9.60, 9*time.Minute, 0, 20)
	for _, tt := range []struct {
		name  string
		limit func(*fleet.Limits)
	}{
		{"max_gpus", func(l *fleet.Limits) { l.MaxGPUs = 48 }},
		{"max_spend_per_hour", func(l *fleet.Limits) { l.MaxSpendPerHour = 57.60 }},
	} {
		t.Run(tt.name, func(t *testing.T) {
			cfg := withLimits(testConfig(od), tt.limit)
			st := fleet.State{PendingGPUs: 200}
			for i := range 4 {
				n := ready(fmt.Sprint("orphan-", i), "old", time.Minute, time.Minute)
				n.Orphan, n.GPUs, n.PricePerHour = true, 8, 9.60
				st.Nodes = append(st.Nodes, n)
			}
			p := Make(Input{Settings: cfg.Settings(), State: &st, Forecast: flat(200), Now: t0})
			gpus, spend := live(&st, p, 8, 9.60)
			if gpus > 48 || spend > 57.60+1e-9 {
				t.Errorf("the fleet holds %d GPUs at $%.2f/h once the plan is done; limits 48 GPUs, $57.60/h: %+v", gpus, spend, actions(p, Launch))
			}
			if gpus < 48 {
				t.Errorf("the fleet holds %d GPUs; the limits leave room for 48", gpus)
			}
			if p.CostPerHourBefore != 4*9.60 {
				t.Errorf("cost per hour %v; want the orphans' $38.40", p.CostPerHourBefore)
			}
		})
	}
}

// TestOutsideNodesAtTheirDearest: a node of no configured pool whose GPUs
// and price nobody knows counts at the widest and dearest pool's.
func TestOutsideNodesAtTheirDearest(t *testing.T) {
	cheap := pool("cheap", fleet.Spot, 5, 9*time.Minute, 0, 20)
	dear := pool("dear", fleet.OnDemand, 30, 9*time.Minute, 0, 20)
	dear.GPUsPerNode = 16
	cfg := withLimits(testConfig(cheap, dear), func(l *fleet.Limits) { l.MaxGPUs = 40 })
	n := ready("stray", "gone", time.Minute)
	n.Orphan = true
	st := fleet.State{PendingGPUs: 200, Nodes: []fleet.Node{n}}
	p := Make(Input{Settings: cfg.Settings(), State: &st, Forecast: flat(200), Now: t0})
	launched := 0
	for _, a := range actions(p, Launch) {
		launched += a.GPUs
	}
	if launched+16 > 40 {
		t.Errorf("launched %d GPUs beside a node counted at 16: over max_gpus 40: %+v", launched, actions(p, Launch))
	}
	if p.CostPerHourBefore != 30 {
		t.Errorf("cost per hour %v; want the dearest pool's $30", p.CostPerHourBefore)
	}
}

// TestTerminatingNodesCountUntilGone: a pool of max 2 whose two nodes its
// cloud is still terminating (a lifecycle hook's wait) at $10/h, with a
// cap of $20/h. Nothing is launched until they are gone (before: two
// launched, four live at $40/h).
func TestTerminatingNodesCountUntilGone(t *testing.T) {
	od := pool("od", fleet.OnDemand, 10, 9*time.Minute, 0, 2)
	cfg := withLimits(testConfig(od), func(l *fleet.Limits) { l.MaxSpendPerHour = 20 })
	st := fleet.State{PendingGPUs: 16, Nodes: []fleet.Node{
		{ID: "t1", Pool: "od", State: fleet.Terminating, LaunchedAt: t0.Add(-time.Hour)},
		{ID: "t2", Pool: "od", State: fleet.Terminating, LaunchedAt: t0.Add(-time.Hour)},
	}}
	p := Make(Input{Settings: cfg.Settings(), State: &st, Forecast: flat(16), Now: t0})
	if _, spend := live(&st, p, 8, 10); spend > 20 || len(actions(p, Launch)) > 0 {
		t.Errorf("launched %+v beside two terminating nodes: $%.0f/h against a cap of $20/h, pool max 2", actions(p, Launch), spend)
	}
	if p.CostPerHourBefore != 20 || p.CostPerHourAfter != 0 {
		t.Errorf("cost per hour %v before, %v after; want 20 (paid until gone), 0", p.CostPerHourBefore, p.CostPerHourAfter)
	}
	if p.Capacity.ReadyGPUs+p.Capacity.LaunchingGPUs != 0 {
		t.Errorf("terminating nodes counted as capacity: %+v", p.Capacity)
	}
}

// TestAbsurdForecastAtTheConfigBound: the largest pool a config allows
// (config.MaxPoolNodes nodes of config.MaxGPUsPerNode GPUs) keeps the
// guard against absurd forecasts on: a forecast of 1e15 GPUs buys
// nothing. (A max of 2^61 nodes of 8 GPUs overflowed to a fleet of 0 GPUs,
// which turned the guard off; config now refuses it, and the products
// saturate.)
func TestAbsurdForecastAtTheConfigBound(t *testing.T) {
	big := pool("od", fleet.OnDemand, 30, 9*time.Minute, 0, config.MaxPoolNodes)
	big.GPUsPerNode = config.MaxGPUsPerNode
	cfg := testConfig(big)
	p := Make(Input{Settings: cfg.Settings(), State: &fleet.State{}, Forecast: flat(1e15), Now: t0})
	if l := actions(p, Launch); len(l) != 0 || len(notesCoded(p, ReasonForecastAbsurd)) != 1 {
		t.Errorf("launched %+v for a forecast of 1e15 GPUs; notes %q", l, p.Notes)
	}
	huge := fleet.Settings{Pools: []fleet.Pool{{Max: 1 << 61, GPUsPerNode: 8}, {Max: 1, GPUsPerNode: 8}}}
	if got := huge.MaxFleetGPUs(); got != math.MaxInt {
		t.Errorf("MaxFleetGPUs of 2^61 nodes of 8 GPUs = %d, want math.MaxInt (saturated, never wrapped)", got)
	}
}

// TestStoppedNodesCountNothing: three nodes its cloud stopped (no GPUs
// held, their disks alone billed) in a pool of max 4: they count against
// no limit, and the pool may launch its 4 for waiting jobs.
func TestStoppedNodesCountNothing(t *testing.T) {
	od := pool("od", fleet.OnDemand, 10, 9*time.Minute, 0, 4)
	st := fleet.State{PendingGPUs: 64}
	for i := range 3 {
		st.Nodes = append(st.Nodes, fleet.Node{ID: fmt.Sprint("s", i), Pool: "od", State: fleet.Terminating, Stopped: true, LaunchedAt: t0.Add(-time.Hour)})
	}
	p := Make(Input{Settings: testConfig(od).Settings(), State: &st, Forecast: flat(64), Now: t0})
	launched := 0
	for _, a := range actions(p, Launch) {
		launched += a.Count
	}
	if launched != 4 || p.CostPerHourBefore != 0 {
		t.Errorf("launched %d, cost per hour %v; want 4 (the pool's max) and 0: stopped nodes count against nothing", launched, p.CostPerHourBefore)
	}
}
