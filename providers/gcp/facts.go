package gcp

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net"
	"path"
	"strings"
	"time"

	compute "cloud.google.com/go/compute/apiv1"
	"cloud.google.com/go/compute/apiv1/computepb"
	"google.golang.org/api/googleapi"

	"github.com/fleetcast/autoscaler/fleet"
	"github.com/fleetcast/autoscaler/providers"
)

// gpuModels names the GPU models of Compute Engine's accelerator types,
// to fill in a pool's gpu_model when the config leaves it out.
var gpuModels = map[string]string{
	"nvidia-tesla-a100": "A100", "nvidia-a100-80gb": "A100", "nvidia-h100-80gb": "H100", "nvidia-h100-mega-80gb": "H100",
	"nvidia-h200-141gb": "H200", "nvidia-b200": "B200", "nvidia-l4": "L4", "nvidia-tesla-t4": "T4", "nvidia-tesla-v100": "V100",
	"nvidia-tesla-p100": "P100", "nvidia-tesla-p4": "P4",
}

// Resolve checks each GCP pool's GPU facts against Compute Engine's, and
// fills in its GPU model if the config left it out: the group's instance
// template must make VMs of the pool's instance_type, and they must have
// gpus_per_node GPUs, from the machine type's accelerators (A2, A3, G2)
// or from the template's attached GPUs (N1). What does not hold is a
// *providers.ConfigError naming the pool's attribute it is about. Other
// pools are left as they are.
//
// A pool whose facts cannot be read because Compute Engine cannot be
// reached (a network error, a 5xx, throttling, each read given
// resolveTimeout) is no error: it is checked when it is first read, and
// until then every call on it fails, so the controller leaves it alone
// and counts it at its max, and the other clouds' pools still serve.
// A GPU model found then is not filled in (the config is read once): it
// is logged.
func (p *Provider) Resolve(ctx context.Context, pools []fleet.Pool) error {
	var errs []error
	for i := range pools {
		if pools[i].Provider != fleet.ProviderGCP {
			continue
		}
		rctx, cancel := context.WithTimeout(ctx, resolveTimeout)
		err := p.resolve(rctx, &pools[i])
		cancel()
		switch {
		case err == nil:
		case unreachable(err) && ctx.Err() == nil:
			p.log.Warn("Compute Engine unreachable: the pool's GPU facts are checked when it is first read; until then it is left alone, counted at its max",
				"pool", pools[i].Name, "error", err)
			p.mu.Lock()
			p.unresolved[pools[i].Name] = true
			p.mu.Unlock()
		default:
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// resolveTimeout bounds the reads of one pool's facts at start.
const resolveTimeout = 30 * time.Second

// checked checks the pool's facts if Resolve could not reach Compute
// Engine for them: nil once they hold. Every call on the pool checks
// first.
func (p *Provider) checked(ctx context.Context, pool fleet.Pool) error {
	p.mu.Lock()
	pending := p.unresolved[pool.Name]
	p.mu.Unlock()
	if !pending {
		return nil
	}
	found := pool
	if err := p.resolve(ctx, &found); err != nil {
		return fmt.Errorf("%w (its GPU facts, not read at start, are read first)", err)
	}
	p.mu.Lock()
	delete(p.unresolved, pool.Name)
	p.mu.Unlock()
	p.log.Info("pool's GPU facts read and checked", "pool", pool.Name)
	if found.GPUModel != pool.GPUModel {
		p.log.Warn("the pool's GPU model was found after start: demand scoped to it reaches the pool from the next start (or set gpu_model in the config)",
			"pool", pool.Name, "gpu_model", found.GPUModel)
	}
	return nil
}

// unreachable says err is Compute Engine not answering, rather than an
// answer: a connection refused or reset, a name not resolved, a timeout,
// a 5xx or throttling. Credentials refused (the token endpoint's answer)
// or a certificate that does not verify are answers, and stop the start.
func unreachable(err error) bool {
	var te *providers.ThrottledError
	if errors.As(err, &te) {
		return true
	}
	var ge *googleapi.Error
	if errors.As(err, &ge) {
		return ge.Code >= 500
	}
	var op *net.OpError
	var dns *net.DNSError
	var ne net.Error
	return errors.As(err, &op) || errors.As(err, &dns) || errors.As(err, &ne) && ne.Timeout() || errors.Is(err, context.DeadlineExceeded)
}

func (p *Provider) resolve(ctx context.Context, pool *fleet.Pool) error {
	g, err := p.groupOf(ctx, *pool)
	if err != nil {
		return err
	}
	m, err := g.get(ctx)
	if nf := (*providers.NotFoundError)(nil); errors.As(err, &nf) {
		return &providers.ConfigError{Pool: pool.Name, Attr: "gcp.mig", Err: err}
	}
	if err != nil {
		return err
	}
	tmpl, err := p.template(ctx, g, m.GetInstanceTemplate())
	if err != nil {
		return err
	}
	props := tmpl.GetProperties()
	if mt := path.Base(props.GetMachineType()); mt != "" && mt != "." && mt != pool.InstanceType {
		return &providers.ConfigError{Pool: pool.Name, Attr: "instance_type", Err: fmt.Errorf("pool %s: instance_type is %q, but the instance template %s of %s makes %s VMs", pool.Name, pool.InstanceType, tmpl.GetName(), g.what(), mt)}
	}
	zone := g.s.Zone
	if zone == "" {
		if zs := m.GetDistributionPolicy().GetZones(); len(zs) > 0 {
			zone = path.Base(zs[0].GetZone())
		} else if len(pool.Zones) > 0 {
			zone = pool.Zones[0]
		}
	}
	c, err := compute.NewMachineTypesRESTClient(ctx, p.options(*pool)...)
	if err != nil {
		return fmt.Errorf("pool %s: gcp: %w", pool.Name, err)
	}
	defer c.Close() //nolint:errcheck // read once, at start
	mt, err := c.Get(ctx, &computepb.GetMachineTypeRequest{Project: g.s.Project, Zone: zone, MachineType: pool.InstanceType})
	if err != nil {
		err = classify(pool.Name, fmt.Sprintf("machine type %q in %s", pool.InstanceType, zone), "get", err)
		if nf := (*providers.NotFoundError)(nil); errors.As(err, &nf) {
			err = &providers.ConfigError{Pool: pool.Name, Attr: "instance_type", Err: err}
		}
		return err
	}
	gpus, kind, source := 0, "", "the machine type's accelerators[].guestAcceleratorCount"
	for _, a := range mt.GetAccelerators() {
		gpus += int(a.GetGuestAcceleratorCount())
		kind = a.GetGuestAcceleratorType()
	}
	if gpus == 0 {
		source = "the instance template's guestAccelerators"
		for _, a := range props.GetGuestAccelerators() {
			gpus += int(a.GetAcceleratorCount())
			kind = path.Base(a.GetAcceleratorType())
		}
	}
	switch {
	case gpus == 0:
		return &providers.ConfigError{Pool: pool.Name, Attr: "instance_type", Err: fmt.Errorf("pool %s: machine type %s and the instance template %s of %s have no GPUs", pool.Name, pool.InstanceType, tmpl.GetName(), g.what())}
	case gpus != pool.GPUsPerNode:
		return &providers.ConfigError{Pool: pool.Name, Attr: "gpus_per_node", Err: fmt.Errorf("pool %s: gpus_per_node is %d, but its VMs have %d GPUs (%s, %s)", pool.Name, pool.GPUsPerNode, gpus, source, kind)}
	}
	if err := p.capacityFacts(ctx, g, pool, props, zone, m); err != nil {
		return err
	}
	if err := p.labels(g, pool, tmpl); err != nil {
		return err
	}
	if model := gpuModels[strings.ToLower(kind)]; pool.GPUModel == "" && model != "" {
		pool.GPUModel = model
		p.log.Info("gpu model from Compute Engine", "pool", pool.Name, "gpu_model", model, "accelerator", kind)
	}
	return nil
}

// capacityFacts checks that the template buys the pool's capacity type:
// spot VMs (scheduling.provisioningModel SPOT) for a spot pool and only
// there, and for a reserved pool VMs on one specific reservation
// (reservationAffinity SPECIFIC_RESERVATION), read back: its count must
// hold the pool's max, and it must be for specific use only, so that no
// other VM (an on-demand pool's, left at the default ANY_RESERVATION)
// uses it up. A reservation is zonal: a reserved regional group must
// place its VMs in one zone only. What the reservation holds and uses is
// logged.
func (p *Provider) capacityFacts(ctx context.Context, g group, pool *fleet.Pool, props *computepb.InstanceProperties, zone string, m *computepb.InstanceGroupManager) error {
	spot := props.GetScheduling().GetProvisioningModel() == "SPOT"
	switch {
	case pool.Capacity == fleet.Spot && !spot:
		return &providers.ConfigError{Pool: pool.Name, Attr: "capacity", Err: fmt.Errorf("pool %s: capacity is spot, but %s's instance template makes %s VMs (set scheduling.provisioning_model = \"SPOT\")",
			pool.Name, g.what(), cmp.Or(props.GetScheduling().GetProvisioningModel(), "STANDARD"))}
	case pool.Capacity != fleet.Spot && spot:
		return &providers.ConfigError{Pool: pool.Name, Attr: "capacity", Err: fmt.Errorf("pool %s: capacity is %s, but %s's instance template makes spot VMs", pool.Name, pool.Capacity, g.what())}
	}
	if pool.Capacity != fleet.Reserved {
		return nil
	}
	ra := props.GetReservationAffinity()
	if ra.GetConsumeReservationType() != "SPECIFIC_RESERVATION" || len(ra.GetValues()) != 1 {
		return &providers.ConfigError{Pool: pool.Name, Attr: "capacity", Err: fmt.Errorf("pool %s: capacity is reserved, but %s's instance template does not consume one specific reservation (reservation_affinity type SPECIFIC_RESERVATION, one value): its VMs could land outside the reservation, paid twice",
			pool.Name, g.what())}
	}
	name := path.Base(ra.GetValues()[0])
	if zs := m.GetDistributionPolicy().GetZones(); g.s.Region != "" && len(zs) != 1 {
		return &providers.ConfigError{Pool: pool.Name, Attr: "capacity", Err: fmt.Errorf("pool %s: capacity is reserved, but %s places VMs in %d zones, and reservation %s holds capacity in one: VMs in the others would not start (set its distribution_policy_zones to the reservation's zone)",
			pool.Name, g.what(), len(zs), name)}
	}
	c, err := compute.NewReservationsRESTClient(ctx, p.options(*pool)...)
	if err != nil {
		return fmt.Errorf("pool %s: gcp: %w", pool.Name, err)
	}
	defer c.Close() //nolint:errcheck // read once, at start
	res, err := c.Get(ctx, &computepb.GetReservationRequest{Project: g.s.Project, Zone: zone, Reservation: name})
	if err != nil {
		return classify(pool.Name, fmt.Sprintf("reservation %q in %s", name, zone), "get", err)
	}
	if !res.GetSpecificReservationRequired() {
		return &providers.ConfigError{Pool: pool.Name, Attr: "capacity", Err: fmt.Errorf("pool %s: reservation %s in %s may be used by any VM that matches it (specificReservationRequired is false): other VMs could use up the reserved pool's capacity (set specific_reservation_required = true)",
			pool.Name, name, zone)}
	}
	count, inUse := res.GetSpecificReservation().GetCount(), res.GetSpecificReservation().GetInUseCount()
	if int64(pool.Max) > count {
		return &providers.ConfigError{Pool: pool.Name, Attr: "max", Err: fmt.Errorf("pool %s: max is %d, but reservation %s in %s holds %d VMs: VMs above it would not start (set max to %d, or grow the reservation)",
			pool.Name, pool.Max, name, zone, count, count)}
	}
	p.log.Info("reservation", "pool", pool.Name, "reservation", name, "zone", zone, "count", count, "in_use", inUse)
	return nil
}

// labels checks the labels the template gives the pool's instances: a
// pool label naming another pool, or a fleet label naming another fleet,
// is another's group, refused; no managed or pool label is logged (the
// instances cannot be told for Fleetcast's in the console or in billing).
func (p *Provider) labels(g group, pool *fleet.Pool, tmpl *computepb.InstanceTemplate) error {
	l := tmpl.GetProperties().GetLabels()
	switch {
	case l[LabelPool] != "" && l[LabelPool] != pool.Name:
		return &providers.ConfigError{Pool: pool.Name, Attr: "gcp.mig", Err: fmt.Errorf("pool %s: the instance template %s of %s labels its VMs %s=%s: another pool's group", pool.Name, tmpl.GetName(), g.what(), LabelPool, l[LabelPool])}
	case l[LabelFleet] != "" && p.fleet != "" && l[LabelFleet] != p.fleet:
		return &providers.ConfigError{Pool: pool.Name, Attr: "gcp.mig", Err: fmt.Errorf("pool %s: the instance template %s of %s labels its VMs %s=%s, and this controller's fleet is %s: another fleet's group", pool.Name, tmpl.GetName(), g.what(), LabelFleet, l[LabelFleet], p.fleet)}
	case l[LabelManaged] != "true" || l[LabelPool] == "":
		p.log.Warn("the group's instance template does not label its VMs as the pool's: set labels = { fleetcast-managed = \"true\", fleetcast-pool = \"<pool>\" }",
			"pool", pool.Name, "mig", g.s.MIG, "template", tmpl.GetName())
	}
	return nil
}

// template reads the instance template at url: a global one
// (.../global/instanceTemplates/NAME) or a regional one
// (.../regions/R/instanceTemplates/NAME).
func (p *Provider) template(ctx context.Context, g group, url string) (*computepb.InstanceTemplate, error) {
	name := path.Base(url)
	if url == "" || name == "." {
		return nil, &providers.ConfigError{Pool: g.pool.Name, Attr: "gcp.mig", Err: fmt.Errorf("pool %s: %s has no instance template", g.pool.Name, g.what())}
	}
	opts := p.options(g.pool)
	what := fmt.Sprintf("instance template %q", name)
	if region := after(url, "regions"); region != "" {
		c, err := compute.NewRegionInstanceTemplatesRESTClient(ctx, opts...)
		if err != nil {
			return nil, fmt.Errorf("pool %s: gcp: %w", g.pool.Name, err)
		}
		defer c.Close() //nolint:errcheck // read once, at start
		t, err := c.Get(ctx, &computepb.GetRegionInstanceTemplateRequest{Project: g.s.Project, Region: region, InstanceTemplate: name})
		return t, classify(g.pool.Name, what, "get", err)
	}
	c, err := compute.NewInstanceTemplatesRESTClient(ctx, opts...)
	if err != nil {
		return nil, fmt.Errorf("pool %s: gcp: %w", g.pool.Name, err)
	}
	defer c.Close() //nolint:errcheck // read once, at start
	t, err := c.Get(ctx, &computepb.GetInstanceTemplateRequest{Project: g.s.Project, InstanceTemplate: name})
	return t, classify(g.pool.Name, what, "get", err)
}

// after is the path element after key in url; "" if none.
func after(url, key string) string {
	parts := strings.Split(url, "/")
	for i := 0; i+1 < len(parts); i++ {
		if parts[i] == key {
			return parts[i+1]
		}
	}
	return ""
}
