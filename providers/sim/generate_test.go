package sim_test

import (
	"context"
	"reflect"
	"testing"
	"time"

	"github.com/fleetcast/autoscaler/config"
	"github.com/fleetcast/autoscaler/fleet"
	"github.com/fleetcast/autoscaler/providers/sim"
	"github.com/fleetcast/autoscaler/providers/sim/simconfig"
)

// t0 is the generated fleet's now.
var t0 = time.Date(2026, 11, 30, 14, 0, 0, 0, time.UTC)

func localConfig(t *testing.T) *config.Config {
	t.Helper()
	cfg, diags := config.Load("../../examples/local.hcl", []config.ProviderBlock{simconfig.Block})
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	return cfg
}

// TestGenerate: the local example's generated fleet holds a drain, a
// launch, a silent agent and a backed-off pool, deterministically.
func TestGenerate(t *testing.T) {
	cfg := localConfig(t)
	cloud, st := sim.Generate(cfg.Settings(), cfg.Synthetic, t0)
	if err := st.Validate(cfg.Pools); err != nil {
		t.Fatalf("generated state is invalid: %v", err)
	}
	// 14 days of 10-minute history, ending at now.
	if len(st.History.Values) != 14*144 || !st.History.End().Equal(t0) {
		t.Fatalf("history: %d values ending %v", len(st.History.Values), st.History.End())
	}
	states := map[fleet.NodeState]int{}
	silent := 0
	for _, n := range st.Nodes {
		states[n.State]++
		if n.State != fleet.Pending && t0.Sub(n.LastReport) > cfg.AgentTimeout {
			silent++
		}
	}
	if states[fleet.Draining] != 1 || states[fleet.Pending] != 1 || silent != 1 {
		t.Fatalf("states %v, silent %d", states, silent)
	}
	// The spot pool is out of capacity, so it is backed off.
	if len(st.Pools) != 1 || st.Pools[0].Name != "aws-spot-a100" || !st.Pools[0].BackoffUntil.After(t0) {
		t.Fatalf("pool statuses = %+v", st.Pools)
	}
	// The cloud holds exactly the generated nodes.
	ids := map[string]bool{}
	for _, p := range cfg.Pools {
		g, err := cloud.Describe(context.Background(), p)
		if err != nil {
			t.Fatal(err)
		}
		for _, in := range g.Instances {
			ids[in.ID] = true
		}
	}
	if len(ids) != len(st.Nodes) {
		t.Fatalf("cloud has %d instances, state %d nodes", len(ids), len(st.Nodes))
	}
	// Deterministic for the seed.
	_, again := sim.Generate(cfg.Settings(), cfg.Synthetic, t0)
	if !reflect.DeepEqual(st, again) {
		t.Fatal("two fleets generated with the same seed differ")
	}
}
