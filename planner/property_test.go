package planner

import (
	"cmp"
	"encoding/json"
	"flag"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/fleetcast/autoscaler/config"
	"github.com/fleetcast/autoscaler/fleet"
	"github.com/fleetcast/autoscaler/forecast"
)

var t0 = time.Date(2026, 11, 30, 14, 0, 0, 0, time.UTC)

// genInput draws a config, a fleet state and a forecast. Fleets may already
// break their limits (a config changed under a running fleet), hold silent
// agents, stuck launches, drains of every age and jobs with any checkpoint
// history; forecasts may be NaN, negative or absurd.
func genInput(t *rapid.T) Input {
	cfg := config.Defaults()
	cfg.Drain.CheckpointMaxAge = time.Duration(rapid.IntRange(5, 60).Draw(t, "ckMaxAge")) * time.Minute
	cfg.Drain.Timeout = time.Duration(rapid.IntRange(5, 40).Draw(t, "drainTimeout")) * time.Minute
	cfg.AgentTimeout = time.Duration(rapid.IntRange(1, 10).Draw(t, "agentTimeout")) * time.Minute
	cfg.Limits.MaxScaleInPerCycle = rapid.IntRange(1, 10).Draw(t, "maxScaleIn")
	cfg.Forecast.Hysteresis = time.Duration(rapid.IntRange(0, 60).Draw(t, "hysteresis")) * time.Minute
	cfg.Limits.SilentShareHalt = rapid.Float64Range(0.05, 1).Draw(t, "silentHalt")
	// A calm fleet: every node ready and reporting, a low forecast; its
	// surplus is scaled in for demand.
	calm := rapid.IntRange(0, 2).Draw(t, "calm") == 0
	cfg.Limits.ScaleInShare = rapid.Float64Range(0.01, 1).Draw(t, "scaleInShare")
	cfg.Limits.ScaleInWindow = time.Duration(rapid.IntRange(1, 30).Draw(t, "scaleInWindow")) * time.Minute
	// Off, or on (the defaults, or longer).
	cfg.Limits.ScaleInDelayAfterLaunch = time.Duration(rapid.SampledFrom([]int{0, 10, 30}).Draw(t, "scaleInDelay")) * time.Minute
	cfg.Limits.ScaleInUnneededTime = time.Duration(rapid.SampledFrom([]int{0, 10, 30}).Draw(t, "unneededTime")) * time.Minute
	// Each pool's quantile by cost, or one for all.
	cfg.Forecast.WaitValuePerGPUHour = rapid.Float64Range(0.01, 5000).Draw(t, "waitValue")
	if rapid.Bool().Draw(t, "quantileSet") {
		cfg.Forecast.Quantile = rapid.Float64Range(0.05, 0.995).Draw(t, "quantile")
	}
	if rapid.Bool().Draw(t, "hasMaxGPUs") {
		cfg.Limits.MaxGPUs = rapid.IntRange(0, 200).Draw(t, "maxGPUs")
	}
	caps := []fleet.CapacityType{fleet.Reserved, fleet.OnDemand, fleet.Spot}
	npools := rapid.IntRange(1, 5).Draw(t, "pools")
	for i := range npools {
		lead := time.Duration(rapid.IntRange(1, 20).Draw(t, "lead")) * time.Minute
		mn := rapid.IntRange(0, 3).Draw(t, "min")
		cfg.Pools = append(cfg.Pools, fleet.Pool{
			Name:             fmt.Sprintf("pool-%d", i),
			Provider:         "sim",
			InstanceType:     "gpu.x",
			GPUsPerNode:      rapid.SampledFrom([]int{1, 2, 4, 8}).Draw(t, "gpn"),
			Capacity:         rapid.SampledFrom(caps).Draw(t, "capacity"),
			PricePerHour:     rapid.Float64Range(0, 40).Draw(t, "price"),
			LeadTime:         lead,
			ProvisionTimeout: 3 * lead,
			Min:              mn,
			Max:              mn + rapid.IntRange(0, 8).Draw(t, "extra"),
			Priority:         rapid.IntRange(0, 2).Draw(t, "priority"),
			GPUModel:         rapid.SampledFrom([]string{"A100", "H100"}).Draw(t, "model"),
		})
	}
	st := &fleet.State{PendingGPUs: rapid.IntRange(0, 60).Draw(t, "pending")}
	if calm {
		st.PendingGPUs = 0
	}
	// Part of the pending demand may wait for one pool or one GPU model.
	for range rapid.IntRange(0, 2).Draw(t, "scopes") {
		left := st.PendingGPUs
		for _, d := range st.Scoped {
			left -= d.GPUs
		}
		d := fleet.ScopedDemand{GPUs: rapid.IntRange(0, left).Draw(t, "scopedGPUs")}
		if rapid.Bool().Draw(t, "poolScope") {
			d.Pool = rapid.SampledFrom(cfg.Pools).Draw(t, "scopePool").Name
		} else {
			d.GPUModel = rapid.SampledFrom([]string{"a100", "H100", "B200"}).Draw(t, "scopeModel")
		}
		st.Scoped = append(st.Scoped, d)
	}
	// Demand may be announced ahead, started or over.
	for i := range rapid.IntRange(0, 2).Draw(t, "announcements") {
		st.Announced = append(st.Announced, fleet.Announcement{ID: fmt.Sprint("a", i),
			StartAt:  t0.Add(time.Duration(rapid.IntRange(-120, 120).Draw(t, "announcedIn")) * time.Minute),
			GPUs:     rapid.IntRange(0, 40).Draw(t, "announcedGPUs"),
			Duration: time.Duration(rapid.IntRange(0, 120).Draw(t, "announcedFor")) * time.Minute})
	}
	// and under way, for a forecast of the demand not announced.
	for i := range rapid.IntRange(0, 2).Draw(t, "underWay") {
		st.UnderWay = append(st.UnderWay, fleet.Announcement{ID: fmt.Sprint("u", i),
			StartAt:  t0.Add(-time.Duration(rapid.IntRange(0, 120).Draw(t, "underWayFor")) * time.Minute),
			GPUs:     rapid.IntRange(0, 40).Draw(t, "underWayGPUs"),
			Duration: time.Duration(rapid.IntRange(1, 240).Draw(t, "underWayLasts")) * time.Minute})
	}
	if rapid.Bool().Draw(t, "hasHistory") {
		st.History = fleet.Series{Start: t0.Add(-24 * time.Hour), Step: 10 * time.Minute,
			Values: rapid.SliceOfN(rapid.Float64Range(0, 100), 1, 144).Draw(t, "history")}
	}
	for _, p := range cfg.Pools {
		ps := fleet.PoolStatus{Name: p.Name}
		if rapid.IntRange(0, 3).Draw(t, "backoff") == 0 {
			ps.BackoffUntil = t0.Add(time.Duration(rapid.IntRange(-30, 30).Draw(t, "until")) * time.Minute)
		}
		if rapid.IntRange(0, 5).Draw(t, "unobserved") == 0 {
			ps.Unobserved = fleet.Unobserved{Code: fleet.UnobservedReadFailed, Err: "Throttling"}
			if rapid.IntRange(0, 3).Draw(t, "neverRead") == 0 {
				ps.Unobserved.Code = fleet.UnobservedNeverRead
			}
		}
		ps.MinNodes = rapid.IntRange(0, p.Max).Draw(t, "groupMin")
		for range rapid.IntRange(0, 4).Draw(t, "recentDrains") {
			ps.RecentDrains = append(ps.RecentDrains, minutesAgo(t, "drainedAt", -2, 40))
		}
		st.Pools = append(st.Pools, ps)
		nodes := rapid.IntRange(0, p.Max+2).Draw(t, "nodes")
		if p.Capacity == fleet.Reserved && rapid.Bool().Draw(t, "aboveMax") {
			// A reservation lowered or shrunk under a running fleet.
			nodes = p.Max + rapid.IntRange(1, 3).Draw(t, "overMax")
		}
		for j := range nodes {
			st.Nodes = append(st.Nodes, genNode(t, p, j, calm))
		}
	}
	// Orphans: this fleet's instances of a pool the config no longer has.
	gone := cfg.Pools[0]
	gone.Name = "gone"
	for j := range rapid.IntRange(0, 3).Draw(t, "orphans") {
		n := genNode(t, gone, j, false)
		n.Orphan, n.Unknown = true, false
		if rapid.Bool().Draw(t, "orphanKnown") {
			// What its agent read, and its old pool's last price; else
			// counted at the widest and dearest pool's.
			n.GPUs, n.PricePerHour = rapid.IntRange(1, 16).Draw(t, "orphanGPUs"), rapid.Float64Range(0, 60).Draw(t, "orphanPrice")
		}
		st.Nodes = append(st.Nodes, n)
	}
	if rapid.Bool().Draw(t, "halted") {
		// Scale-in was last halted (agents silent at once) a while ago.
		st.HaltedAt = minutesAgo(t, "haltedAt", 0, 90)
	}
	switch rapid.IntRange(0, 2).Draw(t, "maxSpendKind") {
	case 1:
		cfg.Limits.MaxSpendPerHour = rapid.Float64Range(1, 500).Draw(t, "maxSpend")
	case 2:
		// Near what the fleet pays now, every node counted (a reserved
		// pool above its max pays for each), so that the limit binds.
		paid := 0.0
		for _, p := range cfg.Pools {
			live := 0
			for _, n := range st.Nodes {
				if n.Pool == p.Name && n.State != fleet.Terminating {
					live++
				}
			}
			if p.Capacity == fleet.Reserved {
				live = max(live, p.Max)
			}
			paid += float64(live) * p.PricePerHour
		}
		cfg.Limits.MaxSpendPerHour = max(1, paid*rapid.Float64Range(0.8, 1.5).Draw(t, "spendShare"))
	}
	return Input{Settings: cfg.Settings(), State: st, Forecast: genForecast(t, calm, fleetCeiling(cfg.Settings())), Now: t0, Unannounced: rapid.Bool().Draw(t, "unannounced")}
}

