// Package fleet is the shared vocabulary of Fleetcast: pools, nodes, jobs,
// demand series and fleet snapshots. Every other package speaks it; it depends
// on nothing but the standard library.
package fleet

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"
)

// CapacityType is how a pool's instances are bought.
type CapacityType string

// The capacity types a pool can have.
const (
	// Reserved capacity (capacity reservations, committed use, capacity
	// blocks) is paid for whether it is used or not.
	Reserved CapacityType = "reserved"
	// OnDemand capacity is paid per second while it runs.
	OnDemand CapacityType = "on_demand"
	// Spot capacity is cheaper on-demand capacity that the cloud may reclaim.
	Spot CapacityType = "spot"
)

// Valid reports whether c is one of the known capacity types.
func (c CapacityType) Valid() bool {
	return c == Reserved || c == OnDemand || c == Spot
}

// Pool is a homogeneous group of instances behind one cloud object (an Auto
// Scaling group, a managed instance group, a plugin target, a simulated group).
type Pool struct {
	// Name is unique within a config.
	Name string `json:"name"`
	// Provider names the provider that drives the pool: ProviderAWS,
	// ProviderGCP, ProviderSim or ProviderPlugin.
	Provider string `json:"provider"`
	// Region and Zones say where the instances run.
	Region string   `json:"region,omitempty"`
	Zones  []string `json:"zones,omitempty"`
	// InstanceType is the cloud's machine type, e.g. p5.48xlarge.
	InstanceType string `json:"instance_type"`
	// GPUModel is the GPUs' model, e.g. H100: demand pushed for a GPU
	// model is served by its pools (ScopedDemand).
	GPUModel string `json:"gpu_model,omitempty"`
	// GPUsPerNode is the number of GPUs one instance has (at least 1).
	GPUsPerNode int `json:"gpus_per_node"`
	// Capacity is how the instances are bought.
	Capacity CapacityType `json:"capacity"`
	// PricePerHour is the price of one instance-hour in USD.
	PricePerHour float64 `json:"price_per_hour"`
	// LeadTime is how long an instance takes from launch until its GPUs are ready.
	LeadTime time.Duration `json:"lead_time"`
	// ProvisionTimeout is how long a launching node counts as capacity; a node
	// still not ready after it is terminated and the pool backed off.
	ProvisionTimeout time.Duration `json:"provision_timeout"`
	// Min and Max bound the number of nodes. For a reserved pool Max is the
	// size of the reservation, which is paid for whether used or not.
	Min int `json:"min"`
	Max int `json:"max"`
	// Priority breaks ties between pools of equal price per GPU: higher first.
	Priority int `json:"priority"`
	// MIG, when set, is the GPU instances each of the pool's GPUs is
	// partitioned into, by MIG profile (its mig { layout }: package mig
	// checks that the GPU model holds it); none: whole GPUs.
	MIG []string `json:"mig,omitempty"`
	// Partitions are the scheduler's partitions (Slurm's) whose jobs the
	// pool's nodes serve: demand pending in a partition is bought for in
	// its pools only (ScopedDemand.Partition). Empty for none.
	Partitions []string `json:"partitions,omitempty"`
	// SlurmNodes, when set, are the Slurm nodes (State=CLOUD in
	// slurm.conf) the pool's instances are, by name: an instance whose ID
	// is one of them is that node, which the controller powers up in
	// Slurm while the instance lives, drains in Slurm while it drains,
	// and powers down once it is gone.
	SlurmNodes []string `json:"slurm_nodes,omitempty"`
	// Settings are the provider's own settings for the pool, decoded from
	// the pool's provider block (aws, gcp, sim or plugin) by that
	// provider's decoder: aws.Settings, gcp.Settings, sim.Settings or
	// plugin.Settings. Nil where a pool is made without a config (in
	// tests); each provider says what it assumes then.
	Settings ProviderSettings `json:"settings,omitempty"`
}

// ProviderSettings are one provider's typed settings for a pool. Only the
// provider that defines them reads them.
type ProviderSettings interface {
	// Provider is the name of the provider they are for: ProviderAWS,
	// ProviderGCP, ProviderSim or ProviderPlugin.
	Provider() string
}

