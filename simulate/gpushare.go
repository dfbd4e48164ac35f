package simulate

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/fleetcast/autoscaler/fleet"
	"github.com/fleetcast/autoscaler/trace"
)

// A GPU share is a job of one GPU that asks for part of it (trace.Job.Milli:
// time-slicing or MPS). The simulated scheduler places shares as a GPU
// sharing scheduler does (the Alibaba cluster's, Kubernetes' device
// plugins with time-slicing): on a GPU other shares hold part of, where the
// share fits in what they leave, best fit (the GPU with the least left that
// still holds it, reserved nodes first), else on a whole free GPU of the
// node that fits best (as a 1-GPU job), which the share then holds in part.
// A GPU that shares hold is held whole: no whole-GPU job starts on it until
// the last share leaves. Options.WholeGPUs rounds each share up to a whole
// GPU instead, as a fleet without sharing runs it.

// shareMilli is what one GPU holds, in thousandths.
const shareMilli = 1000

// noPart marks a job that holds no shared GPU, and a node's slot that is
// no shared GPU.
const noPart = -1

// eqSeconds is s seconds of job j's ask in thousandths of a GPU-second:
// its share, or its whole GPUs (job.ask).
func (j *job) eqSeconds(s int64) float64 { return float64(s*int64(j.ask)) / shareMilli }

// isShare reports whether job j is placed as a share of one GPU.
func (j *job) isShare() bool { return j.milli > 0 }

// modelTable is the GPU types of a run: the pools' gpu_model, each once,
// compared without regard to case, by index (a job's types are a bit mask:
// a job may accept only the first maxTypes).
type modelTable struct {
	names []string // as the first pool spells it; "" for a pool without one
	of    []int    // each pool's index
}

// maxTypes is how many GPU types a job's types may be among.
const maxTypes = 64

// newModelTable is the run's GPU types, from its pools.
func newModelTable(pools []fleet.Pool) *modelTable {
	t := &modelTable{of: make([]int, len(pools))}
	for i := range pools {
		k := slices.IndexFunc(t.names, func(s string) bool { return strings.EqualFold(s, pools[i].GPUModel) })
		if k < 0 {
			k = len(t.names)
			t.names = append(t.names, pools[i].GPUModel)
		}
		t.of[i] = k
	}
	return t
}

// checkTypesRun refuses a trace with a job that could never run for its
// GPU types, naming the first: it accepts only types no pool has, or it is
// wider than every node of its types and their widest pools are not the
// fleet's widest (a job wider than a node takes whole nodes of the
// widest pools), or than all of those together.
func checkTypesRun(pools []fleet.Pool, tr *trace.Trace) error {
	t := newModelTable(pools)
	cache := map[string]uint64{}
	widest := 0
	for i := range pools {
		widest = max(widest, pools[i].GPUsPerNode)
	}
	type shape struct {
		types string
		gpus  int
	}
	checked := map[shape]bool{}
	for i := range tr.Jobs {
		j := &tr.Jobs[i]
		mask, err := t.maskOf(j.GPUTypes, cache)
		if err != nil {
			return fmt.Errorf("simulate: job %s %w", j.ID, err)
		}
		if mask == 0 || checked[shape{j.GPUTypes, j.GPUs}] {
			continue
		}
		checked[shape{j.GPUTypes, j.GPUs}] = true
		most, whole := 0, 0 // the widest node of its types; the GPUs of its types' widest pools
		for p := range pools {
			if mask&(1<<t.of[p]) == 0 || t.of[p] >= maxTypes {
				continue
			}
			most = max(most, pools[p].GPUsPerNode)
			if pools[p].GPUsPerNode == widest {
				whole = fleet.SatAdd(whole, fleet.SatMul(pools[p].Max, widest))
			}
		}
		if j.GPUs > most && j.GPUs > whole {
			return fmt.Errorf("simulate: job %s of %d GPUs accepts GPU types %s, whose nodes hold at most %d GPUs each, and whose pools hold %d GPUs of the fleet's widest nodes (%d GPUs), which a job wider than a node takes whole: it could never run",
				j.ID, j.GPUs, strings.ReplaceAll(j.GPUTypes, "|", ", "), most, whole, widest)
		}
	}
	return nil
}

