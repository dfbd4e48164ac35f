package fleet

import "time"

// SimulateSettings are the `simulate` block: what `autoscaler simulate` assumes of
// jobs and of the cloud beyond the pools. Its flags override it.
type SimulateSettings struct {
	// CheckpointInterval is how often jobs checkpoint unless the trace says.
	CheckpointInterval time.Duration
	// SpotInterruptionsPerHour is the rate at which the cloud reclaims each
	// spot node, per node-hour; 0 for none.
	SpotInterruptionsPerHour float64
	// SpotNotice is the warning the cloud gives before reclaiming a spot node.
	SpotNotice time.Duration
	// CheckpointDuration is how long a checkpoint asked for by a drain (or
	// a spot notice passed on as one) takes to be durable; 0 for at once.
	CheckpointDuration time.Duration
	// UnresponsiveJobs is the share of jobs (0 to 1) that ignore a drain
	// and checkpoint only on their own schedule.
	UnresponsiveJobs float64
	// Reservations is how the policies hold reservations: ReservationsConfigured
	// (every policy holds exactly the configured ones for the whole run) or
	// ReservationsAdvised (the predictive policy follows the baseline advice).
	Reservations string
	// AdviceAfter is the history the advised reservation waits for before
	// its first commitment.
	AdviceAfter time.Duration
	// HeadroomGPUs is the headroom policy's buffer: GPUs kept free as whole
	// empty nodes; 0 makes it the reactive policy.
	HeadroomGPUs int
	// HeadroomPlaceholders is the size of the headroom policy's
	// placeholders: PlaceholdersNode (as wide as a node: the buffer is
	// whole empty nodes) or PlaceholdersGPU (one GPU each: the buffer also
	// fills busy nodes' fragments).
	HeadroomPlaceholders string
}

// The values of simulate.headroom_placeholders.
const (
	PlaceholdersNode = "node"
	PlaceholdersGPU  = "gpu"
)

// PlaceholderSizes are the values simulate.headroom_placeholders takes.
var PlaceholderSizes = []string{PlaceholdersNode, PlaceholdersGPU}

// The values of simulate.reservations.
const (
	ReservationsConfigured = "configured"
	ReservationsAdvised    = "advised"
)

// ReservationModes are the values simulate.reservations takes.
var ReservationModes = []string{ReservationsConfigured, ReservationsAdvised}

// SyntheticSettings are the `synthetic` block: the documented generated workload the
// simulated cloud uses for `plan` and `run` when no real data exists. Demand
// follows a daily cycle between BaseGPUs (at PeakHour+12) and PeakGPUs (at
// PeakHour), with noise.
type SyntheticSettings struct {
	// Seed makes the workload and fleet reproducible.
	Seed int64
	// BaseGPUs and PeakGPUs are the trough and peak of the daily cycle;
	// zero means 25% and 75% of the fleet's maximum GPUs.
	BaseGPUs int
	PeakGPUs int
	// PeakHour is the hour of day (UTC, 0-23) of the peak.
	PeakHour int
	// Noise is the relative standard deviation of demand around the cycle.
	Noise float64
}

// DefaultSimulateSettings are the simulate block's defaults
// (config.Defaults), which a simulation's options left zero take.
func DefaultSimulateSettings() SimulateSettings {
	return SimulateSettings{
		CheckpointInterval:   30 * time.Minute,
		SpotNotice:           2 * time.Minute,
		CheckpointDuration:   2 * time.Minute,
		UnresponsiveJobs:     0.02,
		Reservations:         ReservationsConfigured,
		AdviceAfter:          14 * 24 * time.Hour,
		HeadroomGPUs:         128,
		HeadroomPlaceholders: PlaceholdersNode,
	}
}

// DefaultSyntheticSettings are the synthetic block's defaults
// (config.Defaults): its base and peak follow the fleet's size.
func DefaultSyntheticSettings() SyntheticSettings {
	return SyntheticSettings{Seed: 1, PeakHour: 15, Noise: 0.08}
}
