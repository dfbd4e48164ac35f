package fleet

import "time"

// Queue is a scheduler's queue and nodes as the controller last read them
// (Slurm's, through the slurm block): what its pending jobs wait for, and
// what its nodes are doing. The pending jobs a new node would serve are in
// the pending demand already (State.PendingGPUs and Scoped); Queue says
// what the rest wait for, so a plan can say why nothing is bought for
// them.
type Queue struct {
	// Source names the scheduler ("slurm"), and Version its release.
	Source  string `json:"source"`
	Version string `json:"version,omitempty"`
	// ReadAt is when the queue was last read whole; zero if never.
	ReadAt time.Time `json:"read_at,omitzero"`
	// Degraded, when set, is why the latest read failed (or never
	// succeeded): the pending demand is then the last whole read's, for
	// as long as pushed demand counts, and none after.
	Degraded string `json:"degraded,omitempty"`
	// Expired is set when the last whole read is older than pushed demand
	// counts: its pending jobs are no longer demand.
	Expired bool `json:"expired,omitempty"`
	// Pending are the pending jobs that ask for GPUs, by partition, reason
	// and whether Fleetcast buys for them, most GPUs first.
	Pending []QueueLine `json:"pending,omitempty"`
	// RunningJobs and RunningGPUs are the running jobs and the GPUs they
	// hold.
	RunningJobs int `json:"running_jobs"`
	RunningGPUs int `json:"running_gpus"`
	// Nodes are the scheduler's nodes by state.
	Nodes []NodeCount `json:"nodes,omitempty"`
	// Missing are the fields the scheduler's answers lacked, each once:
	// what was taken as unknown.
	Missing []string `json:"missing,omitempty"`
}

// QueueLine is the pending jobs of one partition and one reason.
type QueueLine struct {
	// Partition is theirs (a comma-separated list for jobs pending in
	// several), Reason the scheduler's ("Resources", "Priority",
	// "JobHeldUser", "Dependency", ...; "None" for just submitted).
	Partition string `json:"partition"`
	Reason    string `json:"reason"`
	// Jobs is how many jobs, and GPUs all the GPUs they ask for.
	Jobs int `json:"jobs"`
	GPUs int `json:"gpus"`
	// Bought is set on jobs that wait for capacity which a new node of
	// some pool would serve: their GPUs, in whole nodes of their shape,
	// are pending demand (DemandGPUs). Otherwise Unserved says why nothing
	// is bought for them: their reason (a hold, a dependency, a begin
	// time, a limit), or no pool serving their partition, GPU type or
	// shape.
	Bought     bool   `json:"bought"`
	DemandGPUs int    `json:"demand_gpus,omitempty"`
	Unserved   string `json:"unserved,omitempty"`
}

// NodeCount is the scheduler's nodes of one state.
type NodeCount struct {
	// State is the scheduler's ("IDLE", "MIXED", "ALLOCATED", "DOWN", ...),
	// with the flag that matters most to capacity, if any ("IDLE+DRAIN",
	// "IDLE+POWERED_DOWN").
	State string `json:"state"`
	Nodes int    `json:"nodes"`
	GPUs  int    `json:"gpus"`
}
