// Package gcp is the Google Cloud provider: GPU pools on Compute Engine
// managed instance groups, zonal or regional, driven through the Compute
// Engine REST API (cloud.google.com/go/compute/apiv1).
package gcp

import (
	"strings"

	"github.com/hashicorp/hcl/v2"

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
