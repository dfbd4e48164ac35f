package trace

import (
	"cmp"
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"
)

// jobColumns are the indices of a job trace's columns, -1 when absent, and
// the names used in errors.
type jobColumns struct {
	id, submit, gpus, duration, checkpoint, priority, team, tier, types int
	submitName, gpusName, durationName, checkpointName                  string
	// need is the number of fields a row needs for its required columns.
	need int
	// An openb pod list's: its share of one GPU and its QOS (its
	// duration column is its deletion time).
	openb      bool
	milli, qos int
	// typeLists interns the GPU type lists read, by their text: a
	// million jobs of a few lists hold a few strings.
	typeLists map[string]string
}

func findJobColumns(header []string, format string) (jobColumns, error) {
	var c jobColumns
	var required []string
	switch format {
	case formatPhilly:
		required = []string{"arrival time (sec)", "size", "duration (sec)"}
		c.id = column(header, "job id", "job_id", "jobid")
		c.checkpoint, c.priority, c.team, c.tier, c.types = -1, -1, -1, -1, -1
	case formatOpenb:
		required = []string{"creation_time", "num_gpu", "deletion_time", "qos"}
		c.openb, c.id, c.milli = true, column(header, "name"), column(header, "gpu_milli")
		c.checkpoint, c.priority, c.team, c.tier = -1, -1, -1, -1
		c.types = column(header, "gpu_spec")
	default:
		required = []string{"submit_s", "gpus", "duration_s"}
		c.id = column(header, "job_id")
		c.checkpoint = column(header, "checkpoint_interval_s")
		c.priority = column(header, "priority")
		c.team = column(header, "team")
		c.tier = column(header, "tier")
		c.types = column(header, "gpu_types")
	}
	c.typeLists = map[string]string{}
	idx := make([]int, len(required))
	for i, name := range required {
		if idx[i] = column(header, name); idx[i] < 0 {
			return c, fmt.Errorf("missing required column %q for a %s trace (header %q)", name, format, strings.Join(header, ","))
		}
	}
	c.submit, c.gpus, c.duration = idx[0], idx[1], idx[2]
	if c.openb {
		c.qos = idx[3]
	}
	c.submitName, c.gpusName, c.durationName = header[c.submit], header[c.gpus], header[c.duration]
	if c.checkpoint >= 0 {
		c.checkpointName = header[c.checkpoint]
	}
	c.need = slices.Max(idx) + 1
	return c, nil
}

// field returns rec[i] trimmed, or "" when the row is too short or i < 0.
func field(rec []string, i int) string {
	if i < 0 || i >= len(rec) {
		return ""
	}
	return strings.TrimSpace(rec[i])
}

// parseJob fills j from one row and returns "" or why the row is bad.
// Labels (teams and tiers) are interned in labels, so that a million jobs
// of a few teams hold a few strings.
func (c *jobColumns) parseJob(rec []string, line int, labels map[string]string, j *Job) string {
	if len(rec) < c.need {
		return fmt.Sprintf("has %d fields, want at least %d", len(rec), c.need)
	}
	if c.openb {
		return c.parsePod(rec, labels, j)
	}
	var why string
	if j.Submit, why = seconds(rec[c.submit], c.submitName); why != "" {
		return why
	}
	if j.GPUs, j.Milli, why = gpusOrShare(rec[c.gpus], c.gpusName); why != "" {
		return why
	}
	if j.GPUs > maxGPUs {
		return fmt.Sprintf("%s %d is more than %d", c.gpusName, j.GPUs, maxGPUs)
	}
	if j.Duration, why = seconds(rec[c.duration], c.durationName); why != "" {
		return why
	}
	if j.Duration < 0 {
		// Zero is fine: a job that ran for no time (Philly has ten).
		return fmt.Sprintf("%s %s is negative", c.durationName, strings.TrimSpace(rec[c.duration]))
	}
	if s := field(rec, c.checkpoint); s != "" {
		if j.CheckpointInterval, why = seconds(s, c.checkpointName); why != "" {
			return why
		}
	}
	if s := field(rec, c.priority); s != "" {
		if j.Priority, why = wholeNumber(s, "priority"); why != "" {
			return why
		}
	}
	j.Team = intern(labels, field(rec, c.team))
	j.Tier = intern(labels, field(rec, c.tier))
	if j.GPUTypes, why = c.gpuTypes(field(rec, c.types)); why != "" {
		return why
	}
	if s := field(rec, c.id); s != "" {
		j.ID = s
	} else {
		j.ID = strconv.Itoa(line)
	}
	return ""
}

// openbTiers are the tiers of an openb pod's QOS classes.
var openbTiers = map[string]string{"LS": "critical", "Guaranteed": "critical", "Burstable": "standard", "BE": "best_effort"}

