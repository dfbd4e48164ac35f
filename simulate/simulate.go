// Package simulate replays a GPU workload trace through simulated fleets,
// one per policy, and reports what each cost, how long jobs waited and how
// much work was lost. It is how users decide to trust the autoscaler and
// how every change to it is measured.
//
// The simulation is a discrete-event model: nodes in the config's pools,
// each with its GPUs, lead time, price (billed per second; reservations
// billed for the whole run) and the simulated region's capacity and
// capacity errors (providers/sim.Settings.Grant); a first-come-first-served
// scheduler with backfill (the earliest queued job that fits starts; a job
// wider than a node takes whole empty nodes; single-node jobs go to the
// node with the fewest free GPUs that fits); jobs that checkpoint every
// checkpoint interval and lose the work since their last checkpoint when
// their node is removed under them, then requeue in their original order.
// These periodic checkpoints are instantaneous.
//
// A drain (and a spot notice, which the predictive policy's agents pass on
// as one) stops new work on a node and asks its jobs to checkpoint. A
// checkpoint asked for takes Options.CheckpointDuration to be durable; the
// job works on meanwhile, then stops with nothing lost and requeues. A
// share of jobs (Options.UnresponsiveJobs, drawn per job from the seed)
// ignore the request: they run on and checkpoint only on their own
// schedule, so a drained node holding one is never confirmed, and the
// planner cancels the drain at drain.timeout. A checkpoint still being
// written when its drain is cancelled completes all the same (the job was
// signalled) and the job stops and requeues. Work lost is split by cause:
// scale-in (the policy terminated a node with work on it; the drain rule
// keeps it at 0 for predictive) and reclaim (the cloud took a spot node
// with work on it: before the checkpoints its notice asked for were
// durable, from jobs that ignored the notice, or under a policy that does
// not act on notices).
//
// Every policy holds the configured reservations (each reserved pool's
// max) for the whole run, their nodes running from the start, and keeps to
// the same limits (pool max, limits.max_gpus, limits.max_spend_per_hour).
// With Options.Reservations "advised", the predictive policy may grow the
// cheapest reservation as the planner advises, and the oracle takes the
// hindsight-best reservation that could grow as it does (see Advised).
//
// Policies:
//   - static: the reservations and on-demand nodes for the rest of the
//     trace's peak, from start to end;
//   - reactive: the Kubernetes Cluster Autoscaler's published defaults;
//   - headroom: reactive plus a buffer of free GPUs kept as whole empty
//     nodes (the overprovisioning practice);
//   - predictive: this project's planner and forecaster, every control
//     interval;
//   - perfect (only when asked for): the predictive planner fed the true
//     future demand, an ablation;
//   - oracle: the clairvoyant lower bound, computed from the demand curve.
//
// Everything is deterministic for the seed.
package simulate

import (
	"fmt"
	"math"
	"slices"
	"sync"
	"time"

	"github.com/fleetcast/autoscaler/fleet"
	"github.com/fleetcast/autoscaler/loop"
	"github.com/fleetcast/autoscaler/providers/sim"
	"github.com/fleetcast/autoscaler/trace"
)

// Policies are the policies a simulation can run, in report order.
var Policies = []string{"static", "reactive", "headroom", "predictive", "perfect", "oracle"}

// DefaultPolicies are the policies run when Options.Policies is empty:
// every policy but the perfect ablation.
var DefaultPolicies = []string{"static", "reactive", "headroom", "predictive", "oracle"}

// The reservation modes of Options.Reservations.
const (
	// Configured: every policy, the oracle included, holds exactly the
	// configured reservations for the whole run.
	Configured = fleet.ReservationsConfigured
	// Advised evaluates the baseline advice: the predictive policy makes
	// its first commitment after Options.AdviceAfter of history, then may
	// grow it (never shrink it) every 30 days; the oracle takes, from
	// AdviceAfter on and at the same cadence, the never-shrinking
	// reservation that costs least in hindsight (a fixed size when that is
	// best; a fixed size alone would not bound a policy that may grow).
	// Both are billed from each commitment to the end of the run.
	Advised = fleet.ReservationsAdvised
)

// The runtime estimates of Options.RuntimeEstimates.
const (
	EstimatesNone   = "none"
	EstimatesExact  = "exact"
	EstimatesLimits = "limits"
)

