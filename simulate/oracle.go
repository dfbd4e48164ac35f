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
// a step function, in order, covering [0, span). Shares of one GPU are
// packed perfectly (the GPUs their thousandths need, rounded up), unless
// whole rounds each up to a whole GPU (Options.WholeGPUs).
func demandSegments(tr *trace.Trace, whole bool) []segment {
	type edge struct {
		t int64
		d int
	}
	edges := make([]edge, 0, 2*len(tr.Jobs))
	for i := range tr.Jobs {
		var j job
		jobAsk(&j, &tr.Jobs[i], whole)
		d := tr.Jobs[i].GPUs * shareMilli
		if j.isShare() {
			d = int(j.milli)
		}
		s := secs(tr.Jobs[i].Submit)
		edges = append(edges, edge{s, d}, edge{s + max(secs(tr.Jobs[i].Duration), 1), -d})
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
			segs = append(segs, segment{last, e.t, (cur + shareMilli - 1) / shareMilli})
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
//     them; with advised reservations (advice >= 0, in seconds), from then
//     on the cheapest reserved pool grows where the predictive policy's may
//     (at advice, then every adviceEvery), never shrinking, to the schedule
//     that costs least in hindsight (dynamic programming over periods and
//     sizes; a fixed size when that is best), billed from each growth on,
//     as the predictive policy's is;
//   - exactly enough burst nodes for the rest at every moment, cheapest pools
//     first within their max, the region's capacity and the fleet's limits
//     (limits.max_gpus and max_spend_per_hour, reservations counted whole),
//     packed perfectly; a node needed again within its lead time is kept
//     through the gap, otherwise it is launched one lead time ahead and paid
//     for that time; capacity needed at the start is there already (as the
//     static fleet's is).
//
// Jobs never wait and no work is lost. Demand beyond what the pools and
// limits allow goes unserved (Run warns of it), so the oracle stays a
// lower bound.
func oracle(tr *trace.Trace, whole bool, pools []simPool, sample, advice int64, lim fleet.Limits) Result {
	segs := demandSegments(tr, whole)
	res := -1
	baseGPUs, basePrice := 0, 0.0 // the configured reservations
	for i := range pools {
		sp := &pools[i].spec
		if sp.Capacity != fleet.Reserved {
			continue
		}
		baseGPUs = fleet.SatAdd(baseGPUs, fleet.SatMul(sp.Max, sp.GPUsPerNode))
		basePrice += float64(sp.Max) * sp.PricePerHour
		if res < 0 || fleet.CompareForLaunch(sp, &pools[res].spec) < 0 {
			res = i
		}
	}
	burst := burstOrder(pools, false)
	peak := 0
	for _, s := range segs {
		peak = max(peak, s.gpus)
	}
	resGPN, resPrice, maxExtra := 1, 0.0, 0
	if res >= 0 && advice >= 0 {
		resGPN, resPrice = pools[res].spec.GPUsPerNode, pools[res].spec.PricePerHour
		maxExtra = (max(0, peak-baseGPUs) + resGPN - 1) / resGPN
		if lim.MaxGPUs > 0 {
			maxExtra = min(maxExtra, max(0, lim.MaxGPUs-baseGPUs)/resGPN)
		}
		if lim.MaxSpendPerHour > 0 && resPrice > 0 {
			maxExtra = min(maxExtra, int(max(0, lim.MaxSpendPerHour-basePrice)/resPrice))
		}
	}
	// burstCost is the cost per hour of gpus of burst demand on top of
	// reservations of rg GPUs costing rprice an hour, filling nodes (written
	// into nodes, one count per burst pool) cheapest pool first within the
	// pools' room and the limits; unserved is the demand nothing could hold.
	burstCost := func(gpus, rg int, rprice float64, nodes []int) (cost float64, unserved int) {
		clear(nodes)
		gpuRoom, spendRoom := math.MaxInt, math.Inf(1)
		if lim.MaxGPUs > 0 {
			gpuRoom = max(0, lim.MaxGPUs-rg)
		}
		if lim.MaxSpendPerHour > 0 {
			spendRoom = max(0, lim.MaxSpendPerHour-rprice)
		}
		for k, pi := range burst {
			if gpus <= 0 {
				break
			}
			p := &pools[pi]
			gpn := p.spec.GPUsPerNode
			n := min((gpus+gpn-1)/gpn, min(p.spec.Max, p.settings.Capacity), gpuRoom/gpn)
			if lim.MaxSpendPerHour > 0 && p.spec.PricePerHour > 0 {
				n = min(n, int(spendRoom/p.spec.PricePerHour+1e-9))
			}
			nodes[k] = n
			cost += float64(n) * p.spec.PricePerHour
			gpus -= n * gpn
			gpuRoom -= n * gpn
			spendRoom -= float64(n) * p.spec.PricePerHour
		}
		return cost, max(0, gpus)
	}
	scratch := make([]int, len(burst))

	// Periods of one reservation size: the whole run; with advice, the
	// configured size before it and then periods of adviceEvery, each cut
	// into segments at its edges.
	periods := [][2]int{{0, len(segs)}}
	if maxExtra > 0 && len(segs) > 0 {
		periods = periods[:0]
		lo := 0
		for edge := advice; ; edge += adviceEvery {
			cut := lo
			for cut < len(segs) && segs[cut].to <= edge {
				cut++
			}
			if cut < len(segs) && segs[cut].from < edge { // split the segment at the edge
				s := segs[cut]
				segs = slices.Insert(segs, cut+1, segment{edge, s.to, s.gpus})
				segs[cut].to = edge
				cut++
			}
			periods = append(periods, [2]int{lo, cut})
			lo = cut
			if lo >= len(segs) {
				break
			}
		}
	}
	// The schedule: extra[w] nodes added to the reservation in period w,
	// never fewer than in the period before, none before the advice, at the
	// least cost. Demand nothing could hold costs nothing (it is reported
	// as unserved): a policy queues it and serves it later, which the
	// demand curve cannot tell, and buying a reservation for a spike would
	// bill the oracle more than such a policy pays. The cost is summed over
	// each period's levels in order, for determinism.
	extra := make([]int, len(periods))
	if len(periods) > 1 {
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
			costs := make([]float64, maxExtra+1)
			for r := range costs {
				rg, rp := baseGPUs+r*resGPN, basePrice+float64(r)*resPrice
				costs[r] = rp * float64(span)
				for _, l := range merged {
					c, _ := burstCost(l.gpus-rg, rg, rp, scratch)
					costs[r] += c * float64(l.dur)
				}
			}
			return costs
		}
		best := make([][]float64, len(periods))
		from := make([][]int, len(periods))
		for w, pr := range periods {
			costs := periodCosts(segs[pr[0]:pr[1]])
			best[w], from[w] = make([]float64, maxExtra+1), make([]int, maxExtra+1)
			prevMin, prevArg := math.Inf(1), 0
			for r := range costs {
				switch {
				case w == 0 && r > 0: // before the advice: the configured reservations
					best[w][r] = math.Inf(1)
				case w == 0:
					best[w][r] = costs[r]
				default:
					if best[w-1][r] < prevMin {
						prevMin, prevArg = best[w-1][r], r
					}
					best[w][r], from[w][r] = costs[r]+prevMin, prevArg
				}
			}
		}
		n := len(periods)
		r := 0
		for k := range best[n-1] {
			if best[n-1][k] < best[n-1][r] {
				r = k
			}
		}
		for w := n - 1; w >= 0; w-- {
			extra[w] = r
			r = from[w][r]
		}
	}

	out := Result{Policy: "oracle"}
	var unserved float64 // GPU-seconds
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
			c, short := burstCost(s.gpus-rg, rg, price, nodes)
			dt := float64(s.to - s.from)
			unserved += float64(min(short, s.gpus)) * dt
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
	out.UnservedGPUHours = unserved / 3600
	out.UsedGPUHours = tr.GPUHours() - out.UnservedGPUHours
	out.finish()
	return out
}
