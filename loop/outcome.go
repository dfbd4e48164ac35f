package loop

import "github.com/fleetcast/autoscaler/planner"

// Result is what became of one of a plan's actions in a cycle.
type Result string

// The results an action can have.
const (
	// Done: the action was carried out (a hold: the node was kept).
	Done Result = "done"
	// DryRun: a dry run planned the action and did not carry it out.
	DryRun Result = "dry_run"
	// Refused: the cloud refused a launch (capacity, quota, see
	// providers.ShouldBackOff), and the pool is backed off; the cloud
	// may have granted part of it, which the next cycle sees.
	Refused Result = "refused"
	// Failed: the action was not carried out, or whether it was is not
	// known yet (a launch's intent is kept for recovery); see Err.
	Failed Result = "failed"
)

// Outcome is what became of one action.
type Outcome struct {
	Result Result
	// Err says why a refused or failed action did not happen, or, for
	// one done, what failed after it (a FollowUpError); nil otherwise.
	Err error
}

// outcomes returns an outcome per action of plan, each r.
func outcomes(plan *planner.Plan, r Result) []Outcome {
	out := make([]Outcome, len(plan.Actions))
	for i := range out {
		out[i].Result = r
	}
	return out
}
