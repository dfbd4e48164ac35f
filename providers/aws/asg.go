package aws

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/autoscaling"
	astypes "github.com/aws/aws-sdk-go-v2/service/autoscaling/types"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"

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
// lead times (docs/design.md rule 7 uses the pool's provisioning deadline, by
// default the same).
func stuckAfter(pool fleet.Pool) time.Duration { return 3 * pool.LeadTime }

// findGroup reads the pool's Auto Scaling group, by name or by tag. A tag
// must find exactly one group.
func (p *Provider) findGroup(ctx context.Context, c *clients, pool fleet.Pool) (astypes.AutoScalingGroup, error) {
	in := &autoscaling.DescribeAutoScalingGroupsInput{}
	what := ""
	if name := SettingsOf(pool).ASG; name != "" {
		in.AutoScalingGroupNames = []string{name}
		what = fmt.Sprintf("auto scaling group %q", name)
	} else {
		k, v, _ := strings.Cut(SettingsOf(pool).ASGTag, "=")
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
	if name := SettingsOf(pool).ASG; name != "" {
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
	out := providers.Group{Target: int(aws.ToInt32(g.DesiredCapacity)), Min: int(aws.ToInt32(g.MinSize))}
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
	for i, at := range m.owed(desired-have, now) {
		out.Instances = append(out.Instances, providers.Instance{ID: fmt.Sprintf("%s%s/%d", placeholderPrefix, name, i),
			State: providers.InstancePending, LaunchedAt: at, Owed: true})
	}
	p.mu.Unlock()
	return out, nil
}

// owed returns when each of the short units of capacity the group owes
// was asked for, newest first: the group fills the oldest first, so the
// newest raises are the ones still owed. Capacity owed beyond Fleetcast's
// own raises (raised by someone else, or before a restart) dates from when
// the group was first seen short. It forgets raises that have been filled.
func (m *groupMemo) owed(short int32, now time.Time) []time.Time {
	if short <= 0 {
		m.shortSince, m.raises, m.oldestOwed = time.Time{}, nil, time.Time{}
		return nil
	}
	if m.shortSince.IsZero() {
		m.shortSince = now
	}
	out := make([]time.Time, 0, short)
	keep := len(m.raises)
	for i := len(m.raises) - 1; i >= 0 && int32(len(out)) < short; i-- {
		for k := int32(0); k < m.raises[i].n && int32(len(out)) < short; k++ {
			out = append(out, m.raises[i].at)
		}
		keep = i
	}
	m.raises = m.raises[keep:] // older raises are filled
	for int32(len(out)) < short {
		out = append(out, m.shortSince)
	}
	m.oldestOwed = out[len(out)-1]
	for _, at := range out {
		if at.Before(m.oldestOwed) {
			m.oldestOwed = at
		}
	}
	return out
}

// launchTimes reads the instances' launch times from EC2, 200 at a time.
func (p *Provider) launchTimes(ctx context.Context, c *clients, pool fleet.Pool, ins []astypes.Instance) (map[string]time.Time, error) {
	out := make(map[string]time.Time, len(ins))
	ids := make([]string, 0, len(ins))
	for _, in := range ins {
		ids = append(ids, aws.ToString(in.InstanceId))
	}
	for start := 0; start < len(ids); start += 200 {
		// A filter, not InstanceIds: an instance the group lists that EC2
		// does not show yet (or any more) is left out, where InstanceIds
		// would fail the whole batch.
		batch := ids[start:min(start+200, len(ids))]
		pages := ec2.NewDescribeInstancesPaginator(c.ec2, &ec2.DescribeInstancesInput{
			Filters: []ec2types.Filter{{Name: aws.String("instance-id"), Values: batch}}})
		for pages.HasMorePages() {
			page, err := pages.NextPage(ctx)
			if err != nil {
				return nil, classify(pool.Name, "DescribeInstances", err)
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
	owed := p.memoLocked(pool.Name).oldestOwed
	p.mu.Unlock()
	if have < desired && !owed.IsZero() && p.now().Sub(owed) > stuckAfter(pool) {
		return &providers.InsufficientCapacityError{Pool: pool.Name, Err: fmt.Errorf(
			"auto scaling group %s has %d of its desired %d instances, and has owed capacity since %s (over three lead times): the cloud is not filling it",
			name, have, desired, owed.UTC().Format(time.RFC3339))}
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
	p.mu.Lock()
	m := p.memoLocked(pool.Name)
	m.raises = append(m.raises, raise{at: p.now(), n: target - desired})
	p.mu.Unlock()
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
	// desired and gone follow this call's own terminations.
	placeholders, gone, desired := int32(0), int32(0), aws.ToInt32(g.DesiredCapacity)
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
			// At the group's min_size AWS refuses to decrement: the
			// instance is then replaced (a launch that never became ready
			// gets a fresh one; the planner drains no node there).
			decrement := desired > aws.ToInt32(g.MinSize)
			_, err := c.asg.TerminateInstanceInAutoScalingGroup(ctx, &autoscaling.TerminateInstanceInAutoScalingGroupInput{
				InstanceId: aws.String(id), ShouldDecrementDesiredCapacity: aws.Bool(decrement)})
			if err != nil {
				return classify(pool.Name, "TerminateInstanceInAutoScalingGroup "+id, err)
			}
			gone++
			if decrement {
				desired--
				p.mu.Lock()
				p.memoLocked(pool.Name).desired = desired
				p.mu.Unlock()
			} else {
				p.log.Warn("instance terminated and replaced: the group is at its min_size", "pool", pool.Name, "asg", name, "instance", id)
			}
		}
	}
	if placeholders > 0 {
		// Capacity the group never filled: lower desired capacity, but
		// never below its live instances (the group would pick one to
		// terminate) or its min_size.
		target := max(desired-placeholders, live(g)-gone, aws.ToInt32(g.MinSize))
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
