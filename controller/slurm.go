package controller

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/fleetcast/autoscaler/fleet"
	"github.com/fleetcast/autoscaler/slurm"
	"github.com/fleetcast/autoscaler/usage"
)

// SlurmSourceName is the source the Slurm queue's demand is pending under
// (DemandPush.Source), a name no push may take.
const SlurmSourceName = reservedSources + "slurm"

// SlurmSource reads a Slurm cluster's queue and nodes in the background
// (Run), every interval, and hands each whole read to the pending demand
// as the source SlurmSourceName: the pending jobs that wait for capacity, by the
// scope of pools that serve them (slurm.Snapshot.Demand), and the running
// jobs' ends. A cycle never waits for a read: it plans with the latest
// (Queue). A read that fails leaves the last whole read's demand, which
// counts as long as a push does (Pending.TTL), and makes the source
// degraded until a read succeeds; the plan says so.
type SlurmSource struct {
	reader   *slurm.Reader
	pools    []fleet.Pool
	pending  *Pending
	interval time.Duration
	now      func() time.Time
	log      hclog.Logger

	polls, errs prometheus.Counter
	seconds     prometheus.Histogram
	degraded    prometheus.Gauge
	changes     *prometheus.CounterVec
	signals     *prometheus.CounterVec

	mu sync.Mutex
	// queue is the last whole read's view, readAt when it was made, and
	// failure why the latest read failed ("" after a whole one).
	queue   fleet.Queue
	readAt  time.Time
	failure string
	// reads counts the reads finished, whole or not; failed is set when
	// the latest failed.
	reads  int
	failed bool
	// names is what the source keeps of the pools that are Slurm nodes.
	names slurmNodes
	// poke has Run read at once (Poke).
	poke chan struct{}
	// tierFrom is where a job's tier comes from ("qos" or
	// "partition"); waiting is the last whole read's jobs waiting for
	// capacity by team and tier, and jobs its running jobs' owners and
	// times by ID, for the report of who used what.
	tierFrom string
	waiting  []usage.Waiting
	jobs     map[string]slurmJob
}

// slurmJob is what a read says of a running job, for its record.
type slurmJob struct {
	team, tier, name string
	submit, eligible time.Time
}

// SlurmOptions are a SlurmSource's parts.
type SlurmOptions struct {
	Settings fleet.SlurmSettings
	// Pools are the configured pools, with the partitions each serves.
	Pools   []fleet.Pool
	Pending *Pending
	// Now is the controller's clock.
	Now func() time.Time
	Log hclog.Logger
	// Act makes the source change the pools' Slurm nodes
	// (fleet.Pool.SlurmNodes) after each read, to follow their instances
	// as the controller's cycles observe them (SetFleet), and power up
	// the names launches are bound to (Bind); false in a dry run, where
	// it only reads.
	Act bool
}

// NewSlurmSource makes a source that reads the cluster as o.Settings say.
func NewSlurmSource(o SlurmOptions) (*SlurmSource, error) {
	s := o.Settings
	switch {
	case o.Pending == nil || o.Now == nil:
		return nil, fmt.Errorf("slurm source: pending demand and clock are required")
	case s.Interval <= 0 || s.Timeout <= 0 || s.MaxOutputMiB <= 0:
		return nil, fmt.Errorf("slurm source: interval %v, timeout %v, max output %d MiB: want each above 0 (fleet.DefaultSlurmSettings has the defaults)", s.Interval, s.Timeout, s.MaxOutputMiB)
	}
	log := o.Log
	if log == nil {
		log = hclog.NewNullLogger()
	}
	return &SlurmSource{
		reader: &slurm.Reader{Squeue: s.Squeue, Sinfo: s.Sinfo, Conf: s.Conf, Timeout: s.Timeout, MaxOutput: s.MaxOutputMiB << 20},
		pools:  o.Pools, pending: o.Pending, interval: s.Interval, now: o.Now, log: log,
		polls: prometheus.NewCounter(prometheus.CounterOpts{Name: "fleetcast_slurm_reads_total",
			Help: "Reads of the Slurm cluster (squeue --json, then sinfo --json), whole or not."}),
		errs: prometheus.NewCounter(prometheus.CounterOpts{Name: "fleetcast_slurm_read_errors_total",
			Help: "Reads of the Slurm cluster that failed (a command that did not start, ran past the slurm block's timeout, printed more than its max_output_mib, exited non-zero, or printed what is not Slurm's JSON); the last whole read's demand stood."}),
		seconds: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "fleetcast_slurm_read_seconds",
			Help: "Time a read of the Slurm cluster took, whole or not.", Buckets: prometheus.ExponentialBuckets(0.01, 2, 12)}),
		degraded: prometheus.NewGauge(prometheus.GaugeOpts{Name: "fleetcast_slurm_degraded",
			Help: "1 while the latest read of the Slurm cluster failed (or none has been made yet), else 0."}),
		changes: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "fleetcast_slurm_node_changes_total",
			Help: "Changes made to the Slurm nodes of pools that are Slurm nodes (scontrol update), by op (power_up, power_down, power_down_asap, power_down_force, drain, resume, set_address) and result (ok, error)."}, []string{"op", "result"}),
		signals: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "fleetcast_slurm_job_signals_total",
			Help: "Jobs on draining Slurm nodes that no agent knows, asked to checkpoint with the slurm block's signal_jobs (scancel --signal --batch), by result (ok, error)."}, []string{"result"}),
		failure:  "not read yet",
		names:    newSlurmNodes(o, s),
		poke:     make(chan struct{}, 1),
		tierFrom: s.Tier,
	}, nil
}

