package simulate

import (
	"cmp"
	"fmt"
	"hash/fnv"
	"slices"
	"strconv"

	"github.com/fleetcast/autoscaler/trace"
	"github.com/fleetcast/autoscaler/usage"
)

// MaxLabelTeams bounds Options.LabelTeams.
const MaxLabelTeams = 1000

// TeamResult is one team's share of a policy's run. The teams of a Result
// add up to it: their CostUSD to the policy's cost (to the micro-dollar,
// usage.Micros), their WaitGPUHours to its waited GPU-hours and their
// UsedGPUHours to its useful work.
type TeamResult struct {
	// Team is the jobs' team: the trace's team column, or the seeded
	// label of Options.LabelTeams; usage.Unattributed for jobs with none.
	// Empty in a tier's row (Result.Tiers), which has Tier instead.
	Team string `json:"team,omitempty"`
	// Tier is the jobs' tier, in a tier's row (Result.Tiers).
	Tier string `json:"tier,omitempty"`
	// GPUTypes are the GPU types the jobs accept, in a row of
	// Result.GPUTypes: separated by '|', or AnyGPUType.
	GPUTypes string `json:"gpu_types,omitempty"`
	// Jobs counts the team's jobs.
	Jobs int `json:"jobs"`
	// UsedGPUHours is the team's useful work (work lost to a scale-in or
	// a reclaim, and redone, excluded), as the policy's gpu_hours_used.
	UsedGPUHours float64 `json:"gpu_hours_used"`
	// UsedUSD is that work priced at the price per GPU-hour of the nodes
	// it ran on (a reserved node's at its reservation's price). The oracle
	// runs no job on a node: its price is its cost per GPU-hour bought.
	UsedUSD float64 `json:"used_usd"`
	// IdleShareUSD is the team's share of the rest of the policy's cost
	// (nodes and reservations idle, nodes booting, work lost), shared back
	// in proportion to UsedUSD, as OpenCost's shareIdle does.
	IdleShareUSD float64 `json:"idle_share_usd"`
	// CostUSD is UsedUSD plus IdleShareUSD.
	CostUSD float64 `json:"cost_usd"`
	// The waits of the team's jobs from submission to first start
	// (nearest rank, usage.QuantilesOf), in seconds.
	WaitP50 float64 `json:"wait_p50_s"`
	WaitP95 float64 `json:"wait_p95_s"`
	WaitP99 float64 `json:"wait_p99_s"`
	// WaitGPUHours is every interval the team's jobs spent queued, times
	// their GPUs, as the policy's wait_gpu_hours.
	WaitGPUHours float64 `json:"wait_gpu_hours"`
	// With team budgets (fleet.Team), a team's row has what its jobs cost
	// on burst capacity (on-demand and spot, at the nodes' price per
	// GPU-hour): BurstUSD in the run and MaxDayBurstUSD in its dearest
	// budget day (UTC); a budgeted team's row also its budget, the days
	// the budget held it back (its spend, with what its jobs on burst
	// capacity would cost until they left, reached it), and the most its
	// spend went past it in a day.
	BurstUSD          float64  `json:"burst_usd,omitempty"`
	MaxDayBurstUSD    float64  `json:"max_day_burst_usd,omitempty"`
	BurstBudgetPerDay *float64 `json:"burst_budget_per_day,omitempty"`
	DaysHeld          int      `json:"days_held,omitempty"`
	MaxOverBudgetUSD  float64  `json:"max_over_budget_usd,omitempty"`
}

// teamTable is the team of each of a trace's jobs, the same for every
// policy of a run: read-only once made.
type teamTable struct {
	// names are the teams by index: by name, usage.Unattributed last.
	names []string
	// of is the team index of each trace job, in trace order.
	of []int32
}

// teamName is the label of team k (1-based) of n: team-01 .. team-16, or
// with as many digits as n has, at least two.
func teamName(k, n int) string {
	return fmt.Sprintf("team-%0*d", max(2, len(strconv.Itoa(n))), k)
}

// splitmix64 is the finalizer of Steele, Lea and Flood's SplitMix64: a
// bijection that mixes every bit of x into every bit of the result.
func splitmix64(x uint64) uint64 {
	x += 0x9e3779b97f4a7c15
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9
	x = (x ^ (x >> 27)) * 0x94d049bb133111eb
	return x ^ (x >> 31)
}

// labeller draws a team for a job from its ID and the seed, with Zipf
// weights: team k (of n) has weight 1/k.
type labeller struct {
	seed  uint64
	cum   []float64 // cum[k-1] = 1 + 1/2 + .. + 1/k
	names []string
}

