// Package report is the wire format between the in-instance agent and the
// controller: the agent's report about its node, the controller's answer
// (any drain it wants), and the credential requests; with Validate, the
// bounds every report is held to, and the small HTTP helpers the
// controller's handlers share (typed refusals, JSON bodies, bearer
// tokens). The controller's receiver for reports is controller/reports.
//
// An agent may report only about its own node (docs/design.md rule 11): its
// token is derived from the node's name, so a token for one node is refused
// for another with 403. Drain and cordon state belong to the controller:
// the agent reports how a drain it was asked for is going, and the
// controller decides.
package report

import (
	"fmt"
	"time"

	"github.com/fleetcast/autoscaler/fleet"
)

// Report is what an agent sends about its node.
type Report struct {
	// Node is the node's name (the cloud's instance ID); it must match the
	// URL and the token.
	Node string `json:"node"`
	// SentAt is when the agent made the report, by its clock.
	SentAt time.Time `json:"sent_at"`
	// Healthy is true when the agent read its GPUs; false when it could not
	// (or runs without GPU data), and then GPUs is empty.
	Healthy bool `json:"healthy"`
	// GPUError, when the GPUs could not be read, says why (NVML's error).
	GPUError string `json:"gpu_error,omitempty"`
	GPUs     []GPU  `json:"gpus"`
	Jobs     []Job  `json:"jobs"`
	// Unknown are GPU processes no job claims: work of unknown worth,
	// never idleness.
	Unknown []Process `json:"unknown,omitempty"`
	// Drain is how a drain the controller asked for is going.
	Drain DrainStatus `json:"drain"`
	// Notice is the cloud's latest warning about the node, read from its
	// instance metadata service; nil when there is none.
	Notice *Notice `json:"notice,omitempty"`
}

// NoticeKind is what the cloud warned of.
type NoticeKind string

// The notices an agent reports.
const (
	// Interruption: the cloud will take the instance at the notice's time
	// (an EC2 spot interruption notice, spot/instance-action).
	Interruption NoticeKind = "interruption"
	// Rebalance: the instance is at elevated risk of interruption (an EC2
	// rebalance recommendation); its time is when the cloud said so.
	Rebalance NoticeKind = "rebalance"
)

// Notice is a warning from the cloud about the node.
type Notice struct {
	Kind NoticeKind `json:"kind"`
	// Action is what the cloud will do, for an interruption: terminate,
	// stop or hibernate.
	Action string `json:"action,omitempty"`
	// Time is when the cloud takes the instance (an interruption) or when
	// it gave the recommendation (a rebalance), by the cloud's clock.
	Time time.Time `json:"time"`
}

// GPU is one GPU's occupancy, as NVML reads it.
type GPU struct {
	Index int    `json:"index"`
	UUID  string `json:"uuid"`
	Name  string `json:"name"`
	// MemoryTotal and MemoryUsed are in bytes.
	MemoryTotal uint64 `json:"memory_total"`
	MemoryUsed  uint64 `json:"memory_used"`
	// UtilGPU and UtilMemory are percentages, 0-100.
	UtilGPU    int `json:"util_gpu"`
	UtilMemory int `json:"util_memory"`
	// SMActive is the percentage of the GPU's streaming multiprocessors
	// busy over the interval since the agent's last sample of it (at
	// least agent/gpu.MinSMInterval), 0-100, read through NVML's GPU
	// performance monitoring (GPM: Hopper and later); nil where the GPU
	// cannot report it, at its first reading, while MIG is enabled, and
	// when GPM fails. The controller takes it, where present, over
	// UtilGPU as the GPU's activity (Activity).
	SMActive  *int      `json:"sm_active,omitempty"`
	Processes []Process `json:"processes,omitempty"`
	// MIG is set when MIG mode is enabled; Instances counts its GPU
	// instances, and MIGDevices are they, each with its processes (those of
	// Processes that run in it).
	MIG        bool        `json:"mig,omitempty"`
	Instances  int         `json:"mig_instances,omitempty"`
	MIGDevices []MIGDevice `json:"mig_devices,omitempty"`
}

// MIGDevice is one GPU instance of a MIG-enabled GPU.
type MIGDevice struct {
	// ID is NVML's GPU instance ID on its GPU; ProfileID NVML's GPU
	// instance profile ID, and Profile NVIDIA's name for it (3g.40gb),
	// empty when the agent does not know the GPU's profiles (package mig).
	ID        int    `json:"id"`
	ProfileID int    `json:"profile_id"`
	Profile   string `json:"profile,omitempty"`
	// MemoryTotal is the instance's memory, in bytes.
	MemoryTotal uint64    `json:"memory_total"`
	Processes   []Process `json:"processes,omitempty"`
}