func minutesAgo(t *rapid.T, label string, lo, hi int) time.Time {
	return t0.Add(-time.Duration(rapid.IntRange(lo, hi).Draw(t, label)) * time.Minute)
}

// genNode makes a node of pool p; calm, a ready one whose agent reported
// within the last minute.
func genNode(t *rapid.T, p fleet.Pool, j int, calm bool) fleet.Node {
	n := fleet.Node{
		ID:         fmt.Sprintf("%s-n%d", p.Name, j),
		Pool:       p.Name,
		State:      rapid.SampledFrom([]fleet.NodeState{fleet.Pending, fleet.Ready, fleet.Ready, fleet.Draining, fleet.Terminating}).Draw(t, "state"),
		LaunchedAt: minutesAgo(t, "launched", 0, 600),
	}
	if calm {
		n.State = fleet.Ready
	}
	if n.State == fleet.Pending {
		// Its cloud says it runs (booted), its agent not heard from.
		n.Booted = rapid.Bool().Draw(t, "booted")
	}
	if n.State == fleet.Terminating {
		// Stopped by its cloud, not going.
		n.Stopped = rapid.IntRange(0, 3).Draw(t, "stopped") == 0
	}
	if n.State == fleet.Pending && rapid.IntRange(0, 6).Draw(t, "launchFailing") == 0 {
		// The cloud says it is failing to create it (a stockout in a
		// managed instance group's last attempt).
		n.LaunchFailing = "ZONE_RESOURCE_POOL_EXHAUSTED"
	}
	if n.State != fleet.Pending && rapid.IntRange(0, 5).Draw(t, "reported") > 0 {
		n.LastReport = minutesAgo(t, "report", 0, 15)
	}
	if calm {
		n.LastReport = minutesAgo(t, "report", 0, 1)
	}
	if !calm && (n.State == fleet.Pending || n.State == fleet.Ready) && rapid.IntRange(0, 5).Draw(t, "unknown") == 0 {
		// An instance the controller did not launch whose agent never
		// reported healthy GPUs (an adopted fleet, a lost state
		// directory): no jobs known, maybe unhealthy reports.
		n.Unknown = true
		return n
	}
	if n.State == fleet.Draining {
		n.DrainStartedAt = minutesAgo(t, "drainStart", 0, 60)
		n.DrainAcked = rapid.IntRange(0, 4).Draw(t, "drainAcked") > 0
	}
	if n.State == fleet.Ready && rapid.IntRange(0, 4).Draw(t, "cancelled") == 0 {
		n.DrainCancelledAt = minutesAgo(t, "cancelledAt", 0, 60)
	}
	if n.State == fleet.Pending && rapid.IntRange(0, 6).Draw(t, "pendingJobs") > 0 {
		return n
	}
	free := p.GPUsPerNode
	for k := range rapid.IntRange(0, 3).Draw(t, "jobs") {
		if free == 0 {
			break
		}
		g := rapid.IntRange(1, free).Draw(t, "gpus")
		free -= g
		job := fleet.Job{ID: fmt.Sprintf("%s-j%d", n.ID, k), GPUs: g, Start: minutesAgo(t, "start", 0, 3000),
			LongRunning: rapid.Bool().Draw(t, "long")}
		if rapid.IntRange(0, 2).Draw(t, "hasEnd") == 0 {
			// A hint: passed (overran), soon, or beyond the window.
			job.ExpectedEnd = t0.Add(time.Duration(rapid.IntRange(-30, 120).Draw(t, "endIn")) * time.Minute)
		}
		if rapid.IntRange(0, 4).Draw(t, "checkpointed") > 0 {
			job.LastCheckpoint = minutesAgo(t, "ck", 0, 120)
			if n.State == fleet.Draining && rapid.IntRange(0, 3).Draw(t, "ckAtDrain") == 0 {
				// The edge: a checkpoint at the very instant of the drain
				// was not asked for by it.
				job.LastCheckpoint = n.DrainStartedAt
			}
		}
		n.Jobs = append(n.Jobs, job)
	}
	if len(n.Jobs) > 0 && rapid.IntRange(0, 3).Draw(t, "allEnd") == 0 {
		// Every job ending soon, as a scheduler's time limits may say.
		for k := range n.Jobs {
			n.Jobs[k].ExpectedEnd = t0.Add(time.Duration(rapid.IntRange(1, 60).Draw(t, "allEndIn")) * time.Minute)
		}
	}
	if len(n.Jobs) == 0 {
		n.IdleSince = minutesAgo(t, "idle", 0, 120)
	}
	if (n.State == fleet.Ready || n.State == fleet.Draining) && rapid.IntRange(0, 5).Draw(t, "gpuFault") == 0 {
		// The agent cannot read the GPUs: never idle (as its agents view
		// reports it), whatever runs on them unseen.
		n.GPUFault, n.GPUFaultSince, n.IdleSince = "NVML: GPU is lost", minutesAgo(t, "faultSince", 0, 60), time.Time{}
	}
	if n.State == fleet.Ready && rapid.IntRange(0, 6).Draw(t, "interrupted") == 0 {
		// Mostly due, sometimes long past (a node that survived it).
		n.InterruptAt = t0.Add(time.Duration(rapid.SampledFrom([]int{-30, -1, 0, 2, 3}).Draw(t, "interruptIn")) * time.Minute)
	}
	n.Rebalance = rapid.IntRange(0, 6).Draw(t, "rebalance") == 0
	if n.State == fleet.Draining {
		// The agent's verdict, on its own clock: mostly what the job times
		// say, but a clock ahead or behind can make them disagree either
		// way, and the verdict is what counts.
		agrees := true
		for _, j := range n.Jobs {
			agrees = agrees && j.LastCheckpoint.After(n.DrainStartedAt)
		}
		n.DrainConfirmed = agrees != (rapid.IntRange(0, 3).Draw(t, "skewedVerdict") == 0)
	}
	return n
}

