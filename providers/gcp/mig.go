package gcp

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"path"
	"slices"
	"strconv"
	"strings"
	"time"

	"cloud.google.com/go/compute/apiv1/computepb"

	"github.com/fleetcast/autoscaler/fleet"
	"github.com/fleetcast/autoscaler/providers"
)

// The labels of a pool's instances, set through its group's instance
// template, as the AWS tags fleetcast/managed, fleetcast/pool and
// fleetcast/fleet are (labels take no slash): LabelManaged "true",
// LabelPool the pool's name, LabelFleet the fleet (the config's
// controller.fleet) if the template names one.
const (
	LabelManaged = "fleetcast-managed"
	LabelPool    = "fleetcast-pool"
	LabelFleet   = "fleetcast-fleet"
)

// owedPrefix starts the IDs of stand-ins for target size the group has
// not listed instances for yet; terminating one lowers the target size.
const owedPrefix = "owed/"

// Describe reads the pool's managed instance group: its target size and
// its managed instances, each with its creation time (read once per
// instance) or, while the group is still creating it, when it was first
// seen. A target size changed outside Fleetcast is followed, and logged.
func (p *Provider) Describe(ctx context.Context, pool fleet.Pool) (providers.Group, error) {
	g, err := p.group(ctx, pool)
	if err != nil {
		return providers.Group{}, err
	}
	p.mu.Lock()
	changes := p.memoLocked(pool.Name).changes
	p.mu.Unlock()
	m, err := g.get(ctx)
	if err != nil {
		return providers.Group{}, err
	}
	mis, err := g.managed(ctx)
	if err != nil {
		return providers.Group{}, err
	}
	target := m.GetTargetSize()
	p.mu.Lock()
	memo := p.memoLocked(pool.Name)
	if memo.changes != changes {
		// A launch or termination of Fleetcast's ran meanwhile: this
		// read may be from before it.
	} else if memo.target >= 0 && target != memo.target {
		// A Terraform apply without ignore_changes on target_size, or a
		// person: followed, never fought.
		p.log.Warn("target size changed outside Fleetcast; following the group (if Terraform set it, add lifecycle { ignore_changes = [target_size] })",
			"pool", pool.Name, "mig", g.s.MIG, "from", memo.target, "to", target)
	}
	if memo.changes == changes {
		memo.target = target
	}
	p.mu.Unlock()

	now := p.now()
	out := providers.Group{Target: int(target)}
	// A regional group that may place VMs in any of its zones moves a
	// creation that stocked out to another: its failures are not final.
	moves := g.s.Region != "" && slices.Contains([]string{"ANY", "BALANCED", "ANY_SINGLE_ZONE"}, m.GetDistributionPolicy().GetTargetShape())
	listed := map[string]bool{}
	live := 0
	for _, mi := range mis {
		url := mi.GetInstance()
		name := path.Base(url)
		if name == "" || name == "." || name == "/" {
			continue
		}
		listed[name] = true
		in := providers.Instance{ID: name, Zone: cmp.Or(zoneOf(url), g.s.Zone), State: instanceState(mi), Stopped: stopped(mi)}
		if id := mi.GetId(); id != 0 {
			in.Machine = strconv.FormatUint(id, 10)
		}
		if !moves {
			in.Failing = lastAttempt(g, mi)
		}
		if in.State != providers.InstanceTerminating {
			live++
		}
		in.LaunchedAt, in.Fleet, err = p.created(ctx, g, mi, in.Zone, now)
		if err != nil {
			return providers.Group{}, err
		}
		out.Instances = append(out.Instances, in)
	}
	p.mu.Lock()
	// Forget instances the group no longer lists.
	for name := range memo.seen {
		if !listed[name] {
			delete(memo.seen, name)
		}
	}
	for name := range memo.created {
		if !listed[name] {
			delete(memo.created, name)
			delete(memo.fleets, name)
		}
	}
	p.mu.Unlock()
	for i := range int(target) - live {
		out.Instances = append(out.Instances, providers.Instance{ID: fmt.Sprintf("%s%s/%d", owedPrefix, pool.Name, i),
			Zone: g.s.Zone, State: providers.InstancePending, LaunchedAt: now, Owed: true})
	}
	return out, nil
}