// maxMIGDevices bounds a GPU's GPU instances (seven on every GPU with MIG).
const maxMIGDevices = 8

// Activity is how busy the GPU was at its reading, 0-100, and what says
// so: SMActive where the GPU reports it (ActivitySM), else NVML's
// utilisation rate (ActivityUtil); none ("") for a MIG-enabled GPU
// without SMActive, for which NVML reads no utilisation (UtilGPU is 0
// whatever runs).
func (g *GPU) Activity() (pct int, source string) {
	switch {
	case g.SMActive != nil:
		return *g.SMActive, ActivitySM
	case g.MIG:
		return 0, ""
	}
	return g.UtilGPU, ActivityUtil
}

// The sources of a GPU's activity (GPU.Activity).
const (
	// ActivitySM is the share of SMs busy, read through GPM (Hopper and
	// later).
	ActivitySM = "sm_active"
	// ActivityUtil is NVML's utilisation rate: the share of time a kernel
	// ran, however few SMs it used (A100 and older).
	ActivityUtil = "utilization"
)

// Process is a compute process on a GPU.
type Process struct {
	PID int `json:"pid"`
	// GPU is the index of the GPU the process runs on.
	GPU int `json:"gpu"`
	// UsedMemory is in bytes.
	UsedMemory uint64 `json:"used_memory"`
}

// Job is a job registered with the agent.
type Job struct {
	ID string `json:"id"`
	// GPUs are the indexes of the GPUs the job holds.
	GPUs []int `json:"gpus"`
	PIDs []int `json:"pids,omitempty"`
	// Start is when the job registered; LastCheckpoint when it last
	// reported a checkpoint (zero: never).
	Start          time.Time `json:"start"`
	LastCheckpoint time.Time `json:"last_checkpoint,omitzero"`
	// LongRunning is set once the job is older than drain.long_running_after.
	LongRunning bool `json:"long_running,omitempty"`
	// ExpectedEnd is when the job expects to end (its scheduler's time
	// limit), as it registered; zero if unknown. A hint: the controller
	// never drains for it, and keeps the earliest a node reported.
	ExpectedEnd time.Time `json:"expected_end,omitzero"`
	// Team is who the job belongs to, as it registered (its scheduler's
	// account, say); empty if unknown. A label (fleet.ValidLabel).
	Team string `json:"team,omitempty"`
	// Tier is the job's class of service, which says how much its waiting
	// is worth (its scheduler's QOS or partition), as it registered;
	// empty if unknown. A label (fleet.ValidLabel).
	Tier string `json:"tier,omitempty"`
	// Name is what the job's owner calls it, as it registered; empty if
	// unknown. A label (fleet.ValidLabel).
	Name string `json:"name,omitempty"`
	// Submitted is when the job was submitted to its scheduler, as it
	// registered: its queue time is Start less Submitted. Never after
	// Start; zero if unknown.
	Submitted time.Time `json:"submitted,omitzero"`
}

// DrainState is where a drain is, as the agent sees it.
type DrainState string

// The drain states an agent reports.
const (
	// NotDraining: no drain was asked for.
	NotDraining DrainState = "none"
	// Draining: the jobs were asked to checkpoint; some have not yet.
	Draining DrainState = "draining"
	// SafeToTerminate: every job checkpointed after the agent received the
	// drain (by the agent's clock), or exited, and no GPU process the agent
	// cannot account for runs. The controller terminates on this only.
	SafeToTerminate DrainState = "safe"
	// DrainFailed: the drain timed out; the agent cleared its marker.
	DrainFailed DrainState = "failed"
)

// DrainStatus is the agent's side of a drain.
type DrainStatus struct {
	State DrainState `json:"state"`
	// ID is the drain request the status is about.
	ID string `json:"id,omitempty"`
	// Waiting names the jobs that have not checkpointed since the agent
	// received the drain.
	Waiting []string `json:"waiting,omitempty"`
}

// Answer is the controller's reply to a report.
type Answer struct {
	// Drain, when set, asks the agent to drain (or keep draining).
	Drain *DrainRequest `json:"drain,omitempty"`
}

// DrainRequest asks an agent to drain its node.
type DrainRequest struct {
	ID string `json:"id"`
	// Since is when the controller decided the drain.
	Since time.Time `json:"since"`
	// Deadline is when the drain times out.
	Deadline time.Time `json:"deadline"`
	// Signal is sent to each long-running job's processes, e.g. SIGUSR1.
	Signal string `json:"signal"`
}