// genForecast makes a forecast, often malformed or absurd (some values a
// little or much above ten times ceiling, what the fleet can hold); calm,
// of at most 20 GPUs, so that the fleet has more than it needs (scale-in
// for demand).
func genForecast(t *rapid.T, calm bool, ceiling int) forecast.Forecast {
	top := 200.0
	if calm {
		top = 20
	}
	steps := rapid.IntRange(0, 24).Draw(t, "steps")
	levels := rapid.SampledFrom([][]float64{{0.9}, {0.5, 0.9}, {0.5, 0.8, 0.95}, {0.1, 0.5, 0.99}}).Draw(t, "levels")
	f := forecast.Forecast{Origin: t0.Add(time.Duration(rapid.IntRange(-20, 20).Draw(t, "origin")) * time.Minute),
		Step: 5 * time.Minute, Model: "test", Levels: levels, Values: make([][]float64, len(levels))}
	for k := range levels {
		f.Values[k] = make([]float64, steps)
	}
	for h := range steps {
		v := rapid.Float64Range(0, top).Draw(t, "v")
		switch rapid.IntRange(0, 20).Draw(t, "weird") {
		case 0:
			v = math.NaN()
		case 1:
			v = -v
		case 2:
			v = 1e12
		case 3:
			v = float64(ceiling) * rapid.Float64Range(10.5, 20000).Draw(t, "absurdTimes")
		}
		crossing := rapid.IntRange(0, 10).Draw(t, "crossing") == 0
		for k, q := range levels {
			f.Values[k][h] = v * (0.5 + q/2)
			if crossing {
				// Quantiles that cross, or one NaN among them.
				f.Values[k][h] = rapid.SampledFrom([]float64{v, v / 3, math.NaN()}).Draw(t, "crossed")
			}
		}
	}
	if steps > 1 && rapid.IntRange(0, 20).Draw(t, "ragged") == 0 {
		f.Values[0] = f.Values[0][:steps-1] // malformed: rows differ in length
	}
	return f
}

// silent is docs/design.md rule 2's definition, independent of the planner's code: an
// unknown node's agent has never reported healthy GPUs.
func silent(in Input, n *fleet.Node) bool {
	return n.Unknown || n.LastReport.IsZero() || in.Now.Sub(n.LastReport) > in.Settings.AgentTimeout
}

// codesOf are the reason codes each kind of action may carry.
var codesOf = map[ActionKind][]Reason{
	Launch:      {ReasonBelowMin, ReasonReservedBaseline, ReasonForecast, ReasonDemandNow, ReasonScopedDemand, ReasonAnnounced},
	Drain:       {ReasonAboveMax, ReasonIdle, ReasonCheckpointed, ReasonReap},
	Terminate:   {ReasonProvisionTimeout, ReasonLaunchFailing, ReasonDrainedEmpty, ReasonDrainedCheckpointed, ReasonReapDrained},
	CancelDrain: {ReasonDrainTimeout},
	Hold: {ReasonPoolUnobserved, ReasonUnknownNotReady, ReasonUnknownSilent, ReasonInterrupted, ReasonAgentSilent,
		ReasonGPUFault, ReasonNeverCheckpointed, ReasonCheckpointTooOld, ReasonNoCheckpointSinceCancel,
		ReasonDrainNoReport, ReasonDrainNotAcked, ReasonDrainNotConfirmed, ReasonOrphanBooting, ReasonOrphanBusy,
		ReasonOrphanIdleTooShort, ReasonScaleInHalted, ReasonMaxScaleInPerCycle, ReasonEndsSoon, ReasonBootedWhileHalted, ReasonUnneededTime},
}

