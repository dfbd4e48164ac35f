package controller

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/gpus"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/server"

	"github.com/fleetcast/autoscaler/agent"
	"github.com/fleetcast/autoscaler/agent/gpu"
	"github.com/fleetcast/autoscaler/agent/gpu/gpmtest"
	"github.com/fleetcast/autoscaler/planner"
)

// migMachine is eight 80 GB A100s in a 3g.40gb x2 layout; process pid
// runs in GPU 0's first GPU instance.
func migMachine(t *testing.T, pid int) nvml.Interface {
	t.Helper()
	srv, err := server.New(server.WithGPUs(gpus.Multiple(8, gpus.A100_SXM4_80GB)...))
	if err != nil {
		t.Fatal(err)
	}
	for i, d := range srv.Devices {
		dev := d.(*server.Device)
		if err := gpmtest.PartitionMIG(dev, nvml.GPU_INSTANCE_PROFILE_3_SLICE, 2); err != nil {
			t.Fatalf("GPU %d: %v", i, err)
		}
		dev.GetComputeRunningProcessesFunc = func() ([]nvml.ProcessInfo, nvml.Return) {
			if i == 0 {
				return []nvml.ProcessInfo{{Pid: uint32(pid), UsedGpuMemory: 30 << 30, GpuInstanceId: 0}}, nvml.SUCCESS
			}
			return nil, nvml.SUCCESS
		}
	}
	return srv
}

// TestMIGPlan: a node of the 80 GB A100 mock in a 3g.40gb x2 layout, its
// agent reading it through NVML: the report shows each GPU instance with
// its processes. With 20 3g.40gb instances pending and four 1g.10gb, the
// plan buys what the layout serves: two nodes of 16 instances for the 20
// (pending is what the scheduler could not place, so the busy node's free
// GPUs are not counted on, as for whole GPUs); the 1g.10gb instances,
// which no pool's layout has, buy nothing, and the plan says so.
func TestMIGPlan(t *testing.T) {
	p := simPool("a100-mig", 4)
	p.GPUModel, p.MIG = "A100-80GB", []string{"3g.40gb", "3g.40gb"}
	l := newLoop(t, false, p)
	ctx := context.Background()
	if err := l.c.act.Launch(ctx, p.Name, 1); err != nil {
		t.Fatal(err)
	}
	g, err := l.cloud.Describe(ctx, p)
	if err != nil || len(g.Instances) != 1 {
		t.Fatalf("instances %v, %v", g.Instances, err)
	}
	node := g.Instances[0].ID
	pid := os.Getpid() // the job's process, as the agent checks it runs
	r, err := gpu.Open(migMachine(t, pid))
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	r.Clock(func() time.Time { return l.now })
	a, err := agent.New(agent.Config{Node: node, GPUs: r, Now: func() time.Time { return l.now }})
	if err != nil {
		t.Fatal(err)
	}
	l.now = l.now.Add(10 * time.Minute) // the node is up
	if err := a.RegisterJob(agent.JobRequest{ID: "train", GPUs: []int{0}, PIDs: []int{pid}}); err != nil {
		t.Fatal(err)
	}
	rep := a.Report()
	if err := rep.Validate(l.now, time.Minute, 8); err != nil {
		t.Fatalf("the agent's report: %v", err)
	}
	g0 := rep.GPUs[0]
	if len(g0.MIGDevices) != 2 || g0.MIGDevices[0].Profile != "3g.40gb" || len(g0.MIGDevices[0].Processes) != 1 ||
		g0.MIGDevices[0].Processes[0].PID != pid || len(g0.MIGDevices[1].Processes) != 0 {
		t.Errorf("GPU 0's instances %+v; want two 3g.40gb, the first running %d", g0.MIGDevices, pid)
	}
	l.send(t, &rep)
	push := DemandPush{Source: "slurm", Pending: []PendingDemand{{MIG: "3g.40gb", Instances: 20, GPUs: 10}, {MIG: "1g.10gb", Instances: 4, GPUs: 1}}}
	if err := push.Validate(l.set.Pools, l.now); err != nil {
		t.Fatal(err)
	}
	l.pending.Set(l.now, push)
	plan, err := l.c.Cycle(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var launched int
	for _, act := range plan.Actions {
		if act.Kind == planner.Launch && act.Pool == p.Name {
			launched += act.Count
		}
	}
	unserved := false
	for _, n := range plan.Notes {
		unserved = unserved || (n.Code == planner.ReasonUnmetDemand && strings.Contains(n.Text, "4 1g.10gb instances pending: no pool's MIG layout has the profile"))
	}
	if launched != 2 || !unserved {
		t.Errorf("launched %d nodes, 1g.10gb noted unserved %v; want 2 and true\n%+v", launched, unserved, plan)
	}
}
