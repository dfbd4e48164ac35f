package state

import (
	"math"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestFillDemand: a sample is recorded only in a step that holds none yet
// (the recorded one wins, wherever it lies in its step), one of two in an
// empty step, and a bad value records nothing.
func TestFillDemand(t *testing.T) {
	const step = 10 * time.Minute
	recorded := []Sample{{t0.Add(3 * time.Minute), 7}, {t0.Add(21 * time.Minute), 9}} // steps t0 and t0+20m
	at := func(m int, v float64) Sample { return Sample{t0.Add(time.Duration(m) * time.Minute), v} }
	for _, tt := range []struct {
		name    string
		fill    []Sample
		added   []Sample
		kept    int
		want    []Sample
		wantErr string
	}{
		{name: "empty steps filled", fill: []Sample{at(-10, 1), at(10, 2), at(30, 3)}, added: []Sample{at(-10, 1), at(10, 2), at(30, 3)},
			want: []Sample{at(-10, 1), at(3, 7), at(10, 2), at(21, 9), at(30, 3)}},
		{name: "recorded steps kept", fill: []Sample{at(0, 1), at(20, 2), at(29, 3)}, kept: 3,
			want: recorded},
		{name: "the first of one step wins", fill: []Sample{at(10, 1), at(15, 2)}, added: []Sample{at(10, 1)}, kept: 1,
			want: []Sample{at(3, 7), at(10, 1), at(21, 9)}},
		{name: "NaN records nothing", fill: []Sample{at(10, 1), at(30, math.NaN())}, wantErr: "is NaN",
			want: recorded},
	} {
		t.Run(tt.name, func(t *testing.T) {
			s := open(t, t.TempDir())
			defer s.Close()
			if err := s.AppendDemand("fleet", recorded...); err != nil {
				t.Fatal(err)
			}
			added, kept, err := s.FillDemand("fleet", step, tt.fill...)
			switch {
			case tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)):
				t.Fatalf("FillDemand: %v; want an error containing %q", err, tt.wantErr)
			case tt.wantErr == "" && (err != nil || !slices.Equal(added, tt.added) || kept != tt.kept):
				t.Fatalf("FillDemand = added %+v, %d kept, %v; want %+v, %d", added, kept, err, tt.added, tt.kept)
			}
			if got, err := s.Demand("fleet", time.Time{}); err != nil || !slices.Equal(got, tt.want) {
				t.Errorf("recorded %+v, %v; want %+v", got, err, tt.want)
			}
		})
	}
	s := open(t, t.TempDir())
	defer s.Close()
	if _, _, err := s.FillDemand("fleet", 0, at(0, 1)); err == nil || !strings.Contains(err.Error(), "positive step") {
		t.Errorf("step 0: %v; want an error", err)
	}
}
