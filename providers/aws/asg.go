package aws

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/autoscaling"
	astypes "github.com/aws/aws-sdk-go-v2/service/autoscaling/types"
	"github.com/aws/aws-sdk-go-v2/service/ec2"

	"github.com/fleetcast/autoscaler/fleet"
	"github.com/fleetcast/autoscaler/providers"
)

// placeholderPrefix starts the IDs of instances an Auto Scaling group owes:
// desired capacity it has not filled with instances yet. They count as
// launching capacity until the pool's provisioning deadline, as Cluster
// Autoscaler's placeholders do; terminating one lowers desired capacity.
const placeholderPrefix = "placeholder/"

func isPlaceholder(id string) bool { return strings.HasPrefix(id, placeholderPrefix) }

// stuckAfter is how long a group may stay below its desired capacity
// before a further launch into it is refused as a capacity error: three
// lead times (DESIGN.md rule 7 uses the pool's provisioning deadline, by
// default the same).
func stuckAfter(pool fleet.Pool) time.Duration { return 3 * pool.LeadTime }

// findGroup reads the pool's Auto Scaling group, by name or by tag. A tag
// must find exactly one group.
func (p *Provider) findGroup(ctx context.Context, c *clients, pool fleet.Pool) (astypes.AutoScalingGroup, error) {
	in := &autoscaling.DescribeAutoScalingGroupsInput{}
	what := ""
	if name := pool.Target["asg"]; name != "" {
		in.AutoScalingGroupNames = []string{name}
		what = fmt.Sprintf("auto scaling group %q", name)
	} else {
		k, v, _ := strings.Cut(pool.Target["asg_tag"], "=")
		in.Filters = []astypes.Filter{{Name: aws.String("tag:" + k), Values: []string{v}}}
		what = fmt.Sprintf("auto scaling group tagged %s=%s", k, v)
	}
	var found []astypes.AutoScalingGroup
	pages := autoscaling.NewDescribeAutoScalingGroupsPaginator(c.asg, in)
	for pages.HasMorePages() {
		out, err := pages.NextPage(ctx)
		if err != nil {
			return astypes.AutoScalingGroup{}, classify(pool.Name, "DescribeAutoScalingGroups", err)
		}
		found = append(found, out.AutoScalingGroups...)
	}
	switch len(found) {
	case 0:
		return astypes.AutoScalingGroup{}, &providers.NotFoundError{Pool: pool.Name, Resource: what,
			Err: errors.New("DescribeAutoScalingGroups found none (check the name or tag, and the region " + pool.Region + ")")}
	case 1:
	default:
		var names []string
		for _, g := range found {
			names = append(names, aws.ToString(g.AutoScalingGroupName))
		}
		return astypes.AutoScalingGroup{}, fmt.Errorf("pool %s: %s matches %d groups (%s); it must find exactly one",
			pool.Name, what, len(found), strings.Join(names, ", "))
	}
	g := found[0]
	p.mu.Lock()
	p.memoLocked(pool.Name).name = aws.ToString(g.AutoScalingGroupName)
	p.mu.Unlock()
	return g, nil
}

// groupName is the name of the pool's group, looked up once for asg_tag
// pools.
func (p *Provider) groupName(ctx context.Context, c *clients, pool fleet.Pool) (string, error) {
	if name := pool.Target["asg"]; name != "" {
		return name, nil
	}
	p.mu.Lock()
	name := p.memoLocked(pool.Name).name
	p.mu.Unlock()
	if name != "" {
		return name, nil
	}
	g, err := p.findGroup(ctx, c, pool)
	return aws.ToString(g.AutoScalingGroupName), err
}

// instanceState maps an Auto Scaling lifecycle state.
func instanceState(s astypes.LifecycleState) providers.InstanceState {
	switch {
	case strings.HasPrefix(string(s), "Pending"), strings.HasPrefix(string(s), "Warmed"):
		return providers.InstancePending
	case strings.HasPrefix(string(s), "Terminat"), strings.HasPrefix(string(s), "Detach"):
		return providers.InstanceTerminating
	}
	return providers.InstanceRunning // InService, Standby and the ways in and out of it
}

// live counts the instances that are not going away.
func live(g astypes.AutoScalingGroup) int32 {
	n := int32(0)
	for _, in := range g.Instances {
		if instanceState(in.LifecycleState) != providers.InstanceTerminating {
			n++
		}
	}
	return n
}