// parsePod fills j from an openb pod's row and returns "" or why the row
// is bad: a pod asking for no GPU leaves j.GPUs 0 (no GPU work), and one
// still alive at the trace's end has Duration -1 (readJobs ends it then).
func (c *jobColumns) parsePod(rec []string, labels map[string]string, j *Job) string {
	var why string
	if j.Submit, why = seconds(rec[c.submit], c.submitName); why != "" {
		return why
	}
	if j.GPUs, why = wholeNumber(rec[c.gpus], c.gpusName); why != "" {
		return why
	}
	switch {
	case j.GPUs < 0:
		return fmt.Sprintf("%s %d is negative", c.gpusName, j.GPUs)
	case j.GPUs > maxGPUs:
		return fmt.Sprintf("%s %d is more than %d", c.gpusName, j.GPUs, maxGPUs)
	}
	if s := field(rec, c.milli); s != "" {
		m, why := wholeNumber(s, "gpu_milli")
		if why != "" {
			return why
		}
		if m < 0 || m > 1000 {
			return fmt.Sprintf("gpu_milli %d, want 0 to 1000 (thousandths of a GPU)", m)
		}
		// A pod of one GPU asks for that share of it; a wider pod's
		// gpu_milli is of each of its GPUs, whole in the trace.
		if j.GPUs == 1 && m > 0 && m < 1000 {
			j.Milli = m
		}
	}
	if j.GPUTypes, why = c.gpuTypes(field(rec, c.types)); why != "" {
		return why
	}
	tier, ok := openbTiers[field(rec, c.qos)]
	if !ok {
		return fmt.Sprintf("qos %q, want LS, Guaranteed, Burstable or BE", field(rec, c.qos))
	}
	j.Tier = intern(labels, tier)
	j.Duration = -1
	if s := field(rec, c.duration); s != "" {
		end, why := seconds(s, c.durationName)
		if why != "" {
			return why
		}
		if end < j.Submit {
			return fmt.Sprintf("%s %s is before creation_time %s", c.durationName, s, field(rec, c.submit))
		}
		j.Duration = end - j.Submit
	}
	j.ID = field(rec, c.id)
	if j.ID == "" {
		return "name is empty"
	}
	return ""
}

// gpusOrShare parses a job's GPUs: a whole number of at least 1, or a
// share of one GPU above 0 and below 1 in thousandths at most (0.25),
// returned as GPUs 1 and its thousandths.
func gpusOrShare(s, col string) (gpus, milli int, why string) {
	if n, why := wholeNumber(s, col); why == "" {
		switch {
		case n < 1:
			return 0, 0, fmt.Sprintf("%s %d is less than 1 (a share of one GPU is above 0 and below 1)", col, n)
		case n > maxGPUs:
			return 0, 0, fmt.Sprintf("%s %d is more than %d", col, n, maxGPUs)
		}
		return n, 0, ""
	}
	s = strings.TrimSpace(s)
	f, err := strconv.ParseFloat(s, 64)
	m := math.Round(f * 1000)
	switch {
	case err != nil || math.IsNaN(f) || f <= 0 || f >= 1:
		return 0, 0, fmt.Sprintf("%s %q: want a whole number of GPUs, or a share of one GPU above 0 and below 1", col, s)
	case math.Abs(f*1000-m) > 1e-6:
		return 0, 0, fmt.Sprintf("%s %s: a share of one GPU is in thousandths at most", col, s)
	}
	return 1, int(m), ""
}

// gpuTypes parses a job's list of the GPU types it accepts, separated by
// '|' (openb's gpu_spec), into Job.GPUTypes: each trimmed, once, sorted;
// "" for an empty field, any.
func (c *jobColumns) gpuTypes(s string) (string, string) {
	if s == "" {
		return "", ""
	}
	if l, ok := c.typeLists[s]; ok {
		return l, ""
	}
	var l []string
	for t := range strings.SplitSeq(s, "|") {
		t = strings.TrimSpace(t)
		if t == "" {
			return "", fmt.Sprintf("GPU types %q has an empty type: want types separated by '|', such as V100M16|V100M32", s)
		}
		if !slices.Contains(l, t) {
			l = append(l, t)
		}
	}
	slices.Sort(l) // one spelling of each set: B|A is A|B
	j := strings.Join(l, "|")
	c.typeLists[strings.Clone(s)] = j
	return j, ""
}

// intern is s as kept in labels, added when new; "" stays "".
func intern(labels map[string]string, s string) string {
	if s == "" {
		return ""
	}
	if l, ok := labels[s]; ok {
		return l
	}
	l := strings.Clone(s)
	labels[l] = l
	return l
}

// readJobs reads a "jobs", "philly" or "openb" trace.
func (p *parser) readJobs(t *Trace, header []string, format string, hint int) error {
	cols, err := findJobColumns(header, format)
	if err != nil {
		return fmt.Errorf("%s: %w", p.name, err)
	}
	jobs := make([]Job, 0, hint)
	labels := make(map[string]string)
	for {
		rec, line, err := p.nextRow()
		if err == io.EOF {
			break
		}
		if err != nil {
			return err
		}
		var j Job
		if why := cols.parseJob(rec, line, labels, &j); why != "" {
			if err := p.bad(line, why); err != nil {
				return err
			}
			continue
		}
		if j.GPUs == 0 {
			t.IgnoredRows++ // an openb pod asking for no GPU
			continue
		}
		jobs = append(jobs, j)
	}
	if cols.openb {
		// The pods still alive run to the trace's last time.
		var last time.Duration
		for _, j := range jobs {
			last = max(last, j.Submit, j.Submit+j.Duration)
		}
		for i := range jobs {
			if jobs[i].Duration < 0 {
				jobs[i].Duration = last - jobs[i].Submit
			}
		}
	}
	if len(jobs) == 0 {
		return fmt.Errorf("%s: no valid rows (%d bad rows skipped)", p.name, p.skipped)
	}
	sortJobs(jobs)
	if p.windowed() {
		lo, _ := slices.BinarySearchFunc(jobs, p.from, func(j Job, d time.Duration) int { return cmp.Compare(j.Submit, d) })
		hi := len(jobs)
		if p.to >= 0 {
			hi, _ = slices.BinarySearchFunc(jobs, p.to, func(j Job, d time.Duration) int { return cmp.Compare(j.Submit, d) })
		}
		if lo >= hi {
			return fmt.Errorf("%s: no jobs in the window %s (the trace's jobs are submitted from %v to %v)",
				p.name, p.windowText(), jobs[0].Submit, jobs[len(jobs)-1].Submit)
		}
		jobs = slices.Clone(jobs[lo:hi])
		for i := range jobs {
			jobs[i].Submit -= p.from
		}
	}
	t.Jobs = jobs
	return nil
}
