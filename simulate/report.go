package simulate

import (
	"cmp"
	"fmt"
	"strings"

	"io"
	"slices"
	"text/tabwriter"

	"github.com/fleetcast/autoscaler/fleet"
)

// Result is one policy's figures over a trace. The JSON names are the
// report's contract.
type Result struct {
	Policy string `json:"policy"`
	// CostUSD is everything the fleet was billed: nodes per second from
	// launch to termination, reservations for the whole run.
	CostUSD      float64 `json:"cost_usd"`
	CostVsOracle float64 `json:"cost_vs_oracle"`
	// ProvisionedGPUHours were bought (booting included); UsedGPUHours did
	// useful work (work redone after a loss excluded).
	ProvisionedGPUHours float64 `json:"gpu_hours_provisioned"`
	UsedGPUHours        float64 `json:"gpu_hours_used"`
	Utilization         float64 `json:"utilization"`
	// Waits are from submission to first start.
	WaitP50         float64 `json:"wait_p50_s"`
	WaitP95         float64 `json:"wait_p95_s"`
	WaitP99         float64 `json:"wait_p99_s"`
	JobsWaitingOver int     `json:"jobs_waiting_over_1h"`
	// WaitGPUHours is every interval a job spent queued, times its GPUs:
	// the first wait and the waits after a drain or a reclaim requeued it.
	WaitGPUHours float64 `json:"wait_gpu_hours"`
	// StrandedGPUHours is what the GPUs that shares of one GPU hold left
	// unused, over the run: fragments no whole-GPU job may take, and only
	// a share small enough may (0 without shares, or with
	// Options.WholeGPUs). UsedGPUHours counts a share's work at its share.
	StrandedGPUHours float64 `json:"gpu_hours_stranded,omitempty"`
	// LostGPUHours is work since the last checkpoint destroyed by
	// terminations, LostScaleInGPUHours plus LostReclaimGPUHours.
	LostGPUHours float64 `json:"lost_gpu_hours"`
	// LostScaleInGPUHours was destroyed by the policy's own terminations
	// of nodes with work on them (the drain rule keeps it at 0);
	// LostReclaimGPUHours by the cloud reclaiming spot nodes.
	LostScaleInGPUHours float64 `json:"lost_gpu_hours_scale_in"`
	LostReclaimGPUHours float64 `json:"lost_gpu_hours_reclaim"`
	// UnsafeTerminations counts the policy's terminations that destroyed
	// work.
	UnsafeTerminations int `json:"unsafe_terminations"`
	Launches           int `json:"launches"`
	Drains             int `json:"drains"`
	// MovedJobs counts the runs a checkpoint asked for (by a drain, or a
	// spot notice) ended: each job requeued with nothing lost, to restart
	// elsewhere (JSON only; the simulator prices no restart).
	MovedJobs int `json:"moved_jobs"`
	// Preempted counts the runs of best-effort jobs (a tier whose waiting
	// is worth nothing) the simulated scheduler asked to checkpoint and
	// stop to make room for another tier's job; each is in MovedJobs once
	// its checkpoint is durable.
	Preempted int `json:"preempted,omitempty"`
	// Reclaimed counts the runs the simulated scheduler asked to
	// checkpoint and stop to give a team's share of the reservation back
	// (fleet.Team.ReservedShare) while the team had jobs queued; each is
	// in MovedJobs once its checkpoint is durable.
	Reclaimed int `json:"reclaimed,omitempty"`
	// BudgetStops counts the runs on burst capacity the simulated
	// scheduler asked to checkpoint and stop because their team had spent
	// its burst budget for the day (fleet.Team.BurstBudgetPerDay); each is
	// in MovedJobs once its checkpoint is durable.
	BudgetStops int `json:"budget_stops,omitempty"`
	// Abandoned counts the jobs of tiers nothing is bought for (their
	// waiting worth nothing) left queued when every other job had ended and
	// the fleet held no node: nothing would ever run them, and the run ends
	// there. Their waiting until then is in WaitGPUHours, and the work they
	// did not do in AbandonedGPUHours.
	Abandoned         int     `json:"abandoned,omitempty"`
	AbandonedGPUHours float64 `json:"abandoned_gpu_hours,omitempty"`
	// UnservedGPUHours is demand the oracle left unserved because nothing
	// the pools and limits allow could hold it (its lower bound leaves it
	// out); 0 for the other policies, which queue such demand and serve it
	// later.
	UnservedGPUHours float64 `json:"unserved_gpu_hours"`
	// ReservedGPUs is the largest reservation of the run.
	ReservedGPUs int `json:"reserved_gpus"`
	// LimitedCycles counts the control cycles in which a fleet limit
	// (limits.max_gpus, limits.max_spend_per_hour) held a launch back; 0
	// means the limits never bound.
	LimitedCycles int `json:"limited_cycles"`
	// Pools are each pool's share of the cost and of the GPU-hours
	// bought, in the config's order; none for the oracle, whose bound is
	// not split by pool.
	Pools []PoolUse `json:"pools,omitempty"`
	// Teams split the run among the jobs' teams, when the trace has teams
	// or Options.LabelTeams labels them: by team name, usage.Unattributed
	// (jobs with none) last. Their cost_usd add up to CostUSD, their
	// wait_gpu_hours to WaitGPUHours.
	Teams []TeamResult `json:"teams,omitempty"`
	// Tiers split the run among the jobs' tiers the same way, by rank,
	// when the config has tiers (Options.Tiers); each row's Tier names it.
	Tiers []TeamResult `json:"tiers,omitempty"`
	// GPUTypes split it the same way among the sets of GPU types the
	// jobs accept, when some jobs accept some types only (trace.Job.GPUTypes):
	// each row's GPUTypes names its set, AnyGPUType the jobs of any.
	GPUTypes []TeamResult `json:"gpu_types,omitempty"`

	// Capacity is the GPUs bought (reservations and nodes), sampled every
	// Report.Demand step from the trace start; for the picture.
	Capacity []float64 `json:"-"`

	waits []float64
}

