// Package simfleet is the workload behind the local default: jobs that
// follow the config's synthetic demand, run by the simulator's own cluster
// model (simulate.Cluster: the same scheduler, checkpoints, drains and lost
// work as `simulate`) on the simulated cloud's nodes, and an agent on
// every node that reports to the controller as a real one would and takes
// up the drain the controller answers with. It keeps the score: work lost
// to a node removed under running jobs (which must stay zero) and
// GPU-hours jobs spent waiting.
package simfleet

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"time"

	"github.com/fleetcast/autoscaler/agent/report"
	"github.com/fleetcast/autoscaler/fleet"
	"github.com/fleetcast/autoscaler/loop"
	"github.com/fleetcast/autoscaler/providers"
	"github.com/fleetcast/autoscaler/providers/sim"
	"github.com/fleetcast/autoscaler/simulate"
	"github.com/fleetcast/autoscaler/state"
	"github.com/fleetcast/autoscaler/trace"
)

// Options configure a Fleet.
type Options struct {
	Pools []fleet.Pool
	// Cloud is the simulated cloud the pools run on.
	Cloud    providers.Provider
	Workload sim.Workload
	// Trace, if set, replaces Workload: its jobs are submitted at their
	// submit times from Start, each running for its duration.
	Trace *trace.Trace
	// Start is the workload's time zero: the first Step's time, or
	// before it (required).
	Start time.Time
	// CheckpointEvery is how often a running job checkpoints on its own.
	CheckpointEvery time.Duration
	// CheckpointDuration is how long a checkpoint a drain asks for takes
	// to be durable; 0: at once.
	CheckpointDuration time.Duration
	// Reports takes the agents' reports (the controller's agents view).
	Reports report.Store
	// Pending is told the GPUs of jobs the scheduler cannot place, each
	// step.
	Pending func(now time.Time, gpus int)
	Seed    int64
}

// Fleet is the simulated jobs, scheduler and agents. It is not safe for
// concurrent use: call Step from one goroutine.
type Fleet struct {
	o       Options
	rng     *rand.Rand
	cluster *simulate.Cluster
	jobs    []simulate.Job // every job not finished, oldest first
	// draining is the drain each node's agent holds, and pools the pool
	// of each, by node.
	draining map[string]string
	pools    map[string]*fleet.Pool
	demand   int
	// submitted counts the trace's jobs submitted; next numbers the
	// workload's jobs.
	submitted, next int
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
	if o.Cloud == nil || o.Reports == nil || o.Pending == nil || o.CheckpointEvery <= 0 || o.Start.IsZero() {
		return nil, fmt.Errorf("simfleet: cloud, reports, pending, a start time and a positive checkpoint interval are required")
	}
	c, err := simulate.NewCluster(simulate.ClusterOptions{Pools: o.Pools, Start: o.Start, CheckpointInterval: o.CheckpointEvery,
		CheckpointDuration: o.CheckpointDuration})
	if err != nil {
		return nil, fmt.Errorf("simfleet: %w", err)
	}
	return &Fleet{o: o, rng: rand.New(rand.NewPCG(uint64(o.Seed), 0x51f1ee7)), cluster: c, draining: map[string]string{}, pools: map[string]*fleet.Pool{}}, nil
}

// Stats returns the score so far.
func (f *Fleet) Stats() Stats {
	s := f.cluster.Stats()
	return Stats{LostGPUHours: s.LostGPUHours, WaitGPUHours: s.WaitGPUHours, Started: s.Started, Completed: s.Completed, Moved: s.Moved,
		DemandGPUs: f.demand, RunningGPUs: s.RunningGPUs}
}

// Step advances the workload to now: nodes that came up join at the time
// they were ready, nodes that went away lose the work on them since its
// last checkpoint, what fell due runs its course in time order (runs that
// end, checkpoints a drain asked for that become durable), demand is met
// by new or finished jobs, queued jobs are placed, and every node's agent
// reports and takes up the controller's answer (and the scheduler places
// what that freed).
func (f *Fleet) Step(ctx context.Context, now time.Time) error {
	if err := f.sync(ctx); err != nil {
		return err
	}
	f.cluster.Advance(now)
	if f.o.Trace != nil {
		if err := f.replay(now); err != nil {
			return err
		}
	} else {
		f.follow(now)
	}
	f.cluster.Advance(now)
	f.o.Pending(now, f.cluster.PendingGPUs())
	if err := f.report(ctx, now); err != nil {
		return err
	}
	// The scheduler places at once what the answers freed: jobs a drain
	// stopped (a checkpoint durable at once), nodes whose drain was
	// cancelled.
	f.cluster.Advance(now)
	return nil
}

// sync follows the cloud: running instances become nodes, ready from when
// their lead time passed, in the order they were launched; nodes gone take
// their jobs' work since the last checkpoint with them.
func (f *Fleet) sync(ctx context.Context) error {
	type joining struct {
		id    string
		pool  *fleet.Pool
		ready time.Time
	}
	var join []joining
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
			if !f.cluster.Has(in.ID) {
				join = append(join, joining{in.ID, p, in.LaunchedAt.Add(p.LeadTime)})
			}
		}
	}
	for _, id := range f.cluster.Nodes() {
		if !seen[id] {
			f.cluster.RemoveNode(id)
			delete(f.draining, id)
			delete(f.pools, id)
		}
	}
	slices.SortFunc(join, func(a, b joining) int {
		if c := a.ready.Compare(b.ready); c != 0 {
			return c
		}
		return strings.Compare(a.id, b.id)
	})
	for _, j := range join {
		if err := f.cluster.AddNode(j.id, j.pool.Name, j.ready); err != nil {
			return fmt.Errorf("simfleet: %w", err)
		}
		f.pools[j.id] = j.pool
	}
	return nil
}

