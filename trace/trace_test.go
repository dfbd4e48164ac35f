package trace

import (
	"maps"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
	"unsafe"
)

func mustRead(t *testing.T, csv string, opt Options) *Trace {
	t.Helper()
	tr, err := Read(strings.NewReader(csv), "in.csv", opt)
	if err != nil {
		t.Fatalf("Read: %v", err)
	}
	return tr
}

func TestDetect(t *testing.T) {
	tests := []struct {
		name, csv, want string
	}{
		{"philly", "#job id,arrival time (sec),topology,shape,size,duration (sec)\n0,0.0,CLOS,1,1,10.0\n", "philly"},
		{"philly without hash, CRLF", "job id,arrival time (sec),topology,shape,size,duration (sec)\r\n0,0.0,CLOS,1,1,10.0\r\n", "philly"},
		{"jobs", "submit_s,gpus,duration_s\n0,1,10\n", "jobs"},
		{"jobs any order, upper case", "Duration_S,team,GPUS,submit_s\n10,a,1,0\n", "jobs"},
		{"jobs with BOM", "\ufeffsubmit_s,gpus,duration_s\n0,1,10\n", "jobs"},
		{"openb", "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,creation_time,deletion_time,scheduled_time\np,1,1,1,1000,,LS,Running,0,10,0\n", "openb"},
		{"series time", "time,gpus\n0,1\n60,1\n", "series"},
		{"series t_start_s", "model,t_start_s,rate\nm,0,1\nm,600,2\n", "series"},
		{"series window_start_s", "window_start_s,rate_rps\n0,1\n600,2\n", "series"},
		{"series first column dates", "when,gpus\n2020-05-01 00:00:00,1\n2020-05-01 00:01:00,2\n", "series"},
		{"series first column RFC 3339", "when,gpus\n2020-05-01T00:00:00Z,1\n2020-05-01T00:01:00Z,2\n", "series"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := mustRead(t, tt.csv, Options{}).Format; got != tt.want {
				t.Errorf("Format = %q, want %q", got, tt.want)
			}
		})
	}
}

