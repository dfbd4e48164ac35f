package slurm

// Waiting reports whether a pending job's reason says it waits for
// capacity, which a new node would serve: "Resources" (not enough free
// nodes), "Priority" (others go first), or "None" (just submitted, not
// yet considered). Every other reason says something else holds it (a
// hold, a dependency, a begin time, an account's or QOS's limit, a
// partition's limit or state, nodes asked for by name), and so does no
// reason at all (a release that renamed the field): buying for it buys
// nothing it can use.
func Waiting(reason string) bool {
	switch reason {
	case "Resources", "Priority", "None":
		return true
	}
	return false
}

// NodeGPUs is what a pending job needs bought on nodes of gpn GPUs, in
// whole nodes of its shape, for all its tasks: a job on several nodes
// (-N M) takes M nodes whatever share of each it uses, M x gpn GPUs; a
// job on one node its GPUs, which other jobs may share the node with.
// Zero for a job that asks no GPUs, and when it asks more of a node than
// gpn (PerNodeGPUs): no such node serves it.
func (j *Job) NodeGPUs(gpn int) int {
	per, tasks := j.PerNodeGPUs(), max(1, j.Tasks)
	switch {
	case gpn <= 0 || per == 0 || per > gpn:
		return 0
	case j.Nodes > 1:
		return j.Nodes * gpn * tasks
	case j.GPUsPerJob > 0:
		return j.GPUsPerJob * tasks
	}
	return j.GPUsPerNode * tasks
}
