package controller

import (
	"cmp"
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/fleetcast/autoscaler/fleet"
	"github.com/fleetcast/autoscaler/slurm"
	"github.com/fleetcast/autoscaler/slurm/hostlist"
)

// slurmNodes is what the Slurm source keeps of the pools that are Slurm
// nodes (fleet.Pool.SlurmNodes), under the source's lock: the fleet as
// the last cycle observed it, the names bound to launches, and what the
// last whole read said of the nodes.
type slurmNodes struct {
	// control changes the nodes; nil where the source only reads (a dry
	// run, or no pool of Slurm nodes).
	control *slurm.Control
	pools   []fleet.Pool // those with SlurmNodes
	// fleet is the instances of those pools as the last cycle observed
	// them (ID, pool, state); nil until a cycle has handed them over.
	fleet []fleet.Node
	// unsure are the pools of Slurm nodes the last cycle did not observe;
	// draining the nodes the controller began to drain since (Drain),
	// draining for a read before the next cycle observes them so.
	unsure   []string
	draining []string
	// bound are the names launches were made for (binding): they count
	// as launching until their instance is listed, or for the pool's
	// provision timeout; refused those of launches the cloud refused,
	// released at the next SetFleet (one granted is listed by then), or
	// carried to the next cycle where another pool shares the name.
	bound   map[string]binding
	refused map[string]bool
	// signal is the signal a draining node's jobs no agent knows are
	// sent ("" for none); signalled the IDs of the jobs sent it, kept
	// while Slurm runs them, so that each is sent it once.
	signal    string
	signalled map[string]bool
	// nodes are sinfo's nodes of the last whole read; requested the
	// names Slurm powers up for its jobs with no instance behind them.
	nodes     []slurm.Node
	requested []slurm.Request
	// untouched is why each name a sync left alone was, as last logged.
	untouched map[string]string
}

// binding is a name bound to a launch: when, in which pool, and whether
// the launch was refused and the name is carried to a launch of another
// pool that shares it (for one cycle), powered up in Slurm still.
type binding struct {
	at      time.Time
	pool    string
	carried bool
}

// nodeWork is what a read has the source do once its lock is released:
// the changes to the nodes, and the jobs to ask to checkpoint.
type nodeWork struct {
	changes []slurm.Change
	signal  []slurm.Checkpoint
}

// hasNames reports whether any pool is a set of Slurm nodes.
func hasNames(pools []fleet.Pool) bool {
	return slices.ContainsFunc(pools, func(p fleet.Pool) bool { return len(p.SlurmNodes) > 0 })
}