func newLabeller(n int, seed int64) *labeller {
	l := &labeller{seed: uint64(seed), cum: make([]float64, n), names: make([]string, n)}
	h := 0.0
	for k := 1; k <= n; k++ {
		h += 1 / float64(k)
		l.cum[k-1] = h
		l.names[k-1] = teamName(k, n)
	}
	return l
}

// label is the team of the job with this ID: u, uniform in [0, 1), is the
// top 53 bits of splitmix64(seed XOR FNV-1a-64(id)) over 2^53, and the
// team is the first k with u*H(n) < H(k), H(k) = 1 + 1/2 + .. + 1/k.
func (l *labeller) label(id string) string {
	f := fnv.New64a()
	f.Write([]byte(id)) //nolint:errcheck // a hash does not fail
	u := float64(splitmix64(l.seed^f.Sum64())>>11) / (1 << 53)
	x := u * l.cum[len(l.cum)-1]
	k, _ := slices.BinarySearchFunc(l.cum, x, func(c, x float64) int {
		if c <= x {
			return -1
		}
		return 1
	})
	return l.names[min(k, len(l.names)-1)]
}

// newTeamTable is the team of each of tr's jobs: its own, else with label
// > 0 one of team-01 .. team-NN drawn from its ID and the seed (label),
// else usage.Unattributed. It is nil when no job has a team.
func newTeamTable(tr *trace.Trace, label int, seed int64) *teamTable {
	var lab *labeller
	if label > 0 {
		lab = newLabeller(label, seed)
	} else if !slices.ContainsFunc(tr.Jobs, func(j trace.Job) bool { return j.Team != "" }) {
		return nil
	}
	index := map[string]int32{}
	var names []string
	of := make([]int32, len(tr.Jobs))
	for i := range tr.Jobs {
		team := tr.Jobs[i].Team
		switch {
		case team != "":
		case lab != nil:
			team = lab.label(tr.Jobs[i].ID)
		default:
			team = usage.Unattributed
		}
		k, ok := index[team]
		if !ok {
			k = int32(len(names))
			index[team] = k
			names = append(names, team)
		}
		of[i] = k
	}
	// Number the teams by name, unattributed last.
	order := make([]int32, len(names))
	for i := range order {
		order[i] = int32(i)
	}
	slices.SortFunc(order, func(a, b int32) int {
		x, y := names[a], names[b]
		if (x == usage.Unattributed) != (y == usage.Unattributed) {
			if x == usage.Unattributed {
				return 1
			}
			return -1
		}
		return cmp.Compare(x, y)
	})
	rank := make([]int32, len(names))
	sorted := make([]string, len(names))
	for r, k := range order {
		rank[k] = int32(r)
		sorted[r] = names[k]
	}
	for i, k := range of {
		of[i] = rank[k]
	}
	return &teamTable{names: sorted, of: of}
}

// teamTally is what a run measured of one team, for splitTeams.
type teamTally struct {
	jobs     int
	usedSecs float64 // GPU-seconds of useful work
	used     usage.Micros
	waitSecs float64 // GPU-seconds queued
	waits    []float64
}

// splitTeams makes the teams' results: each team's used cost, and the rest
// of total (what the policy cost) shared back in proportion to it (to
// their jobs when nobody used anything: every job ran for no time), so
// that the teams' costs add up to total exactly.
func splitTeams(names []string, tallies []teamTally, total usage.Micros) []TeamResult {
	weights := make([]float64, len(tallies))
	var used usage.Micros
	for i, t := range tallies {
		weights[i] = float64(t.used)
		used += t.used
	}
	if used == 0 {
		for i, t := range tallies {
			weights[i] = float64(t.jobs)
		}
	}
	shares := usage.Apportion(total-used, weights)
	out := make([]TeamResult, len(tallies))
	for i, t := range tallies {
		q := usage.QuantilesOf(t.waits)
		out[i] = TeamResult{Team: names[i], Jobs: t.jobs, UsedGPUHours: t.usedSecs / 3600,
			UsedUSD: t.used.Dollars(), IdleShareUSD: shares[i].Dollars(), CostUSD: (t.used + shares[i]).Dollars(),
			WaitP50: q.P50, WaitP95: q.P95, WaitP99: q.P99, WaitGPUHours: t.waitSecs / 3600}
	}
	return out
}

// onNodes calls f with each node running job j holds and what it holds
// there, in thousandths of a GPU: all of it on one node (a share's part of
// its GPU, or its GPUs: a share rounded up to a whole GPU holds it); a
// wide job's node by node, whole nodes first.
func (e *engine) onNodes(j *job, f func(n *node, milli int)) {
	if len(j.nodes) == 1 {
		held := j.gpus * shareMilli
		if j.isShare() {
			held = int(j.milli)
		}
		f(e.nodes[j.nodes[0]], held)
		return
	}
	left := j.gpus
	for _, ni := range j.nodes {
		n := e.nodes[ni]
		g := min(left, n.gpn)
		left -= g
		f(n, g*shareMilli)
	}
}

