package usage

import (
	"fmt"
	"testing"
	"time"

	"github.com/fleetcast/autoscaler/fleet"
	"github.com/fleetcast/autoscaler/state"
)

// total is what the hours of a flush and the live books charged (its
// parts, allocated-idle, apart).
func total(fs ...Flush) Micros {
	by := map[string]state.UsageHour{}
	for _, f := range fs {
		for _, h := range f.Hours {
			by[h.Hour.String()+h.Team+h.Tier] = h
		}
	}
	m := Micros(0)
	for _, h := range by {
		for _, c := range h.Charges {
			if !Kind(c.Kind).Part() {
				m += Micros(c.Micros)
			}
		}
	}
	return m
}

// TestReservationChargedOnce: a reservation of two $10 nodes is paid for
// whole, whatever runs in it: a node that leaves at 10:10 and one that
// comes back (launched at 10:15) at 10:20 leave the hour at two nodes'
// $10, neither less nor charged twice: n1's hour, n2's and the empty
// slot's ten minutes and n3's forty, each to the micro-dollar.
func TestReservationChargedOnce(t *testing.T) {
	rs := fleet.Pool{Name: "rs", GPUsPerNode: 8, Capacity: fleet.Reserved, PricePerHour: 10, Max: 2}
	node := func(id string, launched time.Time) fleet.Node {
		return fleet.Node{ID: id, Pool: "rs", State: fleet.Ready, LaunchedAt: launched}
	}
	a := NewAccountant(Options{})
	var fs []Flush
	for _, step := range []struct {
		at    time.Time
		nodes []fleet.Node
	}{
		{t0, []fleet.Node{node("n1", t0.Add(-time.Hour)), node("n2", t0.Add(-time.Hour))}},
		{t0.Add(10 * time.Minute), []fleet.Node{node("n1", t0.Add(-time.Hour))}},
		{t0.Add(20 * time.Minute), []fleet.Node{node("n1", t0.Add(-time.Hour)), node("n3", t0.Add(15*time.Minute))}},
		{t0.Add(60 * time.Minute), []fleet.Node{node("n1", t0.Add(-time.Hour)), node("n3", t0.Add(15*time.Minute))}},
	} {
		fs = append(fs, a.Observe(SnapshotOf(&fleet.State{CapturedAt: step.at, Nodes: step.nodes}, []fleet.Pool{rs}, nil)))
	}
	l := a.Live()
	fs = append(fs, Flush{Hours: l.Hours})
	if got, want := total(fs...), MicrosOf(10)+MicrosOf(10.0/6)+MicrosOf(10.0/6)+MicrosOf(40.0/6); got != want {
		t.Errorf("the reservation's hour cost %d micro-dollars, want %d (two nodes at $10)", got, want)
	}
}

// TestRestartKeepsRunningJobs: after a restart the controller's first
// cycles see no jobs (no agent has reported to it yet); a restored job
// listed again within the grace goes on with its record (its cost so far
// kept, not counted as started again), and one never listed again ends
// once the grace has passed.
func TestRestartKeepsRunningJobs(t *testing.T) {
	seen := func(at time.Time, jobs ...fleet.Job) Snapshot {
		return Snapshot{At: at, Nodes: []Seen{{ID: "n1", Pool: "od", GPUs: 8, Price: 8, Ours: true, JobsSeq: uint64(len(jobs) + 1), Jobs: jobs}}}
	}
	a1 := fleet.Job{ID: "a1", Team: "alpha", GPUs: 8, Start: t0, Submitted: t0.Add(-time.Minute)}
	b1 := fleet.Job{ID: "b1", Team: "beta", GPUs: 0, Start: t0}
	first := NewAccountant(Options{})
	first.Observe(seen(t0, a1, b1))
	first.Observe(seen(t0.Add(30*time.Minute), a1, b1))
	l := first.Live()
	var a1cost int64
	for _, j := range l.Running {
		if j.ID == "a1" {
			a1cost = j.Micros
		}
	}
	if a1cost != 4_000_000 {
		t.Fatalf("a1 cost %d before the restart, want 4000000", a1cost)
	}

	second := NewAccountant(Options{})
	second.Restore(l.Hours, l.Running)
	var ended []state.UsageJob
	take := func(f Flush) {
		for _, j := range f.Jobs {
			if !j.End.IsZero() {
				ended = append(ended, j)
			}
		}
	}
	take(second.Observe(seen(t0.Add(31 * time.Minute))))   // no agent has reported yet
	take(second.Observe(seen(t0.Add(33*time.Minute), a1))) // a1's agent has
	take(second.Observe(seen(t0.Add(45*time.Minute), a1))) // past the grace: b1 ended
	l2 := second.Live()
	if len(ended) != 1 || ended[0].ID != "b1" || !ended[0].End.Equal(t0.Add(45*time.Minute)) {
		t.Errorf("ended %+v; want b1 alone, at 10:45", ended)
	}
	started := 0
	for _, h := range l2.Hours {
		started += h.Started
	}
	if started != 2 {
		t.Errorf("%d jobs started in the hour after the restart; want the 2 before it, none again", started)
	}
	for _, j := range l2.Running {
		// [10:33, 10:45) at $8 an hour: $1.60 more on the $4 before.
		if j.ID == "a1" && j.Micros != 4_000_000+1_600_000 {
			t.Errorf("a1 cost %d after the restart, want 5600000", j.Micros)
		}
	}
}