// Limits bound what a report may hold.
const (
	maxGPUs      = 64
	maxJobs      = 4096
	maxProcesses = 4096
	// MaxIDLen bounds a node's and a job's ID, in bytes.
	MaxIDLen = 256
	// MaxGPUErrorLen bounds a report's gpu_error, in bytes.
	MaxGPUErrorLen = 512
)

// Validate checks every field of a report and returns the first problem,
// naming the field. now and skew bound the report's times: none may be
// more than skew after now (a clock far ahead is a bad report). A job
// lists each GPU at most once, and the GPUs a node's jobs and unknown
// processes hold (see checkHeld) never exceed the node's: the GPUs the
// report lists (when it could read them), and nodeGPUs, the GPUs its pool
// gives a node (0 when not known: then at most 64). So no report can claim
// more demand than its node can hold.
func (r *Report) Validate(now time.Time, skew time.Duration, nodeGPUs int) error {
	future := now.Add(skew)
	switch {
	case r.Node == "" || len(r.Node) > MaxIDLen:
		return fmt.Errorf("node: want a name of 1-%d characters", MaxIDLen)
	case r.SentAt.IsZero():
		return fmt.Errorf("sent_at: missing")
	case r.SentAt.After(future):
		return fmt.Errorf("sent_at: %s is in the future (more than %v ahead of the controller's clock)", r.SentAt.Format(time.RFC3339), skew)
	case len(r.GPUs) > maxGPUs:
		return fmt.Errorf("gpus: %d GPUs, at most %d", len(r.GPUs), maxGPUs)
	case len(r.Jobs) > maxJobs:
		return fmt.Errorf("jobs: %d jobs, at most %d", len(r.Jobs), maxJobs)
	case len(r.Unknown) > maxProcesses:
		return fmt.Errorf("unknown: %d processes, at most %d", len(r.Unknown), maxProcesses)
	case len(r.GPUError) > MaxGPUErrorLen:
		return fmt.Errorf("gpu_error: %d bytes, at most %d", len(r.GPUError), MaxGPUErrorLen)
	case r.GPUError != "" && r.Healthy:
		return fmt.Errorf("gpu_error: set on a healthy report")
	case !r.Healthy && len(r.Unknown) > 0:
		return fmt.Errorf("unknown: %d processes on a report that could not read its GPUs", len(r.Unknown))
	}
	gpus := make(map[int]bool, len(r.GPUs))
	for i := range r.GPUs {
		g := &r.GPUs[i]
		switch {
		case g.Index < 0 || g.Index >= maxGPUs:
			return fmt.Errorf("gpus[%d].index: %d, want 0-%d", i, g.Index, maxGPUs-1)
		case gpus[g.Index]:
			return fmt.Errorf("gpus[%d].index: GPU %d reported twice", i, g.Index)
		case g.MemoryUsed > g.MemoryTotal:
			return fmt.Errorf("gpus[%d].memory_used: %d is more than memory_total %d", i, g.MemoryUsed, g.MemoryTotal)
		case g.UtilGPU < 0 || g.UtilGPU > 100:
			return fmt.Errorf("gpus[%d].util_gpu: %d, want 0-100", i, g.UtilGPU)
		case g.UtilMemory < 0 || g.UtilMemory > 100:
			return fmt.Errorf("gpus[%d].util_memory: %d, want 0-100", i, g.UtilMemory)
		case g.SMActive != nil && (*g.SMActive < 0 || *g.SMActive > 100):
			return fmt.Errorf("gpus[%d].sm_active: %d, want 0-100", i, *g.SMActive)
		case len(g.Processes) > maxProcesses:
			return fmt.Errorf("gpus[%d].processes: %d processes, at most %d", i, len(g.Processes), maxProcesses)
		case g.Instances < 0 || (!g.MIG && g.Instances > 0):
			return fmt.Errorf("gpus[%d].mig_instances: %d with mig %v", i, g.Instances, g.MIG)
		case len(g.MIGDevices) > 0 && len(g.MIGDevices) != g.Instances, len(g.MIGDevices) > maxMIGDevices:
			return fmt.Errorf("gpus[%d].mig_devices: %d, with mig_instances %d (at most %d)", i, len(g.MIGDevices), g.Instances, maxMIGDevices)
		}
		gpus[g.Index] = true
		for j, p := range g.Processes {
			if err := p.check(gpus, g.Index); err != nil {
				return fmt.Errorf("gpus[%d].processes[%d].%w", i, j, err)
			}
		}
		for k, d := range g.MIGDevices {
			switch {
			case d.ID < 0 || d.ProfileID < 0 || len(d.Profile) > 32:
				return fmt.Errorf("gpus[%d].mig_devices[%d]: id %d, profile_id %d, profile %q: want IDs of 0 or more and a profile name of at most 32 bytes", i, k, d.ID, d.ProfileID, d.Profile)
			case d.MemoryTotal > g.MemoryTotal:
				return fmt.Errorf("gpus[%d].mig_devices[%d].memory_total: %d is more than the GPU's %d", i, k, d.MemoryTotal, g.MemoryTotal)
			case len(d.Processes) > maxProcesses:
				return fmt.Errorf("gpus[%d].mig_devices[%d].processes: %d processes, at most %d", i, k, len(d.Processes), maxProcesses)
			}
			for j, p := range d.Processes {
				if err := p.check(gpus, g.Index); err != nil {
					return fmt.Errorf("gpus[%d].mig_devices[%d].processes[%d].%w", i, k, j, err)
				}
			}
		}
	}
	for j, p := range r.Unknown {
		if err := p.check(gpus, -1); err != nil {
			return fmt.Errorf("unknown[%d].%w", j, err)
		}
	}
	ids := make(map[string]bool, len(r.Jobs))
	for i := range r.Jobs {
		j := &r.Jobs[i]
		switch {
		case j.ID == "" || len(j.ID) > MaxIDLen:
			return fmt.Errorf("jobs[%d].id: want a name of 1-%d characters", i, MaxIDLen)
		case ids[j.ID]:
			return fmt.Errorf("jobs[%d].id: job %q reported twice", i, j.ID)
		case j.Start.IsZero() || j.Start.After(future):
			return fmt.Errorf("jobs[%d].start: %s, want a time not after now", i, j.Start.Format(time.RFC3339))
		case j.LastCheckpoint.After(future):
			return fmt.Errorf("jobs[%d].last_checkpoint: %s is in the future", i, j.LastCheckpoint.Format(time.RFC3339))
		case len(j.PIDs) > maxProcesses:
			return fmt.Errorf("jobs[%d].pids: %d PIDs, at most %d", i, len(j.PIDs), maxProcesses)
		case j.Submitted.After(j.Start):
			return fmt.Errorf("jobs[%d].submitted: %s is after the job's start %s", i, j.Submitted.Format(time.RFC3339), j.Start.Format(time.RFC3339))
		}
		for _, l := range [...]struct{ field, value string }{{"team", j.Team}, {"tier", j.Tier}, {"name", j.Name}} {
			if msg := fleet.ValidLabel(l.value); msg != "" {
				return fmt.Errorf("jobs[%d].%s: %s", i, l.field, msg)
			}
		}
		ids[j.ID] = true
		listed := make(map[int]bool, len(j.GPUs))
		for k, g := range j.GPUs {
			switch {
			case g < 0 || g >= maxGPUs:
				return fmt.Errorf("jobs[%d].gpus[%d]: %d, want 0-%d", i, k, g, maxGPUs-1)
			case !gpus[g] && r.Healthy:
				return fmt.Errorf("jobs[%d].gpus[%d]: GPU %d is not among the reported GPUs", i, k, g)
			case listed[g]:
				return fmt.Errorf("jobs[%d].gpus[%d]: GPU %d listed twice for the job", i, k, g)
			}
			listed[g] = true
		}
		for k, pid := range j.PIDs {
			if pid <= 0 {
				return fmt.Errorf("jobs[%d].pids[%d]: %d, want a process ID above 0", i, k, pid)
			}
		}
	}
	limit := len(r.GPUs)
	if !r.Healthy {
		limit = maxGPUs
	}
	if nodeGPUs > 0 {
		limit = min(limit, nodeGPUs)
	}
	if err := r.checkHeld(limit); err != nil {
		return err
	}
	switch r.Drain.State {
	case NotDraining, "":
	case Draining, SafeToTerminate, DrainFailed:
		if r.Drain.ID == "" {
			return fmt.Errorf("drain.id: missing for drain state %q", r.Drain.State)
		}
	default:
		return fmt.Errorf("drain.state: %q, want none, draining, safe or failed", r.Drain.State)
	}
	for k, w := range r.Drain.Waiting {
		if !ids[w] {
			return fmt.Errorf("drain.waiting[%d]: job %q is not among the reported jobs", k, w)
		}
	}
	if n := r.Notice; n != nil {
		switch {
		case n.Kind != Interruption && n.Kind != Rebalance:
			return fmt.Errorf("notice.kind: %q, want interruption or rebalance", n.Kind)
		case n.Kind == Interruption && n.Action != "terminate" && n.Action != "stop" && n.Action != "hibernate":
			return fmt.Errorf("notice.action: %q, want terminate, stop or hibernate", n.Action)
		case n.Kind == Rebalance && n.Action != "":
			return fmt.Errorf("notice.action: %q on a rebalance recommendation, which has none", n.Action)
		case n.Time.IsZero():
			return fmt.Errorf("notice.time: missing")
		case n.Kind == Interruption && n.Time.Sub(r.SentAt) > 24*time.Hour:
			// A rebalance recommendation's time is when it was given, and
			// it may stand for days.
			return fmt.Errorf("notice.time: an interruption at %s, more than a day after the report's sent_at", n.Time.Format(time.RFC3339))
		}
	}
	return nil
}

