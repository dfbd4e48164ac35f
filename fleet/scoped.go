package fleet

import (
	"fmt"
	"slices"
	"strings"
)

// ScopedDemand is pending demand that only some pools serve: the pool
// named (Pool), the pools of a GPU model (GPUModel, matched without
// regard to case; several separated by '|', any of which will do: jobs
// that accept some GPU types), the pools serving a scheduler's partition (Partition:
// pools whose Partitions name it; a comma-separated list for jobs pending
// in several partitions, any of which will do), the pools whose nodes
// have at least MinGPUsPerNode GPUs (jobs that ask so much of one node),
// the pools whose Slurm nodes include SlurmNode (a node Slurm powers up
// for its jobs, which any of them may launch), or the pools that meet
// several of these at once. At least one is set, or Nodes.
//
// Nodes, when set, asks for that many whole nodes of the scope's pools,
// each empty, whatever their width (jobs on several nodes: -N 2 runs on
// two nodes, not on one twice as wide); GPUs is then their GPUs on the
// narrowest such nodes, for the totals. A line of Nodes alone is served
// by every pool, in whole nodes.
//
// MIG, when set, is a MIG profile (3g.40gb): the line's jobs each ask for
// one GPU instance of it, Instances of them, which only the pools whose
// GPUs are partitioned into it serve (Pool.MIG), each GPU as many as its
// layout has; GPUs is then the GPUs they need at least (on the pools
// whose layout has the most of the profile), for the totals.
//
// Tier, when set, is the tier of the line's jobs (TierIndex: a name the
// config does not define is the default tier's); it is not part of the
// scope: the planner buys nothing for a tier whose waiting is worth
// nothing, and buys for the others only in the scope's pools of their
// capacity types. Requested marks nodes a scheduler has given its jobs
// already and asks to power up (Slurm's ResumeProgram): bought whatever
// the jobs' tier or team. Team, set only for a team with a budget
// (Settings.Teams), is the line's jobs' team: nothing is bought for the
// line while the team is over its budget.
type ScopedDemand struct {
	Pool           string `json:"pool,omitempty"`
	GPUModel       string `json:"gpu_model,omitempty"`
	Partition      string `json:"partition,omitempty"`
	SlurmNode      string `json:"slurm_node,omitempty"`
	MinGPUsPerNode int    `json:"min_gpus_per_node,omitempty"`
	Nodes          int    `json:"nodes,omitempty"`
	MIG            string `json:"mig,omitempty"`
	Instances      int    `json:"instances,omitempty"`
	GPUs           int    `json:"gpus"`
	Tier           string `json:"tier,omitempty"`
	Team           string `json:"team,omitempty"`
	Requested      bool   `json:"requested,omitempty"`
}

// Serves reports whether a pool serves the demand: it meets every part of
// the scope that is set (and a scope with none set, no pool). A pool
// partitioned by MIG serves lines of MIG instances of its layout's
// profiles, and of other lines only those that name it, or one of its
// Slurm nodes (a partitioned GPU runs no whole-GPU job).
func (d ScopedDemand) Serves(p *Pool) bool {
	if d.Pool == "" && d.GPUModel == "" && d.Partition == "" && d.SlurmNode == "" && d.MinGPUsPerNode == 0 && d.Nodes == 0 && d.MIG == "" {
		return false
	}
	named := d.Pool != "" || d.SlurmNode != "" || d.Requested
	return (d.Pool == "" || p.Name == d.Pool) &&
		(d.SlurmNode == "" || slices.Contains(p.SlurmNodes, d.SlurmNode)) &&
		(d.GPUModel == "" || p.ServesModel(d.GPUModel)) &&
		(d.MIG == "" && (len(p.MIG) == 0 || named) || d.MIG != "" && p.MIGInstances(d.MIG) > 0) &&
		(d.Partition == "" || p.ServesPartition(d.Partition)) &&
		p.GPUsPerNode >= d.MinGPUsPerNode
}

// ServesAll reports whether every one of pools serves the demand, in
// GPUs: the whole fleet's demand, which fleet-wide capacity serves (a
// line of whole nodes never is: free GPUs on busy nodes do not serve
// it; nor one that a MIG pool does not, or of MIG instances).
func (d ScopedDemand) ServesAll(pools []Pool) bool {
	if d.Nodes > 0 || d.MIG != "" {
		return false
	}
	for i := range pools {
		if !d.Serves(&pools[i]) {
			return false
		}
	}
	return true
}

// MIGInstances is how many GPU instances of MIG profile name each of the
// pool's GPUs has (its MIG layout's), compared without regard to case.
func (p *Pool) MIGInstances(name string) int {
	n := 0
	for _, m := range p.MIG {
		if strings.EqualFold(m, name) {
			n++
		}
	}
	return n
}

// ServesModel reports whether the pool's GPUs are of one of the models of
// a list separated by '|' (A100|H100), compared without regard to case.
func (p *Pool) ServesModel(list string) bool {
	for m := range strings.SplitSeq(list, "|") {
		if m != "" && strings.EqualFold(p.GPUModel, m) {
			return true
		}
	}
	return false
}

// ServesPartition reports whether the pool serves one of the partitions
// of a comma-separated list.
func (p *Pool) ServesPartition(list string) bool {
	for part := range strings.SplitSeq(list, ",") {
		if slices.Contains(p.Partitions, part) {
			return true
		}
	}
	return false
}

// String names the scope: "pool NAME", "GPU model MODEL", "partition
// NAME", "nodes of 8+ GPUs", or those that are set, joined ("partition
// train, GPU model H100, nodes of 8 GPUs").
func (d ScopedDemand) String() string {
	var parts []string
	if d.Pool != "" {
		parts = append(parts, "pool "+d.Pool)
	}
	if d.Partition != "" {
		parts = append(parts, "partition "+d.Partition)
	}
	if d.SlurmNode != "" {
		parts = append(parts, "Slurm node "+d.SlurmNode)
	}
	if d.GPUModel != "" {
		parts = append(parts, "GPU model "+d.GPUModel)
	}
	if d.MinGPUsPerNode > 0 {
		parts = append(parts, fmt.Sprintf("nodes of %d+ GPUs", d.MinGPUsPerNode))
	}
	if d.MIG != "" {
		parts = append(parts, "MIG "+d.MIG)
	}
	if len(parts) == 0 && d.Nodes > 0 {
		return "any pool"
	}
	return strings.Join(parts, ", ")
}