// RuntimeEstimateModes are the values Options.RuntimeEstimates takes.
var RuntimeEstimateModes = []string{EstimatesNone, EstimatesExact, EstimatesLimits}

// Options tune a simulation. Zero values take the defaults.
type Options struct {
	// Seed makes capacity errors reproducible.
	Seed int64
	// Interval is the control interval of every policy but the oracle;
	// default controller.interval's. Fleet is the fleet's name, which the
	// predictive and perfect policies' launches are tagged with; default
	// controller.fleet's.
	Interval time.Duration
	Fleet    string
	// CheckpointInterval is how often jobs checkpoint unless the trace says;
	// default 30 minutes.
	CheckpointInterval time.Duration
	// SpotInterruptionsPerHour is the rate at which the cloud reclaims each
	// spot node (per node-hour, exponential); 0 for none. SpotNotice is the
	// warning it gives first (default 2 minutes, as on AWS).
	SpotInterruptionsPerHour float64
	SpotNotice               time.Duration
	// CheckpointDuration is how long a checkpoint that a drain (or a spot
	// notice) asks for takes to be durable; default 2 minutes, negative
	// for at once. Periodic checkpoints are instantaneous.
	CheckpointDuration time.Duration
	// UnresponsiveJobs is the share of jobs, at most 1, that ignore drains
	// and checkpoint only every checkpoint interval; default 0.02,
	// negative for none.
	UnresponsiveJobs float64
	// Policies to run; default DefaultPolicies. The oracle always runs:
	// the others are measured against it.
	Policies []string
	// Reservations is Configured (the default) or Advised; AdviceAfter is
	// the history the advised reservation waits for (default 14 days).
	Reservations string
	AdviceAfter  time.Duration
	// HeadroomGPUs is the headroom policy's buffer of free GPUs; default
	// 128, negative for none (the headroom policy is then reactive).
	HeadroomGPUs int
	// HeadroomPlaceholders is the size of the headroom policy's
	// placeholders: fleet.PlaceholdersNode (the default: as wide as a
	// node, so the buffer is whole empty nodes) or fleet.PlaceholdersGPU
	// (one GPU each: the buffer also fills busy nodes' fragments).
	HeadroomPlaceholders string
	// PerfectMargin is what the perfect policy adds to the true demand, as
	// a share (0.05: 5% more); default 0.
	PerfectMargin float64
	// FrontierPerfect are the margins RunFrontier runs the perfect
	// ablation at, each as PerfectMargin; none by default.
	FrontierPerfect []float64
	// AnnounceShare is the share of jobs, from 0 (the default) to 1, that
	// a scheduler announces AnnounceAhead before they are submitted
	// (default 30 minutes): the predictive and perfect policies see them
	// as announced demand (fleet.State.Announced), with the job's GPUs and
	// duration; the others cannot use announcements. Which jobs are
	// announced is drawn from the seed, the same jobs for every policy.
	AnnounceShare float64
	AnnounceAhead time.Duration
	// RuntimeEstimates is what the scheduler tells of each running job's
	// end (fleet.Job.ExpectedEnd, which the predictive and perfect
	// policies' planner reads as a hint): EstimatesNone (the default),
	// EstimatesExact (its true end) or EstimatesLimits (a time limit: the
	// job's true length times 1 + e^N(0,1), drawn per job from the seed,
	// the median 2x, never less than the truth; a requeued run gets it
	// anew, as a scheduler gives it).
	RuntimeEstimates string
	// LabelTeams, when above 0, gives each job the trace leaves without a
	// team one of team-01 .. team-NN (N = LabelTeams, at most
	// MaxLabelTeams), drawn from its ID and Seed with Zipf weights (team
	// k's weight 1/k), the same for every policy and every run of a seed
	// (docs/simulate.md gives the rule); 0, the default, labels none.
	// With teams, each Result splits its cost and waiting among them
	// (Result.Teams).
	LabelTeams int
	// teams is the team of each job, made by resolve; nil when no job has
	// one.
	teams *teamTable
	// LabelTiers, when set, gives each job the trace leaves without a
	// tier one of the config's tiers, drawn from its ID and Seed with
	// these shares (LabelTier; DefaultLabelTiers are the examples'), the
	// same for every policy and every run of a seed. With the config's
	// tiers (fleet.Settings.Tiers), each Result splits its cost and
	// waiting among them (Result.Tiers), and the simulated scheduler
	// starts a higher tier's queued jobs first.
	LabelTiers []TierShare
	// Untiered plans as if the config had no tiers (the comparison for
	// tiered provisioning): the predictive and perfect policies provision
	// for all demand alike, at forecast.wait_value_per_gpu_hour, and every
	// job runs on any capacity type; the scheduler still starts the higher
	// tiers' jobs first and preempts the zero-value tiers', and the
	// reactive and headroom policies still buy nothing for those.
	Untiered bool
	// WholeGPUs rounds each job's share of one GPU (trace.Job.Milli) up to
	// a whole GPU, as a fleet that does not share GPUs runs it (the
	// comparison for sharing); the jobs' work and waiting are still
	// counted at their share. By default shares are honoured: the
	// simulated scheduler places them on GPUs other shares hold part of
	// (gpushare.go).
	WholeGPUs bool
	// IgnoreGPUTypes runs every job on any GPU type, whatever types it
	// accepts (trace.Job.GPUTypes): the comparison for the constraints.
	IgnoreGPUTypes bool
	// SharePlacement is how the simulated scheduler places shares of one
	// GPU: PlaceBestFit (the default, "") or PlaceFragmentation.
	SharePlacement string
	// tiers is the tier of each job, made by resolve; nil without tiers.
	// tierSpecs are the config's tiers (fleet.Settings.Tiers), by rank.
	tiers     *teamTable
	tierSpecs []fleet.Tier
	// types are the GPU types each job accepts (newTypeTable); nil when
	// every job accepts any.
	types *teamTable
	// started and stopped, for tests, are called as each job's run
	// starts, its nodes taken, and as it ends, its nodes not yet given
	// back, with the engine as it then is.
	started, stopped func(e *engine, id int32)
	// ticked, for tests, is called at each control tick, before the
	// policy's, with the engine as it then is.
	ticked func(e *engine)
	// teamSpecs are the config's teams (fleet.Settings.Teams): their
	// budgets, which the books of each policy's run keep (budgetBook).
	teamSpecs []fleet.Team
	// fixedCommit, with advised reservations, replaces the advice with a
	// reservation of fixedNodes committed at the first commitment and
	// never grown (RunAdviceCheck).
	fixedCommit bool
	fixedNodes  int
	// listLag, for tests, is how long the simulated region takes to list
	// a node launched for the predictive and perfect policies (its group
	// owes it meanwhile, as an Auto Scaling group's listing trails its
	// desired capacity); 0 lists it at once.
	listLag time.Duration
	// keyedCloud, for tests, makes the simulated region's groups keyed (as
	// EC2 instances from a launch template) for those policies.
	keyedCloud bool
	// Start is the wall-clock time of the trace's offset 0, for the
	// forecaster's daily and weekly cycles; default the trace's own start,
	// else Monday 2026-01-05 00:00 UTC.
	Start time.Time

	// Progress, if set, is called as each policy's simulation advances,
	// with the share of the trace's jobs done (0 to 1), from the policy's
	// own goroutine.
	Progress func(policy string, done float64)
	// Cycles, if set, is given every cycle of the predictive and perfect
	// policies' decision loop, from the policy's own goroutine: what it
	// observed, forecast and decided, and what became of each action.
	// The result's state is reused: copy what is kept.
	Cycles func(policy string, r loop.CycleResult)

	// sample is the step at which capacity is sampled for the picture.
	sample time.Duration
}

