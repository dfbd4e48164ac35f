package simulate

import (
	"container/heap"
	"math"
	"math/rand/v2"
	"slices"
)

// job is a trace job as the engine runs it.
type job struct {
	id string
	// gpus is the whole GPUs it holds; 1 for a share of one.
	gpus      int
	order     int   // position in the trace: the FIFO order
	submit    int64 // when it arrives
	remaining int64 // seconds of work left (since its last checkpoint)
	ckpt      int64 // checkpoint interval
	start     int64 // start of the current run; -1 while queued
	first     int64 // first start; -1 before
	nodes     []int32
	gen       uint32 // bumped when a run ends early, to drop its pending events
	done      bool
	// unresponsive jobs ignore drains: they checkpoint only every ckpt.
	unresponsive bool
	// announced jobs are announced Options.AnnounceAhead before submit;
	// duration is the trace's, which the announcement gives.
	announced bool
	duration  int64
	// exact says the scheduler knows each run's true end; limit, when
	// above 0, is the job's time limit in seconds, which each run gets
	// anew (Options.RuntimeEstimates).
	exact bool
	// group is the job's team (byTeam: its index in Options.teams'
	// names) and tier (byTier: in Options.tiers', by rank), each 0 without
	// them.
	group [groupKinds]int32
	// runsOn are the capacity types (kindBit) its tier's jobs run on; 0:
	// any.
	runsOn uint8
	// preempted is set while the job writes the checkpoint a preemption
	// asked for.
	preempted bool
	limit     int64
	// saveAt is when the checkpoint a drain asked for is durable; -1 when
	// none is being written.
	saveAt int64
	// queuedAt is when the job last joined the queue: on submission, and
	// again when a drain or a reclaim requeues it.
	queuedAt int64
	// milli is the share of one GPU it is placed as, in thousandths (0:
	// whole GPUs; gpushare.go), ask what it asks for in thousandths of a
	// GPU (its share, or its GPUs times 1000), whether placed as a share
	// or rounded up to a whole GPU (Options.WholeGPUs): the unit of its
	// work and waiting; part is its node's shared GPU it holds part of
	// (noPart: none).
	milli, ask, part int32
	// types are the GPU types it accepts (modelTable bits); 0: any.
	types uint64
}

// checkpointed is the work of the current run saved by its periodic
// checkpoints at now.
func (j *job) checkpointed(now int64) int64 {
	run := now - j.start
	if j.ckpt <= 0 {
		return 0
	}
	return run - run%j.ckpt
}

// askCheckpoint asks a running job to checkpoint and stop, and reports
// whether it stopped at once. A job already writing such a checkpoint
// (for another of its nodes) goes on writing it.
func (e *engine) askCheckpoint(id int32) bool {
	j := &e.jobs[id]
	switch {
	case j.unresponsive || j.saveAt >= 0:
		return false
	case e.ckptDur == 0:
		e.stop(id, stopSaved)
		return true
	}
	j.saveAt = e.now + e.ckptDur
	heap.Push(&e.events, event{t: j.saveAt, kind: evCheckpoint, id: id, gen: j.gen})
	return false
}

// askToLeave asks running job id to checkpoint and stop to make room
// (askCheckpoint), marking it preempted while its checkpoint is written,
// and reports whether it left at once.
func (e *engine) askToLeave(id int32) bool {
	if e.askCheckpoint(id) {
		return true
	}
	e.jobs[id].preempted = true
	return false
}

// stopCause is why a job's run ends early.
type stopCause uint8

const (
	// stopSaved: it checkpointed just now, as a drain asked.
	stopSaved stopCause = iota
	// stopScaleIn: the policy terminated its node under it.
	stopScaleIn
	// stopReclaim: the cloud reclaimed its (spot) node.
	stopReclaim
)

// stop ends a job's current run early. With stopSaved nothing is lost;
// otherwise the work since its last periodic checkpoint is, to the cause.
// It requeues.
func (e *engine) stop(id int32, why stopCause) {
	j := &e.jobs[id]
	run := e.now - j.start
	kept := run
	if why == stopSaved {
		e.st.saved++
	} else {
		kept = j.checkpointed(e.now)
		lost := j.eqSeconds(run - kept)
		if why == stopScaleIn {
			e.st.lostScaleIn += lost
		} else {
			e.st.lostReclaim += lost
		}
	}
	e.st.usedGPUs += j.eqSeconds(kept)
	e.chargeRun(j, kept)
	e.unpreempt(j)
	j.remaining -= kept
	e.release(id)
	j.start = -1
	j.gen++
	j.saveAt = -1
	e.enqueue(id)
}

// finish ends a job's run at its end of work.
func (e *engine) finish(id int32) {
	j := &e.jobs[id]
	e.st.usedGPUs += j.eqSeconds(e.now - j.start)
	e.chargeRun(j, e.now-j.start)
	e.unpreempt(j)
	j.remaining = 0
	e.release(id)
	j.done = true
	e.st.completed++
	j.saveAt = -1
	e.left--
}

// release frees a running job's GPUs.
func (e *engine) release(id int32) {
	j := &e.jobs[id]
	e.chargeRate(j, -1)
	e.holdShare(j, -1)
	if e.opt.stopped != nil {
		e.opt.stopped(e, id)
	}
	if j.isShare() {
		n := e.nodes[j.nodes[0]]
		n.jobs = slices.DeleteFunc(n.jobs, func(x int32) bool { return x == id })
		n.jobsVer++
		e.releaseShare(j, n)
		j.nodes = j.nodes[:0]
		return
	}
	per := j.gpus
	if len(j.nodes) > 1 {
		per = 0 // a wide job holds whole nodes
	}
	for _, ni := range j.nodes {
		n := e.nodes[ni]
		used := per
		if per == 0 {
			used = n.gpn
		}
		n.jobs = slices.DeleteFunc(n.jobs, func(x int32) bool { return x == id })
		n.jobsVer++
		e.setFree(n, n.free+used)
	}
	e.runningGPUs -= j.gpus
	j.nodes = j.nodes[:0]
}

// timeLimitFactor draws a job's time limit as a multiple of its true
// runtime: 1 + e^N(0,1), so at least 1 (a scheduler ends a job at its
// limit: none outruns it), 2 at the median, and a long tail of limits far
// above the need, as users' requested time limits are known to be.
func timeLimitFactor(r *rand.Rand) float64 { return 1 + math.Exp(r.NormFloat64()) }
