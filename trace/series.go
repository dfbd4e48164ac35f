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

// timeKind is how a series time value is written.
type timeKind int

const (
	timeBad      timeKind = iota
	timeSeconds           // a number of seconds
	timeAbsolute          // a date and time
)

// timeLayouts are the absolute time layouts a series may use; all but RFC
// 3339 are UTC. Fractional seconds are accepted after the seconds.
var timeLayouts = []string{time.RFC3339Nano, time.DateTime, "2006-01-02T15:04:05", time.DateOnly}

// parseTime parses a series time as nanoseconds (since the Unix epoch for
// absolute times) and says how it was written.
func parseTime(s string) (int64, timeKind) {
	if len(s) >= 10 && s[4] == '-' && s[7] == '-' {
		for _, layout := range timeLayouts {
			t, err := time.Parse(layout, s)
			if err != nil {
				continue
			}
			if y := t.Year(); y < 1900 || y > 2200 {
				return 0, timeBad
			}
			return t.UnixNano(), timeAbsolute
		}
		return 0, timeBad
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil || math.IsNaN(f) || math.Abs(f) > maxSeconds {
		return 0, timeBad
	}
	return int64(math.Round(f * 1e9)), timeSeconds
}

// seriesRow is one good row of a series: its time in nanoseconds from the
// first row, its value, its demand in whole GPUs (the value rounded) and
// its file line.
type seriesRow struct {
	off   int64
	value float64
	gpus  int
	line  int
}

// readSeries reads a demand series and turns it into jobs by layering (see
// the package documentation).
func (p *parser) readSeries(t *Trace, header []string) error {
	rows, t0, kind0, err := p.readSeriesRows(header, true)
	if err != nil {
		return err
	}
	t.Step = medianGap(rows)
	if kind0 == timeAbsolute {
		t.Start = time.Unix(0, t0).UTC().Add(p.from)
	}

	// The rows in the window; each lasts until the next row (in the window
	// or not), the last for one step, and nothing beyond the window's end.
	lo, _ := slices.BinarySearchFunc(rows, int64(p.from), func(r seriesRow, d int64) int { return cmp.Compare(r.off, d) })
	hi := len(rows)
	if p.to >= 0 {
		hi, _ = slices.BinarySearchFunc(rows, int64(p.to), func(r seriesRow, d int64) int { return cmp.Compare(r.off, d) })
	}
	if lo >= hi {
		return fmt.Errorf("%s: no rows in the window %s (the series runs from %v to %v)",
			p.name, p.windowText(), time.Duration(rows[0].off), time.Duration(rows[len(rows)-1].off))
	}
	end := rows[len(rows)-1].off + int64(t.Step)
	if hi < len(rows) {
		end = rows[hi].off
	}
	if p.to >= 0 {
		end = min(end, int64(p.to))
	}
	jobs, err := p.layer(rows[lo:hi], end)
	if err != nil {
		return err
	}
	if len(jobs) == 0 {
		if p.windowed() {
			return fmt.Errorf("%s: no demand in the window %s, so no jobs", p.name, p.windowText())
		}
		return fmt.Errorf("%s: the series has no demand, so no jobs", p.name)
	}
	t.Jobs = jobs
	return nil
}

// readSeriesRows reads a series' good rows, in ascending time, and the
// first row's time and how it was written. With whole, values are rounded to
// whole GPUs (at most maxGPUs); without, they are kept as they are.
func (p *parser) readSeriesRows(header []string, whole bool) ([]seriesRow, int64, timeKind, error) {
	first, _, _ := p.rows.peek()
	timeCol := column(header, timeColumnNames...)
	if timeCol < 0 {
		if len(first) == 0 {
			return nil, 0, 0, fmt.Errorf("%s: no time column: name it one of %s", p.name, strings.Join(timeColumnNames, ", "))
		}
		if _, kind := parseTime(strings.TrimSpace(first[0])); kind != timeAbsolute {
			return nil, 0, 0, fmt.Errorf("%s: no time column: name it one of %s, or make the first column dates", p.name, strings.Join(timeColumnNames, ", "))
		}
		timeCol = 0
	}
	valueCols, err := p.valueColumns(header, timeCol, first)
	if err != nil {
		return nil, 0, 0, err
	}
	scale := p.opt.Scale
	if scale == 0 {
		scale = 1
	}
	need := max(timeCol, slices.Max(valueCols)) + 1
	timeName := header[timeCol]
	whereCols := make([]int, len(p.opt.Where))
	for i, w := range p.opt.Where {
		if whereCols[i] = column(header, w.Column); whereCols[i] < 0 {
			return nil, 0, 0, fmt.Errorf("%s: no column %q to select rows by; the columns are %s", p.name, w.Column, strings.Join(header, ", "))
		}
		need = max(need, whereCols[i]+1)
	}

	var rows []seriesRow
	var t0, prev int64
	var kind0 timeKind
	for {
		rec, line, err := p.nextRow()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, 0, 0, err
		}
		if !p.selected(rec, whereCols) {
			continue
		}
		ns, kind, v, why := parseSeriesRow(rec, header, need, timeCol, timeName, valueCols, scale)
		gpus := 0
		if why == "" && whole {
			gpus, why = wholeGPUs(v)
		}
		if why == "" && len(rows) == 0 {
			t0, kind0 = ns, kind
		}
		if why == "" && len(rows) > 0 {
			why = checkTime(rec[timeCol], timeName, ns, kind, t0, prev, kind0, rows[len(rows)-1].line)
		}
		if why != "" {
			if err := p.bad(line, why); err != nil {
				return nil, 0, 0, err
			}
			continue
		}
		prev = ns
		rows = append(rows, seriesRow{off: ns - t0, value: v, gpus: gpus, line: line})
	}
	switch len(rows) {
	case 0:
		return nil, 0, 0, fmt.Errorf("%s: no valid rows (%d bad rows skipped)", p.name, p.skipped)
	case 1:
		return nil, 0, 0, fmt.Errorf("%s: a series needs at least two rows to know its step, and it has one", p.name)
	}
	return rows, t0, kind0, nil
}

