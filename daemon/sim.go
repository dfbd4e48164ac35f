package daemon

import (
	"errors"
	"os"
	"path/filepath"
	"sync/atomic"
	"time"

	"github.com/fleetcast/autoscaler/config"
	"github.com/fleetcast/autoscaler/controller"
	"github.com/fleetcast/autoscaler/fleet"
	"github.com/fleetcast/autoscaler/loop"
	"github.com/fleetcast/autoscaler/providers"
	"github.com/fleetcast/autoscaler/providers/sim"
	"github.com/fleetcast/autoscaler/simfleet"
	"github.com/fleetcast/autoscaler/state"
)

// simClock is simulated time: it moves only when the loop advances it,
// and the API's goroutines read it.
type simClock struct{ ns atomic.Int64 }

func (c *simClock) Now() time.Time      { return time.Unix(0, c.ns.Load()).UTC() }
func (c *simClock) Set(t time.Time)     { c.ns.Store(t.UnixNano()) }
func (c *simClock) Add(d time.Duration) { c.ns.Add(int64(d)) }

// simMode is the local default's simulated world: a clock that runs
// ahead of real time, a simulated cloud saved in the state directory, and
// the synthetic workload.
type simMode struct {
	clock    *simClock
	cloud    *sim.Cloud
	clouds   map[string]providers.Provider
	workload sim.Workload
}

// newSimMode makes the simulated world of cfg's pools, its cloud saved in
// ctl's state directory, its time from start (zero: now).
func newSimMode(cfg *config.Config, ctl fleet.ControllerSettings, store *state.Store, start time.Time) (*simMode, error) {
	// Simulated time runs ahead of real time, from start (or now); a
	// restarted run resumes after the last demand it recorded, so its
	// history never lies in the future.
	if start.IsZero() {
		start = time.Now()
	}
	clock := &simClock{}
	clock.Set(start.UTC().Truncate(time.Minute))
	if last, ok, err := store.LatestDemand(loop.DemandSeries); err != nil {
		return nil, err
	} else if ok && !last.Time.Before(clock.Now()) {
		clock.Set(last.Time.Truncate(time.Minute).Add(ctl.Interval))
	}
	// The simulated cloud outlives the controller, as a real one does: it
	// is saved in the state directory after every change.
	set := cfg.Settings()
	cloudPath := filepath.Join(ctl.StateDir, "sim-cloud.json")
	cloud, err := sim.Load(cloudPath, cfg.Pools, clock.Now)
	if errors.Is(err, os.ErrNotExist) {
		cloud, _ = sim.Generate(set, cfg.Synthetic, clock.Now())
		// Generated at the start time; from here the simulated clock
		// drives it.
		cloud.SetClock(clock.Now)
		err = cloud.SaveTo(cloudPath)
	}
	if err != nil {
		return nil, err
	}
	m := &simMode{clock: clock, cloud: cloud, clouds: map[string]providers.Provider{}, workload: sim.NewWorkload(set, cfg.Synthetic)}
	for _, p := range cfg.Pools {
		m.clouds[p.Name] = cloud
	}
	if err := simfleet.SeedHistory(store, m.workload, clock.Now(), cfg.Forecast.Step, cfg.Forecast.History); err != nil {
		return nil, err
	}
	return m, nil
}

// pendingTo returns the simulated fleet's Pending function: it pushes the
// queued GPUs to the controller as the scheduler "simfleet" would, for any
// pool, as its jobs run on any.
func pendingTo(p *controller.Pending) func(time.Time, int) {
	var line controller.PendingDemand
	return func(now time.Time, gpus int) {
		line.GPUs = gpus
		p.Set(now, controller.DemandPush{Source: "simfleet", Pending: []controller.PendingDemand{line}})
	}
}
