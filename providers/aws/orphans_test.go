package aws

import (
	"context"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"

	"github.com/fleetcast/autoscaler/fleet"
	"github.com/fleetcast/autoscaler/providers"
)

// TestOrphans: a pool taken out of prod's config leaves instances prod's
// controller launched. They are listed as orphans and can be terminated;
// staging's instances of a pool of the same name, an instance a person ran
// with the managed tags but no launch key, and the instances of pools
// still configured are never listed, and staging's is never terminated by
// prod.
func TestOrphans(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	lt := e.fix.template(t, "gpu", "p4d.24xlarge")
	kept, gone := e.ec2Pool("kept", lt, fleet.OnDemand), e.ec2Pool("gone", lt, fleet.OnDemand)
	for _, l := range []struct {
		pool fleet.Pool
		req  providers.LaunchRequest
	}{
		{kept, providers.LaunchRequest{Count: 1, Key: "fc-launch-kept-1", Fleet: "prod"}},
		{gone, providers.LaunchRequest{Count: 1, Key: "fc-launch-gone-1a", Fleet: "prod"}},
		{gone, providers.LaunchRequest{Count: 1, Key: "fc-launch-gone-1b", Fleet: "prod"}},
		{gone, providers.LaunchRequest{Count: 1, Key: "fc-launch-gone-2", Fleet: "staging"}},
	} {
		if err := e.p.Launch(ctx, l.pool, l.req); err != nil {
			t.Fatal(err)
		}
	}
	c, _ := e.proxy.Last("RunInstances")
	if got := c.Form.Get("TagSpecification.1.Tag.4.Key") + "=" + c.Form.Get("TagSpecification.1.Tag.4.Value"); got != TagFleet+"=staging" {
		t.Errorf("RunInstances tags the fleet as %q, want %s=staging", got, TagFleet)
	}
	// A person's instance with the managed tags and no launch key.
	in := runInput(gone, "", "prod", 1)
	in.ClientToken = nil
	in.TagSpecifications = []ec2types.TagSpecification{{ResourceType: ec2types.ResourceTypeInstance, Tags: []ec2types.Tag{
		{Key: aws.String(TagManaged), Value: aws.String("true")}, {Key: aws.String(TagPool), Value: aws.String("gone")},
		{Key: aws.String(TagFleet), Value: aws.String("prod")}}}}
	if _, err := e.fix.ec2.RunInstances(ctx, in); err != nil {
		t.Fatal(err)
	}

	orphans, err := e.provider().Orphans(ctx, "prod", []fleet.Pool{kept})
	if err != nil {
		t.Fatal(err)
	}
	if len(orphans) != 2 {
		t.Fatalf("prod's orphans %+v, want the 2 instances it launched in pool gone", orphans)
	}
	for _, o := range orphans {
		if o.Pool != "gone" || o.Fleet != "prod" || o.Via.Name != "kept" || !strings.HasPrefix(o.LaunchKey, "fc-launch-gone-1") {
			t.Errorf("orphan %+v", o)
		}
	}
	staging, err := e.p.Orphans(ctx, "staging", []fleet.Pool{kept})
	if err != nil || len(staging) != 1 {
		t.Fatalf("staging's orphans %+v, %v", staging, err)
	}
	if none, err := e.p.Orphans(ctx, "prod", []fleet.Pool{kept, gone}); err != nil || len(none) != 0 {
		t.Fatalf("orphans with pool gone configured again: %+v, %v", none, err)
	}
	// prod reaps one of its own; staging's instance, presented as prod's,
	// is refused on its tags.
	if err := e.p.TerminateOrphan(ctx, "prod", orphans[0]); err != nil {
		t.Fatal(err)
	}
	forged := staging[0]
	if err := e.p.TerminateOrphan(ctx, "prod", forged); err == nil || !strings.Contains(err.Error(), "no longer an orphan of fleet prod") {
		t.Fatalf("prod terminating staging's instance: %v", err)
	}
	out, err := e.fix.ec2.DescribeInstances(ctx, &ec2.DescribeInstancesInput{InstanceIds: []string{orphans[0].ID, forged.ID}})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range out.Reservations {
		for _, in := range r.Instances {
			terminated := ec2State(in.State.Name) == providers.InstanceTerminating
			if id := aws.ToString(in.InstanceId); terminated != (id == orphans[0].ID) {
				t.Errorf("instance %s: state %s", id, in.State.Name)
			}
		}
	}
	if left, _ := e.p.Orphans(ctx, "prod", []fleet.Pool{kept}); len(left) != 1 || left[0].ID != orphans[1].ID {
		t.Fatalf("after reaping one: %+v", left)
	}
}

// TestOrphanTags: what makes an EC2 instance an orphan of a fleet.
func TestOrphanTags(t *testing.T) {
	tags := func(kv ...string) []ec2types.Tag {
		var out []ec2types.Tag
		for i := 0; i < len(kv); i += 2 {
			out = append(out, ec2types.Tag{Key: aws.String(kv[i]), Value: aws.String(kv[i+1])})
		}
		return out
	}
	own := []string{TagManaged, "true", TagFleet, "prod", TagPool, "gone", TagLaunchKey, "k"}
	for _, tt := range []struct {
		name string
		tags []ec2types.Tag
		want bool
	}{
		{"the fleet's, launched by Fleetcast, pool gone", tags(own...), true},
		{"another fleet's", tags(TagManaged, "true", TagFleet, "staging", TagPool, "gone", TagLaunchKey, "k"), false},
		{"no fleet tag (launched before fleets were named)", tags(TagManaged, "true", TagPool, "gone", TagLaunchKey, "k"), false},
		{"not managed", tags(TagManaged, "false", TagFleet, "prod", TagPool, "gone", TagLaunchKey, "k"), false},
		{"no launch key", tags(TagManaged, "true", TagFleet, "prod", TagPool, "gone"), false},
		{"a pool still configured", tags(TagManaged, "true", TagFleet, "prod", TagPool, "kept", TagLaunchKey, "k"), false},
		{"no pool tag", tags(TagManaged, "true", TagFleet, "prod", TagLaunchKey, "k"), false},
		{"held by an Auto Scaling group", tags(append(own, tagASG, "gpu-asg")...), false},
	} {
		in := ec2types.Instance{InstanceId: aws.String("i-1"), Tags: tt.tags, State: &ec2types.InstanceState{Name: ec2types.InstanceStateNameRunning}}
		if _, got := orphan(in, "prod", map[string]bool{"kept": true}); got != tt.want {
			t.Errorf("%s: orphan = %v, want %v", tt.name, got, tt.want)
		}
	}
}
