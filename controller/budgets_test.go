package controller

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/fleetcast/autoscaler/fleet"
	"github.com/fleetcast/autoscaler/planner"
	"github.com/fleetcast/autoscaler/state"
	"github.com/fleetcast/autoscaler/usage"
)

// TestTeamOverBudget: two teams push demand; vision has spent its burst
// budget today (the books of who used what say so: an hour of the day the
// store holds, and an hour in progress), nlp has not. Nothing is bought
// for vision, the plan's note names it and its budget, what is bought
// for nlp is what a controller with nlp's demand alone buys, and nothing
// bought is charged to vision. The next day, vision's demand is bought
// for again.
func TestTeamOverBudget(t *testing.T) {
	od := gpuPool("od", 8, 10, 5*time.Minute) // $9.60 a node-hour
	rig := func(t *testing.T, teams []fleet.Team) *cycler {
		return newLoopWith(t, false, nil, func(l *cycler, o *Options) {
			l.set.Teams = teams
			l.pending.Budgeted = fleet.BudgetedTeams(teams)
		}, od)
	}
	teams := []fleet.Team{{Name: "vision", Budgeted: true, BurstBudgetPerDay: 10}, {Name: "nlp", Budgeted: true, BurstBudgetPerDay: 1000}}
	l := rig(t, teams)
	// $7.20 of vision's spend in an hour of today the store holds (the
	// reserved pool's charge does not count), $3.00 in the hour before
	// today, which does not count either.
	day := fleet.BudgetDay(t0)
	hours := []state.UsageHour{
		{Hour: day.Add(-time.Hour), Team: "vision", Tier: "unattributed", Charges: []state.UsageCharge{{Pool: "od", Kind: string(usage.Used), Micros: 3_000_000, GPUHours: 2.5}}},
		{Hour: day.Add(2 * time.Hour), Team: "vision", Tier: "unattributed", Charges: []state.UsageCharge{
			{Pool: "od", Kind: string(usage.Used), Micros: 6_000_000, GPUHours: 5}, {Pool: "od", Kind: string(usage.BoughtFor), Micros: 1_200_000, GPUHours: 1}}},
	}
	if err := l.store.PutUsage(hours, nil); err != nil {
		t.Fatal(err)
	}
	push := func(l *cycler) {
		l.pending.Set(l.now, DemandPush{Source: "kueue", Pending: []PendingDemand{{GPUs: 16, Team: "vision"}, {GPUs: 8, Team: "nlp"}}})
	}
	push(l)
	plan := l.cycle(t)
	if !slices.Equal(plan.OverBudget, nil) {
		t.Fatalf("over budget %v with $7.20 of $10 spent", plan.OverBudget)
	}
	if got := plan.Counts()[planner.Launch]; got != 3 {
		t.Fatalf("launched %d within budget, want 3 (24 GPUs pending)", got)
	}

	// A node is bought for vision's job (charged to vision from its
	// launch while it holds no job: bought for it), then its job runs on
	// it for 20 minutes: 26 minutes of $9.60 an hour, $4.16 more, in the
	// hour in progress. Now over its budget.
	l2 := rig(t, teams)
	if err := l2.store.PutUsage(hours, nil); err != nil {
		t.Fatal(err)
	}
	l2.pending.Set(l2.now, DemandPush{Source: "kueue", Pending: []PendingDemand{{GPUs: 8, Team: "vision"}}})
	l2.cycle(t)
	for range 6 { // booted
		l2.cycle(t)
	}
	l2.pending.Set(l2.now, DemandPush{Source: "kueue"})
	for _, id := range instances(t, l2, od) {
		l2.busy[id] = true
	}
	l2.team = "vision"
	for range 20 {
		l2.cycle(t)
	}
	spent := l2.c.burstSpend([]string{"vision", "nlp"}, l2.now)
	if len(spent) != 1 || spent[0].Team != "vision" || spent[0].USD < 11.3 || spent[0].USD > 11.4 {
		t.Fatalf("spent %+v, want vision's $7.20 stored and $4.16 in the books", spent)
	}
	push(l2)
	plan = l2.cycle(t)
	if !slices.Equal(plan.OverBudget, []string{"vision"}) {
		t.Fatalf("over budget %v, want vision", plan.OverBudget)
	}

	// Over its budget from the start (the store says $12 today): nothing
	// is bought for vision's 16 pending GPUs, and the plan says so.
	over := slices.Clone(hours)
	over[1].Charges = []state.UsageCharge{{Pool: "od", Kind: string(usage.Used), Micros: 12_000_000, GPUHours: 10}}
	l4 := rig(t, teams)
	if err := l4.store.PutUsage(over, nil); err != nil {
		t.Fatal(err)
	}
	push(l4)
	plan = l4.cycle(t)
	if !slices.ContainsFunc(plan.Notes, func(n planner.Note) bool {
		return n.Code == planner.ReasonTeamOverBudget && strings.Contains(n.Text,
			"team vision is over its burst budget of $10.00/day ($12.00 spent today): nothing is bought for its 16 pending GPUs until the next day")
	}) {
		t.Errorf("notes %+v: want one naming vision and its budget", plan.Notes)
	}
	bought := l4.target(t, od)
	_, metrics := get(t, l4.c.Handler(APIOptions{OpenReads: true}), "/metrics")
	for _, want := range []string{`fleetcast_team_over_budget{team="vision"} 1`, `fleetcast_team_over_budget{team="nlp"} 0`,
		`fleetcast_team_burst_spend_dollars{team="vision"} 12`, `fleetcast_team_burst_budget_dollars{team="nlp"} 1000`} {
		if !strings.Contains(metrics, want) {
			t.Errorf("metrics lack %q", want)
		}
	}

	// nlp alone, without budgets: as much is bought for it.
	l5 := rig(t, nil)
	l5.pending.Set(l5.now, DemandPush{Source: "kueue", Pending: []PendingDemand{{GPUs: 8, Team: "nlp"}}})
	l5.cycle(t)
	if alone := l5.target(t, od); bought != alone || bought != 1 {
		t.Errorf("bought %d nodes for nlp beside vision over budget, %d for nlp alone; want 1 each", bought, alone)
	}

	// What was bought is charged to nlp while it idles, never to vision.
	for range 7 {
		push(l4)
		l4.cycle(t)
	}
	charged := map[string]int64{}
	for k, a := range l4.c.usage.Totals().Charges {
		if k.Kind == usage.BoughtFor {
			charged[k.Team] += int64(a.Micros)
		}
	}
	if charged["vision"] != 0 || charged["nlp"] == 0 {
		t.Errorf("bought for: %v; want nlp charged, vision not", charged)
	}

	// The next day, vision's demand is bought for again.
	l4.now = day.Add(24 * time.Hour)
	push(l4)
	if plan = l4.cycle(t); len(plan.OverBudget) != 0 {
		t.Errorf("over budget %v the next day", plan.OverBudget)
	}
}

