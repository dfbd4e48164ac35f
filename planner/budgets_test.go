package planner

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/fleetcast/autoscaler/fleet"
)

// TestTeamBudgets: a team whose burst spend today reached its budget has
// nothing bought for its pending GPUs, fleet-wide or scoped, beyond what
// its reserved share leaves free, and the plan says so; the other teams'
// demand is bought for as if it were not there.
func TestTeamBudgets(t *testing.T) {
	job := func(gpus int, team string) fleet.Job {
		return fleet.Job{ID: team + fmt.Sprint(gpus), GPUs: gpus, Start: t0.Add(-time.Hour), Team: team}
	}
	onOD := func(jobs ...fleet.Job) fleet.Node {
		n := ready("o1", "od")
		n.Jobs, n.IdleSince = jobs, time.Time{}
		return n
	}
	onRes := func(jobs ...fleet.Job) []fleet.Node {
		a, b := ready("r1", "res"), ready("r2", "res")
		a.Jobs, b.Jobs = jobs, []fleet.Job{job(8, "other")}
		if len(jobs) > 0 {
			a.IdleSince = time.Time{}
		}
		b.IdleSince = time.Time{}
		return []fleet.Node{a, b}
	}
	tests := []struct {
		name    string
		spent   float64 // vision's spend today, of its $100 budget
		nodes   []fleet.Node
		pending []fleet.TeamGPUs // vision's and nlp's (nlp has no budget)
		scoped  []fleet.ScopedDemand
		want    int    // on-demand nodes launched
		note    string // the note's words, when one is due
	}{
		{name: "within its budget", spent: 50, nodes: onRes(job(8, "nlp")), pending: []fleet.TeamGPUs{{Team: "vision", GPUs: 16}}, want: 2},
		{name: "over it", spent: 100, nodes: onRes(job(4, "vision"), job(4, "nlp")), pending: []fleet.TeamGPUs{{Team: "vision", GPUs: 16}}, want: 0,
			note: "team vision is over its burst budget of $100/day ($100 spent today): nothing is bought for 16 of its 16 pending GPUs beyond its reserved share (4 GPUs, 0 free) until the next day"},
		// Its share, lent to nlp, returns to it: what nlp then needs is
		// bought.
		{name: "over it, its share lent", spent: 100, nodes: onRes(job(8, "nlp")), pending: []fleet.TeamGPUs{{Team: "vision", GPUs: 16}}, want: 1,
			note: "nothing is bought for 12 of its 16 pending GPUs beyond its reserved share (4 GPUs, 4 free)"},
		{name: "its share free serves some", spent: 150, nodes: onRes(), pending: []fleet.TeamGPUs{{Team: "vision", GPUs: 12}}, want: 0,
			note: "nothing is bought for 8 of its 12 pending GPUs beyond its reserved share (4 GPUs, 4 free)"},
		{name: "the others' demand is bought for", spent: 150, nodes: onRes(job(4, "vision"), job(4, "nlp")),
			pending: []fleet.TeamGPUs{{Team: "vision", GPUs: 16}, {Team: "nlp", GPUs: 16}}, want: 2},
		{name: "its scoped line buys nothing", spent: 150, nodes: onRes(job(4, "vision"), job(4, "nlp")), pending: []fleet.TeamGPUs{{Team: "vision", GPUs: 8}},
			scoped: []fleet.ScopedDemand{{Pool: "od", GPUs: 8, Team: "vision"}}, want: 0},
		{name: "a scoped line within its budget", spent: 50, nodes: onRes(job(4, "vision"), job(4, "nlp")), pending: []fleet.TeamGPUs{{Team: "vision", GPUs: 8}},
			scoped: []fleet.ScopedDemand{{Pool: "od", GPUs: 8, Team: "vision"}}, want: 1},
		{name: "a node Slurm asks for is bought whatever", spent: 150, nodes: onRes(job(4, "vision"), job(4, "nlp")), pending: []fleet.TeamGPUs{{Team: "vision", GPUs: 8}},
			scoped: []fleet.ScopedDemand{{Pool: "od", Nodes: 1, GPUs: 8, Team: "vision", Requested: true}}, want: 1},
		// ... and its GPUs are not withheld as well: the others' demand
		// is bought for beside it.
		{name: "a node Slurm asks for, and the others' demand", spent: 150, nodes: onRes(job(4, "vision"), job(4, "nlp")),
			pending: []fleet.TeamGPUs{{Team: "vision", GPUs: 8}, {Team: "nlp", GPUs: 8}},
			scoped:  []fleet.ScopedDemand{{Pool: "od", Nodes: 1, GPUs: 8, Team: "vision", Requested: true}}, want: 2},
		// Its jobs on burst capacity hold their GPUs until they leave: the
		// others' demand is not bought for on them.
		{name: "its jobs on burst capacity hold their GPUs", spent: 150, nodes: append(onRes(job(4, "vision"), job(4, "nlp")), onOD(job(8, "vision"))),
			pending: []fleet.TeamGPUs{{Team: "nlp", GPUs: 8}}, want: 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			set := testConfig(pool("res", fleet.Reserved, 20, 10*time.Minute, 2, 2), pool("od", fleet.OnDemand, 55, 10*time.Minute, 0, 10)).Settings()
			set.Teams = []fleet.Team{{Name: "vision", Budgeted: true, BurstBudgetPerDay: 100, ReservedShare: 0.25}}
			st := &fleet.State{CapturedAt: t0, Nodes: tt.nodes, Scoped: tt.scoped, BurstSpend: []fleet.TeamSpend{{Team: "vision", USD: tt.spent}}}
			for _, l := range tt.pending {
				st.PendingGPUs += l.GPUs
				if l.Team == "vision" {
					st.PendingTeams = append(st.PendingTeams, l)
				}
			}
			p := Make(Input{Settings: set, State: st, Now: t0})
			if got := p.Counts()[Launch]; got != tt.want {
				t.Errorf("launched %d, want %d: %+v", got, tt.want, p.Actions)
			}
			over := tt.spent >= 100
			if got := slices.Equal(p.OverBudget, []string{"vision"}); got != over {
				t.Errorf("over budget %v, want vision %v", p.OverBudget, over)
			}
			if tt.note != "" && !slices.ContainsFunc(p.Notes, func(n Note) bool { return n.Code == ReasonTeamOverBudget && strings.Contains(n.Text, tt.note) }) {
				t.Errorf("notes %+v, want one saying %q", p.Notes, tt.note)
			}
		})
	}
}

