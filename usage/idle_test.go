package usage

import (
	"testing"
	"time"

	"github.com/fleetcast/autoscaler/fleet"
	"github.com/fleetcast/autoscaler/state"
)

// idleRows is the report by team of the hour starting at h, from what the
// observations flushed and the books hold now.
func idleRows(a *Accountant, flushed Flush, h time.Time) map[string]Row {
	hours := flushed.Merge(Flush{Hours: a.Live().Hours}).Hours
	var in []state.UsageHour
	for _, x := range hours {
		if x.Hour.Equal(h) {
			in = append(in, x)
		}
	}
	out := map[string]Row{}
	for _, x := range Build(in, nil, Query{From: h, To: h.Add(time.Hour), By: ByTeam}).Rows {
		out[x.Group] = x
	}
	return out
}

// TestIdleRunKeepsItsTeamAndHour: the charges of an idle run kept aside
// until it lasts the window are counted, once it does, in the hour and to
// the team they were charged in, never another's: on a $60 an hour
// one-GPU node ($1 a minute), with a 10-minute window.
func TestIdleRunKeepsItsTeamAndHour(t *testing.T) {
	const minute = Micros(1_000_000)
	t.Run("a team said late", func(t *testing.T) {
		// Idle from 10:00 (never busy); its team said at 10:05, when its
		// first 5 minutes, unattributed's, are kept aside; at 10:20 the
		// run is 20 minutes long.
		a := NewAccountant(Options{IdleWindow: 10 * time.Minute})
		at := time.Date(2026, 11, 30, 10, 0, 0, 0, time.UTC)
		var flushed Flush
		for m := 0; m <= 20; m++ {
			j := fleet.Job{ID: "j", GPUs: 1, Start: at, IdleSince: at}
			seq := uint64(1)
			if m >= 5 {
				j.Team, seq = "vision", 2
			}
			flushed = flushed.Merge(a.Observe(Snapshot{At: at.Add(time.Duration(m) * time.Minute),
				Nodes: []Seen{{ID: "n", Pool: "p", GPUs: 1, Price: 60, Jobs: []fleet.Job{j}, JobsSeq: seq}}}))
		}
		rows := idleRows(a, flushed, at)
		for team, want := range map[string]Micros{Unattributed: 5 * minute, "vision": 15 * minute} {
			if x := rows[team]; x.Used.Micros != want || x.IdleBeforeExecution.Micros != want || x.Stalled.Micros != 0 {
				t.Errorf("%s: used %d, idle before execution %d, stalled %d; want %d, %d, 0", team, x.Used.Micros, x.IdleBeforeExecution.Micros, x.Stalled.Micros, want, want)
			}
		}
	})
	t.Run("across an hour", func(t *testing.T) {
		// Busy from 10:50, stalled from 10:55, gone at 11:05: the run is
		// as long as the window only after 11:00 has begun, and the hour
		// 10:00 would have closed at 11:01.
		a := NewAccountant(Options{IdleWindow: 10 * time.Minute})
		at := time.Date(2026, 11, 30, 10, 50, 0, 0, time.UTC)
		var flushed Flush
		for m := 0; m <= 15; m++ {
			j := fleet.Job{ID: "j", GPUs: 1, Start: at, Team: "nlp", FirstBusy: at}
			seq := uint64(1)
			if m >= 5 {
				j.IdleSince, seq = at.Add(5*time.Minute), 2
			}
			jobs := []fleet.Job{j}
			if m == 15 {
				jobs, seq = nil, 3
			}
			flushed = flushed.Merge(a.Observe(Snapshot{At: at.Add(time.Duration(m) * time.Minute),
				Nodes: []Seen{{ID: "n", Pool: "p", GPUs: 1, Price: 60, Jobs: jobs, JobsSeq: seq}}}))
		}
		for _, h := range []struct {
			hour          time.Time
			used, stalled Micros
		}{
			{time.Date(2026, 11, 30, 10, 0, 0, 0, time.UTC), 10 * minute, 5 * minute},
			{time.Date(2026, 11, 30, 11, 0, 0, 0, time.UTC), 5 * minute, 5 * minute},
		} {
			if x := idleRows(a, flushed, h.hour)["nlp"]; x.Used.Micros != h.used || x.Stalled.Micros != h.stalled {
				t.Errorf("hour %s: used %d, stalled %d; want %d, %d", h.hour.Format("15:04"), x.Used.Micros, x.Stalled.Micros, h.used, h.stalled)
			}
		}
	})
	t.Run("too short", func(t *testing.T) {
		// Idle 9 minutes of work: none of it allocated-idle.
		a := NewAccountant(Options{IdleWindow: 10 * time.Minute})
		at := time.Date(2026, 11, 30, 10, 0, 0, 0, time.UTC)
		for m := 0; m <= 12; m++ {
			j := fleet.Job{ID: "j", GPUs: 1, Start: at, Team: "nlp", FirstBusy: at}
			seq := uint64(1)
			if m >= 1 && m < 10 {
				j.IdleSince, seq = at.Add(time.Minute), 2
			} else if m >= 10 {
				seq = 3
			}
			a.Observe(Snapshot{At: at.Add(time.Duration(m) * time.Minute), Nodes: []Seen{{ID: "n", Pool: "p", GPUs: 1, Price: 60, Jobs: []fleet.Job{j}, JobsSeq: seq}}})
		}
		if x := idleRows(a, Flush{}, at)["nlp"]; x.Used.Micros != 12*minute || x.Stalled.Micros != 0 || x.IdleBeforeExecution.Micros != 0 {
			t.Errorf("used %d, stalled %d, idle before execution %d; want %d, 0, 0", x.Used.Micros, x.Stalled.Micros, x.IdleBeforeExecution.Micros, 12*minute)
		}
	})
}