func nodesByID(in Input) map[string]*fleet.Node {
	m := map[string]*fleet.Node{}
	for i := range in.State.Nodes {
		m[in.State.Nodes[i].ID] = &in.State.Nodes[i]
	}
	return m
}

// TestPropertySafety checks docs/design.md rules 1-3, 5 and 7-10 over generated fleets.
func TestPropertySafety(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		in := genInput(t)
		plan := Make(in)
		nodes := nodesByID(in)
		cfg := &in.Settings
		backoff := map[string]time.Time{}
		status := map[string]fleet.PoolStatus{}
		for _, st := range in.State.Pools {
			backoff[st.Name] = st.BackoffUntil
			status[st.Name] = st
		}
		for _, a := range plan.Actions {
			// A pool whose group could not be read is not changed.
			if st := status[a.Pool]; st.IsUnobserved() && a.Kind != Hold && a.Kind != CancelDrain {
				t.Fatalf("%s in unobserved pool %s: %+v", a.Kind, a.Pool, a)
			}
		}
		// One action at most per node: a plan never both holds and drains
		// a node, nor drains it twice.
		acted := map[string]bool{}
		for _, a := range plan.Actions {
			if a.Node != "" {
				if acted[a.Node] {
					t.Fatalf("two actions for node %s: %+v", a.Node, plan.Actions)
				}
				acted[a.Node] = true
			}
		}
		// docs/design.md rule 9's halt, from the inputs: more than the share of the
		// ready nodes (of configured pools, not under a notice) silent.
		readyNodes, silentNodes := 0, 0
		for i := range in.State.Nodes {
			if n := &in.State.Nodes[i]; n.State == fleet.Ready && poolNamed(cfg.Pools, n.Pool) != nil && !underNotice(in, n) {
				readyNodes++
				if silent(in, n) {
					silentNodes++
				}
			}
		}
		halted := readyNodes > 0 && float64(silentNodes) > cfg.Limits.SilentShareHalt*float64(readyNodes)
		failing := map[string]bool{}
		drains, overMaxDrains := map[string]int{}, map[string]int{}
		launched := map[string]int{}
		terminated := map[string]bool{}
		reaps := 0
		for _, a := range plan.Actions {
			if a.Kind == Launch {
				if a.Reason == "" || !slices.Contains(codesOf[Launch], a.Code) {
					t.Fatalf("launch without a reason, or with a code (%s) a launch does not take: %+v", a.Code, a)
				}
				if a.Count <= 0 {
					t.Fatalf("launch of %d nodes: %+v", a.Count, a)
				}
				launched[a.Pool] += a.Count
				continue
			}
			n := nodes[a.Node]
			if n == nil {
				t.Fatalf("action on unknown node: %+v", a)
			}
			if a.Reason == "" || !slices.Contains(codesOf[a.Kind], a.Code) {
				t.Fatalf("action without a reason, or with a code (%s) its kind does not take: %+v", a.Code, a)
			}
			if underNotice(in, n) && a.Kind != Hold {
				// The cloud takes a node under an interruption notice; the
				// controller never drains nor terminates it.
				t.Fatalf("%s of a node under a spot interruption notice: %+v", a.Kind, a)
			}
			if n.Unknown && a.Kind != Hold {
				// docs/design.md rules 2 and 7: a node this controller did not launch is
				// never terminated at a deadline, nor drained.
				t.Fatalf("%s of an unknown node: %+v", a.Kind, a)
			}
			switch a.Kind {
			case Drain:
				// docs/design.md rule 1: drains start only on nodes whose jobs all
				// checkpointed within checkpoint_max_age; docs/design.md rule 2: never on
				// a silent node.
				if n.State != fleet.Ready || silent(in, n) {
					t.Fatalf("drain of %s node (silent=%v): %+v", n.State, silent(in, n), a)
				}
				// docs/design.md rule 1: a node whose GPUs cannot be read is never idle.
				if n.GPUFault != "" && len(n.Jobs) == 0 {
					t.Fatalf("drain of an empty node whose GPUs cannot be read: %+v", a)
				}
				// docs/design.md rule 8: an orphan is reaped only once reported idle.
				if n.Orphan && (len(n.Jobs) > 0 || n.IdleSince.IsZero() || in.Now.Sub(n.IdleSince) < ReapIdle) {
					t.Fatalf("drain of orphan %s with %d jobs, idle since %v: %+v", n.ID, len(n.Jobs), n.IdleSince, a)
				}
				if a.Code == ReasonAboveMax {
					overMaxDrains[a.Pool]++
				}
				if a.Code == ReasonIdle || a.Code == ReasonCheckpointed {
					// For demand: not within limits.scale_in_delay_after_launch
					// of a launch in its pool, nor while one boots, and an
					// idle node only once idle limits.scale_in_unneeded_time.
					if at, why := launchHolds(in, a.Pool, launched[a.Pool] > 0); why != "" {
						t.Fatalf("drain for demand while %s (%s): %+v", why, at, a)
					}
					if u := cfg.Limits.ScaleInUnneededTime; u > 0 && len(n.Jobs) == 0 && !n.Rebalance && (n.IdleSince.IsZero() || in.Now.Sub(n.IdleSince) < u) {
						t.Fatalf("drain of a node idle since %v, less than %s: %+v", n.IdleSince, u, a)
					}
				}
				for _, j := range n.Jobs {
					if j.LastCheckpoint.IsZero() || in.Now.Sub(j.LastCheckpoint) > cfg.Drain.CheckpointMaxAge || j.LastCheckpoint.Before(n.DrainCancelledAt) {
						t.Fatalf("drain of %s with job %s last checkpoint %v (drain cancelled %v): %+v", n.ID, j.ID, j.LastCheckpoint, n.DrainCancelledAt, a)
					}
				}
				if n.Orphan { // a reap is not a drain for demand, but it is scale-in
					reaps++
				} else {
					drains[a.Pool]++
				}
			case Terminate:
				terminated[n.ID] = true
				if n.Orphan && n.State != fleet.Draining {
					t.Fatalf("terminate of a %s orphan: %+v", n.State, a)
				}
				pool := poolNamed(cfg.Pools, n.Pool)
				if n.State == fleet.Pending {
					failing[n.Pool] = true
					if len(n.Jobs) > 0 || n.Unknown || !in.Now.After(n.LaunchedAt.Add(pool.ProvisionTimeout)) && n.LaunchFailing == "" {
						t.Fatalf("terminate of a pending node before its deadline, its cloud not failing to create it: %+v", a)
					}
					// docs/design.md rules 9 and 1: a booted launch is not terminated at
					// its deadline while scale-in is halted, nor within a
					// provisioning deadline of the halt's end.
					lastHalt := in.State.HaltedAt
					if n.LaunchFailing == "" && n.Booted && (halted || !lastHalt.IsZero() && in.Now.Before(lastHalt.Add(pool.ProvisionTimeout))) {
						t.Fatalf("terminate of a booted launch while scale-in is halted (halted now %v, last %v): %+v", halted, lastHalt, a)
					}
					continue
				}
				// docs/design.md rule 1: a node is terminated only when its agent, in a
				// report made since the drain began, confirmed that every
				// job on it checkpointed after it received the drain, or
				// exited; whatever the job times (on the agent's clock) say.
				if n.State != fleet.Draining || silent(in, n) || !n.LastReport.After(n.DrainStartedAt) || !n.DrainAcked || !n.DrainConfirmed {
					t.Fatalf("terminate of %s node (silent=%v, report %v, drain %v, confirmed %v): %+v", n.State, silent(in, n), n.LastReport, n.DrainStartedAt, n.DrainConfirmed, a)
				}
				// Nobody sees what runs on GPUs that cannot be read,
				// whatever the agent confirms.
				if n.GPUFault != "" {
					t.Fatalf("terminate of a node whose GPUs cannot be read (%s): %+v", n.GPUFault, a)
				}
			case CancelDrain:
				if n.State != fleet.Draining {
					t.Fatalf("cancel drain of a %s node", n.State)
				}
			}
		}
		for _, n := range plan.Notes {
			if n.Text == "" || !n.Code.Known() {
				t.Fatalf("note without words or a known code: %+v", n)
			}
		}
		total := 0
		for _, c := range drains {
			total += c
		}
		if total+reaps > cfg.Limits.MaxScaleInPerCycle {
			t.Fatalf("%d drains and %d reaps > max_scale_in_per_cycle %d", total, reaps, cfg.Limits.MaxScaleInPerCycle)
		}
		// docs/design.md rule 3: min, max, max_gpus, max_spend_per_hour.
		// burstLaunch: a launch that adds spend (reserved nodes are paid anyway).
		fleetGPUs, spend, anyLaunch, burstLaunch := 0, 0.0, false, false
		for i := range cfg.Pools {
			p := &cfg.Pools[i]
			// Every node the fleet pays for counts against the limits
			// until its cloud says it is gone: terminating ones, and ones
			// this plan terminates, too (docs/design.md rule 3).
			live, active := 0, 0
			for _, n := range in.State.Nodes {
				if n.Pool != p.Name || n.State == fleet.Terminating && n.Stopped {
					continue // a stopped node holds no GPUs, its disks alone billed
				}
				live++
				if n.State != fleet.Draining && n.State != fleet.Terminating && !terminated[n.ID] {
					active++
				}
			}
			for _, a := range plan.Actions {
				if a.Kind == CancelDrain && a.Pool == p.Name {
					active++
				}
			}
			if launched[p.Name] > 0 && live+launched[p.Name] > p.Max {
				t.Fatalf("pool %s: %d live + %d launched > max %d", p.Name, live, launched[p.Name], p.Max)
			}
			if floor := max(p.Min, status[p.Name].MinNodes); drains[p.Name] > 0 && active-drains[p.Name] < floor {
				t.Fatalf("pool %s: %d active - %d drained < min %d (pool %d, group %d)", p.Name, active, drains[p.Name], floor, p.Min, status[p.Name].MinNodes)
			}
			// A pool never read has an unknown size: nothing is launched
			// in it, and the limits count it at its max (below).
			st := status[p.Name]
			never := st.NeverRead()
			if never && launched[p.Name] > 0 {
				t.Fatalf("launch in pool %s, which was never read", p.Name)
			}
			// docs/design.md rule 9: at most a share of the pool starts draining per
			// window, counting drains begun lately.
			if drains[p.Name] > 0 {
				recent, inProgress := 0, 0
				for _, d := range status[p.Name].RecentDrains {
					if in.Now.Sub(d) >= 0 && in.Now.Sub(d) < cfg.Limits.ScaleInWindow {
						recent++
					}
				}
				for _, n := range in.State.Nodes {
					if n.Pool == p.Name && n.State == fleet.Draining && in.Now.Sub(n.DrainStartedAt) < cfg.Limits.ScaleInWindow {
						inProgress++
					}
				}
				// The share, from the inputs: at least one node.
				b := max(1, int(math.Floor(cfg.Limits.ScaleInShare*float64(poolSize(in, p))+1e-9)))
				if drains[p.Name]+max(recent, inProgress) > b {
					t.Fatalf("pool %s: %d drains + %d begun in the window > budget %d", p.Name, drains[p.Name], max(recent, inProgress), b)
				}
			}
			// A reserved pool is scaled in only above its max, and a pool
			// above its max only down to it.
			if floor := max(p.Max, p.Min, status[p.Name].MinNodes); overMaxDrains[p.Name] > 0 && active-overMaxDrains[p.Name] < floor {
				t.Fatalf("pool %s: %d active - %d drained above its max < %d", p.Name, active, overMaxDrains[p.Name], floor)
			}
			if drains[p.Name] > overMaxDrains[p.Name] && p.Capacity == fleet.Reserved {
				t.Fatalf("reserved pool %s drained below its max", p.Name)
			}
			if never {
				live = max(live, p.Max)
			}
			fleetGPUs += (live + launched[p.Name]) * p.GPUsPerNode
			if p.Capacity == fleet.Reserved {
				// Paid whole, used or not, and every node above it.
				spend += float64(max(live+launched[p.Name], p.Max)) * p.PricePerHour
			} else {
				spend += float64(live+launched[p.Name]) * p.PricePerHour
				burstLaunch = burstLaunch || (launched[p.Name] > 0 && p.PricePerHour > 0)
			}
			anyLaunch = anyLaunch || launched[p.Name] > 0
			// docs/design.md rule 9: a pool holding booted launches past their deadline
			// while scale-in is halted (or within a deadline of its end)
			// buys nothing more: a long halt does not fill it.
			if launched[p.Name] > 0 && !st.IsUnobserved() {
				lastHalt := in.State.HaltedAt
				for _, n := range in.State.Nodes {
					overdue := n.Pool == p.Name && n.State == fleet.Pending && !n.Unknown && len(n.Jobs) == 0 && n.LaunchFailing == "" && n.Booted &&
						in.Now.After(n.LaunchedAt.Add(p.ProvisionTimeout))
					if overdue && (halted || !lastHalt.IsZero() && in.Now.Before(lastHalt.Add(p.ProvisionTimeout))) {
						t.Fatalf("launch in pool %s, which holds the booted launch %s while scale-in is halted", p.Name, n.ID)
					}
				}
			}
			// docs/design.md rule 5: nothing is launched in a pool backed off after a
			// capacity error, or whose launch missed its deadline.
			if launched[p.Name] > 0 && (in.Now.Before(backoff[p.Name]) || failing[p.Name]) {
				t.Fatalf("launch in pool %s, backed off until %v (failing %v)", p.Name, backoff[p.Name], failing[p.Name])
			}
		}
		// Nodes of no configured pool (orphans) count too: at what their
		// agent or old pool says, else the widest and dearest pool's.
		widest, dearest := 0, 0.0
		for _, p := range cfg.Pools {
			widest, dearest = max(widest, p.GPUsPerNode), max(dearest, p.PricePerHour)
		}
		for _, n := range in.State.Nodes {
			if poolNamed(cfg.Pools, n.Pool) == nil && !(n.State == fleet.Terminating && n.Stopped) {
				fleetGPUs += cmp.Or(n.GPUs, widest)
				spend += cmp.Or(n.PricePerHour, dearest)
			}
		}
		if m := cfg.Limits.MaxGPUs; m > 0 && anyLaunch && fleetGPUs > m {
			t.Fatalf("fleet GPUs %d > max_gpus %d after launches", fleetGPUs, m)
		}
		if m := cfg.Limits.MaxSpendPerHour; m > 0 && burstLaunch && spend > m+1e-6 {
			t.Fatalf("spend %.2f > max_spend_per_hour %.2f after launches", spend, m)
		}
		if math.IsNaN(plan.CostPerHourAfter) || math.IsInf(plan.CostPerHourAfter, 0) {
			t.Fatalf("cost after is %v", plan.CostPerHourAfter)
		}
		// docs/design.md rule 9: no scale-in while many agents are silent at once (a
		// node under a spot interruption notice is going anyway: neither
		// counted nor held against the share).
		if total > 0 && halted {
			t.Fatalf("%d drains with %d of %d ready nodes silent (halt above %v)", total, silentNodes, readyNodes, cfg.Limits.SilentShareHalt)
		}
		// docs/design.md rule 10: the forecast the plan used is clean: finite, not
		// negative, at most ten times what the fleet can hold (or current
		// demand, which stands in for values that are not numbers); and a
		// forecast with an absurd value is not used at all.
		holds := fleetCeiling(*cfg)
		ceiling := max(10*float64(holds), float64(plan.Demand.Total()))
		for _, row := range forecastValues(plan) {
			for _, v := range row {
				if math.IsNaN(v) || math.IsInf(v, 0) || v < 0 || (holds > 0 && v > ceiling) {
					t.Fatalf("plan used forecast value %v", v)
				}
			}
		}
		if plan.Forecast != nil && holds > 0 {
			for _, row := range in.Forecast.Values {
				for _, v := range row {
					if v > 10*float64(holds) {
						t.Fatalf("plan used a forecast with the absurd value %v (fleet holds %d GPUs)", v, holds)
					}
				}
			}
		}
		// Demand is what jobs hold, and a node's jobs hold at most its GPUs.
		running, capacity := 0, 0
		for i := range in.State.Nodes {
			n := &in.State.Nodes[i]
			if p := poolNamed(cfg.Pools, n.Pool); p != nil && n.State != fleet.Terminating {
				running += min(n.UsedGPUs(), p.GPUsPerNode)
				capacity += p.GPUsPerNode
			}
		}
		if plan.Demand.RunningGPUs != running || running > capacity {
			t.Fatalf("running demand %d; the nodes' jobs hold %d of %d GPUs", plan.Demand.RunningGPUs, running, capacity)
		}
		// docs/design.md rule 7: capacity that is launching counts. When ready nodes and
		// launches within their deadline already cover the most the plan
		// could need (demand now, or any forecast value), nothing is
		// bought for demand.
		supply := 0
		for i := range in.State.Nodes {
			n := &in.State.Nodes[i]
			p := poolNamed(cfg.Pools, n.Pool)
			if p == nil {
				continue
			}
			switch n.State {
			case fleet.Ready:
				if !underNotice(in, n) { // the cloud takes one under notice
					supply += p.GPUsPerNode
				}
			case fleet.Pending:
				late := in.Now.After(n.LaunchedAt.Add(p.ProvisionTimeout)) || n.LaunchFailing != "" && !n.Unknown
				if !late || (len(n.Jobs) > 0 && !n.Unknown) {
					supply += p.GPUsPerNode
				}
			}
		}
		for _, a := range plan.Actions {
			if p := poolNamed(cfg.Pools, a.Pool); a.Kind == CancelDrain && p != nil {
				supply += p.GPUsPerNode
			}
		}
		// While jobs are pending, the free GPUs of busy nodes are not
		// for them (counted here on every ready node: at least what the
		// planner counts).
		need := float64(running + in.State.PendingGPUs)
		for _, a := range in.State.Announced { // at most all of it at once
			need += float64(a.GPUs)
		}
		if in.State.PendingGPUs > 0 {
			for i := range in.State.Nodes {
				n := &in.State.Nodes[i]
				if p := poolNamed(cfg.Pools, n.Pool); p != nil && n.State == fleet.Ready && !underNotice(in, n) {
					if u := min(n.UsedGPUs(), p.GPUsPerNode); u > 0 {
						need += float64(p.GPUsPerNode - u)
					}
				}
			}
		}
		// A forecast of the demand not announced has every announcement
		// on top (at most all of them at once).
		onTop := 0.0
		if in.Unannounced {
			for _, a := range append(slices.Clone(in.State.Announced), in.State.UnderWay...) {
				onTop += float64(a.GPUs)
			}
		}
		for _, row := range forecastValues(plan) {
			for _, v := range row {
				need = max(need, v+onTop)
			}
		}
		for _, a := range plan.Actions {
			if a.Kind == Launch && float64(supply) >= need && isDemandLaunch(cfg, a) && a.Code != ReasonScopedDemand {
				t.Fatalf("launch for demand (%s) with %d GPUs ready or launching for a need of at most %v", a.Reason, supply, need)
			}
		}
		// The jobs of busy nodes drained for demand have room on the
		// ready nodes that stay: in all, and each on one node.
		drained := map[string]bool{}
		for _, a := range plan.Actions {
			if a.Kind == Drain {
				drained[a.Node] = true
			}
		}
		moved, widest := 0, 0
		for i := range in.State.Nodes {
			n := &in.State.Nodes[i]
			if !drained[n.ID] || !slices.ContainsFunc(plan.Actions, func(a Action) bool { return a.Node == n.ID && a.Code == ReasonCheckpointed }) {
				continue
			}
			for _, j := range n.Jobs {
				moved += j.GPUs
				widest = max(widest, j.GPUs)
			}
		}
		room, roomiest := 0, 0
		for i := range in.State.Nodes {
			n := &in.State.Nodes[i]
			if p := poolNamed(cfg.Pools, n.Pool); p != nil && n.State == fleet.Ready && !drained[n.ID] && !underNotice(in, n) {
				free := p.GPUsPerNode - min(n.UsedGPUs(), p.GPUsPerNode)
				room += free
				roomiest = max(roomiest, free)
			}
		}
		if moved > room || widest > roomiest {
			t.Fatalf("busy nodes drained for demand move jobs of %d GPUs (widest %d) to nodes with %d free (at most %d on one)", moved, widest, room, roomiest)
		}
		// Demand scoped to a pool or a GPU model is served only there, and
		// what is bought for it is at most what it waits for, in whole
		// nodes; a pool that buys for it is not drained for demand.
		scopedGPUs, scopedPending, slack := 0, 0, 0
		for _, d := range in.State.Scoped {
			scopedPending += d.GPUs
		}
		for _, p := range cfg.Pools {
			slack += p.GPUsPerNode - 1
		}
		for _, a := range plan.Actions {
			if a.Kind != Launch || a.Code != ReasonScopedDemand {
				continue
			}
			scopedGPUs += a.GPUs
			p := poolNamed(cfg.Pools, a.Pool)
			if !slices.ContainsFunc(in.State.Scoped, func(d fleet.ScopedDemand) bool { return d.GPUs > 0 && d.Serves(p) }) {
				t.Fatalf("launch for scoped demand in pool %s, which serves no scope of %v", a.Pool, in.State.Scoped)
			}
			if drains[a.Pool]-overMaxDrains[a.Pool] > 0 {
				t.Fatalf("pool %s launches for scoped demand (%s) and drains %d node(s) for demand", a.Pool, a.Reason, drains[a.Pool]-overMaxDrains[a.Pool])
			}
		}
		if scopedGPUs > scopedPending+slack {
			t.Fatalf("%d GPUs launched for %d GPUs of scoped demand", scopedGPUs, scopedPending)
		}
		// Capacity bought for demand and capacity drained for demand never
		// meet in one plan (a pool above its max is brought back whatever
		// the demand).
		demandDrains := 0
		for pool, n := range drains {
			demandDrains += n - overMaxDrains[pool]
		}
		for _, a := range plan.Actions {
			if a.Kind == Launch && demandDrains > 0 && isDemandLaunch(cfg, a) && a.Code != ReasonScopedDemand {
				t.Fatalf("plan launches for demand (%s) and drains %d node(s)", a.Reason, demandDrains)
			}
		}
	})
}

