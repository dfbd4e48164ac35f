package state

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"slices"
	"time"
)

var (
	bucketUsageHours = []byte("usage-hours")
	bucketUsageJobs  = []byte("usage-jobs")
)

// UsageHour is one team and tier's use of the fleet over one hour: what
// it was charged, by pool and kind, and how its jobs waited. The
// controller writes the hour in progress as it goes, and each hour is
// kept for the usage retention (a year by default). About 150 bytes of
// JSON, 60 more for each pool and kind charged, and a few for each job
// started.
type UsageHour struct {
	// Hour is the hour's start (UTC, on the hour).
	Hour time.Time `json:"hour"`
	Team string    `json:"team"`
	Tier string    `json:"tier"`
	// Charges are what the team and tier were charged, by pool and kind
	// (usage.Used, usage.BoughtFor, usage.Idle).
	Charges []UsageCharge `json:"charges,omitempty"`
	// WaitedGPUHours are the GPUs its pending jobs asked for, times how
	// long they waited, over the hour.
	WaitedGPUHours float64 `json:"waited_gpu_hours,omitempty"`
	// Started counts its jobs first seen running in the hour, and
	// Queue is the queue time of each of them whose queue time is known,
	// in whole seconds, so a report's quantiles are exact for as long as
	// the hours are kept.
	Started int     `json:"started,omitempty"`
	Queue   []int64 `json:"queue_s,omitempty"`
}

// UsageCharge is what one pool charged a team and tier, of one kind.
type UsageCharge struct {
	Pool     string  `json:"pool"`
	Kind     string  `json:"kind"`
	Micros   int64   `json:"micros"`
	GPUHours float64 `json:"gpu_hours"`
}

// UsageJob is one job's record: who ran it, its timeline, and what it
// was charged. Written when the job is first seen, when it ends, and when
// the controller stops; kept for the job retention (30 days by
// default) after its end. About 160 bytes with its key, in a compact
// binary form (encodeUsageJob).
type UsageJob struct {
	ID   string `json:"id"`
	Team string `json:"team"`
	Tier string `json:"tier"`
	Name string `json:"name,omitempty"`
	// Pool is the pool of the first node the job was seen on, and Nodes
	// how many nodes it ran on at most.
	Pool  string `json:"pool"`
	Nodes int    `json:"nodes"`
	// GPUs is the most GPUs it held at once.
	GPUs      int       `json:"gpus"`
	Submitted time.Time `json:"submitted,omitzero"`
	Eligible  time.Time `json:"eligible,omitzero"`
	Start     time.Time `json:"start"`
	// End is when it was last seen running, once it is gone; zero while
	// it runs.
	End            time.Time `json:"end,omitzero"`
	LastCheckpoint time.Time `json:"last_checkpoint,omitzero"`
	// Checkpoints counts the checkpoints seen: a new last checkpoint
	// where the job's node was read (each cycle its node's jobs change,
	// and every 30 cycles).
	Checkpoints int     `json:"checkpoints,omitempty"`
	Micros      int64   `json:"micros"`
	GPUHours    float64 `json:"gpu_hours"`
	// IdleBefore and Stalled are the parts of Micros and GPUHours the job
	// held allocated-idle (its GPUs under the usage block's
	// idle_threshold for at least its idle_window): before its first busy
	// reading, and after one.
	IdleBeforeMicros   int64   `json:"idle_before_execution_micros,omitempty"`
	IdleBeforeGPUHours float64 `json:"idle_before_execution_gpu_hours,omitempty"`
	StalledMicros      int64   `json:"stalled_micros,omitempty"`
	StalledGPUHours    float64 `json:"stalled_gpu_hours,omitempty"`
}

// usageHourKey orders the hours by time, then team and tier.
func usageHourKey(h UsageHour) string {
	return logKey(h.Hour) + "/" + h.Team + "/" + h.Tier
}

// usageJobKey orders the jobs by start, then ID.
func usageJobKey(j UsageJob) string { return logKey(j.Start) + "/" + j.ID }