func TestParseValueColumns(t *testing.T) {
	tests := []struct {
		in   string
		want []string
	}{
		{"", nil},
		{"a", []string{"a"}},
		{"a+b", []string{"a", "b"}},
		{" a + b +", []string{"a", "b"}},
	}
	for _, tt := range tests {
		if got := ParseValueColumns(tt.in); !slices.Equal(got, tt.want) {
			t.Errorf("ParseValueColumns(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

func TestOpenPhillyFixture(t *testing.T) {
	tr, err := Open(filepath.Join("test-fixtures", "philly.csv"), Options{})
	if err == nil || !strings.HasSuffix(err.Error(), "philly.csv:6: duration (sec) -5 is negative") {
		t.Fatalf("err = %v, want the negative duration on line 6", err)
	}
	tr, err = Open(filepath.Join("test-fixtures", "philly.csv"), Options{SkipBadRows: true})
	if err != nil {
		t.Fatal(err)
	}
	want := []Job{
		{ID: "0", Submit: 0, GPUs: 1, Duration: time.Hour},
		{ID: "1", Submit: 30 * time.Second, GPUs: 2, Duration: 30 * time.Minute},
		{ID: "2", Submit: 30 * time.Second, GPUs: 8, Duration: 60500 * time.Millisecond},
		{ID: "3", Submit: 2 * time.Hour, GPUs: 1, Duration: 0},
		{ID: "4", Submit: 2 * time.Hour, GPUs: 4, Duration: time.Hour},
	}
	if tr.Name != "philly.csv" || tr.Format != "philly" || tr.SkippedRows != 1 || tr.Step != 0 || !tr.Start.IsZero() {
		t.Errorf("trace = %q %q skipped %d step %v start %v", tr.Name, tr.Format, tr.SkippedRows, tr.Step, tr.Start)
	}
	if !slices.Equal(tr.Jobs, want) {
		t.Errorf("jobs = %+v\nwant %+v", tr.Jobs, want)
	}
}

func TestOpenJobsFixture(t *testing.T) {
	tr, err := Open(filepath.Join("test-fixtures", "jobs.csv"), Options{})
	if err != nil {
		t.Fatal(err)
	}
	want := []Job{
		{ID: "train-a", Submit: 0, GPUs: 8, Duration: 2 * time.Hour, CheckpointInterval: 10 * time.Minute, Priority: 1, Team: "vision", Tier: "batch"},
		{ID: "eval-c", Submit: 30 * time.Second, GPUs: 2, Duration: 15 * time.Minute, CheckpointInterval: 5 * time.Minute, Priority: -1, Team: "vision", Tier: "prod"},
		{ID: "train-b", Submit: 60500 * time.Millisecond, GPUs: 16, Duration: time.Hour, Team: "speech"},
		{ID: "4", Submit: 60500 * time.Millisecond, GPUs: 1, Duration: 120250 * time.Millisecond},
	}
	if tr.Format != "jobs" || tr.SkippedRows != 0 {
		t.Errorf("format %q skipped %d", tr.Format, tr.SkippedRows)
	}
	if !slices.Equal(tr.Jobs, want) {
		t.Errorf("jobs = %+v\nwant %+v", tr.Jobs, want)
	}
}

// TestJobLabels: the optional team and tier columns, in any order and
// case, are trimmed, empty for none, and each distinct label is one string
// however many jobs carry it; a philly trace has neither.
func TestJobLabels(t *testing.T) {
	tests := []struct {
		name, csv string
		team      []string
		tier      []string
	}{
		{"both", "Tier,submit_s,gpus,duration_s,TEAM\nbatch,0,1,60,vision\n prod ,1,1,60, nlp \n,2,1,60,\nbatch,3,1,60,vision\n",
			[]string{"vision", "nlp", "", "vision"}, []string{"batch", "prod", "", "batch"}},
		{"tier only", "submit_s,gpus,duration_s,tier\n0,1,60,batch\n1,1,60\n",
			[]string{"", ""}, []string{"batch", ""}},
		{"neither", "submit_s,gpus,duration_s\n0,1,60\n", []string{""}, []string{""}},
		{"philly", "#job id,arrival time (sec),topology,shape,size,duration (sec),tier,team\n0,0,CLOS,1,1,60,batch,vision\n", []string{""}, []string{""}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tr := mustRead(t, tt.csv, Options{})
			var team, tier []string
			for _, j := range tr.Jobs {
				team, tier = append(team, j.Team), append(tier, j.Tier)
			}
			if !slices.Equal(team, tt.team) || !slices.Equal(tier, tt.tier) {
				t.Errorf("teams %q tiers %q; want %q %q", team, tier, tt.team, tt.tier)
			}
		})
	}
	tr := mustRead(t, "submit_s,gpus,duration_s,team,tier\n0,1,60,vision,batch\n1,1,60,vision,batch\n", Options{})
	if a, b := tr.Jobs[0], tr.Jobs[1]; unsafe.StringData(a.Team) != unsafe.StringData(b.Team) || unsafe.StringData(a.Tier) != unsafe.StringData(b.Tier) {
		t.Error("two jobs of one team and tier hold two copies of the labels; want them interned")
	}
}

// TestJobsSharesAndTypes: a job list's gpus may be a share of one GPU,
// and its gpu_types the types it accepts, each once, trimmed.
func TestJobsSharesAndTypes(t *testing.T) {
	tr := mustRead(t, "submit_s,gpus,duration_s,gpu_types\n0,0.25,60, H100 |A100|H100\n1,2,60,\n2,0.001,60,T4\n", Options{})
	want := []Job{
		{ID: "2", GPUs: 1, Milli: 250, GPUTypes: "A100|H100", Duration: time.Minute},
		{ID: "3", Submit: time.Second, GPUs: 2, Duration: time.Minute},
		{ID: "4", Submit: 2 * time.Second, GPUs: 1, Milli: 1, GPUTypes: "T4", Duration: time.Minute},
	}
	if !slices.Equal(tr.Jobs, want) {
		t.Errorf("jobs:\n%+v\nwant\n%+v", tr.Jobs, want)
	}
	if got := tr.Jobs[0].Types(); !slices.Equal(got, []string{"A100", "H100"}) {
		t.Errorf("Types() = %q", got)
	}
	if got := tr.Jobs[1].Types(); got != nil {
		t.Errorf("Types() of a job of any type = %q, want nil", got)
	}
}

func TestOpenSeriesFixture(t *testing.T) {
	tr, err := Open(filepath.Join("test-fixtures", "series.csv"), Options{ValueColumns: ParseValueColumns("running+pending")})
	if err != nil {
		t.Fatal(err)
	}
	if tr.Format != "series" || tr.Step != time.Minute || !tr.Start.Equal(time.Date(2020, 5, 1, 0, 0, 0, 0, time.UTC)) {
		t.Errorf("format %q step %v start %v", tr.Format, tr.Step, tr.Start)
	}
	d := tr.Demand(time.Minute)
	if want := []float64{3, 5, 4, 1, 0, 3}; !slices.Equal(d.Values, want) {
		t.Errorf("demand = %v, want %v", d.Values, want)
	}
	if !d.Start.Equal(tr.Start) || d.Step != time.Minute {
		t.Errorf("demand series starts %v step %v", d.Start, d.Step)
	}
	ids := make([]string, len(tr.Jobs))
	for i, j := range tr.Jobs {
		ids[i] = j.ID
	}
	if want := []string{"L1-2", "L2-2", "L3-2", "L4-3", "L5-3", "L1-7", "L2-7", "L3-7"}; !slices.Equal(ids, want) {
		t.Errorf("job ids = %v, want %v", ids, want)
	}
}

func TestSeriesTimes(t *testing.T) {
	tests := []struct {
		name      string
		csv       string
		opt       Options
		wantStart time.Time
		wantStep  time.Duration
		want      []float64 // Demand(wantStep)
	}{
		{"seconds", "t,gpus\n0,1\n600,2\n1200,0\n1800,1\n", Options{}, time.Time{}, 10 * time.Minute, []float64{1, 2, 0, 1}},
		{"seconds offset from the first row", "t,gpus\n600,1\n1200,2\n", Options{}, time.Time{}, 10 * time.Minute, []float64{1, 2}},
		{"fractional seconds", "timestamp,gpus\n0.5,1\n1.0,2\n1.5,3\n", Options{}, time.Time{}, 500 * time.Millisecond, []float64{1, 2, 3}},
		{"RFC 3339 with zone", "time,gpus\n2020-05-01T02:00:00+02:00,2\n2020-05-01T02:01:00+02:00,1\n", Options{},
			time.Date(2020, 5, 1, 0, 0, 0, 0, time.UTC), time.Minute, []float64{2, 1}},
		{"date time UTC", "datetime,gpus\n2020-05-01 00:00:00,2\n2020-05-01 00:01:00,1\n", Options{},
			time.Date(2020, 5, 1, 0, 0, 0, 0, time.UTC), time.Minute, []float64{2, 1}},
		{"dates", "date,gpus\n2020-05-01,2\n2020-05-02,1\n", Options{},
			time.Date(2020, 5, 1, 0, 0, 0, 0, time.UTC), 24 * time.Hour, []float64{2, 1}},
		{"irregular: median step, a row lasts to the next", "t,gpus\n0,1\n60,2\n180,3\n240,4\n300,5\n", Options{},
			time.Time{}, time.Minute, []float64{1, 2, 2, 3, 4, 5}},
		{"scale and half-up rounding", "t,rps\n0,10\n60,9.9\n120,1.9\n180,6\n", Options{Scale: 0.25},
			time.Time{}, time.Minute, []float64{3, 2, 0, 2}},
		{"sum of columns", "time,a,b,c\n0,1,2,100\n60,3,4,100\n", Options{ValueColumns: []string{"a", "B"}},
			time.Time{}, time.Minute, []float64{3, 7}},
		{"explicit series format", "when,gpus\n2020-05-01 00:00:00,1\n2020-05-01 00:01:00,2\n", Options{Format: "series"},
			time.Date(2020, 5, 1, 0, 0, 0, 0, time.UTC), time.Minute, []float64{1, 2}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tr := mustRead(t, tt.csv, tt.opt)
			if !tr.Start.Equal(tt.wantStart) || tr.Step != tt.wantStep {
				t.Errorf("start %v step %v, want %v %v", tr.Start, tr.Step, tt.wantStart, tt.wantStep)
			}
			if got := tr.Demand(tt.wantStep).Values; !slices.Equal(got, tt.want) {
				t.Errorf("demand = %v, want %v", got, tt.want)
			}
		})
	}
}

// checkLayering reads values as a series with the given gaps (seconds, one
// per row) and checks that the jobs reproduce it exactly.
func checkLayering(t *testing.T, values []int, step time.Duration) {
	t.Helper()
	var b strings.Builder
	b.WriteString("t,gpus\n")
	for i, v := range values {
		b.WriteString(strconv.FormatFloat(float64(time.Duration(i)*step)/1e9, 'f', -1, 64) + "," + strconv.Itoa(v) + "\n")
	}
	tr, err := Read(strings.NewReader(b.String()), "s.csv", Options{})
	if err != nil {
		if slices.Max(values) == 0 && strings.Contains(err.Error(), "no demand") {
			return
		}
		t.Fatalf("Read(%v): %v", values, err)
	}
	last := len(values)
	for last > 0 && values[last-1] == 0 {
		last--
	}
	got := tr.Demand(step).Values
	if len(got) != last {
		t.Fatalf("demand has %d steps, want %d (values %v, demand %v)", len(got), last, values, got)
	}
	rises, peak, sum := 0, 0, 0
	for i, v := range values[:last] {
		if got[i] != float64(v) {
			t.Fatalf("demand[%d] = %v, want %d\nvalues %v\ndemand %v", i, got[i], v, values, got)
		}
		if i == 0 {
			rises += v
		} else if v > values[i-1] {
			rises += v - values[i-1]
		}
		peak, sum = max(peak, v), sum+v
	}
	if len(tr.Jobs) != rises {
		t.Errorf("%d jobs, want one per unit rise: %d", len(tr.Jobs), rises)
	}
	if tr.PeakGPUs() != peak {
		t.Errorf("PeakGPUs = %d, want %d", tr.PeakGPUs(), peak)
	}
	if want := float64(sum) * step.Hours(); math.Abs(tr.GPUHours()-want) > 1e-9*want {
		t.Errorf("GPUHours = %v, want %v", tr.GPUHours(), want)
	}
	for i, j := range tr.Jobs {
		if j.GPUs != 1 || j.Duration <= 0 || j.Duration%step != 0 || j.Submit%step != 0 {
			t.Fatalf("job %d: %+v is not a whole number of steps of 1 GPU", i, j)
		}
	}
}

func TestSeriesLayering(t *testing.T) {
	tests := []struct {
		name   string
		values []int
	}{
		{"flat", []int{3, 3, 3}},
		{"rising", []int{1, 2, 3, 4}},
		{"falling", []int{9, 7, 4, 2, 1}},
		{"falling to zero", []int{5, 3, 0, 0}},
		{"leading zeros", []int{0, 0, 2, 2}},
		{"zeros inside", []int{4, 0, 4, 0, 0, 1}},
		{"mountains", []int{0, 2, 5, 5, 3, 0, 0, 4, 1, 1, 6, 2}},
		{"spike", []int{1, 100, 1}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) { checkLayering(t, tt.values, time.Minute) })
	}
	rng := rand.New(rand.NewPCG(1, 2))
	for range 200 {
		values := make([]int, 2+rng.IntN(60))
		for i := range values {
			values[i] = rng.IntN(12)
		}
		checkLayering(t, values, time.Duration(1+rng.IntN(3600))*time.Second)
	}
}

// TestSeriesLayeringStretches checks that a level stays one job over a
// stretch however the levels above it move.
func TestSeriesLayeringStretches(t *testing.T) {
	tr := mustRead(t, "t,gpus\n0,1\n60,3\n120,2\n180,4\n240,1\n300,0\n360,1\n", Options{})
	want := []Job{
		{ID: "L1-2", Submit: 0, GPUs: 1, Duration: 5 * time.Minute},
		{ID: "L2-3", Submit: time.Minute, GPUs: 1, Duration: 3 * time.Minute},
		{ID: "L3-3", Submit: time.Minute, GPUs: 1, Duration: time.Minute},
		{ID: "L3-5", Submit: 3 * time.Minute, GPUs: 1, Duration: time.Minute},
		{ID: "L4-5", Submit: 3 * time.Minute, GPUs: 1, Duration: time.Minute},
		{ID: "L1-8", Submit: 6 * time.Minute, GPUs: 1, Duration: time.Minute},
	}
	if !slices.Equal(tr.Jobs, want) {
		t.Errorf("jobs = %+v\nwant %+v", tr.Jobs, want)
	}
}

func TestErrors(t *testing.T) {
	const philly = "#job id,arrival time (sec),topology,shape,size,duration (sec)\n"
	const jobs = "submit_s,gpus,duration_s\n"
	const openb = "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,creation_time,deletion_time,scheduled_time\n"
	tests := []struct {
		name string
		csv  string
		opt  Options
		want string
	}{
		{"empty file", "", Options{}, "in.csv: empty file"},
		{"bad CSV header", "a,\"b\"c\n", Options{}, `in.csv:1: header: bad CSV: extraneous or missing " in quoted-field`},
		{"blank lines only", "\n\n", Options{}, "in.csv: empty file"},
		{"header only", philly, Options{}, "in.csv: only a header, no rows"},
		{"unknown header", "a,b\n1,2\n", Options{}, `in.csv: unrecognised header "a,b"; accepted headers: philly`},
		{"unknown format option", jobs + "0,1,1\n", Options{Format: "swf"}, `in.csv: unknown trace format "swf"`},
		{"philly missing size", "#job id,arrival time (sec),duration (sec)\n0,0,1\n", Options{}, `in.csv: missing required column "size"`},
		{"jobs missing gpus", "submit_s,duration_s\n0,1\n", Options{Format: "jobs"}, `in.csv: missing required column "gpus"`},
		{"philly bad duration", philly + "0,0,CLOS,1,1,10\n1,5,CLOS,1,1,abc\n", Options{}, `in.csv:3: duration (sec) "abc" is not a number`},
		{"philly negative duration", philly + "0,0,CLOS,1,1,-1\n", Options{}, `in.csv:2: duration (sec) -1 is negative`},
		{"philly zero size", philly + "0,0,CLOS,1,1,1\n1,0,CLOS,0,0,1\n", Options{}, `in.csv:3: size 0 is less than 1`},
		{"philly short row", philly + "0,0,CLOS\n", Options{}, `in.csv:2: has 3 fields, want at least 6`},
		{"jobs negative submit", jobs + "0,1,1\n\n-5,1,1\n", Options{}, `in.csv:4: submit_s -5 is negative`},
		{"jobs fractional gpus", jobs + "0,1.5,1\n", Options{}, `in.csv:2: gpus "1.5": want a whole number of GPUs, or a share of one GPU above 0 and below 1`},
		{"jobs zero gpus", jobs + "0,0,1\n", Options{}, `in.csv:2: gpus 0 is less than 1 (a share of one GPU is above 0 and below 1)`},
		{"jobs share too fine", jobs + "0,0.2505,1\n", Options{}, `in.csv:2: gpus 0.2505: a share of one GPU is in thousandths at most`},
		{"jobs empty gpu type", "submit_s,gpus,duration_s,gpu_types\n0,1,1,A100||H100\n", Options{}, `in.csv:2: GPU types "A100||H100" has an empty type: want types separated by '|', such as V100M16|V100M32`},
		{"jobs huge gpus", jobs + "0,99999999,1\n", Options{}, `in.csv:2: gpus 99999999 is more than 1048576`},
		{"jobs NaN duration", jobs + "0,1,NaN\n", Options{}, `in.csv:2: duration_s "NaN" is not a finite number`},
		{"jobs too long", jobs + "0,1,1e12\n", Options{}, `in.csv:2: duration_s 1e12 is more than 100 years`},
		{"jobs negative duration", jobs + "0,1,-1e-3\n", Options{}, `in.csv:2: duration_s -1e-3 is negative`},
		{"jobs bad priority", "submit_s,gpus,duration_s,priority\n0,1,1,high\n", Options{}, `in.csv:2: priority "high" is not a whole number`},
		{"openb unknown qos", openb + "p,1,1,1,1000,,LS,Running,0,10,0\nq,1,1,1,1000,,Gold,Running,0,10,0\n", Options{}, `in.csv:3: qos "Gold", want LS, Guaranteed, Burstable or BE`},
		{"openb deleted before created", openb + "p,1,1,1,1000,,LS,Running,50,10,50\n", Options{}, `in.csv:2: deletion_time 10 is before creation_time 50`},
		{"openb share out of range", openb + "p,1,1,1,1500,,BE,Running,0,10,0\n", Options{}, `in.csv:2: gpu_milli 1500, want 0 to 1000`},
		{"openb negative GPUs", openb + "p,1,1,-1,1000,,BE,Running,0,10,0\n", Options{}, `in.csv:2: num_gpu -1 is negative`},
		{"openb no name", openb + ",1,1,1,1000,,BE,Running,0,10,0\n", Options{}, `in.csv:2: name is empty`},
		{"openb CPU pods only", openb + "p,1,1,0,0,,BE,Running,0,10,0\n", Options{}, `in.csv: no valid rows`},
		{"jobs bad checkpoint", "submit_s,gpus,duration_s,checkpoint_interval_s\n0,1,1,-1\n", Options{}, `in.csv:2: checkpoint_interval_s -1 is negative`},
		{"bad CSV", jobs + "0,1,1\n0,\"1\"x,1\n", Options{}, `in.csv:3: bad CSV: extraneous or missing " in quoted-field`},
		{"multi-line quoted field keeps its start line", jobs + "0,1,1\n\"x\n\",1,1\n", Options{}, `in.csv:3: submit_s "x" is not a number`},
		{"value columns on a job trace", jobs + "0,1,1\n", Options{ValueColumns: []string{"gpus"}}, "in.csv: value columns apply to series traces only, and this is a jobs trace"},
		{"scale on a job trace", jobs + "0,1,1\n", Options{Scale: 2}, "in.csv: a scale applies to series traces only"},
		{"NaN scale", "t,g\n0,1\n", Options{Scale: math.NaN()}, "in.csv: scale NaN is not a finite number"},
		{"negative from", jobs + "0,1,1\n", Options{From: -time.Hour}, "in.csv: window start -1h0m0s is negative"},
		{"negative days", jobs + "0,1,1\n", Options{Days: -1}, "in.csv: window length -1 days"},
		{"series ambiguous value column", "time,a,b,name\n0,1,2,x\n60,1,2,x\n", Options{}, "in.csv: several numeric columns could be the demand; choose with a value column list (a+b sums a and b): a, b"},
		{"series no value column", "time,name\n0,x\n60,y\n", Options{}, `in.csv: no numeric value column besides the time column "time"`},
		{"series unknown value column", "time,a\n0,1\n60,2\n", Options{ValueColumns: []string{"b"}}, `in.csv: no value column "b"; the columns are time, a`},
		{"series value column is time", "time,a\n0,1\n60,2\n", Options{ValueColumns: []string{"time"}}, `in.csv: value column "time" is the time column`},
		{"series no time column", "a,b\n1,2\n", Options{Format: "series"}, "in.csv: no time column: name it one of time, timestamp, date, datetime, t, t_start_s, window_start_s, or make the first column dates"},
		{"series bad time", "time,g\n0,1\nnoon,2\n", Options{}, `in.csv:3: time "noon" is not a time (RFC 3339, YYYY-MM-DD HH:MM:SS or seconds)`},
		{"series bad date", "time,g\n2020-05-01 00:00:00,1\n2020-13-01 00:00:00,2\n", Options{}, `in.csv:3: time "2020-13-01 00:00:00" is not a time`},
		{"series mixed times", "time,g\n2020-05-01 00:00:00,1\n60,2\n", Options{}, `in.csv:3: time "60" is a number of seconds, but the first row's is a date`},
		{"series repeated time", "time,g\n0,1\n60,2\n60,3\n", Options{}, `in.csv:4: time "60" is not after the previous row's (line 3): rows must be in ascending time`},
		{"series descending time", "time,g\n0,1\n60,2\n30,3\n", Options{}, `in.csv:4: time "30" is not after the previous row's (line 3)`},
		{"series bad value", "time,g\n0,1\n60,x\n", Options{}, `in.csv:3: g "x" is not a number`},
		{"series negative value", "time,g\n0,1\n60,-1\n", Options{}, `in.csv:3: demand -1 is negative`},
		{"series negative after scale", "time,g\n0,1\n60,1\n", Options{Scale: -1}, `in.csv:2: demand -1 is negative`},
		{"series huge value", "time,g\n0,1\n60,1e9\n", Options{}, `in.csv:3: demand 1e+09 GPUs is more than 1048576`},
		{"series one row", "time,g\n0,1\n", Options{}, "in.csv: a series needs at least two rows to know its step, and it has one"},
		{"series all zero", "time,g\n0,0\n60,0\n", Options{}, "in.csv: the series has no demand, so no jobs"},
		{"series time out of range", "time,g\n0,1\n4e9,1\n", Options{}, `in.csv:3: time "4e9" is not a time`},
		{"series too far apart", "time,g\n-3e9,1\n3e9,1\n", Options{}, `in.csv:3: time "3e9" is more than 100 years after the first row's`},
		{"series date out of range", "time,g\n1800-01-01,1\n", Options{}, `in.csv:2: time "1800-01-01" is not a time`},
		{"no valid rows", jobs + "x,1,1\n0,0,1\n", Options{SkipBadRows: true}, "in.csv: no valid rows (2 bad rows skipped)"},
		{"empty job window", jobs + "0,1,1\n60,1,1\n", Options{From: time.Hour}, "in.csv: no jobs in the window from 1h0m0s to the end (the trace's jobs are submitted from 0s to 1m0s)"},
		{"empty job window with days", jobs + "0,1,1\n86400,1,1\n", Options{From: time.Hour, Days: 0.5}, "in.csv: no jobs in the window [1h0m0s, 13h0m0s)"},
		{"empty series window", "t,g\n0,1\n60,1\n", Options{From: time.Hour}, "in.csv: no rows in the window from 1h0m0s to the end (the series runs from 0s to 1m0s)"},
		{"series window without demand", "t,g\n0,1\n60,0\n120,0\n180,1\n", Options{From: time.Minute, Days: 2.0 / 1440}, "in.csv: no demand in the window [1m0s, 3m0s), so no jobs"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Read(strings.NewReader(tt.csv), "in.csv", tt.opt)
			if err == nil || !strings.HasPrefix(err.Error(), tt.want) {
				t.Errorf("err = %v\nwant %s", err, tt.want)
			}
		})
	}
}

