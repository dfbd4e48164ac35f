package plugin

import (
	"errors"
	"fmt"
	"net/netip"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/structpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/fleetcast/autoscaler/fleet"
	"github.com/fleetcast/autoscaler/providers"
	pb "github.com/fleetcast/autoscaler/providers/plugin/proto"
)

// The limits of what a plugin's answer may hold: more is garbage, refused
// rather than followed.
const (
	maxInstances = 100_000
	maxText      = 4 << 10
)

// poolToWire is a pool as the protocol carries it: its target settings
// (Settings.Target) as a Struct.
func poolToWire(p fleet.Pool) (*pb.Pool, error) {
	target, err := structpb.NewStruct(SettingsOf(p).Target)
	if err != nil {
		return nil, fmt.Errorf("pool %s: target: %w", p.Name, err)
	}
	return &pb.Pool{Name: p.Name, Region: p.Region, Zones: p.Zones, InstanceType: p.InstanceType, GpuModel: p.GPUModel,
		GpusPerNode: int32(p.GPUsPerNode), Capacity: string(p.Capacity), PricePerHour: p.PricePerHour,
		LeadTime: durationpb.New(p.LeadTime), Min: int32(p.Min), Max: int32(p.Max), Target: target}, nil
}

// poolFromWire is the pool a plugin was sent: what the protocol carries of
// it, its target settings as JSON values.
func poolFromWire(p *pb.Pool) fleet.Pool {
	s := Settings{Target: p.GetTarget().AsMap()}
	return fleet.Pool{Name: p.GetName(), Provider: fleet.ProviderPlugin, Region: p.GetRegion(), Zones: p.GetZones(), InstanceType: p.GetInstanceType(),
		GPUModel: p.GetGpuModel(), GPUsPerNode: int(p.GetGpusPerNode()), Capacity: fleet.CapacityType(p.GetCapacity()), PricePerHour: p.GetPricePerHour(),
		LeadTime: p.GetLeadTime().AsDuration(), Min: int(p.GetMin()), Max: int(p.GetMax()), Settings: s}
}

var statesToWire = map[providers.InstanceState]pb.Instance_State{
	providers.InstancePending: pb.Instance_PENDING, providers.InstanceRunning: pb.Instance_RUNNING, providers.InstanceTerminating: pb.Instance_TERMINATING,
}

func groupToWire(g providers.Group) *pb.Group {
	out := &pb.Group{Target: int32(g.Target), Min: int32(g.Min), Keyed: g.Keyed}
	for _, in := range g.Instances {
		w := &pb.Instance{Id: in.ID, Zone: in.Zone, State: statesToWire[in.State], Protected: in.Protected,
			LaunchKey: in.LaunchKey, Fleet: in.Fleet, Owed: in.Owed, Address: in.Address}
		if !in.LaunchedAt.IsZero() {
			w.LaunchedAt = timestamppb.New(in.LaunchedAt)
		}
		if in.Failing != nil {
			w.Failing = errorToWire(in.Failing)
		}
		out.Instances = append(out.Instances, w)
	}
	return out
}

// groupFromWire checks a plugin's answer and makes it a group: a state it
// does not know, an instance without an ID, a negative or absurd size is
// refused, naming the pool, so that a plugin's garbage never reaches the
// planner.
func groupFromWire(pool string, g *pb.Group) (providers.Group, error) {
	if g == nil {
		return providers.Group{}, fmt.Errorf("pool %s: the plugin's answer holds no group", pool)
	}
	if g.GetTarget() < 0 || g.GetTarget() > maxInstances || g.GetMin() < 0 || g.GetMin() > g.GetTarget() || len(g.GetInstances()) > maxInstances {
		return providers.Group{}, fmt.Errorf("pool %s: the plugin's group has target %d, min %d and %d instances: not a group (want 0 <= min <= target <= %d)",
			pool, g.GetTarget(), g.GetMin(), len(g.GetInstances()), maxInstances)
	}
	out := providers.Group{Target: int(g.GetTarget()), Min: int(g.GetMin()), Keyed: g.GetKeyed()}
	seen := map[string]bool{}
	for i, w := range g.GetInstances() {
		in := providers.Instance{ID: w.GetId(), Zone: cut(w.GetZone()), Protected: w.GetProtected(), LaunchKey: cut(w.GetLaunchKey()), Fleet: cut(w.GetFleet()), Owed: w.GetOwed(),
			Address: w.GetAddress()}
		if ip, err := netip.ParseAddr(in.Address); err == nil && ip.Zone() == "" {
			// As Slurm writes it: 10.0.0.7 for ::ffff:10.0.0.7, fd00::7
			// for FD00:0::7.
			in.Address = ip.Unmap().String()
		}
		for s, ws := range statesToWire {
			if ws == w.GetState() {
				in.State = s
			}
		}
		switch {
		case in.ID == "" || len(in.ID) > 256:
			return providers.Group{}, fmt.Errorf("pool %s: the plugin's instance %d has an ID of %d characters: want 1-256", pool, i, len(in.ID))
		case seen[in.ID]:
			return providers.Group{}, fmt.Errorf("pool %s: the plugin lists instance %s twice", pool, in.ID)
		case in.State == "":
			return providers.Group{}, fmt.Errorf("pool %s: the plugin's instance %s has state %v: want pending, running or terminating", pool, in.ID, w.GetState())
		case in.Address != "" && !providers.ValidAddress(in.Address):
			return providers.Group{}, fmt.Errorf("pool %s: the plugin's instance %s has address %q: want an IP address or a host name", pool, in.ID, cut(in.Address))
		}
		seen[in.ID] = true
		if at := w.GetLaunchedAt(); at != nil {
			if err := at.CheckValid(); err != nil {
				return providers.Group{}, fmt.Errorf("pool %s: the plugin's instance %s: launched_at: %w", pool, in.ID, err)
			}
			in.LaunchedAt = at.AsTime()
		}
		if f := w.GetFailing(); f != nil {
			in.Failing = errorFromWire(pool, f)
			if !providers.OutOfCapacity(in.Failing) || in.State != providers.InstancePending {
				return providers.Group{}, fmt.Errorf("pool %s: the plugin's instance %s is %s and failing for %v: only a pending instance fails, for capacity or quota", pool, in.ID, in.State, f.GetKind())
			}
		}
		out.Instances = append(out.Instances, in)
	}
	return out, nil
}