func (p *Provider) describeASG(ctx context.Context, c *clients, pool fleet.Pool) (providers.Group, error) {
	g, err := p.findGroup(ctx, c, pool)
	if err != nil {
		return providers.Group{}, err
	}
	name := aws.ToString(g.AutoScalingGroupName)
	launched, err := p.launchTimes(ctx, c, pool, g.Instances)
	if err != nil {
		return providers.Group{}, err
	}
	now := p.now()
	out := providers.Group{Target: int(aws.ToInt32(g.DesiredCapacity))}
	for _, in := range g.Instances {
		id := aws.ToString(in.InstanceId)
		at, ok := launched[id]
		if !ok {
			at = now // not yet visible to EC2
		}
		out.Instances = append(out.Instances, providers.Instance{ID: id, Zone: aws.ToString(in.AvailabilityZone),
			State: instanceState(in.LifecycleState), LaunchedAt: at, Protected: aws.ToBool(in.ProtectedFromScaleIn)})
	}
	desired, have := aws.ToInt32(g.DesiredCapacity), live(g)
	p.mu.Lock()
	m := p.memoLocked(pool.Name)
	if m.desired >= 0 && desired != m.desired {
		// Someone else set it (a Terraform apply without ignore_changes
		// on desired_capacity, a person, a scaling policy): follow it,
		// and say so.
		p.log.Warn("desired capacity changed outside Fleetcast; following the group (if Terraform set it, add lifecycle { ignore_changes = [desired_capacity] })",
			"pool", pool.Name, "asg", name, "from", m.desired, "to", desired)
	}
	m.desired = desired
	if have < desired {
		if m.shortSince.IsZero() {
			m.shortSince = now
		}
		for i := range desired - have {
			out.Instances = append(out.Instances, providers.Instance{ID: fmt.Sprintf("%s%s/%d", placeholderPrefix, name, i),
				State: providers.InstancePending, LaunchedAt: m.shortSince})
		}
	} else {
		m.shortSince = time.Time{}
	}
	p.mu.Unlock()
	return out, nil
}

// launchTimes reads the instances' launch times from EC2, 200 at a time.
func (p *Provider) launchTimes(ctx context.Context, c *clients, pool fleet.Pool, ins []astypes.Instance) (map[string]time.Time, error) {
	out := make(map[string]time.Time, len(ins))
	ids := make([]string, 0, len(ins))
	for _, in := range ins {
		ids = append(ids, aws.ToString(in.InstanceId))
	}
	for start := 0; start < len(ids); start += 200 {
		batch := ids[start:min(start+200, len(ids))]
		pages := ec2.NewDescribeInstancesPaginator(c.ec2, &ec2.DescribeInstancesInput{InstanceIds: batch})
		for pages.HasMorePages() {
			page, err := pages.NextPage(ctx)
			if err != nil {
				var nf *providers.NotFoundError
				if err := classify(pool.Name, "DescribeInstances", err); errors.As(err, &nf) {
					// An instance the group lists is not visible to EC2 yet
					// (or just went): its time is taken as now.
					break
				} else {
					return nil, err
				}
			}
			for _, r := range page.Reservations {
				for _, in := range r.Instances {
					out[aws.ToString(in.InstanceId)] = aws.ToTime(in.LaunchTime)
				}
			}
		}
	}
	return out, nil
}

// refreshBusy lists the statuses of an instance refresh that is not over.
var refreshBusy = []astypes.InstanceRefreshStatus{
	astypes.InstanceRefreshStatusPending, astypes.InstanceRefreshStatusInProgress, astypes.InstanceRefreshStatusCancelling,
	astypes.InstanceRefreshStatusRollbackInProgress, astypes.InstanceRefreshStatusBaking,
}

// busy returns a GroupBusyError while an instance refresh of the group is
// pending or running: scaling then would fight it.
func (p *Provider) busy(ctx context.Context, c *clients, pool fleet.Pool, name string) error {
	out, err := c.asg.DescribeInstanceRefreshes(ctx, &autoscaling.DescribeInstanceRefreshesInput{AutoScalingGroupName: aws.String(name)})
	if err != nil {
		return classify(pool.Name, "DescribeInstanceRefreshes", err)
	}
	for _, r := range out.InstanceRefreshes {
		if slices.Contains(refreshBusy, r.Status) {
			return &providers.GroupBusyError{Pool: pool.Name,
				Reason: fmt.Sprintf("instance refresh %s of %s is %s", aws.ToString(r.InstanceRefreshId), name, r.Status)}
		}
	}
	return nil
}

