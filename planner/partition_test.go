package planner

import (
	"fmt"
	"testing"
	"time"

	"github.com/fleetcast/autoscaler/fleet"
)

// TestBootedLaunchHeldWhileHalted: four ready nodes whose agents are all
// silent (scale-in halted: a network fault) and two of the controller's
// launches past their provisioning deadline, one its cloud says runs
// (booted), one it never booted. The booted one is held, not terminated,
// and its pool not backed off, while the halt lasts and for a
// provisioning deadline after it; it counts against the pool's max, not
// as capacity. The one never booted is terminated as before.
func TestBootedLaunchHeldWhileHalted(t *testing.T) {
	od := pool("od", fleet.OnDemand, 10, 5*time.Minute, 0, 6) // provisioning deadline 15m
	cfg := testConfig(od)
	nodes := func(silent bool) []fleet.Node {
		var out []fleet.Node
		for i := range 4 {
			n := ready(fmt.Sprint("r", i), "od", time.Minute)
			if silent {
				n.LastReport = t0.Add(-time.Hour)
			}
			out = append(out, n)
		}
		return append(out,
			fleet.Node{ID: "booted", Pool: "od", State: fleet.Pending, LaunchedAt: t0.Add(-20 * time.Minute), Booted: true},
			fleet.Node{ID: "stuck", Pool: "od", State: fleet.Pending, LaunchedAt: t0.Add(-20 * time.Minute)})
	}
	kinds := func(p Plan) map[string]Action {
		out := map[string]Action{}
		for _, a := range p.Actions {
			if a.Node != "" {
				out[a.Node] = a
			}
		}
		return out
	}
	for _, tt := range []struct {
		name     string
		silent   bool
		haltedAt time.Time
		held     bool
	}{
		{"halted now", true, time.Time{}, true},
		{"halt ended 5m ago", false, t0.Add(-5 * time.Minute), true},
		{"halt ended 20m ago", false, t0.Add(-20 * time.Minute), false},
		{"never halted", false, time.Time{}, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			st := fleet.State{Nodes: nodes(tt.silent), HaltedAt: tt.haltedAt, PendingGPUs: 64}
			p := Make(Input{Settings: cfg.Settings(), State: &st, Forecast: flat(96), Now: t0})
			got := kinds(p)
			if (p.ScaleInHalt != "") != tt.silent {
				t.Fatalf("halt %q", p.ScaleInHalt)
			}
			b := got["booted"]
			switch {
			case tt.held && (b.Kind != Hold || b.Code != ReasonBootedWhileHalted || b.BackOff):
				t.Errorf("the booted launch: %s %s %q; want it held, no back-off", b.Kind, b.Code, b.Reason)
			case !tt.held && (b.Kind != Terminate || !b.BackOff):
				t.Errorf("the booted launch: %s %s %q; want it terminated at its deadline", b.Kind, b.Code, b.Reason)
			}
			if s := got["stuck"]; s.Kind != Terminate || !s.BackOff {
				t.Errorf("the launch its cloud never booted: %s %q; want it terminated, its pool backed off", s.Kind, s.Reason)
			}
			// Against the max (6): 4 ready, 2 overdue; nothing launched.
			if l := actions(p, Launch); len(l) != 0 {
				t.Errorf("launched %+v into a pool at its max", l)
			}
			// Below its max, a pool holding a booted launch buys nothing
			// more while the hold lasts: the next pool serves.
			wide, spot := od, pool("spot", fleet.Spot, 20, 5*time.Minute, 0, 10)
			wide.Max = 20
			p = Make(Input{Settings: testConfig(wide, spot).Settings(), State: &st, Forecast: flat(96), Now: t0})
			launched := map[string]int{}
			for _, a := range actions(p, Launch) {
				launched[a.Pool] += a.Count
			}
			if tt.held && (launched["od"] != 0 || launched["spot"] == 0) {
				t.Errorf("launched %v; want nothing more in od while it holds a booted launch, the rest in spot", launched)
			}
			if !tt.held && launched["od"] != 0 {
				t.Errorf("launched %v; od just had a launch miss its deadline (terminated), and buys nothing this cycle", launched)
			}
			if p.Capacity.LaunchingGPUs != 0 {
				t.Errorf("overdue launches counted as capacity: %+v", p.Capacity)
			}
		})
	}
}
