package planner

import "fmt"

// Reason is why the planner took an action or wrote a note, as a code a
// program can test, beside the words a person reads (Action.Reason,
// Note.Text); JSON shows it by name ("drain_timeout"). The words may change
// from release to release; the codes and their names are kept. One code
// may stand for many wordings (a count, a time, a node's name), never one
// wording for two codes.
type Reason uint8

// The reasons, by what they explain. The zero Reason is no reason.
const (
	// Why a launch is made.

	// ReasonBelowMin: the pool has fewer active nodes than its min.
	ReasonBelowMin Reason = iota + 1
	// ReasonReservedBaseline: a reserved pool is kept full, its
	// reservation being paid whether used or not.
	ReasonReservedBaseline
	// ReasonForecast: the forecast needs more GPUs one lead time ahead
	// than there will be.
	ReasonForecast
	// ReasonDemandNow: the GPUs in use or pending now are more than there
	// will be one lead time ahead (without a forecast, or with one below
	// current demand).
	ReasonDemandNow
	// ReasonScopedDemand: GPUs (or whole nodes) pending for one pool, or
	// for the pools of a GPU model, a partition or a width
	// (fleet.ScopedDemand), are more than those pools have free; only
	// they serve it.
	ReasonScopedDemand

	// Why a node is drained.

	// ReasonAboveMax: the pool has more active nodes than its max (a
	// lowered max, a shrunk reservation); drained back to it whatever the
	// demand.
	ReasonAboveMax
	// ReasonIdle: scale-in for demand drains an idle node.
	ReasonIdle
	// ReasonCheckpointed: scale-in for demand drains a node whose jobs
	// all checkpointed recently.
	ReasonCheckpointed
	// ReasonReap: an orphan (its pool is no longer in the config) is
	// drained, its agent having reported it idle for ReapIdle.
	ReasonReap

	// Why a node is terminated, or its drain cancelled.

	// ReasonProvisionTimeout: a launch of this controller's was not ready
	// by its pool's provisioning deadline; the pool is backed off.
	ReasonProvisionTimeout
	// ReasonDrainedEmpty: a drained node has no jobs left, as its agent
	// confirmed.
	ReasonDrainedEmpty
	// ReasonDrainedCheckpointed: a drained node's agent confirmed that
	// every job on it checkpointed since it received the drain.
	ReasonDrainedCheckpointed
	// ReasonReapDrained: a drained orphan is terminated, as its agent
	// confirmed the drain.
	ReasonReapDrained
	// ReasonDrainTimeout: a drain was not confirmed within drain.timeout;
	// it is cancelled and the node kept (CancelDrain).
	ReasonDrainTimeout

	// Why a node is held: kept as it is where the planner would otherwise
	// change it.

	// ReasonPoolUnobserved: the node's pool was not observed this cycle
	// (fleet.PoolStatus.Unobserved), so nothing in it is changed. Also a
	// note's code: a pool skipped for a launch, or not scaled in.
	ReasonPoolUnobserved
	// ReasonUnknownNotReady: an instance this controller did not launch
	// (fleet.Node.Unknown) is past its provisioning deadline: not counted
	// as capacity, never terminated for it.
	ReasonUnknownNotReady
	// ReasonUnknownSilent: an instance this controller did not launch
	// whose agent never reported healthy GPUs: never taken for idle.
	ReasonUnknownSilent
	// ReasonInterrupted: the cloud gave notice it reclaims the node (a
	// spot interruption); not counted as capacity, and replaced.
	ReasonInterrupted
	// ReasonAgentSilent: the node's agent has not reported within the
	// agent timeout, or never did: never taken for idle, and a drained
	// node's checkpoints cannot be confirmed.
	ReasonAgentSilent
	// ReasonGPUFault: the node's agent cannot read its GPUs, so what runs
	// on them is unknown: never taken for idle.
	ReasonGPUFault
	// ReasonNeverCheckpointed: a job on the node has never checkpointed.
	ReasonNeverCheckpointed
	// ReasonCheckpointTooOld: a job's last checkpoint is older than
	// drain.checkpoint_max_age.
	ReasonCheckpointTooOld
	// ReasonNoCheckpointSinceCancel: the node's drain was cancelled and a
	// job on it has not checkpointed since.
	ReasonNoCheckpointSinceCancel
	// ReasonDrainNoReport: a draining node's agent has not reported since
	// the drain began.
	ReasonDrainNoReport
	// ReasonDrainNotAcked: a draining node's agent has not yet confirmed
	// it holds the drain (it may still take new work).
	ReasonDrainNotAcked
	// ReasonDrainNotConfirmed: a draining node's agent has not yet
	// confirmed that every job checkpointed since the drain reached it.
	ReasonDrainNotConfirmed
	// ReasonOrphanBooting: an orphan is not ready yet; reaped once its
	// agent reports it idle.
	ReasonOrphanBooting
	// ReasonOrphanBusy: an orphan runs jobs; reaped once idle.
	ReasonOrphanBusy
	// ReasonOrphanIdleTooShort: an orphan has been idle for less than
	// ReapIdle.
	ReasonOrphanIdleTooShort

	// Why the planner held back, in notes (and in holds of orphans, for the
	// scale-in limits).

	// ReasonUnknownPool: a node names a pool the config does not have
	// (and is not an orphan); it is left alone.
	ReasonUnknownPool
	// ReasonPoolNeverRead: a pool was never read, so its size is unknown:
	// nothing is launched or drained in it, and it counts at its max
	// against the fleet's limits.
	ReasonPoolNeverRead
	// ReasonPoolFailing: a node of the pool missed its provisioning
	// deadline this cycle, or the cloud is failing to create one: nothing
	// is launched in it.
	ReasonPoolFailing
	// ReasonBackedOff: the pool is backed off after a capacity error.
	ReasonBackedOff
	// ReasonPoolAtMax: the pool's max holds a launch back.
	ReasonPoolAtMax
	// ReasonMaxGPUs: limits.max_gpus holds a launch back.
	ReasonMaxGPUs
	// ReasonMaxSpend: limits.max_spend_per_hour holds a launch back, or
	// the fleet already costs more.
	ReasonMaxSpend
	// ReasonUnmetDemand: GPUs needed that no pool can buy.
	ReasonUnmetDemand
	// ReasonNoForecast: the forecast is empty; the plan is made on
	// current demand.
	ReasonNoForecast
	// ReasonForecastMalformed: the forecast's shape is wrong (its step,
	// levels or rows); it is dropped and the plan made on current demand.
	ReasonForecastMalformed
	// ReasonForecastAbsurd: the forecast has values above ten times what
	// the fleet can hold; it is dropped and the plan made on current
	// demand.
	ReasonForecastAbsurd
	// ReasonForecastNotANumber: forecast values that are not numbers were
	// replaced with current demand.
	ReasonForecastNotANumber
	// ReasonForecastNegative: negative forecast values were clamped to 0.
	ReasonForecastNegative
	// ReasonForecastShort: the forecast ends before the longest lead time
	// plus the hysteresis; its last step stands for the rest.
	ReasonForecastShort
	// ReasonScaleInHalted: too many agents are silent at once
	// (limits.silent_share_halt): nothing is scaled in.
	ReasonScaleInHalted
	// ReasonScaleInShare: the pool's drains within limits.scale_in_window
	// reached its share (limits.scale_in_share).
	ReasonScaleInShare
	// ReasonMaxScaleInPerCycle: the cycle's drains reached
	// limits.max_scale_in_per_cycle.
	ReasonMaxScaleInPerCycle
	// ReasonJobsWouldNotFit: scale-in for demand keeps busy nodes whose
	// jobs would not fit on the other nodes' free GPUs (drained, they
	// would wait for capacity again).
	ReasonJobsWouldNotFit
	// ReasonAnnounced: demand announced ahead of its start
	// (fleet.State.Announced), on top of current demand, needs more GPUs
	// one lead time ahead than there will be (or keeps them from scale-in).
	ReasonAnnounced
	// ReasonForecastCrossing: forecast values below a lower quantile's
	// were raised to it.
	ReasonForecastCrossing
	// ReasonExpectedEnds: pending jobs are expected to start on nodes
	// whose jobs all end within the lead time (their expected ends, a
	// hint), so no launch is made for them yet.
	ReasonExpectedEnds
	// ReasonLeftToFaster: GPUs a pool would launch for, one lead time
	// ahead, are left to cheaper pools that boot sooner, which launch for
	// them when their own lead time reaches that time.
	ReasonLeftToFaster
	// ReasonLaunchFailing: a launch of this controller's that the cloud
	// says it is failing to create (fleet.Node.LaunchFailing: a zone out
	// of GPUs, a quota) is terminated before its deadline, so the cloud
	// stops retrying it, and the pool is backed off; the demand goes to
	// other pools at once.
	ReasonLaunchFailing
	// ReasonEndsSoon: scale-in for demand holds a busy node whose jobs
	// are all expected to end within its window (a hint), planned to
	// leave once empty if not needed then, rather than move its jobs or
	// another node's for that surplus now.
	ReasonEndsSoon
	// ReasonBootedWhileHalted: a launch of this controller's that its
	// cloud says is running, past its provisioning deadline while
	// scale-in is halted (or within a provisioning deadline of the halt's
	// end), is held, not terminated: its agent may be cut off with the
	// others, and a scheduler may have put jobs on it. It counts against
	// the limits, not as capacity; its pool is not backed off.
	ReasonBootedWhileHalted
	// ReasonScaleInDelay: scale-in for demand waits while launches boot
	// and for limits.scale_in_delay_after_launch after the fleet's latest
	// launch, so that no node is drained before the work it was launched
	// for could reach it.
	ReasonScaleInDelay
	// ReasonUnneededTime: capacity is kept until it has been unneeded for
	// limits.scale_in_unneeded_time: an idle node is held until it has
	// been idle that long (planned to leave then if not needed), and the
	// fleet keeps the GPUs its demand peaked at over that long past.
	ReasonUnneededTime
	// ReasonQueueDegraded: the latest read of the scheduler's queue (the
	// slurm block) failed, or the last whole read is too old to count;
	// its demand is the last whole read's while that counts, and none
	// after (fleet.State.Queue).
	ReasonQueueDegraded
	// ReasonTierNotBought: demand pending for some pools only
	// (fleet.ScopedDemand) is of a tier nothing is bought for there: its
	// waiting is worth nothing, or none of the scope's pools is of a
	// capacity type the tier may buy.
	ReasonTierNotBought
	// ReasonTeamOverBudget: a team has spent its burst budget for the day
	// (fleet.Team.BurstBudgetPerDay): nothing is bought for its pending
	// demand beyond what its reserved share serves.
	ReasonTeamOverBudget

	numReasons // one past the last
)

