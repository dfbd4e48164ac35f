package main

import (
	"math"
	"strings"
	"testing"
	"time"

	"github.com/fleetcast/autoscaler/fleet"
	"github.com/fleetcast/autoscaler/trace"
)

// FuzzImportSteps: no series the trace reader accepts makes an import
// crash, and what an import offers the store is one sample per step, at
// the step's start, oldest first, within the history before now, of a
// finite number of GPUs in bounds.
func FuzzImportSteps(f *testing.F) {
	f.Add("time,gpus\n2026-11-30T09:00:00Z,3\n2026-11-30T09:05:00Z,5\n2026-11-30T11:00:00Z,1\n", uint8(10))
	f.Add("time,gpus\n2026-11-01 00:00:00,1\n2026-11-29 23:59:59,2\n2026-11-30 12:00:00,4\n", uint8(1))
	f.Add("time,a,b\n2026-11-30,1,2\n2026-12-01,3,4\n", uint8(60))
	f.Add("time,gpus\n1900-01-01T00:00:00Z,1\n2200-01-01T00:00:00Z,2\n", uint8(0))
	f.Add("time,gpus\n0,1\n600,2\n", uint8(10))
	now := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	f.Fuzz(func(t *testing.T, in string, minutes uint8) {
		s, err := trace.ReadSeries(strings.NewReader(in), "f.csv", trace.Options{SkipBadRows: true})
		if err != nil {
			return
		}
		step := time.Duration(max(1, int(minutes)%61)) * time.Minute
		const length = 2 * 24 * time.Hour
		im, err := importSteps(s, "f.csv", now, step, length)
		if err != nil {
			if !strings.HasPrefix(err.Error(), "f.csv") {
				t.Fatalf("error %q does not name the file", err)
			}
			return
		}
		if im.old < 0 || im.filled < 0 || len(im.samples)+im.old < 1 {
			t.Fatalf("%d samples, %d old rows, %d filled: from %d rows", len(im.samples), im.old, im.filled, len(s.Values))
		}
		for i, x := range im.samples {
			switch {
			case !x.Time.Equal(x.Time.Truncate(step)) || x.Time.After(now) || x.Time.Before(now.Add(-length)):
				t.Fatalf("sample %d at %s: want a step's start within %v before %s", i, x.Time, length, now)
			case i > 0 && !x.Time.After(im.samples[i-1].Time):
				t.Fatalf("sample %d at %s is not after sample %d at %s", i, x.Time, i-1, im.samples[i-1].Time)
			case math.IsNaN(x.Value) || math.IsInf(x.Value, 0) || x.Value < 0 || x.Value > fleet.MaxDemandGPUs:
				t.Fatalf("sample %d at %s is %v GPUs", i, x.Time, x.Value)
			}
		}
	})
}