func TestOpenMissingFile(t *testing.T) {
	if _, err := Open(filepath.Join(t.TempDir(), "nope.csv"), Options{}); !os.IsNotExist(err) {
		t.Errorf("err = %v, want not exist", err)
	}
}

func TestSkipBadRows(t *testing.T) {
	tests := []struct {
		name        string
		csv         string
		wantJobs    int
		wantSkipped int
	}{
		{"philly", "#job id,arrival time (sec),topology,shape,size,duration (sec)\n0,0,CLOS,1,1,10\n1,1,CLOS,0,0,10\n2,2,CLOS,1,1,-1\n3,x,CLOS,1,1,5\n4,3,CLOS,2,2,5\n", 2, 3},
		{"jobs with bad CSV", "submit_s,gpus,duration_s\n0,1,1\n0,\"1\"x,1\n", 1, 1},
		{"jobs short rows", "submit_s,gpus,duration_s\n0,1,1\n0,1\n1\n2,2,2\n", 2, 2},
		{"series", "time,g\n0,1\n60,x\n60,2\n30,3\n120,-1\n180,4\n", 4, 3},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tr := mustRead(t, tt.csv, Options{SkipBadRows: true})
			if len(tr.Jobs) != tt.wantJobs || tr.SkippedRows != tt.wantSkipped {
				t.Errorf("%d jobs, %d skipped; want %d, %d", len(tr.Jobs), tr.SkippedRows, tt.wantJobs, tt.wantSkipped)
			}
		})
	}
	// The good rows of the series: 1 from 0 s, 2 from 60 s, 4 from 180 s
	// for one step, the median of the gaps 60 s and 120 s: 90 s.
	tr := mustRead(t, "time,g\n0,1\n60,x\n60,2\n30,3\n120,-1\n180,4\n", Options{SkipBadRows: true})
	if tr.Step != 90*time.Second {
		t.Errorf("Step = %v, want 1m30s", tr.Step)
	}
	if got, want := tr.Demand(time.Minute).Values, []float64{1, 2, 2, 4, 2}; !slices.Equal(got, want) {
		t.Errorf("demand = %v, want %v", got, want)
	}
}