// TestPropertyEndsNeverDrain: jobs' expected ends are hints (a node may
// lie about its own). With them a plan never launches more nodes than
// without them, and never drains for demand a node whose jobs, all
// started a window ago or more, all end within scale-in's window (it is
// held, ends_soon; one the cloud may take
// soon, a rebalance recommendation, goes first as ever), nor makes more
// drains for demand. Which nodes drain may differ (a held node's jobs are
// not moved onto another's free GPUs, which may leave that one free to
// drain; TestScaleInAtKnownEnds has the cases); every drain's safety, ends
// or not, is TestPropertySafety's.
func TestPropertyEndsNeverDrain(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		in := genInput(t)
		with := Make(in)
		cfg := &in.Settings
		window := time.Duration(0)
		for _, p := range cfg.Pools {
			if p.Capacity != fleet.Reserved {
				window = max(window, p.LeadTime)
			}
		}
		window += cfg.Forecast.Hysteresis
		nodes := nodesByID(in)
		for _, a := range with.Actions {
			if a.Kind != Drain || (a.Code != ReasonIdle && a.Code != ReasonCheckpointed) {
				continue
			}
			n := nodes[a.Node]
			ending := len(n.Jobs) > 0
			for _, j := range n.Jobs {
				// (a job started within the window: the node may drain)
				ending = ending && j.ExpectedEnd.After(in.Now) && !j.ExpectedEnd.After(in.Now.Add(window)) && !j.Start.After(in.Now.Add(-window))
			}
			if ending && !silent(in, n) && !n.Rebalance { // a rebalance recommendation goes first as ever
				t.Fatalf("drain of %s for demand, its jobs all expected to end within %v: %+v", n.ID, window, a)
			}
		}
		bare := *in.State
		bare.Nodes = slices.Clone(in.State.Nodes)
		for i := range bare.Nodes {
			bare.Nodes[i].Jobs = slices.Clone(bare.Nodes[i].Jobs)
			for j := range bare.Nodes[i].Jobs {
				bare.Nodes[i].Jobs[j].ExpectedEnd = time.Time{}
			}
		}
		in.State = &bare
		without := Make(in)
		demandDrains := func(p Plan) (n int) {
			for _, a := range p.Actions {
				if a.Kind == Drain && (a.Code == ReasonIdle || a.Code == ReasonCheckpointed) {
					n++
				}
			}
			return n
		}
		if dw, db := demandDrains(with), demandDrains(without); dw > db {
			t.Fatalf("%d drains for demand with expected ends, %d without\nwith:\n%s\nwithout:\n%s", dw, db, describe(with), describe(without))
		}
		if lw, lb := countLaunched(with), countLaunched(without); lw > lb {
			t.Fatalf("%d nodes launched with expected ends, %d without\nwith:\n%s\nwithout:\n%s", lw, lb, describe(with), describe(without))
		}
	})
}

