package loop

import (
	"time"

	"github.com/fleetcast/autoscaler/state"
)

// HistoryStore is what an import needs of the books: to record samples of
// a demand series in the steps that hold none yet. *state.Store and
// *state.Memory implement it.
type HistoryStore interface {
	FillDemand(series string, step time.Duration, samples ...state.Sample) (added []state.Sample, kept int, err error)
}

// Import records samples of the fleet's demand (DemandSeries) taken from
// elsewhere, into the forecast steps of length step that hold no sample
// yet: what the books hold wins, and of two samples of one empty step the
// first does (state.Store.FillDemand). It returns the samples it added, in
// the order given, and how many it left out. A sample that is not a finite
// number records nothing.
//
// The loop owns the demand history: it records each cycle's sample and
// prunes what the forecaster no longer needs, and every history brought in
// from outside goes through here (`history import`, the controller's
// Prometheus backfill at start, the simulated cloud's seeding), so no
// other package writes it.
func Import(b HistoryStore, step time.Duration, samples ...state.Sample) (added []state.Sample, kept int, err error) {
	return b.FillDemand(DemandSeries, step, samples...)
}