// PricePerGPUHour is the pool's price of one GPU-hour.
func (p *Pool) PricePerGPUHour() float64 {
	if p.GPUsPerNode <= 0 {
		return p.PricePerHour
	}
	return p.PricePerHour / float64(p.GPUsPerNode)
}

// NodeState is where a node is in its life.
type NodeState string

// The states a node moves through.
const (
	// Pending nodes were launched and are not ready yet.
	Pending NodeState = "pending"
	// Ready nodes run work.
	Ready NodeState = "ready"
	// Draining nodes take no new work and wait for their jobs to checkpoint.
	Draining NodeState = "draining"
	// Terminating nodes are being removed by the cloud.
	Terminating NodeState = "terminating"
)

// Valid reports whether s is one of the known node states.
func (s NodeState) Valid() bool {
	return s == Pending || s == Ready || s == Draining || s == Terminating
}

// Node is one instance of a pool.
type Node struct {
	// ID is the cloud's instance id.
	ID string `json:"id"`
	// Pool is the name of the pool the node belongs to.
	Pool  string    `json:"pool"`
	State NodeState `json:"state"`
	// LaunchedAt is when the cloud was asked for the node.
	LaunchedAt time.Time `json:"launched_at"`
	// Zone is the zone the cloud placed the node in, as its group lists
	// it; empty if unknown.
	Zone string `json:"zone,omitempty"`
	// Address is where the node is reached on the cluster's network, as
	// its cloud lists it (providers.Instance.Address); empty if unknown.
	Address string `json:"address,omitempty"`
	// LaunchFailing is the cloud's reason it is failing to create a
	// pending node (a zone out of GPUs, a quota), as the cloud reports it
	// while it keeps retrying (providers.Instance.Failing); empty otherwise.
	LaunchFailing string `json:"launch_failing,omitempty"`
	// LastReport is when the node's agent last reported; zero if never.
	LastReport time.Time `json:"last_report,omitzero"`
	// IdleSince is when the node last became free of jobs; zero if it holds
	// jobs or never reported.
	IdleSince time.Time `json:"idle_since,omitzero"`
	// DrainStartedAt is when the controller began draining the node.
	DrainStartedAt time.Time `json:"drain_started_at,omitzero"`
	// DrainCancelledAt is when the node's last drain was cancelled (its jobs
	// did not checkpoint in time); the node is not drained again until its
	// jobs have checkpointed since.
	DrainCancelledAt time.Time `json:"drain_cancelled_at,omitzero"`
	// DrainAcked is set when the node's agent has reported, since the
	// drain began, that it holds the drain (and so takes no new work): the
	// cordon. Until then a job may still be placed on the node, and the
	// node is not terminated.
	DrainAcked bool `json:"drain_acked,omitempty"`
	// DrainConfirmed is set when the node's agent's latest report says,
	// for the drain the controller holds, that every job on the node
	// checkpointed after the agent received the drain, or exited, by the
	// agent's own clock. It is the only thing that makes a draining node
	// safe to terminate (docs/design.md rule 1): no checkpoint time is ever
	// compared with the drain's start across two clocks.
	DrainConfirmed bool `json:"drain_confirmed,omitempty"`
	// Jobs are the jobs the agent last reported on the node.
	Jobs []Job `json:"jobs,omitempty"`
	// JobsSeq changes whenever the node's jobs do (their IDs, GPUs,
	// owners or idleness, not their checkpoints), as the controller receives its
	// agent's reports; 0 when not known. Not kept in a snapshot.
	JobsSeq uint64 `json:"-"`
	// InterruptAt, when set, is when the cloud will reclaim the node, as
	// its agent read the cloud's interruption notice (an EC2 spot
	// interruption). The agent has asked its jobs to checkpoint already;
	// the node is capacity no longer, so a replacement is launched at
	// once, and the controller neither drains nor terminates it: the
	// cloud takes it.
	InterruptAt time.Time `json:"interrupt_at,omitzero"`
	// Rebalance is set when the cloud recommends moving work off the node
	// (an EC2 rebalance recommendation): it is first in line for scale-in.
	Rebalance bool `json:"rebalance,omitempty"`
	// Orphan is set on an instance this fleet's controller launched (it
	// carries the fleet's tag, a pool's and a launch key) for a pool the
	// config no longer has: Pool names that old pool. Nobody else will
	// remove it, so it is reaped: drained once its agent reports it idle,
	// and terminated once the agent confirms the drain; never while its
	// agent is silent, and never another fleet's (docs/design.md rule 8).
	Orphan bool `json:"orphan,omitempty"`
	// GPUFault, when set, is why the node's agent could not read its GPUs
	// in its latest report (NVML's error), and GPUFaultSince when its run
	// of such reports began. Nobody can see what runs on such GPUs: the
	// node is never idle, and it is drained only on the normal rule, when
	// the jobs known on it have checkpointed recently (and never while it
	// holds none: empty is not idle).
	GPUFault      string    `json:"gpu_fault,omitempty"`
	GPUFaultSince time.Time `json:"gpu_fault_since,omitzero"`
	// ActivitySource is what the node's agent last read as its GPUs'
	// activity (its jobs' IdleSince): "sm_active" (the share of SMs busy,
	// Hopper and later), "utilization" (NVML's utilisation rate, A100 and
	// older), "mixed" where its GPUs differ; empty when never read.
	ActivitySource string `json:"activity_source,omitempty"`
	// Unknown is set on a node this controller did not launch (or cannot
	// show it launched: a fleet it adopted, a state directory lost, another
	// controller's or a person's instance) whose agent has never reported
	// healthy GPUs. It may hold work nobody told the controller of, so it
	// is treated as a node whose agent is silent: never idle, never
	// drained, and never terminated at a provisioning deadline (docs/design.md
	// docs/design.md rules 2 and 7). It counts against the pool's and the fleet's limits;
	// a pending one counts as launching capacity until its provisioning
	// deadline from when it was first seen, and no longer after.
	Unknown bool `json:"unknown,omitempty"`
	// GPUs and PricePerHour are the node's GPUs and price per hour where
	// its pool does not say (an orphan's: its agent's report of its GPUs,
	// its old pool's last config); 0 when unknown. The planner counts
	// such a node against the fleet's limits at them, or at the widest and
	// dearest configured pool's when unknown.
	GPUs         int     `json:"gpus,omitempty"`
	PricePerHour float64 `json:"price_per_hour,omitempty"`
	// Booted is set on a pending node its cloud says is running (booted),
	// whose agent has not reported healthy GPUs yet. Past its provisioning
	// deadline while scale-in is halted (many agents silent at once: a
	// network fault), such a node may be running work a scheduler put on
	// it, unseen: it is held, not terminated.
	Booted bool `json:"booted,omitempty"`
	// Stopped is set on a terminating node its cloud has stopped (an EC2
	// instance stopped, a Compute Engine instance stopped or suspended): it
	// holds no GPUs and is billed for its disks alone, so it counts against
	// no limit.
	Stopped bool `json:"stopped,omitempty"`
	// Machine is the cloud's ID of the machine behind ID, where ID is a
	// name its cloud may give another machine (a Compute Engine instance's
	// numeric ID); empty otherwise. A bootstrap must prove that machine.
	Machine string `json:"machine,omitempty"`
}