// sampleStep is the sampling step for a trace's picture: about 2,000
// points, in whole minutes.
func sampleStep(span time.Duration) time.Duration {
	return max(time.Minute, (span / 2000).Truncate(time.Minute))
}

// CapacityWarning says when the trace's peak demand exceeds what the
// config's pools can hold; "" when they can hold it.
func CapacityWarning(set *fleet.Settings, tr *trace.Trace) string {
	peak, room := tr.PeakGPUs(), set.MaxFleetGPUs()
	if peak <= room {
		return ""
	}
	return fmt.Sprintf("the trace's peak demand is %d GPUs, more than the %d GPUs the config's pools can hold: jobs will queue and the oracle leaves the excess unserved", peak, room)
}

// prepare checks that the config's pools can run the trace at all and
// resolves the options, for Run and RunFrontier.
func prepare(set *fleet.Settings, tr *trace.Trace, opt Options) (Options, error) {
	if len(tr.Jobs) == 0 {
		return Options{}, fmt.Errorf("simulate: trace %s has no jobs", tr.Name)
	}
	if err := checkJobsFit(set, tr); err != nil {
		return Options{}, err
	}
	return opt.resolve(set, tr)
}

// Run simulates the trace under each policy and reports them side by side.
func Run(set *fleet.Settings, tr *trace.Trace, opt Options) (*Report, error) {
	opt, err := prepare(set, tr, opt)
	if err != nil {
		return nil, err
	}
	want := opt.Policies
	if len(want) == 0 {
		want = DefaultPolicies
	}
	for _, name := range want {
		if !slices.Contains(Policies, name) {
			return nil, fmt.Errorf("simulate: unknown policy %q, want one of %v", name, Policies)
		}
	}
	rep := &Report{Trace: tr.Name, Jobs: len(tr.Jobs), Days: tr.Span().Hours() / 24, Seed: opt.Seed,
		Reservations: opt.Reservations, HeadroomGPUs: max(0, opt.HeadroomGPUs), HeadroomPlaceholders: opt.HeadroomPlaceholders,
		LabelTeams: opt.LabelTeams, LabelTiers: opt.LabelTiers}
	rep.Demand = tr.Demand(opt.sample)
	rep.Demand.Start = opt.Start
	results := make([]Result, len(Policies))
	errs := make([]error, len(Policies))
	var wg sync.WaitGroup
	for i, name := range Policies {
		if name != "oracle" && !slices.Contains(want, name) {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			results[i], errs[i] = runPolicy(set, tr, opt, name)
		}()
	}
	wg.Wait()
	var oracleCost float64
	for i, name := range Policies {
		if errs[i] != nil {
			return nil, fmt.Errorf("simulate: policy %s: %w", name, errs[i])
		}
		if name == "oracle" {
			oracleCost = results[i].CostUSD
		}
	}
	for i, name := range Policies {
		if !slices.Contains(want, name) {
			continue
		}
		r := results[i]
		if oracleCost > 0 {
			r.CostVsOracle = r.CostUSD / oracleCost
		}
		rep.Policies = append(rep.Policies, r)
	}
	return rep, nil
}

