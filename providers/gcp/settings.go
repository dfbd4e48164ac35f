// Package gcp is the Google Cloud provider: GPU pools on Compute Engine
// managed instance groups. So far it holds a pool's settings, which the
// config decodes and checks; this build does not drive GCP pools yet, and
// `validate`, `plan` and `run` say so.
package gcp

import (
	"github.com/hashicorp/hcl/v2"

	"github.com/fleetcast/autoscaler/config"
	"github.com/fleetcast/autoscaler/fleet"
)

// Settings are a GCP pool's settings: the attributes of its `gcp` block.
type Settings struct {
	// Project is the Google Cloud project.
	Project string `hcl:"project" json:"project,omitempty"`
	// Zone is the managed instance group's zone.
	Zone string `hcl:"zone" json:"zone,omitempty"`
	// MIG is the managed instance group's name.
	MIG string `hcl:"mig" json:"mig,omitempty"`
	// Endpoint overrides the Compute Engine endpoint; empty for Google's.
	Endpoint string `hcl:"endpoint,optional" json:"endpoint,omitempty"`

	// Where each attribute's value is in the config, for diagnostics.
	ProjectAt  hcl.Range `hcl:"project,attr_value_range" json:"-"`
	ZoneAt     hcl.Range `hcl:"zone,attr_value_range" json:"-"`
	MIGAt      hcl.Range `hcl:"mig,attr_value_range" json:"-"`
	EndpointAt hcl.Range `hcl:"endpoint,attr_value_range" json:"-"`
}

// Provider is fleet.ProviderGCP.
func (Settings) Provider() string { return fleet.ProviderGCP }

// SettingsOf returns a GCP pool's settings; the zero Settings for a pool
// made without them.
func SettingsOf(pool fleet.Pool) Settings {
	s, _ := pool.Settings.(Settings)
	return s
}

// DecodeBlock decodes a pool's `gcp` block with decode and checks it (a
// config.ProviderBlock's Decode).
func DecodeBlock(block *hcl.Block, pool fleet.Pool, decode config.Decoder) (fleet.ProviderSettings, hcl.Diagnostics) {
	var s Settings
	decode(block.Body, &s)
	return s, s.Validate(pool)
}

// Validate checks that no attribute is empty. Every diagnostic points at
// the attribute's value.
func (s *Settings) Validate(fleet.Pool) hcl.Diagnostics {
	var diags hcl.Diagnostics
	for _, a := range []struct {
		name, value string
		at          hcl.Range
	}{{"project", s.Project, s.ProjectAt}, {"zone", s.Zone, s.ZoneAt}, {"mig", s.MIG, s.MIGAt}, {"endpoint", s.Endpoint, s.EndpointAt}} {
		if a.at.Filename != "" && a.value == "" {
			diags = append(diags, config.InvalidValue(a.at, "%s must not be empty.", a.name))
		}
	}
	return diags
}