// TestLateLabelsAndCheckpoints: a job first seen with no team (it started
// between a scheduler's reads) is charged to unattributed until its team
// is said, and to its team from then, its record under its team, its
// queue time counted once it is known; each new checkpoint read is
// counted.
func TestLateLabelsAndCheckpoints(t *testing.T) {
	a := NewAccountant(Options{})
	j := fleet.Job{ID: "j", GPUs: 8, Start: t0}
	var seq uint64 // 0: not known, the jobs are read every cycle
	for m := 0; m <= 40; m += 10 {
		if m == 20 {
			j.Team, j.Submitted = "alpha", t0.Add(-5*time.Minute)
		}
		j.LastCheckpoint = t0.Add(time.Duration(m) * time.Minute)
		a.Observe(Snapshot{At: t0.Add(time.Duration(m) * time.Minute), Nodes: []Seen{{ID: "n", Pool: "od", GPUs: 8, Price: 6, Ours: true, JobsSeq: seq, Jobs: []fleet.Job{j}}}})
	}
	l := a.Live()
	used := map[string]Micros{}
	var queue []int64
	for _, h := range l.Hours {
		for _, c := range h.Charges {
			used[h.Team] += Micros(c.Micros)
		}
		queue = append(queue, h.Queue...)
	}
	if used[Unattributed] != 2_000_000 || used["alpha"] != 2_000_000 {
		t.Errorf("used %v; want unattributed and alpha $2 each (20 minutes at $6)", used)
	}
	if len(queue) != 1 || queue[0] != 300 {
		t.Errorf("queue times %v, want one of 300 s", queue)
	}
	if len(l.Running) != 1 || l.Running[0].Team != "alpha" || l.Running[0].Checkpoints != 5 || !l.Running[0].LastCheckpoint.Equal(t0.Add(40*time.Minute)) {
		t.Errorf("record %+v; want alpha's, 5 checkpoints, the last at 10:40", l.Running)
	}
}

// TestForPendingByScope: a launch in a pool is bought for the teams whose
// pending demand that pool serves, and for no team when none waits for
// it.
func TestForPendingByScope(t *testing.T) {
	a100 := fleet.Pool{Name: "a100-od", GPUModel: "A100", GPUsPerNode: 8}
	l4 := fleet.Pool{Name: "l4-od", GPUModel: "L4", GPUsPerNode: 1}
	h100 := fleet.Pool{Name: "h100-od", GPUModel: "H100", GPUsPerNode: 8}
	waiting := []Waiting{
		{Team: "alpha", GPUs: 8, Scope: fleet.ScopedDemand{GPUModel: "A100"}},
		{Team: "beta", GPUs: 2, Scope: fleet.ScopedDemand{Pool: "l4-od"}},
		{Team: "gamma", GPUs: 4},
	}
	for _, tt := range []struct {
		pool *fleet.Pool
		want map[string]float64
	}{
		{&a100, map[string]float64{"alpha": 8, "gamma": 4}},
		{&l4, map[string]float64{"beta": 2, "gamma": 4}},
		{&h100, map[string]float64{"gamma": 4}},
		{nil, map[string]float64{"alpha": 8, "beta": 2, "gamma": 4}},
	} {
		got := map[string]float64{}
		for _, h := range ForPending(waiting, tt.pool) {
			got[h.Team] += h.GPUs
		}
		if fmt.Sprint(got) != fmt.Sprint(tt.want) {
			t.Errorf("ForPending(%v) = %v, want %v", tt.pool, got, tt.want)
		}
	}
	if got := ForPending(waiting[:2], &h100); len(got) != 0 {
		t.Errorf("no demand waits for h100-od: %v; want none bought for (its idle time idle)", got)
	}
}