// checkUsage checks the fields the usage records must have.
func checkUsage(hours []UsageHour, jobs []UsageJob) error {
	for _, h := range hours {
		switch {
		case h.Hour.IsZero() || !h.Hour.Equal(h.Hour.Truncate(time.Hour)):
			return fmt.Errorf("state: usage hour %s: want the start of an hour", h.Hour.UTC().Format(time.RFC3339))
		case h.Team == "" || h.Tier == "":
			return fmt.Errorf("state: usage hour %s: team %q, tier %q: want both", h.Hour.UTC().Format(time.RFC3339), h.Team, h.Tier)
		case math.IsNaN(h.WaitedGPUHours) || math.IsInf(h.WaitedGPUHours, 0):
			return fmt.Errorf("state: usage hour %s of %s/%s: a figure is not a number", h.Hour.UTC().Format(time.RFC3339), h.Team, h.Tier)
		}
		for _, c := range h.Charges {
			if c.Pool == "" || c.Kind == "" || math.IsNaN(c.GPUHours) || math.IsInf(c.GPUHours, 0) {
				return fmt.Errorf("state: usage hour %s of %s/%s: charge %+v: want a pool, a kind and a number of GPU-hours",
					h.Hour.UTC().Format(time.RFC3339), h.Team, h.Tier, c)
			}
		}
	}
	for _, j := range jobs {
		switch {
		case j.ID == "":
			return errors.New("state: usage job with no ID")
		case j.Start.IsZero():
			return fmt.Errorf("state: usage job %s: no start", j.ID)
		case !inNanos(j.Start) || !inNanos(j.Submitted) || !inNanos(j.Eligible) || !inNanos(j.End) || !inNanos(j.LastCheckpoint):
			return fmt.Errorf("state: usage job %s: a time out of range: want a time from 1970 to 2262", j.ID)
		case !j.End.IsZero() && j.End.Before(j.Start):
			return fmt.Errorf("state: usage job %s: ends %s before its start %s", j.ID, j.End.UTC().Format(time.RFC3339), j.Start.UTC().Format(time.RFC3339))
		case math.IsNaN(j.GPUHours) || math.IsInf(j.GPUHours, 0):
			return fmt.Errorf("state: usage job %s: GPU-hours %v", j.ID, j.GPUHours)
		}
	}
	return nil
}

// PutUsage records (or replaces) usage hours and job records, in one
// transaction.
func (s *Store) PutUsage(hours []UsageHour, jobs []UsageJob) error {
	if err := checkUsage(hours, jobs); err != nil {
		return err
	}
	return s.kv.update(func(tx kvTx) error {
		hb, jb := tx.Bucket(bucketUsageHours), tx.Bucket(bucketUsageJobs)
		for _, h := range hours {
			if err := putJSON(hb, usageHourKey(h), h); err != nil {
				return err
			}
		}
		for _, j := range jobs {
			k := usageJobKey(j)
			if err := jb.Put([]byte(k), sealed([]byte(k), encodeUsageJob(j))); err != nil {
				return fmt.Errorf("state: writing usage job %s: %w", j.ID, err)
			}
		}
		return nil
	})
}

// UsageHours returns the usage hours that start in [from, to), by hour,
// team and tier. A zero to reads to the end.
func (s *Store) UsageHours(from, to time.Time) ([]UsageHour, error) {
	return rangeOf[UsageHour](s, bucketUsageHours, from, to)
}

// UsageJobs returns the job records of jobs started in [from, to), by
// start and ID. A zero to reads to the end.
func (s *Store) UsageJobs(from, to time.Time) ([]UsageJob, error) {
	var out []UsageJob
	end := []byte(logKey(to))
	err := s.kv.view(func(tx kvTx) error {
		c := tx.Bucket(bucketUsageJobs).Cursor()
		for k, v := c.Seek([]byte(logKey(from))); k != nil; k, v = c.Next() {
			if !to.IsZero() && bytes.Compare(k, end) >= 0 {
				break
			}
			j, err := s.decodeUsageJob(k, v)
			if err != nil {
				return err
			}
			out = append(out, j)
		}
		return nil
	})
	return out, err
}

// rangeOf decodes a bucket's records whose keys begin with a logKey time
// in [from, to).
func rangeOf[T any](s *Store, bucket []byte, from, to time.Time) ([]T, error) {
	var out []T
	end := []byte(logKey(to))
	err := s.kv.view(func(tx kvTx) error {
		c := tx.Bucket(bucket).Cursor()
		for k, v := c.Seek([]byte(logKey(from))); k != nil; k, v = c.Next() {
			if !to.IsZero() && bytes.Compare(k, end) >= 0 {
				break
			}
			x, err := decode[T](s, bucket, k, v)
			if err != nil {
				return err
			}
			out = append(out, x)
		}
		return nil
	})
	return out, err
}

