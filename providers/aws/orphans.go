package aws

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"

	"github.com/fleetcast/autoscaler/fleet"
	"github.com/fleetcast/autoscaler/providers"
)

// tagASG is the tag EC2 sets on every instance an Auto Scaling group
// launches: such an instance is the group's (and so Terraform's), never an
// orphan of Fleetcast's.
const tagASG = "aws:autoscaling:groupName"

// Orphans lists, in each region (and endpoint) the pools use, the
// instances tagged fleetcast/managed=true and fleetcast/fleet=fleetName,
// with a launch key (so run by a Fleetcast controller itself), whose
// fleetcast/pool is none of the pools', and that no Auto Scaling group
// holds. A region no configured pool uses any more is not searched.
func (p *Provider) Orphans(ctx context.Context, fleetName string, pools []fleet.Pool) ([]providers.Orphan, error) {
	if fleetName == "" {
		return nil, nil
	}
	known := make(map[string]bool, len(pools))
	for _, pl := range pools {
		known[pl.Name] = true
	}
	searched := map[string]bool{}
	var out []providers.Orphan
	var errs []error
	for _, via := range pools {
		where := via.Region + "|" + SettingsOf(via).Endpoint
		if searched[where] {
			continue
		}
		searched[where] = true
		c, err := p.client(ctx, via)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		pages := ec2.NewDescribeInstancesPaginator(c.ec2, &ec2.DescribeInstancesInput{Filters: []ec2types.Filter{
			{Name: aws.String("tag:" + TagManaged), Values: []string{"true"}},
			{Name: aws.String("tag:" + TagFleet), Values: []string{fleetName}},
			{Name: aws.String("tag-key"), Values: []string{TagLaunchKey}},
			{Name: aws.String("instance-state-name"), Values: []string{"pending", "running", "stopping", "stopped"}},
		}})
		for pages.HasMorePages() {
			page, err := pages.NextPage(ctx)
			if err != nil {
				errs = append(errs, classify(via.Name, "DescribeInstances of fleet "+fleetName+"'s orphans", err))
				break
			}
			for _, r := range page.Reservations {
				for _, in := range r.Instances {
					if o, ok := orphan(in, fleetName, known); ok {
						o.Via = via
						out = append(out, o)
					}
				}
			}
		}
	}
	slices.SortFunc(out, func(a, b providers.Orphan) int { return strings.Compare(a.ID, b.ID) })
	return out, errors.Join(errs...)
}

// orphan reads an EC2 instance as an orphan of the fleet: tagged as the
// fleet's, run by Fleetcast (with a launch key) for a pool not known, and
// not held by an Auto Scaling group.
func orphan(in ec2types.Instance, fleetName string, known map[string]bool) (providers.Orphan, bool) {
	pool := tag(in.Tags, TagPool)
	switch {
	case tag(in.Tags, TagManaged) != "true" || tag(in.Tags, TagFleet) != fleetName || tag(in.Tags, TagLaunchKey) == "":
		return providers.Orphan{}, false
	case pool == "" || known[pool] || tag(in.Tags, tagASG) != "":
		return providers.Orphan{}, false
	}
	return providers.Orphan{Pool: pool, Instance: instanceOf(in)}, true
}

// TerminateOrphan terminates one orphan after reading it again: it must
// still carry the fleet's tags, the pool its tags named, and no Auto
// Scaling group.
func (p *Provider) TerminateOrphan(ctx context.Context, fleetName string, o providers.Orphan) error {
	if fleetName == "" {
		return fmt.Errorf("orphan %s: no fleet name: not terminated", o.ID)
	}
	c, err := p.client(ctx, o.Via)
	if err != nil {
		return err
	}
	out, err := c.ec2.DescribeInstances(ctx, &ec2.DescribeInstancesInput{InstanceIds: []string{o.ID}})
	if err != nil {
		return classify(o.Pool, "DescribeInstances "+o.ID, err)
	}
	for _, r := range out.Reservations {
		for _, in := range r.Instances {
			if aws.ToString(in.InstanceId) != o.ID {
				continue
			}
			if got, ok := orphan(in, fleetName, nil); !ok || got.Pool != o.Pool {
				return fmt.Errorf("instance %s is no longer an orphan of fleet %s in pool %s (tags %s=%q, %s=%q, %s=%q): not terminated",
					o.ID, fleetName, o.Pool, TagFleet, tag(in.Tags, TagFleet), TagPool, tag(in.Tags, TagPool), tagASG, tag(in.Tags, tagASG))
			}
			if in.State != nil && ec2State(in.State.Name) == providers.InstanceTerminating {
				return nil
			}
			if _, err := c.ec2.TerminateInstances(ctx, &ec2.TerminateInstancesInput{InstanceIds: []string{o.ID}}); err != nil {
				return classify(o.Pool, "TerminateInstances "+o.ID, err)
			}
			return nil
		}
	}
	return &providers.NotFoundError{Pool: o.Pool, Resource: "instance " + o.ID, Err: errors.New("EC2 does not have it")}
}