// maskOf is the bit mask of the GPU types of list (trace.Job.GPUTypes):
// 0 for any; an error when none of them is a pool's.
func (t *modelTable) maskOf(list string, cache map[string]uint64) (uint64, error) {
	if list == "" {
		return 0, nil
	}
	if m, ok := cache[list]; ok {
		return m, nil
	}
	var m uint64
	for typ := range strings.SplitSeq(list, "|") {
		k := slices.IndexFunc(t.names, func(s string) bool { return s != "" && strings.EqualFold(s, typ) })
		if k >= maxTypes {
			return 0, fmt.Errorf("accepts GPU type %s, the %dth of the pools' GPU models: a job's types are among the first %d", typ, k+1, maxTypes)
		}
		if k >= 0 {
			m |= 1 << k
		}
	}
	if m == 0 {
		known := slices.DeleteFunc(slices.Clone(t.names), func(s string) bool { return s == "" })
		return 0, fmt.Errorf("accepts GPU types %s, which no pool of the config has (their gpu_model: %s): it could never run",
			strings.ReplaceAll(list, "|", ", "), strings.Join(known, ", "))
	}
	cache[list] = m
	return m, nil
}

// jobAsk sets what job j asks for from trace job tj: its share (placed as
// one unless whole), its ask in thousandths of a GPU.
func jobAsk(j *job, tj *trace.Job, whole bool) {
	j.part = noPart
	j.ask = int32(tj.GPUs) * shareMilli
	if tj.Milli > 0 && tj.Milli < shareMilli && tj.GPUs == 1 {
		j.ask = int32(tj.Milli)
		if !whole {
			j.milli = int32(tj.Milli)
		}
	}
}

// accepts reports whether job j may run on node n: the node's capacity
// type is one of mask's (0: any), and its GPU type one of the job's.
func (e *engine) accepts(j *job, n *node, mask uint8) bool {
	return (mask == 0 || n.kind&mask != 0) && j.takes(int(e.models.of[n.pool]))
}

// findShare is where share job j would start now, of the capacity types
// in mask: a shared GPU (slot >= 0) with the least left that holds it (a
// reserved node's between two that leave as much); else a node with a
// whole free GPU (slot noPart), the one with the fewest free (reserved
// first); nil if none. With fragmentation-aware
// placement (Options.SharePlacement), the shared GPU, or a whole free one,
// whose fragmentation grows the least (fragCost), then the least left.
func (e *engine) findShare(j *job, mask uint8) (best *node, slot int) {
	left, cost := shareMilli+1, math.Inf(1)
	for _, n := range e.sharedNodes {
		if n.bucketPos < 0 || !e.accepts(j, n, mask) {
			continue // not up, or draining
		}
		for s, free := range n.parts {
			if free < j.milli {
				continue
			}
			c := 0.0
			if e.fragCost != nil {
				c = e.fragCost[free-j.milli] - e.fragCost[free]
			}
			if c < cost || (c == cost && (int(free) < left || (int(free) == left && n.tier < best.tier))) {
				best, slot, left, cost = n, s, int(free), c
			}
		}
	}
	if best != nil && (e.fragCost == nil || cost <= e.fragCost[shareMilli-j.milli]) {
		return best, slot
	}
	for f := 1; f <= e.maxGPN; f++ {
		if n := e.pickOf(j, f, mask); n != nil {
			return n, noPart
		}
	}
	return best, slot
}

// fragCosts is, for fragmentation-aware placement (Weng et al., ATC'23,
// "Beware of Fragmentation"), the fragmentation of a shared GPU with f
// thousandths left, for f from 0 to 1000: what of it the run's jobs
// could not use, f times the share of the jobs (by count, whole-GPU jobs
// included) that ask for more than f; 0 for a whole free GPU (1000).
func fragCosts(jobs []job) []float64 {
	var asks [shareMilli + 1]float64
	for i := range jobs {
		asks[min(int(jobs[i].ask), shareMilli)]++
	}
	c := make([]float64, shareMilli+1)
	over := float64(len(jobs)) // jobs asking for more than f
	for f := 0; f < shareMilli; f++ {
		over -= asks[f]
		c[f] = float64(f) / shareMilli * over / float64(max(len(jobs), 1))
	}
	return c
}

