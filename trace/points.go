package trace

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"
)

// Series is a series file's points as read, not turned into jobs: for
// forecasting, where values need not be whole GPUs.
type Series struct {
	// Name is the file's base name.
	Name string
	// Start is the wall-clock time of offset 0 when the file says (absolute
	// times), else zero.
	Start time.Time
	// Step is the median gap between points.
	Step time.Duration
	// Offsets[i] is when Values[i] was taken, from the first point (or the
	// window start), ascending.
	Offsets []time.Duration
	Values  []float64
	// Lines[i] is the file's line that Values[i] was read from, for
	// errors about a point.
	Lines []int
	// SkippedRows counts the bad rows skipped with Options.SkipBadRows.
	SkippedRows int
}

// OpenSeries reads the series file at path, as ReadSeries does.
func OpenSeries(path string, opt Options) (*Series, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return ReadSeries(bufio.NewReaderSize(f, 1<<16), path, opt)
}

// ReadSeries reads a series (the "series" format: a time column and value
// columns, summed and scaled as Options say) and returns its points with
// their values as they are. The window (From, Days) selects points; bad
// rows are errors naming the line, or skipped and counted.
func ReadSeries(r io.Reader, name string, opt Options) (*Series, error) {
	if opt.Format != "" && opt.Format != formatSeries {
		return nil, fmt.Errorf("%s: a series is read as a series, not as %s", name, opt.Format)
	}
	opt.Format = formatSeries
	p, header, _, err := open(r, name, opt)
	if err != nil {
		return nil, err
	}
	rows, t0, kind0, err := p.readSeriesRows(header, false)
	if err != nil {
		return nil, err
	}
	s := &Series{Name: filepath.Base(p.name), Step: medianGap(rows), SkippedRows: p.skipped}
	if kind0 == timeAbsolute {
		s.Start = time.Unix(0, t0).UTC().Add(p.from)
	}
	for _, r := range rows {
		at := time.Duration(r.off)
		if at < p.from || (p.to >= 0 && at >= p.to) {
			continue
		}
		s.Offsets = append(s.Offsets, at-p.from)
		s.Values = append(s.Values, r.value)
		s.Lines = append(s.Lines, r.line)
	}
	if len(s.Values) == 0 {
		return nil, fmt.Errorf("%s: no points in the window %s", p.name, p.windowText())
	}
	return s, nil
}
