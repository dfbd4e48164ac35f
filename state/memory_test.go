package state

import (
	"fmt"
	"math"
	"slices"
	"sync"
	"testing"
	"time"
)

// TestMemory: the records in memory keep what the bbolt store keeps, with
// its checks: samples in time order (one at a time already recorded
// replaces it), pruned by time; one back-off a pool; drains checked,
// logged and pruned by their start.
func TestMemory(t *testing.T) {
	var m Memory
	for _, s := range []Sample{{minute(2), 2}, {minute(0), 0}, {minute(1), 1}, {minute(1), 11}, {minute(3), 3}} {
		if err := m.AppendDemand("fleet", s); err != nil {
			t.Fatal(err)
		}
	}
	if err := m.AppendDemand("fleet", Sample{minute(4), math.NaN()}); err == nil {
		t.Fatal("a NaN sample: want an error")
	}
	values := func(since time.Time) []float64 {
		xs, _ := m.Demand("fleet", since)
		var out []float64
		for _, x := range xs {
			out = append(out, x.Value)
		}
		return out
	}
	if got := values(minute(1)); !slices.Equal(got, []float64{11, 2, 3}) {
		t.Fatalf("demand since 1m: %v; want [11 2 3]", got)
	}
	if n, _ := m.PruneDemand(minute(2)); n != 2 || !slices.Equal(values(time.Time{}), []float64{2, 3}) {
		t.Fatalf("pruned %d, left %v; want 2, [2 3]", n, values(time.Time{}))
	}

	m.PutBackoff(Backoff{Pool: "b", Failures: 1})
	m.PutBackoff(Backoff{Pool: "a", Failures: 1})
	m.PutBackoff(Backoff{Pool: "a", Failures: 2})
	m.DeleteBackoff("b")
	if bs, _ := m.Backoffs(); len(bs) != 1 || bs[0] != (Backoff{Pool: "a", Failures: 2}) {
		t.Fatalf("back-offs %+v; want a's second", bs)
	}
	if m.PutBackoff(Backoff{}) == nil {
		t.Fatal("a back-off with no pool: want an error")
	}

	for _, bad := range []Drain{{Pool: "p", Started: minute(0), Deadline: minute(1)}, {Node: "n", Started: minute(0), Deadline: minute(1)},
		{Node: "n", Pool: "p", Deadline: minute(1)}, {Node: "n", Pool: "p", Started: minute(1), Deadline: minute(0)}} {
		if m.PutDrain(bad) == nil {
			t.Fatalf("drain %+v: want an error", bad)
		}
	}
	for i, node := range []string{"c", "a", "b"} {
		start := []time.Time{minute(5), minute(1), minute(3)}[i]
		if err := m.PutDrain(Drain{Node: node, Pool: "p", Started: start, Deadline: start.Add(time.Hour)}); err != nil {
			t.Fatal(err)
		}
	}
	m.DeleteDrain("a")
	nodes := func(ds []Drain) (out []string) {
		for _, d := range ds {
			out = append(out, d.Node)
		}
		return out
	}
	if ds, _ := m.Drains(); !slices.Equal(nodes(ds), []string{"b", "c"}) {
		t.Fatalf("drains in progress %v; want b and c", nodes(ds))
	}
	if log, _ := m.DrainLog(minute(2)); !slices.Equal(nodes(log), []string{"b", "c"}) {
		t.Fatalf("drain log since 2m: %v; want b, c (a finished, but logged before)", nodes(log))
	}
	if n, _ := m.PruneDrainLog(minute(4)); n != 2 {
		t.Fatalf("pruned %d drains; want 2", n)
	}
	if log, _ := m.DrainLog(time.Time{}); !slices.Equal(nodes(log), []string{"c"}) {
		t.Fatalf("drain log %v; want c", nodes(log))
	}
	if m.Path() != "memory" {
		t.Errorf("path %q; want memory", m.Path())
	}
}