// validShares checks that the shares of one GPU that jobs name (Job.SharedGPU)
// add up to at most the whole GPU, and that only shares name one.
func validShares(jobs []Job) error {
	var held map[string]int
	for i := range jobs {
		j := &jobs[i]
		switch {
		case j.GPUMilli == 0 && j.SharedGPU != "":
			return fmt.Errorf("jobs[%d].shared_gpu: job %s names shared GPU %q but holds no share of it (gpu_milli)", i, j.ID, j.SharedGPU)
		case j.GPUMilli <= 0:
			continue
		}
		if held == nil {
			held = map[string]int{}
		}
		if held[j.SharedGPU] += j.GPUMilli; held[j.SharedGPU] > 1000 {
			return fmt.Errorf("jobs[%d].gpu_milli: the jobs sharing GPU %q hold %d thousandths of it, more than all of it", i, j.SharedGPU, held[j.SharedGPU])
		}
	}
	return nil
}

// UsedGPUs is the number of GPUs the node's jobs hold: their whole GPUs,
// and each GPU shares are held on once (Holds).
func (n *Node) UsedGPUs() int {
	used := 0
	for i := range n.Jobs {
		used += n.Holds(i)
	}
	return used
}

// Holds is the GPUs the node's job i holds, each counted once: its whole
// GPUs, or for a share of one GPU 1 if it is the first of the node's jobs
// to name that GPU (Job.SharedGPU) and 0 for the others, so that the
// node's jobs' Holds add up to UsedGPUs.
func (n *Node) Holds(i int) int { return Holds(n.Jobs, i) }