// MaxHeadroomGPUs bounds the headroom policy's buffer, so that its
// arithmetic cannot overflow; a buffer larger than the pools can hold is
// kept as far as they (and the limits) allow.
const MaxHeadroomGPUs = 1 << 24

// resolve fills in the defaults of the options left zero (the simulate
// and controller blocks' defaults: fleet.DefaultSimulateSettings and
// fleet.DefaultControllerSettings) and checks the rest.
func (opt Options) resolve(set *fleet.Settings, tr *trace.Trace) (Options, error) {
	def, ctl := fleet.DefaultSimulateSettings(), fleet.DefaultControllerSettings()
	if opt.Interval <= 0 {
		opt.Interval = ctl.Interval
	}
	if opt.Fleet == "" {
		opt.Fleet = ctl.Fleet
	}
	if opt.Interval < time.Second {
		return Options{}, fmt.Errorf("simulate: control interval %v is under the simulation's one-second resolution", opt.Interval)
	}
	if opt.SpotNotice <= 0 {
		opt.SpotNotice = def.SpotNotice
	}
	if opt.CheckpointInterval <= 0 {
		opt.CheckpointInterval = def.CheckpointInterval
	}
	if opt.CheckpointDuration == 0 {
		opt.CheckpointDuration = def.CheckpointDuration
	}
	switch u := opt.UnresponsiveJobs; {
	case u == 0:
		opt.UnresponsiveJobs = def.UnresponsiveJobs
	case u > 1 || math.IsNaN(u):
		return Options{}, fmt.Errorf("simulate: unresponsive jobs %v: want a share of jobs from 0 to 1", u)
	}
	switch opt.Reservations {
	case "":
		opt.Reservations = def.Reservations
	case Configured, Advised:
	default:
		return Options{}, fmt.Errorf("simulate: reservations %q: want one of %v", opt.Reservations, fleet.ReservationModes)
	}
	if opt.AdviceAfter <= 0 {
		opt.AdviceAfter = def.AdviceAfter
	}
	switch h := opt.HeadroomGPUs; {
	case h == 0:
		opt.HeadroomGPUs = def.HeadroomGPUs
	case h < 0:
		opt.HeadroomGPUs = -1
	}
	switch opt.HeadroomPlaceholders {
	case "":
		opt.HeadroomPlaceholders = def.HeadroomPlaceholders
	case fleet.PlaceholdersNode, fleet.PlaceholdersGPU:
	default:
		return Options{}, fmt.Errorf("simulate: headroom placeholders %q: want one of %v", opt.HeadroomPlaceholders, fleet.PlaceholderSizes)
	}
	if opt.HeadroomGPUs > MaxHeadroomGPUs {
		return Options{}, fmt.Errorf("simulate: a headroom of %d GPUs: want at most %d", opt.HeadroomGPUs, MaxHeadroomGPUs)
	}
	switch opt.RuntimeEstimates {
	case "":
		opt.RuntimeEstimates = EstimatesNone
	case EstimatesNone, EstimatesExact, EstimatesLimits:
	default:
		return Options{}, fmt.Errorf("simulate: runtime estimates %q: want one of %v", opt.RuntimeEstimates, RuntimeEstimateModes)
	}
	if a := opt.AnnounceShare; !(a >= 0 && a <= 1) {
		return Options{}, fmt.Errorf("simulate: announce share %v: want a share of jobs from 0 to 1", a)
	}
	switch {
	case opt.AnnounceAhead == 0:
		opt.AnnounceAhead = 30 * time.Minute
	case opt.AnnounceAhead < 0:
		return Options{}, fmt.Errorf("simulate: announce ahead %s: want a duration above 0", opt.AnnounceAhead)
	}
	for _, m := range append([]float64{opt.PerfectMargin}, opt.FrontierPerfect...) {
		if m < 0 || math.IsNaN(m) || math.IsInf(m, 0) {
			return Options{}, fmt.Errorf("simulate: perfect margin %v: want a share of demand >= 0", m)
		}
	}
	if opt.Start.IsZero() {
		opt.Start = tr.Start
		if opt.Start.IsZero() {
			opt.Start = time.Date(2026, 1, 5, 0, 0, 0, 0, time.UTC)
		}
	}
	if err := checkLabelTeams(opt.LabelTeams); err != nil {
		return Options{}, err
	}
	if opt.teams == nil || len(opt.teams.of) != len(tr.Jobs) {
		opt.teams = newTeamTable(tr, opt.LabelTeams, opt.Seed)
	}
	if err := checkLabelTiers(opt.LabelTiers, set.Tiers); err != nil {
		return Options{}, err
	}
	if opt.tiers == nil || len(opt.tiers.of) != len(tr.Jobs) {
		opt.tiers = newTierTable(tr, set.Tiers, opt.LabelTiers, opt.Seed)
	}
	opt.tierSpecs = set.Tiers
	if opt.IgnoreGPUTypes {
		opt.types = nil
	} else if opt.types == nil || len(opt.types.of) != len(tr.Jobs) {
		opt.types = newTypeTable(tr)
	}
	opt.teamSpecs = set.Teams
	if err := checkTiersRun(set, opt); err != nil {
		return Options{}, err
	}
	if err := checkTypesRun(set.Pools, tr); err != nil && !opt.IgnoreGPUTypes {
		return Options{}, err
	}
	switch opt.SharePlacement {
	case "", PlaceBestFit, PlaceFragmentation:
	default:
		return Options{}, fmt.Errorf("simulate: share placement %q: want %q or %q", opt.SharePlacement, PlaceBestFit, PlaceFragmentation)
	}
	opt.sample = sampleStep(tr.Span())
	return opt, nil
}

