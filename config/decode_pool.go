package config

import (
	"math"
	"sort"
	"strings"
	"time"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/gohcl"

	"github.com/fleetcast/autoscaler/fleet"
)

// The bounds of a pool's size and nodes: more is a mistake (a typo, a
// number meant for another field), and would make the fleet's GPU count
// overflow.
const (
	// MaxPoolNodes bounds a pool's min and max.
	MaxPoolNodes = 1_000_000
	// MaxGPUsPerNode bounds gpus_per_node (a rack-scale system counted as
	// one node has 72).
	MaxGPUsPerNode = 1024
)

// decodePoolBlock decodes a pool block, with its header.
func (d *decoder) decodePoolBlock(b *hcl.Block) *poolBody {
	pb := &poolBody{Name: b.Labels[0], NameRange: b.LabelRanges[0], DefRange: b.DefRange}
	d.decode(b.Body, pb)
	return pb
}

// providerNames are the names of the providers Parse was given, sorted.
func (d *decoder) providerNames() []string {
	names := make([]string, 0, len(d.providers))
	for _, p := range d.providers {
		names = append(names, p.Name)
	}
	sort.Strings(names)
	return names
}

// provider returns the ProviderBlock of the named provider.
func (d *decoder) provider(name string) (ProviderBlock, bool) {
	for _, p := range d.providers {
		if p.Name == name {
			return p, true
		}
	}
	return ProviderBlock{}, false
}

