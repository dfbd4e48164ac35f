package aws

import (
	"strings"

	"github.com/hashicorp/hcl/v2"

	"github.com/fleetcast/autoscaler/config"
	"github.com/fleetcast/autoscaler/fleet"
)

// Settings are an AWS pool's settings: the attributes of its `aws` block.
// A pool is an Auto Scaling group, named (ASG) or found by a tag (ASGTag),
// or instances run directly from a launch template (LaunchTemplate), e.g.
// in a capacity reservation; exactly one of the three is set.
type Settings struct {
	// ASG is the Auto Scaling group's name.
	ASG string `hcl:"asg,optional" json:"asg,omitempty"`
	// ASGTag is a KEY=VALUE tag that finds the group.
	ASGTag string `hcl:"asg_tag,optional" json:"asg_tag,omitempty"`
	// LaunchTemplate is the launch template's name or ID (lt-...).
	LaunchTemplate string `hcl:"launch_template,optional" json:"launch_template,omitempty"`
	// LaunchTemplateVersion is the template's version; empty for $Default.
	LaunchTemplateVersion string `hcl:"launch_template_version,optional" json:"launch_template_version,omitempty"`
	// SubnetID is the subnet launched instances go in; empty for the
	// template's.
	SubnetID string `hcl:"subnet_id,optional" json:"subnet_id,omitempty"`
	// CapacityReservationID (cr-...) targets a capacity reservation.
	CapacityReservationID string `hcl:"capacity_reservation_id,optional" json:"capacity_reservation_id,omitempty"`
	// CapacityBlock says the reservation is an EC2 Capacity Block for ML.
	CapacityBlock bool `hcl:"capacity_block,optional" json:"capacity_block,omitempty"`
	// SpotPriceLookup replaces the pool's price with the current spot price
	// at start (spot pools only).
	SpotPriceLookup bool `hcl:"spot_price_lookup,optional" json:"spot_price_lookup,omitempty"`
	// Endpoint overrides the AWS endpoint (a local emulator); empty for AWS.
	Endpoint string `hcl:"endpoint,optional" json:"endpoint,omitempty"`

	// Where each attribute's value is in the config, for diagnostics; the
	// zero Range where it is absent.
	DefRange                hcl.Range `json:"-"`
	ASGAt                   hcl.Range `hcl:"asg,attr_value_range" json:"-"`
	ASGTagAt                hcl.Range `hcl:"asg_tag,attr_value_range" json:"-"`
	LaunchTemplateAt        hcl.Range `hcl:"launch_template,attr_value_range" json:"-"`
	LaunchTemplateVersionAt hcl.Range `hcl:"launch_template_version,attr_value_range" json:"-"`
	SubnetIDAt              hcl.Range `hcl:"subnet_id,attr_value_range" json:"-"`
	CapacityReservationAt   hcl.Range `hcl:"capacity_reservation_id,attr_value_range" json:"-"`
	CapacityBlockAt         hcl.Range `hcl:"capacity_block,attr_value_range" json:"-"`
	SpotPriceLookupAt       hcl.Range `hcl:"spot_price_lookup,attr_value_range" json:"-"`
	EndpointAt              hcl.Range `hcl:"endpoint,attr_value_range" json:"-"`
}

// Provider is fleet.ProviderAWS.
func (Settings) Provider() string { return fleet.ProviderAWS }

// SettingsOf returns an AWS pool's settings; the zero Settings for a pool
// made without them.
func SettingsOf(pool fleet.Pool) Settings {
	s, _ := pool.Settings.(Settings)
	return s
}

// DecodeBlock decodes a pool's `aws` block with decode and checks it (a
// config.ProviderBlock's Decode).
func DecodeBlock(in config.ProviderInput, pool fleet.Pool, decode config.Decoder) (fleet.ProviderSettings, hcl.Diagnostics) {
	block := in.Block
	s := Settings{DefRange: block.DefRange}
	decode(block.Body, &s)
	return s, s.Validate(pool)
}

// Validate checks the settings together and against the pool: one of
// asg, asg_tag and launch_template; the template's options only with a
// template; a reservation's ID; spot_price_lookup only on a spot pool.
// Every diagnostic points at the attribute's value.
func (s *Settings) Validate(pool fleet.Pool) hcl.Diagnostics {
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