// checkJobsFit refuses a trace with a job no fleet of the config could ever
// run: wider than the fleet's limit, or than the burst pools can hold. A job
// that fits on one node needs a pool with nodes that wide; a wider job takes
// whole nodes of the widest size.
func checkJobsFit(set *fleet.Settings, tr *trace.Trace) error {
	widest, wideRoom, limit := 0, 0, set.MaxFleetGPUs()
	for _, p := range set.Pools {
		widest = max(widest, p.GPUsPerNode)
	}
	for _, p := range set.Pools {
		if p.GPUsPerNode == widest && p.Capacity != fleet.Reserved {
			wideRoom += min(p.Max, sim.SettingsOf(p).Capacity) * widest
		}
	}
	for _, j := range tr.Jobs {
		switch {
		case j.GPUs > limit:
			return fmt.Errorf("simulate: job %s needs %d GPUs, more than the %d the pools can hold: it could never run", j.ID, j.GPUs, limit)
		case j.GPUs > widest && j.GPUs > wideRoom:
			return fmt.Errorf("simulate: job %s needs %d GPUs on whole %d-GPU nodes, more than the %d GPUs of such nodes the burst pools can hold: it could never run", j.ID, j.GPUs, widest, wideRoom)
		}
	}
	return nil
}

// runPolicy simulates one policy.
func runPolicy(set *fleet.Settings, tr *trace.Trace, opt Options, name string) (Result, error) {
	if name == "oracle" {
		e, err := newEngine(tr, set.Pools, opt, nil)
		if err != nil {
			return Result{}, err
		}
		advice := int64(-1)
		if opt.Reservations == Advised {
			advice = secs(opt.AdviceAfter)
		}
		r := oracle(tr, opt.WholeGPUs, e.pools, secs(opt.sample), advice, set.Limits)
		r.Teams = oracleTeams(opt.teams, tr, &r)
		r.Tiers = asTiers(oracleTeams(opt.tiers, tr, &r))
		r.GPUTypes = asTypes(oracleTeams(opt.types, tr, &r))
		return r, nil
	}
	pol, err := newPolicy(set, tr, opt, name)
	if err != nil {
		return Result{}, err
	}
	return simulatePolicy(set, tr, opt, name, pol)
}

