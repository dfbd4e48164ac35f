// Package gcpconfig decodes a GCP pool's `gcp` block in the fleet
// config into the provider's settings (gcp.Settings): the config knows the
// block's syntax, the provider only its settings.
package gcpconfig

import (
	"github.com/hashicorp/hcl/v2"

	"github.com/fleetcast/autoscaler/config"
	"github.com/fleetcast/autoscaler/fleet"
	"github.com/fleetcast/autoscaler/providers/gcp"
)

// Block is the provider's block, for providers/registry: a gcp pool's
// `gcp` block.
var Block = config.ProviderBlock{Name: fleet.ProviderGCP, Decode: decodeBlock}

// decodeBlock decodes a pool's `gcp` block with decode and checks it
// (the Block's Decode).
func decodeBlock(in config.ProviderInput, pool fleet.Pool, decode config.Decoder) (fleet.ProviderSettings, hcl.Diagnostics) {
	block := in.Block
	var s gcp.Settings
	ok := decode(block.Body, &s)
	if s.ZoneAt.Filename == "" && s.RegionAt.Filename == "" {
		r := block.Body.MissingItemRange()
		return s, hcl.Diagnostics{{Severity: hcl.DiagError, Summary: "Missing required argument",
			Detail: `The argument "zone" or "region" is required: a zonal managed instance group's zone, or a regional one's region.`, Subject: &r}}
	}
	if !ok {
		return s, nil // reported by decode
	}
	return s, validate(&s, pool)
}

// validate checks that no attribute is empty and that exactly one of zone
// and region is set. Every diagnostic points at the attribute's value, or
// at the block.
func validate(s *gcp.Settings, pool fleet.Pool) hcl.Diagnostics {
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
