package aws

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"

	"github.com/fleetcast/autoscaler/fleet"
	"github.com/fleetcast/autoscaler/providers"
)

// ec2State maps an EC2 instance state. Stopped instances do no work and
// are taken as going away.
func ec2State(s ec2types.InstanceStateName) providers.InstanceState {
	switch s {
	case ec2types.InstanceStateNamePending:
		return providers.InstancePending
	case ec2types.InstanceStateNameRunning:
		return providers.InstanceRunning
	}
	return providers.InstanceTerminating
}

// poolFilters find the pool's instances by the tags set at their launch.
func poolFilters(pool fleet.Pool) []ec2types.Filter {
	return []ec2types.Filter{
		{Name: aws.String("tag:" + TagManaged), Values: []string{"true"}},
		{Name: aws.String("tag:" + TagPool), Values: []string{pool.Name}},
		{Name: aws.String("instance-state-name"), Values: []string{"pending", "running", "stopping", "stopped", "shutting-down"}},
	}
}

// describeEC2 lists the pool's tagged instances. The group is keyed: each
// instance carries the key of the launch that made it, and Target is the
// number listed (EC2's reads are eventually consistent, so a launch made
// moments ago may not be listed yet).
func (p *Provider) describeEC2(ctx context.Context, c *clients, pool fleet.Pool) (providers.Group, error) {
	return p.listEC2(ctx, c, pool, poolFilters(pool))
}

// listEC2 lists the instances the filters find as the pool's group.
func (p *Provider) listEC2(ctx context.Context, c *clients, pool fleet.Pool, filters []ec2types.Filter) (providers.Group, error) {
	g := providers.Group{Keyed: true}
	pages := ec2.NewDescribeInstancesPaginator(c.ec2, &ec2.DescribeInstancesInput{Filters: filters})
	for pages.HasMorePages() {
		page, err := pages.NextPage(ctx)
		if err != nil {
			return providers.Group{}, classify(pool.Name, "DescribeInstances", err)
		}
		for _, r := range page.Reservations {
			for _, in := range r.Instances {
				i := instanceOf(in)
				g.Instances = append(g.Instances, i)
				if i.State != providers.InstanceTerminating {
					g.Target++
				}
			}
		}
	}
	return g, nil
}

// instanceOf reads an EC2 instance: its state, zone, launch time and the
// launch key and fleet of its tags.
func instanceOf(in ec2types.Instance) providers.Instance {
	st := providers.InstanceTerminating
	if in.State != nil {
		st = ec2State(in.State.Name)
	}
	zone := ""
	if in.Placement != nil {
		zone = aws.ToString(in.Placement.AvailabilityZone)
	}
	return providers.Instance{ID: aws.ToString(in.InstanceId), Zone: zone, State: st,
		Stopped:    in.State != nil && in.State.Name == ec2types.InstanceStateNameStopped,
		LaunchedAt: aws.ToTime(in.LaunchTime), LaunchKey: tag(in.Tags, TagLaunchKey), Fleet: tag(in.Tags, TagFleet)}
}

// launchEC2 runs req.Count instances from the pool's launch template,
// tagged as the pool's and with the launch's key, with req.Key as the
// client token. A request sent again (a retry, a restarted controller
// settling its journal) is the same request, so EC2 answers it with the
// instances it launched the first time and launches nothing more; the
// count is never worked out again from a listing, which may lag the
// launch (and would make EC2 refuse the token as a different request).
// Instances already listed with the key mean the launch was made. It asks
// for at least one and at most req.Count, so EC2 grants what it has; a
// partial grant is an insufficient-capacity error.
func (p *Provider) launchEC2(ctx context.Context, c *clients, pool fleet.Pool, req providers.LaunchRequest) error {
	if req.Count < 1 {
		return nil
	}
	made, err := p.listEC2(ctx, c, pool, append(poolFilters(pool), ec2types.Filter{Name: aws.String("tag:" + TagLaunchKey), Values: []string{req.Key}}))
	if err != nil {
		return err
	}
	if len(made.Instances) > 0 {
		return nil // made already
	}
	count := req.Count
	in := runInput(pool, req.Key, req.Fleet, count)
	out, err := c.ec2.RunInstances(ctx, in)
	if err != nil {
		return classify(pool.Name, fmt.Sprintf("RunInstances of %d %s", count, pool.InstanceType), err)
	}
	if got := len(out.Instances); got < count {
		return &providers.InsufficientCapacityError{Pool: pool.Name, Granted: got,
			Err: fmt.Errorf("RunInstances granted %d of %d %s", got, count, pool.InstanceType)}
	}
	return nil
}

