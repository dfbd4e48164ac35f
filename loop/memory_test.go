package loop

import (
	"math"
	"slices"
	"testing"
	"time"

	"github.com/fleetcast/autoscaler/state"
)

// TestMemory: the books in memory keep what the bbolt store keeps, with
// its checks: samples in time order (one at a time already recorded
// replaces it), pruned by time; one back-off a pool; drains checked,
// logged and pruned by their start.
func TestMemory(t *testing.T) {
	var m Memory
	at := func(m int) time.Time { return t0.Add(time.Duration(m) * time.Minute) }
	for _, s := range []state.Sample{{Time: at(2), Value: 2}, {Time: at(0), Value: 0}, {Time: at(1), Value: 1}, {Time: at(1), Value: 11}, {Time: at(3), Value: 3}} {
		if err := m.AppendDemand(DemandSeries, s); err != nil {
			t.Fatal(err)
		}
	}
	if err := m.AppendDemand(DemandSeries, state.Sample{Time: at(4), Value: math.NaN()}); err == nil {
		t.Fatal("a NaN sample: want an error")
	}
	values := func(since time.Time) []float64 {
		xs, _ := m.Demand(DemandSeries, since)
		var out []float64
		for _, x := range xs {
			out = append(out, x.Value)
		}
		return out
	}
	if got := values(at(1)); !slices.Equal(got, []float64{11, 2, 3}) {
		t.Fatalf("demand since 1m: %v; want [11 2 3]", got)
	}
	if n, _ := m.PruneDemand(at(2)); n != 2 || !slices.Equal(values(time.Time{}), []float64{2, 3}) {
		t.Fatalf("pruned %d, left %v; want 2, [2 3]", n, values(time.Time{}))
	}

	m.PutBackoff(state.Backoff{Pool: "a", Failures: 1})
	m.PutBackoff(state.Backoff{Pool: "b", Failures: 1})
	m.PutBackoff(state.Backoff{Pool: "a", Failures: 2})
	m.DeleteBackoff("b")
	if bs, _ := m.Backoffs(); len(bs) != 1 || bs[0] != (state.Backoff{Pool: "a", Failures: 2}) {
		t.Fatalf("back-offs %+v; want a's second", bs)
	}
	if m.PutBackoff(state.Backoff{}) == nil {
		t.Fatal("a back-off with no pool: want an error")
	}

	for _, bad := range []state.Drain{{Pool: "p", Started: at(0), Deadline: at(1)}, {Node: "n", Started: at(0), Deadline: at(1)},
		{Node: "n", Pool: "p", Deadline: at(1)}, {Node: "n", Pool: "p", Started: at(1), Deadline: at(0)}} {
		if m.PutDrain(bad) == nil {
			t.Fatalf("drain %+v: want an error", bad)
		}
	}
	for i, node := range []string{"c", "a", "b"} {
		start := []time.Time{at(5), at(1), at(3)}[i]
		if err := m.PutDrain(state.Drain{Node: node, Pool: "p", Started: start, Deadline: start.Add(time.Hour)}); err != nil {
			t.Fatal(err)
		}
	}
	m.DeleteDrain("a")
	nodes := func(ds []state.Drain) (out []string) {
		for _, d := range ds {
			out = append(out, d.Node)
		}
		return out
	}
	if _, ok := m.drains["a"]; ok || len(m.drains) != 2 {
		t.Fatalf("drains in progress %v; want b and c", m.drains)
	}
	if log, _ := m.DrainLog(at(2)); !slices.Equal(nodes(log), []string{"b", "c"}) {
		t.Fatalf("drain log since 2m: %v; want b, c (a finished, but logged before)", nodes(log))
	}
	if n, _ := m.PruneDrainLog(at(4)); n != 2 {
		t.Fatalf("pruned %d drains; want 2", n)
	}
	if log, _ := m.DrainLog(time.Time{}); !slices.Equal(nodes(log), []string{"c"}) {
		t.Fatalf("drain log %v; want c", nodes(log))
	}
}