// instances are the IDs of pool p's instances in l's cloud.
func instances(t *testing.T, l *cycler, p fleet.Pool) []string {
	t.Helper()
	g, err := l.cloud.Describe(t.Context(), p)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, in := range g.Instances {
		out = append(out, in.ID)
	}
	return out
}

// TestPendingBudgetedLines: the pushed scoped lines of teams with budgets
// are kept apart, each naming its team; the others' are summed by scope
// and tier as before, whatever team they name.
func TestPendingBudgetedLines(t *testing.T) {
	p := &Pending{Budgeted: []string{"vision"}}
	p.Set(t0, DemandPush{Source: "kueue", Pending: []PendingDemand{{Pool: "od", GPUs: 8, Team: "vision"}, {Pool: "od", GPUs: 4, Team: "nlp"},
		{Pool: "od", GPUs: 2}, {GPUs: 16, Team: "vision"}}})
	p.Set(t0, DemandPush{Source: SlurmSourceName, Pending: []PendingDemand{{Partition: "train", GPUs: 8, Team: "vision"}, {Partition: "train", GPUs: 8, Team: "nlp"}}})
	total, scoped := p.Demand(t0)
	want := []fleet.ScopedDemand{{Partition: "train", GPUs: 8}, {Partition: "train", GPUs: 8, Team: "vision"}, {Pool: "od", GPUs: 6}, {Pool: "od", GPUs: 8, Team: "vision"}}
	if total != 46 || !slices.Equal(scoped, want) {
		t.Errorf("pending %d, scoped %+v; want 46, %+v", total, scoped, want)
	}
	// The budgeted team's pending GPUs are its lines', the Slurm
	// source's too: what PendingGPUs counts of it.
	if got := p.Teams(t0); !slices.Equal(got, []fleet.TeamGPUs{{Team: "vision", GPUs: 32}}) {
		t.Errorf("teams %+v, want vision's 32 GPUs", got)
	}
}

