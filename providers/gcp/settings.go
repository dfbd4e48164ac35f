// Package gcp is the Google Cloud provider: GPU pools on Compute Engine
// managed instance groups, zonal or regional, driven through the Compute
// Engine REST API (cloud.google.com/go/compute/apiv1).
package gcp

import (
	"strings"

	"github.com/hashicorp/hcl/v2"

	"github.com/fleetcast/autoscaler/config"
	"github.com/fleetcast/autoscaler/fleet"
	"github.com/fleetcast/autoscaler/providers"
)

// Settings are a GCP pool's settings: the attributes of its `gcp` block.
type Settings struct {
	// Project is the Google Cloud project.
	Project string `hcl:"project" json:"project,omitempty"`
	// Zone is a zonal managed instance group's zone; Region a regional
	// one's region. Exactly one is set.
	Zone   string `hcl:"zone,optional" json:"zone,omitempty"`
	Region string `hcl:"region,optional" json:"region,omitempty"`
	// MIG is the managed instance group's name.
	MIG string `hcl:"mig" json:"mig,omitempty"`
	// Endpoint overrides the Compute Engine endpoint; empty for Google's.
	Endpoint string `hcl:"endpoint,optional" json:"endpoint,omitempty"`

	// Where each attribute's value is in the config, for diagnostics.
	ProjectAt  hcl.Range `hcl:"project,attr_value_range" json:"-"`
	ZoneAt     hcl.Range `hcl:"zone,attr_value_range" json:"-"`
	RegionAt   hcl.Range `hcl:"region,attr_value_range" json:"-"`
	MIGAt      hcl.Range `hcl:"mig,attr_value_range" json:"-"`
	EndpointAt hcl.Range `hcl:"endpoint,attr_value_range" json:"-"`
}

// Provider is fleet.ProviderGCP.
func (Settings) Provider() string { return fleet.ProviderGCP }

// A GCP pool's settings say where its instances' identity tokens come from.
var _ providers.IdentityPlace = Settings{}

// IdentityProject is the pool's project: a Compute Engine identity token
// of one of its instances names it (providers.IdentityPlace).
func (s Settings) IdentityProject() string { return s.Project }

// IdentityZone reports whether zone is one the pool's group puts instances
// in: a zonal group's zone, or a zone of a regional group's region
// (us-central1-a of us-central1).
func (s Settings) IdentityZone(zone string) bool {
	return s.Zone == zone || s.Zone == "" && strings.HasPrefix(zone, s.Region+"-")
}

// SettingsOf returns a GCP pool's settings; the zero Settings for a pool
// made without them.
func SettingsOf(pool fleet.Pool) Settings {
	s, _ := pool.Settings.(Settings)
	return s
}

// DecodeBlock decodes a pool's `gcp` block with decode and checks it (a
// config.ProviderBlock's Decode).
func DecodeBlock(in config.ProviderInput, pool fleet.Pool, decode config.Decoder) (fleet.ProviderSettings, hcl.Diagnostics) {
	block := in.Block
	var s Settings
	ok := decode(block.Body, &s)
	if s.ZoneAt.Filename == "" && s.RegionAt.Filename == "" {
		r := block.Body.MissingItemRange()
		return s, hcl.Diagnostics{{Severity: hcl.DiagError, Summary: "Missing required argument",
			Detail: `The argument "zone" or "region" is required: a zonal managed instance group's zone, or a regional one's region.`, Subject: &r}}
	}
	if !ok {
		return s, nil // reported by decode
	}
	return s, s.Validate(pool)
}

// Validate checks that no attribute is empty and that exactly one of zone
// and region is set. Every diagnostic points at the attribute's value, or
// at the block.
func (s *Settings) Validate(pool fleet.Pool) hcl.Diagnostics {
	var diags hcl.Diagnostics
	for _, a := range []struct {
		name, value string
		at          hcl.Range
	}{{"project", s.Project, s.ProjectAt}, {"zone", s.Zone, s.ZoneAt}, {"region", s.Region, s.RegionAt}, {"mig", s.MIG, s.MIGAt}, {"endpoint", s.Endpoint, s.EndpointAt}} {
		if a.at.Filename != "" && a.value == "" {
			diags = append(diags, config.InvalidValue(a.at, "%s must not be empty.", a.name))
		}
	}
	if diags.HasErrors() {
		return diags
	}
	switch {
	case s.Zone != "" && s.Region != "":
		diags = append(diags, config.InvalidValue(s.RegionAt, "set zone (a zonal managed instance group) or region (a regional one), not both."))
	}
	return diags
}
