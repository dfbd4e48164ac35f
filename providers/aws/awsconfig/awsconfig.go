// Package awsconfig decodes an AWS pool's `aws` block in the fleet
// config into the provider's settings (aws.Settings): the config knows the
// block's syntax, the provider only its settings.
package awsconfig

import (
	"strings"

	"github.com/hashicorp/hcl/v2"

	"github.com/fleetcast/autoscaler/config"
	"github.com/fleetcast/autoscaler/fleet"
	"github.com/fleetcast/autoscaler/providers/aws"
)

// Block is the provider's block, for providers/registry: an aws pool's
// `aws` block.
var Block = config.ProviderBlock{Name: fleet.ProviderAWS, Decode: decodeBlock}

// decodeBlock decodes a pool's `aws` block with decode and checks it
// (the Block's Decode).
func decodeBlock(in config.ProviderInput, pool fleet.Pool, decode config.Decoder) (fleet.ProviderSettings, hcl.Diagnostics) {
	block := in.Block
	s := aws.Settings{DefRange: block.DefRange}
	decode(block.Body, &s)
	return s, validate(&s, pool)
}

// validate checks the settings together and against the pool: one of
// asg, asg_tag and launch_template; the template's options only with a
// template; a reservation's ID; spot_price_lookup only on a spot pool.
// Every diagnostic points at the attribute's value.
func validate(s *aws.Settings, pool fleet.Pool) hcl.Diagnostics {
	var diags hcl.Diagnostics
	invalid := func(at hcl.Range, format string, args ...any) {
		diags = append(diags, config.InvalidValue(at, format, args...))
	}
	type attr struct {
		name, value string
		at          hcl.Range
	}
	given := func(a hcl.Range) bool { return a.Filename != "" }
	for _, a := range []attr{
		{"asg", s.ASG, s.ASGAt}, {"asg_tag", s.ASGTag, s.ASGTagAt}, {"launch_template", s.LaunchTemplate, s.LaunchTemplateAt},
		{"launch_template_version", s.LaunchTemplateVersion, s.LaunchTemplateVersionAt}, {"subnet_id", s.SubnetID, s.SubnetIDAt},
		{"capacity_reservation_id", s.CapacityReservationID, s.CapacityReservationAt}, {"endpoint", s.Endpoint, s.EndpointAt},
	} {
		if given(a.at) && a.value == "" {
			invalid(a.at, "%s must not be empty.", a.name)
		}
	}
	var chosen []hcl.Range
	for _, at := range []hcl.Range{s.ASGAt, s.ASGTagAt, s.LaunchTemplateAt} {
		if given(at) {
			chosen = append(chosen, at)
		}
	}
	switch {
	case len(chosen) == 0:
		diags = append(diags, &hcl.Diagnostic{Severity: hcl.DiagError, Summary: "Missing ASG or launch template",
			Detail: "An aws block needs asg (the Auto Scaling group's name), asg_tag (a KEY=VALUE tag that finds it) " +
				"or launch_template (to run instances directly, e.g. in a capacity reservation).",
			Subject: s.DefRange.Ptr()})
	case len(chosen) > 1:
		invalid(chosen[1], "Set only one of asg, asg_tag and launch_template.")
	}
	if s.ASGTag != "" {
		if k, _, ok := strings.Cut(s.ASGTag, "="); !ok || k == "" {
			invalid(s.ASGTagAt, "asg_tag must be KEY=VALUE, e.g. \"fleetcast/pool=train-burst\", got %q.", s.ASGTag)
		}
	}
	if !given(s.LaunchTemplateAt) {
		for _, a := range []attr{{"launch_template_version", "", s.LaunchTemplateVersionAt}, {"subnet_id", "", s.SubnetIDAt}, {"capacity_reservation_id", "", s.CapacityReservationAt}} {
			if given(a.at) {
				invalid(a.at, "%s applies only with launch_template (an Auto Scaling group takes it from its own launch template).", a.name)
			}
		}
	}
	if cr := s.CapacityReservationID; cr != "" && !strings.HasPrefix(cr, "cr-") {
		invalid(s.CapacityReservationAt, "capacity_reservation_id must be a capacity reservation ID such as \"cr-0123456789abcdef0\", got %q.", cr)
	}
	if s.CapacityBlock && !given(s.CapacityReservationAt) {
		invalid(s.CapacityBlockAt, "capacity_block needs capacity_reservation_id, the block's reservation.")
	}
	// A pool whose capacity was invalid has none; it is reported already.
	if s.SpotPriceLookup && pool.Capacity != "" && pool.Capacity != fleet.Spot {
		invalid(s.SpotPriceLookupAt, "spot_price_lookup applies only to a pool with capacity = \"spot\".")
	}
	return diags
}
