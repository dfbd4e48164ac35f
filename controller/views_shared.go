package controller

import (
	"encoding/json"

	"github.com/fleetcast/autoscaler/state"
)

// The reads a follower serves from the store: GET /v1/plan, /v1/fleet
// and /v1/forecast, as the leader last answered them.

// SharedViews are the reads putViews writes, by their paths.
var SharedViews = map[string]string{"/v1/plan": "plan", "/v1/fleet": "fleet", "/v1/forecast": "forecast"}

// maxView is the largest view kept (etcd takes at most 1.5 MiB a
// request): a larger one is marked for the other replicas to ask the
// leader for.
const maxView = 1 << 20

// putViews writes the last cycle's plan, fleet and forecast as the API
// answers them, for the other replicas to serve: null where the cycle
// made none. A failure is logged: the followers serve the views before.
func (c *Controller) putViews() {
	last := c.Last()
	var views []state.View
	add := func(name string, ok bool, view func() any) {
		v := state.View{Name: name, At: last.At, JSON: json.RawMessage("null")}
		if ok {
			data, err := json.Marshal(view())
			switch {
			case err != nil:
				c.log.Warn("views: encoding", "view", name, "error", err)
				return
			case len(data) > maxView:
				v.Forward = true
			default:
				v.JSON = data
			}
		}
		views = append(views, v)
	}
	add("plan", last.Plan != nil, func() any { return NewPlanView(last.Plan) })
	add("fleet", last.State != nil, func() any { return newFleetView(last.At, c.set, last.State, c.usageSet.IdleWindow) })
	add("forecast", last.Forecast != nil, func() any { return NewForecastView(last.Forecast) })
	if err := c.store.PutViews(views...); err != nil {
		c.log.Warn("views: writing them for the other replicas", "error", err)
	}
}
