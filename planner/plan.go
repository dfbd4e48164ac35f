// Package planner decides what to do with a fleet: given its state, a demand
// forecast, the config and the time, it returns a Plan of actions, each with
// a reason a person understands. It is pure: no clock, no cloud, no I/O, so the
// same planner serves the live controller, `plan` and `simulate`.
package planner

import (
	"fmt"
	"strings"
	"time"

	"github.com/fleetcast/autoscaler/fleet"
	"github.com/fleetcast/autoscaler/forecast"
)

// ActionKind is what an action does.
type ActionKind string

// The kinds of action a plan holds, in the order a plan lists them.
const (
	// Terminate removes a node: a drained node whose jobs all checkpointed,
	// or a launching node that missed its provisioning deadline.
	Terminate ActionKind = "terminate"
	// CancelDrain returns a draining node to service after its drain timed out.
	CancelDrain ActionKind = "cancel_drain"
	// Launch adds Count nodes to a pool.
	Launch ActionKind = "launch"
	// Drain starts draining a node: no new work, jobs asked to checkpoint.
	Drain ActionKind = "drain"
	// Hold keeps a node the planner would otherwise remove, and says why.
	Hold ActionKind = "hold"
)

// Action is one step of a plan.
type Action struct {
	Kind ActionKind `json:"kind"`
	Pool string     `json:"pool"`
	// Node is the node acted on; empty for Launch.
	Node string `json:"node,omitempty"`
	// Count is the number of nodes to launch; 0 for other kinds.
	Count int `json:"count,omitempty"`
	// InstanceType and GPUs describe what the action adds or removes.
	InstanceType string `json:"instance_type"`
	GPUs         int    `json:"gpus"`
	// BackOff asks the caller to back the pool off, as after a capacity
	// error (a node missed its provisioning deadline).
	BackOff bool `json:"back_off,omitempty"`
	// Code says why, as a code (the Reason* constants).
	Code Reason `json:"code"`
	// Reason says why, in words.
	Reason string `json:"reason"`
}

// Demand is the fleet's demand now.
type Demand struct {
	// RunningGPUs are held by jobs on nodes (silent nodes count as last reported).
	RunningGPUs int `json:"running_gpus"`
	// PendingGPUs are asked for by jobs not yet placed.
	PendingGPUs int `json:"pending_gpus"`
}

// Total is running plus pending GPUs.
func (d Demand) Total() int { return d.RunningGPUs + d.PendingGPUs }

// Capacity is the fleet's GPUs by node state, before the plan.
type Capacity struct {
	ReadyGPUs     int `json:"ready_gpus"`
	LaunchingGPUs int `json:"launching_gpus"`
	DrainingGPUs  int `json:"draining_gpus"`
	// InterruptedGPUs are on ready nodes the cloud has given notice it
	// will reclaim: not counted as capacity.
	InterruptedGPUs int `json:"interrupted_gpus,omitempty"`
	// SilentNodes are ready or draining nodes whose agent has not reported
	// within the agent timeout (unknown nodes included).
	SilentNodes int `json:"silent_nodes"`
	// FragmentGPUs are the free GPUs of busy ready nodes (nodes whose
	// jobs hold some of their GPUs, as last reported). A job wider than
	// one such node's free GPUs cannot use them, and while jobs are
	// pending none of them can (a pending job is one the scheduler could
	// not place), so pending demand is then provisioned on whole empty
	// nodes.
	FragmentGPUs int `json:"fragment_gpus,omitempty"`
}

// Plan is what the planner decided, and why.
type Plan struct {
	// At is the time the plan was made for.
	At time.Time `json:"at"`
	// Quantile is the forecast quantile scale-in keeps for: the highest of
	// the burst pools' not backed off or failing (each is bought for its
	// own, fleet.ForecastSettings.QuantileFor), or of them all when every
	// one is.
	Quantile float64  `json:"quantile"`
	Actions  []Action `json:"actions"`
	Demand   Demand   `json:"demand"`
	Capacity Capacity `json:"capacity"`
	// CostPerHourBefore is the fleet's cost per hour now; CostPerHourAfter
	// once every action has completed. Reserved pools count their whole
	// reservation (Max nodes) in both, since it is paid whether used or not.
	CostPerHourBefore float64 `json:"cost_per_hour_before"`
	CostPerHourAfter  float64 `json:"cost_per_hour_after"`
	// Baseline is the recommended reserved baseline; nil without a reserved
	// pool or history.
	Baseline *Baseline `json:"baseline,omitempty"`
	// Notes are things the operator should know that are not actions:
	// skipped pools, limits reached, clamped forecasts; each once.
	Notes []Note `json:"notes,omitempty"`
	// UnknownNodes are the nodes this controller did not launch whose
	// agents have never reported healthy GPUs (fleet.Node.Unknown), by ID:
	// never terminated at a deadline nor drained.
	UnknownNodes []string `json:"unknown_nodes,omitempty"`
	// GPUFaultNodes are the ready or draining nodes whose agents could not
	// read their GPUs in their latest report (fleet.Node.GPUFault), by ID:
	// never idle, and drained only when the jobs known on them allow.
	GPUFaultNodes []string `json:"gpu_fault_nodes,omitempty"`
	// Orphans are this fleet's instances of pools the config no longer has
	// (fleet.Node.Orphan), by ID: reaped once idle.
	Orphans []string `json:"orphans,omitempty"`
	// LimitedBy names the fleet limit that held a launch back this cycle
	// ("limits.max_gpus" or "limits.max_spend_per_hour"); empty when none
	// did. A pool's own max is not a fleet limit.
	LimitedBy string `json:"limited_by,omitempty"`
	// ScaleInHalt says why no node is scaled in this cycle, when too many
	// agents are silent at once (limits.silent_share_halt); empty otherwise.
	ScaleInHalt string `json:"scale_in_halt,omitempty"`
	// Forecast is the forecast the plan used, after its values were
	// checked and clamped; nil when the plan was made on current demand.
	Forecast *forecast.Forecast `json:"forecast,omitempty"`
	// Queue is the scheduler's queue and nodes the plan was made with
	// (fleet.State.Queue); nil without one.
	Queue *fleet.Queue `json:"queue,omitempty"`
	// OverBudget are the teams that have spent their burst budget for the
	// day (fleet.Team), in the config's order: nothing this plan buys is
	// for them.
	OverBudget []string `json:"over_budget,omitempty"`
}

// Counts tallies the plan's actions by kind; a launch counts its nodes.
func (p *Plan) Counts() map[ActionKind]int {
	c := make(map[ActionKind]int, 5)
	for i := range p.Actions {
		a := &p.Actions[i]
		if a.Kind == Launch {
			c[a.Kind] += a.Count
		} else {
			c[a.Kind]++
		}
	}
	return c
}

// ListIDs lists up to n of a plan's node IDs (UnknownNodes, Orphans...),
// and how many more there are, for a line of text.
func ListIDs(ids []string, n int) string {
	if len(ids) <= n {
		return strings.Join(ids, ", ")
	}
	return fmt.Sprintf("%s and %d more", strings.Join(ids[:n], ", "), len(ids)-n)
}