// Holds is Node.Holds of a node's jobs.
func Holds(jobs []Job, i int) int {
	j := &jobs[i]
	if j.GPUMilli <= 0 {
		return j.GPUs
	}
	for k := range i {
		if jobs[k].GPUMilli > 0 && jobs[k].SharedGPU == j.SharedGPU {
			return 0
		}
	}
	return 1
}

// PoolStatus is what the controller knows about a pool beyond its config.
type PoolStatus struct {
	Name string `json:"name"`
	// BackoffUntil is set after a capacity error: the planner launches
	// nothing in the pool before it.
	BackoffUntil time.Time `json:"backoff_until,omitzero"`
	// BackoffReason says which error caused the backoff.
	BackoffReason string `json:"backoff_reason,omitempty"`
	// Refused says the pool's cloud refused it capacity (a capacity or
	// quota error, or a node that never came up) and no launch in it has
	// succeeded since, backed off or not; HeldSinceRefusal is then the most
	// nodes the pool was seen with since. The planner leaves a launch to a
	// cheaper pool that boots sooner only as far as that pool can be
	// counted on: its max, or if refused, what it held since.
	Refused          bool `json:"refused,omitempty"`
	HeldSinceRefusal int  `json:"held_since_refusal,omitempty"`
	// Unobserved, when set (its Code is not empty), says why the pool was
	// not observed this cycle. Its nodes are then as last seen, and the
	// planner changes nothing in the pool: no launch, drain or
	// termination; with UnobservedNeverRead its size is unknown, so the
	// planner counts it at its max against the fleet's limits.
	Unobserved Unobserved `json:"unobserved,omitzero"`
	// MinNodes is the cloud group's own minimum size (an Auto Scaling
	// group's min_size), if it has one: scale-in keeps the pool at or above
	// the larger of it and the pool's min.
	MinNodes int `json:"min_nodes,omitempty"`
	// RecentDrains are when drains of the pool's nodes began lately,
	// including drains since finished or cancelled: the planner's
	// scale-in budget (limits.scale_in_share per scale_in_window) counts
	// them, and at least the drains still in progress.
	RecentDrains []time.Time `json:"recent_drains,omitempty"`
}

// IsUnobserved reports whether the pool was not observed this cycle
// (Unobserved is set).
func (s *PoolStatus) IsUnobserved() bool { return s.Unobserved.Code != "" }

// NeverRead reports whether the pool is unobserved and was never read
// (UnobservedNeverRead): its size is unknown.
func (s *PoolStatus) NeverRead() bool { return s.Unobserved.Code == UnobservedNeverRead }

// UnobservedCode is why a pool was not observed this cycle.
type UnobservedCode string

// The reasons a pool is not observed.
const (
	// UnobservedReadFailed: the pool's cloud group could not be read this
	// cycle; its nodes are as last read (Unobserved.LastRead).
	UnobservedReadFailed UnobservedCode = "read_failed"
	// UnobservedNeverRead: the pool's cloud group could not be read this
	// cycle, and has not been read since the controller started: the
	// pool's size is unknown.
	UnobservedNeverRead UnobservedCode = "never_read"
	// UnobservedUnsettled: the pool's group reads, but the outcome of an
	// earlier change to it is not settled yet; nothing new is done in the
	// pool until it is.
	UnobservedUnsettled UnobservedCode = "unsettled"
)

// Valid reports whether c is one of the known codes.
func (c UnobservedCode) Valid() bool {
	return c == UnobservedReadFailed || c == UnobservedNeverRead || c == UnobservedUnsettled
}