// selected reports whether a row meets every Options.Where condition,
// whose columns are cols; a row too short to hold one is read, and
// refused as short.
func (p *parser) selected(rec []string, cols []int) bool {
	for i, c := range cols {
		if c < len(rec) && strings.TrimSpace(rec[c]) != p.opt.Where[i].Value {
			return false
		}
	}
	return true
}

// wholeGPUs rounds a demand to whole GPUs, or says why it cannot be.
func wholeGPUs(v float64) (int, string) {
	v = math.Floor(v + 0.5)
	if v > maxGPUs {
		return 0, fmt.Sprintf("demand %v GPUs is more than %d", v, maxGPUs)
	}
	return int(v), ""
}

// layer turns rows into 1-GPU jobs, one per maximal stretch of rows at or
// above each GPU level; end is when the last row ends. Times are shifted by
// the window start.
func (p *parser) layer(rows []seriesRow, end int64) ([]Job, error) {
	var jobs []Job
	var open []int // indices in jobs of the open levels, bottom first
	var id []byte
	from := int64(p.from)
	for _, r := range rows {
		at := time.Duration(r.off - from)
		for len(open) > r.gpus {
			j := &jobs[open[len(open)-1]]
			j.Duration = at - j.Submit
			open = open[:len(open)-1]
		}
		for len(open) < r.gpus {
			if len(jobs) >= maxSeriesJobs {
				return nil, fmt.Errorf("%s:%d: the series makes more than %d jobs; scale it down (Options.Scale)", p.name, r.line, maxSeriesJobs)
			}
			id = append(id[:0], 'L')
			id = strconv.AppendInt(id, int64(len(open)+1), 10)
			id = append(id, '-')
			id = strconv.AppendInt(id, int64(r.line), 10)
			jobs = append(jobs, Job{ID: string(id), Submit: at, GPUs: 1})
			open = append(open, len(jobs)-1)
		}
	}
	at := time.Duration(end - from)
	for _, k := range open {
		jobs[k].Duration = at - jobs[k].Submit
	}
	return jobs, nil
}