// TestPropertyDeterministic checks that the same input gives the same plan,
// whatever order the provider listed the nodes and their jobs in.
func TestPropertyDeterministic(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		in := genInput(t)
		first, err := json.Marshal(Make(in))
		if err != nil {
			t.Fatal(err)
		}
		again, _ := json.Marshal(Make(in))
		if string(first) != string(again) {
			t.Fatalf("two plans of the same input differ:\n%s\n%s", first, again)
		}
		shuffled := *in.State
		shuffled.Nodes = append([]fleet.Node(nil), in.State.Nodes...)
		r := rand.New(rand.NewPCG(rapid.Uint64().Draw(t, "shuffle"), 1))
		r.Shuffle(len(shuffled.Nodes), func(i, j int) { shuffled.Nodes[i], shuffled.Nodes[j] = shuffled.Nodes[j], shuffled.Nodes[i] })
		for i := range shuffled.Nodes {
			jobs := append([]fleet.Job(nil), shuffled.Nodes[i].Jobs...)
			r.Shuffle(len(jobs), func(a, b int) { jobs[a], jobs[b] = jobs[b], jobs[a] })
			shuffled.Nodes[i].Jobs = jobs
		}
		in.State = &shuffled
		third, _ := json.Marshal(Make(in))
		if string(first) != string(third) {
			t.Fatalf("node order changed the plan:\n%s\n%s", first, third)
		}
	})
}

