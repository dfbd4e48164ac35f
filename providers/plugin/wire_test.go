package plugin

import (
	"errors"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/fleetcast/autoscaler/providers"
	pb "github.com/fleetcast/autoscaler/providers/plugin/proto"
)

// TestGroupFromWire: a plugin's group that no cloud could have is refused,
// naming the pool and what is wrong, never followed.
func TestGroupFromWire(t *testing.T) {
	running := func(id string) *pb.Instance { return &pb.Instance{Id: id, State: pb.Instance_RUNNING} }
	capacity := &pb.Error{Kind: pb.Error_INSUFFICIENT_CAPACITY, Message: "no servers"}
	for _, tt := range []struct {
		name string
		g    *pb.Group
		want string
	}{
		{"none", nil, "holds no group"},
		{"a negative target", &pb.Group{Target: -1}, "not a group"},
		{"an absurd target", &pb.Group{Target: maxInstances + 1}, "not a group"},
		{"min above target", &pb.Group{Target: 1, Min: 2}, "not a group"},
		{"an instance twice", &pb.Group{Target: 2, Instances: []*pb.Instance{running("a"), running("a")}}, "lists instance a twice"},
		{"an instance without an ID", &pb.Group{Target: 1, Instances: []*pb.Instance{running("")}}, "an ID of 0 characters"},
		{"an unknown state", &pb.Group{Target: 1, Instances: []*pb.Instance{{Id: "a"}}}, "want pending, running or terminating"},
		{"a time that is none", &pb.Group{Target: 1, Instances: []*pb.Instance{{Id: "a", State: pb.Instance_RUNNING, LaunchedAt: &timestamppb.Timestamp{Nanos: -1}}}}, "launched_at"},
		{"failing while running", &pb.Group{Target: 1, Instances: []*pb.Instance{{Id: "a", State: pb.Instance_RUNNING, Failing: capacity}}}, "only a pending instance fails"},
		{"failing for throttling", &pb.Group{Target: 1, Instances: []*pb.Instance{{Id: "a", State: pb.Instance_PENDING, Failing: &pb.Error{Kind: pb.Error_THROTTLED}}}}, "for capacity or quota"},
		{"an address that is none", &pb.Group{Target: 1, Instances: []*pb.Instance{{Id: "a", State: pb.Instance_RUNNING, Address: "10.0.0.7; reboot"}}}, `has address "10.0.0.7; reboot": want an IP address or a host name`},
		{"an address of no host", &pb.Group{Target: 1, Instances: []*pb.Instance{{Id: "a", State: pb.Instance_RUNNING, Address: "0.0.0.0"}}}, `has address "0.0.0.0"`},
	} {
		if _, err := groupFromWire("p", tt.g); err == nil || !strings.Contains(err.Error(), tt.want) || !strings.Contains(err.Error(), "pool p") {
			t.Errorf("%s: %v; want an error naming pool p, with %q", tt.name, err, tt.want)
		}
	}
	g, err := groupFromWire("p", &pb.Group{Target: 2, Min: 1, Instances: []*pb.Instance{running("a"), {Id: "b", State: pb.Instance_PENDING, Failing: capacity,
		LaunchedAt: timestamppb.New(time.Date(2026, 12, 3, 9, 0, 0, 0, time.UTC)), Address: "::ffff:10.0.0.7"}}})
	var ice *providers.InsufficientCapacityError
	// The address as Slurm writes it: 10.0.0.7, not ::ffff:10.0.0.7.
	if err != nil || len(g.Instances) != 2 || !errors.As(g.Instances[1].Failing, &ice) || g.Instances[1].LaunchedAt.Hour() != 9 || g.Instances[1].Address != "10.0.0.7" {
		t.Fatalf("a good group: %+v, %v", g, err)
	}
}

