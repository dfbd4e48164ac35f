// Package slurm reads a Slurm cluster's queue and nodes: the JSON that
// `squeue --json` and `sinfo --json` print (Slurm's OpenAPI data, openapi
// v0.0.38 in Slurm 22.05, and what later releases rename or nest), decoded
// into jobs and nodes with what an autoscaler needs of them.
//
// The decoder is tolerant: unknown fields are ignored; a field a release
// renames is read under each of its names; numbers may be plain or, as
// from Slurm 23.02, objects {"set", "infinite", "number"}; a job's state
// may be a string or a list of flags. What a job or node lacks is
// reported once per field and document (Decoded.Missing), never a crash:
// the fuzzer holds it to that.
package slurm

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"time"
)

// Job is one job of the queue.
type Job struct {
	// ID is the job's ID ("123"), unique, as a job sees it in
	// SLURM_JOB_ID, array tasks' too; Array is an array task's name in
	// the array ("120_4"), "" for a job of no array.
	ID, Array string
	Name      string
	// State is the job's base state, upper case: PENDING, RUNNING,
	// COMPLETING, ...; Reason why it waits ("Resources", "Priority",
	// "JobHeldUser", "Dependency", "BeginTime", "AssocGrpGRES", ...;
	// "None" or "" when it does not).
	State, Reason string
	// Account is the job's account (its team), Partition its partition
	// (a comma-separated list while pending on several), QOS its quality
	// of service, User its user.
	Account, Partition, QOS, User string
	Priority                      int64
	// Nodes is how many nodes it asks for (at least 1); GPUsPerNode the
	// GPUs it asks of each (from --gres=gpu:N or --gpus-per-node), and
	// GPUType the type it names (--gres=gpu:TYPE:N), "" for any.
	// GPUsPerJob is what --gpus=N asks for the whole job, 0 when it asks
	// per node.
	Nodes       int
	GPUsPerNode int
	GPUsPerJob  int
	GPUType     string
	// Submit, Eligible and Start are when it was submitted, became
	// eligible to run and started (or, pending, Slurm's estimate; zero
	// when unknown); TimeLimit is its limit, 0 for none.
	Submit, Eligible, Start time.Time
	TimeLimit               time.Duration
	// NodeList is the nodes it runs on (a Slurm hostlist such as
	// "gpu-[1-3]"), "" while pending.
	NodeList string
	// NotBatch is set for a job Slurm says has no batch script (salloc,
	// srun: batch_flag false); false where it does not say.
	NotBatch bool
	// Tasks is how many jobs of this shape the record stands for: a
	// pending job array's tasks not started yet ("--array=0-9"), at most
	// its throttle; 1 for any other job. Each asks for the GPUs above.
	// Throttle is a pending array's "%4": no more than that many of its
	// tasks run at once, those running included (Snapshot.Demand counts
	// them); 0 for none.
	Tasks, Throttle int
}

// Pending reports whether the job waits to start.
func (j *Job) Pending() bool { return j.State == "PENDING" }

// Running reports whether the job holds its nodes: running, completing,
// or suspended.
func (j *Job) Running() bool {
	return j.State == "RUNNING" || j.State == "COMPLETING" || j.State == "SUSPENDED"
}

// GPUs is all the GPUs the job asks for, each of its tasks'.
func (j *Job) GPUs() int {
	per := j.GPUsPerNode * max(1, j.Nodes)
	if j.GPUsPerJob > 0 {
		per = j.GPUsPerJob
	}
	return per * max(1, j.Tasks)
}

// PerNodeGPUs is the GPUs the job asks of each of its nodes: its GPUs per
// node, or its GPUs for the whole job (--gpus) over its nodes, rounded up.
func (j *Job) PerNodeGPUs() int {
	if j.GPUsPerNode > 0 || j.GPUsPerJob <= 0 {
		return j.GPUsPerNode
	}
	n := max(1, j.Nodes)
	return (j.GPUsPerJob + n - 1) / n
}

// End is when a running job must end by: its start plus its time limit;
// zero when it has no limit, has not started, or is not running now (a
// suspended job's limit runs on once it resumes).
func (j *Job) End() time.Time {
	if j.TimeLimit <= 0 || j.Start.IsZero() || j.State != "RUNNING" {
		return time.Time{}
	}
	return j.Start.Add(j.TimeLimit)
}

