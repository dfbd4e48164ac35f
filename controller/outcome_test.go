package controller

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/fleetcast/autoscaler/fleet"
	"github.com/fleetcast/autoscaler/loop"
	"github.com/fleetcast/autoscaler/planner"
	"github.com/fleetcast/autoscaler/providers"
)

// launchAnswers answers every launch with err, as a cloud out of GPUs or
// a broken connection does.
type launchAnswers struct {
	providers.Provider
	err error
}

func (l launchAnswers) Launch(ctx context.Context, p fleet.Pool, r providers.LaunchRequest) error {
	return l.err
}

// TestRunCycleOutcomes: RunCycle says what became of each action: done,
// only planned in a dry run, refused by a cloud out of capacity (the pool
// backed off), or failed with the cloud's error.
func TestRunCycleOutcomes(t *testing.T) {
	capacity := &providers.InsufficientCapacityError{Pool: "g5", Err: errors.New("InsufficientInstanceCapacity")}
	broken := errors.New("connection reset by peer")
	tests := []struct {
		name    string
		dryRun  bool
		launch  error // what the cloud answers a launch; nil: the simulated cloud's
		want    loop.Result
		wantErr string
	}{
		{"done", false, nil, loop.Done, ""},
		{"dry run", true, nil, loop.DryRun, ""},
		{"refused", false, capacity, loop.Refused, "insufficient capacity: InsufficientInstanceCapacity"},
		{"failed", false, broken, loop.Failed, "kept for recovery): connection reset by peer"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := gpuPool("g5", 1, 200, 5*time.Minute)
			l := newLoop(t, tt.dryRun, p)
			if tt.launch != nil {
				l.restart(t, launchAnswers{Provider: l.cloud, err: tt.launch})
			}
			l.pending.Set(l.now, DemandPush{Source: "slurm", Pending: []PendingDemand{{Pool: "g5", GPUs: 8}}})
			l.now = l.now.Add(time.Minute)
			r, err := l.c.RunCycle(context.Background())
			if tt.want == loop.Failed {
				if err == nil || !strings.Contains(err.Error(), broken.Error()) {
					t.Errorf("cycle error %v, want the launch's", err)
				}
			} else if err != nil {
				t.Fatal(err)
			}
			if len(r.Outcomes) != len(r.Plan.Actions) || r.Plan.Counts()[planner.Launch] != 8 {
				t.Fatalf("%d outcomes for %d actions, %d GPUs launched; want one each and 8", len(r.Outcomes), len(r.Plan.Actions), r.Plan.Counts()[planner.Launch])
			}
			for i, o := range r.Outcomes {
				if a := r.Plan.Actions[i]; o.Result != tt.want || (tt.wantErr == "") != (o.Err == nil) || o.Err != nil && !strings.Contains(o.Err.Error(), tt.wantErr) {
					t.Errorf("%s of %d in %s: %s %v; want %s %q", a.Kind, a.Count, a.Pool, o.Result, o.Err, tt.want, tt.wantErr)
				}
			}
			if bs, _ := l.store.Backoffs(); (len(bs) == 1) != (tt.want == loop.Refused) {
				t.Errorf("back-offs %+v after a %s launch", bs, tt.want)
			}
		})
	}
}
