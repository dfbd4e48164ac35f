package agent

import "github.com/fleetcast/autoscaler/agent/report"

// Report is the node's report now: GPUs (unhealthy, with the reason, when
// they cannot be read), jobs, GPU processes no job claims, and the drain's
// state.
func (a *Agent) Report() report.Report {
	var gpus []report.GPU
	var gpuErr string
	healthy := a.cfg.GPUs != nil // without GPU data, nothing vouches for the GPUs
	if a.cfg.GPUs != nil {
		var err error
		if gpus, err = a.cfg.GPUs.Read(); err != nil {
			healthy, gpus, gpuErr = false, nil, truncate(err.Error(), report.MaxGPUErrorLen)
		}
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	now := a.cfg.Now()
	r := report.Report{Node: a.cfg.Node, SentAt: now, Healthy: healthy, GPUError: gpuErr, GPUs: gpus, Drain: report.DrainStatus{State: a.state}}
	if a.warning != nil {
		w := *a.warning
		r.Notice = &w
	}
	claimed := map[int]bool{}
	for _, id := range a.jobIDs() {
		j := a.jobs[id]
		rj := j.Job
		rj.LongRunning = a.longRunning(j, now)
		r.Jobs = append(r.Jobs, rj)
		for _, p := range j.PIDs {
			claimed[p] = true
		}
	}
	for _, g := range gpus {
		for _, p := range g.Processes {
			if !claimed[p.PID] {
				r.Unknown = append(r.Unknown, p)
			}
		}
	}
	if healthy {
		a.unknown = len(r.Unknown)
	}
	a.gpusRead = healthy
	if a.drain != nil {
		r.Drain.ID = a.drain.ID
		if a.state == report.Draining {
			r.Drain.Waiting = a.waiting(now)
		}
		if a.state == report.Draining || a.state == report.SafeToTerminate {
			a.settle() // the unknown processes may have changed
			r.Drain.State = a.state
		}
	}
	return r
}
