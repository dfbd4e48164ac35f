package slurm

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/fleetcast/autoscaler/fleet"
)

// Demand is what one read of a cluster asks of a fleet's pools.
type Demand struct {
	// Pending is the GPUs of the pending jobs that wait for capacity a
	// new node would serve, in whole nodes of their shape (Job.NodeGPUs),
	// summed by the scope that serves them: their partition's pools,
	// where pools name partitions, of their GPU type, where they name one,
	// and of nodes wide enough; jobs on several nodes in lines of whole
	// nodes (fleet.ScopedDemand.Nodes); a line of the zero scope for those
	// any pool serves. Sorted by scope.
	Pending []fleet.ScopedDemand
	// Ends are the running jobs' latest ends (start plus time limit), by
	// job ID, for those running now with a limit, earliest first.
	Ends []End
	// Queue is the read as a plan shows it.
	Queue fleet.Queue
}

// End is when a running job must end by.
type End struct {
	// Job is the job's ID (SLURM_JOB_ID), At its start plus its time
	// limit.
	Job string
	At  time.Time
}

// Demand turns the read into demand on pools. Where no pool names a
// partition (fleet.Pool.Partitions), every pool serves every partition.
// A job asking for a GPU type (--gres=gpu:TYPE:N) is served by the pools
// of that GPU model (its pool's gpu_model, without regard to case). A
// pending job waiting for capacity (Waiting) that no pool serves (its
// partition's, its type's, or none with nodes as wide as it asks) buys
// nothing, and Queue says why; so do jobs held for any other reason.
// Jobs that ask for no GPUs are left out. Each scoped line is of one tier
// (fleet.ScopedDemand.Tier): the jobs' partition with tierFrom
// "partition", else their QOS (none for a name no report could carry,
// fleet.ValidLabel); and of one team (fleet.ScopedDemand.Team): the jobs'
// account, as the report of who used what names it (the controller keeps
// it only for a team with a budget).
func (s *Snapshot) Demand(pools []fleet.Pool, tierFrom string) Demand {
	d := Demand{Queue: fleet.Queue{Source: "slurm", Version: s.Version, Missing: slices.Clone(s.Missing)}}
	byPartition := slices.ContainsFunc(pools, func(p fleet.Pool) bool { return len(p.Partitions) > 0 })
	type lineKey struct {
		partition, reason, unserved string
		bought                      bool
	}
	lines := map[lineKey]*fleet.QueueLine{}
	// The running tasks of each array, by its job ID: a throttled array
	// starts no more than its throttle less them.
	running := map[string]int{}
	for i := range s.Jobs {
		if j := &s.Jobs[i]; j.Running() && j.Array != "" {
			parent, _, _ := strings.Cut(j.Array, "_")
			running[parent]++
		}
	}
	// The pending demand by scope, whole nodes apart from GPUs.
	type scopeKey struct {
		scope fleet.ScopedDemand
		whole bool
	}
	scoped := map[scopeKey]fleet.ScopedDemand{}
	for i := range s.Jobs {
		j := &s.Jobs[i]
		if j.Running() {
			d.Queue.RunningJobs++
			d.Queue.RunningGPUs = min(d.Queue.RunningGPUs+j.GPUs(), fleet.MaxDemandGPUs)
			if end := j.End(); !end.IsZero() {
				d.Ends = append(d.Ends, End{Job: j.ID, At: end})
			}
			continue
		}
		if !j.Pending() || j.GPUs() == 0 {
			continue
		}
		k := lineKey{partition: j.Partition, reason: cmp.Or(j.Reason, "unknown")}
		gpus := 0
		if Waiting(j.Reason) {
			var scope fleet.ScopedDemand
			jj := *j
			jj.Tasks = max(1, j.Tasks)
			if parent, _, _ := strings.Cut(j.Array, "_"); j.Throttle > 0 {
				jj.Tasks = min(jj.Tasks, max(j.Throttle-running[parent], 0))
			}
			if jj.Tasks == 0 {
				k.unserved = fmt.Sprintf("its array runs as many tasks as its throttle allows (%d)", j.Throttle)
			} else {
				scope, gpus, k.unserved = serve(&jj, pools, byPartition)
			}
			if gpus > 0 {
				k.bought = true
				sk := scopeKey{whole: scope.Nodes > 0}
				sk.scope, sk.scope.Nodes, sk.scope.Tier, sk.scope.Team = scope, 0, j.tier(tierFrom), j.team()
				sum := scoped[sk]
				sum.GPUs = min(sum.GPUs+gpus, fleet.MaxDemandGPUs)
				sum.Nodes = min(sum.Nodes+scope.Nodes, fleet.MaxDemandGPUs)
				scoped[sk] = sum
			}
		}
		l := lines[k]
		if l == nil {
			l = &fleet.QueueLine{Partition: k.partition, Reason: k.reason, Bought: k.bought, Unserved: k.unserved}
			lines[k] = l
		}
		l.Jobs++
		l.GPUs = min(l.GPUs+j.GPUs(), fleet.MaxDemandGPUs)
		l.DemandGPUs = min(l.DemandGPUs+gpus, fleet.MaxDemandGPUs)
	}
	for k, sum := range scoped {
		sc := k.scope
		sc.GPUs, sc.Nodes = sum.GPUs, sum.Nodes
		d.Pending = append(d.Pending, sc)
	}
	slices.SortFunc(d.Pending, func(a, b fleet.ScopedDemand) int {
		return cmp.Or(strings.Compare(a.Partition, b.Partition), strings.Compare(a.GPUModel, b.GPUModel),
			cmp.Compare(a.MinGPUsPerNode, b.MinGPUsPerNode), cmp.Compare(a.Nodes, b.Nodes), strings.Compare(a.Tier, b.Tier), strings.Compare(a.Team, b.Team))
	})
	for _, l := range lines {
		d.Queue.Pending = append(d.Queue.Pending, *l)
	}
	slices.SortFunc(d.Queue.Pending, func(a, b fleet.QueueLine) int {
		return cmp.Or(cmp.Compare(b.GPUs, a.GPUs), strings.Compare(a.Partition, b.Partition),
			strings.Compare(a.Reason, b.Reason), strings.Compare(a.Unserved, b.Unserved))
	})
	slices.SortFunc(d.Ends, func(a, b End) int { return cmp.Or(a.At.Compare(b.At), strings.Compare(a.Job, b.Job)) })
	d.Queue.Nodes = countNodes(s.Nodes)
	return d
}

