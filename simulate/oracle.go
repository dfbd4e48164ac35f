package simulate

import (
	"cmp"
	"math"
	"slices"

	"github.com/fleetcast/autoscaler/fleet"
	"github.com/fleetcast/autoscaler/trace"
)

// segment is a stretch of constant demand.
type segment struct {
	from, to int64
	gpus     int
}

// demandSegments is the trace's demand if every job ran from its submit:
// a step function, in order, covering [0, span).
func demandSegments(tr *trace.Trace) []segment {
	type edge struct {
		t int64
		d int
	}
	edges := make([]edge, 0, 2*len(tr.Jobs))
	for _, j := range tr.Jobs {
		s := secs(j.Submit)
		edges = append(edges, edge{s, j.GPUs}, edge{s + max(secs(j.Duration), 1), -j.GPUs})
	}
	slices.SortFunc(edges, func(a, b edge) int {
		switch {
		case a.t < b.t:
			return -1
		case a.t > b.t:
			return 1
		}
		return 0
	})
	var segs []segment
	cur, last := 0, int64(0)
	for _, e := range edges {
		if e.t > last {
			segs = append(segs, segment{last, e.t, cur})
			last = e.t
		}
		cur += e.d
	}
	return segs
}

// oracle is the clairvoyant lower bound: it knows the demand curve exactly
// and serves it with the cheapest capacity any policy could have bought:
//
//   - the configured reservations for the whole run, as every policy holds
//     them; with advised reservations, from advice (seconds) on, the
//     cheapest reserved pool grown to the fixed size that is cheapest in
//     hindsight over the rest of the run, billed from then on, as the
//     predictive policy's advised growth is;
//   - exactly enough burst nodes for the rest at every moment, cheapest pools
//     first within their max and region capacity, packed perfectly; a node
//     needed again within its lead time is kept through the gap, otherwise
//     it is launched one lead time ahead and paid for that time; capacity
//     needed at the start is there already (as the static fleet's is).
//
// Jobs never wait and no work is lost. Demand beyond what the pools can
// hold goes unserved (Run warns of it), so the oracle stays a lower bound.
// advice < 0: the configured reservations only.
func oracle(tr *trace.Trace, pools []simPool, sample int64, advice int64) Result {
	segs := demandSegments(tr)
	res := -1
	baseGPUs, basePrice := 0, 0.0 // the configured reservations
	for i := range pools {
		sp := &pools[i].spec
		if sp.Capacity != fleet.Reserved {
			continue
		}
		baseGPUs += sp.Max * sp.GPUsPerNode
		basePrice += float64(sp.Max) * sp.PricePerHour
		if res < 0 || fleet.CompareForLaunch(sp, &pools[res].spec) < 0 {
			res = i
		}
	}
	burst := burstOrder(pools, false)
	burstRoom := 0
	for _, pi := range burst {
		p := &pools[pi]
		burstRoom += min(p.spec.Max, p.settings.Capacity) * p.spec.GPUsPerNode
	}
	peak := 0
	for _, s := range segs {
		peak = max(peak, s.gpus)
	}
	resGPN, resPrice, maxExtra := 1, 0.0, 0
	if res >= 0 && advice >= 0 {
		resGPN, resPrice = pools[res].spec.GPUsPerNode, pools[res].spec.PricePerHour
		maxExtra = (max(0, peak-baseGPUs) + resGPN - 1) / resGPN
	}
	// burstCost is the cost per hour of gpus of burst demand, filling nodes
	// (written into nodes, one count per burst pool) cheapest pool first.
	// Demand the burst pools cannot hold costs +Inf when a larger
	// reservation could hold it instead, and nothing when nothing could.
	burstCost := func(gpus int, nodes []int, growable bool) (cost float64) {
		clear(nodes)
		if gpus > burstRoom && growable {
			return math.Inf(1)
		}
		for k, pi := range burst {
			if gpus <= 0 {
				break
			}
			p := &pools[pi]
			room := min(p.spec.Max, p.settings.Capacity)
			n := min((gpus+p.spec.GPUsPerNode-1)/p.spec.GPUsPerNode, room)
			nodes[k] = n
			cost += float64(n) * p.spec.PricePerHour
			gpus -= n * p.spec.GPUsPerNode
		}
		return cost
	}
	scratch := make([]int, len(burst))

	// Periods of one reservation size: the whole run, or with advice the
	// configured size before it and the hindsight-best size after.
	periods := [][2]int{{0, len(segs)}}
	if maxExtra > 0 {
		cut := 0
		for cut < len(segs) && segs[cut].to <= advice {
			cut++
		}
		if cut < len(segs) && segs[cut].from < advice { // split the segment at advice
			s := segs[cut]
			segs = slices.Insert(segs, cut+1, segment{advice, s.to, s.gpus})
			segs[cut].to = advice
			cut++
		}
		periods = [][2]int{{0, cut}, {cut, len(segs)}}
	}
	extra := make([]int, len(periods)) // nodes added to the reservation in each period
	if len(periods) == 2 {
		// The extra nodes that cost least over the second period, in
		// price-hours x seconds; levels are summed in order, for determinism.
		type level struct {
			gpus int
			dur  int64
		}
		var levels []level
		var span int64
		for _, s := range segs[periods[1][0]:periods[1][1]] {
			levels = append(levels, level{s.gpus, s.to - s.from})
			span += s.to - s.from
		}
		slices.SortFunc(levels, func(a, b level) int { return cmp.Compare(a.gpus, b.gpus) })
		merged := levels[:0]
		for _, l := range levels {
			if n := len(merged); n > 0 && merged[n-1].gpus == l.gpus {
				merged[n-1].dur += l.dur
			} else {
				merged = append(merged, l)
			}
		}
		best := math.Inf(1)
		for r := 0; r <= maxExtra; r++ {
			c := float64(r) * resPrice * float64(span)
			for _, l := range merged {
				c += burstCost(l.gpus-baseGPUs-r*resGPN, scratch, true) * float64(l.dur)
			}
			if c < best {
				best, extra[1] = c, r
			}
		}
	}

	out := Result{Policy: "oracle", UsedGPUHours: tr.GPUHours()}
	// Burst nodes as layers: offSince[k][i] is when layer i of pool k was
	// last released (math.MinInt64: never used; the fleet's initial nodes).
	offSince := make([][]int64, len(burst))
	on := make([]int, len(burst))
	nodes := make([]int, len(burst))
	var next int64 // the next capacity sample
	for w, pr := range periods {
		rg := baseGPUs + extra[w]*resGPN
		price := basePrice + float64(extra[w])*resPrice
		out.ReservedGPUs = max(out.ReservedGPUs, rg)
		for _, s := range segs[pr[0]:pr[1]] {
			c := burstCost(s.gpus-rg, nodes, false)
			dt := float64(s.to - s.from)
			out.CostUSD += (c + price) * dt / 3600
			out.ProvisionedGPUHours += float64(rg) * dt / 3600
			capacity := rg
			for k, pi := range burst {
				p := &pools[pi]
				gpn := p.spec.GPUsPerNode
				capacity += nodes[k] * gpn
				out.ProvisionedGPUHours += float64(nodes[k]*gpn) * dt / 3600
				lead := secs(p.spec.LeadTime)
				for ; on[k] < nodes[k]; on[k]++ { // layers turning on
					if on[k] >= len(offSince[k]) {
						offSince[k] = append(offSince[k], math.MinInt64)
					}
					off := offSince[k][on[k]]
					var paid int64 // node-seconds paid outside the demand
					switch {
					case off == math.MinInt64 && s.from == 0:
						// part of the initial fleet
					case off != math.MinInt64 && s.from-off < lead:
						paid = s.from - off // kept through the gap: no drain after all
						out.Drains--
					default:
						paid = lead // launched one lead time ahead
						out.Launches++
					}
					out.CostUSD += p.spec.PricePerHour * float64(paid) / 3600
					out.ProvisionedGPUHours += float64(int64(gpn)*paid) / 3600
				}
				for ; on[k] > nodes[k]; on[k]-- { // layers turning off
					offSince[k][on[k]-1] = s.from
					out.Drains++
				}
			}
			for ; sample > 0 && next < s.to; next += sample {
				out.Capacity = append(out.Capacity, float64(capacity))
			}
		}
	}
	out.finish()
	return out
}
