package report

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

var now = time.Date(2026, 11, 30, 14, 0, 0, 0, time.UTC)

// good is a valid report from node.
func good(node string) Report {
	return Report{
		Node: node, SentAt: now.Add(-time.Second), Healthy: true,
		GPUs: []GPU{
			{Index: 0, UUID: "GPU-0", Name: "NVIDIA H100 80GB HBM3", MemoryTotal: 80 << 30, MemoryUsed: 60 << 30, UtilGPU: 97, UtilMemory: 60,
				Processes: []Process{{PID: 4242, GPU: 0, UsedMemory: 60 << 30}}},
			{Index: 1, UUID: "GPU-1", Name: "NVIDIA H100 80GB HBM3", MemoryTotal: 80 << 30},
		},
		Jobs:  []Job{{ID: "train-7", GPUs: []int{0}, PIDs: []int{4242}, Start: now.Add(-3 * time.Hour), LastCheckpoint: now.Add(-10 * time.Minute), LongRunning: true}},
		Drain: DrainStatus{State: NotDraining},
	}
}

// TestReportCannotInflateDemand: a report claims no more GPUs than its
// node has. A job listing a GPU twice, jobs holding more GPUs than the
// node's pool gives a node, and more jobs on a MIG GPU than its instances
// are refused (Validate's error names the field; the controller's receiver,
// controller/reports, answers it with 422 and stores nothing); unknown
// processes, jobs time-sharing GPUs and the instances of a MIG GPU count
// each GPU once in the demand.
func TestReportCannotInflateDemand(t *testing.T) {
	// As the receiver checks a report from a node of a pool of 8-GPU nodes.
	validate := func(r Report) error { return r.Validate(now, 5*time.Minute, 8) }
	job := func(id string, gpus ...int) Job {
		return Job{ID: id, GPUs: gpus, Start: now.Add(-time.Hour), LastCheckpoint: now.Add(-time.Minute)}
	}
	many := good("i-1")
	many.Jobs[0].GPUs = make([]int, 4000) // GPU 0, 4,000 times
	// Four jobs time-sharing a node's two GPUs.
	shared := good("i-1")
	for i := range 3 {
		shared.Jobs = append(shared.Jobs, job(fmt.Sprint("extra-", i), i%2))
	}
	unhealthy := Report{Node: "i-1", SentAt: now.Add(-time.Second), Drain: DrainStatus{State: NotDraining},
		Jobs: []Job{job("wide", 0, 1, 2, 3, 4, 5, 6, 7, 8)}}
	// Sixteen GPUs listed on a node of a pool of 8-GPU nodes, twelve held.
	wide := good("i-1")
	wide.GPUs, wide.Jobs = nil, nil
	for i := range 16 {
		wide.GPUs = append(wide.GPUs, GPU{Index: i, UUID: fmt.Sprint("GPU-", i), MemoryTotal: 1})
	}
	wide.Jobs = []Job{job("big", 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11)}
	outOfRange := good("i-1")
	outOfRange.Healthy, outOfRange.GPUs, outOfRange.Jobs[0].GPUs = false, nil, []int{64}
	for _, tt := range []struct {
		name   string
		r      Report
		reason string
	}{
		{"a GPU listed 4,000 times", many, "jobs[0].gpus[1]: GPU 0 listed twice for the job"},
		{"an unhealthy report wider than its pool's nodes", unhealthy, "jobs[0].gpus: the node's jobs and unknown processes would hold 9 GPUs, more than its 8"},
		{"an unhealthy report's GPU index out of range", outOfRange, "jobs[0].gpus[0]: 64, want 0-63"},
		{"more GPUs held than the node's pool gives it", wide, "jobs[0].gpus: the node's jobs and unknown processes would hold 12 GPUs, more than its 8"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if err := validate(tt.r); err == nil || !strings.Contains(err.Error(), tt.reason) {
				t.Fatalf("Validate: %v; want %q", err, tt.reason)
			}
		})
	}

	held := func(r Report) int {
		total := 0
		for _, j := range r.FleetJobs() {
			total += j.GPUs
		}
		return total
	}
	// Eight unknown processes on GPU 1 hold it once; train-7 holds GPU 0.
	stray := good("i-1")
	for pid := range 8 {
		stray.Unknown = append(stray.Unknown, Process{PID: 9000 + pid, GPU: 1})
	}
	// Seven jobs on the seven instances of one MIG GPU hold it once.
	mig := good("i-1")
	mig.GPUs = mig.GPUs[:1]
	mig.GPUs[0].MIG, mig.GPUs[0].Instances, mig.GPUs[0].UtilGPU = true, 7, 0
	mig.Jobs = nil
	for i := range 7 {
		mig.Jobs = append(mig.Jobs, job(fmt.Sprint("slice-", i), 0))
	}
	unhealthy.Jobs = []Job{job("wide", 0, 1, 2, 3, 4, 5, 6, 7)}
	for _, tt := range []struct {
		name string
		r    Report
		want int
	}{{"unknown processes", stray, 2}, {"MIG instances", mig, 1}, {"jobs sharing GPUs", shared, 2}, {"an unhealthy report as wide as its pool's nodes", unhealthy, 8}} {
		if err := validate(tt.r); err != nil {
			t.Fatalf("%s: Validate: %v", tt.name, err)
		}
		if got := held(tt.r); got != tt.want {
			t.Errorf("%s: the jobs hold %d GPUs as the planner sees them; want %d", tt.name, got, tt.want)
		}
	}
	tooMany := mig
	tooMany.Jobs = append(tooMany.Jobs, job("slice-7", 0))
	if err := validate(tooMany); err == nil || !strings.Contains(err.Error(), "jobs[7].gpus: GPU 0 has 7 MIG instances, and more jobs than that hold it") {
		t.Errorf("eight jobs on a GPU of seven MIG instances: Validate: %v", err)
	}
}