// Unobserved says why a pool was not observed this cycle; the zero value
// means it was.
type Unobserved struct {
	Code UnobservedCode `json:"code"`
	// Err is the error that kept the pool unobserved: the read's, or the
	// one that leaves the earlier change unsettled.
	Err string `json:"error"`
	// LastRead is when the group was last read, for UnobservedReadFailed;
	// zero when not known.
	LastRead time.Time `json:"last_read,omitzero"`
}

// The words String puts around Err, which parseUnobserved reads back.
const (
	unsettledPrefix = "an earlier change is not settled yet: "
	lastReadInfix   = "; nodes as last read at "
)

// String says why the pool was not observed, in words: the error, and
// when its nodes were last read ("Throttling: rate exceeded; nodes as
// last read at 2026-11-30T13:59:00Z"), or "an earlier change is not
// settled yet: ..."; "" for the zero value.
func (u Unobserved) String() string {
	switch u.Code {
	case "":
		return ""
	case UnobservedUnsettled:
		return unsettledPrefix + u.Err
	}
	if u.LastRead.IsZero() {
		return u.Err
	}
	return u.Err + lastReadInfix + u.LastRead.UTC().Format(time.RFC3339)
}

// parseUnobserved reads the form older snapshots have, the words String
// gives ("" for observed): words that start "an earlier change is not
// settled yet: " are UnobservedUnsettled, any others UnobservedReadFailed,
// with the last read time when they end with one.
func parseUnobserved(s string) Unobserved {
	var u Unobserved
	switch {
	case s == "":
	case strings.HasPrefix(s, unsettledPrefix):
		u.Code, u.Err = UnobservedUnsettled, strings.TrimPrefix(s, unsettledPrefix)
	default:
		u.Code, u.Err = UnobservedReadFailed, s
		if i := strings.LastIndex(s, lastReadInfix); i >= 0 {
			if t, err := time.Parse(time.RFC3339, s[i+len(lastReadInfix):]); err == nil {
				u.Err, u.LastRead = s[:i], t
			}
		}
	}
	return u
}

// State is a snapshot of a fleet: what the planner needs to decide.
type State struct {
	// CapturedAt is when the snapshot was taken; plans made from a snapshot
	// use it as "now".
	CapturedAt time.Time    `json:"captured_at,omitzero"`
	Pools      []PoolStatus `json:"pools,omitempty"`
	Nodes      []Node       `json:"nodes"`
	// PendingGPUs is the number of GPUs asked for by jobs not yet placed.
	PendingGPUs int `json:"pending_gpus"`
	// Scoped is the part of PendingGPUs that waits for one pool, for
	// any pool of one GPU model or of a partition (ScopedDemand): only
	// capacity there serves it. At most one line per scope and tier.
	Scoped []ScopedDemand `json:"scoped,omitempty"`
	// PendingTiers split PendingGPUs by the jobs' tiers (Job.Tier), each
	// tier once; GPUs pending and not listed here are the default tier's
	// (PendingByTier). Empty without tiers.
	PendingTiers []TierGPUs `json:"pending_tiers,omitempty"`
	// PendingTeams split PendingGPUs by the jobs' teams and tiers, for the
	// teams with a budget (Settings.Teams): what the planner withholds
	// from a team over its budget. Empty without budgets.
	PendingTeams []TeamGPUs `json:"pending_teams,omitempty"`
	// BurstSpend is what each team with a budget has spent on burst
	// capacity so far in the budget day (BudgetDay of CapturedAt), as the
	// books of who used what charge it; a team not listed has spent
	// nothing.
	BurstSpend []TeamSpend `json:"burst_spend,omitempty"`
	// Queue is a scheduler's queue and nodes as the controller last read
	// them (the slurm block), shown with the plan; nil without one. Its
	// pending jobs are in PendingGPUs and Scoped already.
	Queue *Queue `json:"queue,omitempty"`
	// Announced is demand announced ahead of its start (a pipeline's next
	// stage, a booked training run): the planner provisions it one lead
	// time before it starts, on top of current demand. An announcement
	// whose start has passed is not listed: its jobs are pending or
	// running by then, and counted there.
	Announced []Announcement `json:"announced,omitempty"`
	// UnderWay is the announcements whose start has passed and whose
	// duration has not (those without a duration end at their start):
	// their jobs are in the demand now, and the demand history the
	// controller forecasts from leaves them out (the loop records Demand
	// less them), so the
	// planner adds them, and Announced, to a forecast of it for the times
	// they cover.
	UnderWay []Announcement `json:"under_way,omitempty"`
	// PendingSince is when GPUs were first pending in the current stretch
	// of pending demand, as the controller's loop saw it (the loop sets it
	// every cycle); zero when none is pending, or in a snapshot without it. Jobs' expected ends stand
	// in for a launch only while pending demand has waited less than a
	// lead time.
	PendingSince time.Time `json:"pending_since,omitzero"`
	// HaltedAt is when scale-in was last found halted (too many agents
	// silent at once: limits.silent_share_halt), as the controller's
	// books keep it; zero if never. Booted launches past their deadline
	// are held while scale-in is halted and for one provisioning deadline
	// after.
	HaltedAt time.Time `json:"halted_at,omitzero"`
	// History is the fleet's recent demand, GPUs per step, less the
	// announced demand under way at each sample, as the loop records it: what
	// the forecast is made from, announcements being added to it.
	History Series `json:"history"`
	// Held is what the fleet would have bought without its reservations,
	// GPUs per step (loop.HeldGPUs): its burst nodes (booting and draining
	// included) and the whole nodes its reserved pools' jobs would fill. A
	// reservation replaces held capacity, not demand: the baseline advice
	// weighs it against this, or against History while Held is shorter
	// (a snapshot without it, a controller upgraded lately).
	Held Series `json:"held,omitzero"`
}

