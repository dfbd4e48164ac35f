package aws

import (
	"context"
	"fmt"
	"math"
	"slices"
	"strconv"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"

	"github.com/fleetcast/autoscaler/fleet"
	"github.com/fleetcast/autoscaler/providers"
)

// Facts are what EC2 says of a pool's instance type.
type Facts struct {
	// GPUModel is the GPUs' name, e.g. "A100".
	GPUModel string
	// GPUs is the number of GPUs an instance has.
	GPUs int
	// GPUMemoryMiB is the memory of all an instance's GPUs together.
	GPUMemoryMiB int
}

// Facts reads the pool's instance type from DescribeInstanceTypes. An
// instance type without GPUs is an error naming it.
func (p *Provider) Facts(ctx context.Context, pool fleet.Pool) (Facts, error) {
	c, err := p.client(ctx, pool)
	if err != nil {
		return Facts{}, err
	}
	out, err := c.ec2.DescribeInstanceTypes(ctx, &ec2.DescribeInstanceTypesInput{
		InstanceTypes: []ec2types.InstanceType{ec2types.InstanceType(pool.InstanceType)}})
	if err != nil {
		return Facts{}, classify(pool.Name, "DescribeInstanceTypes "+pool.InstanceType, err)
	}
	if len(out.InstanceTypes) == 0 {
		return Facts{}, &providers.ConfigError{Pool: pool.Name, Attr: "instance_type", Err: fmt.Errorf("pool %s: EC2 does not know instance type %q", pool.Name, pool.InstanceType)}
	}
	gi := out.InstanceTypes[0].GpuInfo
	if gi == nil || len(gi.Gpus) == 0 {
		return Facts{}, &providers.ConfigError{Pool: pool.Name, Attr: "instance_type", Err: fmt.Errorf("pool %s: instance type %s has no GPUs", pool.Name, pool.InstanceType)}
	}
	f := Facts{GPUModel: aws.ToString(gi.Gpus[0].Name), GPUMemoryMiB: int(aws.ToInt32(gi.TotalGpuMemoryInMiB))}
	for _, g := range gi.Gpus {
		f.GPUs += int(aws.ToInt32(g.Count))
	}
	return f, nil
}

// Resolve fills in, for each AWS pool, what the config left out from what
// EC2 says of its instance type (the GPU model), and checks what it gave:
// a gpus_per_node that differs from the instance type's GPUs is an error
// naming both, a *providers.ConfigError (as is an instance type EC2 does
// not know, or without GPUs). Pools of other providers are left as they are.
func (p *Provider) Resolve(ctx context.Context, pools []fleet.Pool) error {
	for i := range pools {
		pool := &pools[i]
		if pool.Provider != fleet.ProviderAWS {
			continue
		}
		f, err := p.Facts(ctx, *pool)
		if err != nil {
			return err
		}
		if pool.GPUsPerNode != f.GPUs {
			return &providers.ConfigError{Pool: pool.Name, Attr: "gpus_per_node",
				Err: fmt.Errorf("pool %s: gpus_per_node is %d, but EC2 says %s has %d %s GPUs", pool.Name, pool.GPUsPerNode, pool.InstanceType, f.GPUs, f.GPUModel)}
		}
		if pool.GPUModel == "" {
			pool.GPUModel = f.GPUModel
		}
	}
	return nil
}

// SpotPrice returns the highest current spot price per hour of the pool's
// instance type across its zones (all the region's zones if it names
// none), from DescribeSpotPriceHistory: what a spot node may cost now.
func (p *Provider) SpotPrice(ctx context.Context, pool fleet.Pool) (float64, error) {
	c, err := p.client(ctx, pool)
	if err != nil {
		return 0, err
	}
	in := &ec2.DescribeSpotPriceHistoryInput{
		InstanceTypes:       []ec2types.InstanceType{ec2types.InstanceType(pool.InstanceType)},
		ProductDescriptions: []string{"Linux/UNIX"},
		StartTime:           aws.Time(p.now().Add(-time.Hour)),
	}
	latest := map[string]ec2types.SpotPrice{} // by zone
	pages := ec2.NewDescribeSpotPriceHistoryPaginator(c.ec2, in)
	for pages.HasMorePages() {
		page, err := pages.NextPage(ctx)
		if err != nil {
			return 0, classify(pool.Name, "DescribeSpotPriceHistory "+pool.InstanceType, err)
		}
		for _, sp := range page.SpotPriceHistory {
			z := aws.ToString(sp.AvailabilityZone)
			if old, ok := latest[z]; !ok || aws.ToTime(sp.Timestamp).After(aws.ToTime(old.Timestamp)) {
				latest[z] = sp
			}
		}
	}
	price := math.Inf(-1)
	for z, sp := range latest {
		if len(pool.Zones) > 0 && !slices.Contains(pool.Zones, z) {
			continue
		}
		v, err := strconv.ParseFloat(aws.ToString(sp.SpotPrice), 64)
		if err != nil || v < 0 {
			return 0, fmt.Errorf("pool %s: spot price %q in %s: expected a number of dollars", pool.Name, aws.ToString(sp.SpotPrice), z)
		}
		price = math.Max(price, v)
	}
	if math.IsInf(price, -1) {
		return 0, fmt.Errorf("pool %s: no spot price for %s in the last hour", pool.Name, pool.InstanceType)
	}
	return price, nil
}