// follow adds jobs (1 to 8 GPUs) until the jobs' GPUs meet the demand, or
// finishes running jobs (then queued ones), oldest first, while they
// exceed it.
func (f *Fleet) follow(now time.Time) {
	f.demand = int(f.o.Workload.At(now))
	total := 0
	for _, j := range f.jobs {
		total += f.cluster.JobGPUs(j)
	}
	for total < f.demand {
		f.next++
		j, err := f.cluster.Submit(simulate.ClusterJob{ID: fmt.Sprintf("job-%06d", f.next), GPUs: min(1+f.rng.IntN(8), f.demand-total)})
		if err != nil {
			panic(err) // 1 to 8 GPUs always fits an 8-GPU pool's node
		}
		f.jobs = append(f.jobs, j)
		total += f.cluster.JobGPUs(j)
	}
	for total > f.demand {
		i := slices.IndexFunc(f.jobs, f.cluster.Running)
		if i < 0 {
			i = 0
		}
		j := f.jobs[i]
		g := f.cluster.JobGPUs(j)
		if total-g < f.demand && g > 1 {
			break // finishing it would undershoot by more than it overshoots
		}
		f.cluster.Finish(j)
		f.jobs = slices.Delete(f.jobs, i, i+1)
		total -= g
	}
}

// replay submits the trace's jobs due by now.
func (f *Fleet) replay(now time.Time) error {
	for ; f.submitted < len(f.o.Trace.Jobs); f.submitted++ {
		tj := &f.o.Trace.Jobs[f.submitted]
		if f.o.Start.Add(tj.Submit).After(now) {
			break
		}
		if tj.Duration <= 0 {
			continue // it holds no GPUs: done when submitted, as in simulate
		}
		if _, err := f.cluster.Submit(simulate.ClusterJob{ID: tj.ID, GPUs: tj.GPUs, Work: tj.Duration, CheckpointInterval: tj.CheckpointInterval}); err != nil {
			return fmt.Errorf("simfleet: %w", err)
		}
	}
	f.demand = f.cluster.Stats().RunningGPUs + f.cluster.Stats().QueuedGPUs
	return nil
}

// report sends every node's report and takes up the drain the controller
// answers with (or its absence: a drain cancelled). A node reports the
// drain it held before this report: safe to terminate once its jobs have
// left.
func (f *Fleet) report(ctx context.Context, now time.Time) error {
	type answer struct {
		node  string
		drain *report.DrainRequest
	}
	var answers []answer
	for _, id := range f.cluster.Nodes() {
		pool := f.pools[id]
		jobs := f.cluster.Jobs(id)
		r := &report.Report{Node: id, SentAt: now, Healthy: true, Drain: report.DrainStatus{State: report.NotDraining}}
		next := 0
		for _, j := range jobs {
			idx := make([]int, j.GPUs)
			for k := range idx {
				idx[k] = next + k
			}
			next += j.GPUs
			// Long-running as the controller's drain.long_running_after
			// judges it: the simulated agent knows no more.
			r.Jobs = append(r.Jobs, report.Job{ID: j.ID, GPUs: idx, Start: j.Start, LastCheckpoint: j.LastCheckpoint})
		}
		for g := range pool.GPUsPerNode {
			r.GPUs = append(r.GPUs, report.GPU{Index: g, UUID: fmt.Sprintf("GPU-%s-%d", id, g), Name: pool.GPUModel, MemoryTotal: 80 << 30})
		}
		if d := f.draining[id]; d != "" {
			r.Drain.State, r.Drain.ID = report.SafeToTerminate, d
			if len(r.Jobs) > 0 {
				r.Drain.State = report.Draining
			}
		}
		ans, err := f.o.Reports.Accept(ctx, r)
		if err != nil {
			return fmt.Errorf("simfleet: report from %s: %w", id, err)
		}
		answers = append(answers, answer{id, ans.Drain})
	}
	// Every agent reports as things stand, then takes up its answer: a
	// drain on one node does not change what a node it shares a wide job
	// with reports this step.
	for _, a := range answers {
		switch {
		case a.drain != nil && f.draining[a.node] == "":
			f.draining[a.node] = a.drain.ID
			f.cluster.Drain(a.node)
		case a.drain == nil && f.draining[a.node] != "":
			delete(f.draining, a.node)
			f.cluster.Undrain(a.node)
		case a.drain != nil:
			f.draining[a.node] = a.drain.ID
		}
	}
	return nil
}

// SeedHistory records the workload's demand over length before now, a
// sample a step, as the controller's demand history (through
// loop.Import, into a history that holds none: every sample is
// recorded): the local default then forecasts from its first cycle. A
// store that already holds a history is left as it is.
func SeedHistory(s state.Records, w sim.Workload, now time.Time, step, length time.Duration) error {
	names, err := s.DemandSeries()
	if err != nil || len(names) > 0 {
		return err
	}
	h := w.History(now, step, length)
	samples := make([]state.Sample, len(h.Values))
	for i, v := range h.Values {
		samples[i] = state.Sample{Time: h.Start.Add(time.Duration(i) * step), Value: v}
	}
	_, _, err = loop.Import(s, step, samples...)
	return err
}