// check validates a process; gpu is the GPU it was listed under (-1 for
// the unknown list, where its own GPU field must name a reported GPU).
func (p Process) check(gpus map[int]bool, gpu int) error {
	switch {
	case p.PID <= 0:
		return fmt.Errorf("pid: %d, want a process ID above 0", p.PID)
	case gpu >= 0 && p.GPU != gpu:
		return fmt.Errorf("gpu: %d, but listed under GPU %d", p.GPU, gpu)
	case gpu < 0 && !gpus[p.GPU]:
		return fmt.Errorf("gpu: GPU %d is not among the reported GPUs", p.GPU)
	}
	return nil
}

// checkHeld checks that the report's jobs and unknown processes hold at
// most limit GPUs. A GPU counts once however many jobs list it (jobs may
// share one, by time-slicing or MPS), except a MIG GPU, of which each job
// holds one instance (so no more jobs than its instances); a GPU unknown
// processes run on that no job lists counts whole. The error names the
// job or process at which the count first passes the limit.
func (r *Report) checkHeld(limit int) error {
	instances := map[int]int{}
	for _, g := range r.GPUs {
		if g.MIG && g.Instances > 1 {
			instances[g.Index] = g.Instances
		}
	}
	held := map[int]float64{} // GPU -> the share of it held
	total := 0.0
	over := func(field string) error {
		return fmt.Errorf("%s: the node's jobs and unknown processes would hold %.4g GPUs, more than its %d", field, total, limit)
	}
	for i, j := range r.Jobs {
		for _, g := range j.GPUs {
			k, mig := instances[g]
			switch {
			case mig && held[g]+1/float64(k) > 1+1e-9:
				return fmt.Errorf("jobs[%d].gpus: GPU %d has %d MIG instances, and more jobs than that hold it", i, g, k)
			case mig:
				held[g] += 1 / float64(k)
				total += 1 / float64(k)
			case held[g] == 0:
				held[g] = 1
				total++
			}
		}
		if total > float64(limit)+1e-9 {
			return over(fmt.Sprintf("jobs[%d].gpus", i))
		}
	}
	for i, p := range r.Unknown {
		if held[p.GPU] == 0 {
			held[p.GPU] = 1
			total++
			if total > float64(limit)+1e-9 {
				return over(fmt.Sprintf("unknown[%d].gpu", i))
			}
		}
	}
	return nil
}

