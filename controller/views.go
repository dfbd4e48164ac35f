package controller

import (
	"time"

	"github.com/fleetcast/autoscaler/fleet"
	"github.com/fleetcast/autoscaler/forecast"
	"github.com/fleetcast/autoscaler/planner"
)

// The API's JSON is views of the controller's types: durations are text
// in the config's syntax ("10m", "14d"; fleet.FormatDurationExact), not
// nanoseconds, and lists are [] when empty, never null. The types keep
// their own JSON (a state snapshot's history step is nanoseconds, which
// `plan -state` reads).

// PlanView is a plan as GET /v1/plan serves it and `plan -json` prints
// it: the plan's JSON, with its actions [] when there are none and its
// forecast a ForecastView.
type PlanView struct {
	*planner.Plan
	Actions  []planner.Action `json:"actions"`
	Forecast *ForecastView    `json:"forecast,omitempty"`
}

// NewPlanView makes p's view.
func NewPlanView(p *planner.Plan) PlanView {
	v := PlanView{Plan: p, Actions: p.Actions, Forecast: NewForecastView(p.Forecast)}
	if v.Actions == nil {
		v.Actions = []planner.Action{}
	}
	return v
}

// ForecastView is a forecast as GET /v1/forecast serves it: its step as
// text, its levels and values [] when empty.
type ForecastView struct {
	*forecast.Forecast
	Step   string      `json:"step"`
	Levels []float64   `json:"levels"`
	Values [][]float64 `json:"values"`
}

// NewForecastView makes f's view; nil for nil.
func NewForecastView(f *forecast.Forecast) *ForecastView {
	if f == nil {
		return nil
	}
	return &ForecastView{Forecast: f, Step: fleet.FormatDurationExact(f.Step), Levels: nonNil(f.Levels), Values: nonNil(f.Values)}
}

// fleetView is GET /v1/fleet: the config's pools and the observed state
// (each node's last_report says how fresh its agent is).
type fleetView struct {
	At           time.Time `json:"at"`
	AgentTimeout string    `json:"agent_timeout"`
	// IdleWindow is the usage block's idle_window: a job idle since
	// longer ago is allocated-idle (fleet.Job.AllocatedIdle).
	IdleWindow string     `json:"idle_window"`
	Pools      []poolView `json:"pools"`
	State      *stateView `json:"state"`
}

// newFleetView is the view of the fleet st at, its jobs allocated-idle by
// window.
func newFleetView(at time.Time, set *fleet.Settings, st *fleet.State, window time.Duration) fleetView {
	v := fleetView{At: at, AgentTimeout: fleet.FormatDurationExact(set.AgentTimeout), IdleWindow: fleet.FormatDurationExact(window),
		Pools: make([]poolView, len(set.Pools))}
	for i := range set.Pools {
		p := &set.Pools[i]
		v.Pools[i] = poolView{Pool: p, LeadTime: fleet.FormatDurationExact(p.LeadTime), ProvisionTimeout: fleet.FormatDurationExact(p.ProvisionTimeout)}
	}
	if st != nil {
		v.State = &stateView{State: st, Pools: nonNil(st.Pools), Nodes: make([]nodeView, len(st.Nodes)), History: newSeriesView(st.History)}
		for i := range st.Nodes {
			v.State.Nodes[i] = newNodeView(&st.Nodes[i], at, window)
		}
		if len(st.Held.Values) > 0 {
			h := newSeriesView(st.Held)
			v.State.Held = &h
		}
	}
	return v
}

// newSeriesView is s with its step as text.
func newSeriesView(s fleet.Series) seriesView {
	return seriesView{Start: s.Start, Step: fleet.FormatDurationExact(s.Step), Values: nonNil(s.Values)}
}

// poolView is a pool with its durations as text.
type poolView struct {
	*fleet.Pool
	LeadTime         string `json:"lead_time"`
	ProvisionTimeout string `json:"provision_timeout"`
}

// stateView is a fleet state with its lists [] when empty and its
// histories' steps as text.
type stateView struct {
	*fleet.State
	Pools   []fleet.PoolStatus `json:"pools"`
	Nodes   []nodeView         `json:"nodes"`
	History seriesView         `json:"history"`
	Held    *seriesView        `json:"held,omitempty"`
}

// nodeView is a node with the GPUs its jobs hold allocated-idle now,
// when any do.
type nodeView struct {
	*fleet.Node
	AllocatedIdle *idleGPUs `json:"allocated_idle,omitempty"`
}

// idleGPUs are GPUs held allocated-idle: before their job's first busy
// reading, and after one.
type idleGPUs struct {
	IdleBeforeExecution int `json:"idle_before_execution_gpus"`
	Stalled             int `json:"stalled_gpus"`
}

func newNodeView(n *fleet.Node, at time.Time, window time.Duration) nodeView {
	v := nodeView{Node: n}
	for i := range n.Jobs {
		j := &n.Jobs[i]
		idle, before := j.AllocatedIdle(at, window)
		if !idle {
			continue
		}
		if v.AllocatedIdle == nil {
			v.AllocatedIdle = &idleGPUs{}
		}
		if before {
			v.AllocatedIdle.IdleBeforeExecution += j.GPUs
		} else {
			v.AllocatedIdle.Stalled += j.GPUs
		}
	}
	return v
}

// seriesView is a series with its step as text.
type seriesView struct {
	Start  time.Time `json:"start"`
	Step   string    `json:"step"`
	Values []float64 `json:"values"`
}

// nonNil is s, or an empty slice for nil.
func nonNil[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}
