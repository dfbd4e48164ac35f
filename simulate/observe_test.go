package simulate

import (
	"context"
	"testing"
	"time"

	"github.com/fleetcast/autoscaler/fleet"
	"github.com/fleetcast/autoscaler/planner"
	"github.com/fleetcast/autoscaler/state"
)

// TestObserveAsTheController: the predictive policy sees the simulated
// nodes as the controller sees its fleet through the agents' reports: a
// node idle from the first report without jobs (not the second its job
// ended), a drain held from the report after the answer that carried it,
// a cancelled drain's time (so the planner waits for a checkpoint since),
// and a spot interruption notice as the report's, the node ready.
func TestObserveAsTheController(t *testing.T) {
	c, start := testCluster(t)
	p, err := newPredictive(onePool(), Options{Start: start})
	if err != nil {
		t.Fatal(err)
	}
	e := c.e
	p.start(e)
	f := engineFleet{p, e}
	at := func(s int) time.Time { return start.Add(time.Duration(s) * time.Second) }
	observe := func(s int) *fleet.Node {
		t.Helper()
		c.Advance(at(s))
		obs, err := f.Observe(context.Background(), at(s))
		if err != nil {
			t.Fatal(err)
		}
		st := obs.State
		if len(st.Nodes) != 1 {
			t.Fatalf("at %ds: %d nodes; want 1", s, len(st.Nodes))
		}
		n := st.Nodes[0]
		return &n
	}
	if err := c.AddNode("a", "od", start); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Submit(ClusterJob{ID: "j", GPUs: 8, Work: 90 * time.Second}); err != nil {
		t.Fatal(err)
	}
	c.Advance(start) // it starts
	if n := observe(60); len(n.Jobs) != 1 || !n.IdleSince.IsZero() {
		t.Fatalf("at 60s: %+v; want the job, not idle", n)
	}
	if n := observe(120); len(n.Jobs) != 0 || !n.IdleSince.Equal(at(120)) {
		t.Fatalf("at 120s (the job ended at 90s): idle since %v; want %v, the first report without it", n.IdleSince, at(120))
	}

	if err := f.Drain(context.Background(), state.Drain{Node: "a", Pool: "od", Started: at(120)}); err != nil {
		t.Fatal(err)
	}
	if n := observe(180); n.State != fleet.Draining || n.DrainAcked || n.DrainConfirmed || !n.DrainStartedAt.Equal(at(120)) {
		t.Fatalf("at 180s, a drain decided at 120s: %+v; want draining since 120s, not yet held", n)
	}
	if n := observe(240); !n.DrainAcked || !n.DrainConfirmed {
		t.Fatalf("at 240s: %+v; want the drain held and confirmed (no jobs)", n)
	}
	if err := f.CancelDrain(context.Background(), at(240), &planner.Action{Node: "a"}); err != nil {
		t.Fatal(err)
	}
	if n := observe(300); n.State != fleet.Ready || !n.DrainCancelledAt.Equal(at(240)) {
		t.Fatalf("at 300s, the drain cancelled at 240s: %+v; want ready, cancelled at 240s", n)
	}

	e.nodes[0].interruptAt = 400
	p.notice(e, e.nodes[0])
	if n := observe(360); n.State != fleet.Ready || !n.InterruptAt.Equal(at(400)) {
		t.Fatalf("at 360s, a notice for 400s: %+v; want ready, the cloud taking it at 400s", n)
	}
}
