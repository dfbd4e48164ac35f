package agent

import (
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"sort"
	"syscall"
	"time"

	"github.com/fleetcast/autoscaler/agent/report"
	"github.com/fleetcast/autoscaler/fleet"
)

// job is a registered job.
type job struct {
	report.Job
	// owner is the user ID that registered the job: a caller other than
	// root or the agent's user may act only on its own jobs.
	owner int
	// signalled is the drain the job was last asked to checkpoint for.
	signalled string
	// checkpoints, when set, is a glob of the job's checkpoint files: a
	// newer file counts as a checkpoint, made at its modification time or
	// when the agent first saw it, whichever is earlier.
	checkpoints string
	// started are the processes' start times (from /proc), so a PID the
	// kernel has since given to another process is not signalled.
	started map[int]uint64
	// newest is the newest checkpoint file taken; pending a newer one
	// seen once, taken when its size holds still for a tick.
	newest  fileSeen
	pending fileSeen
	// scanned is when the last scan of its checkpoint files began, by the
	// agent's clock.
	scanned time.Time
}

// Limits on what jobs may register: those a report may carry.
const (
	maxJobs  = 4096
	maxIDLen = report.MaxIDLen
	maxGPU   = 63
	maxPIDs  = 4096
)

// jobIDs are the registered jobs' IDs, sorted; a.mu is held.
func (a *Agent) jobIDs() []string {
	ids := make([]string, 0, len(a.jobs))
	for id := range a.jobs {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	return ids
}

// Register adds (or replaces) a job: its ID, the GPUs it holds and its
// processes. A job is long-running once older than LongRunningAfter.
func (a *Agent) Register(id string, gpus, pids []int) error {
	return a.RegisterWatched(id, gpus, pids, "")
}

// RegisterWatched registers a job whose checkpoints the agent also sees as
// files: each newer file matching the glob counts as a checkpoint.
func (a *Agent) RegisterWatched(id string, gpus, pids []int, checkpoints string) error {
	return a.RegisterJob(JobRequest{ID: id, GPUs: gpus, PIDs: pids, Checkpoints: checkpoints})
}

// RegisterJob registers the job req describes (see JobRequest), as the
// local API does.
func (a *Agent) RegisterJob(req JobRequest) error {
	return a.registerJob(req, trusted)
}

// registerJob registers a job for caller c: a restricted caller only its
// own processes, and not over another user's job.
func (a *Agent) registerJob(req JobRequest, c caller) error {
	id, gpus, pids, checkpoints := req.ID, req.GPUs, req.PIDs, req.Checkpoints
	if checkpoints != "" {
		if _, err := filepath.Match(checkpoints, ""); err != nil {
			return fmt.Errorf("job %s: checkpoint pattern %q: %w", id, checkpoints, err)
		}
	}
	if id == "" {
		return errors.New("a job needs an ID")
	}
	for _, p := range pids {
		if p <= 0 {
			return fmt.Errorf("job %s: PID %d, want a process ID above 0", id, p)
		}
	}
	switch {
	case len(id) > maxIDLen:
		return fmt.Errorf("job ID of %d characters, at most %d", len(id), maxIDLen)
	case len(pids) > maxPIDs:
		return fmt.Errorf("job %s: %d PIDs, at most %d", id, len(pids), maxPIDs)
	}
	for _, g := range gpus {
		if g < 0 || g > maxGPU {
			return fmt.Errorf("job %s: GPU %d, want 0-%d", id, g, maxGPU)
		}
	}
	if err := checkLabels(req.Team, req.Tier, req.Name); err != nil {
		return fmt.Errorf("job %s: %w", id, err)
	}
	// A PID no process has is a mistake (a typo, a launcher that exited,
	// a container's own numbering): the job would look exited at once, and
	// its node could be drained under it.
	for _, p := range pids {
		if err := a.cfg.Signal(p, 0); errors.Is(err, syscall.ESRCH) {
			return fmt.Errorf("job %s: process %d does not exist: register the PIDs of the job's running processes as the node sees them (not a container's own numbering)", id, p)
		}
	}
	if err := a.mayUse(c, id, pids); err != nil {
		return err
	}
	started := make(map[int]uint64, len(pids))
	for _, p := range pids {
		started[p] = procStart(p)
	}
	return a.change(func() (string, error) {
		j := a.jobs[id]
		if j != nil {
			if err := mayTouch(c, j); err != nil {
				return "", err
			}
		}
		if j == nil && a.drain != nil && a.state != report.DrainFailed {
			return "", &DrainingError{Node: a.cfg.Node, Drain: a.drain.ID}
		}
		start := a.cfg.Now()
		if j != nil {
			start = j.Start
		}
		if req.Submitted.After(start) {
			return "", fmt.Errorf("job %s: submitted: %s is after the job's start, %s by the agent's clock: want when the job was submitted to its scheduler, before it started",
				id, req.Submitted.Format(time.RFC3339), start.Format(time.RFC3339))
		}
		if j == nil {
			if len(a.jobs) >= maxJobs {
				return "", fmt.Errorf("%d jobs registered already, at most %d", len(a.jobs), maxJobs)
			}
			j = &job{Job: report.Job{ID: id, Start: start}, owner: c.uid}
			a.jobs[id] = j
		}
		// Registering again (more PIDs, a restarted launcher) keeps the
		// job's start, checkpoints and drain signal: a running job is not
		// made new. Its expected end, labels and submission time are as
		// it says now.
		j.GPUs, j.PIDs, j.started, j.checkpoints = slices.Clone(gpus), slices.Clone(pids), started, checkpoints
		j.ExpectedEnd = req.ExpectedEnd
		j.Team, j.Tier, j.Name, j.Submitted = req.Team, req.Tier, req.Name, req.Submitted
		a.notify()
		return "job " + id + " registered", nil
	})
}

// checkLabels checks a job's team, tier and name (fleet.ValidLabel),
// naming the first that is wrong.
func checkLabels(team, tier, name string) error {
	for _, l := range [...]struct{ field, value string }{{"team", team}, {"tier", tier}, {"name", name}} {
		if msg := fleet.ValidLabel(l.value); msg != "" {
			return fmt.Errorf("%s: %s", l.field, msg)
		}
	}
	return nil
}

// DrainingError is the refusal of a new job on a draining node: the node
// takes no new work, and the job should go to another node. A job already
// running may register again (a launcher adding processes): it still has
// to checkpoint for the drain.
type DrainingError struct {
	Node, Drain string
}

func (e *DrainingError) Error() string {
	return fmt.Sprintf("node %s is draining (drain %s) and takes no new jobs: place the job on another node", e.Node, e.Drain)
}

// Unregister removes a job that ended.
func (a *Agent) Unregister(id string) error { return a.unregister(id, trusted) }

func (a *Agent) unregister(id string, c caller) error {
	return a.change(func() (string, error) {
		if a.jobs[id] == nil {
			return "", fmt.Errorf("no job %q", id)
		}
		if err := mayTouch(c, a.jobs[id]); err != nil {
			return "", err
		}
		delete(a.jobs, id)
		a.settle()
		a.notify()
		return "job " + id + " ended", nil
	})
}

// Checkpoint records that a job saved its state now.
func (a *Agent) Checkpoint(id string) error { return a.checkpoint(id, trusted) }

func (a *Agent) checkpoint(id string, c caller) error {
	return a.change(func() (string, error) {
		j := a.jobs[id]
		if j == nil {
			return "", fmt.Errorf("no job %q: register it first", id)
		}
		if err := mayTouch(c, j); err != nil {
			return "", err
		}
		j.LastCheckpoint = a.cfg.Now()
		a.settle()
		a.notify()
		return "job " + id + " checkpointed", nil
	})
}

func (a *Agent) longRunning(j *job, now time.Time) bool {
	return now.Sub(j.Start) >= a.cfg.LongRunningAfter
}