// PoolUse is what one pool cost in a run.
type PoolUse struct {
	Pool                string  `json:"pool"`
	CostUSD             float64 `json:"cost_usd"`
	ProvisionedGPUHours float64 `json:"gpu_hours_provisioned"`
}

// Report is a simulation's outcome: one Result per policy.
type Report struct {
	Trace string  `json:"trace"`
	Jobs  int     `json:"jobs"`
	Days  float64 `json:"days"`
	Seed  int64   `json:"seed"`
	// Reservations is how reservations were held: "configured" or
	// "advised"; HeadroomGPUs is the headroom policy's buffer.
	Reservations string `json:"reservations"`
	HeadroomGPUs int    `json:"headroom_gpus"`
	// HeadroomPlaceholders is the size of its placeholders: "node" or "gpu".
	HeadroomPlaceholders string `json:"headroom_placeholders"`
	// LabelTeams is Options.LabelTeams: how many teams the jobs without
	// one were labelled into (0: none were).
	LabelTeams int `json:"label_teams,omitempty"`
	// LabelTiers is Options.LabelTiers: the shares the jobs without a
	// tier were labelled with (none: none were).
	LabelTiers []TierShare `json:"label_tiers,omitempty"`
	Policies   []Result    `json:"policies"`
	// Demand is the trace's demand if every job ran from its submit, at the
	// sampling step of the policies' Capacity; for the picture.
	Demand fleet.Series `json:"-"`
}

// finish derives the figures that follow from the others.
func (r *Result) finish() {
	if r.ProvisionedGPUHours > 0 {
		r.Utilization = r.UsedGPUHours / r.ProvisionedGPUHours
	}
	slices.Sort(r.waits)
	r.WaitP50, r.WaitP95, r.WaitP99 = percentile(r.waits, 0.50), percentile(r.waits, 0.95), percentile(r.waits, 0.99)
	r.JobsWaitingOver = len(r.waits) - searchAbove(r.waits, 3600)
}

// percentile is the nearest-rank q percentile of sorted xs; 0 for none.
func percentile(xs []float64, q float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	i := int(q*float64(len(xs))+0.999999) - 1
	return xs[min(max(i, 0), len(xs)-1)]
}

// searchAbove is the index of the first value above v in sorted xs.
func searchAbove(xs []float64, v float64) int {
	i, _ := slices.BinarySearchFunc(xs, v, func(x, t float64) int {
		if x <= t {
			return -1
		}
		return 1
	})
	return i
}