// chargeRun counts kept seconds of a job's run, about to end, to its
// team's use of each pool its nodes are in (a wide job's GPUs node by
// node, whole nodes first).
func (e *engine) chargeRun(j *job, kept int64) {
	for g := range e.groups {
		if e.groups[g].used == nil || kept <= 0 {
			continue
		}
		row := e.groups[g].used[int(j.group[g])*len(e.pools):][:len(e.pools)]
		if len(j.nodes) == 1 { // its work: its ask (a share's, even rounded up)
			row[e.nodes[j.nodes[0]].pool] += kept * int64(j.ask)
			continue
		}
		e.onNodes(j, func(n *node, w int) { row[n.pool] += kept * int64(w) })
	}
}

// groupKind is a way the jobs are grouped: by team, by tier, or by the
// GPU types they accept.
type groupKind int

const (
	byTeam groupKind = iota
	byTier
	byType
	groupKinds
)

// groupBooks count, when the jobs have teams (or tiers), each group's
// useful work in each pool (used[group*len(pools) + pool]) and each
// group's time queued (wait), in thousandths of a GPU-second (a share's
// work is its share); nil without.
type groupBooks struct {
	table      *teamTable
	used, wait []int64
}

// groupResults are the run's teams or tiers (nil without), once it is
// over: each group's use of each pool at the pool's price per GPU-hour,
// its waits, and its share of the rest of cost, what the run cost.
func (e *engine) groupResults(g groupKind, cost float64) []TeamResult {
	b := &e.groups[g]
	t := b.table
	if b.used == nil {
		return nil
	}
	tallies := make([]teamTally, len(t.names))
	for i := range e.jobs {
		tallies[e.jobs[i].group[g]].jobs++
	}
	// One backing array for every team's waits.
	all := make([]float64, len(e.jobs))
	at := 0
	for k := range tallies {
		tallies[k].waits = all[at : at : at+tallies[k].jobs]
		at += tallies[k].jobs
	}
	for i := range e.jobs {
		j := &e.jobs[i]
		w := &tallies[j.group[g]].waits
		*w = append(*w, float64(j.first-j.submit))
	}
	for k := range tallies {
		row := b.used[k*len(e.pools):][:len(e.pools)]
		for pi, secs := range row {
			if secs == 0 {
				continue
			}
			p := &e.pools[pi].spec
			s := float64(secs) / shareMilli
			tallies[k].usedSecs += s
			tallies[k].used += usage.MicrosOf(s / 3600 * p.PricePerHour / float64(max(p.GPUsPerNode, 1)))
		}
		tallies[k].waitSecs = float64(b.wait[k]) / shareMilli
	}
	return splitTeams(t.names, tallies, usage.MicrosOf(cost))
}

// oracleTeams are the oracle's teams (nil without teams): it runs every
// job from its submission, so none waits, and packs GPUs perfectly rather
// than placing jobs on nodes, so each team's use is its share of the
// oracle's useful work (its GPU-hours, less its share of the unserved)
// priced at the oracle's cost per GPU-hour bought.
func oracleTeams(t *teamTable, tr *trace.Trace, r *Result) []TeamResult {
	if t == nil || len(t.of) != len(tr.Jobs) {
		return nil
	}
	tallies := make([]teamTally, len(t.names))
	var all float64
	for i := range tr.Jobs {
		k := t.of[i]
		tallies[k].jobs++
		var j job
		jobAsk(&j, &tr.Jobs[i], true)
		s := j.eqSeconds(secs(tr.Jobs[i].Duration)) // a share's at its share
		tallies[k].usedSecs += s
		all += s
	}
	price := 0.0
	if r.ProvisionedGPUHours > 0 {
		price = r.CostUSD / r.ProvisionedGPUHours
	}
	for k := range tallies {
		if all > 0 {
			tallies[k].usedSecs *= r.UsedGPUHours * 3600 / all
		}
		tallies[k].used = usage.MicrosOf(tallies[k].usedSecs / 3600 * price)
	}
	return splitTeams(t.names, tallies, usage.MicrosOf(r.CostUSD))
}

// checkLabelTeams checks Options.LabelTeams.
func checkLabelTeams(n int) error {
	if n < 0 || n > MaxLabelTeams {
		return fmt.Errorf("simulate: label teams %d: want from 0 (off) to %d teams", n, MaxLabelTeams)
	}
	return nil
}