// TestValidateJobOwner: a job's team, tier and name are labels
// (fleet.ValidLabel), and its submission is not after its start; Validate
// names the field at fault. FleetJobs carries them to the planner.
func TestValidateJobOwner(t *testing.T) {
	owned := func(edit func(j *Job)) Report {
		r := good("i-1")
		j := &r.Jobs[0]
		j.Team, j.Tier, j.Name, j.Submitted = "ml-research", "batch", "train-7", j.Start.Add(-20*time.Minute)
		edit(j)
		return r
	}
	for _, tt := range []struct {
		name   string
		r      Report
		reason string // empty: valid
	}{
		{"labelled", owned(func(*Job) {}), ""},
		{"no labels", owned(func(j *Job) { j.Team, j.Tier, j.Name, j.Submitted = "", "", "", time.Time{} }), ""},
		{"submitted as it started", owned(func(j *Job) { j.Submitted = j.Start }), ""},
		{"every label character", owned(func(j *Job) { j.Team = "alice@ml.research:v1.2_x+y-z" }), ""},
		{"a team with a space", owned(func(j *Job) { j.Team = "ml research" }), `jobs[0].team: "ml research": want letters, digits and ._-:@+ only`},
		{"a tier of control characters", owned(func(j *Job) { j.Tier = "batch\n" }), `jobs[0].tier: "batch\n": want letters`},
		{"a name too long", owned(func(j *Job) { j.Name = strings.Repeat("x", 65) }), "jobs[0].name: 65 bytes, at most 64"},
		{"submitted after its start", owned(func(j *Job) { j.Submitted = j.Start.Add(time.Second) }),
			"jobs[0].submitted: 2026-11-30T11:00:01Z is after the job's start 2026-11-30T11:00:00Z"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.r.Validate(now, 5*time.Minute, 8)
			switch {
			case tt.reason == "" && err != nil:
				t.Fatalf("Validate: %v; want nil", err)
			case tt.reason != "" && (err == nil || !strings.Contains(err.Error(), tt.reason)):
				t.Fatalf("Validate: %v; want %q", err, tt.reason)
			}
		})
	}
	r := owned(func(*Job) {})
	j := r.Jobs[0]
	if fj := r.FleetJobs()[0]; fj.Team != j.Team || fj.Tier != j.Tier || fj.Name != j.Name || !fj.Submitted.Equal(j.Submitted) {
		t.Errorf("FleetJobs: %+v; want the team, tier, name and submission of %+v", fj, j)
	}
}

