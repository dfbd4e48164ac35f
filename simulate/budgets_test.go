package simulate

import (
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/fleetcast/autoscaler/fleet"
	"github.com/fleetcast/autoscaler/loop"
	"github.com/fleetcast/autoscaler/planner"
	"github.com/fleetcast/autoscaler/trace"
)

// TestBudgetBook: a team's burst spend is its jobs' GPUs on on-demand
// nodes at their price per GPU-hour, split at midnight UTC into budget
// days; what runs on the reservation costs its budget nothing.
func TestBudgetBook(t *testing.T) {
	set := onePool() // 8-GPU nodes at $8 an hour: $1 a GPU-hour
	set.Teams = []fleet.Team{{Name: "a", Budgeted: true, BurstBudgetPerDay: 20}}
	// From 22:00: a's 4-GPU job runs 4 hours (2 before midnight, 2
	// after): $8 and $8; b's 8-GPU job 1 hour: $8, no budget.
	start := time.Date(2026, 1, 5, 22, 0, 0, 0, time.UTC)
	tr := jobsTrace(trace.Job{GPUs: 4, Duration: 4 * time.Hour, Team: "a"}, trace.Job{GPUs: 8, Duration: time.Hour, Team: "b"})
	rep, err := Run(set, tr, Options{Policies: []string{"reactive"}, Start: start})
	if err != nil {
		t.Fatal(err)
	}
	r := rep.Policies[0]
	got := map[string]TeamResult{}
	for _, x := range r.Teams {
		got[x.Team] = x
	}
	// The jobs start once a node is up, 10 minutes in: a runs 22:10 to
	// 02:10, 110 minutes before midnight ($7.33), 130 after ($8.67).
	if a := got["a"]; a.BurstUSD != 16 || a.MaxDayBurstUSD != 8.67 || a.BurstBudgetPerDay == nil || *a.BurstBudgetPerDay != 20 || a.DaysHeld != 0 {
		t.Errorf("team a: %+v, want $16 in all, $8.67 on its dearest day, a budget of $20 never reached", a)
	}
	if b := got["b"]; b.BurstUSD != 8 || b.BurstBudgetPerDay != nil || b.DaysHeld != 0 {
		t.Errorf("team b: %+v, want $8, no budget", b)
	}

	// On a reservation, nothing.
	res := *set
	res.Pools = append([]fleet.Pool{set.Pools[0]}, set.Pools...)
	res.Pools[0].Name, res.Pools[0].Capacity, res.Pools[0].Min = "res", fleet.Reserved, 10
	rep, err = Run(&res, tr, Options{Policies: []string{"reactive"}, Start: start})
	if err != nil {
		t.Fatal(err)
	}
	for _, x := range rep.Policies[0].Teams {
		if x.BurstUSD != 0 {
			t.Errorf("team %s spent $%v on burst capacity on a reservation", x.Team, x.BurstUSD)
		}
	}

	// A budget of $7: the job is stopped (a checkpoint, nothing lost)
	// before its spend passes it, on the first day and the second, and
	// goes on from its checkpoint the next day; the third day it ends.
	set.Teams[0].BurstBudgetPerDay = 7
	rep, err = Run(set, tr, Options{Policies: []string{"reactive"}, Start: start})
	if err != nil {
		t.Fatal(err)
	}
	r = rep.Policies[0]
	for _, x := range r.Teams {
		if x.Team == "a" && (x.DaysHeld != 2 || x.MaxDayBurstUSD > 7 || x.MaxOverBudgetUSD != 0 || x.BurstUSD != 16) {
			t.Errorf("team a: %+v, want 2 days held at its budget of $7, $16 in all, never past it", x)
		}
	}
	if r.BudgetStops != 2 || r.LostGPUHours != 0 {
		t.Errorf("%d runs stopped for the budget, %v GPU-h lost; want 2, none", r.BudgetStops, r.LostGPUHours)
	}
}