// FleetJobs are the report's jobs as the planner sees them, GPU processes
// that no job claims included: each is work of unknown worth that never
// checkpointed, so the node it runs on is never taken for idle nor drained.
// A GPU counts once, whoever holds it: a job's GPUs are those no job
// before it lists (jobs sharing a GPU, or the instances of one MIG GPU,
// hold that GPU once), and an unknown process holds its GPU if no job or
// process before it does. So the node's demand is the GPUs in use on it,
// never more than it has.
func (r *Report) FleetJobs() []fleet.Job {
	out := make([]fleet.Job, 0, len(r.Jobs)+len(r.Unknown))
	taken := map[int]bool{}
	hold := func(g int) int {
		if taken[g] {
			return 0
		}
		taken[g] = true
		return 1
	}
	for _, j := range r.Jobs {
		n := 0
		for _, g := range j.GPUs {
			n += hold(g)
		}
		fj := fleet.Job{ID: j.ID, GPUs: n, Start: j.Start, LongRunning: j.LongRunning, LastCheckpoint: j.LastCheckpoint,
			Team: j.Team, Tier: j.Tier, Name: j.Name, Submitted: j.Submitted}
		if j.ExpectedEnd.After(j.Start) {
			fj.ExpectedEnd = j.ExpectedEnd // one before the start says nothing
		}
		out = append(out, fj)
	}
	for _, p := range r.Unknown {
		out = append(out, fleet.Job{ID: fmt.Sprintf("unknown-process-%d", p.PID), GPUs: hold(p.GPU), Start: r.SentAt})
	}
	return out
}
