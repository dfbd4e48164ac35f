package config

import (
	"github.com/hashicorp/hcl/v2"

	"github.com/fleetcast/autoscaler/fleet"
	"github.com/fleetcast/autoscaler/mig"
)

// decodeMIG decodes pool p's mig block: the GPU instances each of its GPUs
// is partitioned into, which must fit the pool's GPU model (package mig),
// or the layout is refused at its value, saying why.
func (d *decoder) decodeMIG(b *hcl.Block, p fleet.Pool) []string {
	var v migBody
	if !d.decode(b.Body, &v) || d.state(v.LayoutAt) != set {
		return nil
	}
	m, err := mig.Lookup(p.GPUModel)
	if err == nil {
		err = m.Fit(v.Layout)
	}
	if err != nil {
		d.invalid(v.LayoutAt, "layout: %v.", err)
		return nil
	}
	return v.Layout
}