// Node is one node of the cluster.
type Node struct {
	Name string
	// State is the node's base state, upper case (IDLE, MIXED,
	// ALLOCATED, DOWN, ...), and Flags the rest (DRAIN, CLOUD,
	// POWERED_DOWN, POWERING_UP, NOT_RESPONDING, ...), upper case.
	State string
	Flags []string
	// Partitions are the partitions it is in.
	Partitions []string
	// GPUs and GPUType are its GPUs as its gres says ("gpu:a100:8"), and
	// GPUsUsed those allocated.
	GPUs, GPUsUsed int
	GPUType        string
	// Address is its address (NodeAddr), Reason why it is down or drained.
	Address, Reason string
}

// HasFlag reports whether the node's state carries the flag (upper case).
func (n *Node) HasFlag(flag string) bool { return slices.Contains(n.Flags, flag) }

// Decoded is what one document held.
type Decoded struct {
	Jobs  []Job
	Nodes []Node
	// Version is the Slurm release that printed it ("22.05.8"), and
	// Plugin its data format ("openapi/v0.0.38"); "" when it does not say.
	Version, Plugin string
	// Missing are the fields some job or node lacked, each once, as
	// "jobs[].field": what the source reports, and what decoding took as
	// unknown.
	Missing []string
	// Errors are what Slurm itself said went wrong (its "errors" list).
	Errors []string
}

// MaxDocument bounds a document: a queue larger than this is a mistake,
// or a cluster too large for one poll.
const MaxDocument = 256 << 20

// ErrNotSlurm is a document that is JSON but none of Slurm's: no "jobs"
// or "nodes" list.
var ErrNotSlurm = errors.New("not Slurm's JSON: no jobs or nodes list")

