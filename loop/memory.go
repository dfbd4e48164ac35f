package loop

import (
	"errors"
	"math"
	"slices"
	"sort"
	"time"

	"github.com/fleetcast/autoscaler/state"
)

// Memory is Books in memory, for runs that need no durability (the
// simulator replays months in seconds). Its checks are the bbolt store's:
// a drain needs a node, a pool and a deadline after its start; a demand
// sample must be finite. The zero value is empty and ready to use.
type Memory struct {
	demand   map[string][]state.Sample
	backoffs []state.Backoff
	drains   map[string]state.Drain
	log      []state.Drain // by start
	halted   time.Time
}

// PutHalted records that scale-in was found halted at t.
func (m *Memory) PutHalted(t time.Time) error { m.halted = t; return nil }

// Halted is when scale-in was last found halted; zero if never.
func (m *Memory) Halted() (time.Time, error) { return m.halted, nil }

// AppendDemand records samples of the named series; a sample at a time
// already recorded replaces it.
func (m *Memory) AppendDemand(series string, samples ...state.Sample) error {
	for _, s := range samples {
		if math.IsNaN(s.Value) || math.IsInf(s.Value, 0) {
			return errors.New("loop: demand sample is not a finite number")
		}
	}
	if m.demand == nil {
		m.demand = map[string][]state.Sample{}
	}
	xs := m.demand[series]
	for _, s := range samples {
		if n := len(xs); n == 0 || xs[n-1].Time.Before(s.Time) {
			xs = append(xs, s)
			continue
		}
		i := sort.Search(len(xs), func(i int) bool { return !xs[i].Time.Before(s.Time) })
		if xs[i].Time.Equal(s.Time) {
			xs[i] = s
		} else {
			xs = slices.Insert(xs, i, s)
		}
	}
	m.demand[series] = xs
	return nil
}

// Demand returns the series' samples at or after since, oldest first.
func (m *Memory) Demand(series string, since time.Time) ([]state.Sample, error) {
	xs := m.demand[series]
	i := sort.Search(len(xs), func(i int) bool { return !xs[i].Time.Before(since) })
	return slices.Clone(xs[i:]), nil
}

// PruneDemand deletes every series' samples before t.
func (m *Memory) PruneDemand(before time.Time) (int, error) {
	n := 0
	for name, xs := range m.demand {
		i := sort.Search(len(xs), func(i int) bool { return !xs[i].Time.Before(before) })
		m.demand[name] = xs[i:] // append moves what is left to a new array when it fills
		n += i
	}
	return n, nil
}

// Backoffs returns the pools' back-offs. The slice is the memory's own:
// do not modify it.
func (m *Memory) Backoffs() ([]state.Backoff, error) { return m.backoffs, nil }

// PutBackoff records a pool's back-off, replacing its last.
func (m *Memory) PutBackoff(b state.Backoff) error {
	if b.Pool == "" {
		return errors.New("loop: back-off with no pool")
	}
	if i := slices.IndexFunc(m.backoffs, func(x state.Backoff) bool { return x.Pool == b.Pool }); i >= 0 {
		m.backoffs[i] = b
		return nil
	}
	m.backoffs = append(m.backoffs, b)
	return nil
}

// DeleteBackoff forgets a pool's back-off.
func (m *Memory) DeleteBackoff(pool string) error {
	m.backoffs = slices.DeleteFunc(m.backoffs, func(x state.Backoff) bool { return x.Pool == pool })
	return nil
}

// PutDrain records a drain, in the drains in progress and in the log.
func (m *Memory) PutDrain(d state.Drain) error {
	switch {
	case d.Node == "":
		return errors.New("loop: drain with no node")
	case d.Pool == "":
		return errors.New("loop: drain of " + d.Node + ": pool is empty")
	case d.Started.IsZero() || d.Deadline.Before(d.Started):
		return errors.New("loop: drain of " + d.Node + ": expected a start and a deadline after it")
	}
	if m.drains == nil {
		m.drains = map[string]state.Drain{}
	}
	m.drains[d.Node] = d
	i := sort.Search(len(m.log), func(i int) bool { return m.log[i].Started.After(d.Started) })
	m.log = slices.Insert(m.log, i, d)
	return nil
}

// DeleteDrain forgets a node's drain (finished, cancelled, or the node is
// gone); the log keeps it.
func (m *Memory) DeleteDrain(node string) error {
	delete(m.drains, node)
	return nil
}

// DrainLog returns the drains begun at or after since, oldest first. The
// slice is the memory's own: do not modify it.
func (m *Memory) DrainLog(since time.Time) ([]state.Drain, error) {
	i := sort.Search(len(m.log), func(i int) bool { return !m.log[i].Started.Before(since) })
	return m.log[i:len(m.log):len(m.log)], nil
}

// PruneDrainLog deletes the log's entries begun before t.
func (m *Memory) PruneDrainLog(before time.Time) (int, error) {
	i := sort.Search(len(m.log), func(i int) bool { return !m.log[i].Started.Before(before) })
	m.log = slices.Delete(m.log, 0, i)
	return i, nil
}