// created is when the managed instance was made, and the fleet it is
// labelled with: read from the instance once it exists (and remembered),
// or when the group was first seen creating it.
func (p *Provider) created(ctx context.Context, g group, mi *computepb.ManagedInstance, zone string, now time.Time) (time.Time, string, error) {
	name := path.Base(mi.GetInstance())
	p.mu.Lock()
	memo := p.memoLocked(g.pool.Name)
	at, ok := memo.created[name]
	fleetLabel := memo.fleets[name]
	p.mu.Unlock()
	if ok {
		return at, fleetLabel, nil
	}
	if mi.GetInstanceStatus() != "" {
		in, err := g.c.instances.Get(ctx, &computepb.GetInstanceRequest{Project: g.s.Project, Zone: zone, Instance: name})
		var nf *providers.NotFoundError
		switch err = classify(g.pool.Name, fmt.Sprintf("instance %q in %s", name, zone), "get", err); {
		case errors.As(err, &nf):
			// Listed by the group, not yet (or no longer) by Compute
			// Engine: its reads are eventually consistent.
		case err != nil:
			return time.Time{}, "", err
		default:
			if t, perr := time.Parse(time.RFC3339, in.GetCreationTimestamp()); perr == nil {
				p.mu.Lock()
				memo.created[name] = t
				memo.fleets[name] = in.GetLabels()[LabelFleet]
				delete(memo.seen, name)
				p.mu.Unlock()
				return t, in.GetLabels()[LabelFleet], nil
			}
		}
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if at, ok := memo.seen[name]; ok {
		return at, "", nil
	}
	memo.seen[name] = now
	return now, "", nil
}

// stopped reports whether a managed instance is stopped or suspended, no
// action under way: it holds no GPUs, and is billed for its disks alone.
func stopped(mi *computepb.ManagedInstance) bool {
	switch mi.GetInstanceStatus() {
	case "STOPPED", "TERMINATED", "SUSPENDED":
		return mi.GetCurrentAction() == "" || mi.GetCurrentAction() == "NONE"
	}
	return false
}

// instanceState maps a managed instance's current action and status.
func instanceState(mi *computepb.ManagedInstance) providers.InstanceState {
	switch mi.GetCurrentAction() {
	case "CREATING", "CREATING_WITHOUT_RETRIES", "RECREATING", "VERIFYING", "RESUMING", "STARTING":
		return providers.InstancePending
	case "DELETING", "ABANDONING":
		return providers.InstanceTerminating
	}
	switch mi.GetInstanceStatus() {
	case "", "PROVISIONING", "STAGING":
		return providers.InstancePending
	case "STOPPING", "STOPPED", "TERMINATED", "SUSPENDING", "SUSPENDED":
		return providers.InstanceTerminating
	}
	return providers.InstanceRunning // RUNNING, REPAIRING
}

// Launch raises the group's target size to req.Target (never lowers it:
// a target already there is a retry, or a launch made before a restart),
// with a request ID made from req.Key. A group busy with an update or a
// repair, or whose instances the cloud is failing to create for lack of
// capacity or quota (the resize would succeed, and the VMs never come), is
// refused with the typed error, so the pool backs off.
func (p *Provider) Launch(ctx context.Context, pool fleet.Pool, req providers.LaunchRequest) error {
	g, err := p.group(ctx, pool)
	if err != nil {
		return err
	}
	m, err := g.get(ctx)
	if err != nil {
		return err
	}
	target := int32(min(req.Target, 1<<30))
	if m.GetTargetSize() >= target {
		return nil
	}
	if why := busy(m); why != "" {
		return &providers.GroupBusyError{Pool: pool.Name, Reason: fmt.Sprintf("%s: %s", g.what(), why)}
	}
	mis, err := g.managed(ctx)
	if err != nil {
		return err
	}
	if err := stockout(g, mis); err != nil {
		return err
	}
	if err := g.resize(ctx, target, req.Key); err != nil {
		return err
	}
	p.mu.Lock()
	p.memoLocked(pool.Name).setTarget(target)
	p.mu.Unlock()
	return nil
}

// busy says what the group is doing on its own that makes it busy (a
// proactive rolling update not reached, instances being recreated,
// refreshed or restarted: an update or auto-healing); "" if nothing. The
// group's own creations (verifying included) and deletions, which
// Fleetcast asked for, are not.
func busy(m *computepb.InstanceGroupManager) string {
	st := m.GetStatus()
	if st.GetIsStable() {
		return ""
	}
	var doing []string
	// An opportunistic update (the one the Terraform example sets) waits
	// for instances to be made anew, and may never be reached: only a
	// proactive one (Compute Engine's default) replaces VMs on its own.
	if vt := st.GetVersionTarget(); vt != nil && !vt.GetIsReached() && m.GetUpdatePolicy().GetType() != "OPPORTUNISTIC" {
		doing = append(doing, "a proactive update to a new instance template in progress (status.versionTarget.isReached is false)")
	}
	a := m.GetCurrentActions()
	// Verifying is the last step of creating a VM, Fleetcast's own.
	for _, c := range []struct {
		n    int32
		what string
	}{{a.GetRecreating(), "recreating"}, {a.GetRefreshing(), "refreshing"}, {a.GetRestarting(), "restarting"}} {
		if c.n > 0 {
			doing = append(doing, fmt.Sprintf("%d instance(s) %s", c.n, c.what))
		}
	}
	return strings.Join(doing, "; ")
}

// stockout is the typed error for instances the group is trying to create
// whose last attempt failed for capacity or quota; nil if none.
func stockout(g group, mis []*computepb.ManagedInstance) error {
	for _, mi := range mis {
		if err := lastAttempt(g, mi); err != nil {
			return err
		}
	}
	return nil
}

// lastAttempt is the typed error of an instance the group is trying to
// create, with no VM yet, whose last attempt failed for capacity or quota
// (the resize succeeded; the VM is not coming while this lasts); nil
// otherwise. Once a VM exists (a status: provisioning, staging) a later
// attempt got capacity, whatever the last failed one said.
func lastAttempt(g group, mi *computepb.ManagedInstance) error {
	if a := mi.GetCurrentAction(); a != "CREATING" && a != "CREATING_WITHOUT_RETRIES" || mi.GetInstanceStatus() != "" {
		return nil
	}
	errs := mi.GetLastAttempt().GetErrors().GetErrors()
	if len(errs) == 0 {
		return nil
	}
	err := classifyCodes(g.pool.Name, g.what(), "creating instance "+path.Base(mi.GetInstance())+" (its last attempt)", errs)
	var ice *providers.InsufficientCapacityError
	var quota *providers.QuotaExceededError
	if !errors.As(err, &ice) && !errors.As(err, &quota) {
		return nil
	}
	return err
}

// Terminate deletes the named instances from the group, lowering its
// target size by as many, so the group does not replace them; stand-ins
// for owed capacity lower the target size. Only the group's own
// instances are touched: others are a NotFoundError, after the group's
// are deleted.
func (p *Provider) Terminate(ctx context.Context, pool fleet.Pool, instanceIDs []string) error {
	g, err := p.group(ctx, pool)
	if err != nil {
		return err
	}
	mis, err := g.managed(ctx)
	if err != nil {
		return err
	}
	members := map[string]string{}
	live := 0
	for _, mi := range mis {
		if instanceState(mi) != providers.InstanceTerminating {
			members[path.Base(mi.GetInstance())] = mi.GetInstance()
			live++
		}
	}
	var urls, missing []string
	owed := 0
	for _, id := range instanceIDs {
		switch url, ok := members[id]; {
		case strings.HasPrefix(id, owedPrefix):
			owed++
		case !ok:
			missing = append(missing, id)
		default:
			urls = append(urls, url)
		}
	}
	if len(urls) > 0 {
		key := slices.Clone(names(urls))
		slices.Sort(key)
		if err := g.deleteInstances(ctx, urls, oneOff("terminate:"+strings.Join(key, ","))); err != nil {
			return err
		}
	}
	if owed > 0 {
		// Capacity never listed: lower the target, never below the
		// instances that stay (the group would pick one to delete).
		m, err := g.get(ctx)
		if err != nil {
			return err
		}
		if t := max(m.GetTargetSize()-int32(owed), int32(live-len(urls))); t < m.GetTargetSize() {
			if err := g.resize(ctx, t, oneOff(fmt.Sprintf("owed:%d:%d", m.GetTargetSize(), t))); err != nil {
				return err
			}
		}
	}
	p.mu.Lock()
	p.memoLocked(pool.Name).setTarget(-1) // read again: the deletes lowered it
	p.mu.Unlock()
	if len(missing) > 0 {
		return &providers.NotFoundError{Pool: pool.Name, Resource: fmt.Sprintf("instance(s) %s in %s", strings.Join(missing, ", "), g.what()),
			Err: errors.New("not a live member of the group")}
	}
	return nil
}
