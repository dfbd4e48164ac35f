// Package trace reads GPU workload traces for `autoscaler simulate` and turns
// them into jobs: a list of (submit time, GPUs, duration) that the simulator
// replays against a fleet.
//
// # Formats
//
// Four CSV formats are read; the format is detected from the header (the
// first line, a leading '#' stripped) unless Options.Format names it:
//
//   - "philly": the Microsoft Philly trace as preprocessed by RFold, header
//     `#job id,arrival time (sec),topology,shape,size,duration (sec)`.
//     Detected by the columns `arrival time (sec)` and `duration (sec)`;
//     `size` is the job's GPUs. Rows with size 0 or duration 0 are bad rows.
//   - "jobs": Fleetcast's own job list. Columns are found by name:
//     submit_s, gpus and duration_s are required (detection needs all three);
//     checkpoint_interval_s, priority, team, tier, gpu_types and job_id are
//     optional (the ID defaults to the line number; team and tier are free
//     text, trimmed, empty for none: the job's owner and its class of
//     service, such as "batch" or "prod", as `autoscaler-agent register
//     -team -tier` label a live job; gpu_types lists the GPU types the job
//     accepts, separated by '|', empty for any); other columns are
//     ignored. Seconds may be fractional; gpus is a whole number, or a
//     share of one GPU below 1 (0.25: thousandths at most).
//   - "openb": Alibaba's GPU-sharing cluster's pod list (cluster-trace-gpu-
//     v2023, "openb"), as published: detected by the columns num_gpu,
//     creation_time and deletion_time. Each pod asking for GPUs is a job of
//     num_gpu GPUs (a pod of one GPU with gpu_milli under 1000 asks for
//     that share of it: Job.Milli) from its creation to its deletion (to
//     the trace's last time while it is still alive: deletion_time empty),
//     named by name; its qos is its tier: LS and Guaranteed "critical",
//     Burstable "standard", BE "best_effort"; its gpu_spec, when set, the
//     GPU types it accepts ('|' between them). Pods asking for no GPU are
//     counted in Trace.IgnoredRows.
//   - "series": a demand series, GPUs per time step, such as the Helios
//     per-minute cluster sequence. It needs a time column, named time,
//     timestamp, date, datetime, t, t_start_s or window_start_s, or else a
//     first column whose values are dates. Times are RFC 3339,
//     `YYYY-MM-DD HH:MM:SS` (UTC) or seconds; rows must be strictly
//     ascending, steps may be irregular (Trace.Step is the median gap). The
//     demand of a row is the sum of Options.ValueColumns times Options.Scale,
//     rounded half up to whole GPUs; it holds until the next row's time (the
//     last row for one step). Offset 0 is the first row's time; with
//     absolute times Trace.Start says when that was.
//
// Every bad row is an error `FILE:LINE: REASON` naming its 1-based line, unless
// Options.SkipBadRows is set, in which case it is counted in Trace.SkippedRows.
// Job traces are sorted by submit time, stably.
//
// # Demand series become jobs by layering
//
// A series says how many GPUs were busy, not which jobs held them, so jobs
// have to be made up. Cutting the curve into fixed-length jobs (say one
// GPU for an hour per unit of demand) does not work: a fixed-length job
// cannot end early, so when demand falls the made-up jobs keep running and
// the replayed demand lags and overshoots the trace. Instead the curve is cut
// into horizontal layers: GPU level k (k = 1 .. the peak) is busy during each
// maximal stretch of rows whose demand is at least k, and each such stretch
// becomes one 1-GPU job submitted at the stretch's start that lasts until
// demand falls below k. The jobs running at any moment are then exactly the
// levels at or below the demand, so replaying them reproduces the curve
// exactly, step for step. The layers also have the shape of a real GPU
// fleet: the low levels, busy almost all the time, are long jobs like the
// long training runs that hold a fleet's base load, while the high levels are
// short jobs that come and go with the peaks.
//
// The conversion keeps a stack of open levels: a rise pushes new levels
// (new jobs), a fall pops and ends the top ones. It costs time proportional
// to the rows plus the jobs made, not to rows times the peak. The jobs are
// named L<level>-<line>, the line being the file line where the stretch
// begins.
package trace

