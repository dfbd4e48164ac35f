package slurm

import (
	"slices"
	"strings"

	"github.com/fleetcast/autoscaler/fleet"
)

// Op is a change Sync asks of a Slurm node.
type Op string

// The changes, in the order a sync makes them (Sync sorts by it).
const (
	// OpDrain drains the node with a ReasonPrefix reason: it takes no new
	// job.
	OpDrain Op = "drain"
	// OpResume ends the controller's drain of a node whose instance
	// serves again (a cancelled drain).
	OpResume Op = "resume"
	// OpPowerDownASAP powers a node down once its jobs end, taking no
	// new one (after OpDrain, so that its reason stays the controller's).
	OpPowerDownASAP Op = "power_down_asap"
	// OpPowerDown powers down at once a node no job runs on.
	OpPowerDown Op = "power_down"
	// OpPowerUp powers up a node whose instance the controller launched,
	// so that Slurm places jobs on it as soon as its slurmd registers.
	OpPowerUp Op = "power_up"
)

// opOrder is each Op's place in a sync.
var opOrder = map[Op]int{OpDrain: 0, OpResume: 1, OpPowerDownASAP: 2, OpPowerDown: 3, OpPowerUp: 4}

// DrainReason is the reason, after ReasonPrefix, of the drains Sync asks
// for: a node whose instance the controller drains.
const DrainReason = "scale-in"

// GoneReason is the reason of the drain of a node that still runs jobs,
// as Slurm says, but has no instance in its pool's listing: it takes no
// new job and is powered down once they end, never at once.
const GoneReason = "no instance"

// Change is one change to one node.
type Change struct {
	Op   Op
	Node string
	Pool string
	// Reason is an OpDrain's reason (after ReasonPrefix).
	Reason string
	// Why says why, for the log.
	Why string
}

// Request is a node Slurm powers up (POWERING_UP) for its jobs with no
// instance behind it: its ResumeProgram's request, which the controller
// serves by launching an instance as that node.
type Request struct {
	Pool, Node string
}

// Untouched is a pool's node a sync leaves alone, and why.
type Untouched struct {
	Pool, Node, Why string
}

// SyncResult is what Sync asks.
type SyncResult struct {
	Changes   []Change
	Requested []Request
	Untouched []Untouched
}

// Sync says what changes in Slurm make the pools' Slurm nodes
// (fleet.Pool.SlurmNodes) follow their instances, nodes (the fleet as
// the controller observes it; an instance is the node of its ID in its
// pool), from what sinfo says of them now. launching are the names of
// launches made but not listed yet, which count as live instances.
//
//   - A live instance's node is powered up if Slurm has it powered down,
//     and a drain of the controller's is ended unless the instance is
//     draining, when its node is drained (DrainReason).
//   - A node with no instance, or whose instance is terminating, is
//     powered down: at once where no job runs on it, else drained
//     (GoneReason) and powered down when its jobs end. One Slurm powers
//     up for its jobs is Requested instead.
//   - A node down in Slurm, failed, or drained for a reason that is not
//     the controller's (ReasonPrefix) is an administrator's: Untouched,
//     whatever its instance; so is a node sinfo does not list. A node
//     powering down is left to finish.
//
// Sync is pure: it reads its arguments and changes none of them.
func Sync(pools []fleet.Pool, nodes []fleet.Node, launching []string, slurm []Node) SyncResult {
	var r SyncResult
	byName := make(map[string]*Node, len(slurm))
	for i := range slurm {
		byName[slurm[i].Name] = &slurm[i]
	}
	type key struct{ pool, id string }
	live := map[key]fleet.NodeState{}
	for i := range nodes {
		if n := &nodes[i]; n.State != fleet.Terminating {
			live[key{n.Pool, n.ID}] = n.State
		}
	}
	flight := make(map[string]bool, len(launching))
	for _, n := range launching {
		flight[n] = true
	}
	for _, p := range pools {
		for _, name := range p.SlurmNodes {
			sn := byName[name]
			if sn == nil {
				r.Untouched = append(r.Untouched, Untouched{p.Name, name, "not listed by sinfo: declare it State=CLOUD in slurm.conf and set PrivateData=cloud, so that a powered-down node is listed"})
				continue
			}
			if why := Administered(sn); why != "" {
				r.Untouched = append(r.Untouched, Untouched{p.Name, name, why})
				continue
			}
			if sn.HasFlag("POWERING_DOWN") || sn.HasFlag("POWER_DOWN") {
				continue // Slurm powers it down: it can be powered up after
			}
			st, ok := live[key{p.Name, name}]
			if !ok && flight[name] {
				st, ok = fleet.Pending, true
			}
			down := sn.HasFlag("POWERED_DOWN")
			up := sn.HasFlag("POWERING_UP") || sn.HasFlag("POWER_UP")
			ours := sn.HasFlag("DRAIN") // Administered says whose: ours
			change := func(op Op, reason, why string) {
				r.Changes = append(r.Changes, Change{Op: op, Node: name, Pool: p.Name, Reason: reason, Why: why})
			}
			switch {
			case ok && st == fleet.Draining:
				if !ours && !down {
					change(OpDrain, DrainReason, "its instance is draining")
				}
			case ok:
				if ours && !down {
					change(OpResume, "", "its instance serves again")
				}
				if down && !up {
					change(OpPowerUp, "", "its instance is launched")
				}
			case up:
				r.Requested = append(r.Requested, Request{Pool: p.Name, Node: name})
			case down:
			case Busy(sn):
				if !ours {
					change(OpDrain, GoneReason, "it runs jobs and has no instance")
				}
				change(OpPowerDownASAP, "", "it runs jobs and has no instance: powered down when they end")
			default:
				change(OpPowerDown, "", "it has no instance")
			}
		}
	}
	sortChanges(r.Changes)
	return r
}

// Busy reports whether Slurm says jobs run on the node (allocated, mixed,
// or completing).
func Busy(n *Node) bool {
	return n.State == "ALLOCATED" || n.State == "MIXED" || n.HasFlag("COMPLETING")
}

// Administered is why a node is an administrator's, "" if it is not:
// down, failed, or drained for a reason that is not the controller's
// (ReasonPrefix). The controller never changes such a node.
func Administered(n *Node) string {
	switch {
	case n.State == "DOWN":
		return "down in Slurm (" + reasonOrNone(n.Reason) + "): an administrator's to resume"
	case n.State == "FAIL" || n.HasFlag("FAIL"):
		return "failed in Slurm (" + reasonOrNone(n.Reason) + "): an administrator's to resume"
	case n.HasFlag("DRAIN") && !strings.HasPrefix(n.Reason, ReasonPrefix):
		return "drained in Slurm by someone else (" + reasonOrNone(n.Reason) + ")"
	}
	return ""
}

func reasonOrNone(r string) string {
	if r == "" {
		return "no reason given"
	}
	return "reason: " + r
}

// sortChanges orders changes by Op (opOrder), keeping each Op's in the
// pools' and names' order, so that a node drained is powered down after.
func sortChanges(cs []Change) {
	slices.SortStableFunc(cs, func(a, b Change) int { return opOrder[a.Op] - opOrder[b.Op] })
}
