package report

import (
	"strings"
	"testing"
	"time"

	"github.com/fleetcast/autoscaler/config"
	"github.com/fleetcast/autoscaler/fleet"
	"github.com/fleetcast/autoscaler/planner"
)

// TestUnknownProcessBlocksIdle: a node whose only GPU work is a process no
// job claims is not idle to the planner: it is held, never drained.
func TestUnknownProcessBlocksIdle(t *testing.T) {
	r := good("i-1")
	r.Jobs = nil
	r.Unknown = []Process{{PID: 4242, GPU: 0}}
	jobs := r.FleetJobs()
	if len(jobs) != 1 || jobs[0].ID != "unknown-process-4242" || !jobs[0].LastCheckpoint.IsZero() {
		t.Fatalf("jobs %+v", jobs)
	}
	cfg := config.Defaults()
	cfg.Pools = []fleet.Pool{
		{Name: "od", Provider: "sim", InstanceType: "p5", GPUsPerNode: 8, Capacity: fleet.OnDemand, PricePerHour: 98, LeadTime: 10 * time.Minute, ProvisionTimeout: 30 * time.Minute, Max: 10},
		{Name: "res", Provider: "sim", InstanceType: "p5", GPUsPerNode: 8, Capacity: fleet.Reserved, PricePerHour: 60, LeadTime: 10 * time.Minute, ProvisionTimeout: 30 * time.Minute, Min: 2, Max: 2},
	}
	node := func(id, pool string, jobs []fleet.Job) fleet.Node {
		return fleet.Node{ID: id, Pool: pool, State: fleet.Ready, LaunchedAt: now.Add(-time.Hour), LastReport: now, Jobs: jobs}
	}
	st := fleet.State{Nodes: []fleet.Node{node("i-1", "od", jobs), node("r-1", "res", nil), node("r-2", "res", nil)}}
	p := planner.Make(planner.Input{Settings: cfg.Settings(), State: &st, Now: now})
	for _, a := range p.Actions {
		if a.Node == "i-1" && a.Kind == planner.Drain {
			t.Fatalf("drained a node with an unknown GPU process: %+v", a)
		}
		if a.Node == "i-1" && a.Kind == planner.Hold && !strings.Contains(a.Reason, "unknown-process-4242 has never checkpointed") {
			t.Fatalf("hold reason %q", a.Reason)
		}
	}
	held := false
	for _, a := range p.Actions {
		held = held || (a.Node == "i-1" && a.Kind == planner.Hold)
	}
	if !held {
		t.Fatalf("plan %+v: want i-1 held", p.Actions)
	}
}