// TestBudgetEndsStandIn: the GPUs withheld from a team over its budget in
// a tier nothing is bought for do not count twice: a node whose jobs end
// within the lead time still stands in for the launch another team's
// pending critical job would need, as it does without budgets.
func TestBudgetEndsStandIn(t *testing.T) {
	set := tieredSettings()
	set.Teams = []fleet.Team{{Name: "vision", Budgeted: true, BurstBudgetPerDay: 10}}
	n := ready("r1", "res")
	n.Jobs = []fleet.Job{{ID: "j", GPUs: 8, Start: t0.Add(-time.Hour), ExpectedEnd: t0.Add(3 * time.Minute), Tier: "standard"}}
	n.IdleSince = time.Time{}
	st := &fleet.State{CapturedAt: t0, Nodes: []fleet.Node{n}, PendingGPUs: 16,
		PendingTiers: []fleet.TierGPUs{{Tier: "best_effort", GPUs: 8}, {Tier: "critical", GPUs: 8}},
		PendingTeams: []fleet.TeamGPUs{{Team: "vision", Tier: "best_effort", GPUs: 8}},
		BurstSpend:   []fleet.TeamSpend{{Team: "vision", USD: 20}}}
	p := Make(Input{Settings: set, State: st, Now: t0})
	if !slices.Equal(p.OverBudget, []string{"vision"}) {
		t.Fatalf("over budget %v, want vision", p.OverBudget)
	}
	free := set
	free.Teams = nil
	q := Make(Input{Settings: free, State: st, Now: t0})
	if got, want := p.Counts()[Launch], q.Counts()[Launch]; got != want || got != 0 {
		t.Errorf("launched %d with vision over budget, %d without budgets; want 0 each: %+v", got, want, p.Actions)
	}
}
