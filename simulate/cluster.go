package simulate

import (
	"container/heap"
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/fleetcast/autoscaler/fleet"
	"github.com/fleetcast/autoscaler/trace"
)

// Cluster is the simulator's model of a GPU cluster's jobs and scheduler,
// for a driver that owns the nodes and the clock: the `run` demo on the
// simulated cloud (package simfleet) runs its workload on it, so the demo
// and `simulate` schedule, checkpoint, drain and lose work the same way,
// with the same code. Jobs queue first come first served with backfill and
// start best fit on one node, reserved nodes first among equal fits, or on
// whole empty nodes when wider than a node; a job checkpoints on its own
// every checkpoint interval; a drained node's jobs are asked to checkpoint
// and requeue once the checkpoint is durable; a node removed under jobs
// loses their work since their last checkpoint.
//
// It is not safe for concurrent use.
type Cluster struct {
	e *engine
}

// ClusterOptions configure a Cluster.
type ClusterOptions struct {
	// Pools are the pools nodes may join.
	Pools []fleet.Pool
	// Start is the cluster's time zero.
	Start time.Time
	// CheckpointInterval is how often a running job checkpoints on its
	// own (required).
	CheckpointInterval time.Duration
	// CheckpointDuration is how long a checkpoint a drain asks for takes
	// to be durable; 0 or less: at once (unlike Options.CheckpointDuration,
	// whose 0 is the default).
	CheckpointDuration time.Duration
}

// openEnded is the work of a job that runs until it is finished.
const openEnded = math.MaxInt64 / 4

// NewCluster makes a cluster with no nodes and no jobs.
func NewCluster(o ClusterOptions) (*Cluster, error) {
	if o.CheckpointInterval <= 0 {
		return nil, fmt.Errorf("simulate: cluster checkpoint interval %v: want one above 0", o.CheckpointInterval)
	}
	if len(o.Pools) == 0 {
		return nil, fmt.Errorf("simulate: a cluster needs at least one pool")
	}
	e, err := newEngine(&trace.Trace{}, o.Pools, Options{Start: o.Start, CheckpointInterval: o.CheckpointInterval,
		CheckpointDuration: o.CheckpointDuration}, nil)
	if err != nil {
		return nil, err
	}
	return &Cluster{e: e}, nil
}

// Advance moves the cluster's clock to t, carrying out what falls due by
// then in time order (runs that end, checkpoints a drain asked for that
// become durable), and starts queued jobs that fit. A t before the clock
// only starts queued jobs.
func (c *Cluster) Advance(t time.Time) {
	e := c.e
	to := secs(t.Sub(e.opt.Start))
	for len(e.events) > 0 && e.events[0].t <= to {
		at := e.events[0].t
		e.advance(at)
		for len(e.events) > 0 && e.events[0].t == at {
			e.handle(heap.Pop(&e.events).(event))
		}
		e.schedule()
	}
	e.advance(to)
	e.schedule()
}

// AddNode adds a node of the pool, ready for work at ready (now, if that
// is earlier).
func (c *Cluster) AddNode(id, pool string, ready time.Time) error {
	if c.e.liveByID[id] != nil {
		return fmt.Errorf("simulate: node %s is in the cluster already", id)
	}
	pi := slices.IndexFunc(c.e.pools, func(p simPool) bool { return p.spec.Name == pool })
	if pi < 0 {
		return fmt.Errorf("simulate: node %s: no pool %q", id, pool)
	}
	c.e.addNode(pi, id, max(0, secs(ready.Sub(c.e.at(c.e.now)))))
	return nil
}

// RemoveNode takes a node away (terminated, reclaimed): its jobs lose
// their work since their last checkpoint and requeue.
func (c *Cluster) RemoveNode(id string) {
	if n := c.e.liveByID[id]; n != nil {
		c.e.remove(n, false)
	}
}

// Has reports whether the node is in the cluster.
func (c *Cluster) Has(id string) bool { return c.e.liveByID[id] != nil }

// Nodes returns the IDs of the nodes in the cluster, in the order they
// joined.
func (c *Cluster) Nodes() []string {
	out := make([]string, len(c.e.live))
	for i, n := range c.e.live {
		out[i] = n.id
	}
	return out
}

// Drain stops new work on an up node and asks its jobs to checkpoint.
func (c *Cluster) Drain(id string) {
	if n := c.e.liveByID[id]; n != nil {
		c.e.drain(n)
	}
}

// Undrain returns a draining node to work.
func (c *Cluster) Undrain(id string) {
	if n := c.e.liveByID[id]; n != nil {
		c.e.undrain(n)
	}
}

// Draining reports whether a node is draining.
func (c *Cluster) Draining(id string) bool {
	n := c.e.liveByID[id]
	return n != nil && n.state == draining
}

