package fleet

import (
	"fmt"
	"strings"
	"time"
)

// Job is a unit of work on a node.
type Job struct {
	ID string `json:"id"`
	// GPUs is the whole GPUs the job holds; 0 for a share of one.
	GPUs int `json:"gpus"`
	// GPUMilli, when above 0, says the job holds a share of one GPU
	// (time-slicing or MPS): that many thousandths of it (1 to 999), of
	// the GPU its node calls SharedGPU (an index or a UUID); GPUs is then
	// 0. Jobs sharing one GPU name the same SharedGPU: the node holds it
	// once (Node.UsedGPUs).
	GPUMilli  int    `json:"gpu_milli,omitempty"`
	SharedGPU string `json:"shared_gpu,omitempty"`
	// Start is when the job started on the node.
	Start time.Time `json:"start"`
	// LongRunning is set by the agent or scheduler for jobs known to run long;
	// a job also counts as long-running once it is older than the drain
	// policy's long_running_after.
	LongRunning bool `json:"long_running,omitempty"`
	// ExpectedEnd is when the job is expected to end (a scheduler's time
	// limit, or what it told its agent); zero if unknown. It is a hint,
	// never trusted for safety (docs/design.md rule 11): the planner may wait
	// for it instead of launching for pending jobs, at most one lead time,
	// and scale-in plans a node whose jobs all end within its window to
	// leave then rather than move jobs for that surplus now; it never
	// drains a node for it.
	ExpectedEnd time.Time `json:"expected_end,omitzero"`
	// LastCheckpoint is when the job last saved its state; zero if never.
	LastCheckpoint time.Time `json:"last_checkpoint,omitzero"`
	// Team and Tier are who the job belongs to and how much its waiting
	// is worth, and Name what its owner calls it, as its agent's
	// registration or its scheduler says (Slurm's account, and its QOS or
	// partition); empty when unknown (reported as usage.Unattributed).
	// Each is a label (ValidLabel).
	Team string `json:"team,omitempty"`
	Tier string `json:"tier,omitempty"`
	Name string `json:"name,omitempty"`
	// Submitted is when the job was submitted, and Eligible when it could
	// first run (its dependencies met, its hold released, its begin time
	// reached); zero when unknown. The job's queue time is Start less the
	// later of the two.
	Submitted time.Time `json:"submitted,omitzero"`
	Eligible  time.Time `json:"eligible,omitzero"`
	// IdleSince is when the activity of every GPU the job holds on its
	// node fell under the usage block's idle_threshold (the job's start
	// when it was never seen busy), zero while one is busy or none was
	// read; FirstBusy is its first reading at or over the threshold, zero
	// if none. Readings on the controller's clock, from its agent's
	// reports: a hint, never a reason to drain (docs/design.md rule 11).
	IdleSince time.Time `json:"idle_since,omitzero"`
	FirstBusy time.Time `json:"first_busy,omitzero"`
}

// Equivalents is what the job asks for in GPUs: its whole GPUs, or its
// share of one.
func (j *Job) Equivalents() float64 {
	if j.GPUMilli > 0 {
		return float64(j.GPUMilli) / 1000
	}
	return float64(j.GPUs)
}

// AllocatedIdle reports whether the job's GPUs are allocated-idle at now:
// under the threshold since IdleSince, for at least window; and if so,
// whether it is idle before execution (never seen busy: waiting on data or
// set-up) rather than stalled.
func (j *Job) AllocatedIdle(now time.Time, window time.Duration) (idle, beforeExecution bool) {
	if j.IdleSince.IsZero() || now.Sub(j.IdleSince) < window {
		return false, false
	}
	return true, j.FirstBusy.IsZero()
}

// QueueTime is how long the job waited to start: Start less the later of
// Submitted and Eligible; ok is false when neither is known, or when Start
// is not after them (clocks apart).
func (j *Job) QueueTime() (d time.Duration, ok bool) {
	from := j.Submitted
	if j.Eligible.After(from) {
		from = j.Eligible
	}
	if from.IsZero() || j.Start.IsZero() || j.Start.Before(from) {
		return 0, false
	}
	return j.Start.Sub(from), true
}

// MaxLabelLen bounds a team's, a tier's and a job name's length in bytes.
const MaxLabelLen = 64

// ValidLabel checks a team, tier or job name: at most MaxLabelLen bytes of
// letters, digits and "._-:@+" (an account, a QOS, a Kubernetes
// namespace, a user@group), or empty for unknown, and none of the words
// the reports use for what is no team's or tier's ("unattributed",
// "other", "idle"). It returns what is wrong in words, or "".
func ValidLabel(s string) string {
	switch {
	case len(s) > MaxLabelLen:
		return fmt.Sprintf("%d bytes, at most %d", len(s), MaxLabelLen)
	case s == "unattributed" || s == "other" || s == "idle":
		return fmt.Sprintf("%q is the reports' word for what is no team's or tier's: choose another", s)
	}
	for _, r := range s {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9':
		case strings.ContainsRune("._-:@+", r):
		default:
			return fmt.Sprintf("%q: want letters, digits and ._-:@+ only", s)
		}
	}
	return ""
}
