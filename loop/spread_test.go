package loop

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/fleetcast/autoscaler/fleet"
	"github.com/fleetcast/autoscaler/planner"
	"github.com/fleetcast/autoscaler/state"
)

// spreadFleet is a fleet of 8-GPU nodes running 1-GPU jobs that its
// scheduler places least allocated first (Kubernetes' default scoring),
// which leaves every node busy with free GPUs. A job that arrives is seen
// pending for one cycle (the scheduler's latency), then placed; arrivals
// replace jobs that end, so the jobs held stay level. Nodes boot in 5
// minutes; a drained node's jobs (which checkpoint every cycle) are placed
// elsewhere at once, and it confirms its drain at the next report.
type spreadFleet struct {
	nodes   []*spreadNode
	pending int // arrived this cycle, placed at the next
	// every is how many cycles apart a job ends and another arrives.
	every, cycle int
	seq          int
}

type spreadNode struct {
	id       string
	ready    time.Time
	jobs     int
	draining time.Time // zero: not draining
}

func (f *spreadFleet) place(now time.Time, n int) {
	for range n {
		var best *spreadNode
		for _, x := range f.nodes {
			if x.ready.After(now) || !x.draining.IsZero() || x.jobs >= 8 {
				continue
			}
			if best == nil || x.jobs < best.jobs {
				best = x
			}
		}
		if best == nil {
			f.pending++
			continue
		}
		best.jobs++
	}
}

func (f *spreadFleet) Commit(context.Context, time.Time) ([]string, error) { return nil, nil }

func (f *spreadFleet) Observe(_ context.Context, now time.Time) (Observation, error) {
	waiting := f.pending
	f.pending = 0
	f.place(now, waiting)
	f.cycle++
	if f.cycle%f.every == 0 {
		// A job ends, another arrives: pending until the next cycle.
		for _, x := range f.nodes {
			if x.jobs > 0 && x.draining.IsZero() {
				x.jobs--
				break
			}
		}
		f.pending++
	}
	st := &fleet.State{CapturedAt: now, Pools: []fleet.PoolStatus{{Name: "od"}}, PendingGPUs: f.pending}
	for _, x := range f.nodes {
		n := fleet.Node{ID: x.id, Pool: "od", LaunchedAt: x.ready.Add(-5 * time.Minute), State: fleet.Ready, LastReport: now}
		switch {
		case x.ready.After(now):
			n.State, n.LastReport = fleet.Pending, time.Time{}
		case !x.draining.IsZero():
			n.State, n.DrainStartedAt, n.DrainAcked, n.DrainConfirmed = fleet.Draining, x.draining, true, x.jobs == 0
		}
		for k := range x.jobs {
			n.Jobs = append(n.Jobs, fleet.Job{ID: fmt.Sprint(x.id, "-", k), GPUs: 1, Start: now.Add(-time.Hour), LastCheckpoint: now})
		}
		st.Nodes = append(st.Nodes, n)
	}
	return Observation{State: st}, nil
}

func (f *spreadFleet) Launch(_ context.Context, _ string, count int) error {
	for range count {
		f.seq++
		f.nodes = append(f.nodes, &spreadNode{id: fmt.Sprint("n", f.seq), ready: time.Time{}})
	}
	return nil
}

func (f *spreadFleet) Terminate(_ context.Context, _ time.Time, a *planner.Action) error {
	f.nodes = slices.DeleteFunc(f.nodes, func(x *spreadNode) bool { return x.id == a.Node })
	return nil
}

func (f *spreadFleet) Drain(_ context.Context, d state.Drain) error {
	for _, x := range f.nodes {
		if x.id == d.Node {
			x.draining = d.Started
			moved := x.jobs
			x.jobs = 0
			f.place(d.Started, moved)
		}
	}
	return nil
}

func (f *spreadFleet) CancelDrain(_ context.Context, _ time.Time, a *planner.Action) error {
	for _, x := range f.nodes {
		if x.id == a.Node {
			x.draining = time.Time{}
		}
	}
	return nil
}

// TestSpreadJobsDoNotRatchet: with 1-GPU jobs spread over every node and
// a job pending for a cycle now and then, or every cycle, the demand the
// loop records stays within a node of the jobs held, and so does the
// fleet: a pending moment does not teach the forecast every busy node's
// free GPUs, which the capacity bought for them would grow without end.
func TestSpreadJobsDoNotRatchet(t *testing.T) {
	for _, every := range []int{10, 1} {
		t.Run(fmt.Sprint("a job pending every ", every, " cycle(s)"), func(t *testing.T) {
			const jobs = 60
			cfg := testSettings()
			books := &state.Memory{}
			l, err := New(Options{Settings: cfg, Books: books})
			if err != nil {
				t.Fatal(err)
			}
			f := &spreadFleet{every: every}
			now := t0
			for range 8 {
				f.nodes = append(f.nodes, &spreadNode{id: fmt.Sprint("s", len(f.nodes)), ready: now.Add(-time.Hour)})
			}
			f.place(now, jobs)
			most := 0
			for range 2 * 24 * 60 {
				now = now.Add(time.Minute)
				// Launched nodes boot for 5 minutes from their first cycle.
				for _, x := range f.nodes {
					if x.ready.IsZero() {
						x.ready = now.Add(5 * time.Minute)
					}
				}
				if _, err := l.Cycle(context.Background(), f, now); err != nil {
					t.Fatal(err)
				}
				most = max(most, len(f.nodes))
			}
			samples, _ := books.Demand(DemandSeries, time.Time{})
			peak := 0.0
			for _, s := range samples {
				peak = max(peak, s.Value)
			}
			// Held and pending are at most jobs + 1. A job pending for one
			// cycle adds no free GPUs; one pending every cycle (some job is
			// always pending) adds at most the rest of a node.
			limit := float64(jobs + 1)
			if every == 1 {
				limit += 7
			}
			if peak > limit {
				t.Errorf("recorded demand peaks at %v GPUs for %d 1-GPU jobs; want at most %v", peak, jobs, limit)
			}
			if limit := jobs/8 + 4; most > limit {
				t.Errorf("the fleet grew to %d nodes for %d 1-GPU jobs on 8-GPU nodes; want at most %d", most, jobs, limit)
			}
		})
	}
}