// newSlurmNodes is what a source keeps of the pools that are Slurm nodes:
// with a Control where it acts on them.
func newSlurmNodes(o SlurmOptions, s fleet.SlurmSettings) slurmNodes {
	var n slurmNodes
	if !o.Act || !hasNames(o.Pools) {
		return n
	}
	for _, p := range o.Pools {
		if len(p.SlurmNodes) > 0 {
			n.pools = append(n.pools, p)
		}
	}
	n.control = &slurm.Control{Scontrol: s.Scontrol, Scancel: s.Scancel, Conf: s.Conf, Timeout: s.Timeout}
	n.bound, n.refused, n.untouched = map[string]binding{}, map[string]bool{}, map[string]string{}
	n.signal, n.signalled = s.SignalJobs, map[string]bool{}
	return n
}

// Describe and Collect make the source's metrics part of the
// controller's registry.
func (s *SlurmSource) Describe(ch chan<- *prometheus.Desc) {
	for _, c := range s.collectors() {
		c.Describe(ch)
	}
}

// Collect collects the source's metrics.
func (s *SlurmSource) Collect(ch chan<- prometheus.Metric) {
	s.mu.Lock()
	d := 0.0
	if s.failure != "" {
		d = 1
	}
	s.mu.Unlock()
	s.degraded.Set(d)
	for _, c := range s.collectors() {
		c.Collect(ch)
	}
}

func (s *SlurmSource) collectors() []prometheus.Collector {
	return []prometheus.Collector{s.polls, s.errs, s.seconds, s.degraded, s.changes, s.signals}
}

// Run reads the cluster at once, unless a read has finished already and
// not failed (Read, at start), and then every interval until ctx is done.
// Each read is bounded (the slurm block's timeout, each command), so a
// hung Slurm delays the next read, never a cycle.
func (s *SlurmSource) Run(ctx context.Context) {
	s.mu.Lock()
	again := s.reads == 0 || s.failed
	s.mu.Unlock()
	if again {
		s.Read(ctx)
	}
	tick := time.NewTicker(s.interval)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		case <-s.poke:
		}
		s.Read(ctx)
	}
}

// Read reads the cluster once and, if the read is whole, hands its demand
// to the pending demand, with a whole node for each node Slurm powers up
// for its jobs with no instance behind it, and, where the source acts on
// pools of Slurm nodes, makes the changes that have them follow their
// instances (slurm.Sync); it returns the read's error. The first failure
// after a whole read is a warning in the log, as is the first whole read
// after failures.
func (s *SlurmSource) Read(ctx context.Context) error {
	start := time.Now()
	snap, err := s.reader.Read(ctx)
	took := time.Since(start)
	at := s.now()
	s.polls.Inc()
	s.seconds.Observe(took.Seconds())
	s.mu.Lock()
	var work nodeWork
	defer func() {
		s.mu.Unlock()
		s.do(ctx, work)
	}()
	s.reads++
	failedBefore := s.failed
	s.failed = err != nil
	if err != nil {
		s.errs.Inc()
		if !failedBefore {
			s.log.Warn("slurm read failed: the source is degraded; its last whole read's demand counts for as long as a push does", "error", err, "took", took)
		} else {
			s.log.Debug("slurm read failed", "error", err, "took", took)
		}
		s.failure = err.Error()
		return err
	}
	d := snap.Demand(s.pools, s.tierFrom)
	work = s.syncNodes(snap.Nodes, snap.Jobs, at)
	push := DemandPush{Source: SlurmSourceName, Pending: make([]PendingDemand, 0, len(d.Pending)), Running: make([]RunningJob, 0, len(d.Ends))}
	for _, l := range d.Pending {
		push.Pending = append(push.Pending, PendingDemand{GPUModel: l.GPUModel, Partition: l.Partition,
			MinGPUsPerNode: l.MinGPUsPerNode, Nodes: l.Nodes, GPUs: l.GPUs, Tier: l.Tier, Team: l.Team})
	}
	push.Pending = append(push.Pending, s.requestedDemand()...)
	for _, e := range d.Ends {
		push.Running = append(push.Running, RunningJob{Job: e.Job, ExpectedEnd: e.At})
	}
	s.pending.Set(at, push)
	// Slurm's time limits, as they are now: an administrator may raise
	// one.
	s.pending.setRunning(at, push, false)
	if failedBefore {
		s.log.Warn("slurm read whole again: the source is no longer degraded", "version", snap.Version)
	}
	if len(snap.Missing) > 0 && !slices.Equal(snap.Missing, s.queue.Missing) {
		s.log.Warn("slurm's answers lack fields, taken as unknown", "fields", snap.Missing, "version", snap.Version)
	}
	s.waiting, s.jobs = s.owners(snap.Jobs)
	s.queue, s.readAt, s.failure = d.Queue, at, ""
	s.queue.ReadAt = at
	return nil
}

