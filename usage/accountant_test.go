package usage

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/fleetcast/autoscaler/fleet"
	"github.com/fleetcast/autoscaler/state"
)

var t0 = time.Date(2026, 11, 30, 10, 0, 0, 0, time.UTC)

// books sums what an Accountant's flushes and live books say: the hours'
// charges by key (the last flush of an hour replacing the earlier), and
// each job's last record.
type books struct {
	hours map[string]state.UsageHour
	jobs  map[string]state.UsageJob
}

func (b *books) take(f Flush) {
	for _, h := range f.Hours {
		b.hours[fmt.Sprint(h.Hour.Unix(), "/", h.Team, "/", h.Tier)] = h
	}
	for _, j := range f.Jobs {
		b.jobs[j.ID+"/"+j.Start.String()] = j // as the store keys them
	}
}

// TestAccountantAddsUp: over generated fleets whose nodes come and go and
// whose jobs start, move and end between cycles at random times, what the
// Accountant charges adds up, to the micro-dollar, to an oracle computed
// from the inputs alone: each node's price times the time from its first
// charge (its launch, or the cycle before it was first seen, whichever is
// later) to the last cycle that saw it or the next one; each job's cost
// adds up to what its hours charged as used; and the stored books (the
// flushes, then the books as they stand) equal the live ones.
func TestAccountantAddsUp(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		a := NewAccountant(Options{MaxTeams: 3})
		b := &books{hours: map[string]state.UsageHour{}, jobs: map[string]state.UsageJob{}}
		type node struct {
			Seen
			start  time.Time // when the oracle begins its bill
			billed Micros    // what it has billed since
			to     time.Time // when its bill was last made up to
		}
		// The oracle's cost of each job incarnation (its ID and start, as
		// the store keys it), in micro-dollars, unrounded: the node's
		// price over each interval, by the job's share of the node's
		// GPUs as the interval's first cycle saw them.
		jobCost := map[string]float64{}
		incarnation := map[string]string{} // job ID -> its key now
		nodes := map[string]*node{}
		var order []string
		want := Micros(0)
		now, last := t0, time.Time{}
		seq := uint64(0)
		// bill is the oracle's bill of every node listed, from its last
		// bill (or its start) to now, and its jobs' shares.
		bill := func(now time.Time) {
			for _, id := range order {
				n := nodes[id]
				total := MicrosOf(n.Price * now.Sub(n.start).Hours())
				want += total - n.billed
				n.billed = total
				from := n.start
				if !n.to.IsZero() {
					from = n.to
				}
				n.to = now
				held := 0
				for _, j := range n.Jobs {
					held += j.GPUs
				}
				for _, j := range n.Jobs {
					jobCost[incarnation[j.ID]] += n.Price * now.Sub(from).Hours() * 1e6 * float64(j.GPUs) / float64(max(n.GPUs, held))
				}
			}
		}
		cycles := rapid.IntRange(2, 30).Draw(rt, "cycles")
		for c := 0; c < cycles; c++ {
			if c > 0 {
				now = now.Add(time.Duration(rapid.IntRange(1, 40).Draw(rt, "minutes")) * time.Minute)
			}
			// The oracle's bill for the interval since the last cycle: each
			// node seen then, at its price.
			bill(now)
			// Nodes go, and come.
			var kept []string
			for _, id := range order {
				if !rapid.Bool().Draw(rt, "gone "+id) || len(order) == 1 {
					kept = append(kept, id)
				} else {
					delete(nodes, id)
				}
			}
			order = kept
			for k := rapid.IntRange(0, 2).Draw(rt, "new"); k > 0; k-- {
				id := fmt.Sprint("n", c, "-", k)
				n := &node{Seen: Seen{ID: id, Pool: rapid.SampledFrom([]string{"od", "spot"}).Draw(rt, "pool"), GPUs: 8, Price: float64(rapid.IntRange(1, 40).Draw(rt, "price")), Ours: true}}
				n.LaunchedAt = now.Add(-time.Duration(rapid.IntRange(0, 50).Draw(rt, "age")) * time.Minute)
				n.start = now
				if !last.IsZero() {
					n.start = last
					if n.LaunchedAt.After(last) {
						n.start = n.LaunchedAt
					}
				}
				nodes[id] = n
				order = append(order, id)
			}
			// Jobs: each node holds up to three, some kept from before.
			snap := Snapshot{At: now}
			for _, id := range order {
				n := nodes[id]
				if n.JobsSeq != 0 && rapid.Bool().Draw(rt, "same jobs") {
					// Its agent's reports say the same jobs: the same
					// sequence number, so the Accountant reads none.
					snap.Nodes = append(snap.Nodes, n.Seen)
					continue
				}
				seq++
				n.JobsSeq = seq
				var jobs []fleet.Job
				for k := range rapid.IntRange(0, 3).Draw(rt, "jobs") {
					jid := fmt.Sprint("j-", id, "-", k)
					if rapid.Bool().Draw(rt, "renamed") {
						jid = fmt.Sprint("j-", id, "-", k, "-", c)
					}
					jobs = append(jobs, fleet.Job{ID: jid, GPUs: rapid.IntRange(1, 3).Draw(rt, "gpus"), Team: rapid.SampledFrom([]string{"", "a", "b", "c", "d"}).Draw(rt, "team"),
						Start: now.Add(-time.Minute), Submitted: now.Add(-time.Hour)})
				}
				n.Jobs = jobs
				snap.Nodes = append(snap.Nodes, n.Seen)
			}
			// Job incarnations: a job seen now and at no node last time
			// starts one.
			seen := map[string]bool{}
			for _, x := range snap.Nodes {
				for _, j := range x.Jobs {
					seen[j.ID] = true
					if _, ok := incarnation[j.ID]; !ok {
						incarnation[j.ID] = j.ID + "/" + j.Start.String()
					}
				}
			}
			for id := range incarnation {
				if !seen[id] {
					delete(incarnation, id)
				}
			}
			if rapid.Bool().Draw(rt, "pending") {
				snap.Pending = []Waiting{{Team: "a", GPUs: 4}}
				a.Bought("od", 1, ForPending(snap.Pending, nil), now.Add(time.Hour))
			}
			b.take(a.Observe(snap))
			last = now
		}
		// The books are whole to the last snapshot (a node first seen
		// there charged from its start), and so is the oracle's bill.
		bill(last)
		live := a.Live()
		b.take(Flush{Hours: live.Hours, Jobs: live.Running})
		got := Micros(0)
		used := map[string]Micros{}
		teams := map[string]bool{}
		for _, h := range b.hours {
			for _, c := range h.Charges {
				got += Micros(c.Micros)
				if Kind(c.Kind) == Used {
					used[h.Team] += Micros(c.Micros)
				}
			}
			if h.Team != Other && h.Team != Unattributed && h.Team != IdleLabel {
				teams[h.Team] = true
			}
		}
		if len(teams) > 3 {
			rt.Fatalf("teams %v past the cap of 3", teams)
		}
		if got != want {
			rt.Fatalf("charged %d micro-dollars; the nodes cost %d", got, want)
		}
		for key, j := range b.jobs {
			if d := float64(j.Micros) - jobCost[key]; d > float64(2*cycles+2) || d < -float64(2*cycles+2) {
				rt.Fatalf("job %s charged %d micro-dollars; its share of its nodes came to %.1f", key, j.Micros, jobCost[key])
			}
		}
		// What the hours charged as used is what the jobs' records were
		// (by team where no job's team changed; a job labelled late has
		// its record under its last team).
		usedAll, byJobs := Micros(0), Micros(0)
		for _, m := range used {
			usedAll += m
		}
		for _, j := range b.jobs {
			byJobs += Micros(j.Micros)
		}
		if usedAll != byJobs {
			rt.Fatalf("the hours charged %d as used, the jobs' records %d", usedAll, byJobs)
		}
	})
}

// TestAccountantKeepsConfiguredTeams: the teams an Accountant is told to
// keep (the config's, whose budgets count their charges) keep their names
// however many other teams come first; the others share the rest of the
// room, then fold into Other.
func TestAccountantKeepsConfiguredTeams(t *testing.T) {
	a := NewAccountant(Options{MaxTeams: 2, Teams: []string{"vision"}})
	got := []string{a.teams.Fold("a"), a.teams.Fold("b"), a.teams.Fold("vision"), a.teams.Fold("a")}
	if want := []string{"a", Other, "vision", "a"}; !slices.Equal(got, want) {
		t.Errorf("folded %v, want %v", got, want)
	}
}
