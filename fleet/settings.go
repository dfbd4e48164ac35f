package fleet

import (
	"slices"
	"time"
)

// The providers a pool may name (Pool.Provider).
const (
	ProviderAWS    = "aws"
	ProviderGCP    = "gcp"
	ProviderSim    = "sim"
	ProviderPlugin = "plugin"
)

// ForecastSettings are how demand is forecast (the config's `forecast`
// block).
type ForecastSettings struct {
	// Step is the resolution of the demand history and forecast.
	Step time.Duration
	// Horizon is how far ahead the forecast reaches. It must cover the
	// longest pool lead time plus the scale-in hysteresis.
	Horizon time.Duration
	// Quantile, when set (in (0, 1)), is the demand quantile the planner
	// provisions every pool for; 0 chooses each pool's by expected cost
	// (QuantileFor).
	Quantile float64
	// WaitValuePerGPUHour is what a GPU-hour of waiting costs the fleet's
	// users, in dollars: with the pools' prices it sets how far up the
	// forecast's distribution capacity is bought (QuantileFor).
	WaitValuePerGPUHour float64
	// History is how much demand history the forecaster and the reserved
	// baseline recommendation use.
	History time.Duration
	// Hysteresis is how long beyond the longest burst lead time capacity
	// must be forecast unneeded before it is scaled in.
	Hysteresis time.Duration
}

// DrainSettings are how nodes are emptied safely (the config's `drain`
// block).
type DrainSettings struct {
	// CheckpointMaxAge: a node is drained only if each job on it
	// checkpointed within this age.
	CheckpointMaxAge time.Duration
	// Timeout: a drain whose jobs have not all checkpointed by then is
	// cancelled and the node kept.
	Timeout time.Duration
	// Signal is sent by the agent to a job's processes to ask for a
	// checkpoint, e.g. SIGUSR1.
	Signal string
	// LongRunningAfter: a job older than this is long-running.
	LongRunningAfter time.Duration
}

// Limits are bounds the planner never crosses (the config's `limits`
// block).
type Limits struct {
	// MaxGPUs bounds the GPUs of the whole fleet; 0 means no bound.
	MaxGPUs int
	// MaxSpendPerHour bounds the fleet's cost per hour in USD, each
	// reservation counted whole; 0 means no bound.
	MaxSpendPerHour float64
	// MaxScaleInPerCycle bounds the nodes one cycle starts draining.
	MaxScaleInPerCycle int
	// ScaleInShare bounds the share of a pool's nodes whose drains start
	// within any ScaleInWindow (rounded down, but at least one node), so
	// a bad forecast or a bug cannot empty a pool at once.
	ScaleInShare float64
	// ScaleInWindow is the window ScaleInShare applies to.
	ScaleInWindow time.Duration
	// SilentShareHalt stops all scale-in while more than this share of the
	// fleet's ready nodes have silent agents (a network fault, not idleness).
	SilentShareHalt float64
	// ScaleInDelayAfterLaunch puts scale-in for demand off for this long
	// after the fleet's latest launch (Cluster Autoscaler's
	// scale-down-delay-after-add), so that a node is never drained before
	// it could take the work it was launched for; 0 turns it off.
	ScaleInDelayAfterLaunch time.Duration
	// ScaleInUnneededTime is how long capacity must have been unneeded
	// before scale-in for demand removes it (Cluster Autoscaler's
	// scale-down-unneeded-time): an idle node is drained once idle this
	// long, and the fleet keeps the GPUs its demand peaked at over this
	// long past; 0 turns it off.
	ScaleInUnneededTime time.Duration
}

// Settings are the planner's inputs besides the fleet's state and the
// forecast: the pools and the forecast, drain and limit settings, as a
// config fills them.
type Settings struct {
	Pools    []Pool
	Forecast ForecastSettings
	Drain    DrainSettings
	Limits   Limits
	// AgentTimeout: a node whose agent has not reported for this long is
	// silent and never treated as idle.
	AgentTimeout time.Duration
	// Tiers are the classes of service, by rank (the config's tier
	// blocks); none: all demand is priced alike, at
	// Forecast.WaitValuePerGPUHour.
	Tiers []Tier
	// Teams are the teams the config names (its team blocks): their
	// reserved shares and burst budgets. None: no team has either.
	Teams []Team
}

// MaxFleetGPUs is the most GPUs the fleet may hold: every pool at its max,
// bounded by Limits.MaxGPUs; math.MaxInt where that overflows.
func (s *Settings) MaxFleetGPUs() int {
	total := 0
	for i := range s.Pools {
		total = SatAdd(total, SatMul(s.Pools[i].Max, s.Pools[i].GPUsPerNode))
	}
	if s.Limits.MaxGPUs > 0 && s.Limits.MaxGPUs < total {
		return s.Limits.MaxGPUs
	}
	return total
}