// reasonNames are the codes' names, as JSON and String give them.
var reasonNames = [numReasons]string{
	ReasonBelowMin:                "below_min",
	ReasonReservedBaseline:        "reserved_baseline",
	ReasonForecast:                "forecast",
	ReasonDemandNow:               "demand_now",
	ReasonScopedDemand:            "scoped_demand",
	ReasonAboveMax:                "above_max",
	ReasonIdle:                    "idle",
	ReasonCheckpointed:            "checkpointed",
	ReasonReap:                    "reap",
	ReasonProvisionTimeout:        "provision_timeout",
	ReasonDrainedEmpty:            "drained_empty",
	ReasonDrainedCheckpointed:     "drained_checkpointed",
	ReasonReapDrained:             "reap_drained",
	ReasonDrainTimeout:            "drain_timeout",
	ReasonPoolUnobserved:          "pool_unobserved",
	ReasonUnknownNotReady:         "unknown_not_ready",
	ReasonUnknownSilent:           "unknown_silent",
	ReasonInterrupted:             "interrupted",
	ReasonAgentSilent:             "agent_silent",
	ReasonGPUFault:                "gpu_fault",
	ReasonNeverCheckpointed:       "never_checkpointed",
	ReasonCheckpointTooOld:        "checkpoint_too_old",
	ReasonNoCheckpointSinceCancel: "no_checkpoint_since_cancel",
	ReasonDrainNoReport:           "drain_no_report",
	ReasonDrainNotAcked:           "drain_not_acked",
	ReasonDrainNotConfirmed:       "drain_not_confirmed",
	ReasonOrphanBooting:           "orphan_booting",
	ReasonOrphanBusy:              "orphan_busy",
	ReasonOrphanIdleTooShort:      "orphan_idle_too_short",
	ReasonUnknownPool:             "unknown_pool",
	ReasonPoolNeverRead:           "pool_never_read",
	ReasonPoolFailing:             "pool_failing",
	ReasonBackedOff:               "backed_off",
	ReasonPoolAtMax:               "pool_at_max",
	ReasonMaxGPUs:                 "max_gpus",
	ReasonMaxSpend:                "max_spend_per_hour",
	ReasonUnmetDemand:             "unmet_demand",
	ReasonNoForecast:              "no_forecast",
	ReasonForecastMalformed:       "forecast_malformed",
	ReasonForecastAbsurd:          "forecast_absurd",
	ReasonForecastNotANumber:      "forecast_not_a_number",
	ReasonForecastNegative:        "forecast_negative",
	ReasonForecastShort:           "forecast_short",
	ReasonScaleInHalted:           "scale_in_halted",
	ReasonScaleInShare:            "scale_in_share",
	ReasonMaxScaleInPerCycle:      "max_scale_in_per_cycle",
	ReasonJobsWouldNotFit:         "jobs_would_not_fit",
	ReasonAnnounced:               "announced",
	ReasonLaunchFailing:           "launch_failing",
	ReasonForecastCrossing:        "forecast_crossing",
	ReasonExpectedEnds:            "expected_ends",
	ReasonLeftToFaster:            "left_to_faster",
	ReasonEndsSoon:                "ends_soon",
	ReasonBootedWhileHalted:       "booted_while_halted",
	ReasonScaleInDelay:            "scale_in_delay",
	ReasonUnneededTime:            "unneeded_time",
	ReasonQueueDegraded:           "queue_degraded",
	ReasonTierNotBought:           "tier_not_bought",
	ReasonTeamOverBudget:          "team_over_budget",
}