// runInput is the RunInstances request for count of the pool's instances,
// tagged with the pool, the launch's key and the fleet (when named).
func runInput(pool fleet.Pool, key, fleetName string, count int) *ec2.RunInstancesInput {
	s := SettingsOf(pool)
	lt := &ec2types.LaunchTemplateSpecification{Version: aws.String("$Default")}
	if v := s.LaunchTemplateVersion; v != "" {
		lt.Version = aws.String(v)
	}
	if t := s.LaunchTemplate; strings.HasPrefix(t, "lt-") {
		lt.LaunchTemplateId = aws.String(t)
	} else {
		lt.LaunchTemplateName = aws.String(t)
	}
	tags := []ec2types.Tag{
		{Key: aws.String(TagManaged), Value: aws.String("true")},
		{Key: aws.String(TagPool), Value: aws.String(pool.Name)},
		{Key: aws.String(TagLaunchKey), Value: aws.String(key)},
	}
	if fleetName != "" {
		tags = append(tags, ec2types.Tag{Key: aws.String(TagFleet), Value: aws.String(fleetName)})
	}
	in := &ec2.RunInstancesInput{
		LaunchTemplate: lt,
		InstanceType:   ec2types.InstanceType(pool.InstanceType),
		MinCount:       aws.Int32(1),
		MaxCount:       aws.Int32(int32(count)),
		ClientToken:    aws.String(key),
		TagSpecifications: []ec2types.TagSpecification{
			{ResourceType: ec2types.ResourceTypeInstance, Tags: tags},
			{ResourceType: ec2types.ResourceTypeVolume, Tags: tags},
		},
	}
	if s := s.SubnetID; s != "" {
		in.SubnetId = aws.String(s)
	}
	if pool.Capacity == fleet.Spot {
		in.InstanceMarketOptions = &ec2types.InstanceMarketOptionsRequest{MarketType: ec2types.MarketTypeSpot,
			SpotOptions: &ec2types.SpotMarketOptions{SpotInstanceType: ec2types.SpotInstanceTypeOneTime,
				InstanceInterruptionBehavior: ec2types.InstanceInterruptionBehaviorTerminate}}
	}
	if cr := s.CapacityReservationID; cr != "" {
		in.CapacityReservationSpecification = &ec2types.CapacityReservationSpecification{
			CapacityReservationTarget: &ec2types.CapacityReservationTarget{CapacityReservationId: aws.String(cr)}}
	}
	if s.CapacityBlock {
		// EC2 Capacity Blocks for ML are their own market.
		in.InstanceMarketOptions = &ec2types.InstanceMarketOptionsRequest{MarketType: ec2types.MarketTypeCapacityBlock}
	}
	return in
}

// terminateEC2 terminates the named instances, each only if it carries the
// pool's tags (the IAM policy insists on fleetcast/managed too).
func (p *Provider) terminateEC2(ctx context.Context, c *clients, pool fleet.Pool, ids []string) error {
	if len(ids) == 0 {
		return nil
	}
	out, err := c.ec2.DescribeInstances(ctx, &ec2.DescribeInstancesInput{InstanceIds: ids})
	if err != nil {
		return classify(pool.Name, "DescribeInstances "+strings.Join(ids, ","), err)
	}
	seen := map[string]bool{}
	var kill []string
	for _, r := range out.Reservations {
		for _, in := range r.Instances {
			id := aws.ToString(in.InstanceId)
			seen[id] = true
			if tag(in.Tags, TagManaged) != "true" || tag(in.Tags, TagPool) != pool.Name {
				return fmt.Errorf("pool %s: instance %s is not tagged %s=true and %s=%s: not terminated", pool.Name, id, TagManaged, TagPool, pool.Name)
			}
			if in.State != nil && ec2State(in.State.Name) != providers.InstanceTerminating {
				kill = append(kill, id)
			}
		}
	}
	if len(kill) > 0 {
		if _, err := c.ec2.TerminateInstances(ctx, &ec2.TerminateInstancesInput{InstanceIds: kill}); err != nil {
			return classify(pool.Name, "TerminateInstances "+strings.Join(kill, ","), err)
		}
	}
	var gone []string
	for _, id := range ids {
		if !seen[id] {
			gone = append(gone, id)
		}
	}
	if len(gone) > 0 {
		return &providers.NotFoundError{Pool: pool.Name, Resource: "instance(s) " + strings.Join(gone, ", "), Err: errors.New("EC2 does not have them")}
	}
	return nil
}

func tag(tags []ec2types.Tag, key string) string {
	for _, t := range tags {
		if aws.ToString(t.Key) == key {
			return aws.ToString(t.Value)
		}
	}
	return ""
}