// serve is the scope of the pools that serve a job waiting for capacity,
// and the GPUs it needs bought there, in whole nodes of its shape; or,
// with no GPUs, why no pool serves it. The scope is its partition's pools
// (where pools name partitions), of its GPU type, if it names one, and
// of nodes wide enough for what it asks of one node (where some are not).
// A job on several nodes asks for that many whole nodes of the scope,
// each of any width (Nodes), and its GPUs are those of the narrowest.
func serve(j *Job, pools []fleet.Pool, byPartition bool) (scope fleet.ScopedDemand, gpus int, unserved string) {
	scope.GPUModel = strings.ToUpper(j.GPUType)
	if byPartition {
		if j.Partition == "" {
			return scope, 0, "no partition given"
		}
		scope.Partition = j.Partition
	}
	anyPool := scope == fleet.ScopedDemand{}
	per := j.PerNodeGPUs()
	gpn, widest, served, narrower := 0, 0, false, false
	for i := range pools {
		p := &pools[i]
		if !anyPool && !scope.Serves(p) {
			continue
		}
		served = true
		widest = max(widest, p.GPUsPerNode)
		switch {
		case p.GPUsPerNode < per:
			narrower = true
		case gpn == 0 || p.GPUsPerNode < gpn:
			gpn = p.GPUsPerNode
		}
	}
	switch {
	case !served && byPartition && !slices.ContainsFunc(pools, func(p fleet.Pool) bool { return p.ServesPartition(j.Partition) }):
		return scope, 0, fmt.Sprintf("no pool serves partition %s", j.Partition)
	case !served && byPartition:
		return scope, 0, fmt.Sprintf("no pool of partition %s has GPU type %s", j.Partition, j.GPUType)
	case !served && j.GPUType != "":
		return scope, 0, fmt.Sprintf("no pool has GPU type %s", j.GPUType)
	case !served:
		return scope, 0, "no pool serves it"
	}
	if gpus = j.NodeGPUs(gpn); gpus == 0 {
		return scope, 0, fmt.Sprintf("asks %d GPUs of a node; its pools' nodes have at most %d", per, widest)
	}
	if narrower {
		scope.MinGPUsPerNode = per
	}
	if j.Nodes > 1 {
		scope.Nodes = min(j.Nodes*max(1, j.Tasks), fleet.MaxDemandGPUs)
	}
	return scope, gpus, ""
}

// capacityFlags are the node flags a count by state shows, the first
// a node has: what they say about its capacity.
var capacityFlags = []string{"DRAIN", "FAIL", "NOT_RESPONDING", "POWERED_DOWN", "POWERING_UP", "POWERING_DOWN"}

// countNodes counts nodes by state, with the flag that matters most to
// their capacity, most nodes first.
func countNodes(nodes []Node) []fleet.NodeCount {
	by := map[string]*fleet.NodeCount{}
	for i := range nodes {
		n := &nodes[i]
		st := cmp.Or(n.State, "UNKNOWN")
		for _, f := range capacityFlags {
			if n.HasFlag(f) {
				st += "+" + f
				break
			}
		}
		c := by[st]
		if c == nil {
			c = &fleet.NodeCount{State: st}
			by[st] = c
		}
		c.Nodes++
		c.GPUs += n.GPUs
	}
	out := make([]fleet.NodeCount, 0, len(by))
	for _, c := range by {
		out = append(out, *c)
	}
	slices.SortFunc(out, func(a, b fleet.NodeCount) int {
		return cmp.Or(cmp.Compare(b.Nodes, a.Nodes), strings.Compare(a.State, b.State))
	})
	return out
}

// tier is the job's tier as tierFrom says: its partition with
// "partition", else its QOS; "" for a name no report could carry
// (fleet.ValidLabel).
// team is the job's team: its account, none for a name no report could
// carry (fleet.ValidLabel).
func (j *Job) team() string {
	if fleet.ValidLabel(j.Account) != "" {
		return ""
	}
	return j.Account
}

func (j *Job) tier(tierFrom string) string {
	t := j.QOS
	if tierFrom == "partition" {
		t = j.Partition
	}
	if fleet.ValidLabel(t) != "" {
		return ""
	}
	return t
}
