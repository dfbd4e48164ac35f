package config

import (
	"fmt"

	"github.com/hashicorp/hcl/v2"

	"github.com/fleetcast/autoscaler/fleet"
)

// ProviderBlock is what Parse needs of one provider: its name, which is
// also the type of its pools' provider block, and that block's decoder.
// Each provider registers its own in providers/registry.
type ProviderBlock struct {
	// Name is the provider's name: a pool's provider attribute, and its
	// block's type unless BlockType says another.
	Name string
	// BlockType is the type of its pools' block when it is not Name (a
	// plugin pool's `target` block).
	BlockType string
	// Attribute is a pool attribute its pools may set beside the block
	// (a plugin pool's `plugin`, naming its plugin); empty for none.
	Attribute string
	// Optional lets a pool of the provider leave its block out; Decode
	// then gets a nil block and gives the defaults.
	Optional bool
	// Decode decodes a pool's block (and Attribute, nil when the pool
	// does not set it) into the provider's typed settings, with decode,
	// and checks them, against the pool's other fields too: a field the
	// config got wrong is zero in pool, and is reported already. The
	// diagnostics it returns are its checks', each pointing at the value
	// it refuses; those on a value decode refused are dropped.
	Decode func(in ProviderInput, pool fleet.Pool, decode Decoder) (fleet.ProviderSettings, hcl.Diagnostics)
}

// ProviderInput is what a pool gives its provider's decoder: its block
// and its provider attribute, each nil when the pool has none.
type ProviderInput struct {
	Block     *hcl.Block
	Attribute *hcl.Attribute
}

// blockType is the type of the provider's pools' block.
func (p ProviderBlock) blockType() string {
	if p.BlockType != "" {
		return p.BlockType
	}
	return p.Name
}

// InvalidValue is the "Invalid value" error on the value at r, as every
// semantic check reports one.
func InvalidValue(r hcl.Range, format string, args ...any) *hcl.Diagnostic {
	return &hcl.Diagnostic{Severity: hcl.DiagError, Summary: "Invalid value", Detail: fmt.Sprintf(format, args...), Subject: r.Ptr()}
}

// Decoder decodes a block's body into val, a pointer to a struct with
// gohcl tags, as Parse decodes its own blocks: with gohcl, after refusing
// the values no attribute may hold (not constant, null, a number out of
// range), and with gohcl's type errors made to name the attribute and
// point at its whole value. Its diagnostics go to Parse's; it reports
// whether there were none.
type Decoder func(body hcl.Body, val any) bool