// TestMemoryZeroValue: a Memory no one wrote to reads as an empty store,
// and its deletes and prunes are no errors.
func TestMemoryZeroValue(t *testing.T) {
	var m Memory
	for name, f := range map[string]func() (int, error){
		"demand":    func() (int, error) { x, err := m.Demand("fleet", time.Time{}); return len(x), err },
		"series":    func() (int, error) { x, err := m.DemandSeries(); return len(x), err },
		"backoffs":  func() (int, error) { x, err := m.Backoffs(); return len(x), err },
		"drains":    func() (int, error) { x, err := m.Drains(); return len(x), err },
		"drain log": func() (int, error) { x, err := m.DrainLog(time.Time{}); return len(x), err },
		"intents":   func() (int, error) { x, err := m.Intents(); return len(x), err },
		"launches":  func() (int, error) { x, err := m.Launches(); return len(x), err },
		"ready":     func() (int, error) { x, err := m.ReadyNodes(); return len(x), err },
		"seen":      func() (int, error) { x, err := m.SeenNodes(); return len(x), err },
		"cancelled": func() (int, error) { x, err := m.CancelledDrains(); return len(x), err },
		"pools":     func() (int, error) { x, err := m.Pools(); return len(x), err },
		"creds":     func() (int, error) { x, err := m.Credentials(); return len(x), err },
		"tokens":    func() (int, error) { x, err := m.APITokens(); return len(x), err },
		"prune":     func() (int, error) { return m.PruneDemand(minute(1)) },
		"prune log": func() (int, error) { return m.PruneDrainLog(minute(1)) },
	} {
		if n, err := f(); n != 0 || err != nil {
			t.Errorf("%s: %d, %v; want none", name, n, err)
		}
	}
	for name, err := range map[string]error{
		"done intent": m.DoneIntent("k"), "delete launches": m.DeleteLaunches("k"), "delete ready": m.DeleteReady("n"),
		"delete seen": m.DeleteSeen("n"), "delete cancelled": m.DeleteCancelled("n"), "delete credentials": m.DeleteCredentials("n"),
		"delete token": m.DeleteAPIToken("t"), "delete drain": m.DeleteDrain("n"), "delete back-off": m.DeleteBackoff("p"),
	} {
		if err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
	if h, err := m.Halted(); !h.IsZero() || err != nil {
		t.Errorf("halted %v, %v; want never", h, err)
	}
	if _, ok, err := m.LatestDemand("fleet"); ok || err != nil {
		t.Errorf("latest: %v, %v; want none", ok, err)
	}
}

// TestMemoryCopies: what a caller is given, or gave, is its own where the
// Store's would be (a launch's claims, the demand samples), and the slices
// the memory lends for speed (back-offs, the drain log) stay as they were
// when it is written to after.
func TestMemoryCopies(t *testing.T) {
	var m Memory
	claimed := []string{"i-1"}
	if err := m.PutLaunches(Launch{Key: "k", Pool: "a", Count: 2, At: t0, Claimed: claimed}); err != nil {
		t.Fatal(err)
	}
	claimed[0] = "changed by the caller"
	ls, _ := m.Launches()
	ls[0].Claimed[0] = "changed by a reader"
	if ls, _ := m.Launches(); ls[0].Claimed[0] != "i-1" {
		t.Errorf("claims %v; want the memory's own, [i-1]", ls[0].Claimed)
	}

	m.AppendDemand("fleet", Sample{t0, 1})
	xs, _ := m.Demand("fleet", time.Time{})
	xs[0].Value = 99
	if x, _, _ := m.LatestDemand("fleet"); x.Value != 1 {
		t.Errorf("demand %v after a reader changed its copy; want 1", x.Value)
	}

	m.PutBackoff(Backoff{Pool: "b", Failures: 1})
	bs, _ := m.Backoffs()
	m.PutBackoff(Backoff{Pool: "a", Failures: 1})
	m.PutBackoff(Backoff{Pool: "b", Failures: 2})
	if len(bs) != 1 || bs[0].Failures != 1 {
		t.Errorf("back-offs read before the writes: %+v; want b's first, unchanged", bs)
	}
	if bs, _ := m.Backoffs(); len(bs) != 2 || bs[0].Pool != "a" || bs[1].Failures != 2 {
		t.Errorf("back-offs %+v; want a, then b's second", bs)
	}

	drain := func(node string, m int) Drain {
		return Drain{Node: node, Pool: "p", Started: minute(m), Deadline: minute(m + 10)}
	}
	m.PutDrain(drain("a", 1))
	m.PutDrain(drain("b", 3))
	log, _ := m.DrainLog(time.Time{})
	m.PutDrain(drain("c", 5)) // appended
	m.PutDrain(drain("d", 2)) // inserted
	m.PutDrain(drain("b", 3)) // replaced
	m.PruneDrainLog(minute(2))
	if !slices.Equal(log, []Drain{drain("a", 1), drain("b", 3)}) {
		t.Errorf("drain log read before the writes: %+v; want a, b unchanged", log)
	}
	if log, _ := m.DrainLog(time.Time{}); !slices.Equal(log, []Drain{drain("d", 2), drain("b", 3), drain("c", 5)}) {
		t.Errorf("drain log %+v; want d, b, c", log)
	}
}

// TestMemoryConcurrent: the memory's methods may be called at once, as the
// Store's may (run with -race).
func TestMemoryConcurrent(t *testing.T) {
	var m Memory
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Go(func() {
			for i := range 100 {
				node := fmt.Sprint("n", g, "-", i)
				at := minute(i)
				m.AppendDemand("fleet", Sample{at, float64(i)})
				m.PutDrain(Drain{Node: node, Pool: "p", Started: at, Deadline: at.Add(time.Minute)})
				m.PutBackoff(Backoff{Pool: fmt.Sprint("p", i%3), Failures: i})
				m.PutReady(at, node)
				m.DeleteSeen(node)
				m.Backoffs()
				m.DrainLog(minute(i - 5))
				m.PruneDrainLog(minute(i - 10))
				m.Demand("fleet", minute(i-3))
			}
		})
	}
	wg.Wait()
	if ready, _ := m.ReadyNodes(); len(ready) != 400 {
		t.Errorf("%d ready; want 400", len(ready))
	}
}

// BenchmarkMemoryCycle is the simulator's use of the memory each cycle: a
// sample recorded and pruned, the back-offs and the drain log read.
func BenchmarkMemoryCycle(b *testing.B) {
	var m Memory
	m.PutBackoff(Backoff{Pool: "a", Failures: 1})
	at := t0
	for b.Loop() {
		at = at.Add(time.Minute)
		m.AppendDemand("fleet", Sample{at, 100})
		m.PruneDemand(at.Add(-14 * 24 * time.Hour))
		m.Backoffs()
		m.DrainLog(at.Add(-time.Hour))
		m.PruneDrainLog(at.Add(-time.Hour))
	}
}
