package planner

import (
	"testing"
	"time"

	"github.com/fleetcast/autoscaler/fleet"
	"github.com/fleetcast/autoscaler/forecast"
)

func migPlan(t *testing.T, pools []fleet.Pool, nodes []fleet.Node, scoped []fleet.ScopedDemand, fc forecast.Forecast) (map[string]int, Plan) {
	t.Helper()
	st := fleet.State{Nodes: nodes, Scoped: scoped}
	for _, d := range scoped {
		st.PendingGPUs += d.GPUs
	}
	if err := st.Validate(pools); err != nil {
		t.Fatal(err)
	}
	p := Make(Input{Settings: testConfig(pools...).Settings(), State: &st, Forecast: fc, Now: t0})
	got := map[string]int{}
	for _, a := range actions(p, Launch) {
		got[a.Pool] += a.Count
	}
	return got, p
}

// TestMIGMixedLayoutSharesGPUs: a layout of one 4g, one 2g and one 1g per
// GPU: 8 instances of each profile fit on one 8-GPU node, and one is
// bought (each line counts the instances the others' GPUs hold).
func TestMIGMixedLayoutSharesGPUs(t *testing.T) {
	m := pool("mig", fleet.OnDemand, 32, 9*time.Minute, 0, 10)
	m.GPUModel, m.MIG = "A100-80GB", []string{"4g.40gb", "2g.20gb", "1g.10gb"}
	got, p := migPlan(t, []fleet.Pool{m}, nil, []fleet.ScopedDemand{
		{MIG: "4g.40gb", Instances: 8, GPUs: 8}, {MIG: "2g.20gb", Instances: 8, GPUs: 8}, {MIG: "1g.10gb", Instances: 8, GPUs: 8}}, forecast.Forecast{})
	if got["mig"] != 1 {
		t.Errorf("8 of each instance of a [4g, 2g, 1g] layout: launches %v, want 1 node of 8 GPUs\n%s", got, describe(p))
	}
}

// TestWholeGPUDemandNotOnMIGPools: whole-GPU demand, scoped or
// fleet-wide, is not bought in a MIG pool, cheaper though it is: its GPUs
// are partitioned and run no whole-GPU job.
func TestWholeGPUDemandNotOnMIGPools(t *testing.T) {
	od := pool("od", fleet.OnDemand, 32, 9*time.Minute, 0, 10)
	m := pool("mig", fleet.OnDemand, 20, 9*time.Minute, 0, 10)
	od.GPUModel, m.GPUModel, m.MIG = "A100-80GB", "A100-80GB", []string{"3g.40gb", "3g.40gb"}
	got, p := migPlan(t, []fleet.Pool{od, m}, nil, []fleet.ScopedDemand{{GPUModel: "A100-80GB", GPUs: 8}}, flat(16))
	if got["mig"] != 0 {
		t.Errorf("whole-GPU demand: launches %v; none should be in the MIG pool\n%s", got, describe(p))
	}
}

// TestMIGLineTakesNoFleetWideDemand: a MIG line whose gpus understates its
// instances (1 GPU for 40 instances) takes the GPUs it needs, but serves
// only its gpus of the fleet-wide demand, which is bought in full.
func TestMIGLineTakesNoFleetWideDemand(t *testing.T) {
	od := pool("od", fleet.OnDemand, 32, 9*time.Minute, 0, 10)
	m := pool("mig", fleet.OnDemand, 40, 9*time.Minute, 0, 10)
	m.GPUModel, m.MIG = "A100-80GB", []string{"3g.40gb", "3g.40gb"}
	st := fleet.State{PendingGPUs: 1 + 16, Scoped: []fleet.ScopedDemand{{MIG: "3g.40gb", Instances: 40, GPUs: 1}}}
	if err := st.Validate([]fleet.Pool{od, m}); err != nil {
		t.Fatal(err)
	}
	p := Make(Input{Settings: testConfig(od, m).Settings(), State: &st, Forecast: forecast.Forecast{}, Now: t0})
	got := map[string]int{}
	for _, a := range actions(p, Launch) {
		got[a.Pool] += a.Count
	}
	if got["od"] != 2 || got["mig"] != 3 {
		t.Errorf("16 whole GPUs pending besides 40 3g.40gb instances: launches %v, want od 2, mig 3\n%s", got, describe(p))
	}
}

// TestMIGSetAsideBeyondItsGPUs: a MIG line's gpus as the docs say (the
// GPUs needed on the pools with the most of the profile a GPU: 14 1g.10gb
// / 7 = 2), served in a cheaper pool of 2 a GPU: it takes 7 GPUs there,
// and the 16 whole GPUs pending beside it are bought in full, none counted
// on the MIG pool's idle GPU.
func TestMIGSetAsideBeyondItsGPUs(t *testing.T) {
	od := pool("od", fleet.OnDemand, 1, 9*time.Minute, 0, 40)
	od.GPUsPerNode = 1
	p7 := pool("p7", fleet.OnDemand, 40, 9*time.Minute, 0, 10)
	p2 := pool("p2", fleet.OnDemand, 20, 9*time.Minute, 0, 10)
	p7.GPUModel, p2.GPUModel = "A100-80GB", "A100-80GB"
	p7.MIG = []string{"1g.10gb", "1g.10gb", "1g.10gb", "1g.10gb", "1g.10gb", "1g.10gb", "1g.10gb"}
	p2.MIG = []string{"3g.40gb", "2g.20gb", "1g.10gb", "1g.10gb"}
	st := fleet.State{PendingGPUs: 2 + 16, Scoped: []fleet.ScopedDemand{{MIG: "1g.10gb", Instances: 14, GPUs: 2}}}
	pools := []fleet.Pool{od, p7, p2}
	if err := st.Validate(pools); err != nil {
		t.Fatal(err)
	}
	p := Make(Input{Settings: testConfig(pools...).Settings(), State: &st, Forecast: forecast.Forecast{}, Now: t0})
	got := map[string]int{}
	for _, a := range actions(p, Launch) {
		got[a.Pool] += a.Count
	}
	if got["od"] != 16 {
		t.Errorf("16 whole GPUs pending besides 14 1g.10gb instances (gpus 2): launches %v, want 16 od nodes of 1 GPU\n%s", got, describe(p))
	}
}

// TestMIGIdleGPUsServeNoWholeDemand: an idle node of a MIG pool is not
// capacity for whole-GPU demand: a forecast of 16 GPUs buys two 8-GPU
// nodes of the whole pool, not one.
func TestMIGIdleGPUsServeNoWholeDemand(t *testing.T) {
	od := pool("od", fleet.OnDemand, 32, 9*time.Minute, 0, 10)
	m := pool("mig", fleet.OnDemand, 20, 9*time.Minute, 0, 10)
	m.GPUModel, m.MIG = "A100-80GB", []string{"3g.40gb", "3g.40gb"}
	got, p := migPlan(t, []fleet.Pool{od, m}, []fleet.Node{ready("mig-1", m.Name)}, nil, flat(16))
	if got["od"] != 2 || got["mig"] != 0 {
		t.Errorf("a forecast of 16 beside an idle MIG node: launches %v, want 2 od nodes\n%s", got, describe(p))
	}
}
