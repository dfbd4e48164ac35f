package usage

import (
	"time"

	"github.com/fleetcast/autoscaler/fleet"
)

// Seen is one node as a cycle observed it, for the Accountant.
type Seen struct {
	ID   string
	Pool string
	GPUs int
	// Price is the node's price per hour.
	Price float64
	// Reserved is set on reserved capacity, paid whether used or not:
	// never bought for anyone.
	Reserved bool
	// Ours is set on a node this controller launched (not an unknown
	// one): only such a node takes a purchase's teams (Bought).
	Ours bool
	// LaunchedAt is when the cloud was asked for the node, if known.
	LaunchedAt time.Time
	Jobs       []fleet.Job
	// JobsSeq is fleet.Node.JobsSeq: while it stays the same, and is
	// not 0, the node's jobs are as before and are not read again.
	JobsSeq uint64
	// CheckpointSeq is fleet.Node.CheckpointSeq: while it and JobsSeq
	// stay the same, and are not 0, no job's checkpoint is read again.
	CheckpointSeq uint64
}

// Waiting is demand pending now: a team and tier's GPUs, in jobs.
type Waiting struct {
	Team string
	Tier string
	GPUs int
	// Jobs counts the jobs (or pushed lines) waiting; at least 1 counts
	// for a line with GPUs.
	Jobs int
	// Scope is where it waits: the pools that serve it (the zero scope:
	// any), for the teams a launch is bought for (ForPending).
	Scope fleet.ScopedDemand
}

// Snapshot is what a cycle observed, at At.
type Snapshot struct {
	At      time.Time
	Nodes   []Seen
	Pending []Waiting
}

// SnapshotOf is the Snapshot of a fleet's state at its capture time: its
// nodes, priced and sized by their pools (or as they say, where their
// pool is gone), stopped ones left out (billed for their disks only), and
// the pending demand given.
func SnapshotOf(st *fleet.State, pools []fleet.Pool, pending []Waiting) Snapshot {
	byName := make(map[string]*fleet.Pool, len(pools))
	for i := range pools {
		byName[pools[i].Name] = &pools[i]
	}
	s := Snapshot{At: st.CapturedAt, Pending: pending, Nodes: make([]Seen, 0, len(st.Nodes)+len(pools))}
	listed := make(map[string]int, len(pools))
	for i := range st.Nodes {
		n := &st.Nodes[i]
		if n.Stopped {
			continue
		}
		pool := n.Pool
		if n.Orphan {
			// Its pool is gone from the config: a name read from a
			// cloud's tags, never a label.
			pool = OrphanPool
		}
		x := Seen{ID: n.ID, Pool: pool, GPUs: n.GPUs, Price: n.PricePerHour, Ours: !n.Unknown && !n.Orphan, LaunchedAt: n.LaunchedAt, Jobs: n.Jobs, JobsSeq: n.JobsSeq, CheckpointSeq: n.CheckpointSeq}
		if p := byName[n.Pool]; p != nil && !n.Orphan {
			x.GPUs, x.Price, x.Reserved = p.GPUsPerNode, p.PricePerHour, p.Capacity == fleet.Reserved
			listed[p.Name]++
		}
		s.Nodes = append(s.Nodes, x)
	}
	// A reservation is paid for whole, whether its nodes run or not: its
	// slots with no node listed are one idle node of their own.
	// It is listed with every slot filled too (no GPU, no cost), so that
	// it is never charged anew from the cycle before.
	for i := range pools {
		p := &pools[i]
		if p.Capacity == fleet.Reserved {
			free := max(p.Max-listed[p.Name], 0)
			s.Nodes = append(s.Nodes, Seen{ID: ReservationNode + p.Name, Pool: p.Name, GPUs: free * p.GPUsPerNode, Price: float64(free) * p.PricePerHour, Reserved: true})
		}
	}
	return s
}

// ReservationNode begins the ID SnapshotOf gives a reserved pool's slots
// with no node listed: "reservation:POOL".
const ReservationNode = "reservation:"

// OrphanPool is the pool charged for an orphan's time: an instance of a
// pool gone from the config, as it is reaped.
const OrphanPool = "orphaned"
