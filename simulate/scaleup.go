package simulate

import "slices"

// scaleUp launches what the reactive policy adds: nodes for the queued
// jobs it buys for that the empty nodes (booting ones included) cannot
// hold, and the buffer's shortfall, bufNeed GPUs of whole empty nodes, in
// the cheapest pools first. It reports whether anything was wanted.
//
// Where the burst pools' nodes are all as wide, the queued GPUs less the
// empty ones are bought in nodes of that width. Where they differ, as
// Cluster Autoscaler buys only in node groups whose template fits the
// pending pod: from the widest jobs down, the GPUs of the jobs that need
// nodes at least as wide as each burst width (a job wider than the widest
// burst node rounded up to whole such nodes) less the empty GPUs on
// nodes that wide, in the cheapest pools that wide; what a class does not
// use is left to the narrower ones. The buffer is bought with the
// narrowest class, in the cheapest pools of any width. Empty nodes
// narrower than every burst pool's (reserved ones) are not counted: the
// jobs they can hold have started on them.
//
// Empty nodes in skip are left out: the queued jobs of some GPU types
// count on them (scaleUpTyped).
func (r *reactive) scaleUp(e *engine, order []int, empty, bufNeed int, skip map[int32]bool) bool {
	ws := burstWidths(e, order)
	demand, spare := make([]int, len(ws)), make([]int, len(ws))
	if len(ws) == 1 {
		demand[0], spare[0] = e.queuedBought(), empty
	} else {
		top := ws[len(ws)-1]
		demand[0] += e.sharesBought() // each on one GPU
		for w, g := range e.boughtWidth {
			k := 0
			for k < len(ws)-1 && ws[k] < w {
				k++
			}
			if w > top {
				g = g / w * ((w + top - 1) / top * top)
			}
			demand[k] += g
		}
		for _, n := range e.live {
			if (n.state == booting || (n.state == up && n.free == n.gpn)) && n.gpn >= ws[0] && !skip[n.idx] {
				k := 0 // the widest class the node can serve
				for k < len(ws)-1 && ws[k+1] <= n.gpn {
					k++
				}
				spare[k] += n.gpn
			}
		}
	}
	wanted, carry := false, 0
	for k := len(ws) - 1; k >= 0; k-- {
		carry += spare[k]
		need := max(0, demand[k]-carry)
		if k == 0 {
			need += bufNeed
		}
		if need == 0 {
			carry -= demand[k]
			continue
		}
		wanted = true
		eligible := order
		if k > 0 {
			eligible = slices.DeleteFunc(slices.Clone(order), func(pi int) bool { return e.pools[pi].spec.GPUsPerNode < ws[k] })
		}
		gpn, before := e.pools[eligible[0]].spec.GPUsPerNode, burstGPUs(e, eligible)
		if launchAcross(e, eligible, (need+gpn-1)/gpn, leadTime(e)) > 0 {
			r.lastUp = e.now
		}
		carry = max(0, carry+burstGPUs(e, eligible)-before-demand[k])
	}
	return wanted
}

// burstWidths are the distinct widths of the pools in order, narrowest
// first.
func burstWidths(e *engine, order []int) []int {
	var ws []int
	for _, pi := range order {
		ws = append(ws, e.pools[pi].spec.GPUsPerNode)
	}
	slices.Sort(ws)
	return slices.Compact(ws)
}

// burstGPUs is the GPUs of the pools' nodes.
func burstGPUs(e *engine, pools []int) int {
	n := 0
	for _, pi := range pools {
		n += e.pools[pi].count * e.pools[pi].spec.GPUsPerNode
	}
	return n
}