// Decode decodes a document `squeue --json` or `sinfo --json` printed. An
// error is a document that is not JSON, is larger than MaxDocument, or
// holds neither list; a job or node it cannot read whole is decoded as
// far as it can be, what it lacks in Missing.
func Decode(data []byte) (Decoded, error) {
	var out Decoded
	if len(data) > MaxDocument {
		return out, fmt.Errorf("the document is %d bytes, more than the %d read", len(data), MaxDocument)
	}
	var doc struct {
		Meta   json.RawMessage   `json:"meta"`
		Errors []json.RawMessage `json:"errors"`
		Jobs   []json.RawMessage `json:"jobs"`
		Nodes  []json.RawMessage `json:"nodes"`
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	if err := dec.Decode(&doc); err != nil {
		return out, fmt.Errorf("not JSON: %w", err)
	}
	if doc.Jobs == nil && doc.Nodes == nil {
		return out, ErrNotSlurm
	}
	out.Version, out.Plugin = meta(doc.Meta)
	for _, e := range doc.Errors {
		if s := errorText(e); s != "" {
			out.Errors = append(out.Errors, s)
		}
	}
	missing := map[string]bool{}
	for _, raw := range doc.Jobs {
		f := fields(raw)
		if f == nil {
			missing["jobs[]"] = true
			continue
		}
		out.Jobs = append(out.Jobs, decodeJob(f, missing))
	}
	for _, raw := range doc.Nodes {
		f := fields(raw)
		if f == nil {
			missing["nodes[]"] = true
			continue
		}
		out.Nodes = append(out.Nodes, decodeNode(f, missing))
	}
	for m := range missing {
		out.Missing = append(out.Missing, m)
	}
	slices.Sort(out.Missing)
	return out, nil
}

// object is a JSON object's fields.
type object map[string]json.RawMessage

// fields is raw's fields; nil when raw is no object.
func fields(raw json.RawMessage) object {
	var f object
	if json.Unmarshal(raw, &f) != nil {
		return nil
	}
	if f == nil {
		return nil
	}
	return f
}

// meta reads the release and the data format from the document's meta.
func meta(raw json.RawMessage) (version, plugin string) {
	f := fields(raw)
	if f == nil {
		return "", ""
	}
	if p := fields(f["plugin"]); p != nil {
		plugin, _ = text(p["type"])
	}
	if s := fields(f["Slurm"]); s != nil {
		version, _ = text(s["release"])
	} else if s := fields(f["slurm"]); s != nil {
		version, _ = text(s["release"])
	}
	return version, plugin
}

// errorText is one of Slurm's errors as text.
func errorText(raw json.RawMessage) string {
	if s, ok := text(raw); ok {
		return s
	}
	f := fields(raw)
	if f == nil {
		return ""
	}
	for _, k := range []string{"description", "error"} {
		if s, ok := text(f[k]); ok && s != "" {
			return s
		}
	}
	return ""
}

// first is the first of the fields named that f holds (a field later
// releases renamed is read under each name), and whether there was one;
// a field that is null is there (Slurm writes null for "none").
func (f object) first(names ...string) (json.RawMessage, bool) {
	for _, n := range names {
		if v, ok := f[n]; ok {
			return v, true
		}
	}
	return nil, false
}

// str reads a string field; missing notes it under where.
func (f object) str(missing map[string]bool, where string, names ...string) string {
	v, ok := f.first(names...)
	if !ok {
		missing[where+"."+names[0]] = true
		return ""
	}
	if string(v) == "null" {
		return ""
	}
	s, ok := text(v)
	if !ok {
		missing[where+"."+names[0]] = true
	}
	return s
}

// num reads a number field (plain, or 23.02's {"set", "infinite",
// "number"}); infinite is true for an infinite, unset or null one.
func (f object) num(missing map[string]bool, where string, names ...string) (n int64, infinite bool) {
	v, ok := f.first(names...)
	if !ok {
		missing[where+"."+names[0]] = true
		return 0, true
	}
	if string(v) == "null" {
		return 0, true
	}
	n, infinite, ok = number(v)
	if !ok {
		missing[where+"."+names[0]] = true
	}
	return n, infinite
}

// text is a JSON string, or a number or boolean as text.
func text(v json.RawMessage) (string, bool) {
	var s string
	if json.Unmarshal(v, &s) == nil {
		return s, true
	}
	var n json.Number
	if json.Unmarshal(v, &n) == nil {
		return n.String(), true
	}
	return "", false
}

// number reads a plain number or an object {"set": bool, "infinite":
// bool, "number": n}; infinite is true when it is infinite or not set.
// Numbers beyond int64, fractions and negatives are taken as they fit.
func number(v json.RawMessage) (n int64, infinite, ok bool) {
	var num json.Number
	if json.Unmarshal(v, &num) == nil {
		return toInt(num)
	}
	f := fields(v)
	if f == nil {
		return 0, false, false
	}
	var set, inf bool
	if raw, ok := f["infinite"]; ok {
		json.Unmarshal(raw, &inf)
	}
	if raw, ok := f["set"]; ok {
		json.Unmarshal(raw, &set)
	} else {
		set = true
	}
	if inf || !set {
		return 0, true, true
	}
	if err := json.Unmarshal(f["number"], &num); err != nil {
		return 0, false, false
	}
	return toInt(num)
}

// toInt is a JSON number as an int64, within its range.
func toInt(num json.Number) (int64, bool, bool) {
	if i, err := num.Int64(); err == nil {
		return i, false, true
	}
	x, err := strconv.ParseFloat(num.String(), 64)
	if err != nil || math.IsNaN(x) {
		return 0, false, false
	}
	switch {
	case x >= math.MaxInt64:
		return math.MaxInt64, false, true
	case x <= math.MinInt64:
		return math.MinInt64, false, true
	}
	return int64(x), false, true
}

// unixTime is a Unix time in seconds; zero for 0, infinite or out of
// the years a cluster can mean.
func unixTime(sec int64, infinite bool) time.Time {
	if infinite || sec <= 0 || sec > 1<<40 {
		return time.Time{}
	}
	return time.Unix(sec, 0).UTC()
}

// strs reads a field that is a list of strings, or one string.
func strs(v json.RawMessage) []string {
	var list []string
	if json.Unmarshal(v, &list) == nil {
		return list
	}
	if s, ok := text(v); ok && s != "" {
		return []string{s}
	}
	return nil
}
