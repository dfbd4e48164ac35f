package controller

import (
	"encoding/json"

	"github.com/fleetcast/autoscaler/state"
)

// The reads a follower serves from the store: GET /v1/plan, /v1/fleet
// and /v1/forecast, as the leader last answered them.

// SharedViews are the reads putViews writes, by their paths.
var SharedViews = map[string]string{"/v1/plan": "plan", "/v1/fleet": "fleet", "/v1/forecast": "forecast"}

// putViews writes the last cycle's plan, fleet and forecast as the API
// answers them, for the other replicas to serve. A failure is logged: the
// followers serve the views before.
func (c *Controller) putViews() {
	last := c.Last()
	var views []state.View
	add := func(name string, v any) {
		data, err := json.Marshal(v)
		if err != nil {
			c.log.Warn("views: encoding", "view", name, "error", err)
			return
		}
		views = append(views, state.View{Name: name, At: last.At, JSON: data})
	}
	if last.Plan != nil {
		add("plan", NewPlanView(last.Plan))
	}
	if last.State != nil {
		add("fleet", newFleetView(last.At, c.set, last.State, c.usageSet.IdleWindow))
	}
	if last.Forecast != nil {
		add("forecast", NewForecastView(last.Forecast))
	}
	if err := c.store.PutViews(views...); err != nil {
		c.log.Warn("views: writing them for the other replicas", "error", err)
	}
}
