// Package simconfig decodes a simulated pool's `sim` block in the fleet
// config into the simulated cloud's settings (sim.Settings): the config
// knows the block's syntax, the simulated cloud only its settings.
package simconfig

import (
	"github.com/hashicorp/hcl/v2"

	"github.com/fleetcast/autoscaler/config"
	"github.com/fleetcast/autoscaler/fleet"
	"github.com/fleetcast/autoscaler/providers/sim"
)

// Block is the simulated cloud's provider block, for providers/registry:
// a sim pool's `sim` block, which it may leave out.
var Block = config.ProviderBlock{Name: fleet.ProviderSim, Optional: true, Decode: decodeBlock}

// decodeBlock decodes a pool's `sim` block with decode and checks it (the
// Block's Decode); block is nil for a sim pool without one, which takes
// the defaults.
func decodeBlock(in config.ProviderInput, pool fleet.Pool, decode config.Decoder) (fleet.ProviderSettings, hcl.Diagnostics) {
	block := in.Block
	s := sim.Defaults(pool)
	if block == nil {
		return s, nil
	}
	decode(block.Body, &s)
	return s, validate(&s, pool)
}

// validate checks the settings against the pool: capacity and initial not
// negative, initial within the pool's max, an error rate from 0 to 1.
// Every diagnostic points at the attribute's value.
func validate(s *sim.Settings, pool fleet.Pool) hcl.Diagnostics {
	var diags hcl.Diagnostics
	invalid := func(at hcl.Range, format string, args ...any) {
		diags = append(diags, config.InvalidValue(at, format, args...))
	}
	if s.Capacity < 0 {
		invalid(s.CapacityAt, "capacity must be 0 or more, got %d.", s.Capacity)
	}
	switch {
	case s.Initial < 0:
		invalid(s.InitialAt, "initial must be 0 or more, got %d.", s.Initial)
	case pool.Max > 0 && s.Initial > pool.Max: // a max of 0 is invalid, and reported already
		invalid(s.InitialAt, "initial (%d) is greater than the pool's max (%d).", s.Initial, pool.Max)
	}
	if s.ErrorRate < 0 || s.ErrorRate > 1 {
		invalid(s.ErrorRateAt, "capacity_error_rate must be between 0 and 1, got %g.", s.ErrorRate)
	}
	return diags
}