func TestWindow(t *testing.T) {
	const jobs = "job_id,submit_s,gpus,duration_s\na,0,1,100\nb,3600,1,100\nc,86400,2,100\nd,86400,3,100\ne,172800,4,100\n"
	tests := []struct {
		name    string
		opt     Options
		wantIDs []string
		wantSub []time.Duration
	}{
		{"all", Options{}, []string{"a", "b", "c", "d", "e"}, []time.Duration{0, time.Hour, 24 * time.Hour, 24 * time.Hour, 48 * time.Hour}},
		{"from", Options{From: time.Hour}, []string{"b", "c", "d", "e"}, []time.Duration{0, 23 * time.Hour, 23 * time.Hour, 47 * time.Hour}},
		{"from, end excluded", Options{From: 24 * time.Hour, Days: 1}, []string{"c", "d"}, []time.Duration{0, 0}},
		{"first day", Options{Days: 1}, []string{"a", "b"}, []time.Duration{0, time.Hour}},
		{"half an hour", Options{From: 30 * time.Minute, Days: 1.0 / 24}, []string{"b"}, []time.Duration{30 * time.Minute}},
		{"to the end", Options{From: 25 * time.Hour, Days: 1e6}, []string{"e"}, []time.Duration{23 * time.Hour}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tr := mustRead(t, jobs, tt.opt)
			var ids []string
			var subs []time.Duration
			for _, j := range tr.Jobs {
				ids, subs = append(ids, j.ID), append(subs, j.Submit)
			}
			if !slices.Equal(ids, tt.wantIDs) || !slices.Equal(subs, tt.wantSub) {
				t.Errorf("jobs %v at %v, want %v at %v", ids, subs, tt.wantIDs, tt.wantSub)
			}
		})
	}
}