// Announcement is demand announced ahead: GPUs wanted from StartAt for
// Duration (0: until further notice).
type Announcement struct {
	ID       string        `json:"id"`
	StartAt  time.Time     `json:"start_at"`
	GPUs     int           `json:"gpus"`
	Duration time.Duration `json:"duration,omitempty"`
}

// Covers reports whether the announced demand is wanted at t.
func (a Announcement) Covers(t time.Time) bool {
	return !t.Before(a.StartAt) && (a.Duration <= 0 || t.Before(a.StartAt.Add(a.Duration)))
}

// UnderWayGPUs is the GPUs of the announcements in as that cover t.
func UnderWayGPUs(as []Announcement, t time.Time) int {
	n := 0
	for _, a := range as {
		if a.Covers(t) {
			n += max(a.GPUs, 0)
		}
	}
	return n
}

// Overlaps reports whether the announced demand is wanted at some time in
// [from, to].
func (a Announcement) Overlaps(from, to time.Time) bool {
	return !to.Before(a.StartAt) && (a.Duration <= 0 || from.Before(a.StartAt.Add(a.Duration)))
}

// MaxDemandGPUs bounds one line of pushed demand, a demand source's
// reading, a scheduler's pending GPUs in one scope and an imported sample:
// more is a mistake, not demand.
const MaxDemandGPUs = 1_000_000

// Series is a regular time series: Values[i] is the value at Start + i*Step.
type Series struct {
	Start  time.Time     `json:"start"`
	Step   time.Duration `json:"step"`
	Values []float64     `json:"values"`
}

// End is the time just after the last value.
func (s Series) End() time.Time {
	return s.Start.Add(time.Duration(len(s.Values)) * s.Step)
}

// splitOfPending checks a split of the pending GPUs (field, of n lines,
// line i's GPUs gpus(i)): no line negative, and no more in all than
// pending.
func splitOfPending(field string, n int, gpus func(i int) int, pending int) error {
	sum := 0
	for i := range n {
		g := gpus(i)
		if g < 0 {
			return fmt.Errorf("%s[%d].gpus: %d is negative", field, i, g)
		}
		sum += g
	}
	if sum > pending {
		return fmt.Errorf("%s: %d GPUs, more than the %d pending", field, sum, pending)
	}
	return nil
}