// decodePool checks a pool's fields and decodes its provider block with
// its provider's decoder. A field the file got wrong is left zero.
func (d *decoder) decodePool(b *poolBody) fleet.Pool {
	p := fleet.Pool{
		Name:     b.Name,
		Provider: b.Provider,
		Region:   b.Region, Zones: b.Zones, InstanceType: b.InstanceType, GPUModel: b.GPUModel,
		Capacity: poolDefaults.Capacity,
		LeadTime: poolDefaults.LeadTime,
	}
	if p.Name == "" {
		d.errorf(b.NameRange, "Invalid pool name", "A pool name must not be empty.")
	}
	kind, known := d.provider(b.Provider)
	provSt := d.state(b.ProviderAt)
	if provSt == set && !known {
		d.errorf(b.ProviderAt, "Unknown provider", "Unknown provider %q; the known providers are %s.%s",
			b.Provider, strings.Join(d.providerNames(), ", "), didYouMean(b.Provider, d.providerNames()))
		d.refuse(b.ProviderAt)
		provSt = bad
	}
	if provSt != set {
		p.Provider = ""
	}
	d.nonEmpty("instance_type", b.InstanceType, b.InstanceTypeAt)
	if d.between("gpus_per_node", b.GPUsPerNode, 1, MaxGPUsPerNode, b.GPUsPerNodeAt) == set {
		p.GPUsPerNode = b.GPUsPerNode
	}
	switch c := fleet.CapacityType(b.Capacity); d.check(b.CapacityAt, c.Valid(),
		"Unknown capacity %q; capacity must be %q, %q or %q.%s", b.Capacity, fleet.Reserved, fleet.OnDemand, fleet.Spot,
		didYouMean(b.Capacity, []string{string(fleet.Reserved), string(fleet.OnDemand), string(fleet.Spot)})) {
	case set:
		p.Capacity = c
	case bad:
		p.Capacity = ""
	}
	if d.check(b.PricePerHourAt, b.PricePerHour >= 0, "price_per_hour must not be negative, got %g.", b.PricePerHour) == set {
		p.PricePerHour = b.PricePerHour
	}
	leadSt := d.duration("lead_time", b.LeadTime, b.LeadTimeAt, false, &p.LeadTime)
	switch d.duration("provision_timeout", b.ProvisionTimeout, b.ProvisionTimeoutAt, false, &p.ProvisionTimeout) {
	case unset:
		p.ProvisionTimeout = p.LeadTime * time.Duration(poolDefaults.ProvisionTimeoutFactor)
		if p.ProvisionTimeout/time.Duration(poolDefaults.ProvisionTimeoutFactor) != p.LeadTime {
			p.ProvisionTimeout = math.MaxInt64 // the product overflowed
		}
	case set:
		if leadSt != bad && p.ProvisionTimeout < p.LeadTime {
			d.invalid(b.ProvisionTimeoutAt, "provision_timeout (%s) must not be shorter than lead_time (%s).", p.ProvisionTimeout, p.LeadTime)
		}
	}
	minSt := d.between("min", b.Min, 0, MaxPoolNodes, b.MinAt)
	maxSt := d.between("max", b.Max, 1, MaxPoolNodes, b.MaxAt)
	if minSt == set || minSt == unset {
		p.Min = b.Min
	}
	if maxSt == set {
		p.Max = b.Max
	}
	if minSt == set && maxSt == set && p.Min > p.Max {
		d.invalid(b.MinAt, "min (%d) is greater than max (%d).", p.Min, p.Max)
	}
	p.Priority = b.Priority

	// The provider block. The schema names the pool's attributes too, so
	// that a misspelt one gets a suggestion.
	if b.Rest == nil {
		return p
	}
	schema, _ := gohcl.ImpliedBodySchema(b)
	for i := range schema.Attributes {
		schema.Attributes[i].Required = false // decoded already
	}
	byBlock, byAttr := map[string]ProviderBlock{}, map[string]ProviderBlock{}
	for _, name := range d.providerNames() {
		kind, _ := d.provider(name)
		byBlock[kind.blockType()] = kind
		schema.Blocks = append(schema.Blocks, hcl.BlockHeaderSchema{Type: kind.blockType()})
		if kind.Attribute != "" {
			byAttr[kind.Attribute] = kind
			schema.Attributes = append(schema.Attributes, hcl.AttributeSchema{Name: kind.Attribute})
		}
	}
	schema.Blocks = append(schema.Blocks, poolSlurmSchema, poolMIGSchema)
	content, diags := b.Rest.Content(schema)
	d.decoded(diags)
	var in ProviderInput
	for name, attr := range content.Attributes {
		owner, ok := byAttr[name]
		switch {
		case !ok:
			continue // the pool's own, decoded already
		case provSt == set && owner.Name != p.Provider:
			d.errorf(attr.NameRange, "Wrong provider attribute",
				"Pool %q has provider = %q, so it cannot set %s: that is for provider = %q pools.", p.Name, p.Provider, name, owner.Name)
		default:
			in.Attribute = attr
		}
	}
	seen := map[string]*hcl.Block{}
	for _, pb := range content.Blocks {
		if prev, dup := seen[pb.Type]; dup {
			d.errorf(pb.DefRange, "Duplicate "+pb.Type+" block",
				"A %s block was already defined at %s; a pool has one.", pb.Type, defPos(prev.DefRange))
			continue
		}
		seen[pb.Type] = pb
		switch pb.Type {
		case poolSlurmSchema.Type:
			b.slurm = pb
			p.SlurmNodes, b.slurmNodesAt = d.decodePoolSlurm(pb, p)
			continue
		case poolMIGSchema.Type:
			p.MIG = d.decodeMIG(pb, p)
			continue
		}
		if provSt == set && pb.Type != kind.blockType() {
			d.errorf(pb.DefRange, "Wrong provider block",
				"Pool %q has provider = %q, so it cannot have %s block; its settings go in %s block.", p.Name, p.Provider, withArticle(pb.Type), withArticle(kind.blockType()))
			continue
		}
		if provSt != set {
			// The pool's provider is wrong or missing: the block is
			// decoded by its own kind, for its errors.
			if other, ok := byBlock[pb.Type]; ok {
				_, diags := other.Decode(ProviderInput{Block: pb}, p, d.decode)
				d.decoded(diags)
			}
			continue
		}
		in.Block = pb
	}
	if provSt != set {
		return p
	}
	if kind.Attribute != "" && in.Attribute == nil {
		d.errorf(b.ProviderAt, "Missing required argument", "Pool %q has provider = %q and needs %s = ...", p.Name, p.Provider, kind.Attribute)
		if in.Block != nil { // decoded for its own errors
			_, diags := kind.Decode(in, p, d.decode)
			d.decoded(diags)
		}
		return p
	}
	if in.Block == nil && !kind.Optional {
		d.errorf(b.ProviderAt, "Missing provider block", "Pool %q has provider = %q and needs %s block.", p.Name, p.Provider, withArticle(kind.blockType()))
		return p
	}
	settings, diags := kind.Decode(in, p, d.decode)
	d.decoded(diags)
	p.Settings = settings
	return p
}
