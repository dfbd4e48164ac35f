package simulate

import (
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

// oracle is the clairvoyant lower bound: it knows the demand curve exactly,
// holds the reservation that minimises the total cost of serving it, and
// keeps exactly enough burst nodes for the rest at every moment (cheapest
// pools first, within their max and region capacity), each launched one
// lead time ahead (and billed for it). Jobs never wait and no work is lost.
// It packs GPUs perfectly into nodes, which no real scheduler does: a lower
// bound.
func oracle(tr *trace.Trace, pools []simPool, sample int64) Result {
	segs := demandSegments(tr)
	res := -1
	for i := range pools {
		if pools[i].spec.Capacity == fleet.Reserved && (res < 0 || fleet.CompareForLaunch(&pools[i].spec, &pools[res].spec) < 0) {
			res = i
		}
	}
	burst := burstOrder(pools, false)
	peak := 0
	for _, s := range segs {
		peak = max(peak, s.gpus)
	}
	// burstCost is the cost per hour of gpus of burst demand, filling nodes
	// (written into nodes, one count per burst pool) cheapest pool first.
	burstCost := func(gpus int, nodes []int) (cost float64) {
		clear(nodes)
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
		// Demand beyond what the pools can hold goes unserved: the
		// oracle stays a lower bound on cost (Run warns of it).
		return cost
	}
	scratch := make([]int, len(burst))
	resGPN, resPrice, maxRes := 1, 0.0, 0
	if res >= 0 {
		resGPN, resPrice = pools[res].spec.GPUsPerNode, pools[res].spec.PricePerHour
		maxRes = (peak + resGPN - 1) / resGPN
	}
	// weekCost is the cost of the weekly part of the curve segs with a
	// reservation of r nodes: reserved + burst, in price-hours x seconds.
	byLevel := map[int]int64{}
	weekCosts := func(segs []segment) []float64 {
		clear(byLevel)
		var span int64
		for _, s := range segs {
			byLevel[s.gpus] += s.to - s.from
			span += s.to - s.from
		}
		costs := make([]float64, maxRes+1)
		for r := range costs {
			costs[r] = float64(r) * resPrice * float64(span)
			for level, dur := range byLevel {
				costs[r] += burstCost(level-r*resGPN, scratch) * float64(dur)
			}
		}
		return costs
	}
	// Weeks: the segments of each calendar week of the trace.
	var weeks [][2]int
	for lo := 0; lo < len(segs); {
		weekEnd := (segs[lo].from/week + 1) * week
		hi := lo
		for hi < len(segs) && segs[hi].from < weekEnd {
			hi++
		}
		weeks = append(weeks, [2]int{lo, hi})
		lo = hi
	}
	// The reservation schedule, by the week (like capacity blocks), that
	// minimises the total cost, among schedules that never shrink (a
	// reservation is a commitment; the predictive policy's are the same
	// kind): dynamic programming over (week, nodes reserved).
	best := make([][]float64, len(weeks))
	from := make([][]int, len(weeks))
	for w, wk := range weeks {
		costs := weekCosts(segs[wk[0]:wk[1]])
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
	schedule := make([]int, len(weeks))
	if n := len(weeks); n > 0 {
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
	prev, nodes := make([]int, len(burst)), make([]int, len(burst))
	var next int64 // the next capacity sample
	for w, wk := range weeks {
		r := schedule[w]
		rg := r * resGPN
		out.ReservedGPUs = max(out.ReservedGPUs, rg)
		for _, s := range segs[wk[0]:wk[1]] {
			c := burstCost(s.gpus-rg, nodes)
			capacity := rg
			for k, pi := range burst {
				capacity += nodes[k] * pools[pi].spec.GPUsPerNode
			}
			for ; sample > 0 && next < s.to; next += sample {
				out.Capacity = append(out.Capacity, float64(capacity))
			}
			dt := float64(s.to - s.from)
			out.CostUSD += (c + float64(r)*resPrice) * dt / 3600
			out.ProvisionedGPUHours += float64(rg) * dt / 3600
			for k, pi := range burst {
				p := &pools[pi]
				out.ProvisionedGPUHours += float64(nodes[k]*p.spec.GPUsPerNode) * dt / 3600
				if d := nodes[k] - prev[k]; d > 0 {
					// Launched one lead time ahead, and paid for it.
					lead := p.spec.LeadTime.Hours()
					out.CostUSD += float64(d) * p.spec.PricePerHour * lead
					out.ProvisionedGPUHours += float64(d*p.spec.GPUsPerNode) * lead
					out.Launches += d
				} else if d < 0 {
					out.Drains -= d
				}
			}
			prev, nodes = nodes, prev
		}
	}
	out.finish()
	return out
}