// TestValidateSMActive: a GPU's SM activity is a percentage, 0-100, or
// absent (a GPU without GPM); Validate names the field out of range.
func TestValidateSMActive(t *testing.T) {
	for _, tt := range []struct {
		name   string
		sm     *int
		reason string // empty: valid
	}{
		{"absent", nil, ""},
		{"idle", new(0), ""},
		{"every SM busy", new(100), ""},
		{"over 100", new(101), "gpus[1].sm_active: 101, want 0-100"},
		{"negative", new(-1), "gpus[1].sm_active: -1, want 0-100"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			r := good("i-1")
			r.GPUs[1].SMActive = tt.sm
			err := r.Validate(now, 5*time.Minute, 8)
			switch {
			case tt.reason == "" && err != nil:
				t.Fatalf("Validate: %v; want nil", err)
			case tt.reason != "" && (err == nil || !strings.Contains(err.Error(), tt.reason)):
				t.Fatalf("Validate: %v; want %q", err, tt.reason)
			}
		})
	}
}

// TestValidateMIGDevices: a MIG GPU's instances are as many as it counts,
// at most eight, each within the GPU's memory, its processes on the GPU.
func TestValidateMIGDevices(t *testing.T) {
	inst := func(id int) MIGDevice {
		return MIGDevice{ID: id, ProfileID: 2, Profile: "3g.40gb", MemoryTotal: 40 << 30, Processes: []Process{{PID: 100 + id, GPU: 1}}}
	}
	for _, tt := range []struct {
		name      string
		instances int
		devices   []MIGDevice
		reason    string // empty: valid
	}{
		{"two", 2, []MIGDevice{inst(0), inst(1)}, ""},
		{"counted, not listed", 2, nil, ""},
		{"fewer than counted", 2, []MIGDevice{inst(0)}, "gpus[1].mig_devices: 1, with mig_instances 2"},
		{"too many", 9, []MIGDevice{inst(0), inst(1), inst(2), inst(3), inst(4), inst(5), inst(6), inst(7), inst(8)}, "gpus[1].mig_devices: 9, with mig_instances 9 (at most 8)"},
		{"bigger than the GPU", 1, []MIGDevice{{ID: 0, MemoryTotal: 1 << 50}}, "gpus[1].mig_devices[0].memory_total"},
		{"a process elsewhere", 1, []MIGDevice{{ID: 0, Processes: []Process{{PID: 1, GPU: 0}}}}, "gpus[1].mig_devices[0].processes[0].gpu"},
		{"a negative ID", 1, []MIGDevice{{ID: -1}}, "gpus[1].mig_devices[0]: id -1"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			r := good("i-1")
			r.GPUs[1].MIG, r.GPUs[1].Instances, r.GPUs[1].MIGDevices = true, tt.instances, tt.devices
			r.GPUs[1].MemoryTotal = 80 << 30
			err := r.Validate(now, 5*time.Minute, 8)
			switch {
			case tt.reason == "" && err != nil:
				t.Fatalf("Validate: %v; want nil", err)
			case tt.reason != "" && (err == nil || !strings.Contains(err.Error(), tt.reason)):
				t.Fatalf("Validate: %v; want %q", err, tt.reason)
			}
		})
	}
}