func TestSeriesWindow(t *testing.T) {
	const series = "time,gpus\n" +
		"2020-05-01 00:00:00,1\n2020-05-01 00:01:00,3\n2020-05-01 00:02:00,2\n" +
		"2020-05-01 00:03:00,5\n2020-05-01 00:04:00,4\n2020-05-01 00:05:00,1\n"
	tests := []struct {
		name      string
		opt       Options
		wantStart time.Time
		want      []float64
	}{
		{"all", Options{}, time.Date(2020, 5, 1, 0, 0, 0, 0, time.UTC), []float64{1, 3, 2, 5, 4, 1}},
		{"from", Options{From: 2 * time.Minute}, time.Date(2020, 5, 1, 0, 2, 0, 0, time.UTC), []float64{2, 5, 4, 1}},
		{"from, inside a row", Options{From: 90 * time.Second}, time.Date(2020, 5, 1, 0, 1, 30, 0, time.UTC), []float64{1, 3.5, 4.5, 2.5, 0.5}},
		{"days", Options{From: time.Minute, Days: 3.0 / 1440}, time.Date(2020, 5, 1, 0, 1, 0, 0, time.UTC), []float64{3, 2, 5}},
		{"days ending inside a row", Options{Days: 2.5 / 1440}, time.Date(2020, 5, 1, 0, 0, 0, 0, time.UTC), []float64{1, 3, 1}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tr := mustRead(t, series, tt.opt)
			if !tr.Start.Equal(tt.wantStart) {
				t.Errorf("Start = %v, want %v", tr.Start, tt.wantStart)
			}
			d := tr.Demand(time.Minute)
			if !slices.Equal(d.Values, tt.want) || !d.Start.Equal(tt.wantStart) {
				t.Errorf("demand = %v from %v, want %v", d.Values, d.Start, tt.want)
			}
		})
	}
}