// newPolicy makes the engine-driven policy called name (every policy but
// the oracle), with opt resolved.
func newPolicy(set *fleet.Settings, tr *trace.Trace, opt Options, name string) (policy, error) {
	switch name {
	case "static":
		return newStatic(tr, opt.WholeGPUs, opt.IgnoreGPUTypes), nil
	case "reactive":
		return &reactive{}, nil
	case "headroom":
		return newHeadroom(opt), nil
	case "predictive":
		return newPredictive(set, opt)
	case "perfect":
		return newPerfect(set, tr, opt)
	}
	return nil, fmt.Errorf("simulate: no policy %q runs on the engine", name)
}

// simulatePolicy runs the engine over the trace under pol, with opt
// resolved, and reports it under name.
func simulatePolicy(set *fleet.Settings, tr *trace.Trace, opt Options, name string, pol policy) (Result, error) {
	e, err := newEngine(tr, set.Pools, opt, pol)
	if err != nil {
		return Result{}, err
	}
	e.sampleStep = secs(opt.sample)
	e.limits = set.Limits
	if opt.Progress != nil {
		e.progress = func(done float64) { opt.Progress(name, done) }
	}
	if err := e.run(); err != nil {
		return Result{}, err
	}
	r := Result{
		Policy:              name,
		CostUSD:             e.st.cost,
		ProvisionedGPUHours: e.st.provisionedGPUs / 3600,
		UsedGPUHours:        e.st.usedGPUs / 3600,
		LostGPUHours:        (e.st.lostScaleIn + e.st.lostReclaim) / 3600,
		LostScaleInGPUHours: e.st.lostScaleIn / 3600,
		LostReclaimGPUHours: e.st.lostReclaim / 3600,
		UnsafeTerminations:  e.st.unsafe,
		WaitGPUHours:        e.st.waitGPUs / 3600,
		StrandedGPUHours:    e.st.strandedGPUs / 3600,
		LimitedCycles:       e.st.limitedCycles,
		Launches:            e.st.launches,
		Drains:              e.st.drains,
		MovedJobs:           e.st.saved,
		Preempted:           e.st.preempted,
		Reclaimed:           e.st.reclaimed,
		BudgetStops:         e.st.budgetStops,
		Abandoned:           e.st.abandoned,
		AbandonedGPUHours:   e.st.abandonedGPUs / 3600,
		waits:               e.st.waits,
		Capacity:            e.samples,
	}
	r.ReservedGPUs = reservedGPUs(e)
	r.Teams = e.groupResults(byTeam, e.st.cost)
	e.budgetResults(r.Teams)
	r.Tiers = asTiers(e.groupResults(byTier, e.st.cost))
	r.GPUTypes = asTypes(e.groupResults(byType, e.st.cost))
	for _, p := range e.pools {
		r.Pools = append(r.Pools, PoolUse{Pool: p.spec.Name, CostUSD: p.cost, ProvisionedGPUHours: p.gpuSeconds / 3600})
	}
	r.finish()
	return r, nil
}
