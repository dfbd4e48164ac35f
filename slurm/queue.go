package slurm

import (
	"cmp"
	"slices"
)

// Waiting reports whether a pending job's reason says it waits for
// capacity, which a new node would serve: "Resources" (not enough free
// nodes), "Priority" (others go first), or none given yet (just
// submitted). Every other reason says something else holds it (a hold, a
// dependency, a begin time, an account's or QOS's limit, a partition's
// limit or state, nodes asked for by name): buying for it buys nothing it
// can use.
func Waiting(reason string) bool {
	switch reason {
	case "Resources", "Priority", "None", "":
		return true
	}
	return false
}

// Blocked is the pending jobs a new node would not serve, of one reason.
type Blocked struct {
	Reason string
	// Jobs and GPUs are how many jobs wait for the reason, and the GPUs
	// they ask for.
	Jobs, GPUs int
}

// Queue splits a queue's pending jobs into those waiting for capacity
// (Waiting), in the queue's order, and the others, counted by reason,
// most GPUs first.
func Queue(jobs []Job) (waiting []Job, blocked []Blocked) {
	by := map[string]*Blocked{}
	for i := range jobs {
		j := &jobs[i]
		if !j.Pending() {
			continue
		}
		if Waiting(j.Reason) {
			waiting = append(waiting, *j)
			continue
		}
		b := by[j.Reason]
		if b == nil {
			b = &Blocked{Reason: j.Reason}
			by[j.Reason] = b
		}
		b.Jobs++
		b.GPUs += j.GPUs()
	}
	for _, b := range by {
		blocked = append(blocked, *b)
	}
	slices.SortFunc(blocked, func(a, b Blocked) int {
		return cmp.Or(cmp.Compare(b.GPUs, a.GPUs), cmp.Compare(a.Reason, b.Reason))
	})
	return waiting, blocked
}

// NodeGPUs is what a pending job needs bought on nodes of gpn GPUs, in
// whole nodes of its shape: a job on several nodes (-N M) takes M nodes
// whatever share of each it uses, M x gpn GPUs; a job on one node its
// GPUs, which other jobs may share the node with; a job asking GPUs for
// the whole job (--gpus) those GPUs. Zero for a job that asks no GPUs,
// and when its nodes are wider than gpn: no such node serves it.
func (j *Job) NodeGPUs(gpn int) int {
	switch {
	case gpn <= 0 || j.GPUsPerNode > gpn || j.GPUs() == 0:
		return 0
	case j.GPUsPerJob > 0:
		return j.GPUsPerJob
	case j.Nodes > 1:
		return j.Nodes * gpn
	}
	return j.GPUsPerNode
}
