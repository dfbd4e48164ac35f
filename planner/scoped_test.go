package planner

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/fleetcast/autoscaler/fleet"
	"github.com/fleetcast/autoscaler/forecast"
)

// TestScopedDemand: demand pending for one pool, or for one GPU model's
// pools, is served there, cheapest of them first, and the plan says so;
// free GPUs elsewhere do not serve it, and the fleet-wide launches do not
// buy for it again.
func TestScopedDemand(t *testing.T) {
	spot := pool("aws-spot-a100", fleet.Spot, 12, 5*time.Minute, 0, 40)
	od := pool("aws-ondemand-a100", fleet.OnDemand, 32, 9*time.Minute, 0, 40)
	h100 := pool("h100", fleet.OnDemand, 60, 9*time.Minute, 0, 4)
	h100dear := pool("h100-dear", fleet.OnDemand, 90, 9*time.Minute, 0, 4)
	slowRes := pool("res", fleet.Reserved, 20, time.Hour, 0, 2)
	spot.GPUModel, od.GPUModel, h100.GPUModel, h100dear.GPUModel, slowRes.GPUModel = "A100", "A100", "H100", "H100", "A100"
	// Partitions: train's pools are od (8 GPUs a node, with dev and dev2
	// beside), x and y (8 each, with dev, dev2) and wide (16).
	trainOD := od
	trainOD.Partitions = []string{"train"}
	x, y := pool("x", fleet.OnDemand, 20, 5*time.Minute, 0, 10), pool("y", fleet.OnDemand, 21, 5*time.Minute, 0, 10)
	x.Partitions, y.Partitions = []string{"dev", "train"}, []string{"dev2", "train"}
	wide := pool("wide", fleet.OnDemand, 60, 5*time.Minute, 0, 10)
	wide.GPUsPerNode, wide.Partitions = 16, []string{"train"}
	// MIG: 80 GB A100s of two 3g.40gb a GPU (16 a node), and dearer ones
	// of seven 1g.10gb (56 a node).
	mig3g, mig1g := pool("mig-3g", fleet.OnDemand, 32, 9*time.Minute, 0, 10), pool("mig-1g", fleet.OnDemand, 33, 9*time.Minute, 0, 10)
	mig3g.GPUModel, mig1g.GPUModel = "A100-80GB", "A100-80GB"
	mig3g.MIG = []string{"3g.40gb", "3g.40gb"}
	mig1g.MIG = []string{"1g.10gb", "1g.10gb", "1g.10gb", "1g.10gb", "1g.10gb", "1g.10gb", "1g.10gb"}
	// timedOut is a node draining past drain.timeout, with a 1-GPU job
	// that never checkpointed: its drain is cancelled.
	timedOut := func(id, pool string) fleet.Node {
		n := draining(id, 2*time.Hour, -1)
		n.Pool, n.DrainAcked, n.DrainConfirmed = pool, false, false
		return n
	}
	type launch struct {
		pool  string
		count int
		code  Reason
	}
	tests := []struct {
		name   string
		pools  []fleet.Pool
		nodes  []fleet.Node
		scoped []fleet.ScopedDemand
		fc     forecast.Forecast
		want   []launch
		drains []string // nodes drained
		unmet  int      // notes of scoped demand that cannot be bought
		extra  int      // GPUs pending for any pool, beside the scopes
		cancel []string // drains cancelled
	}{{
		// The case reported: a push for the on-demand pool was served in
		// the cheaper spot pool.
		name:   "a pool's demand goes to that pool",
		pools:  []fleet.Pool{spot, od},
		scoped: []fleet.ScopedDemand{{Pool: od.Name, GPUs: 160}},
		want:   []launch{{od.Name, 20, ReasonScopedDemand}},
	}, {
		name:   "a GPU model's demand goes to its cheapest pool",
		pools:  []fleet.Pool{spot, od, h100dear, h100},
		scoped: []fleet.ScopedDemand{{GPUModel: "h100", GPUs: 40}},
		want:   []launch{{h100.Name, 4, ReasonScopedDemand}, {h100dear.Name, 1, ReasonScopedDemand}},
	}, {
		name:   "free GPUs in the pool serve it first",
		pools:  []fleet.Pool{spot, od},
		nodes:  []fleet.Node{ready("od-1", od.Name), ready("od-2", od.Name, time.Minute)},
		scoped: []fleet.ScopedDemand{{Pool: od.Name, GPUs: 16}},
		// 8 free on od-1, 7 on od-2: one more node for the last GPU.
		want: []launch{{od.Name, 1, ReasonScopedDemand}},
	}, {
		name:   "MIG instances go to the pools whose layout has their profile",
		pools:  []fleet.Pool{od, mig1g, mig3g},
		scoped: []fleet.ScopedDemand{{MIG: "3g.40gb", Instances: 20, GPUs: 10}, {MIG: "1g.10gb", Instances: 4, GPUs: 1}, {MIG: "2g.20gb", Instances: 3, GPUs: 1}},
		// 20 of 16 a node: two; 4 of 56 a node: one; no layout has
		// 2g.20gb: nothing is bought for it, and the plan says so.
		want:  []launch{{mig3g.Name, 2, ReasonScopedDemand}, {mig1g.Name, 1, ReasonScopedDemand}},
		unmet: 1,
	}, {
		name:   "free GPUs of a MIG pool serve its instances first",
		pools:  []fleet.Pool{od, mig3g},
		nodes:  []fleet.Node{ready("mig-1", mig3g.Name), ready("od-1", od.Name)},
		scoped: []fleet.ScopedDemand{{MIG: "3g.40gb", Instances: 20, GPUs: 10}},
		fc:     flat(10),
		// mig-1's 8 free GPUs hold 16: one node for the other 4. The
		// whole-GPU node is spare.
		want:   []launch{{mig3g.Name, 1, ReasonScopedDemand}},
		drains: []string{"od-1"},
	}, {
		name:   "free GPUs elsewhere do not serve it",
		pools:  []fleet.Pool{spot, od},
		nodes:  []fleet.Node{ready("spot-1", spot.Name), ready("spot-2", spot.Name)},
		scoped: []fleet.ScopedDemand{{Pool: od.Name, GPUs: 8}},
		fc:     flat(8),
		want:   []launch{{od.Name, 1, ReasonScopedDemand}},
		// The fleet needs 8 GPUs ahead (the od launch holds them): one
		// spot node is spare.
		drains: []string{"spot-1"},
	}, {
		// Found by review: scale-in kept capacity the scope cannot use.
		name:   "capacity elsewhere is not kept for it",
		pools:  []fleet.Pool{spot, od},
		nodes:  []fleet.Node{ready("spot-1", spot.Name), ready("spot-2", spot.Name)},
		scoped: []fleet.ScopedDemand{{Pool: od.Name, GPUs: 16}},
		want:   []launch{{od.Name, 2, ReasonScopedDemand}},
		drains: []string{"spot-1"}, // the share allows one of two
	}, {
		name:   "the pool's free GPUs it counts on are not drained",
		pools:  []fleet.Pool{spot, od},
		nodes:  []fleet.Node{ready("od-1", od.Name), ready("spot-1", spot.Name), ready("spot-2", spot.Name)},
		scoped: []fleet.ScopedDemand{{Pool: od.Name, GPUs: 8}},
		fc:     flat(8),
		// od is dearer, so scale-in would take od-1 first; one spot node
		// goes instead (the share allows one of two).
		drains: []string{"spot-1"},
	}, {
		name:   "a pool scope and a model scope over it count its free GPUs once",
		pools:  []fleet.Pool{spot, od, h100},
		nodes:  []fleet.Node{ready("od-1", od.Name)},
		scoped: []fleet.ScopedDemand{{GPUModel: "A100", GPUs: 8}, {Pool: od.Name, GPUs: 8}},
		// od-1's 8 GPUs serve the pool's demand; the model's goes to spot.
		want: []launch{{spot.Name, 1, ReasonScopedDemand}},
	}, {
		name:   "a scope every pool serves is the fleet's",
		pools:  []fleet.Pool{spot, od},
		scoped: []fleet.ScopedDemand{{GPUModel: "a100", GPUs: 16}},
		want:   []launch{{spot.Name, 2, ReasonDemandNow}},
	}, {
		name:   "what its pools cannot hold is not bought elsewhere",
		pools:  []fleet.Pool{spot, h100},
		scoped: []fleet.ScopedDemand{{Pool: h100.Name, GPUs: 48}},
		want:   []launch{{h100.Name, 4, ReasonScopedDemand}},
		unmet:  1,
	}, {
		name:   "the free GPUs it counts on do not serve the rest",
		pools:  []fleet.Pool{spot, od},
		nodes:  []fleet.Node{ready("od-1", od.Name)},
		scoped: []fleet.ScopedDemand{{Pool: od.Name, GPUs: 8}},
		fc:     flat(16), // od-1 holds the scoped 8; 8 more anywhere
		want:   []launch{{spot.Name, 1, ReasonForecast}},
	}, {
		// Found by review: the launch's spare GPUs serve demand of any pool.
		name:   "a scoped launch's spare GPUs serve the rest",
		pools:  []fleet.Pool{spot, od},
		scoped: []fleet.ScopedDemand{{Pool: od.Name, GPUs: 4}},
		extra:  4,
		want:   []launch{{od.Name, 1, ReasonScopedDemand}},
	}, {
		// Found by review: a claim on a slower launch of this plan is not
		// taken off the capacity there is now.
		name:   "a claim on this plan's reservation launch",
		pools:  []fleet.Pool{spot, slowRes},
		scoped: []fleet.ScopedDemand{{Pool: slowRes.Name, GPUs: 16}},
		want:   []launch{{slowRes.Name, 2, ReasonReservedBaseline}},
	}, {
		// Found by review: a drain cancelled this cycle serves the scope.
		name:   "a cancelled drain's node serves it",
		pools:  []fleet.Pool{spot, od},
		nodes:  []fleet.Node{timedOut("od-1", od.Name)},
		scoped: []fleet.ScopedDemand{{Pool: od.Name, GPUs: 7}},
		cancel: []string{"od-1"},
	}, {
		// Found by review: a broad scope took the free GPUs a narrow one
		// had no other place for, which then bought a dearer node.
		name:   "a narrow scope takes the free GPUs only it can use",
		pools:  []fleet.Pool{spot, trainOD, h100},
		nodes:  []fleet.Node{ready("od-1", od.Name)},
		scoped: []fleet.ScopedDemand{{GPUModel: "A100", GPUs: 8}, {Partition: "train", GPUs: 8}},
		want:   []launch{{spot.Name, 1, ReasonScopedDemand}},
	}, {
		// Found by review: a job on two nodes was bought one, counting the
		// GPUs other scopes left on two nodes as if they were a node.
		name:   "a job on several nodes counts free GPUs only in whole empty nodes",
		pools:  []fleet.Pool{x, y, wide},
		nodes:  []fleet.Node{ready("x-1", x.Name), ready("y-1", y.Name)},
		scoped: []fleet.ScopedDemand{{Partition: "dev", GPUs: 4}, {Partition: "dev2", GPUs: 4}, {Partition: "train", Nodes: 2, GPUs: 16}},
		want:   []launch{{x.Name, 2, ReasonScopedDemand}},
	}, {
		name:   "a job on several nodes takes an empty node and launches the rest",
		pools:  []fleet.Pool{x, wide},
		nodes:  []fleet.Node{ready("x-1", x.Name), ready("x-2", x.Name, time.Minute)},
		scoped: []fleet.ScopedDemand{{Partition: "train", Nodes: 3, GPUs: 24}},
		// x-1 is empty; x-2's 7 free GPUs are not a node.
		want: []launch{{x.Name, 2, ReasonScopedDemand}},
	}, {
		name:   "whole nodes its pools cannot hold are not bought elsewhere",
		pools:  []fleet.Pool{spot, wide},
		scoped: []fleet.ScopedDemand{{Partition: "train", Nodes: 12, GPUs: 192}},
		want:   []launch{{wide.Name, 10, ReasonScopedDemand}},
		unmet:  1,
	}, {
		name:   "whole nodes of any pool are still whole nodes",
		pools:  []fleet.Pool{spot, od},
		nodes:  []fleet.Node{ready("spot-1", spot.Name, time.Minute), ready("spot-2", spot.Name, time.Minute)},
		scoped: []fleet.ScopedDemand{{Nodes: 2, GPUs: 16}},
		want:   []launch{{spot.Name, 2, ReasonScopedDemand}},
	}, {
		name:   "demand with no scope is served fleet-wide beside it",
		pools:  []fleet.Pool{spot, od},
		scoped: []fleet.ScopedDemand{{Pool: od.Name, GPUs: 8}},
		fc:     flat(24), // 8 scoped + 16 more
		want:   []launch{{od.Name, 1, ReasonScopedDemand}, {spot.Name, 2, ReasonForecast}},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			st := fleet.State{Nodes: tt.nodes, Scoped: tt.scoped, PendingGPUs: tt.extra}
			for _, d := range tt.scoped {
				st.PendingGPUs += d.GPUs
			}
			if err := st.Validate(tt.pools); err != nil {
				t.Fatal(err)
			}
			p := Make(Input{Settings: testConfig(tt.pools...).Settings(), State: &st, Forecast: tt.fc, Now: t0})
			var got []launch
			for _, a := range actions(p, Launch) {
				got = append(got, launch{a.Pool, a.Count, a.Code})
				if a.Code == ReasonScopedDemand && a.Reason == "" {
					t.Errorf("launch %+v has no reason", a)
				}
			}
			if !slices.Equal(got, tt.want) {
				t.Errorf("launches %v, want %v\n%s", got, tt.want, describe(p))
			}
			if drained := drainedNodes(p); !slices.Equal(drained, tt.drains) {
				t.Errorf("drains %v, want %v\n%s", drained, tt.drains, describe(p))
			}
			var cancelled []string
			for _, a := range actions(p, CancelDrain) {
				cancelled = append(cancelled, a.Node)
			}
			if !slices.Equal(cancelled, tt.cancel) {
				t.Errorf("cancelled %v, want %v\n%s", cancelled, tt.cancel, describe(p))
			}
			if n := len(notesCoded(p, ReasonUnmetDemand)); n != tt.unmet {
				t.Errorf("%d unmet-demand notes, want %d\n%s", n, tt.unmet, describe(p))
			}
		})
	}
}

// drainedNodes are the nodes a plan drains, sorted.
func drainedNodes(p Plan) []string {
	var out []string
	for _, a := range actions(p, Drain) {
		out = append(out, a.Node)
	}
	slices.Sort(out)
	return out
}

// describe lists a plan's actions and notes, for failures.
func describe(p Plan) string {
	s := ""
	for _, a := range p.Actions {
		s += fmt.Sprintf("  %s %s %s x%d (%s): %s\n", a.Kind, a.Pool, a.Node, a.Count, a.Code, a.Reason)
	}
	for _, n := range p.Notes {
		s += fmt.Sprintf("  note (%s): %s\n", n.Code, n.Text)
	}
	return s
}
