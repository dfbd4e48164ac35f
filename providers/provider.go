// Package providers defines the one small interface every cloud implements
// (AWS Auto Scaling groups and EC2, GCP managed instance groups, external
// plugins, the simulated cloud) and the typed errors they return.
//
// A provider drives groups of instances, one per pool. It knows nothing of
// jobs, forecasts or plans: the planner decides, the controller calls the
// provider, and the provider reports what the cloud did or why it refused.
package providers

import (
	"context"
	"net"
	"time"

	"github.com/fleetcast/autoscaler/fleet"
)

// Provider drives the groups behind pools on one cloud.
//
// Every method takes the pool's config (its Settings, the provider's own,
// name the cloud object, e.g. the ASG or MIG) and may block on the network, so it takes a
// context. Errors are one of the typed errors of this package where the
// cloud's answer fits one, wrapped with the pool they concern. A provider
// must be safe for concurrent use: the controller describes its pools at
// once (one provider may serve several), while its API checks identities.
type Provider interface {
	// Describe returns the group as the cloud sees it now: its target size
	// and its instances.
	Describe(ctx context.Context, pool fleet.Pool) (Group, error)
	// Launch grows the group. It must be idempotent for the same
	// request key: after a controller restart the same request may be sent
	// again and must not launch twice. Groups with a target size (ASG, MIG)
	// set it to req.Target; others (EC2 RunInstances) launch req.Count with
	// req.Key as the client token.
	Launch(ctx context.Context, pool fleet.Pool, req LaunchRequest) error
	// Terminate removes the named instances and lowers the group's target
	// size by as many, so the group does not replace them.
	Terminate(ctx context.Context, pool fleet.Pool, instanceIDs []string) error
}

// Protector is implemented by providers whose groups can scale in on their
// own (an ASG's own policies): protected instances are never chosen by the
// cloud for scale-in. The controller protects nodes that hold work.
type Protector interface {
	SetProtected(ctx context.Context, pool fleet.Pool, instanceIDs []string, protected bool) error
}

// IdentityVerifier is implemented by providers that can check the
// identity a node presents when it bootstraps its credential, where its
// cloud signs none the controller checks itself (on-prem servers, a
// neocloud): a document the node's agent obtained (-identity-command),
// such as a host key's signature or a secret set at provisioning. The
// controller asks only about a node the pool's group lists as live, and
// only with the fleet's bootstrap secret presented too.
type IdentityVerifier interface {
	// VerifyIdentity returns nil if document proves the caller is node,
	// an instance of pool; an error saying why not otherwise.
	VerifyIdentity(ctx context.Context, pool fleet.Pool, node, document string) error
}

// IdentityPlace is implemented by the settings of pools
// (fleet.Pool.Settings) whose cloud signs an instance's identity with
// where the instance runs: a GCP pool's, as a Compute Engine identity
// token names the instance's project and zone. The controller checks that
// a node bootstrapping with such an identity runs where its pool's group
// does, without reading the cloud's settings itself.
type IdentityPlace interface {
	// IdentityProject is the project the pool's group is in.
	IdentityProject() string
	// IdentityZone reports whether zone is one the pool's group puts
	// instances in: a zonal group's zone, a zone of a regional group's
	// region.
	IdentityZone(zone string) bool
}

// LaunchRequest asks a group to grow.
type LaunchRequest struct {
	// Count is the number of instances to add.
	Count int
	// Target is the group's target size once they are added: the observed
	// target size plus Count.
	Target int
	// Key identifies the request across retries and restarts.
	Key string
	// Fleet names the fleet launching (the config's controller.fleet):
	// providers whose clouds keep tags set it on the instances at
	// creation, beside the pool and the key, so that a controller finds
	// its own fleet's instances and never another's.
	Fleet string
	// Names, where a pool's instances are named as the nodes of a
	// scheduler (fleet.Pool.SlurmNodes), are the names the instances are
	// to take, in order, at most Count: a provider whose instances are
	// named (a plugin's servers) launches those first. Empty otherwise.
	Names []string
}

// Group is a pool's group as the cloud sees it.
type Group struct {
	// Target is the size the cloud is converging to (desired capacity,
	// target size).
	Target int
	// Min is the group's own minimum size (an Auto Scaling group's
	// min_size), 0 if it has none: the cloud refuses to shrink the group
	// below it, so scale-in never goes there.
	Min int
	// Instances are the group's instances, in no particular order.
	Instances []Instance
	// Keyed is set when the group's instances carry the key of the launch
	// that made them (Instance.LaunchKey) and Target is only the number of
	// instances listed (EC2 instances run from a launch template): a
	// launch is then known by its key, and one the cloud does not list yet
	// (its reads are eventually consistent) is still owed. Groups with a
	// target size of their own (an Auto Scaling group, a managed instance
	// group) leave it false: their Target is the truth.
	Keyed bool
}

