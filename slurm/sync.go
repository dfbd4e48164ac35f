package slurm

import (
	"cmp"
	"slices"
	"strings"

	"github.com/fleetcast/autoscaler/fleet"
	"github.com/fleetcast/autoscaler/slurm/hostlist"
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
	// OpPowerDown powers down a node no job runs on.
	OpPowerDown Op = "power_down"
	// OpPowerDownForce powers down at once a node powering up with no
	// job placed on it and no instance (a power-up whose launch never
	// came): a plain power-down would wait for the power-up to end, and
	// Slurm would mark the node DOWN at ResumeTimeout.
	OpPowerDownForce Op = "power_down_force"
	// OpPowerUp powers up a node whose instance the controller launched,
	// so that Slurm places jobs on it as soon as its slurmd registers.
	OpPowerUp Op = "power_up"
	// OpSetAddress tells Slurm where a live instance's node is reached
	// (scontrol update nodeaddr=), as its cloud lists it.
	OpSetAddress Op = "set_address"
)

// opOrder is each Op's place in a sync.
var opOrder = map[Op]int{OpDrain: 0, OpResume: 1, OpPowerDownASAP: 2, OpPowerDown: 3, OpPowerDownForce: 4, OpPowerUp: 5, OpSetAddress: 6}

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
	// Reason is an OpDrain's reason (after ReasonPrefix); Address an
	// OpSetAddress's address.
	Reason, Address string
	// Why says why, for the log.
	Why string
}

// Request is a node Slurm powers up (POWERING_UP) for its jobs with no
// instance behind it: its ResumeProgram's request, which the controller
// serves by launching an instance as that node in one of Pools, those
// that have the name (the first that has capacity).
type Request struct {
	Pools []string
	Node  string
}

// Checkpoint is a batch job Slurm runs on a node whose instance drains,
// that no agent reports: the controller may ask it to checkpoint and end
// through Slurm (scancel --signal --batch). Node is the draining node (a
// job on several is listed for each that drains).
type Checkpoint struct {
	Job, Node, Pool string
}

// Untouched is a pool's node a sync leaves alone, and why.
type Untouched struct {
	Pool, Node, Why string
}

// SyncResult is what Sync asks.
type SyncResult struct {
	Changes    []Change
	Requested  []Request
	Untouched  []Untouched
	Checkpoint []Checkpoint
}

// SyncInput is what Sync works from.
type SyncInput struct {
	// Pools are the pools; those with SlurmNodes are synced.
	Pools []fleet.Pool
	// Nodes are the fleet as the controller last observed it: an
	// instance is the node of its ID in its pool.
	Nodes []fleet.Node
	// Launching are the names bound to launches whose instances are not
	// listed yet: they count as booting instances.
	Launching []string
	// Draining are the nodes the controller began to drain since Nodes
	// were observed: they count as draining instances.
	Draining []string
	// Unsure are the pools whose instances are not known now (not read,
	// or a change's outcome not settled): none of their nodes is changed
	// or requested.
	Unsure []string
	// Slurm is what sinfo says of the nodes now, and Jobs what squeue
	// says of the jobs.
	Slurm []Node
	Jobs  []Job
}