// Poke has Run read the cluster now rather than at the next interval
// (Slurm's ResumeProgram asked for nodes); a read already asked for
// counts.
func (s *SlurmSource) Poke() {
	select {
	case s.poke <- struct{}{}:
	default:
	}
}

// Reads is how many reads have finished, whole or not.
func (s *SlurmSource) Reads() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.reads
}

// Queue is the view of the last whole read at now, with why the latest
// failed (Degraded) and whether its demand has expired, for a plan; its
// lines are the caller's.
func (s *SlurmSource) Queue(now time.Time) *fleet.Queue {
	s.mu.Lock()
	defer s.mu.Unlock()
	q := s.queue
	q.Source = "slurm"
	q.Pending, q.Nodes, q.Missing = slices.Clone(q.Pending), slices.Clone(q.Nodes), slices.Clone(q.Missing)
	q.Degraded = s.failure
	q.Expired = !s.readAt.IsZero() && now.Sub(s.readAt) > s.pending.ttl()
	return &q
}

// owners are the jobs of a read waiting for capacity, by team (their
// account), tier (their QOS or partition, as the slurm block's tier
// says) and partition, and its jobs' owners and times by ID (those
// pending too: they may start before the next read). A label no report
// could carry (fleet.ValidLabel) is left unattributed.
func (s *SlurmSource) owners(jobs []slurm.Job) ([]usage.Waiting, map[string]slurmJob) {
	label := func(v string) string {
		if fleet.ValidLabel(v) != "" {
			return ""
		}
		return v
	}
	type key struct{ team, tier, partition string }
	at := map[key]int{}
	var waiting []usage.Waiting
	running := map[string]slurmJob{}
	for i := range jobs {
		j := &jobs[i]
		tier := j.QOS
		if s.tierFrom == "partition" {
			tier = j.Partition
		}
		team, tier := label(j.Account), label(tier)
		// A job pending now may run by the next cycle, before the next
		// read: its owners are kept too.
		running[j.ID] = slurmJob{team: team, tier: tier, name: label(j.Name), submit: j.Submit, eligible: j.Eligible}
		if j.Pending() && slurm.Waiting(j.Reason) && j.GPUs() > 0 {
			k := key{team, tier, j.Partition}
			n, ok := at[k]
			if !ok {
				n = len(waiting)
				w := usage.Waiting{Team: team, Tier: tier}
				if !strings.Contains(j.Partition, ",") && s.byPartition() {
					w.Scope.Partition = j.Partition
				}
				waiting = append(waiting, w)
				at[k] = n
			}
			waiting[n].GPUs = min(waiting[n].GPUs+j.GPUs(), fleet.MaxDemandGPUs)
			waiting[n].Jobs += max(j.Tasks, 1)
		}
	}
	return waiting, running
}

// byPartition reports whether the pools name the partitions they serve.
func (s *SlurmSource) byPartition() bool {
	return slices.ContainsFunc(s.pools, func(p fleet.Pool) bool { return len(p.Partitions) > 0 })
}

// Waiting is the last whole read's jobs waiting for capacity, by team and
// tier; none once its demand has expired (as a push's would).
func (s *SlurmSource) Waiting(now time.Time) []usage.Waiting {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.readAt.IsZero() || now.Sub(s.readAt) > s.pending.ttl() {
		return nil
	}
	return slices.Clone(s.waiting)
}

// Label fills in what the last whole read says of the jobs on a node that
// their agents left out: each running Slurm job's team, tier and name,
// and when it was submitted and became eligible. An agent's own labels
// stand.
func (s *SlurmSource) Label(n *fleet.Node) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for i := range n.Jobs {
		j := &n.Jobs[i]
		x, ok := s.jobs[j.ID]
		if !ok {
			continue
		}
		if j.Team == "" {
			j.Team = x.team
		}
		if j.Tier == "" {
			j.Tier = x.tier
		}
		if j.Name == "" {
			j.Name = x.name
		}
		if j.Submitted.IsZero() {
			j.Submitted = x.submit
		}
		if j.Eligible.IsZero() {
			j.Eligible = x.eligible
		}
	}
}
