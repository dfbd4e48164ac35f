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
//   - reservations in the cheapest reserved pool, changed only where the
//     predictive policy may change its own (after the first day, then every
//     week) and never shrunk, chosen in hindsight by dynamic programming
//     over (period, nodes reserved);
//   - exactly enough burst nodes for the rest at every moment, cheapest pools
//     first within their max and region capacity, packed perfectly; a node
//     needed again within its lead time is kept through the gap, otherwise
//     it is launched one lead time ahead and paid for that time; capacity
//     needed at the start is there already (as the static fleet's is).
//
// Jobs never wait and no work is lost. Demand beyond what the pools can
// hold goes unserved (Run warns of it), so the oracle stays a lower bound.
func oracle(tr *trace.Trace, pools []simPool, sample int64) Result {
	segs := demandSegments(tr)
	res := -1
	for i := range pools {
		if pools[i].spec.Capacity == fleet.Reserved && (res < 0 || fleet.CompareForLaunch(&pools[i].spec, &pools[res].spec) < 0) {
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
	resGPN, resPrice, maxRes := 1, 0.0, 0
	if res >= 0 {
		resGPN, resPrice = pools[res].spec.GPUsPerNode, pools[res].spec.PricePerHour
		maxRes = (peak + resGPN - 1) / resGPN
	}
	// burstCost is the cost per hour of gpus of burst demand, filling nodes
	// (written into nodes, one count per burst pool) cheapest pool first.
	// Demand the burst pools cannot hold costs +Inf when a reservation could
	// hold it instead, and nothing when nothing could.
	burstCost := func(gpus int, nodes []int) (cost float64) {
		clear(nodes)
		if gpus > burstRoom && res >= 0 {
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

	// Periods at which a reservation may change: the first day, then weeks.
	var periods [][2]int // segment index ranges
	for lo := 0; lo < len(segs); {
		end := int64(day)
		if segs[lo].from >= day {
			end = day + ((segs[lo].from-day)/week+1)*week
		}
		hi := lo
		for hi < len(segs) && segs[hi].from < end {
			hi++
		}
		periods = append(periods, [2]int{lo, hi})
		lo = hi
	}
	// periodCosts is the cost of a period for each reservation size, in
	// price-hours x seconds; levels are summed in order, for determinism.
	periodCosts := func(segs []segment) []float64 {
		type level struct {
			gpus int
			dur  int64
		}
		var levels []level
		var span int64
		for _, s := range segs {
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
		costs := make([]float64, maxRes+1)
		for r := range costs {
			costs[r] = float64(r) * resPrice * float64(span)
			for _, l := range merged {
				costs[r] += burstCost(l.gpus-r*resGPN, scratch) * float64(l.dur)
			}
		}
		return costs
	}
	best := make([][]float64, len(periods))
	from := make([][]int, len(periods))
	for w, pr := range periods {
		costs := periodCosts(segs[pr[0]:pr[1]])
		best[w], from[w] = make([]float64, maxRes+1), make([]int, maxRes+1)
		prevMin, prevArg := math.Inf(1), 0
		for r := range costs {
			if w == 0 {
				best[w][r] = costs[r]
				continue
			}
			if best[w-1][r] < prevMin {
				prevMin, prevArg = best[w-1][r], r
			}
			best[w][r], from[w][r] = costs[r]+prevMin, prevArg
		}
	}
	schedule := make([]int, len(periods))
	if n := len(periods); n > 0 {
		r := 0
		for k := range best[n-1] {
			if best[n-1][k] < best[n-1][r] {
				r = k
			}
		}
		for w := n - 1; w >= 0; w-- {
			schedule[w] = r
			r = from[w][r]
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
		r := schedule[w]
		rg := r * resGPN
		out.ReservedGPUs = max(out.ReservedGPUs, rg)
		for _, s := range segs[pr[0]:pr[1]] {
			c := burstCost(s.gpus-rg, nodes)
			if math.IsInf(c, 1) {
				c = burstCost(min(s.gpus-rg, burstRoom), nodes) // never: the schedule serves every level
			}
			dt := float64(s.to - s.from)
			out.CostUSD += (c + float64(r)*resPrice) * dt / 3600
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
