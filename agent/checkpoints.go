package agent

import (
	"os"
	"path/filepath"
	"time"
)

// fileSeen is a checkpoint file as last seen; seen is the latest time it
// can have been written by, on the agent's clock: the scan before the one
// that first saw it so (or that one, for the first scan of its job).
type fileSeen struct {
	path  string
	mtime time.Time
	size  int64
	seen  time.Time
}

// same reports whether two sightings are of the same file, unchanged.
func (f fileSeen) same(g fileSeen) bool {
	return f.path == g.path && f.mtime.Equal(g.mtime) && f.size == g.size
}

// Tick moves a drain on with the clock: it takes new checkpoint files as
// checkpoints, signals jobs that became long-running and fails the drain
// at its deadline.
func (a *Agent) Tick() {
	// The file system is read without the lock: a hung checkpoint volume
	// must not stop reports or the drain's deadline.
	a.mu.Lock()
	patterns := map[string]string{}
	for id, j := range a.jobs {
		if j.checkpoints != "" {
			patterns[id] = j.checkpoints
		}
	}
	scanAt := a.cfg.Now()
	a.mu.Unlock()
	newest := map[string]fileSeen{}
	for id, pat := range patterns {
		files, _ := filepath.Glob(pat)
		for _, f := range files {
			if st, err := os.Stat(f); err == nil && st.Mode().IsRegular() && st.ModTime().After(newest[id].mtime) {
				newest[id] = fileSeen{path: f, mtime: st.ModTime(), size: st.Size()}
			}
		}
	}
	a.mu.Lock()
	now := a.cfg.Now()
	taken := false
	for id, f := range newest {
		j := a.jobs[id]
		switch {
		case j == nil || !f.mtime.After(j.newest.mtime):
			// gone, or nothing new
		case !f.same(j.pending):
			// First sight of this file as it is: it was written after the
			// previous scan, and no later than this one, by the agent's
			// clock; the previous scan bounds it (this one, if none).
			f.seen = j.scanned
			if f.seen.IsZero() {
				f.seen = scanAt
				if a.drain != nil && a.since.Before(f.seen) {
					// The job's first scan, during a drain (the agent
					// restarted, or the job gained a pattern): what is
					// there may predate the drain, so it does not count,
					// and the job is asked again for one that does.
					f.seen = a.since
					j.signalled = ""
				}
			}
			j.pending = f
		case f.mtime.After(now):
			// Dated in the future: not trusted until the agent's clock
			// passes it.
		default:
			// The same file, the same size, a tick later: written. It was
			// made at its own time, bounded by the agent's clock: no later
			// than the scan before the one that first saw it. So a file
			// written before a drain never counts as a checkpoint after it,
			// however late the agent takes it, even from a file system
			// whose clock is ahead (the agent scans as a drain arrives).
			j.newest, j.pending = j.pending, fileSeen{}
			j.LastCheckpoint = earlier(f.mtime, j.newest.seen)
			taken = true
		}
	}
	for id := range patterns {
		if j := a.jobs[id]; j != nil {
			j.scanned = scanAt
		}
	}
	before := a.state
	a.settle()
	if a.state != before {
		a.notify()
	}
	var snap []byte
	var seq uint64
	if taken {
		snap, seq = a.snapshot()
	}
	a.mu.Unlock()
	// A failed save is as the next change's: a checkpoint file is seen
	// again after a restart.
	_ = a.persist(snap, seq)
}