import (
	"bufio"
	"cmp"
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Job is one job of a trace: it asks for GPUs at Submit and, once running,
// holds them for Duration.
type Job struct {
	// ID names the job: the trace's job id, else the file line it came from.
	ID string
	// Submit is when the job is submitted, from the trace start (the window
	// start when Options.From is used).
	Submit time.Duration
	// GPUs is the number of GPUs the job holds, at least 1: 1 for a
	// share of one GPU (Milli).
	GPUs int
	// Milli, when above 0, says the job asks for a share of one GPU
	// (time-slicing or MPS), in thousandths of it: 1 to 999; 0 for whole
	// GPUs.
	Milli int
	// GPUTypes are the GPU types (pools' gpu_model, compared without
	// regard to case) the job may run on, separated by '|', sorted
	// (V100M16|V100M32); empty for any. Types lists them.
	GPUTypes string
	// Duration is how long the job runs once started, more than 0.
	Duration time.Duration
	// CheckpointInterval is how often the job saves its state; 0 means the
	// simulation's default.
	CheckpointInterval time.Duration
	// Priority is the job's scheduling priority, higher first.
	Priority int
	// Team is the team that owns the job, if the trace says.
	Team string
	// Tier is the job's class of service (such as "batch" or "prod"),
	// if the trace says.
	Tier string
}

// Types are the GPU types the job accepts (GPUTypes), nil for any.
func (j *Job) Types() []string {
	if j.GPUTypes == "" {
		return nil
	}
	return strings.Split(j.GPUTypes, "|")
}

// Trace is a workload read from a trace file.
type Trace struct {
	// Name is the file's base name.
	Name string
	// Format is the format the file was read as: "jobs", "philly", "openb"
	// or "series".
	Format string
	// Start is the wall-clock time of offset 0 when the trace says so (a
	// series with absolute times), else the zero time.
	Start time.Time
	// Jobs are the trace's jobs, sorted by Submit (file order among equal
	// submits).
	Jobs []Job
	// SkippedRows counts the bad rows skipped with Options.SkipBadRows.
	SkippedRows int
	// IgnoredRows counts the rows that are no GPU work (an openb pod
	// asking for no GPU).
	IgnoredRows int
	// Step is the series step (the median gap between rows) for series
	// traces, 0 for job traces.
	Step time.Duration
}

// Options say how to read a trace.
type Options struct {
	// Format is "jobs", "philly", "openb" or "series"; "" detects it from
	// the header.
	Format string
	// ValueColumns are the series columns whose sum is the demand (see
	// ParseValueColumns). By default a series uses its one numeric column
	// other than the time; if it has several, reading fails and lists them.
	ValueColumns []string
	// Scale multiplies series values, e.g. to turn requests per second into
	// GPUs; 0 means 1.
	Scale float64
	// SkipBadRows skips and counts bad rows instead of failing on the first.
	SkipBadRows bool
	// From is the start of the window to read, from the trace start (a
	// series' first row). The window holds the jobs (series: the rows)
	// submitted in [From, From+Days), shifted so that From is offset 0.
	From time.Duration
	// Days is the length of the window in days; 0 reads to the end.
	Days float64
	// Where keeps, of a series holding several (a model column, a
	// region column), the rows whose columns have these values; the
	// others are not read. See ParseWhere.
	Where []Where
}

// Where is one condition on a series' rows: column Column holds Value
// (its text, spaces trimmed, compared exactly).
type Where struct {
	Column, Value string
}

// ParseWhere parses a condition written column=value ("model=m-large").
func ParseWhere(s string) (Where, error) {
	col, val, ok := strings.Cut(s, "=")
	col, val = strings.TrimSpace(col), strings.TrimSpace(val)
	if !ok || col == "" {
		return Where{}, fmt.Errorf("%q: want column=value, such as model=m-large", s)
	}
	return Where{Column: col, Value: val}, nil
}

// The formats a trace can have.
const (
	formatJobs   = "jobs"
	formatPhilly = "philly"
	formatOpenb  = "openb"
	formatSeries = "series"
)

// Limits that keep arithmetic exact and memory bounded on hostile input.
const (
	// maxGPUs bounds one job's GPUs and one series row's demand.
	maxGPUs = 1 << 20
	// maxSeconds bounds times and durations: 100 years.
	maxSeconds = 100 * 365.25 * 24 * 3600
)

// maxSeriesJobs bounds the jobs a series may turn into (a variable so that
// the fuzz test can lower it).
var maxSeriesJobs = 20_000_000

// acceptedHeaders is listed when a file's format is not recognised.
const acceptedHeaders = `accepted headers: philly ("#job id,arrival time (sec),topology,shape,size,duration (sec)"), ` +
	`jobs ("submit_s,gpus,duration_s" plus optional "checkpoint_interval_s,priority,team,tier,gpu_types,job_id"), ` +
	`openb ("name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,creation_time,deletion_time,scheduled_time"), ` +
	`series (a time column named time, timestamp, date, datetime, t, t_start_s or window_start_s, ` +
	`or a first column of dates, and numeric value columns)`

// ParseValueColumns splits a -value-column flag such as "running+pending"
// into column names, dropping blanks; "" gives nil.
func ParseValueColumns(s string) []string {
	var cols []string
	for c := range strings.SplitSeq(s, "+") {
		if c = strings.TrimSpace(c); c != "" {
			cols = append(cols, c)
		}
	}
	return cols
}

// Open reads the trace file at path. Errors name the path.
func Open(path string, opt Options) (*Trace, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	hint := 0
	if st, err := f.Stat(); err == nil {
		hint = int(min(st.Size()/32, 1<<22))
	}
	return read(bufio.NewReaderSize(f, 1<<16), path, opt, hint)
}

// Read reads a trace from r; name is the file name used in errors and,
// without its directory, as Trace.Name.
func Read(r io.Reader, name string, opt Options) (*Trace, error) {
	return read(r, name, opt, 0)
}

// rowReader yields CSV records with their 1-based line numbers, the first
// one possibly read ahead for format detection.
type rowReader struct {
	cr       *csv.Reader
	held     bool
	heldRec  []string
	heldLine int
	heldErr  error
}

func (r *rowReader) next() ([]string, int, error) {
	if r.held {
		r.held = false
		return r.heldRec, r.heldLine, r.heldErr
	}
	rec, err := r.cr.Read()
	if err != nil {
		var pe *csv.ParseError
		if errors.As(err, &pe) {
			return nil, pe.StartLine, err
		}
		return nil, 0, err
	}
	line, _ := r.cr.FieldPos(0)
	return rec, line, nil
}

// peek reads the next record and holds it for the next call of next.
func (r *rowReader) peek() ([]string, int, error) {
	rec, line, err := r.next()
	r.held, r.heldRec, r.heldLine, r.heldErr = true, rec, line, err
	return rec, line, err
}

// parser carries what every format's reader needs.
type parser struct {
	name    string
	opt     Options
	rows    *rowReader
	skipped int
	// from and to bound the window; to < 0 means no end.
	from, to time.Duration
}

// bad handles a bad row: with SkipBadRows it is counted and nil returned,
// else it is the error to return.
func (p *parser) bad(line int, reason string) error {
	if p.opt.SkipBadRows {
		p.skipped++
		return nil
	}
	return fmt.Errorf("%s:%d: %s", p.name, line, reason)
}

// nextRow returns the next well-formed CSV record; CSV syntax errors are
// bad rows. At the end it returns io.EOF.
func (p *parser) nextRow() ([]string, int, error) {
	for {
		rec, line, err := p.rows.next()
		if err == nil || err == io.EOF {
			return rec, line, err
		}
		var pe *csv.ParseError
		if !errors.As(err, &pe) {
			return nil, 0, fmt.Errorf("%s: %w", p.name, err)
		}
		if err := p.bad(line, "bad CSV: "+pe.Err.Error()); err != nil {
			return nil, 0, err
		}
	}
}

func read(r io.Reader, name string, opt Options, hint int) (*Trace, error) {
	p, header, format, err := open(r, name, opt)
	if err != nil {
		return nil, err
	}
	t := &Trace{Name: filepath.Base(p.name), Format: format}
	switch format {
	case formatSeries:
		err = p.readSeries(t, header)
	default:
		err = p.readJobs(t, header, format, hint)
	}
	if err != nil {
		return nil, err
	}
	if t.GPUHours() <= 0 {
		return nil, fmt.Errorf("%s: no work to replay: each of its %d job(s) runs for no time", p.name, len(t.Jobs))
	}
	t.SkippedRows = p.skipped
	return t, nil
}

// open checks the options, reads the header and detects the format (unless
// the options set it).
func open(r io.Reader, name string, opt Options) (*parser, []string, string, error) {
	if name == "" {
		name = "input"
	}
	p := &parser{name: name, opt: opt}
	if err := p.checkOptions(); err != nil {
		return nil, nil, "", err
	}
	cr := csv.NewReader(r)
	cr.ReuseRecord = true
	cr.FieldsPerRecord = -1
	p.rows = &rowReader{cr: cr}

	rec, line, err := p.rows.next()
	switch {
	case err == io.EOF:
		return nil, nil, "", fmt.Errorf("%s: empty file", name)
	case err != nil:
		if pe := (*csv.ParseError)(nil); errors.As(err, &pe) {
			return nil, nil, "", fmt.Errorf("%s:%d: header: bad CSV: %w", name, line, pe.Err)
		}
		return nil, nil, "", fmt.Errorf("%s: %w", name, err)
	}
	header := make([]string, len(rec))
	for i, h := range rec {
		if i == 0 {
			h = strings.TrimPrefix(h, "\ufeff")
			h = strings.TrimPrefix(strings.TrimSpace(h), "#")
		}
		header[i] = strings.TrimSpace(h)
	}
	if _, _, err := p.rows.peek(); err == io.EOF {
		return nil, nil, "", fmt.Errorf("%s: only a header, no rows", name)
	}

	format := opt.Format
	if format == "" {
		if format = p.detect(header); format == "" {
			return nil, nil, "", fmt.Errorf("%s: unrecognised header %q; %s", name, strings.Join(header, ","), acceptedHeaders)
		}
	}
	if format != formatSeries {
		if len(opt.ValueColumns) > 0 {
			return nil, nil, "", fmt.Errorf("%s: value columns apply to series traces only, and this is a %s trace", name, format)
		}
		if opt.Scale != 0 && opt.Scale != 1 {
			return nil, nil, "", fmt.Errorf("%s: a scale applies to series traces only, and this is a %s trace", name, format)
		}
	}
	return p, header, format, nil
}

func (p *parser) checkOptions() error {
	o := &p.opt
	switch o.Format {
	case "", formatJobs, formatPhilly, formatOpenb, formatSeries:
	default:
		return fmt.Errorf("%s: unknown trace format %q; want jobs, philly, openb or series", p.name, o.Format)
	}
	if math.IsNaN(o.Scale) || math.IsInf(o.Scale, 0) {
		return fmt.Errorf("%s: scale %v is not a finite number", p.name, o.Scale)
	}
	if o.From < 0 {
		return fmt.Errorf("%s: window start %v is negative", p.name, o.From)
	}
	if math.IsNaN(o.Days) || math.IsInf(o.Days, 0) || o.Days < 0 {
		return fmt.Errorf("%s: window length %v days is not a non-negative number", p.name, o.Days)
	}
	p.from, p.to = o.From, -1
	if o.Days > 0 && o.Days*86400 < 2*maxSeconds {
		d := time.Duration(math.Round(o.Days * float64(24*time.Hour)))
		if d <= 0 {
			return fmt.Errorf("%s: window length %v days is shorter than a nanosecond", p.name, o.Days)
		}
		if o.From <= math.MaxInt64-d {
			p.to = o.From + d
		}
	}
	return nil
}

// windowed reports whether a window narrower than the whole trace is set.
func (p *parser) windowed() bool { return p.from > 0 || p.to >= 0 }

// inWindow reports whether offset d lies in the window [from, to).
func (p *parser) inWindow(d time.Duration) bool {
	return d >= p.from && (p.to < 0 || d < p.to)
}

// windowText describes the window for errors.
func (p *parser) windowText() string {
	if p.to < 0 {
		return fmt.Sprintf("from %v to the end", p.from)
	}
	return fmt.Sprintf("[%v, %v)", p.from, p.to)
}

// column returns the index of the named column (case-insensitive), or -1.
func column(header []string, names ...string) int {
	for _, n := range names {
		for i, h := range header {
			if strings.EqualFold(h, n) {
				return i
			}
		}
	}
	return -1
}

// timeColumnNames are the names a series' time column may have.
var timeColumnNames = []string{"time", "timestamp", "date", "datetime", "t", "t_start_s", "window_start_s"}

// detect returns the format the header says, or "".
func (p *parser) detect(header []string) string {
	has := func(n string) bool { return column(header, n) >= 0 }
	switch {
	case has("arrival time (sec)") && has("duration (sec)"):
		return formatPhilly
	case has("num_gpu") && has("creation_time") && has("deletion_time"):
		return formatOpenb
	case has("submit_s") && has("gpus") && has("duration_s"):
		return formatJobs
	case column(header, timeColumnNames...) >= 0:
		return formatSeries
	}
	if rec, _, err := p.rows.peek(); err == nil && len(rec) > 0 && len(header) > 1 {
		if _, kind := parseTime(strings.TrimSpace(rec[0])); kind == timeAbsolute {
			return formatSeries
		}
	}
	return ""
}

// seconds parses a non-negative number of seconds.
func seconds(s, col string) (time.Duration, string) {
	s = strings.TrimSpace(s)
	f, err := strconv.ParseFloat(s, 64)
	switch {
	case err != nil:
		return 0, fmt.Sprintf("%s %q is not a number", col, s)
	case math.IsNaN(f) || math.IsInf(f, 0):
		return 0, fmt.Sprintf("%s %q is not a finite number", col, s)
	case f < 0:
		return 0, fmt.Sprintf("%s %s is negative", col, s)
	case f > maxSeconds:
		return 0, fmt.Sprintf("%s %s is more than 100 years", col, s)
	}
	return time.Duration(math.Round(f * 1e9)), ""
}

// wholeNumber parses an integer, also written as an integral float ("2.0").
func wholeNumber(s, col string) (int, string) {
	s = strings.TrimSpace(s)
	n, err := strconv.Atoi(s)
	if err == nil {
		return n, ""
	}
	f, ferr := strconv.ParseFloat(s, 64)
	if ferr != nil || f != math.Trunc(f) || math.Abs(f) > 1<<53 {
		return 0, fmt.Sprintf("%s %q is not a whole number", col, s)
	}
	return int(f), ""
}

// sortJobs sorts jobs by submit time, stably, unless they already are.
func sortJobs(jobs []Job) {
	less := func(a, b Job) int { return cmp.Compare(a.Submit, b.Submit) }
	if !slices.IsSortedFunc(jobs, less) {
		slices.SortStableFunc(jobs, less)
	}
}