// TestOverBudgetBuysNothing: over runs of generated traces of three teams,
// two with budgets low enough to be spent most days and one of them with
// a share of the reservation, no plan of the predictive policy launches
// more burst nodes than the same plan re-made without the over-budget
// teams' pending GPUs beyond what their shares leave free, and without
// budgets: nothing is bought for a team over its budget. The teams over
// budget, their shares' free GPUs and what is withheld are worked out here
// from the plan's input, not by the planner.
func TestOverBudgetBuysNothing(t *testing.T) {
	for seed := uint64(1); seed <= 3; seed++ {
		rng := rand.New(rand.NewPCG(seed, 11))
		tr := jobsTrace(teamJobs(rng, 600, 10*time.Minute, 130*time.Minute, []string{"vision", "nlp", "nlp", "speech", "speech"},
			func(j *trace.Job) { j.Tier = []string{"critical", "standard"}[rng.IntN(2)] })...)
		set := fleet.DefaultSettings()
		set.Pools = []fleet.Pool{teamPool("res", fleet.Reserved, 8, 20, 2, 2), teamPool("od", fleet.OnDemand, 8, 55, 0, 30)}
		if seed == 2 {
			// Nodes of two widths: wide jobs pending in their shape, a
			// line per tier and budgeted team.
			set.Pools = append(set.Pools, teamPool("od4", fleet.OnDemand, 4, 27.5, 0, 30))
		}
		if seed == 3 {
			set.Tiers = threeTiers()
		}
		set.Teams = []fleet.Team{{Name: "vision", Budgeted: true, BurstBudgetPerDay: 150, ReservedShare: 0.5},
			{Name: "nlp", Budgeted: true, BurstBudgetPerDay: 400}}
		cycles, checked, over, launched := 0, 0, 0, 0
		opt := Options{Policies: []string{"predictive"}, Seed: int64(seed), Cycles: func(_ string, r loop.CycleResult) {
			cycles++
			launched += burstLaunches(&set, r.Plan)
			st, withheld := withoutOverBudget(&set, r.State)
			if withheld == 0 {
				return
			}
			over++
			with := burstLaunches(&set, r.Plan)
			if testing.Verbose() && with > 0 {
				t.Logf("launch %d with %d withheld: %+v", with, withheld, r.Plan.Notes)
			}
			if with == 0 {
				return
			}
			checked++
			free := set
			free.Teams = nil
			again := planner.Make(planner.Input{Settings: free, State: st, Forecast: r.Forecast, TierForecasts: r.TierForecasts,
				Now: r.State.CapturedAt, Unannounced: true})
			if without := burstLaunches(&set, again); with > without {
				t.Errorf("seed %d, %s: %d burst nodes launched, %d without the %d GPUs of teams over budget", seed,
					r.State.CapturedAt.Format(time.DateTime), with, without, withheld)
			}
		}}
		if _, err := Run(&set, tr, opt); err != nil {
			t.Fatal(err)
		}
		if over == 0 || checked == 0 {
			t.Fatalf("seed %d: of %d cycles (%d nodes launched), %d had demand withheld and %d of them launched: the property was not exercised", seed, cycles, launched, over, checked)
		}
	}
}

// withoutOverBudget is a copy of st without the pending GPUs of the teams
// of set over their budget (their spend today, with what their jobs on
// burst nodes and a node of the cheapest burst pool cost for
// fleet.BudgetWindow, at least their budget) beyond what their reserved
// shares leave free (their share of the reserved GPUs, less what their
// jobs hold on reserved nodes), and without their scoped lines; and the
// GPUs so withheld.
func withoutOverBudget(set *fleet.Settings, st *fleet.State) (*fleet.State, int) {
	out := *st
	out.Scoped, out.PendingTeams = slices.Clone(st.Scoped), nil
	reserved := 0
	for _, p := range set.Pools {
		if p.Capacity == fleet.Reserved {
			reserved += p.Max * p.GPUsPerNode
		}
	}
	withheld := 0
	for _, tm := range set.Teams {
		spent := 0.0
		for _, s := range st.BurstSpend {
			if s.Team == tm.Name {
				spent += s.USD
			}
		}
		held, rate, node := 0, 0.0, 0.0
		for _, p := range set.Pools {
			if p.Capacity != fleet.Reserved && (node == 0 || p.PricePerHour < node) {
				node = p.PricePerHour
			}
		}
		for _, n := range st.Nodes {
			if p := set.Pool(n.Pool); p != nil && n.State != fleet.Terminating {
				left := p.GPUsPerNode
				for _, j := range n.Jobs {
					g := min(j.GPUs, left)
					left -= g
					switch {
					case j.Team != tm.Name:
					case p.Capacity == fleet.Reserved:
						held += g
					default:
						rate += float64(g) * p.PricePerHour / float64(p.GPUsPerNode)
					}
				}
			}
		}
		if !tm.Budgeted || spent+(rate+node)*fleet.BudgetWindow.Hours() < tm.BurstBudgetPerDay {
			continue
		}
		pending, byTier := 0, map[string]int{}
		for _, l := range st.PendingTeams {
			if l.Team == tm.Name {
				pending += l.GPUs
				byTier[l.Tier] += l.GPUs
			}
		}
		share := int(tm.ReservedShare * float64(reserved))
		w := max(pending-max(share-held, 0), 0)
		withheld += w
		out.PendingGPUs -= w
		out.Scoped = slices.DeleteFunc(out.Scoped, func(d fleet.ScopedDemand) bool { return d.Team == tm.Name })
		// With tiers, from the team's lowest-ranked tiers first (its
		// share serves its highest first).
		for k := len(set.Tiers) - 1; k >= 0 && w > 0; k-- {
			name := set.Tiers[k].Name
			g := min(w, byTier[name])
			w -= g
			i := slices.IndexFunc(out.PendingTiers, func(l fleet.TierGPUs) bool { return l.Tier == name })
			if g > 0 && i >= 0 {
				out.PendingTiers = slices.Clone(out.PendingTiers)
				out.PendingTiers[i].GPUs -= g
			}
		}
	}
	return &out, withheld
}