// Validate checks a snapshot for internal consistency against the pools it
// names, and returns the first problem found, naming the field.
func (s *State) Validate(pools []Pool) error {
	known := make(map[string]bool, len(pools))
	for i := range pools {
		known[pools[i].Name] = true
	}
	for i := range s.Pools {
		if !known[s.Pools[i].Name] {
			return fmt.Errorf("pools[%d].name: unknown pool %q", i, s.Pools[i].Name)
		}
		if h := s.Pools[i].HeldSinceRefusal; h < 0 {
			return fmt.Errorf("pools[%d].held_since_refusal: %d is negative", i, h)
		}
		if u := &s.Pools[i].Unobserved; (u.Code != "" || u.Err != "" || !u.LastRead.IsZero()) && !u.Code.Valid() {
			return fmt.Errorf("pools[%d].unobserved.code: %q, want read_failed, never_read or unsettled", i, u.Code)
		}
	}
	if s.PendingGPUs < 0 {
		return fmt.Errorf("pending_gpus: %d is negative", s.PendingGPUs)
	}
	if err := splitOfPending("pending_tiers", len(s.PendingTiers), func(i int) int { return s.PendingTiers[i].GPUs }, s.PendingGPUs); err != nil {
		return err
	}
	if err := splitOfPending("pending_teams", len(s.PendingTeams), func(i int) int { return s.PendingTeams[i].GPUs }, s.PendingGPUs); err != nil {
		return err
	}
	scoped := 0
	for i, d := range s.Scoped {
		switch {
		case d.Pool == "" && d.GPUModel == "" && d.Partition == "" && d.SlurmNode == "" && d.MinGPUsPerNode == 0 && d.Nodes == 0 && d.MIG == "":
			return fmt.Errorf("scoped[%d]: want a pool, a gpu_model, a partition, a slurm_node, GPUs per node, nodes or a MIG profile", i)
		case len(d.MIG) > 32:
			return fmt.Errorf("scoped[%d].mig: %q, want a MIG profile's name (3g.40gb)", i, d.MIG)
		case d.MIG != "" && (d.Instances <= 0 || d.Instances > MaxDemandGPUs):
			return fmt.Errorf("scoped[%d].instances: %d; a line for a MIG profile counts its instances, 1 to %d", i, d.Instances, MaxDemandGPUs)
		case d.MIG != "" && d.GPUs < 1:
			return fmt.Errorf("scoped[%d].gpus: %d; a line of MIG instances counts the GPUs they need at least, 1 or more", i, d.GPUs)
		case d.MIG == "" && d.Instances != 0:
			return fmt.Errorf("scoped[%d].instances: %d, but no MIG profile is named (mig)", i, d.Instances)
		case d.MIG != "" && d.Nodes != 0:
			return fmt.Errorf("scoped[%d].nodes: a line for a MIG profile counts instances, not whole nodes", i)
		case d.SlurmNode != "" && !slices.ContainsFunc(pools, func(p Pool) bool { return slices.Contains(p.SlurmNodes, d.SlurmNode) }):
			return fmt.Errorf("scoped[%d].slurm_node: no pool has Slurm node %q", i, d.SlurmNode)
		case d.MinGPUsPerNode < 0:
			return fmt.Errorf("scoped[%d].min_gpus_per_node: %d is negative", i, d.MinGPUsPerNode)
		case d.Nodes < 0:
			return fmt.Errorf("scoped[%d].nodes: %d is negative", i, d.Nodes)
		case d.Pool != "" && !known[d.Pool]:
			return fmt.Errorf("scoped[%d].pool: unknown pool %q", i, d.Pool)
		case d.GPUModel != "" && (slices.Contains(strings.Split(d.GPUModel, "|"), "") || !slices.ContainsFunc(pools, func(p Pool) bool { return p.ServesModel(d.GPUModel) })):
			return fmt.Errorf("scoped[%d].gpu_model: no pool has GPU model %q", i, d.GPUModel)
		case d.Partition != "" && !slices.ContainsFunc(pools, func(p Pool) bool { return p.ServesPartition(d.Partition) }):
			return fmt.Errorf("scoped[%d].partition: no pool serves partition %q", i, d.Partition)
		case d.MIG == "" && !slices.ContainsFunc(pools, func(p Pool) bool { return d.Serves(&p) }):
			// (A MIG profile no pool's layout has is the planner's to say.)
			return fmt.Errorf("scoped[%d]: no pool serves %s", i, d)
		case d.GPUs < 0:
			return fmt.Errorf("scoped[%d].gpus: %d is negative", i, d.GPUs)
		}
		scoped += d.GPUs
	}
	if scoped > s.PendingGPUs {
		return fmt.Errorf("scoped: %d GPUs, more than pending_gpus (%d)", scoped, s.PendingGPUs)
	}
	for i, t := range s.BurstSpend {
		if !(t.USD >= 0) || math.IsInf(t.USD, 0) {
			return fmt.Errorf("burst_spend[%d].usd: %v, want a finite amount of 0 or more", i, t.USD)
		}
	}
	for _, l := range []struct {
		field string
		as    []Announcement
	}{{"announced", s.Announced}, {"under_way", s.UnderWay}} {
		for i, a := range l.as {
			switch {
			case a.ID == "":
				return fmt.Errorf("%s[%d].id: empty", l.field, i)
			case a.GPUs < 0:
				return fmt.Errorf("%s[%d].gpus: %d is negative", l.field, i, a.GPUs)
			case a.Duration < 0:
				return fmt.Errorf("%s[%d].duration: %s is negative", l.field, i, a.Duration)
			}
		}
	}
	if len(s.History.Values) > 0 && s.History.Step <= 0 {
		return fmt.Errorf("history.step: must be positive when history has values")
	}
	if len(s.Held.Values) > 0 && s.Held.Step <= 0 {
		return fmt.Errorf("held.step: must be positive when held has values")
	}
	seen := make(map[string]bool, len(s.Nodes))
	for i := range s.Nodes {
		n := &s.Nodes[i]
		switch {
		case n.ID == "":
			return fmt.Errorf("nodes[%d].id: empty", i)
		case seen[n.ID]:
			return fmt.Errorf("nodes[%d].id: duplicate node %q", i, n.ID)
		case n.Orphan && (n.Pool == "" || known[n.Pool]):
			return fmt.Errorf("nodes[%d].pool: orphan %s names pool %q: an orphan's pool is one the config no longer has", i, n.ID, n.Pool)
		case !n.Orphan && !known[n.Pool]:
			return fmt.Errorf("nodes[%d].pool: node %s names unknown pool %q", i, n.ID, n.Pool)
		case !n.State.Valid():
			return fmt.Errorf("nodes[%d].state: node %s has state %q, want pending, ready, draining or terminating", i, n.ID, n.State)
		case n.State == Draining && n.DrainStartedAt.IsZero():
			return fmt.Errorf("nodes[%d].drain_started_at: draining node %s has no drain start time", i, n.ID)
		}
		seen[n.ID] = true
		if err := validShares(n.Jobs); err != nil {
			return fmt.Errorf("nodes[%d]: node %s: %w", i, n.ID, err)
		}
		for j := range n.Jobs {
			switch jb := &n.Jobs[j]; {
			case jb.GPUs < 0:
				return fmt.Errorf("nodes[%d].jobs[%d].gpus: job %s has %d GPUs", i, j, jb.ID, jb.GPUs)
			case jb.GPUMilli < 0 || jb.GPUMilli > 999:
				return fmt.Errorf("nodes[%d].jobs[%d].gpu_milli: job %s has %d, want 1 to 999 thousandths of one GPU (0: whole GPUs)", i, j, jb.ID, jb.GPUMilli)
			case jb.GPUMilli > 0 && (jb.GPUs != 0 || jb.SharedGPU == ""):
				return fmt.Errorf("nodes[%d].jobs[%d]: job %s holds a share of a GPU (gpu_milli %d): want gpus 0 and the shared GPU named (shared_gpu)", i, j, jb.ID, jb.GPUMilli)
			}
		}
	}
	return nil
}

// CompareForLaunch orders pools the way capacity is bought: reserved pools
// first (they are paid for anyway), then cheaper per GPU-hour, then higher
// priority, then by name, so the order is total.
func CompareForLaunch(a, b *Pool) int {
	ar, br := a.Capacity == Reserved, b.Capacity == Reserved
	switch {
	case ar && !br:
		return -1
	case br && !ar:
		return 1
	}
	return cmp.Or(
		cmp.Compare(a.PricePerGPUHour(), b.PricePerGPUHour()),
		cmp.Compare(b.Priority, a.Priority),
		cmp.Compare(a.Name, b.Name))
}