// errorToWire is the typed error's kind and what it says.
func errorToWire(err error) *pb.Error {
	var (
		ice  *providers.InsufficientCapacityError
		qe   *providers.QuotaExceededError
		te   *providers.ThrottledError
		nf   *providers.NotFoundError
		busy *providers.GroupBusyError
		ref  *providers.RefusedError
	)
	w := &pb.Error{Message: err.Error()}
	switch {
	case errors.As(err, &ice):
		w.Kind, w.Message, w.Zone, w.Granted = pb.Error_INSUFFICIENT_CAPACITY, unwrapText(ice.Err, err), ice.Zone, int32(ice.Granted)
	case errors.As(err, &qe):
		w.Kind, w.Quota, w.Message = pb.Error_QUOTA_EXCEEDED, qe.Quota, unwrapText(qe.Err, err)
	case errors.As(err, &te):
		w.Kind, w.Message = pb.Error_THROTTLED, unwrapText(te.Err, err)
		if te.RetryAfter > 0 {
			w.RetryAfter = durationpb.New(te.RetryAfter)
		}
	case errors.As(err, &nf):
		w.Kind, w.Resource, w.Message = pb.Error_NOT_FOUND, nf.Resource, unwrapText(nf.Err, err)
	case errors.As(err, &busy):
		w.Kind, w.Message = pb.Error_GROUP_BUSY, busy.Reason
	case errors.As(err, &ref):
		w.Kind, w.Message = pb.Error_REFUSED, unwrapText(ref.Err, err)
	}
	// Proto strings are UTF-8, and a plugin's words are kept short.
	w.Message, w.Quota, w.Resource, w.Zone = cut(w.Message), cut(w.Quota), cut(w.Resource), cut(w.Zone)
	return w
}

func unwrapText(inner, whole error) string {
	if inner != nil {
		return inner.Error()
	}
	return whole.Error()
}

// errorFromWire is the typed error a plugin's Error says, for pool; its
// text is cut to a sane length.
func errorFromWire(pool string, w *pb.Error) error {
	msg := cut(w.GetMessage())
	inner := fmt.Errorf("plugin: %s", msg)
	switch w.GetKind() {
	case pb.Error_INSUFFICIENT_CAPACITY:
		return &providers.InsufficientCapacityError{Pool: pool, Zone: cut(w.GetZone()), Granted: int(min(max(w.GetGranted(), 0), maxInstances)), Err: inner}
	case pb.Error_QUOTA_EXCEEDED:
		return &providers.QuotaExceededError{Pool: pool, Quota: cut(w.GetQuota()), Err: inner}
	case pb.Error_THROTTLED:
		d := w.GetRetryAfter().AsDuration()
		return &providers.ThrottledError{Pool: pool, RetryAfter: min(max(d, 0), time.Hour), Err: inner}
	case pb.Error_NOT_FOUND:
		return &providers.NotFoundError{Pool: pool, Resource: cut(w.GetResource()), Err: inner}
	case pb.Error_GROUP_BUSY:
		return &providers.GroupBusyError{Pool: pool, Reason: "plugin: " + msg}
	case pb.Error_REFUSED:
		return &providers.RefusedError{Pool: pool, Err: inner}
	}
	return fmt.Errorf("pool %s: %w", pool, inner)
}

// statusOf is the gRPC status a plugin answers a failed call with: a code
// for the kind, and the Error as its detail.
func statusOf(err error) error {
	w := errorToWire(err)
	code := map[pb.Error_Kind]codes.Code{
		pb.Error_INSUFFICIENT_CAPACITY: codes.ResourceExhausted, pb.Error_QUOTA_EXCEEDED: codes.ResourceExhausted,
		pb.Error_THROTTLED: codes.Unavailable, pb.Error_NOT_FOUND: codes.NotFound, pb.Error_GROUP_BUSY: codes.FailedPrecondition,
		pb.Error_REFUSED: codes.PermissionDenied,
	}[w.GetKind()]
	if code == codes.OK {
		code = codes.Unknown
	}
	st, derr := status.New(code, w.GetMessage()).WithDetails(w)
	if derr != nil {
		return status.Error(code, w.GetMessage())
	}
	return st.Err()
}

// errorFromStatus is the error a failed call's status says, for pool: the
// typed error of its Error detail, or, without one, the status as it is
// (a deadline, a plugin gone).
func errorFromStatus(pool, call string, err error) error {
	if err == nil {
		return nil
	}
	st, ok := status.FromError(err)
	if !ok {
		return fmt.Errorf("pool %s: plugin %s: %w", pool, call, err)
	}
	for _, d := range st.Details() {
		if w, ok := d.(*pb.Error); ok {
			return errorFromWire(pool, w)
		}
	}
	return fmt.Errorf("pool %s: plugin %s: %s: %s", pool, call, st.Code(), cut(st.Message()))
}