// Sync says what changes in Slurm make the pools' Slurm nodes
// (fleet.Pool.SlurmNodes) follow their instances.
//
//   - A booting instance's node (or a launch's) is powered up if Slurm has
//     it powered down. A running instance's node that Slurm has powered
//     down is left alone: its slurmd booted before any power-up made
//     now, which Slurm ignores (it would mark the node DOWN). A booting
//     or running instance's address, where its cloud lists one, is set
//     as its node's (OpSetAddress), but on a node left alone.
//   - A live instance's node is drained (DrainReason) while the instance
//     drains, and a drain of the controller's is ended otherwise.
//   - A node with no instance, or whose instance is terminating, is
//     powered down: at once where no job runs on it, else drained
//     (GoneReason) and powered down when its jobs end. One Slurm powers
//     up for a job placed on it is Requested instead; one powering up
//     with no job (a power-up whose launch never came) is powered down at
//     once (OpPowerDownForce).
//   - A node Untouchable says is not the controller's to change, or that
//     sinfo does not list, is Untouched whatever its instance; a node
//     powering down is left to finish.
//   - A name pools share is one node: its instance is the one of that ID
//     in any of them (two are Untouched), and a request is any of theirs.
//     A name is left alone while any of its pools is Unsure.
//   - Each running batch job on a draining instance's node that no
//     instance's agent reports is to Checkpoint.
//
// Sync is pure: it reads its input and changes none of it.
func Sync(in SyncInput) SyncResult {
	var r SyncResult
	byName := make(map[string]*Node, len(in.Slurm))
	for i := range in.Slurm {
		byName[in.Slurm[i].Name] = &in.Slurm[i]
	}
	// Each name's pools, in the pools' order, and names in first use.
	var names []string
	pools := map[string][]string{}
	for _, p := range in.Pools {
		for _, name := range p.SlurmNodes {
			if _, seen := pools[name]; !seen {
				names = append(names, name)
			}
			pools[name] = append(pools[name], p.Name)
		}
	}
	live := map[string][]*fleet.Node{}
	for i := range in.Nodes {
		if n := &in.Nodes[i]; n.State != fleet.Terminating && slices.Contains(pools[n.ID], n.Pool) {
			live[n.ID] = append(live[n.ID], n)
		}
	}
	launching := make(map[string]bool, len(in.Launching))
	for _, n := range in.Launching {
		launching[n] = true
	}
	draining := make(map[string]bool, len(in.Draining))
	for _, n := range in.Draining {
		draining[n] = true
	}
	known := map[string]bool{} // jobs agents report, wherever they run
	for i := range in.Nodes {
		for _, j := range in.Nodes[i].Jobs {
			known[j.ID] = true
		}
	}
	for _, name := range names {
		of := pools[name]
		if slices.ContainsFunc(of, func(p string) bool { return slices.Contains(in.Unsure, p) }) {
			continue
		}
		pool := of[0]
		untouched := func(why string) { r.Untouched = append(r.Untouched, Untouched{pool, name, why}) }
		sn := byName[name]
		if sn == nil {
			untouched("not listed by sinfo: declare it State=CLOUD in slurm.conf and set PrivateData=cloud, so that a powered-down node is listed")
			continue
		}
		if why := Untouchable(sn); why != "" {
			untouched(why)
			continue
		}
		var n *fleet.Node
		switch ns := live[name]; len(ns) {
		case 0:
		case 1:
			n, pool = ns[0], ns[0].Pool
		default:
			untouched("an instance of this name in pools " + ns[0].Pool + " and " + ns[1].Pool + ": one node cannot be two instances")
			continue
		}
		if sn.HasFlag("POWERING_DOWN") || sn.HasFlag("POWER_DOWN") {
			continue // Slurm powers it down: it can be powered up after
		}
		booting := n != nil && n.State == fleet.Pending || n == nil && launching[name]
		down := sn.HasFlag("POWERED_DOWN")
		up := sn.HasFlag("POWERING_UP") || sn.HasFlag("POWER_UP")
		ours := sn.HasFlag("DRAIN") // Untouchable says whose: ours
		change := func(op Op, reason, why string) {
			r.Changes = append(r.Changes, Change{Op: op, Node: name, Pool: pool, Reason: reason, Why: why})
		}
		switch {
		case n != nil && (n.State == fleet.Draining || draining[name]):
			if !ours && !down {
				change(OpDrain, DrainReason, "its instance is draining")
			}
			r.Checkpoint = append(r.Checkpoint, unknownJobs(in.Jobs, known, n.Pool, name)...)
		case n != nil || booting:
			if ours && !down {
				change(OpResume, "", "its instance serves again")
			}
			switch {
			case down && !up && booting:
				change(OpPowerUp, "", "its instance is launched")
			case down && !up:
				untouched("powered down in Slurm while its instance runs: Slurm would ignore its slurmd, booted before a power-up now; power it up and restart its slurmd, or let the controller scale it in")
				continue
			}
			if n != nil && n.Address != "" && n.Address != sn.Address {
				r.Changes = append(r.Changes, Change{Op: OpSetAddress, Node: name, Pool: pool, Address: n.Address, Why: "its instance is reached at " + n.Address})
			}
		case up && Busy(sn):
			r.Requested = append(r.Requested, Request{Pools: of, Node: name})
		case up:
			change(OpPowerDownForce, "", "powering up with no instance, launch or job")
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
	sortChanges(r.Changes)
	return r
}

// unknownJobs are the running batch jobs Slurm places on the node of
// that name in pool that no agent reports (known), as Checkpoints in job
// order.
func unknownJobs(jobs []Job, known map[string]bool, pool, name string) []Checkpoint {
	var out []Checkpoint
	for i := range jobs {
		j := &jobs[i]
		if j.State != "RUNNING" || j.NotBatch || known[j.ID] {
			continue
		}
		if on, err := hostlist.Expand(j.NodeList); err == nil && slices.Contains(on, name) {
			out = append(out, Checkpoint{Job: j.ID, Node: name, Pool: pool})
		}
	}
	slices.SortFunc(out, func(a, b Checkpoint) int { return cmp.Compare(a.Job, b.Job) })
	return out
}

// Busy reports whether Slurm says jobs run on the node, or are placed on
// it while it powers up (allocated, mixed, or completing).
func Busy(n *Node) bool {
	return n.State == "ALLOCATED" || n.State == "MIXED" || n.HasFlag("COMPLETING")
}

// heldFlags are the flags of a node in someone else's hands: a
// maintenance reservation, a reboot asked for, a registration refused.
var heldFlags = []string{"MAINTENANCE", "REBOOT_REQUESTED", "REBOOT_ISSUED", "INVALID_REG"}

// Untouchable is why a node is not the controller's to change, "" if it
// is: down, failed, in maintenance, asked to reboot, refused at
// registration, drained for a reason that is not the controller's
// (ReasonPrefix), or in a state the controller does not know (only IDLE,
// MIXED and ALLOCATED are changed). Such a node is left alone whatever
// its instance.
func Untouchable(n *Node) string {
	switch {
	case n.State == "DOWN":
		return "down in Slurm (" + reasonOrNone(n.Reason) + "): an administrator's to resume"
	case n.State == "FAIL" || n.HasFlag("FAIL"):
		return "failed in Slurm (" + reasonOrNone(n.Reason) + "): an administrator's to resume"
	case n.State != "IDLE" && n.State != "MIXED" && n.State != "ALLOCATED":
		return "in state " + cmp.Or(n.State, "(none given)") + " in Slurm, which the controller does not change"
	}
	for _, f := range heldFlags {
		if n.HasFlag(f) {
			return strings.ToLower(f) + " in Slurm (" + reasonOrNone(n.Reason) + "): an administrator's"
		}
	}
	if n.HasFlag("DRAIN") && !strings.HasPrefix(n.Reason, ReasonPrefix) {
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
