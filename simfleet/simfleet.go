// Package simfleet is the workload behind the local default: jobs that
// follow the config's synthetic demand, a first-fit scheduler that places
// them on the simulated cloud's nodes, and an agent on every node that
// reports to the controller as a real one would, checkpoints its jobs on a
// schedule, and on a drain request has them checkpoint and move elsewhere.
// It keeps the score: work lost to a node removed under running jobs
// (which must stay zero) and GPU-hours jobs spent waiting.
package simfleet

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/fleetcast/autoscaler/agent/report"
	"github.com/fleetcast/autoscaler/config"
	"github.com/fleetcast/autoscaler/controller"
	"github.com/fleetcast/autoscaler/fleet"
	"github.com/fleetcast/autoscaler/providers"
	"github.com/fleetcast/autoscaler/providers/sim"
	"github.com/fleetcast/autoscaler/state"
)

// Options configure a Fleet.
type Options struct {
	Pools []fleet.Pool
	// Cloud is the simulated cloud the pools run on.
	Cloud    providers.Provider
	Workload sim.Workload
	// CheckpointEvery is how often a running job checkpoints on its own.
	CheckpointEvery time.Duration
	// Reports takes the agents' reports (the controller's agents view).
	Reports report.Store
	// Pending is told the GPUs of jobs waiting to be placed, each step.
	Pending func(now time.Time, gpus int)
	Seed    int64
}

// Fleet is the simulated jobs, scheduler and agents. It is not safe for
// concurrent use: call Step from one goroutine.
type Fleet struct {
	o     Options
	rng   *rand.Rand
	jobs  []*job // every job, queued or running, oldest first
	nodes map[string]*node
	next  int
	last  time.Time
	stats Stats
}

type job struct {
	id       string
	gpus     int
	start    time.Time
	ckpt     time.Time // last checkpoint; zero: never
	node     string    // "" while queued
	gpuIndex []int
	queuedAt time.Time
}

// lastSaved is where the job would restart from: its last checkpoint, or
// its start.
func (j *job) lastSaved() time.Time { return later(j.ckpt, j.start) }

func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

type node struct {
	id       string
	pool     *fleet.Pool
	free     []bool // free[i]: GPU i is free
	draining string // the ID of the drain the node holds; "" if none
}

// Stats are the workload's score so far.
type Stats struct {
	// LostGPUHours is work lost: GPU-hours since the last checkpoint of
	// jobs whose node went away under them.
	LostGPUHours float64
	// WaitGPUHours is GPU-hours jobs spent queued.
	WaitGPUHours float64
	// Jobs started, completed and moved by drains.
	Started, Completed, Moved int
	// DemandGPUs and RunningGPUs are the last step's demand and the GPUs
	// held by running jobs.
	DemandGPUs, RunningGPUs int
}

// New makes a fleet with no jobs; the first Step creates them.
func New(o Options) (*Fleet, error) {
	if o.Cloud == nil || o.Reports == nil || o.Pending == nil || o.CheckpointEvery <= 0 {
		return nil, fmt.Errorf("simfleet: cloud, reports, pending and a positive checkpoint interval are required")
	}
	return &Fleet{o: o, rng: rand.New(rand.NewPCG(uint64(o.Seed), 0x51f1ee7)), nodes: map[string]*node{}}, nil
}

// Stats returns the score so far.
func (f *Fleet) Stats() Stats { return f.stats }

// Step advances the workload to now: nodes that came up join, nodes that
// went away lose the work on them since its last checkpoint, demand is
// met by new or finished jobs, draining nodes' jobs checkpoint and move,
// queued jobs are placed, and every node's agent reports.
func (f *Fleet) Step(ctx context.Context, now time.Time) error {
	if err := f.sync(ctx, now); err != nil {
		return err
	}
	f.follow(now)
	for _, j := range f.jobs {
		if j.node != "" && now.Sub(j.lastSaved()) >= f.o.CheckpointEvery {
			j.ckpt = now
		}
		if j.node == "" && !f.last.IsZero() {
			f.stats.WaitGPUHours += float64(j.gpus) * now.Sub(later(f.last, j.queuedAt)).Hours()
		}
	}
	f.place(now)
	f.last = now
	queued := 0
	f.stats.RunningGPUs = 0
	for _, j := range f.jobs {
		if j.node == "" {
			queued += j.gpus
		} else {
			f.stats.RunningGPUs += j.gpus
		}
	}
	f.o.Pending(now, queued)
	return f.report(ctx, now)
}

// sync follows the cloud: running instances become nodes; nodes gone take
// their jobs' work since the last checkpoint with them.
func (f *Fleet) sync(ctx context.Context, now time.Time) error {
	seen := map[string]bool{}
	for i := range f.o.Pools {
		p := &f.o.Pools[i]
		g, err := f.o.Cloud.Describe(ctx, *p)
		if err != nil {
			return fmt.Errorf("simfleet: %w", err)
		}
		for _, in := range g.Instances {
			if in.State != providers.InstanceRunning {
				continue
			}
			seen[in.ID] = true
			if f.nodes[in.ID] == nil {
				f.nodes[in.ID] = &node{id: in.ID, pool: p, free: slices.Repeat([]bool{true}, p.GPUsPerNode)}
			}
		}
	}
	for id := range f.nodes {
		if seen[id] {
			continue
		}
		for _, j := range f.jobs {
			if j.node == id {
				f.stats.LostGPUHours += float64(j.gpus) * now.Sub(j.lastSaved()).Hours()
				j.node, j.gpuIndex, j.queuedAt = "", nil, now
			}
		}
		delete(f.nodes, id)
	}
	return nil
}

