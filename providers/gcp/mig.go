package gcp

import (
	"context"
	"errors"
	"fmt"
	"path"
	"slices"
	"strings"
	"time"

	"cloud.google.com/go/compute/apiv1/computepb"

	"github.com/fleetcast/autoscaler/fleet"
	"github.com/fleetcast/autoscaler/providers"
)

// LabelFleet is the label naming the fleet (the config's
// controller.fleet) an instance was made for, set through the group's
// instance template, as the AWS tag fleetcast/fleet is (labels take no
// slash).
const LabelFleet = "fleetcast-fleet"

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
	if memo.target >= 0 && target != memo.target {
		// A Terraform apply without ignore_changes on target_size, or a
		// person: followed, never fought.
		p.log.Warn("target size changed outside Fleetcast; following the group (if Terraform set it, add lifecycle { ignore_changes = [target_size] })",
			"pool", pool.Name, "mig", g.s.MIG, "from", memo.target, "to", target)
	}
	memo.target = target
	p.mu.Unlock()

	now := p.now()
	out := providers.Group{Target: int(target)}
	listed := map[string]bool{}
	live := 0
	for _, mi := range mis {
		url := mi.GetInstance()
		name := path.Base(url)
		if name == "" || name == "." || name == "/" {
			continue
		}
		listed[name] = true
		in := providers.Instance{ID: name, Zone: cmpOr(zoneOf(url), g.s.Zone), State: instanceState(mi)}
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
		}
	}
	p.mu.Unlock()
	for i := range int(target) - live {
		out.Instances = append(out.Instances, providers.Instance{ID: fmt.Sprintf("%s%s/%d", owedPrefix, g.s.MIG, i),
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
	p.mu.Unlock()
	if ok {
		return at, "", nil
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
	p.memoLocked(pool.Name).target = target
	p.mu.Unlock()
	return nil
}

// busy says what the group is doing on its own that makes it busy (a
// rolling update not reached, instances being recreated, refreshed,
// restarted or verified: an update or auto-healing); "" if nothing. The
// group's own creations and deletions, which Fleetcast asked for, are
// not.
func busy(m *computepb.InstanceGroupManager) string {
	st := m.GetStatus()
	if st.GetIsStable() {
		return ""
	}
	var doing []string
	if vt := st.GetVersionTarget(); vt != nil && !vt.GetIsReached() {
		doing = append(doing, "an update to a new instance template in progress (status.versionTarget.isReached is false)")
	}
	a := m.GetCurrentActions()
	for _, c := range []struct {
		n    int32
		what string
	}{{a.GetRecreating(), "recreating"}, {a.GetRefreshing(), "refreshing"}, {a.GetRestarting(), "restarting"}, {a.GetVerifying(), "verifying"}} {
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
		if a := mi.GetCurrentAction(); a != "CREATING" && a != "CREATING_WITHOUT_RETRIES" {
			continue
		}
		errs := mi.GetLastAttempt().GetErrors().GetErrors()
		if len(errs) == 0 {
			continue
		}
		err := classifyCodes(g.pool.Name, g.what(), "creating instance "+path.Base(mi.GetInstance())+" (its last attempt)", errs)
		var ref *providers.RefusedError
		if !errors.As(err, &ref) {
			return err
		}
	}
	return nil
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
		if err := g.deleteInstances(ctx, urls, "terminate:"+strings.Join(key, ",")); err != nil {
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
			if err := g.resize(ctx, t, fmt.Sprintf("owed:%d:%d", m.GetTargetSize(), t)); err != nil {
				return err
			}
		}
	}
	p.mu.Lock()
	if m := p.memoLocked(pool.Name); m.target >= 0 {
		m.target = -1 // read again: the deletes lowered it
	}
	p.mu.Unlock()
	if len(missing) > 0 {
		return &providers.NotFoundError{Pool: pool.Name, Resource: fmt.Sprintf("instance(s) %s in %s", strings.Join(missing, ", "), g.what()),
			Err: errors.New("not a live member of the group")}
	}
	return nil
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}