// ClusterJob is a job to submit to a Cluster.
type ClusterJob struct {
	// ID names the job in its agent's reports.
	ID string
	// GPUs is the GPUs it holds: at most a node's, or whole nodes.
	GPUs int
	// Work is how long it runs; 0: until Finish.
	Work time.Duration
	// CheckpointInterval is how often it checkpoints on its own; 0: the
	// cluster's.
	CheckpointInterval time.Duration
}

// Submit queues a job, and returns it.
func (c *Cluster) Submit(j ClusterJob) (Job, error) {
	e := c.e
	gpus := j.GPUs
	if gpus <= 0 {
		return 0, fmt.Errorf("simulate: job %s of %d GPUs: want at least 1", j.ID, gpus)
	}
	if gpus > e.maxGPN && gpus%e.maxGPN != 0 {
		return 0, fmt.Errorf("simulate: job %s of %d GPUs: wider than a node, it needs a multiple of %d", j.ID, gpus, e.maxGPN)
	}
	remaining := int64(openEnded)
	if j.Work > 0 {
		remaining = max(1, secs(j.Work))
	}
	ckpt := j.CheckpointInterval
	if ckpt <= 0 {
		ckpt = e.opt.CheckpointInterval
	}
	id := int32(len(e.jobs))
	e.jobs = append(e.jobs, job{id: j.ID, gpus: gpus, order: int(id), submit: e.now, remaining: remaining,
		ckpt: secs(ckpt), start: -1, first: -1, saveAt: -1, ask: int32(gpus) * shareMilli, part: noPart})
	for _, h := range e.classes { // the queues order by the jobs' slice
		h.jobs = e.jobs
	}
	e.left++
	e.enqueue(id)
	return Job(id), nil
}

// Job is a job in a Cluster.
type Job int32

// Finish ends a job: running, it is done; queued, it leaves the queue.
func (c *Cluster) Finish(j Job) {
	e := c.e
	x := &e.jobs[j]
	switch {
	case x.done:
	case x.start >= 0:
		e.finish(int32(j))
	default:
		h := e.classes[e.classOf(x)]
		if i := slices.Index(h.ids, int32(j)); i >= 0 {
			heap.Remove(h, i)
			e.queue(x, -x.gpus)
			e.st.waitGPUs += x.eqSeconds(e.now - x.queuedAt)
		}
		x.done = true
		e.left--
		e.st.completed++
	}
}

// JobGPUs is a job's GPUs.
func (c *Cluster) JobGPUs(j Job) int { return c.e.jobs[j].gpus }

// Running reports whether a job runs now.
func (c *Cluster) Running(j Job) bool { x := &c.e.jobs[j]; return !x.done && x.start >= 0 }

// Done reports whether a job is done.
func (c *Cluster) Done(j Job) bool { return c.e.jobs[j].done }

// Jobs is a node's jobs as its agent reports them: each job's GPUs on the
// node (a wide job holds the whole node), start and last checkpoint. The
// slice is the cluster's: do not modify it.
func (c *Cluster) Jobs(node string) []fleet.Job {
	n := c.e.liveByID[node]
	if n == nil {
		return nil
	}
	return c.e.reported(n)
}

// PendingGPUs is what the scheduler reports pending: the queued GPUs.
func (c *Cluster) PendingGPUs() int { return c.e.pendingGPUs() }

// ClusterStats are a cluster's score so far.
type ClusterStats struct {
	// Started counts jobs started (first runs), Completed jobs done, Moved
	// runs a drain's checkpoint ended (requeued with nothing lost).
	Started, Completed, Moved int
	// RunningGPUs and QueuedGPUs are held by running jobs and asked for by
	// queued ones now.
	RunningGPUs, QueuedGPUs int
	// WaitGPUHours is GPU-hours jobs spent queued (a job still queued
	// counts up to the clock).
	WaitGPUHours float64
	// LostGPUHours is work lost: GPU-hours since the last checkpoint of
	// jobs whose node went away under them.
	LostGPUHours float64
}

// Stats returns the score so far.
func (c *Cluster) Stats() ClusterStats {
	e := c.e
	wait := e.st.waitGPUs
	for _, h := range e.classes {
		for _, id := range h.ids {
			j := &e.jobs[id]
			wait += j.eqSeconds(e.now - j.queuedAt)
		}
	}
	return ClusterStats{Started: len(e.st.waits), Completed: e.st.completed, Moved: e.st.saved,
		RunningGPUs: e.runningGPUs, QueuedGPUs: e.queuedGPUs, WaitGPUHours: wait / 3600,
		LostGPUHours: (e.st.lostScaleIn + e.st.lostReclaim) / 3600}
}
