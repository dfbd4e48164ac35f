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
	// not 0, the node's jobs are as before and are not read again but
	// for their checkpoints, every settleEvery cycles.
	JobsSeq uint64
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
	// state and pools, set by SnapshotOf, stand for Nodes.
	state *fleet.State
	pools []fleet.Pool
}

// SnapshotOf is the Snapshot of a fleet's state at its capture time: its
// nodes, priced and sized by their pools (or as they say, where their
// pool is gone), stopped ones left out (billed for their disks only), and
// the pending demand given. It reads st's nodes as the Accountant
// observes it, making no copy of them: st must not change until then.
func SnapshotOf(st *fleet.State, pools []fleet.Pool, pending []Waiting) Snapshot {
	return Snapshot{At: st.CapturedAt, Pending: pending, state: st, pools: pools}
}

// visit calls f with each node of s: its Nodes, or those of the state it
// was made of (SnapshotOf), each in turn in one Seen that f must not
// keep.
func (s *Snapshot) visit(f func(*Seen)) {
	if s.state == nil {
		for i := range s.Nodes {
			f(&s.Nodes[i])
		}
		return
	}
	var byName map[string]int
	if len(s.pools) > 8 {
		byName = make(map[string]int, len(s.pools))
		for i := range s.pools {
			byName[s.pools[i].Name] = i
		}
	}
	index := func(name string) int {
		if byName != nil {
			if i, ok := byName[name]; ok {
				return i
			}
			return -1
		}
		for i := range s.pools {
			if s.pools[i].Name == name {
				return i
			}
		}
		return -1
	}
	listed := make([]int, len(s.pools))
	var x Seen
	last := -1
	for i := range s.state.Nodes {
		n := &s.state.Nodes[i]
		if n.Stopped {
			continue
		}
		x = Seen{ID: n.ID, Pool: n.Pool, GPUs: n.GPUs, Price: n.PricePerHour, Ours: !n.Unknown && !n.Orphan, LaunchedAt: n.LaunchedAt, Jobs: n.Jobs, JobsSeq: n.JobsSeq}
		if n.Orphan {
			// Its pool is gone from the config: a name read from a
			// cloud's tags, never a label.
			x.Pool = OrphanPool
		} else {
			if last < 0 || s.pools[last].Name != n.Pool {
				last = index(n.Pool)
			}
			if last >= 0 {
				p := &s.pools[last]
				x.GPUs, x.Price, x.Reserved = p.GPUsPerNode, p.PricePerHour, p.Capacity == fleet.Reserved
				listed[last]++
			}
		}
		f(&x)
	}
	// A reservation is paid for whole, whether its nodes run or not: its
	// slots with no node listed are one idle node of their own. It is
	// listed with every slot filled too (no GPU, no cost), so that it is
	// never charged anew from the cycle before.
	for i := range s.pools {
		if p := &s.pools[i]; p.Capacity == fleet.Reserved {
			free := max(p.Max-listed[i], 0)
			x = Seen{ID: ReservationNode + p.Name, Pool: p.Name, GPUs: free * p.GPUsPerNode, Price: float64(free) * p.PricePerHour, Reserved: true}
			f(&x)
		}
	}
}

// ReservationNode begins the ID SnapshotOf gives a reserved pool's slots
// with no node listed: "reservation:POOL".
const ReservationNode = "reservation:"

// OrphanPool is the pool charged for an orphan's time: an instance of a
// pool gone from the config, as it is reaped.
const OrphanPool = "orphaned"
