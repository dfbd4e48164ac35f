package planner

import (
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/fleetcast/autoscaler/fleet"
)

// TestSpendCountsWhatIsPaid: a reservation of 2 nodes runs 4 (its max was
// lowered, or the reservation shrank) at $10/h each; on demand costs $10/h
// and the fleet may spend $40/h. It already does: nothing is launched for
// the waiting jobs.
func TestSpendCountsWhatIsPaid(t *testing.T) {
	res := pool("res", fleet.Reserved, 10, 8*time.Minute, 0, 2)
	od := pool("od", fleet.OnDemand, 10, 9*time.Minute, 0, 10)
	cfg := withLimits(testConfig(res, od), func(l *fleet.Limits) { l.MaxSpendPerHour = 40 })
	st := fleet.State{PendingGPUs: 64}
	for _, id := range []string{"r1", "r2", "r3", "r4"} {
		st.Nodes = append(st.Nodes, ready(id, "res", time.Minute, time.Minute, time.Minute, time.Minute, time.Minute, time.Minute, time.Minute, time.Minute))
	}
	p := Make(Input{Settings: cfg.Settings(), State: &st, Forecast: flat(0), Now: t0})
	if l := actions(p, Launch); len(l) != 0 {
		t.Fatalf("launched %+v with the fleet at $40/h and a cap of $40/h", l)
	}
	if p.CostPerHourBefore != 40 {
		t.Errorf("cost per hour %v; want 40 (four reserved nodes running)", p.CostPerHourBefore)
	}
}

// TestPoolAboveMaxIsBroughtBack: pools hold more nodes than their max (a
// lowered max, a shrunk reservation). Whatever the demand, each is brought
// back to its max by safe drains, within the scale-in budget, saying why;
// a node whose job has not checkpointed lately is held, and the plan says
// why.
func TestPoolAboveMaxIsBroughtBack(t *testing.T) {
	res := pool("res", fleet.Reserved, 10, 8*time.Minute, 0, 2)
	od := pool("od", fleet.OnDemand, 30, 9*time.Minute, 0, 2)
	cfg := withLimits(testConfig(res, od), func(l *fleet.Limits) { l.ScaleInShare = 1; l.MaxScaleInPerCycle = 10 })
	st := fleet.State{Nodes: []fleet.Node{
		ready("r1", "res"), ready("r2", "res"), ready("r3", "res", time.Minute), ready("r4", "res"),
		ready("o1", "od"), ready("o2", "od", 3*time.Hour), ready("o3", "od", 2*time.Minute, -1), ready("o4", "od", 4*time.Hour),
	}}
	// The forecast needs every GPU there is.
	p := Make(Input{Settings: cfg.Settings(), State: &st, Forecast: flat(56), Now: t0})
	drained := map[string][]string{}
	for _, a := range actions(p, Drain) {
		if a.Code != ReasonAboveMax {
			t.Errorf("drain without the reason: %+v", a)
		}
		drained[a.Pool] = append(drained[a.Pool], a.Node)
	}
	if len(drained["res"]) != 2 || strings.Join(drained["od"], ",") != "o1" {
		t.Fatalf("drained %v; want two reserved nodes and the one on-demand node that can be", drained)
	}
	held := map[string]Action{}
	for _, a := range actions(p, Hold) {
		held[a.Node] = a
	}
	// Held for its old checkpoint while the pool is above its max (the
	// words say both: TestReasonTexts).
	if a := held["o2"]; a.Code != ReasonCheckpointTooOld || a.Pool != "od" {
		t.Errorf("o2 held for %s: %q", a.Code, a.Reason)
	}
	if a := held["o3"]; a.Code != ReasonNeverCheckpointed {
		t.Errorf("o3 held for %s: %q", a.Code, a.Reason)
	}
	if want := 2*10 + 3*30.0; math.Abs(p.CostPerHourAfter-want) > 1e-9 {
		t.Errorf("cost after %v; want %v (the reservation at its max, three on-demand nodes)", p.CostPerHourAfter, want)
	}
}

// TestAbsurdForecastIsNotUsed: a forecast of 1e308 GPUs with nothing in
// use carries no information. The plan is made on current demand, says
// so, and buys nothing.
func TestAbsurdForecastIsNotUsed(t *testing.T) {
	cfg := testConfig(pool("spot", fleet.Spot, 12, 8*time.Minute, 0, 10), pool("od", fleet.OnDemand, 32, 9*time.Minute, 0, 10))
	p := Make(Input{Settings: cfg.Settings(), State: &fleet.State{}, Forecast: flat(1e308), Now: t0})
	if l := actions(p, Launch); len(l) != 0 {
		t.Fatalf("launched %+v for an absurd forecast and no demand", l)
	}
	if p.Forecast != nil || len(notesCoded(p, ReasonForecastAbsurd)) != 1 {
		t.Errorf("forecast used %v, notes %q", p.Forecast != nil, p.Notes)
	}
}

// TestStuckNodesDoNotWidenScaleIn: four idle nodes and four unknown ones
// stuck booting (past their provisioning deadline, never ready). The share
// of the pool that may drain in a window is of its four live nodes: two,
// not four.
func TestStuckNodesDoNotWidenScaleIn(t *testing.T) {
	od := pool("od", fleet.OnDemand, 30, 9*time.Minute, 0, 10)
	cfg := withLimits(testConfig(od), func(l *fleet.Limits) { l.ScaleInShare = 0.5; l.MaxScaleInPerCycle = 10 })
	st := fleet.State{}
	for i := range 4 {
		st.Nodes = append(st.Nodes, ready(fmt.Sprint("idle-", i), "od"),
			fleet.Node{ID: fmt.Sprint("stuck-", i), Pool: "od", State: fleet.Pending, LaunchedAt: t0.Add(-2 * time.Hour), Unknown: true})
	}
	p := Make(Input{Settings: cfg.Settings(), State: &st, Forecast: flat(0), Now: t0})
	if d := actions(p, Drain); len(d) != 2 {
		t.Fatalf("%d drains; want 2, half of the 4 live nodes: %+v", len(d), p.Actions)
	}
}

// TestDrainedNodeWithGPUFaultHeld: a draining node whose agent confirmed
// the drain but cannot read its GPUs is held, not terminated: nobody sees
// what runs on them (before, it was terminated on the confirmation).
func TestDrainedNodeWithGPUFaultHeld(t *testing.T) {
	od := pool("od", fleet.OnDemand, 30, 9*time.Minute, 0, 10)
	n := fleet.Node{ID: "d1", Pool: "od", State: fleet.Draining, LaunchedAt: t0.Add(-5 * time.Hour), DrainStartedAt: t0.Add(-5 * time.Minute),
		LastReport: t0.Add(-time.Minute), DrainAcked: true, DrainConfirmed: true,
		GPUFault: "NVML device count: GPU is lost", GPUFaultSince: t0.Add(-6 * time.Hour)}
	p := Make(Input{Settings: testConfig(od).Settings(), State: &fleet.State{Nodes: []fleet.Node{n}}, Forecast: flat(0), Now: t0})
	if len(actions(p, Terminate)) != 0 {
		t.Fatalf("terminated a node whose GPUs cannot be read: %+v", p.Actions)
	}
	if h := actions(p, Hold); len(h) != 1 || h[0].Node != "d1" || h[0].Code != ReasonGPUFault {
		t.Errorf("want the node held for its GPU fault: %+v", p.Actions)
	}
}