// WriteTable writes the report as a table, one row per policy.
func (r *Report) WriteTable(w io.Writer) error {
	fmt.Fprintf(w, "trace %s: %d jobs over %.1f days, seed %d; reservations %s, headroom %d GPUs in %s-wide placeholders\n\n", r.Trace, r.Jobs, r.Days, r.Seed, r.Reservations, r.HeadroomGPUs, r.HeadroomPlaceholders)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "policy\tcost $\tvs oracle\tGPU-h bought\tGPU-h used\tutil\twait GPU-h\tp50\tp95\tp99\t>1h\tlost GPU-h\tscale-in\treclaim\tunsafe\tlaunches\tdrains\treserved GPUs\tlimited\t")
	for _, p := range r.Policies {
		fmt.Fprintf(tw, "%s\t%.0f\t%.3f\t%.0f\t%.0f\t%.1f%%\t%.0f\t%s\t%s\t%s\t%d\t%.1f\t%.1f\t%.1f\t%d\t%d\t%d\t%d\t%d\t\n",
			p.Policy, p.CostUSD, p.CostVsOracle, p.ProvisionedGPUHours, p.UsedGPUHours, 100*p.Utilization,
			p.WaitGPUHours, waitText(p.WaitP50), waitText(p.WaitP95), waitText(p.WaitP99), p.JobsWaitingOver,
			p.LostGPUHours, p.LostScaleInGPUHours, p.LostReclaimGPUHours, p.UnsafeTerminations, p.Launches, p.Drains, p.ReservedGPUs, p.LimitedCycles)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if err := r.writeGroups(w, byTier); err != nil {
		return err
	}
	for _, p := range r.Policies {
		if p.Preempted > 0 || p.Abandoned > 0 {
			fmt.Fprintf(w, "%s: %d best-effort run(s) preempted (a checkpoint, then the queue); %d job(s) abandoned, %.0f GPU-h of work: queued at the end with nothing to run them\n",
				p.Policy, p.Preempted, p.Abandoned, p.AbandonedGPUHours)
		}
	}
	if err := r.writeGroups(w, byTeam); err != nil {
		return err
	}
	if err := r.writeGroups(w, byType); err != nil {
		return err
	}
	r.writeStranded(w)
	return r.writeBudgets(w)
}

// writeStranded writes, when shares of one GPU left some unused, each
// policy's GPU-hours the GPUs that shares held left unused.
func (r *Report) writeStranded(w io.Writer) {
	if !slices.ContainsFunc(r.Policies, func(p Result) bool { return p.StrandedGPUHours > 0 }) {
		return
	}
	fmt.Fprintf(w, "\nshares of one GPU: GPU-h used counts a share's work at its share; stranded: what the GPUs that shares held left unused\n")
	for _, p := range r.Policies {
		if p.StrandedGPUHours > 0 {
			fmt.Fprintf(w, "%s: %.0f GPU-h stranded (%.1f%% of the GPU-h bought)\n", p.Policy, p.StrandedGPUHours, 100*p.StrandedGPUHours/p.ProvisionedGPUHours)
		}
	}
}

// writeBudgets writes, with team budgets, each policy's budgeted teams:
// what their jobs cost on burst capacity in the run and in the dearest
// day, the budget, the days their spend reached it and the most it went
// past it in a day.
func (r *Report) writeBudgets(w io.Writer) error {
	budgeted := func(t TeamResult) bool { return t.BurstBudgetPerDay != nil }
	if !slices.ContainsFunc(r.Policies, func(p Result) bool { return slices.ContainsFunc(p.Teams, budgeted) }) {
		return nil
	}
	fmt.Fprintf(w, "\nburst budgets: a team's jobs on on-demand and spot capacity at the nodes' price per GPU-hour, by budget day (UTC); days held: days its budget kept its jobs off burst capacity (the scheduler honours budgets in every policy; only predictive scaling also buys nothing for a team held)\n\n")
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "policy\tteam\tbudget $/day\tburst $\tdearest day $\tdays held\tmost over $\twait GPU-h\t\n")
	for _, p := range r.Policies {
		name := p.Policy
		for _, t := range p.Teams {
			if budgeted(t) {
				fmt.Fprintf(tw, "%s\t%s\t%.0f\t%.0f\t%.0f\t%d\t%.0f\t%.0f\t\n", name, t.Team, *t.BurstBudgetPerDay, t.BurstUSD, t.MaxDayBurstUSD,
					t.DaysHeld, t.MaxOverBudgetUSD, t.WaitGPUHours)
				name = ""
			}
		}
	}
	return tw.Flush()
}