// startShare places share job j (findShare).
func (e *engine) startShare(id int32, mask uint8) {
	j := &e.jobs[id]
	n, slot := e.findShare(j, mask)
	left := shareMilli - j.milli
	if slot == noPart {
		slot = slices.Index(n.parts, noPart)
		if slot < 0 {
			slot = len(n.parts)
			n.parts = append(n.parts, noPart)
		}
		if n.shared == 0 {
			n.sharedPos = len(e.sharedNodes)
			e.sharedNodes = append(e.sharedNodes, n)
		}
		n.shared++
		e.runningGPUs++
		e.setFree(n, n.free-1)
	} else {
		left = n.parts[slot] - j.milli
	}
	e.setPart(n, slot, left)
	j.part = int32(slot)
	j.nodes = append(j.nodes, n.idx)
	n.jobs = append(n.jobs, id)
	n.jobsVer++
}

// releaseShare frees what share job j holds on node n: the GPU it shared
// is free again once its last share leaves.
func (e *engine) releaseShare(j *job, n *node) {
	s := int(j.part)
	j.part = noPart
	if left := n.parts[s] + j.milli; left < shareMilli {
		e.setPart(n, s, left)
		return
	}
	e.setPart(n, s, noPart)
	n.shared--
	e.runningGPUs--
	if n.shared == 0 {
		last := e.sharedNodes[len(e.sharedNodes)-1]
		e.sharedNodes[n.sharedPos], last.sharedPos = last, n.sharedPos
		e.sharedNodes = e.sharedNodes[:len(e.sharedNodes)-1]
		n.parts = n.parts[:0]
	}
	e.setFree(n, n.free+1)
}

// setPart sets what node n's shared GPU of slot s has left (noPart: no
// longer shared), keeping the counts of what shared GPUs leave.
func (e *engine) setPart(n *node, s int, left int32) {
	old := n.parts[s]
	e.strandedNow += int64(max(left, 0) - max(old, 0))
	if n.bucketPos >= 0 {
		m := e.models.of[n.pool]
		if old >= 0 {
			e.partFree[m][old]--
		}
		if left >= 0 {
			e.partFree[m][left]++
		}
		e.maxPartOK[m] = false
	}
	n.parts[s] = left
}

// countParts counts up, non-draining node n (d 1) in or out (-1) of the
// counts by GPU type: of its free GPUs (freeModel) and of what its shared
// GPUs leave (partFree).
func (e *engine) countParts(n *node, d int32) {
	m := e.models.of[n.pool]
	e.freeModel[m][n.free] += d
	for _, left := range n.parts {
		if left >= 0 {
			e.partFree[m][left] += d
			e.maxPartOK[m] = false
		}
	}
}

// maxPart is the most a shared GPU of type m on an up, non-draining node
// has left; -1 if none.
func (e *engine) maxPart(m int) int32 {
	if !e.maxPartOK[m] {
		e.maxPartAt[m] = -1
		for f := int32(shareMilli - 1); f >= 0; f-- {
			if e.partFree[m][f] > 0 {
				e.maxPartAt[m] = f
				break
			}
		}
		e.maxPartOK[m] = true
	}
	return e.maxPartAt[m]
}

// takes reports whether job j accepts GPU type m.
func (j *job) takes(m int) bool { return j.types == 0 || j.types&(1<<m) != 0 }

// fitsShare reports whether share job j can start now on the capacity
// types in mask (findShare would find a place).
func (e *engine) fitsShare(j *job, mask uint8) bool {
	if mask != 0 {
		n, _ := e.findShare(j, mask)
		return n != nil
	}
	for m := range e.models.names {
		if !j.takes(m) {
			continue
		}
		if e.maxPart(m) >= j.milli {
			return true
		}
		for f := 1; f <= e.maxGPN; f++ {
			if e.freeModel[m][f] > 0 {
				return true
			}
		}
	}
	return false
}