// PruneUsage deletes the usage hours that start before hoursBefore, and
// the records of jobs that ended before jobsBefore, and returns how many
// records it deleted. A job record still running is kept.
func (s *Store) PruneUsage(hoursBefore, jobsBefore time.Time) (int, error) {
	n := 0
	err := s.kv.update(func(tx kvTx) error {
		d, err := tx.Bucket(bucketUsageHours).DeleteBefore([]byte(logKey(hoursBefore)))
		n += d
		if err != nil {
			return fmt.Errorf("state: pruning usage hours: %w", err)
		}
		jc := tx.Bucket(bucketUsageJobs).Cursor()
		end := []byte(logKey(jobsBefore))
		var dead [][]byte
		for k, v := jc.First(); k != nil && bytes.Compare(k, end) < 0; k, v = jc.Next() {
			j, err := s.decodeUsageJob(k, v)
			if err != nil {
				return err
			}
			if !j.End.IsZero() && j.End.Before(jobsBefore) {
				dead = append(dead, bytes.Clone(k))
			}
		}
		b := tx.Bucket(bucketUsageJobs)
		for _, k := range dead {
			if err := b.Delete(k); err != nil {
				return fmt.Errorf("state: pruning usage jobs: %w", err)
			}
			n++
		}
		return nil
	})
	return n, err
}

// PutUsage records (or replaces) usage hours and job records.
func (m *Memory) PutUsage(hours []UsageHour, jobs []UsageJob) error {
	if err := checkUsage(hours, jobs); err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.usageHours == nil {
		m.usageHours, m.usageJobs = map[string]UsageHour{}, map[string]UsageJob{}
	}
	for _, h := range hours {
		h.Hour = wall(h.Hour)
		h.Charges = slices.Clone(h.Charges)
		h.Queue = slices.Clone(h.Queue)
		m.usageHours[usageHourKey(h)] = h
	}
	for _, j := range jobs {
		j.Submitted, j.Eligible, j.Start, j.End, j.LastCheckpoint = fromUnixNanos(unixNanos(j.Submitted)), fromUnixNanos(unixNanos(j.Eligible)),
			fromUnixNanos(unixNanos(j.Start)), fromUnixNanos(unixNanos(j.End)), fromUnixNanos(unixNanos(j.LastCheckpoint))
		m.usageJobs[usageJobKey(j)] = j
	}
	return nil
}

// UsageHours returns the usage hours that start in [from, to), by hour,
// team and tier. A zero to reads to the end.
func (m *Memory) UsageHours(from, to time.Time) ([]UsageHour, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return memRange(m.usageHours, from, to), nil
}

// UsageJobs returns the job records of jobs started in [from, to), by
// start and ID. A zero to reads to the end.
func (m *Memory) UsageJobs(from, to time.Time) ([]UsageJob, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return memRange(m.usageJobs, from, to), nil
}

