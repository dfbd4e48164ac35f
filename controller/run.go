package controller

import (
	"context"
	"errors"
	"time"

	"github.com/fleetcast/autoscaler/loop"
)

// RunOptions pace Run's cycles.
type RunOptions struct {
	// Every is the real time between cycles; default the config's
	// controller.interval (a simulated cloud's clock runs faster).
	Every time.Duration
	// For stops Run once this much time has passed on the controller's
	// clock; 0 runs until the context is done.
	For time.Duration
	// Immediately runs the first cycle at once, not an interval in (a
	// live controller plans at once).
	Immediately bool
	// Before, if set, runs before each cycle, with its context: a
	// simulated world moves its clock and its workload on. An error ends
	// Run.
	Before func(ctx context.Context) error
	// After, if set, is given each cycle's time (as the cycle began),
	// result and error.
	After func(now time.Time, r loop.CycleResult, err error)
	// StopAtOnce ends the cycle in progress when ctx ends, rather than
	// letting it finish: a leader whose lease has lapsed stops acting at
	// once (its writes are refused by then in any case).
	StopAtOnce bool
}

// Run runs cycles until ctx is done or o.For has passed, and returns nil
// then; an error from o.Before ends it early. A cycle runs to its end even
// when ctx is done mid-way: every cloud change it starts is journaled and
// completed. Each cycle is bounded (CycleTimeout), so a cloud that hangs
// cannot stall the controller; an interrupted change is settled by the
// next cycle's recovery. A cycle's error is the cycle's: it is logged and
// given to o.After, and the next cycle runs.
func (c *Controller) Run(ctx context.Context, o RunOptions) error {
	every := o.Every
	if every <= 0 {
		every = c.ctl.Interval
	}
	tick := time.NewTicker(every)
	defer tick.Stop()
	// The books of who used what are written whole when the loop stops.
	defer c.flushUsage()
	start := c.now()
	for first := true; o.For == 0 || c.now().Sub(start) < o.For; first = false {
		if !o.Immediately || !first {
			select {
			case <-ctx.Done():
				return nil
			case <-tick.C:
			}
		}
		parent := context.WithoutCancel(ctx)
		if o.StopAtOnce {
			parent = ctx
		}
		cctx, cancel := context.WithTimeout(parent, CycleTimeout(c.ctl.Interval))
		if o.Before != nil {
			if err := o.Before(cctx); err != nil {
				cancel()
				return err
			}
		}
		at := c.now()
		r, err := c.RunCycle(cctx)
		cancel()
		if err != nil && !errors.Is(err, context.Canceled) {
			c.log.Warn("cycle", "error", err)
		}
		if o.After != nil {
			o.After(at, r, err)
		}
	}
	return nil
}

// CycleTimeout bounds one cycle of the given interval: two intervals, and
// at least two minutes.
func CycleTimeout(interval time.Duration) time.Duration { return max(2*interval, 2*time.Minute) }