// isDemandLaunch reports whether a launch buys burst capacity for demand
// (not a pool's min, nor a reservation kept full).
func isDemandLaunch(cfg *fleet.Settings, a Action) bool {
	return poolNamed(cfg.Pools, a.Pool).Capacity != fleet.Reserved && a.Code != ReasonBelowMin
}

// forecastValues are the values of the forecast a plan used; none without one.
func forecastValues(p Plan) [][]float64 {
	if p.Forecast == nil {
		return nil
	}
	return p.Forecast.Values
}

// fleetCeiling is the most GPUs the fleet may hold, from the settings:
// every pool at its max, within max_gpus (docs/design.md rule 10's measure of absurd).
func fleetCeiling(s fleet.Settings) int {
	total := 0
	for _, p := range s.Pools {
		total += p.Max * p.GPUsPerNode
	}
	if s.Limits.MaxGPUs > 0 {
		total = min(total, s.Limits.MaxGPUs)
	}
	return total
}

// poolSize counts a pool's live nodes as the planner sizes it: neither
// terminating nor a launch past its provisioning deadline.
func poolSize(in Input, p *fleet.Pool) int {
	n := 0
	for _, node := range in.State.Nodes {
		late := node.State == fleet.Pending && len(node.Jobs) == 0 && (in.Now.After(node.LaunchedAt.Add(p.ProvisionTimeout)) || node.LaunchFailing != "" && !node.Unknown) &&
			!unobservedPool(in, p.Name)
		if node.Pool == p.Name && node.State != fleet.Terminating && !late {
			n++
		}
	}
	return n
}

