package agent

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/fleetcast/autoscaler/agent/report"
	"github.com/fleetcast/autoscaler/fleet"
)

// savedJobs is the agent's state file: the jobs registered, so that an
// agent restarted (an upgrade, a crash) knows at once what runs on its
// node. Without it, a restarted agent would take a node whose jobs have
// not registered again for an empty one, and could confirm a drain the
// controller hands back at once, losing their work.
type savedJobs struct {
	Node string `json:"node"`
	// Boot is the machine's boot ID when the file was written: after a
	// reboot no job of before runs, and their PIDs may be others'.
	Boot string     `json:"boot,omitempty"`
	Jobs []savedJob `json:"jobs"`
}

type savedJob struct {
	report.Job
	Checkpoints string `json:"checkpoints,omitempty"`
	// Started are the processes' start times (see job.started), by PID.
	Started map[int]uint64 `json:"started,omitempty"`
	// Newest is the newest checkpoint file taken.
	NewestPath  string    `json:"newest_path,omitempty"`
	NewestMtime time.Time `json:"newest_mtime,omitzero"`
	NewestSize  int64     `json:"newest_size,omitempty"`
	// Owner is the user ID that registered the job (0, root, in a file
	// written before owners were kept).
	Owner int `json:"owner,omitempty"`
}

// load reads the state file into a.jobs, if there is one. A file that
// cannot be read or parsed, or is another node's, is an error naming it:
// the agent does not start on a guess (move the file aside to start with
// no jobs).
func (a *Agent) load() error {
	path := a.cfg.StateFile
	data, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("agent state %s: %w", path, err)
	}
	var s savedJobs
	if err := fleet.DecodeJSON(data, &s); err != nil {
		return fmt.Errorf("agent state %s: %w; move it aside to start with no jobs", path, err)
	}
	if s.Node != a.cfg.Node {
		return fmt.Errorf("agent state %s: it is node %q's, not %q; move it aside to start with no jobs", path, s.Node, a.cfg.Node)
	}
	for i, sj := range s.Jobs {
		switch {
		case sj.ID == "" || len(sj.ID) > maxIDLen:
			return fmt.Errorf("agent state %s: jobs[%d].id: want 1-%d characters", path, i, maxIDLen)
		case a.jobs[sj.ID] != nil:
			return fmt.Errorf("agent state %s: jobs[%d].id: job %q listed twice", path, i, sj.ID)
		case sj.Start.IsZero():
			return fmt.Errorf("agent state %s: jobs[%d].start: missing", path, i)
		case sj.Submitted.After(sj.Start):
			return fmt.Errorf("agent state %s: jobs[%d].submitted: %s is after the job's start %s", path, i, sj.Submitted.Format(time.RFC3339), sj.Start.Format(time.RFC3339))
		}
		if err := checkLabels(sj.Team, sj.Tier, sj.Name); err != nil {
			return fmt.Errorf("agent state %s: jobs[%d].%w", path, i, err)
		}
		if sj.Checkpoints != "" {
			if _, err := filepath.Match(sj.Checkpoints, ""); err != nil {
				return fmt.Errorf("agent state %s: jobs[%d].checkpoints: %w", path, i, err)
			}
		}
		j := &job{Job: sj.Job, owner: sj.Owner, checkpoints: sj.Checkpoints, started: sj.Started,
			newest: fileSeen{path: sj.NewestPath, mtime: sj.NewestMtime, size: sj.NewestSize}}
		a.jobs[sj.ID] = j
	}
	for id, j := range a.jobs {
		// Written before a reboot, none of its jobs runs now (and their
		// PIDs may be others'); or the job ended while the agent was down.
		if s.Boot != a.boot || a.exited(j) {
			delete(a.jobs, id)
		}
	}
	return nil
}

// bootID is the machine's boot ID (Linux), "" where there is none.
func bootID() string {
	b, err := os.ReadFile("/proc/sys/kernel/random/boot_id")
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
}

// snapshot is the state file's content now, and its number; nil when the
// agent keeps no state file. a.mu is held.
func (a *Agent) snapshot() ([]byte, uint64) {
	if a.cfg.StateFile == "" {
		return nil, 0
	}
	s := savedJobs{Node: a.cfg.Node, Boot: a.boot, Jobs: make([]savedJob, 0, len(a.jobs))}
	for _, id := range a.jobIDs() {
		j := a.jobs[id]
		s.Jobs = append(s.Jobs, savedJob{Job: j.Job, Owner: j.owner, Checkpoints: j.checkpoints, Started: j.started,
			NewestPath: j.newest.path, NewestMtime: j.newest.mtime, NewestSize: j.newest.size})
	}
	data, err := json.Marshal(s)
	if err != nil {
		return nil, 0 // plain values: cannot fail
	}
	a.seq++
	return data, a.seq
}

// persist writes a snapshot to the state file, unless a later one was
// written already (a temporary file, synced and renamed, the directory
// synced: a crash leaves the old state or the new). a.mu is not held.
func (a *Agent) persist(data []byte, seq uint64) error {
	if data == nil {
		return nil
	}
	a.saveMu.Lock()
	defer a.saveMu.Unlock()
	if seq <= a.saved {
		return nil
	}
	path := a.cfg.StateFile
	tmp, err := os.CreateTemp(filepath.Dir(path), ".agent-state-*")
	if err != nil {
		return fmt.Errorf("agent state %s: %w", path, err)
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return fmt.Errorf("agent state %s: %w", path, err)
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return fmt.Errorf("agent state %s: %w", path, err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("agent state %s: %w", path, err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return fmt.Errorf("agent state %s: %w", path, err)
	}
	if dir, err := os.Open(filepath.Dir(path)); err == nil {
		_ = dir.Sync()
		dir.Close()
	}
	a.saved = seq
	return nil
}