// fitsTyped reports whether job j, of whole GPUs and some GPU types only,
// can start now on the capacity types in mask.
func (e *engine) fitsTyped(j *job, mask uint8) bool {
	if j.gpus > e.maxGPN {
		return e.freeNodesFor(j, e.maxGPN, mask)*e.maxGPN >= j.gpus
	}
	for f := j.gpus; f <= e.maxGPN; f++ {
		if mask != 0 {
			if e.pickOf(j, f, mask) != nil {
				return true
			}
			continue
		}
		for m := range e.models.names {
			if j.takes(m) && e.freeModel[m][f] > 0 {
				return true
			}
		}
	}
	return false
}

// freeNodesFor is how many up, non-draining nodes with f free GPUs are of
// the capacity types in mask and of a GPU type job j accepts (freeOn).
func (e *engine) freeNodesFor(j *job, f int, mask uint8) int {
	if j.types == 0 {
		return e.freeOn(f, mask)
	}
	n := 0
	for t := range e.buckets {
		for _, x := range e.buckets[t][f] {
			if e.accepts(j, x, mask) {
				n++
			}
		}
	}
	return n
}

// pickOf is a node with f free GPUs of the capacity types in mask and of
// a GPU type job j accepts, a reserved one if there is one (pickFor);
// nil if none.
func (e *engine) pickOf(j *job, f int, mask uint8) *node {
	if j.types == 0 {
		return e.pickFor(f, mask)
	}
	for t := range e.buckets {
		b := e.buckets[t][f]
		for i := len(b) - 1; i >= 0; i-- {
			if e.accepts(j, b[i], mask) {
				return b[i]
			}
		}
	}
	return nil
}

// sharedGPUName is what node n's agent calls its shared GPU of slot s.
func sharedGPUName(s int32) string { return strconv.Itoa(int(s)) }

// shareQueue counts the queued shares of one tier by their thousandths,
// to report how many new GPUs they need (packed).
type shareQueue struct {
	count [shareMilli]int32
	n     int
	// gpus is packed's answer while the queue is unchanged (valid).
	gpus  int
	valid bool
}

// add counts d more queued shares of m thousandths.
func (q *shareQueue) add(m int32, d int) {
	q.count[m] += int32(d)
	q.n += d
	q.valid = false
}

// packed is how many whole GPUs the queued shares need: first fit
// decreasing, each share on the GPU with the least left that holds it
// (the scheduler's best fit), as GPUs are bought for them. The queued
// shares found no room on the fleet's shared GPUs when the scheduler last
// looked, so they are packed on new GPUs only.
func (q *shareQueue) packed() int {
	if q.valid {
		return q.gpus
	}
	// open[f] counts the GPUs opened so far with f thousandths left.
	var open [shareMilli + 1]int
	gpus := 0
	for m := shareMilli - 1; m >= 1; m-- {
		c := int(q.count[m])
		for f := m; c > 0 && f < shareMilli; f++ {
			if k := min(c, open[f]); k > 0 {
				open[f] -= k
				open[f-m] += k
				c -= k
				f = m - 1 // what is left of f may hold one more: look from m again
			}
		}
		if c == 0 {
			continue
		}
		per := shareMilli / m // on each new GPU
		full := c / per
		gpus += full
		open[shareMilli-per*m] += full
		if r := c % per; r > 0 {
			gpus++
			open[shareMilli-r*m]++
		}
	}
	q.gpus, q.valid = gpus, true
	return gpus
}

// The placements of shares of one GPU (Options.SharePlacement).
const (
	// PlaceBestFit places a share on the shared GPU with the least left
	// that holds it, else on a whole free GPU of the node with the fewest.
	PlaceBestFit = "best-fit"
	// PlaceFragmentation places it where the fragmentation the run's jobs
	// would leave grows the least (fragCosts), as Alibaba's
	// fragmentation gradient descent scheduler does.
	PlaceFragmentation = "fragmentation"
)