// InstanceState is the cloud's view of an instance's life.
type InstanceState string

// The instance states every provider maps its cloud's states to.
const (
	// InstancePending instances are booting.
	InstancePending InstanceState = "pending"
	// InstanceRunning instances run (their GPUs may still be initialising;
	// the agent reports when they are ready).
	InstanceRunning InstanceState = "running"
	// InstanceTerminating instances are going away.
	InstanceTerminating InstanceState = "terminating"
)

// Instance is one instance of a group.
type Instance struct {
	ID    string
	Zone  string
	State InstanceState
	// LaunchedAt is when the cloud started the instance.
	LaunchedAt time.Time
	// Protected instances are never chosen by the cloud for scale-in.
	Protected bool
	// LaunchKey is the key of the launch that made the instance, where the
	// cloud keeps it (a tag set at creation); empty otherwise.
	LaunchKey string
	// Fleet is the fleet the instance was launched for (LaunchRequest.Fleet),
	// where the cloud keeps it; empty otherwise.
	Fleet string
	// Owed is set on a stand-in for capacity the group owes but has not
	// launched yet (its target size above its instances): there is no
	// instance behind it, and its ID is not stable from one read to the
	// next. Terminating it lowers the group's target.
	Owed bool
	// Machine is the cloud's ID of the machine behind ID, where ID is a
	// name the cloud may give another machine (a Compute Engine instance's
	// numeric ID: a managed instance group recreates a VM under its name);
	// empty otherwise.
	Machine string
	// Address is where the instance is reached on the cluster's network
	// (an IP address or a host name), where its cloud says; empty
	// otherwise. A pool of Slurm nodes has Slurm reach the node there.
	Address string
	// Stopped is set on an instance its cloud has stopped (an EC2 instance
	// stopped, a Compute Engine instance stopped or suspended): its State
	// is InstanceTerminating, as it does no work, but it holds no GPUs and
	// is billed for its disks alone, so it counts against no limit.
	Stopped bool
	// Failing is set on a pending instance the cloud is trying and failing
	// to create (a managed instance group's last attempt, refused for
	// capacity or quota): one of this package's typed errors, for which
	// ShouldBackOff holds. The cloud keeps retrying, but the capacity is
	// not coming while it fails.
	Failing error
}

// ValidAddress reports whether addr is an IP address (not an unspecified
// one, 0.0.0.0 or ::) or a host name (at most 253 characters of letters,
// digits, '.', '-' and '_'): what Instance.Address may hold, and what
// may be handed to other programs.
func ValidAddress(addr string) bool {
	if ip := net.ParseIP(addr); ip != nil {
		return !ip.IsUnspecified()
	}
	if addr == "" || len(addr) > 253 || addr[0] == '-' || addr[0] == '.' {
		return false
	}
	for _, r := range addr {
		if !('a' <= r && r <= 'z' || 'A' <= r && r <= 'Z' || '0' <= r && r <= '9' || r == '.' || r == '-' || r == '_') {
			return false
		}
	}
	return true
}

// OfFleet reports whether the instance may be the named fleet's: tagged
// with it, or with no fleet at all (launched before fleets were named, or
// by a group that sets no fleet tag). Another fleet's is that fleet's to
// count and to remove.
func (in Instance) OfFleet(name string) bool { return in.Fleet == "" || in.Fleet == name }

// Orphan is an instance Fleetcast launched for a fleet (tagged with the
// fleet, a pool and a launch key at creation) whose pool the config no
// longer has: nobody else will ever remove it.
type Orphan struct {
	Instance
	// Pool is the pool named in the instance's tags.
	Pool string
	// Via is the configured pool through whose region (and account) the
	// orphan was found: the provider reaches it the same way.
	Via fleet.Pool
}

// Reaper is implemented by providers that can find and remove orphans
// (docs/design.md rule 8: tagged instances with no record are reaped). Only
// instances carrying the fleet's own tag, a pool tag and a launch key
// (so launched by Fleetcast itself, not by a group of Terraform's) are
// ever listed; the controller terminates one only once its agent has
// reported it idle and confirmed a drain.
type Reaper interface {
	// Orphans lists the fleet's instances whose pool is not among pools,
	// searching where pools run (each region and account they use).
	Orphans(ctx context.Context, fleet string, pools []fleet.Pool) ([]Orphan, error)
	// TerminateOrphan terminates one orphan, after checking again that it
	// carries the fleet's tag and its pool's.
	TerminateOrphan(ctx context.Context, fleet string, o Orphan) error
}