// memRange is the records of xs whose keys begin with a logKey time in
// [from, to), in key order.
func memRange[T any](xs map[string]T, from, to time.Time) []T {
	lo, hi := logKey(from), logKey(to)
	var keys []string
	for k := range xs {
		if k >= lo && (to.IsZero() || k < hi) {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	out := make([]T, 0, len(keys))
	for _, k := range keys {
		out = append(out, xs[k])
	}
	return out
}

// PruneUsage deletes the usage hours that start before hoursBefore, and
// the records of jobs that ended before jobsBefore, and returns how many
// records it deleted. A job record still running is kept.
func (m *Memory) PruneUsage(hoursBefore, jobsBefore time.Time) (int, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	n := 0
	end := logKey(hoursBefore)
	for k := range m.usageHours {
		if k < end {
			delete(m.usageHours, k)
			n++
		}
	}
	for k, j := range m.usageJobs {
		if !j.End.IsZero() && j.End.Before(jobsBefore) && k < logKey(jobsBefore) {
			delete(m.usageJobs, k)
			n++
		}
	}
	return n, nil
}

// usageJobVersion is the first byte of a job record's encoding. Job
// records are many (a month of a large fleet's jobs), and a report reads
// them all: they are kept in a compact binary form, not JSON, so that a
// report reads 100,000 of them in half a second. Version 2 adds the
// allocated-idle charges, and is written only for a job that has any.
const (
	usageJobVersion     = 1
	usageJobIdleVersion = 2
)

// encodeUsageJob is a job record's encoding: its version, then each field
// in order, strings and integers as varints (times as nanoseconds since
// 1970, 0 for none), GPU-hours as a float's bits; and, in version 2, the
// allocated-idle micro-dollars as varints and GPU-hours as floats' bits.
func encodeUsageJob(j UsageJob) []byte {
	b := make([]byte, 0, 96+len(j.ID)+len(j.Team)+len(j.Tier)+len(j.Name)+len(j.Pool))
	idle := j.IdleBeforeMicros != 0 || j.StalledMicros != 0 || j.IdleBeforeGPUHours != 0 || j.StalledGPUHours != 0
	if idle {
		b = append(b, usageJobIdleVersion)
	} else {
		b = append(b, usageJobVersion)
	}
	for _, s := range []string{j.ID, j.Team, j.Tier, j.Name, j.Pool} {
		b = binary.AppendUvarint(b, uint64(len(s)))
		b = append(b, s...)
	}
	for _, v := range []int64{int64(j.Nodes), int64(j.GPUs), int64(j.Checkpoints), j.Micros,
		unixNanos(j.Submitted), unixNanos(j.Eligible), unixNanos(j.Start), unixNanos(j.End), unixNanos(j.LastCheckpoint)} {
		b = binary.AppendVarint(b, v)
	}
	b = binary.BigEndian.AppendUint64(b, math.Float64bits(j.GPUHours))
	if idle {
		b = binary.AppendVarint(b, j.IdleBeforeMicros)
		b = binary.AppendVarint(b, j.StalledMicros)
		b = binary.BigEndian.AppendUint64(b, math.Float64bits(j.IdleBeforeGPUHours))
		b = binary.BigEndian.AppendUint64(b, math.Float64bits(j.StalledGPUHours))
	}
	return b
}

// inNanos reports whether t is zero or a time unixNanos keeps: after
// 1970 began, and before 2262.
func inNanos(t time.Time) bool {
	return t.IsZero() || t.After(time.Unix(0, 0)) && t.Before(time.Unix(0, math.MaxInt64))
}

// unixNanos is t in nanoseconds since 1970, 0 for the zero time.
func unixNanos(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixNano()
}

// fromUnixNanos is unixNanos read back, in UTC.
func fromUnixNanos(n int64) time.Time {
	if n == 0 {
		return time.Time{}
	}
	return time.Unix(0, n).UTC()
}

// decodeUsageJob checks and reads a job record; an error names the file,
// the bucket and the key.
func (s *Store) decodeUsageJob(k, v []byte) (UsageJob, error) {
	data, err := unseal(k, v)
	var j UsageJob
	if err == nil {
		j, err = parseUsageJob(data)
	}
	if err != nil {
		return UsageJob{}, fmt.Errorf("state: %s: %s/%s: %w", s.path, bucketUsageJobs, k, err)
	}
	return j, nil
}

// parseUsageJob reads encodeUsageJob's encoding.
func parseUsageJob(b []byte) (UsageJob, error) {
	var j UsageJob
	if len(b) == 0 || b[0] != usageJobVersion && b[0] != usageJobIdleVersion {
		return j, errors.New("not a job record of a version this controller reads")
	}
	idle := b[0] == usageJobIdleVersion
	b = b[1:]
	for _, dst := range []*string{&j.ID, &j.Team, &j.Tier, &j.Name, &j.Pool} {
		n, w := binary.Uvarint(b)
		if w <= 0 || n > uint64(len(b)-w) {
			return j, errors.New("a job record cut short")
		}
		*dst, b = string(b[w:w+int(n)]), b[w+int(n):]
	}
	var ints [9]int64
	for i := range ints {
		v, w := binary.Varint(b)
		if w <= 0 {
			return j, errors.New("a job record cut short")
		}
		ints[i], b = v, b[w:]
	}
	if len(b) < 8 || !idle && len(b) != 8 {
		return j, fmt.Errorf("a job record with %d bytes where its GPU-hours' 8 are", len(b))
	}
	j.Nodes, j.GPUs, j.Checkpoints, j.Micros = int(ints[0]), int(ints[1]), int(ints[2]), ints[3]
	j.Submitted, j.Eligible, j.Start, j.End, j.LastCheckpoint = fromUnixNanos(ints[4]), fromUnixNanos(ints[5]), fromUnixNanos(ints[6]), fromUnixNanos(ints[7]), fromUnixNanos(ints[8])
	j.GPUHours, b = math.Float64frombits(binary.BigEndian.Uint64(b)), b[8:]
	if idle {
		for _, dst := range []*int64{&j.IdleBeforeMicros, &j.StalledMicros} {
			v, w := binary.Varint(b)
			if w <= 0 {
				return j, errors.New("a job record cut short")
			}
			*dst, b = v, b[w:]
		}
		if len(b) != 16 {
			return j, fmt.Errorf("a job record with %d bytes where its allocated-idle GPU-hours' 16 are", len(b))
		}
		j.IdleBeforeGPUHours = math.Float64frombits(binary.BigEndian.Uint64(b))
		j.StalledGPUHours = math.Float64frombits(binary.BigEndian.Uint64(b[8:]))
	}
	for _, h := range []float64{j.GPUHours, j.IdleBeforeGPUHours, j.StalledGPUHours} {
		if math.IsNaN(h) || math.IsInf(h, 0) {
			return j, fmt.Errorf("a job record with GPU-hours %v", h)
		}
	}
	return j, nil
}
