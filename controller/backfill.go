package controller

import (
	"context"
	"fmt"
	"time"

	"github.com/fleetcast/autoscaler/fleet"
	"github.com/fleetcast/autoscaler/loop"
	"github.com/fleetcast/autoscaler/state"
)

// DemandHistory is a demand source that can also say what the GPUs in use
// were in the past (PrometheusDemand, with a range query): the controller
// fills its demand history's gaps from it when it starts.
type DemandHistory interface {
	// GPUsInUseOver returns the GPUs in use at every step from start to
	// end, leaving out the times it has no reading for.
	GPUsInUseOver(ctx context.Context, start, end time.Time, step time.Duration) ([]state.Sample, error)
}

// Backfilled is what the controller's start did to fill its demand
// history from its demand source.
type Backfilled struct {
	// Missing is how many steps of the history's window (forecast.history
	// before the start, to the step in progress) held no recorded sample.
	Missing int
	// From and To are the first and last of those steps, the span asked.
	From, To time.Time
	// Added are the samples recorded; Kept counts the source's samples
	// left out, their steps recorded already (what is recorded wins).
	Added []state.Sample
	Kept  int
	// Err is why the source could not be read or the samples not
	// recorded; the controller forecasts from what it records then.
	Err error
}

// String says what the backfill did, in one line.
func (b Backfilled) String() string {
	const at = "2006-01-02 15:04 MST"
	switch {
	case b.Err != nil:
		return fmt.Sprintf("Demand history not backfilled (%d steps missing): %v", b.Missing, b.Err)
	case b.Missing == 0:
		return "Demand history: every step of forecast.history recorded; nothing to backfill"
	case len(b.Added) == 0:
		return fmt.Sprintf("Demand history not backfilled: the demand source has no reading in the %d steps missing, %s to %s",
			b.Missing, b.From.Format(at), b.To.Format(at))
	}
	return fmt.Sprintf("Demand history: %d of %d missing steps backfilled from the demand source, %s to %s",
		len(b.Added), b.Missing, b.Added[0].Time.Format(at), b.Added[len(b.Added)-1].Time.Format(at))
}

// backfill fills the steps of the demand history's window that hold no
// recorded sample with the demand source's past readings, when the config
// asks for it (demand.backfill) and the source has a past (DemandHistory):
// one span from the first step missing to the last, at forecast.step, at
// most forecast.history long. A failure is logged as a warning and counted
// as the demand source's; the controller forecasts from what it records
// then. ok is false when there was nothing to do it with.
func (c *Controller) backfill(ctx context.Context) (b Backfilled, ok bool) {
	h, can := c.source.(DemandHistory)
	if !can || !c.demandBackfill {
		return Backfilled{}, false
	}
	now, step := c.now().UTC(), c.set.Forecast.Step
	cut := now.Add(-c.set.Forecast.History)
	first := cut.Truncate(step)
	if first.Before(cut) {
		first = first.Add(step)
	}
	n := int(now.Truncate(step).Sub(first)/step) + 1
	b = c.fill(ctx, h, first, n)
	switch {
	case b.Err != nil:
		c.metrics.demandSourceErrors.Inc()
		c.log.Warn("demand history not backfilled; the forecast starts from what the controller records", "missing_steps", b.Missing, "error", b.Err)
	case b.Missing > 0 && len(b.Added) == 0:
		c.log.Warn("demand history not backfilled: the demand source has no reading in the steps missing", "missing_steps", b.Missing,
			"from", b.From, "to", b.To)
	case b.Missing > 0:
		c.log.Info("demand history backfilled", "missing_steps", b.Missing, "added", len(b.Added), "kept", b.Kept,
			"from", b.Added[0].Time, "to", b.Added[len(b.Added)-1].Time, "step", fleet.FormatDuration(step))
	}
	return b, true
}

// fill backfills the n steps from first that hold no recorded sample.
func (c *Controller) fill(ctx context.Context, h DemandHistory, first time.Time, n int) Backfilled {
	var b Backfilled
	step := c.set.Forecast.Step
	recorded, err := c.store.Demand(loop.DemandSeries, first)
	if err != nil {
		b.Err = err
		return b
	}
	has := make([]bool, n)
	for _, x := range recorded {
		if k := int(x.Time.Truncate(step).Sub(first) / step); k >= 0 && k < n {
			has[k] = true
		}
	}
	lo, hi := -1, -1
	for k := range n {
		if !has[k] {
			b.Missing++
			hi = k
			if lo < 0 {
				lo = k
			}
		}
	}
	if b.Missing == 0 {
		return b
	}
	b.From, b.To = first.Add(time.Duration(lo)*step), first.Add(time.Duration(hi)*step)
	samples, err := h.GPUsInUseOver(ctx, b.From, b.To, step)
	if err != nil {
		b.Err = err
		return b
	}
	b.Added, b.Kept, b.Err = loop.Import(c.store, step, samples...)
	return b
}