// TestErrorsRoundTrip: each typed error a plugin returns comes back as the
// same type, with what it says (zone, granted, quota, resource,
// retry-after), cut to a sane length.
func TestErrorsRoundTrip(t *testing.T) {
	inner := errors.New("the cloud said so")
	for _, err := range []error{
		&providers.InsufficientCapacityError{Pool: "x", Zone: "rack-7", Granted: 2, Err: inner},
		&providers.QuotaExceededError{Pool: "x", Quota: "GPUs per site", Err: inner},
		&providers.ThrottledError{Pool: "x", RetryAfter: 3 * time.Second, Err: inner},
		&providers.NotFoundError{Pool: "x", Resource: "rack 9", Err: inner},
		&providers.GroupBusyError{Pool: "x", Reason: "firmware update"},
		&providers.RefusedError{Pool: "x", Err: inner},
	} {
		got := errorFromStatus("p", "call", statusOf(err))
		want := strings.Replace(err.Error(), "pool x", "pool p", 1)
		if errorToWire(got).GetKind() != errorToWire(err).GetKind() || !strings.Contains(got.Error(), strings.TrimPrefix(want, "pool p")[:10]) {
			t.Errorf("%T: came back as %T %q", err, got, got)
		}
	}
	back := errorFromStatus("p", "launch", statusOf(&providers.InsufficientCapacityError{Pool: "x", Zone: "rack-7", Granted: 2, Err: inner}))
	var ice *providers.InsufficientCapacityError
	if !errors.As(back, &ice) || ice.Zone != "rack-7" || ice.Granted != 2 || ice.Pool != "p" {
		t.Fatalf("capacity: %+v", back)
	}
	var te *providers.ThrottledError
	if back := errorFromStatus("p", "launch", statusOf(&providers.ThrottledError{Pool: "x", RetryAfter: 3 * time.Second, Err: inner})); !errors.As(back, &te) || te.RetryAfter != 3*time.Second {
		t.Fatalf("throttled: %+v", back)
	}
	long := errorFromStatus("p", "launch", statusOf(&providers.RefusedError{Pool: "x", Err: errors.New(strings.Repeat("\xffx", maxText))}))
	if len(long.Error()) > maxText+100 || strings.ContainsRune(long.Error(), '\uFFFD') && !strings.Contains(long.Error(), "?") {
		t.Fatalf("a long message came back at %d bytes", len(long.Error()))
	}
}

// FuzzGroupFromWire: whatever bytes a plugin answers Describe with,
// reading them never panics, and a group accepted is one a cloud could
// have: 0 <= min <= target, instances with distinct IDs and known states,
// failing only where pending and out of capacity.
func FuzzGroupFromWire(f *testing.F) {
	for _, g := range []*pb.Group{
		{Target: 2, Min: 1, Instances: []*pb.Instance{{Id: "a", State: pb.Instance_RUNNING}, {Id: "b", State: pb.Instance_PENDING,
			Failing: &pb.Error{Kind: pb.Error_QUOTA_EXCEEDED}, LaunchedAt: timestamppb.New(time.Date(2026, 12, 3, 9, 0, 0, 0, time.UTC))}}},
		{Target: -1},
		{Target: 1, Instances: []*pb.Instance{{Id: "a", State: pb.Instance_RUNNING}, {Id: "a", State: pb.Instance_TERMINATING}}},
	} {
		b, _ := proto.Marshal(g)
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		var w pb.Group
		if proto.Unmarshal(b, &w) != nil {
			return
		}
		g, err := groupFromWire("p", &w)
		if err != nil {
			return
		}
		if g.Min < 0 || g.Min > g.Target || g.Target > maxInstances {
			t.Fatalf("accepted min %d, target %d", g.Min, g.Target)
		}
		seen := map[string]bool{}
		for _, in := range g.Instances {
			if in.ID == "" || seen[in.ID] || in.State == "" {
				t.Fatalf("accepted instance %+v", in)
			}
			seen[in.ID] = true
			if in.Failing != nil && (in.State != providers.InstancePending || !providers.OutOfCapacity(in.Failing)) {
				t.Fatalf("accepted failing instance %+v", in)
			}
		}
	})
}