func TestGPUHoursPeakDemand(t *testing.T) {
	tr := &Trace{Jobs: []Job{
		{Submit: 0, GPUs: 2, Duration: 90 * time.Second},
		{Submit: 30 * time.Second, GPUs: 1, Duration: 30 * time.Second},
		{Submit: 60 * time.Second, GPUs: 4, Duration: 60 * time.Second}, // starts as job 1 ends
		{Submit: 150 * time.Second, GPUs: 8, Duration: 15 * time.Second},
	}}
	if got, want := tr.GPUHours(), (2*90+1*30+4*60+8*15)/3600.0; math.Abs(got-want) > 1e-12 {
		t.Errorf("GPUHours = %v, want %v", got, want)
	}
	if got := tr.PeakGPUs(); got != 8 {
		t.Errorf("PeakGPUs = %d, want 8", got)
	}
	tr.Jobs[3].GPUs = 5
	if got := tr.PeakGPUs(); got != 6 {
		t.Errorf("PeakGPUs = %d, want 6 (2 + 4 from 60s to 90s)", got)
	}
	if got := tr.Span(); got != 165*time.Second {
		t.Errorf("Span = %v, want 2m45s", got)
	}
	d := tr.Demand(time.Minute)
	// Minute 0: 2 GPUs all along, 1 for half; minute 1: 2 for half, 4;
	// minute 2: 5 GPUs for 15 s.
	if want := []float64{2.5, 5, 1.25}; !slices.Equal(d.Values, want) {
		t.Errorf("Demand = %v, want %v", d.Values, want)
	}
	if d := tr.Demand(0); len(d.Values) != 0 {
		t.Errorf("Demand(0) = %v, want nothing", d.Values)
	}
	// Jobs that run for no time hold no GPUs, on a step's edge too, and at
	// the span's end, past the last step.
	zero := &Trace{Jobs: append(slices.Clone(tr.Jobs), Job{Submit: time.Minute, GPUs: 9}, Job{Submit: 165 * time.Second, GPUs: 9},
		Job{Submit: 3 * time.Minute, GPUs: 9})}
	zero.Jobs[3].Duration = 30 * time.Second // the span: 3 minutes, on a step's edge
	if got, want := zero.Demand(time.Minute).Values, []float64{2.5, 5, 2.5}; !slices.Equal(got, want) {
		t.Errorf("Demand with jobs of no time = %v, want %v", got, want)
	}
	// Unsorted jobs built by hand still have the right peak.
	slices.Reverse(tr.Jobs)
	if got := tr.PeakGPUs(); got != 6 {
		t.Errorf("PeakGPUs of reversed jobs = %d, want 6", got)
	}
	if got := (&Trace{}).PeakGPUs(); got != 0 {
		t.Errorf("PeakGPUs of no jobs = %d", got)
	}
}

// realTrace returns the path of a file under ../shared/traces, skipping the
// test when it is absent.
func realTrace(t testing.TB, rel string) string {
	t.Helper()
	for _, dir := range []string{os.Getenv("FLEETCAST_TRACES"), "../../shared/traces", "../shared/traces"} {
		if dir == "" {
			continue
		}
		p := filepath.Join(dir, rel)
		if _, err := os.Stat(p); err == nil {
			return p
		}
	}
	t.Skipf("real trace %s not found (set FLEETCAST_TRACES to the shared/traces folder to run this)", rel)
	return ""
}

// TestOpenbPods: an openb pod list as published: each GPU pod a job of
// its GPUs (a one-GPU pod's share of it kept) from creation to deletion,
// or to the trace's last time while alive, its tier its QOS's, its GPU
// types its gpu_spec's; CPU pods ignored.
func TestOpenbPods(t *testing.T) {
	tr := mustRead(t, "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,creation_time,deletion_time,scheduled_time\n"+
		"openb-pod-0000,12000,16384,1,1000,,LS,Running,0,3600,0\n"+
		"openb-pod-0001,6000,12288,1,460,V100M16|V100M32,BE,Running,60,7260,61\n"+
		"openb-pod-0002,88000,327680,8,1000,,Burstable,Failed,120,,130\n"+
		"openb-pod-0003,4000,8192,0,0,,LS,Running,30,9000,30\n"+
		"openb-pod-0004,8000,8192,2,1000,G2,Guaranteed,Pending,9000,10800,\n", Options{})
	if tr.Format != "openb" || tr.IgnoredRows != 1 || tr.SkippedRows != 0 {
		t.Fatalf("format %q, %d ignored, %d skipped; want openb, 1, 0", tr.Format, tr.IgnoredRows, tr.SkippedRows)
	}
	want := []Job{
		{ID: "openb-pod-0000", Submit: 0, GPUs: 1, Duration: time.Hour, Tier: "critical"},
		{ID: "openb-pod-0001", Submit: time.Minute, GPUs: 1, Milli: 460, GPUTypes: "V100M16|V100M32", Duration: 2 * time.Hour, Tier: "best_effort"},
		{ID: "openb-pod-0002", Submit: 2 * time.Minute, GPUs: 8, Duration: 3*time.Hour - 2*time.Minute, Tier: "standard"}, // alive: to 10800 s
		{ID: "openb-pod-0004", Submit: 9000 * time.Second, GPUs: 2, GPUTypes: "G2", Duration: 1800 * time.Second, Tier: "critical"},
	}
	if !slices.Equal(tr.Jobs, want) {
		t.Errorf("jobs:\n%+v\nwant\n%+v", tr.Jobs, want)
	}
}