// SetFleet hands the source the fleet a cycle observed at now, before the
// cycle plans: its nodes (the source keeps their IDs, pools and states)
// and its pools, of which those not observed (not read, or a change's
// outcome unsettled) have their Slurm nodes left as they are. The pools'
// Slurm nodes follow these instances at the next read, and the cycle's
// launches are bound to names by them (Bind). Names bound to launches are
// released once their instance is listed, or after the pool's provision
// timeout.
func (s *SlurmSource) SetFleet(now time.Time, nodes []fleet.Node, pools []fleet.PoolStatus) {
	if s.names.control == nil {
		return
	}
	var unsure []string
	for i := range pools {
		if pools[i].IsUnobserved() && s.namedPool(pools[i].Name) != nil {
			unsure = append(unsure, pools[i].Name)
		}
	}
	kept := make([]fleet.Node, 0, len(nodes))
	for i := range nodes {
		n := &nodes[i]
		if p := s.namedPool(n.Pool); p != nil {
			k := fleet.Node{ID: n.ID, Pool: n.Pool, State: n.State, Address: n.Address}
			for _, j := range n.Jobs { // their IDs: jobs the agent knows
				k.Jobs = append(k.Jobs, fleet.Job{ID: j.ID})
			}
			kept = append(kept, k)
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.names.fleet, s.names.unsure, s.names.draining = kept, unsure, nil
	for _, n := range kept {
		if n.State != fleet.Terminating { // not a new launch's instance
			delete(s.names.bound, n.ID)
		}
	}
	for name, b := range s.names.bound {
		p := s.namedPool(b.pool)
		switch {
		case p == nil || now.Sub(b.at) > p.ProvisionTimeout || b.carried:
			delete(s.names.bound, name) // a carried name no pool took
		case s.names.refused[name] && len(s.poolsOfName(name)) > 1:
			b.carried = true
			s.names.bound[name] = b
		case s.names.refused[name]:
			delete(s.names.bound, name)
		}
	}
	clear(s.names.refused)
}

// Refused releases the names of a launch the cloud refused (a lack of
// capacity, a quota) at the next SetFleet: those it granted are listed by
// then, and the rest, powered up for nothing, are powered down (Sync). A
// name another pool shares is carried instead, for one more cycle: a
// launch in that pool takes it, powered up in Slurm still (a stockout
// falls back to the next pool, and the node does not go DOWN for it).
func (s *SlurmSource) Refused(names []string) {
	if len(names) == 0 {
		return
	}
	s.mu.Lock()
	for _, n := range names {
		s.names.refused[n] = true
	}
	s.mu.Unlock()
	s.Poke() // a job Slurm placed on one is a request for another pool
}

// DrainedIdle reports whether, in a pool of Slurm nodes, the last whole
// read says the node of that name holds no job and can start none:
// drained (by anyone), down, failed or powered down, with no job on it; or
// not listed at all (a node up is listed). A draining node's drain is
// confirmed only then, whatever its agent says: a job Slurm runs on it
// need not be registered with the agent. False before any whole read;
// true for a node of any other pool, and where the source does not act on
// Slurm.
func (s *SlurmSource) DrainedIdle(pool, node string) bool {
	if s.names.control == nil || s.namedPool(pool) == nil {
		return true
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.names.nodes == nil {
		return false
	}
	for i := range s.names.nodes {
		if sn := &s.names.nodes[i]; sn.Name == node {
			closed := sn.HasFlag("DRAIN") || sn.State == "DOWN" || sn.State == "FAIL" || sn.HasFlag("FAIL") || sn.HasFlag("POWERED_DOWN")
			return closed && !slurm.Busy(sn)
		}
	}
	return true
}

// Drain drains the node in Slurm at once (DrainReason), in a pool of Slurm
// nodes, as the controller starts to drain its instance, so that Slurm
// places no new job on it meanwhile; the read after does it again if this
// fails. A node the last read says is not the controller's to change
// (slurm.Untouchable), or does not list, is left alone.
func (s *SlurmSource) Drain(ctx context.Context, pool, node string) {
	if s.names.control == nil || s.namedPool(pool) == nil {
		return
	}
	s.mu.Lock()
	// A read before the next cycle takes it as draining: the view it
	// has is from before the drain, and would resume it.
	s.names.draining = append(s.names.draining, node)
	ok := false
	for i := range s.names.nodes {
		if sn := &s.names.nodes[i]; sn.Name == node {
			ok = slurm.Untouchable(sn) == "" && !slices.ContainsFunc([]string{"POWERED_DOWN", "POWERING_DOWN", "POWER_DOWN"}, sn.HasFlag)
		}
	}
	s.mu.Unlock()
	if !ok {
		return
	}
	err := s.names.control.Drain(ctx, []string{node}, slurm.DrainReason)
	s.countChange(slurm.OpDrain, 1, err)
	if err != nil {
		s.log.Warn("slurm node change failed", "op", slurm.OpDrain, "nodes", node, "error", err)
		return
	}
	s.log.Info("slurm node change", "op", slurm.OpDrain, "nodes", node, "why", "its instance is draining")
}

// namedPool is the pool of that name if it is a set of Slurm nodes.
func (s *SlurmSource) namedPool(name string) *fleet.Pool {
	for i := range s.names.pools {
		if s.names.pools[i].Name == name {
			return &s.names.pools[i]
		}
	}
	return nil
}

// poolsOfName is the names of the pools whose Slurm nodes include name.
func (s *SlurmSource) poolsOfName(name string) []string {
	var out []string
	for i := range s.names.pools {
		if slices.Contains(s.names.pools[i].SlurmNodes, name) {
			out = append(out, s.names.pools[i].Name)
		}
	}
	return out
}

// Bind chooses the names a launch of count instances in the pool is to
// take, if the pool is a set of Slurm nodes (else none): first those
// Slurm powers up for its jobs (requested), then those of another pool's
// refused launch that the pool shares (carried), then free ones in the
// pool's order: powered down in the last read, not an administrator's,
// with no instance and no launch. It powers the free ones up in Slurm
// before the launch is made, so that the instances' slurmds, booting
// after, register as those nodes; if that fails, nothing is bound and the
// error says why (the launch is not made). Fewer names than count where
// fewer are free.
func (s *SlurmSource) Bind(ctx context.Context, pool string, count int, now time.Time) ([]string, error) {
	p := s.namedPool(pool)
	if s.names.control == nil || p == nil || count < 1 {
		return nil, nil
	}
	s.mu.Lock()
	if s.names.nodes == nil {
		s.mu.Unlock()
		return nil, fmt.Errorf("pool %s: no read of the Slurm cluster yet, to bind the launch to its nodes", pool)
	}
	taken := make(map[string]bool, len(s.names.fleet)+len(s.names.bound))
	for _, n := range s.names.fleet {
		// Terminating too: its server is not free until it is gone.
		taken[n.ID] = true
	}
	var carried []string
	for name, b := range s.names.bound {
		if b.carried && b.pool != pool && slices.Contains(p.SlurmNodes, name) {
			carried = append(carried, name)
		} else {
			taken[name] = true
		}
	}
	slices.SortFunc(carried, func(a, b string) int { return slices.Index(p.SlurmNodes, a) - slices.Index(p.SlurmNodes, b) })
	var names, up []string
	for _, r := range s.names.requested {
		if slices.Contains(r.Pools, pool) && !taken[r.Node] && len(names) < count {
			names, taken[r.Node] = append(names, r.Node), true
		}
	}
	byName := make(map[string]*slurm.Node, len(s.names.nodes))
	for i := range s.names.nodes {
		byName[s.names.nodes[i].Name] = &s.names.nodes[i]
	}
	for _, name := range carried {
		// Powered up still, and still the controller's to change.
		sn := byName[name]
		if !taken[name] && len(names) < count && sn != nil && slurm.Untouchable(sn) == "" &&
			!slices.ContainsFunc([]string{"POWERED_DOWN", "POWER_DOWN", "POWERING_DOWN"}, sn.HasFlag) {
			names, taken[name] = append(names, name), true
		}
	}
	for _, name := range p.SlurmNodes {
		if len(names) == count {
			break
		}
		sn := byName[name]
		if taken[name] || sn == nil || !sn.HasFlag("POWERED_DOWN") || slurm.Busy(sn) || slurm.Untouchable(sn) != "" ||
			slices.ContainsFunc([]string{"POWER_UP", "POWERING_UP", "POWER_DOWN", "POWERING_DOWN"}, sn.HasFlag) {
			continue
		}
		names, up, taken[name] = append(names, name), append(up, name), true
	}
	for _, name := range names {
		b, ok := s.names.bound[name]
		if !ok { // a carried name keeps the time of its first power-up
			b.at = now
		}
		s.names.bound[name] = binding{at: b.at, pool: pool}
	}
	s.mu.Unlock()
	if len(up) == 0 {
		return names, nil
	}
	err := s.names.control.PowerUp(ctx, up)
	failed := map[string]bool{}
	if err != nil && len(up) > 1 {
		// One node's state may have changed since the read: the others
		// are powered up alone.
		for _, name := range up {
			if s.names.control.PowerUp(ctx, []string{name}) != nil {
				failed[name] = true
			}
		}
	} else if err != nil {
		failed[up[0]] = true
	}
	s.countChange(slurm.OpPowerUp, len(up)-len(failed), nil)
	if len(failed) > 0 {
		s.countChange(slurm.OpPowerUp, len(failed), err)
		s.mu.Lock()
		for name := range failed {
			delete(s.names.bound, name)
		}
		s.mu.Unlock()
		names = slices.DeleteFunc(names, func(n string) bool { return failed[n] })
		up = slices.DeleteFunc(up, func(n string) bool { return failed[n] })
		s.log.Warn("slurm nodes not powered up for a launch", "pool", pool, "nodes", hostlist.Compress(slices.Sorted(maps.Keys(failed))), "error", err)
		if len(names) == 0 {
			return nil, fmt.Errorf("pool %s: powering up Slurm nodes for a launch: %w", pool, err)
		}
	}
	if len(up) > 0 {
		s.log.Info("powered up for a launch", "pool", pool, "nodes", hostlist.Compress(up))
	}
	return names, nil
}

// syncNodes works out, from a whole read's nodes and jobs, what changes
// make the pools' Slurm nodes follow their instances (slurm.Sync) and
// which jobs to ask to checkpoint, and keeps the read's nodes and Slurm's
// requests; the caller does the work (do) once the lock is released.
// Nothing before a cycle has handed the fleet over: the source does not
// know the instances yet. Callers hold s.mu.
func (s *SlurmSource) syncNodes(nodes []slurm.Node, jobs []slurm.Job, now time.Time) nodeWork {
	if s.names.control == nil {
		return nodeWork{}
	}
	s.names.nodes = nodes
	if s.names.fleet == nil {
		return nodeWork{}
	}
	busy := map[string]bool{}
	for i := range nodes {
		busy[nodes[i].Name] = slurm.Busy(&nodes[i])
	}
	launching := make([]string, 0, len(s.names.bound))
	for name, b := range s.names.bound {
		// A name refused or carried that Slurm placed jobs on is its
		// request again, for a pool that shares it.
		again := (b.carried || s.names.refused[name] && len(s.poolsOfName(name)) > 1) && busy[name]
		if p := s.namedPool(b.pool); p != nil && now.Sub(b.at) <= p.ProvisionTimeout && !again {
			launching = append(launching, name)
		}
	}
	r := slurm.Sync(slurm.SyncInput{Pools: s.names.pools, Nodes: s.names.fleet, Launching: launching, Draining: s.names.draining,
		Unsure: s.names.unsure, Slurm: nodes, Jobs: jobs})
	s.names.requested = r.Requested
	seen := make(map[string]bool, len(r.Untouched))
	for _, u := range r.Untouched {
		seen[u.Node] = true
		if s.names.untouched[u.Node] != u.Why {
			s.log.Warn("slurm node left alone", "pool", u.Pool, "node", u.Node, "why", u.Why)
			s.names.untouched[u.Node] = u.Why
		}
	}
	for name := range s.names.untouched {
		if !seen[name] {
			s.log.Info("slurm node no longer left alone", "node", name)
			delete(s.names.untouched, name)
		}
	}
	w := nodeWork{changes: r.Changes}
	if s.names.signal != "" {
		for _, c := range r.Checkpoint {
			if !s.names.signalled[c.Job] && !slices.ContainsFunc(w.signal, func(d slurm.Checkpoint) bool { return d.Job == c.Job }) {
				w.signal = append(w.signal, c)
				s.names.signalled[c.Job] = true
			}
		}
		// A job Slurm no longer runs is forgotten.
		running := make(map[string]bool, len(jobs))
		for i := range jobs {
			if jobs[i].Running() {
				running[jobs[i].ID] = true
			}
		}
		maps.DeleteFunc(s.names.signalled, func(id string, _ bool) bool { return !running[id] })
	}
	return w
}

// do makes a read's changes (applyChanges), then asks its jobs to
// checkpoint (signalJobs).
func (s *SlurmSource) do(ctx context.Context, w nodeWork) {
	s.applyChanges(ctx, w.changes)
	s.signalJobs(ctx, w.signal)
}

// signalJobs asks the jobs to checkpoint: Slurm sends each one's batch
// script the slurm block's signal_jobs (scancel --signal --batch), one
// call per job, so that a job that ended meanwhile fails its call alone
// and no job is sent it twice; a job whose call failed is sent it again
// at the next read.
func (s *SlurmSource) signalJobs(ctx context.Context, cs []slurm.Checkpoint) {
	for _, c := range cs {
		err := s.names.control.Signal(ctx, []string{c.Job}, s.names.signal)
		if err != nil {
			s.mu.Lock()
			delete(s.names.signalled, c.Job)
			s.mu.Unlock()
			s.signals.WithLabelValues("error").Inc()
			s.log.Warn("slurm job not asked to checkpoint", "job", c.Job, "node", c.Node, "pool", c.Pool, "signal", s.names.signal, "error", err)
			continue
		}
		s.signals.WithLabelValues("ok").Inc()
		s.log.Info("slurm job asked to checkpoint", "job", c.Job, "node", c.Node, "pool", c.Pool, "signal", s.names.signal,
			"why", "its node drains, and no agent knows the job")
	}
}

// requestedDemand is the demand of Slurm's requests: one whole node for
// each name Slurm powers up for its jobs with no instance, of its pool,
// or of any pool that has the name where several do (their nodes are
// alike: config). Callers hold s.mu.
func (s *SlurmSource) requestedDemand() []PendingDemand {
	var out []PendingDemand
	for _, r := range s.names.requested {
		p := s.namedPool(r.Pools[0])
		switch {
		case p == nil:
		case len(r.Pools) == 1:
			out = append(out, PendingDemand{Pool: p.Name, Nodes: 1, GPUs: p.GPUsPerNode, Requested: true})
		default:
			out = append(out, PendingDemand{SlurmNode: r.Node, Nodes: 1, GPUs: p.GPUsPerNode, Requested: true})
		}
	}
	return out
}

// applyChanges makes the changes, one scontrol call for each run of
// changes of the same op, reason and address, and, where that call fails,
// one for each of its nodes, so that one bad node holds up no other; a
// failure is logged and counted, and the next read tries again. A node
// whose drain failed is not powered down as its jobs end: Slurm would
// drain it with a reason of its own, which reads as someone else's.
func (s *SlurmSource) applyChanges(ctx context.Context, changes []slurm.Change) {
	undrained := map[string]bool{}
	for i := 0; i < len(changes); {
		j := i + 1
		for j < len(changes) && changes[j].Op == changes[i].Op && changes[j].Reason == changes[i].Reason && changes[j].Address == changes[i].Address {
			j++
		}
		var group []slurm.Change
		for _, c := range changes[i:j] {
			if c.Op != slurm.OpPowerDownASAP || !undrained[c.Node] {
				group = append(group, c)
			}
		}
		i = j
		if len(group) == 0 {
			continue
		}
		if err := s.change(ctx, group); err != nil && len(group) > 1 {
			for k := range group {
				if s.change(ctx, group[k:k+1]) != nil && group[k].Op == slurm.OpDrain {
					undrained[group[k].Node] = true
				}
			}
		} else if err != nil && group[0].Op == slurm.OpDrain {
			undrained[group[0].Node] = true
		}
	}
}

// change makes one scontrol call for changes of one op and reason (one
// per node for addresses), and logs and counts it.
func (s *SlurmSource) change(ctx context.Context, group []slurm.Change) error {
	names := make([]string, len(group))
	var whys []string
	for k, c := range group {
		names[k] = c.Node
		if !slices.Contains(whys, c.Why) {
			whys = append(whys, c.Why)
		}
	}
	c := s.names.control
	var err error
	switch op := group[0].Op; op {
	case slurm.OpDrain:
		err = c.Drain(ctx, names, group[0].Reason)
	case slurm.OpResume:
		err = c.Resume(ctx, names)
	case slurm.OpPowerDownASAP:
		err = c.PowerDown(ctx, names, true)
	case slurm.OpPowerDown:
		err = c.PowerDown(ctx, names, false)
	case slurm.OpPowerDownForce:
		err = c.PowerDownForce(ctx, names)
	case slurm.OpPowerUp:
		err = c.PowerUp(ctx, names)
	case slurm.OpSetAddress:
		for _, n := range names {
			err = cmp.Or(err, c.SetAddress(ctx, n, group[0].Address, ""))
		}
	}
	if err != nil {
		if len(group) == 1 {
			s.countChange(group[0].Op, 1, err)
		}
		s.log.Warn("slurm node change failed", "op", group[0].Op, "nodes", hostlist.Compress(names), "error", err)
		return err
	}
	s.countChange(group[0].Op, len(names), nil)
	s.log.Info("slurm node change", "op", group[0].Op, "nodes", hostlist.Compress(names), "why", strings.Join(whys, "; "))
	return nil
}

// countChange counts n changes of op, done or failed.
func (s *SlurmSource) countChange(op slurm.Op, n int, err error) {
	result := "ok"
	if err != nil {
		result = "error"
	}
	s.changes.WithLabelValues(string(op), result).Add(float64(n))
}