// TestTeamOverBudgetShare: a team over its budget with a share of the
// reservation has bought for it what its share leaves free, and nothing
// beyond: the plan buys what it buys for the other team's demand and the
// team's demand within its free share, and no more.
func TestTeamOverBudgetShare(t *testing.T) {
	res, od := gpuPool("res", 8, 1, 5*time.Minute), gpuPool("od", 8, 10, 5*time.Minute)
	res.Capacity, res.Min = fleet.Reserved, 1
	over := []state.UsageHour{{Hour: fleet.BudgetDay(t0).Add(2 * time.Hour), Team: "vision", Tier: "unattributed",
		Charges: []state.UsageCharge{{Pool: "od", Kind: string(usage.Used), Micros: 50_000_000, GPUHours: 40}}}}
	rig := func(t *testing.T, teams []fleet.Team) *cycler {
		l := newLoopWith(t, false, nil, func(l *cycler, o *Options) {
			l.set.Teams = teams
			l.pending.Budgeted = fleet.BudgetedTeams(teams)
			if err := l.store.PutUsage(over, nil); err != nil { // the day's hours so far
				t.Fatal(err)
			}
		}, res, od)
		for range 7 { // the reservation booted
			l.cycle(t)
		}
		return l
	}
	l := rig(t, []fleet.Team{{Name: "vision", Budgeted: true, BurstBudgetPerDay: 10, ReservedShare: 0.5}})
	l.pending.Set(l.now, DemandPush{Source: "kueue", Pending: []PendingDemand{{GPUs: 16, Team: "vision"}, {GPUs: 12, Team: "nlp"}}})
	plan := l.cycle(t)
	if !slices.ContainsFunc(plan.Notes, func(n planner.Note) bool {
		return n.Code == planner.ReasonTeamOverBudget && strings.Contains(n.Text, "nothing is bought for 12 of its 16 pending GPUs beyond its reserved share (4 GPUs, 4 free)")
	}) {
		t.Errorf("notes %+v: want one saying 12 of vision's 16 GPUs are withheld", plan.Notes)
	}
	// The same fleet without budgets, vision asking only what its share
	// leaves free: as much is bought.
	l2 := rig(t, nil)
	l2.pending.Set(l2.now, DemandPush{Source: "kueue", Pending: []PendingDemand{{GPUs: 4, Team: "vision"}, {GPUs: 12, Team: "nlp"}}})
	l2.cycle(t)
	if got, want := l.target(t, od), l2.target(t, od); got != want || got != 1 {
		t.Errorf("od's target %d with vision over budget, %d with its free share's demand alone; want 1 each", got, want)
	}
}

// TestBurstSpendAcrossHours: a team's spend today, read each cycle from
// the store's closed hours (summed once) and the books' open ones, is
// what the books charged it on burst capacity, as hours close and are
// written.
func TestBurstSpendAcrossHours(t *testing.T) {
	od := gpuPool("od", 8, 10, 5*time.Minute)
	teams := []fleet.Team{{Name: "vision", Budgeted: true, BurstBudgetPerDay: 1e6}}
	l := newLoopWith(t, false, nil, func(l *cycler, o *Options) {
		l.set.Teams = teams
		l.pending.Budgeted = fleet.BudgetedTeams(teams)
	}, od)
	l.pending.Set(l.now, DemandPush{Source: "kueue", Pending: []PendingDemand{{GPUs: 8, Team: "vision"}}})
	for range 7 {
		l.cycle(t)
	}
	l.pending.Set(l.now, DemandPush{Source: "kueue"})
	for _, id := range instances(t, l, od) {
		l.busy[id] = true
	}
	l.team = "vision"
	for i := range 150 { // past 12:00, two hours closed and written
		l.cycle(t)
		if i%10 != 9 {
			continue
		}
		var want usage.Micros
		for k, a := range l.c.usage.Totals().Charges {
			if k.Team == "vision" && (k.Kind == usage.Used || k.Kind == usage.BoughtFor) {
				want += a.Micros
			}
		}
		got := l.c.burstSpend([]string{"vision"}, l.now)
		if len(got) != 1 || usage.MicrosOf(got[0].USD) != want {
			t.Fatalf("at %s: spent %+v, the books charged %v", l.now.Format(time.TimeOnly), got, want.Dollars())
		}
	}
}
