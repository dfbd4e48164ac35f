package simulate

import (
	"cmp"
	"slices"
	"strings"

	"github.com/fleetcast/autoscaler/fleet"
	"github.com/fleetcast/autoscaler/trace"
)

// A job may accept some GPU types only (trace.Job.GPUTypes, openb's
// gpu_spec): the simulated scheduler starts it on nodes of those types
// only (engine.accepts), and its queued demand is bought for apart, in the
// pools of its types: the predictive policies see it as demand scoped to
// those GPU models (pendingTyped), the reactive ones buy for it in the
// cheapest such pool (scaleUpTyped), as Cluster Autoscaler buys a pending
// pod a node of a group whose template its node selector matches.

// typedKey is the queued demand of one set of GPU types and one tier.
type typedKey struct {
	types uint64
	tier  int32
}

// typedDemand is what the queued jobs of one typedKey ask: the whole GPUs
// of its jobs of whole GPUs, the widest of them (seen since it was last
// empty), and its shares of one GPU.
type typedDemand struct {
	gpus, widest int
	shares       shareQueue
}

// queueTyped counts gpus more (fewer) of job j, of some GPU types only,
// queued.
func (e *engine) queueTyped(j *job, gpus int) {
	k := typedKey{types: j.types, tier: j.group[byTier]}
	d := e.typed[k]
	if d == nil {
		d = &typedDemand{}
		e.typed[k] = d
		e.typedKeys = append(e.typedKeys, k)
		slices.SortFunc(e.typedKeys, func(a, b typedKey) int { return cmp.Or(cmp.Compare(a.types, b.types), cmp.Compare(a.tier, b.tier)) })
	}
	if j.isShare() {
		d.shares.add(j.milli, gpus)
		return
	}
	d.gpus += gpus
	if d.widest = max(d.widest, j.gpus); d.gpus == 0 {
		d.widest = 0
	}
}

// typedWhole is the queued whole GPUs of jobs of some GPU types only, of
// tier k (-1: of every tier).
func (e *engine) typedWhole(k int) int {
	n := 0
	for _, tk := range e.typedKeys {
		if k < 0 || int(tk.tier) == k {
			n += e.typed[tk].gpus
		}
	}
	return n
}

// sharesOfTier is the GPUs the queued shares of one GPU of tier k need:
// those of any GPU type packed together, those of each set of types apart.
func (e *engine) sharesOfTier(k int) int {
	n := e.shareQ[k].packed()
	for _, tk := range e.typedKeys {
		if int(tk.tier) == k {
			n += e.typed[tk].shares.packed()
		}
	}
	return n
}

// typedBought is the queued GPUs of jobs of some GPU types only that the
// reactive policies buy for (their tiers': boughtFor).
func (e *engine) typedBought() int {
	n := 0
	for _, tk := range e.typedKeys {
		if e.buysFor == nil || e.buysFor[tk.tier] {
			d := e.typed[tk]
			n += d.gpus + d.shares.packed()
		}
	}
	return n
}

// typesText is the GPU types of mask, as a scope names them
// (fleet.ScopedDemand.GPUModel: separated by '|').
func (e *engine) typesText(mask uint64) string {
	var names []string
	for m, name := range e.models.names {
		if mask&(1<<m) != 0 {
			names = append(names, name)
		}
	}
	return strings.Join(names, "|")
}

// pendingTyped appends to out the queued demand of the jobs of some GPU
// types only, as a scheduler reports it: for each set of types and tier, a
// line scoped to those GPU models, of its jobs' GPUs (a share's as
// packed), in nodes as wide as its widest job (jobs wider than a node in
// whole nodes of the widest pools).
func (e *engine) pendingTyped(out []fleet.ScopedDemand) []fleet.ScopedDemand {
	var names []string
	if e.queuedTier != nil {
		names = e.groups[byTier].table.names
	}
	for _, tk := range e.typedKeys {
		d := e.typed[tk]
		g := d.gpus + d.shares.packed()
		if g == 0 {
			continue
		}
		line := fleet.ScopedDemand{GPUModel: e.typesText(tk.types), GPUs: g}
		switch {
		case d.widest > e.maxGPN:
			line.MinGPUsPerNode, line.Nodes = e.maxGPN, (g+e.maxGPN-1)/e.maxGPN
		case d.widest > e.minGPN:
			line.MinGPUsPerNode = d.widest
		}
		if names != nil {
			line.Tier = names[tk.tier]
		}
		out = append(out, line)
	}
	return out
}

