package planner

import (
	"fmt"
	"time"

	"github.com/fleetcast/autoscaler/fleet"
)

// ReapIdle is how long an orphan's agent must have reported it idle
// before it is drained.
const ReapIdle = 10 * time.Minute

// reap decides what happens to the fleet's orphans (fleet.Node.Orphan,
// which observe collected in t): an idle one, whose agent has reported it
// so for ReapIdle, is drained, and terminated once its agent confirms the
// drain, as any node is; one whose agent is silent, whose GPUs cannot be
// read, or that runs jobs is held. None starts while scale-in is halted,
// and drains share limits.max_scale_in_per_cycle with scale-in (what it
// left in t). Orphans count in no pool's size or cost: their pool's config
// is gone.
func (p *planner) reap(t *tally) {
	budget := &t.scaleInLeft
	for _, n := range t.orphans {
		p.plan.Orphans = append(p.plan.Orphans, n.ID)
		why := fmt.Sprintf("orphan: pool %s is no longer in the config", n.Pool)
		a := Action{Pool: n.Pool, Node: n.ID, Kind: Hold}
		silent := p.silentFor(n)
		switch n.State {
		case fleet.Terminating:
			continue
		case fleet.Pending:
			a.Code, a.Reason = ReasonOrphanBooting, why+"; booting: reaped once its agent reports it idle"
		case fleet.Draining:
			since := p.now.Sub(n.DrainStartedAt)
			switch blocker := unconfirmed(n, silent); {
			case blocker.none():
				a.Kind, a.Code, a.Reason = Terminate, ReasonReapDrained, why+"; reaped: drained, as its agent confirmed"
			case since > p.cfg.Drain.Timeout:
				a.Kind, a.Code, a.Reason = CancelDrain, ReasonDrainTimeout, why+"; "+drainTimeoutReason(since, blocker)
			default:
				a.Code, a.Reason = blocker.code, why+"; "+drainWaitReason(since, blocker, p.cfg.Drain.Timeout)
			}
		case fleet.Ready:
			idle := time.Duration(0)
			if !n.IdleSince.IsZero() {
				idle = p.now.Sub(n.IdleSince)
			}
			switch {
			case interrupted(n, p.now):
				a.Code, a.Reason = ReasonInterrupted, fmt.Sprintf("%s; spot interruption notice: the cloud takes it at %s", why, clock(n.InterruptAt))
			case silent > 0:
				s := silentReason(n, silent)
				a.Code, a.Reason = s.code, why+"; "+s.text+": never reaped while silent"
			case n.GPUFault != "":
				a.Code, a.Reason = ReasonGPUFault, fmt.Sprintf("%s; its agent cannot read its GPUs (%s): never reaped unseen", why, n.GPUFault)
			case len(n.Jobs) > 0:
				a.Code, a.Reason = ReasonOrphanBusy, fmt.Sprintf("%s; runs %d job(s): reaped once idle", why, len(n.Jobs))
			case idle < ReapIdle:
				a.Code, a.Reason = ReasonOrphanIdleTooShort, fmt.Sprintf("%s; idle for %s: reaped after %s idle", why, age(idle), age(ReapIdle))
			case p.plan.ScaleInHalt != "":
				a.Code, a.Reason = ReasonScaleInHalted, why+"; idle, but scale-in is halted: "+p.plan.ScaleInHalt
			case *budget == 0:
				a.Code, a.Reason = ReasonMaxScaleInPerCycle, fmt.Sprintf("%s; idle, but limits.max_scale_in_per_cycle (%d) is reached this cycle", why, p.cfg.Limits.MaxScaleInPerCycle)
			default:
				a.Kind, a.Code, a.Reason = Drain, ReasonReap, fmt.Sprintf("%s; reaping: idle %s", why, age(idle))
				*budget--
			}
		}
		p.add(a)
	}
}
