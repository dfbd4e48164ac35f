package aws

import (
	"github.com/hashicorp/hcl/v2"

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