// valueColumns returns the indices of the columns whose sum is the demand.
func (p *parser) valueColumns(header []string, timeCol int, first []string) ([]int, error) {
	if len(p.opt.ValueColumns) > 0 {
		cols := make([]int, 0, len(p.opt.ValueColumns))
		for _, name := range p.opt.ValueColumns {
			i := column(header, name)
			switch {
			case i < 0:
				return nil, fmt.Errorf("%s: no value column %q; the columns are %s", p.name, name, strings.Join(header, ", "))
			case i == timeCol:
				return nil, fmt.Errorf("%s: value column %q is the time column", p.name, name)
			}
			cols = append(cols, i)
		}
		return cols, nil
	}
	var candidates []int
	var names []string
	for i := range header {
		if i == timeCol || i >= len(first) {
			continue
		}
		if f, err := strconv.ParseFloat(strings.TrimSpace(first[i]), 64); err == nil && !math.IsNaN(f) && !math.IsInf(f, 0) {
			candidates = append(candidates, i)
			names = append(names, header[i])
		}
	}
	switch len(candidates) {
	case 1:
		return candidates, nil
	case 0:
		return nil, fmt.Errorf("%s: no numeric value column besides the time column %q", p.name, header[timeCol])
	}
	return nil, fmt.Errorf("%s: several numeric columns could be the demand; choose with a value column list (a+b sums a and b): %s",
		p.name, strings.Join(names, ", "))
}

// parseSeriesRow parses one series row's time and demand, or says why it is
// bad.
func parseSeriesRow(rec, header []string, need, timeCol int, timeName string, valueCols []int, scale float64) (int64, timeKind, float64, string) {
	if len(rec) < need {
		return 0, 0, 0, fmt.Sprintf("has %d fields, want at least %d", len(rec), need)
	}
	ts := strings.TrimSpace(rec[timeCol])
	ns, kind := parseTime(ts)
	if kind == timeBad {
		return 0, 0, 0, fmt.Sprintf("%s %q is not a time (RFC 3339, YYYY-MM-DD HH:MM:SS or seconds)", timeName, ts)
	}
	sum := 0.0
	for _, i := range valueCols {
		s := strings.TrimSpace(rec[i])
		f, err := strconv.ParseFloat(s, 64)
		if err != nil {
			return 0, 0, 0, fmt.Sprintf("%s %q is not a number", header[i], s)
		}
		sum += f
	}
	v := sum * scale
	switch {
	case math.IsNaN(v) || math.IsInf(v, 0):
		return 0, 0, 0, fmt.Sprintf("demand %v is not a finite number", v)
	case v < 0:
		return 0, 0, 0, fmt.Sprintf("demand %v is negative", v)
	}
	return ns, kind, v, ""
}

// checkTime says why a row's time ns cannot follow the previous row's, or "".
func checkTime(raw, timeName string, ns int64, kind timeKind, t0, prev int64, kind0 timeKind, prevLine int) string {
	raw = strings.TrimSpace(raw)
	if kind != kind0 {
		if kind0 == timeAbsolute {
			return fmt.Sprintf("%s %q is a number of seconds, but the first row's is a date", timeName, raw)
		}
		return fmt.Sprintf("%s %q is a date, but the first row's is a number of seconds", timeName, raw)
	}
	if ns <= prev {
		return fmt.Sprintf("%s %q is not after the previous row's (line %d): rows must be in ascending time", timeName, raw, prevLine)
	}
	if d := ns - t0; d <= 0 || d > int64(maxSeconds*1e9) {
		return fmt.Sprintf("%s %q is more than 100 years after the first row's", timeName, raw)
	}
	return ""
}

// medianGap returns the median time between consecutive rows.
func medianGap(rows []seriesRow) time.Duration {
	gaps := make([]int64, len(rows)-1)
	for i := range gaps {
		gaps[i] = rows[i+1].off - rows[i].off
	}
	slices.Sort(gaps)
	n := len(gaps)
	if n%2 == 1 {
		return time.Duration(gaps[n/2])
	}
	a, b := gaps[n/2-1], gaps[n/2]
	return time.Duration(a + (b-a)/2)
}
