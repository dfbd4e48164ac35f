package loop

import (
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/fleetcast/autoscaler/fleet"
	"github.com/fleetcast/autoscaler/forecast"
)

// follower follows one demand history with a forecast: online follows the
// chosen model; fittedAt is when it was chosen, and fc the last forecast,
// made from a history that ended at fcEnd with fcLast.
type follower struct {
	online   *forecast.Online
	fittedAt time.Time
	fc       forecast.Forecast
	fcEnd    time.Time
	fcLast   float64
}

// forecast follows the history h with the chosen model, choosing and
// calibrating it again once a day, and while the history was too short
// to choose, each time it gains a step. A forecast is made again only
// when the history changes: a step ends, or the peak of the one in
// progress rises. It carries the levels settings' pools are bought to
// (fleet.Settings.Quantiles).
func (f *follower) forecast(h fleet.Series, now time.Time, set *fleet.Settings, log hclog.Logger) forecast.Forecast {
	if len(h.Values) == 0 {
		return forecast.Forecast{}
	}
	end, last := h.End(), h.Values[len(h.Values)-1]
	grown := !end.Equal(f.fcEnd)
	refit := f.online == nil || now.Sub(f.fittedAt) >= forecast.Day || (f.online.Model() == "" && grown)
	if !refit && !grown && last == f.fcLast {
		return f.fc
	}
	if refit {
		// The levels the planner buys the pools for, read at each refit:
		// simulate writes its pools into the config after New.
		levels, err := forecast.Levels(set.Quantiles()...)
		if err != nil {
			log.Warn("no forecast; planning on current demand", "error", err)
			return forecast.Forecast{}
		}
		o, err := forecast.NewOnline(h, set.Forecast.Horizon, levels)
		if err != nil {
			log.Warn("no forecast; planning on current demand", "error", err)
			return forecast.Forecast{}
		}
		f.online, f.fittedAt = o, now
	}
	fc, err := f.online.Forecast(h)
	if err != nil {
		f.online = nil
		log.Warn("no forecast this cycle; planning on current demand", "error", err)
		return forecast.Forecast{}
	}
	f.fc, f.fcEnd, f.fcLast = fc, end, last
	return fc
}