// scaleUpTyped launches what the reactive policy adds for the queued jobs
// of some GPU types only: for each set of types (in mask order), the GPUs
// its jobs of the tiers it buys for need less the GPUs of the empty nodes
// (booting ones included) of those types not counted for another set, in
// the cheapest pool of order of those types whose nodes hold its widest
// job. It reports whether anything was wanted (and could be bought), and
// the GPUs of the empty nodes it counted on, which scaleUp leaves to it.
func (r *reactive) scaleUpTyped(e *engine, order []int) (wanted bool, counted map[int32]bool, countedGPUs int) {
	if len(e.typedKeys) == 0 {
		return false, nil, 0
	}
	// The nodes it launches are the typed jobs' too: scaleUp skips them.
	defer func(first int) {
		for i := first; i < len(e.nodes); i++ {
			if counted == nil {
				counted = map[int32]bool{}
			}
			counted[int32(i)] = true
		}
	}(len(e.nodes))
	for i := 0; i < len(e.typedKeys); {
		mask := e.typedKeys[i].types
		need, widest := 0, 1
		for ; i < len(e.typedKeys) && e.typedKeys[i].types == mask; i++ {
			tk := e.typedKeys[i]
			if e.buysFor == nil || e.buysFor[tk.tier] {
				d := e.typed[tk]
				need += d.gpus + d.shares.packed()
				widest = max(widest, min(d.widest, e.maxGPN))
			}
		}
		if need == 0 {
			continue
		}
		for _, n := range e.live {
			if (n.state == booting || (n.state == up && n.free == n.gpn)) && n.gpn >= widest &&
				mask&(1<<e.models.of[n.pool]) != 0 && !counted[n.idx] {
				if counted == nil {
					counted = map[int32]bool{}
				}
				counted[n.idx] = true
				countedGPUs += n.gpn
				need -= n.gpn
				if need <= 0 {
					break
				}
			}
		}
		if need <= 0 {
			continue
		}
		eligible := slices.DeleteFunc(slices.Clone(order), func(pi int) bool {
			return mask&(1<<e.models.of[pi]) == 0 || e.pools[pi].spec.GPUsPerNode < widest
		})
		if len(eligible) == 0 {
			continue // no pool of its types holds it: it waits
		}
		wanted = true
		gpn := e.pools[eligible[0]].spec.GPUsPerNode
		if launchAcross(e, eligible, (need+gpn-1)/gpn, leadTime(e)) > 0 {
			r.lastUp = e.now
		}
	}
	return wanted, counted, countedGPUs
}

// AnyGPUType names, in Result.GPUTypes, the jobs that accept any GPU type.
const AnyGPUType = "any"

// newTypeTable is the set of GPU types each of the trace's jobs accepts,
// by name (AnyGPUType last); nil when every job accepts any.
func newTypeTable(tr *trace.Trace) *teamTable {
	idx := map[string]int32{}
	for i := range tr.Jobs {
		if s := tr.Jobs[i].GPUTypes; s != "" {
			idx[s] = 0
		}
	}
	if len(idx) == 0 {
		return nil
	}
	t := &teamTable{of: make([]int32, len(tr.Jobs))}
	for s := range idx {
		t.names = append(t.names, s)
	}
	slices.Sort(t.names)
	t.names = append(t.names, AnyGPUType)
	for k, s := range t.names {
		idx[s] = int32(k)
	}
	for i := range tr.Jobs {
		s := tr.Jobs[i].GPUTypes
		if s == "" {
			s = AnyGPUType
		}
		t.of[i] = idx[s]
	}
	return t
}

// asTypes makes split rows (splitTeams) rows of GPU types: the name is a
// set of types.
func asTypes(rows []TeamResult) []TeamResult {
	for i := range rows {
		rows[i].GPUTypes, rows[i].Team = rows[i].Team, ""
	}
	return rows
}

// typedPeak is the peak demand of the jobs that accept one set of GPU
// types (a share's packed with the others of the set), and the widest of
// them in GPUs.
type typedPeak struct {
	types           string
	gpus, widestGPU int
}

// newStatic is the static policy for tr: sized for its peak (shares of one
// GPU packed, unless whole), and for the peak of each set of GPU types its
// jobs accept.
func newStatic(tr *trace.Trace, whole, anyType bool) static {
	s := static{peakGPUs: tr.PeakGPUs()}
	if !whole && slices.ContainsFunc(tr.Jobs, func(j trace.Job) bool { return j.Milli > 0 }) {
		s.peakGPUs = peakOf(demandSegments(tr, false))
	}
	sets := map[string][]trace.Job{}
	for _, j := range tr.Jobs {
		if j.GPUTypes != "" && !anyType {
			sets[j.GPUTypes] = append(sets[j.GPUTypes], j)
		}
	}
	for types, jobs := range sets {
		p := typedPeak{types: types, gpus: peakOf(demandSegments(&trace.Trace{Jobs: jobs}, whole))}
		for _, j := range jobs {
			p.widestGPU = max(p.widestGPU, j.GPUs)
		}
		s.typed = append(s.typed, p)
	}
	slices.SortFunc(s.typed, func(a, b typedPeak) int { return strings.Compare(a.types, b.types) })
	return s
}

// peakOf is the most of segs.
func peakOf(segs []segment) int {
	n := 0
	for _, s := range segs {
		n = max(n, s.gpus)
	}
	return n
}

// fillTyped brings the nodes of each set of GPU types the jobs accept to
// its peak (static.typed), in the cheapest pool of order of those types
// whose nodes hold its widest job (nodes of any pool of the types count).
func (s static) fillTyped(e *engine, order []int, lead func(pi int) int64) {
	for _, p := range s.typed {
		mask, _ := e.models.maskOf(p.types, map[string]uint64{})
		have := 0
		for _, n := range e.live {
			if mask&(1<<e.models.of[n.pool]) != 0 {
				have += n.gpn
			}
		}
		fits := func(pi int) bool {
			return mask&(1<<e.models.of[pi]) == 0 || e.pools[pi].spec.GPUsPerNode < min(p.widestGPU, e.maxGPN)
		}
		eligible := slices.DeleteFunc(slices.Clone(order), fits)
		if len(eligible) == 0 { // its types come only in pools static does not buy first (spot)
			eligible = slices.DeleteFunc(burstOrder(e.pools, false), fits)
		}
		if have >= p.gpus || len(eligible) == 0 {
			continue
		}
		gpn := e.pools[eligible[0]].spec.GPUsPerNode
		launchAcross(e, eligible, (p.gpus-have+gpn-1)/gpn, lead)
	}
}