// maxTableTeams is how many teams a policy's rows of the table show, the
// costliest first; the rest are summed in one row (the JSON has them all).
const maxTableTeams = 20

// writeGroups writes, when the policies have tiers (or teams), each
// policy's split among them: the policy's own figures ("all"), then its
// tiers by rank (its teams, the costliest first).
func (r *Report) writeGroups(w io.Writer, g groupKind) error {
	rows := func(p *Result) []TeamResult {
		switch g {
		case byTier:
			return p.Tiers
		case byType:
			return p.GPUTypes
		}
		return p.Teams
	}
	if !slices.ContainsFunc(r.Policies, func(p Result) bool { return len(rows(&p)) > 0 }) {
		return nil
	}
	word, labelled := "team", ""
	switch {
	case g == byType:
		word = "GPU types"
	case g == byTier:
		word = "tier"
		if len(r.LabelTiers) > 0 {
			var parts []string
			for _, s := range r.LabelTiers {
				parts = append(parts, fmt.Sprintf("%s %.0f%%", s.Tier, 100*s.Share))
			}
			labelled = fmt.Sprintf(" (jobs without a tier labelled from the seed: %s)", strings.Join(parts, ", "))
		}
	case r.LabelTeams > 0:
		labelled = fmt.Sprintf(" (jobs without a team labelled into %d teams from the seed)", r.LabelTeams)
	}
	fmt.Fprintf(w, "\nby %s%s: used $ is a %s's work at the price per GPU-hour of the nodes it ran on; idle $ is the rest of the cost (idle and booting capacity, lost work) shared in proportion to used $; waits from submission to first start\n\n", word, labelled, word)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "policy\t%s\tjobs\tGPU-h used\tused $\tidle $\tcost $\tshare\twait GPU-h\tp50\tp95\tp99\t\n", word)
	row := func(policy string, t TeamResult, of float64, waits bool) {
		share := "-"
		if of > 0 {
			share = fmt.Sprintf("%.1f%%", 100*t.CostUSD/of)
		}
		p50, p95, p99 := "-", "-", "-"
		if waits {
			p50, p95, p99 = waitText(t.WaitP50), waitText(t.WaitP95), waitText(t.WaitP99)
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%.0f\t%.0f\t%.0f\t%.0f\t%s\t%.0f\t%s\t%s\t%s\t\n", policy, t.Team+t.Tier+t.GPUTypes, t.Jobs, t.UsedGPUHours,
			t.UsedUSD, t.IdleShareUSD, t.CostUSD, share, t.WaitGPUHours, p50, p95, p99)
	}
	for _, p := range r.Policies {
		groups := rows(&p)
		if len(groups) == 0 {
			continue
		}
		all := TeamResult{Team: "all", UsedGPUHours: p.UsedGPUHours, CostUSD: p.CostUSD, WaitGPUHours: p.WaitGPUHours,
			WaitP50: p.WaitP50, WaitP95: p.WaitP95, WaitP99: p.WaitP99}
		for _, t := range groups {
			all.Jobs += t.Jobs
			all.UsedUSD += t.UsedUSD
			all.IdleShareUSD += t.IdleShareUSD
		}
		row(p.Policy, all, p.CostUSD, true)
		groups = slices.Clone(groups)
		if g == byTeam {
			slices.SortStableFunc(groups, func(a, b TeamResult) int { return cmp.Compare(b.CostUSD, a.CostUSD) })
		}
		for i, t := range groups {
			if i == maxTableTeams && len(groups) > maxTableTeams+1 {
				rest := TeamResult{Team: fmt.Sprintf("%d more", len(groups)-i)}
				for _, t := range groups[i:] {
					rest.Jobs += t.Jobs
					rest.UsedGPUHours += t.UsedGPUHours
					rest.UsedUSD += t.UsedUSD
					rest.IdleShareUSD += t.IdleShareUSD
					rest.CostUSD += t.CostUSD
					rest.WaitGPUHours += t.WaitGPUHours
				}
				row("", rest, p.CostUSD, false)
				break
			}
			row("", t, p.CostUSD, true)
		}
	}
	return tw.Flush()
}

func waitText(s float64) string {
	switch {
	case s < 120:
		return fmt.Sprintf("%.0fs", s)
	case s < 7200:
		return fmt.Sprintf("%.0fm", s/60)
	}
	return fmt.Sprintf("%.1fh", s/3600)
}