func (p *Provider) launchASG(ctx context.Context, c *clients, pool fleet.Pool, req providers.LaunchRequest) error {
	g, err := p.findGroup(ctx, c, pool)
	if err != nil {
		return err
	}
	name := aws.ToString(g.AutoScalingGroupName)
	desired, have, maxSize := aws.ToInt32(g.DesiredCapacity), live(g), aws.ToInt32(g.MaxSize)
	target := int32(min(req.Target, int(maxSize)+1)) // no overflow; capped below
	if target <= desired {
		return nil // made already (a retry, or after a restart)
	}
	if err := p.busy(ctx, c, pool, name); err != nil {
		return err
	}
	p.mu.Lock()
	short := p.memoLocked(pool.Name).shortSince
	p.mu.Unlock()
	if have < desired && !short.IsZero() && p.now().Sub(short) > stuckAfter(pool) {
		return &providers.InsufficientCapacityError{Pool: pool.Name, Err: fmt.Errorf(
			"auto scaling group %s has had %d of its desired %d instances since %s (over three lead times): the cloud is not filling it",
			name, have, desired, short.UTC().Format(time.RFC3339))}
	}
	var capped error
	if target > maxSize {
		// The group's max_size is Terraform's; it is never raised here.
		capped = &providers.QuotaExceededError{Pool: pool.Name, Quota: fmt.Sprintf("max_size of auto scaling group %s", name),
			Err: fmt.Errorf("target %d is above the group's max_size %d; raise it in Terraform, or lower the pool's max", req.Target, maxSize)}
		if target = maxSize; target <= desired {
			return capped
		}
	}
	if err := p.setDesired(ctx, c, pool, name, target); err != nil {
		return err
	}
	return capped
}

// setDesired sets the group's desired capacity, remembered as Fleetcast's
// own change.
func (p *Provider) setDesired(ctx context.Context, c *clients, pool fleet.Pool, name string, target int32) error {
	_, err := c.asg.SetDesiredCapacity(ctx, &autoscaling.SetDesiredCapacityInput{
		AutoScalingGroupName: aws.String(name), DesiredCapacity: aws.Int32(target), HonorCooldown: aws.Bool(false)})
	if err != nil {
		return classify(pool.Name, fmt.Sprintf("SetDesiredCapacity %s to %d", name, target), err)
	}
	p.mu.Lock()
	p.memoLocked(pool.Name).desired = target
	p.mu.Unlock()
	return nil
}

func (p *Provider) terminateASG(ctx context.Context, c *clients, pool fleet.Pool, ids []string) error {
	g, err := p.findGroup(ctx, c, pool)
	if err != nil {
		return err
	}
	name := aws.ToString(g.AutoScalingGroupName)
	members := map[string]bool{}
	for _, in := range g.Instances {
		if instanceState(in.LifecycleState) != providers.InstanceTerminating {
			members[aws.ToString(in.InstanceId)] = true
		}
	}
	placeholders := int32(0)
	var missing []string
	for _, id := range ids {
		switch {
		case isPlaceholder(id):
			placeholders++
		case !members[id]:
			// TerminateInstanceInAutoScalingGroup would terminate it in
			// whatever group holds it: only this group's are touched.
			missing = append(missing, id)
		default:
			_, err := c.asg.TerminateInstanceInAutoScalingGroup(ctx, &autoscaling.TerminateInstanceInAutoScalingGroupInput{
				InstanceId: aws.String(id), ShouldDecrementDesiredCapacity: aws.Bool(true)})
			if err != nil {
				return classify(pool.Name, "TerminateInstanceInAutoScalingGroup "+id, err)
			}
			p.mu.Lock()
			p.memoLocked(pool.Name).desired--
			p.mu.Unlock()
		}
	}
	if placeholders > 0 {
		// Capacity the group never filled: lower desired capacity, but
		// never below its live instances (the group would pick one to
		// terminate) or its min_size.
		desired := aws.ToInt32(g.DesiredCapacity)
		target := max(desired-placeholders, live(g), aws.ToInt32(g.MinSize))
		if target < desired {
			if err := p.setDesired(ctx, c, pool, name, target); err != nil {
				return err
			}
		}
	}
	if len(missing) > 0 {
		return &providers.NotFoundError{Pool: pool.Name, Resource: fmt.Sprintf("instance(s) %s in auto scaling group %s", strings.Join(missing, ", "), name),
			Err: errors.New("not a live member of the group")}
	}
	return nil
}
