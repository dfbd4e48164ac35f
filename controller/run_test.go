package controller

import (
	"context"
	"errors"
	"testing"
	"time"
)

// TestRun: Run runs a cycle every tick, the first at once when asked,
// after Before, and gives each to After with the time it began; it stops
// once For has passed on the controller's clock, when Before fails (with
// its error), or when the context is done.
func TestRun(t *testing.T) {
	l := newLoop(t, false, gpuPool("g5", 8, 20, 5*time.Minute))
	ctx := context.Background()
	var ats []time.Time
	err := l.c.Run(ctx, RunOptions{Every: time.Millisecond, For: 5 * time.Minute, Immediately: true,
		Before: func(context.Context) error {
			l.now = l.now.Add(time.Minute)
			l.report(t)
			return nil
		},
		After: func(at time.Time, r CycleResult, err error) {
			if err != nil || !r.Plan.At.Equal(at) {
				t.Errorf("cycle at %v: plan at %v, %v", at, r.Plan.At, err)
			}
			ats = append(ats, at)
		}})
	if err != nil || len(ats) != 5 || !ats[0].Equal(t0.Add(time.Minute)) || !ats[4].Equal(t0.Add(5*time.Minute)) {
		t.Fatalf("cycles at %v, %v; want 5, a minute apart from %v", ats, err, t0.Add(time.Minute))
	}
	if last := l.c.Last(); !last.At.Equal(ats[4]) {
		t.Fatalf("last cycle at %v; want %v", last.At, ats[4])
	}

	boom := errors.New("workload broke")
	cycles := 0
	err = l.c.Run(ctx, RunOptions{Every: time.Millisecond, Immediately: true,
		Before: func(context.Context) error { return boom },
		After:  func(time.Time, CycleResult, error) { cycles++ }})
	if !errors.Is(err, boom) || cycles != 0 {
		t.Fatalf("Run with a failing Before: %v after %d cycles; want its error, none", err, cycles)
	}

	done, cancel := context.WithCancel(ctx)
	cancel()
	err = l.c.Run(done, RunOptions{Every: time.Hour, After: func(time.Time, CycleResult, error) { cycles++ }})
	if err != nil || cycles != 0 {
		t.Fatalf("Run with its context done: %v after %d cycles; want nil, none", err, cycles)
	}
}