func TestRealOpenb(t *testing.T) {
	path := realTrace(t, "alibaba_openb_v2023/openb_pod_list_default.csv")
	tr, err := Open(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	// 8,152 pods, 7,064 asking for GPUs (SOURCE.md).
	if len(tr.Jobs) != 7064 || tr.IgnoredRows != 8152-7064 || tr.SkippedRows != 0 {
		t.Errorf("%d jobs, %d ignored, %d skipped; want 7,064, 1,088 and 0", len(tr.Jobs), tr.IgnoredRows, tr.SkippedRows)
	}
	tiers := map[string]int{}
	for _, j := range tr.Jobs {
		tiers[j.Tier]++
	}
	// LS 4,011 and Guaranteed 6; Burstable 99; BE 2,948 (SOURCE.md).
	if want := map[string]int{"critical": 4017, "standard": 99, "best_effort": 2948}; !maps.Equal(tiers, want) {
		t.Errorf("jobs by tier %v, want %v", tiers, want)
	}
	shares, typed := 0, 0
	for _, j := range tr.Jobs {
		if j.Milli > 0 {
			shares++
		}
		if j.GPUTypes != "" {
			typed++
		}
	}
	// 3,078 of 7,064 GPU pods ask for less than a GPU; the default list
	// binds none to a type (SOURCE.md).
	if shares != 3078 || typed != 0 {
		t.Errorf("%d shares, %d typed; want 3,078 and 0", shares, typed)
	}
	spec, err := Open(realTrace(t, "alibaba_openb_v2023/openb_pod_list_gpuspec33.csv"), Options{})
	if err != nil {
		t.Fatal(err)
	}
	typed = 0
	for _, j := range spec.Jobs {
		if j.GPUTypes != "" {
			typed++
		}
	}
	if typed != 2388 { // a third of the 7,064 GPU pods
		t.Errorf("gpuspec33: %d jobs bound to GPU types, want 2,388", typed)
	}
}

func TestRealPhilly(t *testing.T) {
	path := realTrace(t, "philly_rfold/philly_trace.csv")
	// Ten jobs have a duration of 0.0: they are kept.
	tr, err := Open(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if len(tr.Jobs) != 111_549 || tr.SkippedRows != 0 {
		t.Errorf("%d jobs, %d skipped; want 111,549 and 0", len(tr.Jobs), tr.SkippedRows)
	}
	if h := tr.GPUHours(); math.Abs(h-3_622_169) > 1 {
		t.Errorf("GPUHours = %.1f, want about 3,622,169", h)
	}
	if p := tr.PeakGPUs(); p != 2796 {
		t.Errorf("PeakGPUs = %d, want 2,796", p)
	}
	if !slices.IsSortedFunc(tr.Jobs, func(a, b Job) int { return int(a.Submit - b.Submit) }) {
		t.Error("jobs not sorted")
	}
	// A month from day 40, as `simulate -from 40d -days 30` would read it.
	w, err := Open(path, Options{SkipBadRows: true, From: 40 * 24 * time.Hour, Days: 30})
	if err != nil {
		t.Fatal(err)
	}
	if w.Jobs[0].Submit < 0 || w.Jobs[len(w.Jobs)-1].Submit >= 30*24*time.Hour || len(w.Jobs) < 10_000 {
		t.Errorf("window: %d jobs from %v to %v", len(w.Jobs), w.Jobs[0].Submit, w.Jobs[len(w.Jobs)-1].Submit)
	}
}

func TestRealHelios(t *testing.T) {
	path := realTrace(t, "helios_earth_vc_sequence_derived/earth_16vc_sum_per_minute.csv")
	if _, err := Open(path, Options{}); err == nil || !strings.Contains(err.Error(), "running_gpu_num_sum16vc, pending_gpu_num_sum16vc, total_gpu_num_sum16vc") {
		t.Errorf("without value columns: err = %v, want the candidates listed", err)
	}
	tr, err := Open(path, Options{ValueColumns: ParseValueColumns("running_gpu_num_sum16vc+pending_gpu_num_sum16vc")})
	if err != nil {
		t.Fatal(err)
	}
	if tr.Format != "series" || tr.Step != time.Minute || !tr.Start.Equal(time.Date(2020, 5, 1, 0, 0, 0, 0, time.UTC)) {
		t.Errorf("format %q step %v start %v", tr.Format, tr.Step, tr.Start)
	}
	if tr.Span() != 44_640*time.Minute {
		t.Errorf("Span = %v, want 44,640 minutes", tr.Span())
	}
	if p := tr.PeakGPUs(); p != 933 {
		t.Errorf("PeakGPUs = %d, want 933", p)
	}
	if h := tr.GPUHours(); math.Abs(h-470_444.23) > 0.1 {
		t.Errorf("GPUHours = %.2f, want about 470,444.23", h)
	}
	if n := len(tr.Jobs); n != 62_811 {
		t.Errorf("%d jobs, want 62,811", n)
	}
	if d := tr.Demand(time.Minute); len(d.Values) != 44_640 || slices.Max(d.Values) != 933 {
		t.Errorf("demand: %d values, max %v", len(d.Values), slices.Max(d.Values))
	}
}

func TestRealServeGen(t *testing.T) {
	path := realTrace(t, "servegen_bailian/servegen_aggregate_rate_10min.csv")
	// Five models interleaved: the time goes back to 0 at the second model.
	_, err := Open(path, Options{ValueColumns: []string{"total_rate_rps"}})
	if err == nil || !strings.HasSuffix(err.Error(), `servegen_aggregate_rate_10min.csv:2018: t_start_s "0" is not after the previous row's (line 2017): rows must be in ascending time`) {
		t.Errorf("err = %v, want the repeated time on line 2018", err)
	}
	// Skipping bad rows keeps the first model (m-large, 14 days).
	tr, err := Open(path, Options{ValueColumns: []string{"total_rate_rps"}, SkipBadRows: true})
	if err != nil {
		t.Fatal(err)
	}
	if tr.SkippedRows != 6336-2016 || tr.Step != 10*time.Minute || tr.Span() != 14*24*time.Hour {
		t.Errorf("skipped %d, step %v, span %v", tr.SkippedRows, tr.Step, tr.Span())
	}
	// Or one model, chosen by its column: every row of it, none skipped.
	for _, tt := range []struct {
		model string
		rows  int
	}{{"m-large", 2016}, {"m-small", 2016}, {"mm-image", 144}} {
		s, err := OpenSeries(path, Options{ValueColumns: []string{"total_rate_rps"}, Where: []Where{{Column: "model", Value: tt.model}}})
		if err != nil {
			t.Fatalf("model=%s: %v", tt.model, err)
		}
		if len(s.Values) != tt.rows || s.SkippedRows != 0 || s.Step != 10*time.Minute {
			t.Errorf("model=%s: %d rows (%d skipped), step %v; want %d rows of 10m", tt.model, len(s.Values), s.SkippedRows, s.Step, tt.rows)
		}
	}
}

// TestWhere: a series' rows are chosen by a column's value; a condition
// on a column the file lacks, or one not written column=value, is an
// error that says what was expected.
func TestWhere(t *testing.T) {
	const in = "time,model,g\n0,a,1\n0,b,5\n60,a,2\n60,b,6\n120,a,3\n"
	for _, tt := range []struct {
		where []Where
		want  []float64
		err   string
	}{
		{where: []Where{{"model", "a"}}, want: []float64{1, 2, 3}},
		{where: []Where{{"MODEL", "b"}}, want: []float64{5, 6}},
		{where: []Where{{"model", "a"}, {"g", "2"}}, want: []float64{2}, err: "a series needs at least two rows"},
		{where: []Where{{"region", "eu"}}, err: `in.csv: no column "region" to select rows by; the columns are time, model, g`},
		{where: []Where{{"model", "c"}}, err: "in.csv: no valid rows"},
		{err: `in.csv:3: time "0" is not after the previous row's (line 2)`},
	} {
		s, err := ReadSeries(strings.NewReader(in), "in.csv", Options{ValueColumns: []string{"g"}, Where: tt.where})
		switch {
		case tt.err != "":
			if err == nil || !strings.Contains(err.Error(), tt.err) {
				t.Errorf("where %v: err %v, want %q", tt.where, err, tt.err)
			}
		case err != nil:
			t.Errorf("where %v: %v", tt.where, err)
		case !slices.Equal(s.Values, tt.want):
			t.Errorf("where %v: values %v, want %v", tt.where, s.Values, tt.want)
		}
	}
	for _, tt := range []struct{ in, err string }{{"model=m-large", ""}, {" model = m-large ", ""}, {"model", "want column=value"}, {"=x", "want column=value"}} {
		w, err := ParseWhere(tt.in)
		if tt.err == "" && (err != nil || w != (Where{"model", "m-large"})) || tt.err != "" && (err == nil || !strings.Contains(err.Error(), tt.err)) {
			t.Errorf("ParseWhere(%q) = %+v, %v; want error %q", tt.in, w, err, tt.err)
		}
	}
}

// FuzzRead checks that no input makes Read panic, and that what it accepts
// is a well-formed trace.
func FuzzRead(f *testing.F) {
	saved := maxSeriesJobs
	maxSeriesJobs = 20_000 // keep each input's memory small
	f.Cleanup(func() { maxSeriesJobs = saved })
	for _, name := range []string{"philly.csv", "jobs.csv", "series.csv"} {
		b, err := os.ReadFile(filepath.Join("test-fixtures", name))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b, uint8(0))
	}
	f.Add([]byte("t,g\n0,1\n60,3\n120,0\n180,2\n"), uint8(1))
	f.Add([]byte("when,a,b\n2020-05-01T00:00:00Z,1,2\n2020-05-01T00:01:00Z,3,4\n"), uint8(2))
	f.Add([]byte("submit_s,gpus,duration_s,priority,team,job_id\n0,1,1,2,x,y\n"), uint8(3))
	f.Add([]byte("name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,creation_time,deletion_time,scheduled_time\n"+
		"p,1,1,1,460,,LS,Running,0,,0\nq,1,1,0,0,,BE,Running,5,10,5\nr,1,1,2,1000,G2,Burstable,Failed,7,90,8\n"), uint8(0))
	formats := []string{"", "jobs", "philly", "series"}
	f.Fuzz(func(t *testing.T, data []byte, mode uint8) {
		opt := Options{
			Format:      formats[mode%4],
			SkipBadRows: mode&4 != 0,
		}
		if mode&8 != 0 {
			opt.ValueColumns = []string{"a", "b"}
		}
		if mode&16 != 0 {
			opt.From = time.Minute
		}
		if mode&32 != 0 {
			opt.Days = 0.5
		}
		if mode&64 != 0 {
			opt.Scale = 0.25
		}
		tr, err := Read(strings.NewReader(string(data)), "fuzz.csv", opt)
		if err != nil {
			if tr != nil {
				t.Fatal("a trace with an error")
			}
			return
		}
		if len(tr.Jobs) == 0 {
			t.Fatal("no jobs and no error")
		}
		for i, j := range tr.Jobs {
			if j.GPUs < 1 || j.Duration < 0 || j.Submit < 0 {
				t.Fatalf("job %d: %+v", i, j)
			}
			if i > 0 && j.Submit < tr.Jobs[i-1].Submit {
				t.Fatalf("job %d submitted at %v before job %d at %v", i, j.Submit, i-1, tr.Jobs[i-1].Submit)
			}
		}
		if tr.PeakGPUs() < 1 || tr.GPUHours() <= 0 {
			t.Fatalf("peak %d, GPU-hours %v", tr.PeakGPUs(), tr.GPUHours())
		}
		if span := tr.Span(); span > 0 {
			d := tr.Demand(span/64 + 1)
			if len(d.Values) == 0 || len(d.Values) > 64 {
				t.Fatalf("Demand over %v has %d values", span, len(d.Values))
			}
		}
	})
}

func BenchmarkOpenPhilly(b *testing.B) {
	path := realTrace(b, "philly_rfold/philly_trace.csv")
	st, err := os.Stat(path)
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(st.Size())
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Open(path, Options{SkipBadRows: true}); err != nil {
			b.Fatal(err)
		}
	}
}