// The quantiles QuantileFor chooses among: the forecast's calibrated
// levels reach from 0.1 to 0.99.
const (
	MinCostQuantile = 0.1
	MaxCostQuantile = 0.99
)

// QuantileFor is the demand quantile the planner provisions pool p for:
// Quantile when it is set, else the level that minimises the expected cost
// of each GPU bought for the forecast one lead time L ahead, a newsvendor
// choice. A GPU bought and not needed is paid for while it boots and until
// scale-in may release it, about L + Hysteresis at the pool's price per
// GPU-hour c; a GPU needed and not bought makes a job wait about one lead
// time, until the launch the shortfall then causes is ready, at
// WaitValuePerGPUHour v. Buying up to the quantile
//
//	q = v*L / (v*L + c*(L + Hysteresis))
//
// balances the two, kept within [MinCostQuantile, MaxCostQuantile]. A
// cheaper pool, or a faster one, is bought further up the distribution.
func (f *ForecastSettings) QuantileFor(p *Pool) float64 {
	if f.Quantile > 0 {
		return f.Quantile
	}
	wait := f.WaitValuePerGPUHour * p.LeadTime.Hours()
	idle := p.PricePerGPUHour() * (p.LeadTime + f.Hysteresis).Hours()
	if !(wait+idle > 0) {
		// Nothing to weigh (free capacity), or a price that is not a
		// number: as high as the forecast goes.
		return MaxCostQuantile
	}
	return min(max(wait/(wait+idle), MinCostQuantile), MaxCostQuantile)
}

// Quantiles are the quantiles the planner provisions the burst pools for
// (QuantileFor; with tiers, each tier's, TierQuantile), ascending, each
// once: the levels a forecast must carry.
func (s *Settings) Quantiles() []float64 {
	var out []float64
	for i := range s.Pools {
		p := &s.Pools[i]
		if p.Capacity == Reserved {
			continue
		}
		if len(s.Tiers) == 0 {
			out = append(out, s.Forecast.QuantileFor(p))
		}
		for k := range s.Tiers {
			if q := s.Forecast.TierQuantile(&s.Tiers[k], p); q > 0 {
				out = append(out, q)
			}
		}
	}
	if len(out) == 0 && s.Forecast.Quantile > 0 {
		out = append(out, s.Forecast.Quantile)
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// Pool returns the pool of s called name, or nil.
func (s *Settings) Pool(name string) *Pool { return PoolNamed(s.Pools, name) }

// PoolNamed returns the pool of pools called name, or nil.
func PoolNamed(pools []Pool, name string) *Pool {
	for i := range pools {
		if pools[i].Name == name {
			return &pools[i]
		}
	}
	return nil
}

// DefaultWaitValue is forecast.wait_value_per_gpu_hour's default: $500
// for a GPU-hour of waiting, about 70 times an on-demand H100's price per
// GPU-hour. With the 10-minute lead times and 30-minute hysteresis of the
// examples it buys on-demand GPUs to about the forecast's 95th
// percentile and spot ones to about its 98th (fleet.ForecastSettings.QuantileFor),
// the levels GPU fleets are commonly provisioned to.
const DefaultWaitValue = 500

// DefaultSettings are the forecast, drain and limit blocks' defaults and
// the agent timeout's (config.Defaults): the planner's settings of a
// fleet with no pools yet.
func DefaultSettings() Settings {
	return Settings{
		Forecast: ForecastSettings{
			Step:    10 * time.Minute,
			Horizon: 2 * time.Hour,
			// No quantile: each pool's by expected cost, a waiting
			// GPU-hour valued at DefaultWaitValue.
			WaitValuePerGPUHour: DefaultWaitValue,
			History:             14 * 24 * time.Hour,
			Hysteresis:          30 * time.Minute,
		},
		Drain: DrainSettings{
			CheckpointMaxAge: 30 * time.Minute,
			Timeout:          20 * time.Minute,
			Signal:           "SIGUSR1",
			LongRunningAfter: time.Hour,
		},
		Limits: Limits{
			MaxScaleInPerCycle: 10,
			ScaleInShare:       0.5,
			ScaleInWindow:      10 * time.Minute,
			SilentShareHalt:    0.3,
			// Cluster Autoscaler's defaults (scale-down-delay-after-add,
			// scale-down-unneeded-time).
			ScaleInDelayAfterLaunch: 10 * time.Minute,
			ScaleInUnneededTime:     10 * time.Minute,
		},
		AgentTimeout: 3 * time.Minute,
	}
}