// TestLateLabelsSameJobs: a scheduler's read says whose a job is after it
// was first seen, while its agent's reports stay the same (the node's
// JobsSeq unchanged): the label is taken within settleEvery cycles.
func TestLateLabelsSameJobs(t *testing.T) {
	a := NewAccountant(Options{})
	j := fleet.Job{ID: "j", GPUs: 8, Start: t0}
	for m := 0; m <= settleEvery+2; m++ {
		if m == 1 {
			j.Team, j.Submitted = "alpha", t0.Add(-time.Minute)
		}
		a.Observe(Snapshot{At: t0.Add(time.Duration(m) * time.Minute), Nodes: []Seen{{ID: "n", Pool: "od", GPUs: 8, Price: 6, Ours: true, JobsSeq: 7, Jobs: []fleet.Job{j}}}})
	}
	l := a.Live()
	if len(l.Running) != 1 || l.Running[0].Team != "alpha" || !l.Running[0].Submitted.Equal(t0.Add(-time.Minute)) {
		t.Errorf("record %+v; want alpha's, submitted 9:59", l.Running)
	}
}

// TestRestoredJobListedLate: a restored job no node lists within the
// grace is taken for ended; listed later (a pool unread that long), its
// record goes on, not started again.
func TestRestoredJobListedLate(t *testing.T) {
	a := NewAccountant(Options{})
	a.Restore(nil, []state.UsageJob{{ID: "a1", Team: "alpha", Tier: "x", Pool: "od", Start: t0, Micros: 4_000_000, GPUHours: 4}})
	j := fleet.Job{ID: "a1", Team: "alpha", Tier: "x", GPUs: 8, Start: t0}
	var ended bool
	for m := 30; m <= 60; m += 5 {
		var jobs []fleet.Job
		if m >= 50 {
			jobs = []fleet.Job{j}
		}
		f := a.Observe(Snapshot{At: t0.Add(time.Duration(m) * time.Minute), Nodes: []Seen{{ID: "n", Pool: "od", GPUs: 8, Price: 12, Ours: true, Jobs: jobs}}})
		for _, r := range f.Jobs {
			ended = ended || !r.End.IsZero()
		}
	}
	l := a.Live()
	started := 0
	for _, h := range l.Hours {
		started += h.Started
	}
	// 10:50 to 11:00 at $12 an hour: $2 on the $4 before.
	if !ended || len(l.Running) != 1 || !l.Running[0].End.IsZero() || l.Running[0].Micros != 6_000_000 || started != 0 {
		t.Errorf("ended %v, records %+v, %d started; want it ended, then going on at $6, not started again", ended, l.Running, started)
	}
}

// TestLabelsPerField: a job on two nodes whose one agent says its team and
// tier and the other its tier alone keeps its team: no flapping.
func TestLabelsPerField(t *testing.T) {
	a := NewAccountant(Options{})
	full := fleet.Job{ID: "j", Team: "alpha", Tier: "x", GPUs: 8, Start: t0}
	part := fleet.Job{ID: "j", Tier: "x", GPUs: 8, Start: t0}
	for m := 0; m <= 3; m++ {
		a.Observe(Snapshot{At: t0.Add(time.Duration(m) * time.Minute), Nodes: []Seen{
			{ID: "n1", Pool: "od", GPUs: 8, Price: 6, Ours: true, Jobs: []fleet.Job{full}},
			{ID: "n2", Pool: "od", GPUs: 8, Price: 6, Ours: true, Jobs: []fleet.Job{part}},
		}})
	}
	l := a.Live()
	for _, h := range l.Hours {
		for _, c := range h.Charges {
			if Kind(c.Kind) == Used && h.Team != "alpha" {
				t.Errorf("charged to %s/%s: %+v", h.Team, h.Tier, c)
			}
		}
	}
}

// TestHourClosedWhole: snapshots at 10:59, at 11:00 twice, and after: the
// hour 10:00 is written whole, once, as the store keys it, with no later
// sliver of it written over it.
func TestHourClosedWhole(t *testing.T) {
	a := NewAccountant(Options{})
	hours := map[string]state.UsageHour{}
	for _, at := range []time.Duration{50 * time.Minute, 59 * time.Minute, 60 * time.Minute, 60 * time.Minute, 61 * time.Minute, 62 * time.Minute, 80 * time.Minute} {
		f := a.Observe(Snapshot{At: t0.Add(at), Nodes: []Seen{{ID: "n", Pool: "od", GPUs: 8, Price: 6, Ours: true, Jobs: []fleet.Job{{ID: "j", GPUs: 8, Start: t0}}}}})
		for _, h := range f.Hours {
			hours[h.Hour.String()+h.Team+h.Tier] = h
		}
	}
	got := Micros(0)
	for _, h := range hours {
		if h.Hour.Equal(t0) {
			for _, c := range h.Charges {
				got += Micros(c.Micros)
			}
		}
	}
	if want := MicrosOf(6 * 10.0 / 60); got != want {
		t.Errorf("the hour 10:00 as written: %d micro-dollars, want %d (10:50 to 11:00 at $6)", got, want)
	}
}