// follow adds jobs (1 to 8 GPUs) until the jobs' GPUs meet the demand, or
// completes running jobs (then queued ones), oldest first, while they
// exceed it.
func (f *Fleet) follow(now time.Time) {
	demand := int(f.o.Workload.At(now))
	f.stats.DemandGPUs = demand
	total := 0
	for _, j := range f.jobs {
		total += j.gpus
	}
	for total < demand {
		g := min(1+f.rng.IntN(8), demand-total)
		f.next++
		f.jobs = append(f.jobs, &job{id: fmt.Sprintf("job-%06d", f.next), gpus: g, queuedAt: now})
		total += g
	}
	for total > demand {
		i := slices.IndexFunc(f.jobs, func(j *job) bool { return j.node != "" })
		if i < 0 {
			i = 0
		}
		j := f.jobs[i]
		if total-j.gpus < demand && j.gpus > 1 {
			break // finishing it would undershoot by more than it overshoots
		}
		f.release(j)
		f.jobs = slices.Delete(f.jobs, i, i+1)
		total -= j.gpus
		f.stats.Completed++
	}
}

func (f *Fleet) release(j *job) {
	if n := f.nodes[j.node]; n != nil {
		for _, g := range j.gpuIndex {
			n.free[g] = true
		}
	}
	j.node, j.gpuIndex = "", nil
}

// place moves draining nodes' jobs back to the queue (they checkpointed as
// asked) and places queued jobs first fit on nodes that are not draining,
// in node order.
func (f *Fleet) place(now time.Time) {
	for _, j := range f.jobs {
		if n := f.nodes[j.node]; n != nil && n.draining != "" {
			j.ckpt = now
			f.release(j)
			j.queuedAt = now
			f.stats.Moved++
		}
	}
	ids := make([]string, 0, len(f.nodes))
	for id, n := range f.nodes {
		if n.draining == "" {
			ids = append(ids, id)
		}
	}
	slices.Sort(ids)
	for _, j := range f.jobs {
		if j.node != "" {
			continue
		}
		for _, id := range ids {
			n := f.nodes[id]
			var idx []int
			for g, free := range n.free {
				if free && len(idx) < j.gpus {
					idx = append(idx, g)
				}
			}
			if len(idx) < j.gpus {
				continue
			}
			for _, g := range idx {
				n.free[g] = false
			}
			j.node, j.gpuIndex = id, idx
			if j.start.IsZero() {
				j.start = now
				f.stats.Started++
			}
			break
		}
	}
}

// report sends every node's report and takes up the drain the controller
// answers with (or its absence: a drain cancelled).
func (f *Fleet) report(ctx context.Context, now time.Time) error {
	byNode := map[string][]report.Job{}
	for _, j := range f.jobs {
		if j.node != "" {
			byNode[j.node] = append(byNode[j.node], report.Job{ID: j.id, GPUs: j.gpuIndex, Start: j.start, LastCheckpoint: j.ckpt, LongRunning: true})
		}
	}
	for id, n := range f.nodes {
		r := &report.Report{Node: id, SentAt: now, Healthy: true, Jobs: byNode[id], Drain: report.DrainStatus{State: report.NotDraining}}
		for g := range n.free {
			r.GPUs = append(r.GPUs, report.GPU{Index: g, UUID: fmt.Sprintf("GPU-%s-%d", id, g), Name: n.pool.GPUModel, MemoryTotal: 80 << 30})
		}
		if n.draining != "" {
			r.Drain.State, r.Drain.ID = report.SafeToTerminate, n.draining
			if len(r.Jobs) > 0 {
				r.Drain.State = report.Draining
			}
		}
		ans, err := f.o.Reports.Accept(ctx, r)
		if err != nil {
			return fmt.Errorf("simfleet: report from %s: %w", id, err)
		}
		n.draining = ""
		if ans.Drain != nil {
			n.draining = ans.Drain.ID
		}
	}
	return nil
}

// SeedHistory records the workload's demand over length before now, a
// sample a step, as the controller's demand history: the local default
// then forecasts from its first cycle. A store that already holds a
// history is left as it is.
func SeedHistory(s *state.Store, w sim.Workload, now time.Time, step, length time.Duration) error {
	names, err := s.DemandSeries()
	if err != nil || len(names) > 0 {
		return err
	}
	h := w.History(now, step, length)
	samples := make([]state.Sample, len(h.Values))
	for i, v := range h.Values {
		samples[i] = state.Sample{Time: h.Start.Add(time.Duration(i) * step), Value: v}
	}
	return s.AppendDemand(controller.DemandSeries, samples...)
}

// PendingTo returns a Pending function that pushes the queued GPUs to the
// controller as the scheduler "simfleet" would, for the GPU model of the
// config's first pool.
func PendingTo(p *controller.Pending, cfg *config.Config) func(time.Time, int) {
	line := controller.PendingDemand{Pool: cfg.Pools[0].Name}
	return func(now time.Time, gpus int) {
		line.GPUs = gpus
		p.Set(now, controller.DemandPush{Source: "simfleet", Pending: []controller.PendingDemand{line}})
	}
}