func unobservedPool(in Input, pool string) bool {
	for _, st := range in.State.Pools {
		if st.Name == pool {
			return st.IsUnobserved()
		}
	}
	return false
}

// propertyChecks is how many cases each property runs in `make test`
// (rapid's default is 100); -rapid.checks or RAPID_CHECKS overrides it.
const propertyChecks = 2000

func TestMain(m *testing.M) {
	flag.Parse()
	set := os.Getenv("RAPID_CHECKS") != ""
	flag.Visit(func(f *flag.Flag) { set = set || f.Name == "rapid.checks" })
	if !set {
		flag.Set("rapid.checks", strconv.Itoa(propertyChecks))
	}
	os.Exit(m.Run())
}

// underNotice reports whether the cloud is taking a node: an interruption
// notice due, or past by at most StaleNotice.
func underNotice(in Input, n *fleet.Node) bool {
	return !n.InterruptAt.IsZero() && in.Now.Sub(n.InterruptAt) <= StaleNotice
}

// poolNamed is the pool of that name, nil if none.
func poolNamed(pools []fleet.Pool, name string) *fleet.Pool {
	for i := range pools {
		if pools[i].Name == name {
			return &pools[i]
		}
	}
	return nil
}

// launchHolds says, from the inputs alone, why scale-in for demand may
// not drain in pool now (limits.scale_in_delay_after_launch), or "": the
// plan launches in it (launching, counted from the plan's launches
// listed before the drain), a launch of it boots within its provisioning
// deadline, its cloud not failing to create it, or one of its live nodes
// was launched within the delay (a launch time ahead of the clock, or an
// unknown instance not up, does not count).
func launchHolds(in Input, pool string, launching bool) (time.Time, string) {
	delay := in.Settings.Limits.ScaleInDelayAfterLaunch
	p := poolNamed(in.Settings.Pools, pool)
	if delay <= 0 || p == nil {
		return time.Time{}, ""
	}
	if launching {
		return in.Now, "the plan launches in its pool"
	}
	for _, n := range in.State.Nodes {
		if n.Pool != pool || n.Orphan || n.State == fleet.Terminating || n.Unknown && n.State == fleet.Pending {
			// Not this controller's launch, and not up: not waited for.
			continue
		}
		if n.State == fleet.Pending && n.LaunchFailing == "" && !in.Now.After(n.LaunchedAt.Add(p.ProvisionTimeout)) {
			return n.LaunchedAt, "a launch of its pool boots"
		}
		if !n.LaunchedAt.After(in.Now) && in.Now.Sub(n.LaunchedAt) < delay {
			return n.LaunchedAt, "a node of its pool was launched within the delay"
		}
	}
	return time.Time{}, ""
}
