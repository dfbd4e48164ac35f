package controller

import (
	"github.com/fleetcast/autoscaler/loop"
	"github.com/fleetcast/autoscaler/planner"
)

// CycleResult is a cycle's plan and what became of each of its actions.
type CycleResult struct {
	Plan planner.Plan
	// Outcomes[i] is what became of Plan.Actions[i].
	Outcomes []loop.Outcome
}