// String is the code's name ("forecast", "drain_timeout"); "" for no
// reason.
func (r Reason) String() string {
	if r < numReasons {
		return reasonNames[r]
	}
	return fmt.Sprintf("Reason(%d)", uint8(r))
}

// Known reports whether r is one of the codes above.
func (r Reason) Known() bool { return r > 0 && r < numReasons }

// MarshalText gives the code's name, so JSON shows it as a string.
func (r Reason) MarshalText() ([]byte, error) {
	if r >= numReasons {
		return nil, fmt.Errorf("planner: unknown reason %d", uint8(r))
	}
	return []byte(reasonNames[r]), nil
}

// UnmarshalText reads a code's name back ("" is no reason).
func (r *Reason) UnmarshalText(b []byte) error {
	for i, n := range reasonNames {
		if n == string(b) {
			*r = Reason(i)
			return nil
		}
	}
	return fmt.Errorf("planner: unknown reason %q", b)
}

// Note is something the operator should know that is not an action: a
// pool skipped, a limit reached, a forecast clamped.
type Note struct {
	Code Reason `json:"code"`
	Text string `json:"text"`
}

// cause is a reason with its words, before it becomes an action's or a
// note's; the zero value is no reason (nothing stands in the way).
type cause struct {
	code Reason
	text string
}

// none reports whether c is no reason.
func (c cause) none() bool { return c.code == 0 }