// burstLaunches counts a plan's nodes launched in set's burst pools.
func burstLaunches(set *fleet.Settings, p planner.Plan) int {
	n := 0
	for _, a := range p.Actions {
		if pl := set.Pool(a.Pool); a.Kind == planner.Launch && pl != nil && pl.Capacity != fleet.Reserved {
			n += a.Count
		}
	}
	return n
}

// TestBudgetsHeld: over runs of generated traces of three teams, two with
// budgets most days exceed, no budgeted team's jobs cost more on burst
// capacity in a budget day (UTC) than its budget and one hour of the
// dearest burst node: the planner buys nothing for a team over budget,
// and the simulated scheduler starts none of its jobs on burst capacity
// and has those there checkpoint and leave. Each day's spend is summed
// here from the runs' starts and ends, the nodes they held and the
// pools' prices, not from the engine's books. No work is lost.
func TestBudgetsHeld(t *testing.T) {
	for seed := uint64(1); seed <= 3; seed++ {
		rng := rand.New(rand.NewPCG(seed, 13))
		jobs := teamJobs(rng, 600, 10*time.Minute, 130*time.Minute, []string{"vision", "nlp", "nlp", "speech", "speech"}, nil)
		set := fleet.DefaultSettings()
		set.Pools = []fleet.Pool{teamPool("res", fleet.Reserved, 8, 20, 2, 2), teamPool("od", fleet.OnDemand, 8, 55, 0, 30), teamPool("spot", fleet.Spot, 8, 25, 0, 4)}
		set.Teams = []fleet.Team{{Name: "vision", Budgeted: true, BurstBudgetPerDay: 150, ReservedShare: 0.5},
			{Name: "nlp", Budgeted: true, BurstBudgetPerDay: 400}}
		nodeHour := 55.0
		// spend[team][day] in dollars; runs the open runs' start and cost a second.
		spend := map[string]map[int64]float64{}
		type run struct {
			start int64
			rate  float64
		}
		runs := map[int32]run{}
		var start time.Time
		day := func(s int64) int64 { return start.Add(time.Duration(s)*time.Second).Unix() / 86400 }
		opt := Options{Policies: []string{"predictive"}, Seed: int64(seed), UnresponsiveJobs: -1}
		opt.started = func(e *engine, id int32) {
			start = e.opt.Start
			j := &e.jobs[id]
			r := run{start: e.now}
			left := j.gpus
			for _, ni := range j.nodes {
				n := e.nodes[ni]
				g := min(left, n.gpn)
				left -= g
				if p := e.pools[n.pool].spec; p.Capacity != fleet.Reserved {
					r.rate += float64(g) * p.PricePerHour / float64(p.GPUsPerNode) / 3600
				}
			}
			runs[id] = r
		}
		opt.stopped = func(e *engine, id int32) {
			r := runs[id]
			delete(runs, id)
			team := e.groups[byTeam].table.names[e.jobs[id].group[byTeam]]
			if spend[team] == nil {
				spend[team] = map[int64]float64{}
			}
			for s := r.start; s < e.now; {
				end := min(e.now, (day(s)+1)*86400-start.Unix())
				spend[team][day(s)] += r.rate * float64(end-s)
				s = end
			}
		}
		rep, err := Run(&set, jobsTrace(jobs...), opt)
		if err != nil {
			t.Fatal(err)
		}
		r := rep.Policies[0]
		if r.LostScaleInGPUHours != 0 || r.BudgetStops == 0 {
			t.Errorf("seed %d: %v GPU-hours lost, %d runs stopped for budgets; want none lost, some stopped", seed, r.LostScaleInGPUHours, r.BudgetStops)
		}
		reached := 0
		for _, tm := range set.Teams {
			for d, s := range spend[tm.Name] {
				if s > tm.BurstBudgetPerDay+nodeHour {
					t.Errorf("seed %d: team %s spent $%.2f on day %d, over its budget of $%.0f by more than a node-hour", seed, tm.Name, s, d, tm.BurstBudgetPerDay)
				}
				if s >= tm.BurstBudgetPerDay {
					reached++
				}
			}
		}
		if reached == 0 {
			t.Fatalf("seed %d: no budget was reached: the property was not exercised", seed)
		}
	}
}