func TestReadSeries(t *testing.T) {
	in := "time,running,pending,note\n2020-05-01 00:00:00,10.5,1,a\n2020-05-01 00:01:00,11.25,0,b\n2020-05-01 00:03:00,9,2,c\n"
	s, err := ReadSeries(strings.NewReader(in), "d/s.csv", Options{ValueColumns: []string{"running", "pending"}, Scale: 2})
	if err != nil {
		t.Fatal(err)
	}
	if s.Name != "s.csv" || s.Step != 90*time.Second || !s.Start.Equal(time.Date(2020, 5, 1, 0, 0, 0, 0, time.UTC)) ||
		!slices.Equal(s.Values, []float64{23, 22.5, 22}) || !slices.Equal(s.Offsets, []time.Duration{0, time.Minute, 3 * time.Minute}) ||
		!slices.Equal(s.Lines, []int{2, 3, 4}) {
		t.Fatalf("series %+v", s)
	}
	if _, err := ReadSeries(strings.NewReader(in), "s.csv", Options{ValueColumns: []string{"note"}}); err == nil || !strings.Contains(err.Error(), `s.csv:2: note "a" is not a number`) {
		t.Fatalf("err = %v", err)
	}
	if _, err := ReadSeries(strings.NewReader(in), "s.csv", Options{Format: "philly"}); err == nil {
		t.Fatal("a series read as philly: want an error")
	}
}

// FuzzReadSeries: no input crashes the series reader; what it accepts has
// ascending offsets, finite, non-negative values, and the ascending line
// of each.
func FuzzReadSeries(f *testing.F) {
	f.Add("time,value\n0,1\n600,2.5\n1200,0\n")
	f.Add("time,value\n2020-05-01 00:00:00,1\n2020-05-01 00:10:00,x\n")
	f.Add("t,a,b\n1e9,1,2\n-5,3,4\n")
	f.Fuzz(func(t *testing.T, in string) {
		s, err := ReadSeries(strings.NewReader(in), "f.csv", Options{SkipBadRows: true})
		if err != nil {
			return
		}
		if len(s.Offsets) != len(s.Values) || len(s.Lines) != len(s.Values) {
			t.Fatalf("%d offsets and %d lines for %d values", len(s.Offsets), len(s.Lines), len(s.Values))
		}
		for i, v := range s.Values {
			if math.IsNaN(v) || math.IsInf(v, 0) || v < 0 || (i > 0 && s.Offsets[i] <= s.Offsets[i-1]) {
				t.Fatalf("point %d: offset %v value %v", i, s.Offsets[i], v)
			}
			if s.Lines[i] < 2 || (i > 0 && s.Lines[i] <= s.Lines[i-1]) {
				t.Fatalf("point %d: line %d after line %d", i, s.Lines[i], s.Lines[max(i-1, 0)])
			}
		}
	})
}
