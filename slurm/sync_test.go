package slurm

import (
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/fleetcast/autoscaler/fleet"
)

// TestSync: what a sync changes of each node, by its state in Slurm and
// its instance's.
func TestSync(t *testing.T) {
	pools := []fleet.Pool{{Name: "dgx", SlurmNodes: []string{"n1"}}}
	node := func(state string, flags ...string) Node {
		return Node{Name: "n1", State: state, Flags: append([]string{"CLOUD"}, flags...)}
	}
	drained := func(n Node, reason string) Node {
		n.Flags, n.Reason = append(n.Flags, "DRAIN"), reason
		return n
	}
	inst := func(st fleet.NodeState) []fleet.Node { return []fleet.Node{{ID: "n1", Pool: "dgx", State: st}} }
	ch := func(op Op, reason string) SyncResult {
		return SyncResult{Changes: []Change{{Op: op, Node: "n1", Pool: "dgx", Reason: reason}}}
	}
	none := SyncResult{}
	tests := []struct {
		name      string
		nodes     []fleet.Node
		launching []string
		sn        []Node
		want      SyncResult
	}{
		{"launched, powered down: powered up", inst(fleet.Pending), nil, []Node{node("IDLE", "POWERED_DOWN")}, ch(OpPowerUp, "")},
		{"a launch not listed yet counts", nil, []string{"n1"}, []Node{node("IDLE", "POWERED_DOWN")}, ch(OpPowerUp, "")},
		{"ready, powering up already", inst(fleet.Ready), nil, []Node{node("IDLE", "POWERING_UP")}, none},
		{"ready, powered down: left alone", inst(fleet.Ready), nil, []Node{node("IDLE", "POWERED_DOWN")},
			SyncResult{Untouched: []Untouched{{"dgx", "n1", "powered down in Slurm while its instance runs: Slurm would ignore its slurmd, booted before a power-up now; power it up and restart its slurmd, or let the controller scale it in"}}}},
		{"ready, up", inst(fleet.Ready), nil, []Node{node("MIXED")}, none},
		{"ready, powering down: left to finish", inst(fleet.Ready), nil, []Node{node("IDLE", "POWERING_DOWN")}, none},
		{"ready, power down asked: left to finish", inst(fleet.Ready), nil, []Node{node("IDLE", "POWER_DOWN")}, none},
		{"ready, our drain: resumed", inst(fleet.Ready), nil, []Node{drained(node("MIXED"), "fleetcast: scale-in")}, ch(OpResume, "")},
		{"draining: drained", inst(fleet.Draining), nil, []Node{node("ALLOCATED")}, ch(OpDrain, DrainReason)},
		{"draining, drained already", inst(fleet.Draining), nil, []Node{drained(node("ALLOCATED"), "fleetcast: scale-in")}, none},
		{"gone, idle: powered down", nil, nil, []Node{node("IDLE")}, ch(OpPowerDown, "")},
		{"terminating, idle, our drain: powered down", inst(fleet.Terminating), nil, []Node{drained(node("IDLE"), "fleetcast: scale-in")}, ch(OpPowerDown, "")},
		{"gone, running jobs: drained, then powered down as they end", nil, nil, []Node{node("MIXED")},
			SyncResult{Changes: []Change{{Op: OpDrain, Node: "n1", Pool: "dgx", Reason: GoneReason}, {Op: OpPowerDownASAP, Node: "n1", Pool: "dgx"}}}},
		{"gone, completing", nil, nil, []Node{node("IDLE", "COMPLETING")},
			SyncResult{Changes: []Change{{Op: OpDrain, Node: "n1", Pool: "dgx", Reason: GoneReason}, {Op: OpPowerDownASAP, Node: "n1", Pool: "dgx"}}}},
		{"gone, jobs, our drain", nil, nil, []Node{drained(node("ALLOCATED"), "fleetcast: scale-in")}, ch(OpPowerDownASAP, "")},
		{"gone, powered down", nil, nil, []Node{node("IDLE", "POWERED_DOWN")}, none},
		{"no instance, Slurm powers it up for a job: requested", nil, nil, []Node{node("MIXED", "NOT_RESPONDING", "POWERING_UP")},
			SyncResult{Requested: []Request{{Pools: []string{"dgx"}, Node: "n1"}}}},
		{"no instance, powering up with no job: powered down at once", nil, nil, []Node{node("IDLE", "NOT_RESPONDING", "POWERING_UP")}, ch(OpPowerDownForce, "")},
		{"no instance, about to power up with no job: powered down at once", nil, nil, []Node{node("IDLE", "POWER_UP", "POWERED_DOWN")}, ch(OpPowerDownForce, "")},
		{"maintenance", nil, nil, []Node{node("IDLE", "MAINTENANCE")},
			SyncResult{Untouched: []Untouched{{"dgx", "n1", "maintenance in Slurm (no reason given): an administrator's"}}}},
		{"a reboot asked for", inst(fleet.Draining), nil, []Node{drained(node("IDLE", "REBOOT_REQUESTED"), "fleetcast: scale-in")},
			SyncResult{Untouched: []Untouched{{"dgx", "n1", "reboot_requested in Slurm (reason: fleetcast: scale-in): an administrator's"}}}},
		{"a state not known", nil, nil, []Node{node("FUTURE")},
			SyncResult{Untouched: []Untouched{{"dgx", "n1", "in state FUTURE in Slurm, which the controller does not change"}}}},
		{"no state", nil, nil, []Node{node("")},
			SyncResult{Untouched: []Untouched{{"dgx", "n1", "in state (none given) in Slurm, which the controller does not change"}}}},
		{"an administrator's drain", inst(fleet.Ready), nil, []Node{drained(node("IDLE", "POWERED_DOWN"), "bad HBM")},
			SyncResult{Untouched: []Untouched{{"dgx", "n1", "drained in Slurm by someone else (reason: bad HBM)"}}}},
		{"Slurm's own drain for POWER_DOWN_ASAP", nil, nil, []Node{drained(node("IDLE"), "POWER_DOWN_ASAP")},
			SyncResult{Untouched: []Untouched{{"dgx", "n1", "drained in Slurm by someone else (reason: POWER_DOWN_ASAP)"}}}},
		{"down", nil, nil, []Node{{Name: "n1", State: "DOWN", Flags: []string{"CLOUD"}, Reason: "ResumeTimeout reached"}},
			SyncResult{Untouched: []Untouched{{"dgx", "n1", "down in Slurm (reason: ResumeTimeout reached): an administrator's to resume"}}}},
		{"failed", inst(fleet.Draining), nil, []Node{node("IDLE", "FAIL")},
			SyncResult{Untouched: []Untouched{{"dgx", "n1", "failed in Slurm (no reason given): an administrator's to resume"}}}},
		{"not listed", inst(fleet.Ready), nil, nil,
			SyncResult{Untouched: []Untouched{{"dgx", "n1", "not listed by sinfo: declare it State=CLOUD in slurm.conf and set PrivateData=cloud, so that a powered-down node is listed"}}}},
		{"an instance of another pool by the name", []fleet.Node{{ID: "n1", Pool: "other", State: fleet.Ready}}, nil, []Node{node("IDLE")}, ch(OpPowerDown, "")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := Sync(SyncInput{Pools: pools, Nodes: tt.nodes, Launching: tt.launching, Slurm: tt.sn})
			for i := range got.Changes {
				got.Changes[i].Why = ""
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("got %+v\nwant %+v", got, tt.want)
			}
		})
	}
	// A node the controller began to drain since the fleet was observed
	// (Ready there) is drained, and a drain of its is not ended.
	for _, tt := range []struct {
		name string
		sn   Node
		want SyncResult
	}{
		{"drained since: kept", drained(node("MIXED"), "fleetcast: scale-in"), none},
		{"not drained yet: drained", node("MIXED"), ch(OpDrain, DrainReason)},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got := Sync(SyncInput{Pools: pools, Nodes: inst(fleet.Ready), Draining: []string{"n1"}, Slurm: []Node{tt.sn}})
			for i := range got.Changes {
				got.Changes[i].Why = ""
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("got %+v\nwant %+v", got, tt.want)
			}
		})
	}
}

// TestSyncShared: a name pools share is one node, whichever pool's
// instance has it; its request is any of those pools'; it is left alone
// while any of them is not observed, or two instances have it.
func TestSyncShared(t *testing.T) {
	pools := []fleet.Pool{{Name: "spot", SlurmNodes: []string{"n1", "n2"}}, {Name: "od", SlurmNodes: []string{"n1"}}}
	down := Node{Name: "n2", State: "IDLE", Flags: []string{"POWERED_DOWN"}}
	tests := []struct {
		name   string
		nodes  []fleet.Node
		sn     Node
		unsure []string
		want   SyncResult
	}{
		{"the second pool's launch: powered up", []fleet.Node{{ID: "n1", Pool: "od", State: fleet.Pending}}, Node{Name: "n1", State: "IDLE", Flags: []string{"POWERED_DOWN"}}, nil,
			SyncResult{Changes: []Change{{Op: OpPowerUp, Node: "n1", Pool: "od"}}}},
		{"the second pool's instance drains", []fleet.Node{{ID: "n1", Pool: "od", State: fleet.Draining}}, Node{Name: "n1", State: "MIXED"}, nil,
			SyncResult{Changes: []Change{{Op: OpDrain, Node: "n1", Pool: "od", Reason: DrainReason}}}},
		{"requested: either pool", nil, Node{Name: "n1", State: "MIXED", Flags: []string{"POWERING_UP"}}, nil,
			SyncResult{Requested: []Request{{Pools: []string{"spot", "od"}, Node: "n1"}}}},
		{"gone from both", nil, Node{Name: "n1", State: "IDLE"}, nil,
			SyncResult{Changes: []Change{{Op: OpPowerDown, Node: "n1", Pool: "spot"}}}},
		{"one of its pools not observed", nil, Node{Name: "n1", State: "IDLE"}, []string{"od"}, SyncResult{}},
		{"an instance in each", []fleet.Node{{ID: "n1", Pool: "spot", State: fleet.Ready}, {ID: "n1", Pool: "od", State: fleet.Ready}}, Node{Name: "n1", State: "IDLE"}, nil,
			SyncResult{Untouched: []Untouched{{"spot", "n1", "an instance of this name in pools spot and od: one node cannot be two instances"}}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := Sync(SyncInput{Pools: pools, Nodes: tt.nodes, Unsure: tt.unsure, Slurm: []Node{tt.sn, down}})
			for i := range got.Changes {
				got.Changes[i].Why = ""
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("got %+v\nwant %+v", got, tt.want)
			}
		})
	}
}

// TestSyncCheckpoint: the running batch jobs Slurm has on a draining
// instance's node that its agent does not report are to checkpoint, each
// once, in job order; none on a node that does not drain.
func TestSyncCheckpoint(t *testing.T) {
	pools := []fleet.Pool{{Name: "dgx", SlurmNodes: []string{"n1", "n2"}}}
	jobs := []Job{
		{ID: "30", State: "RUNNING", NodeList: "n[1-2]"},             // across both
		{ID: "4", State: "RUNNING", NodeList: "n1"},                  // on n1 alone
		{ID: "5", State: "RUNNING", NodeList: "n1"},                  // its agent knows it
		{ID: "6", State: "PENDING"},                                  // not placed
		{ID: "7", State: "COMPLETING", NodeList: "n1"},               // ending
		{ID: "8", State: "RUNNING", NodeList: "n2"},                  // n2 does not drain
		{ID: "9", State: "RUNNING", NodeList: "gpu-[1-2]"},           // elsewhere
		{ID: "10", State: "RUNNING", NodeList: "n1", NotBatch: true}, // salloc's
		{ID: "31", State: "RUNNING", NodeList: "n[1-2]"},             // n2's agent knows it
	}
	nodes := []fleet.Node{
		{ID: "n1", Pool: "dgx", State: fleet.Draining, Jobs: []fleet.Job{{ID: "5"}}},
		{ID: "n2", Pool: "dgx", State: fleet.Ready, Jobs: []fleet.Job{{ID: "31"}}},
	}
	sn := []Node{{Name: "n1", State: "ALLOCATED", Flags: []string{"DRAIN"}, Reason: "fleetcast: scale-in"}, {Name: "n2", State: "ALLOCATED"}}
	got := Sync(SyncInput{Pools: pools, Nodes: nodes, Slurm: sn, Jobs: jobs})
	if want := []Checkpoint{{"30", "n1", "dgx"}, {"4", "n1", "dgx"}}; !reflect.DeepEqual(got.Checkpoint, want) {
		t.Errorf("checkpoint %+v, want %+v", got.Checkpoint, want)
	}
	// Begun since the fleet was observed: n2's jobs too.
	got = Sync(SyncInput{Pools: pools, Nodes: nodes, Draining: []string{"n2"}, Slurm: sn, Jobs: jobs})
	if want := []Checkpoint{{"30", "n1", "dgx"}, {"4", "n1", "dgx"}, {"30", "n2", "dgx"}, {"8", "n2", "dgx"}}; !reflect.DeepEqual(got.Checkpoint, want) {
		t.Errorf("with n2 draining: checkpoint %+v, want %+v", got.Checkpoint, want)
	}
}

// TestSyncOrder: drains come first, then resumes, then power-downs, then
// power-ups, each in the pools' and their names' order; nodes of no
// pool are not touched.
func TestSyncOrder(t *testing.T) {
	pools := []fleet.Pool{{Name: "a", SlurmNodes: []string{"a2", "a1"}}, {Name: "b", SlurmNodes: []string{"b1"}}}
	sn := []Node{
		{Name: "a1", State: "IDLE", Flags: []string{"POWERED_DOWN"}},
		{Name: "a2", State: "MIXED"},
		{Name: "b1", State: "IDLE"},
		{Name: "static", State: "IDLE"},
	}
	got := Sync(SyncInput{Pools: pools, Nodes: []fleet.Node{{ID: "a1", Pool: "a", State: fleet.Pending}}, Slurm: sn})
	var ops []string
	for _, c := range got.Changes {
		ops = append(ops, string(c.Op)+" "+c.Node)
	}
	if want := []string{"drain a2", "power_down_asap a2", "power_down b1", "power_up a1"}; !slices.Equal(ops, want) {
		t.Errorf("changes %q, want %q", ops, want)
	}
	// A pool not observed: none of its nodes is changed.
	got = Sync(SyncInput{Pools: pools, Unsure: []string{"a"}, Slurm: sn})
	if len(got.Changes) != 1 || got.Changes[0].Node != "b1" {
		t.Errorf("with pool a not observed: %+v; want b1 powered down alone", got.Changes)
	}
}

// TestSyncProperties: over generated pools, instances and Slurm states,
// with an oracle computed from the inputs: no node an administrator holds
// (down, failed, drained for a reason not the controller's) or that sinfo
// does not list is changed; no node is powered down at once while Slurm
// says a job runs on it; nothing is powered up but a live instance's or
// launch's node that Slurm has powered down; a drain always has the
// controller's reason; only nodes of pools are named; each node has at
// most one change of each op.
func TestSyncProperties(t *testing.T) {
	states := []string{"IDLE", "MIXED", "ALLOCATED", "DOWN", "FAIL", "UNKNOWN", "FUTURE", ""}
	flagSets := [][]string{nil, {"POWERED_DOWN"}, {"POWERING_UP"}, {"POWER_UP", "POWERED_DOWN"}, {"POWERING_DOWN"}, {"POWER_DOWN"},
		{"COMPLETING"}, {"NOT_RESPONDING"}, {"FAIL"}, {"MAINTENANCE"}, {"REBOOT_REQUESTED"}, {"INVALID_REG"}, {"RESERVED"}}
	reasons := []string{"", "fleetcast: scale-in", "fleetcast: no instance", "bad HBM", "POWER_DOWN_ASAP", "Fleetcast: x"}
	nodeStates := []fleet.NodeState{fleet.Pending, fleet.Ready, fleet.Draining, fleet.Terminating}
	addrs := []string{"", "10.0.0.1", "10.0.0.2"}
	for seed := range uint64(300) {
		rng := rand.New(rand.NewPCG(seed, 49))
		var pools []fleet.Pool
		var sn []Node
		var nodes []fleet.Node
		var launching, unsure []string
		listed := map[string]bool{}
		for p := range 1 + rng.IntN(3) {
			pool := fleet.Pool{Name: fmt.Sprintf("p%d", p)}
			for k := range rng.IntN(6) {
				name := fmt.Sprintf("p%d-%d", p, k)
				if p > 0 && rng.IntN(3) == 0 {
					name = fmt.Sprintf("p0-%d", k) // shared with p0, where it may be
				}
				if slices.Contains(pool.SlurmNodes, name) {
					continue
				}
				pool.SlurmNodes = append(pool.SlurmNodes, name)
				if !listed[name] && rng.IntN(10) > 0 {
					listed[name] = true
					n := Node{Name: name, State: states[rng.IntN(len(states))], Flags: slices.Clone(flagSets[rng.IntN(len(flagSets))]), Address: addrs[rng.IntN(len(addrs))]}
					if rng.IntN(2) == 0 {
						n.Flags, n.Reason = append(n.Flags, "DRAIN"), reasons[rng.IntN(len(reasons))]
					}
					sn = append(sn, n)
				}
				switch rng.IntN(4) {
				case 0:
					nodes = append(nodes, fleet.Node{ID: name, Pool: pool.Name, State: nodeStates[rng.IntN(len(nodeStates))], Address: addrs[rng.IntN(len(addrs))]})
				case 1:
					launching = append(launching, name)
				}
			}
			pools = append(pools, pool)
			if rng.IntN(5) == 0 {
				unsure = append(unsure, pool.Name)
			}
		}
		sn = append(sn, Node{Name: "static-1", State: "IDLE"})
		got := Sync(SyncInput{Pools: pools, Nodes: nodes, Launching: launching, Unsure: unsure, Slurm: sn})

		// The oracle.
		byName := map[string]Node{}
		for _, n := range sn {
			byName[n.Name] = n
		}
		inPool := map[string]bool{} // of pools all observed
		for _, p := range pools {
			for _, n := range p.SlurmNodes {
				seen, was := inPool[n]
				inPool[n] = (seen || !was) && !slices.Contains(unsure, p.Name)
			}
		}
		liveOrLaunching := map[string]bool{}
		instances := map[string]int{}
		addrOf := map[string]string{}
		for _, n := range nodes {
			if n.State != fleet.Terminating {
				liveOrLaunching[n.ID] = true
				instances[n.ID]++
				addrOf[n.ID] = n.Address
			}
		}
		for _, n := range launching {
			liveOrLaunching[n] = true
		}
		seen := map[string]bool{}
		for _, c := range got.Changes {
			n, listed := byName[c.Node]
			held := !slices.Contains([]string{"IDLE", "MIXED", "ALLOCATED"}, n.State) ||
				slices.ContainsFunc([]string{"FAIL", "MAINTENANCE", "REBOOT_REQUESTED", "INVALID_REG"}, func(f string) bool { return slices.Contains(n.Flags, f) }) ||
				slices.Contains(n.Flags, "DRAIN") && !strings.HasPrefix(n.Reason, "fleetcast: ")
			jobs := n.State == "MIXED" || n.State == "ALLOCATED" || slices.Contains(n.Flags, "COMPLETING")
			k := string(c.Op) + " " + c.Node
			switch {
			case !inPool[c.Node] || !listed:
				t.Fatalf("seed %d: %s: a node of no pool, or not listed", seed, k)
			case held:
				t.Fatalf("seed %d: %s: an administrator's node (%+v)", seed, k, n)
			case (c.Op == OpPowerDown || c.Op == OpPowerDownForce) && jobs:
				t.Fatalf("seed %d: %s: powered down at once with jobs on it (%+v)", seed, k, n)
			case (c.Op == OpPowerDown || c.Op == OpPowerDownForce || c.Op == OpPowerDownASAP || c.Reason == GoneReason) && liveOrLaunching[c.Node]:
				t.Fatalf("seed %d: %s: powered down, or drained as gone, with a live instance or a launch", seed, k)
			case c.Op == OpPowerUp && (!liveOrLaunching[c.Node] || !slices.Contains(n.Flags, "POWERED_DOWN")):
				t.Fatalf("seed %d: %s: powered up without an instance, or not powered down (%+v)", seed, k, n)
			case c.Op == OpDrain && c.Reason == "":
				t.Fatalf("seed %d: %s: a drain without a reason", seed, k)
			case c.Op == OpSetAddress && (c.Address == "" || c.Address != addrOf[c.Node] || c.Address == n.Address):
				t.Fatalf("seed %d: %s to %q: not its live instance's address (%q), or Slurm's already (%q)", seed, k, c.Address, addrOf[c.Node], n.Address)
			case instances[c.Node] > 1:
				t.Fatalf("seed %d: %s: a node two instances have", seed, k)
			case seen[k]:
				t.Fatalf("seed %d: %s twice", seed, k)
			}
			seen[k] = true
		}
		for _, r := range got.Requested {
			n := byName[r.Node]
			if liveOrLaunching[r.Node] || !inPool[r.Node] || n.State != "MIXED" && n.State != "ALLOCATED" && !slices.Contains(n.Flags, "COMPLETING") {
				t.Fatalf("seed %d: %s requested, but it has an instance or a launch, is of a pool not observed, or no job waits on it (%+v)", seed, r.Node, n)
			}
		}
	}
}

// TestSyncAddress: a live instance's address, where its cloud lists one,
// is set as its node's in Slurm, after a power-up; not where Slurm has
// it already, where the instance lists none, nor on a node left alone.
func TestSyncAddress(t *testing.T) {
	pools := []fleet.Pool{{Name: "dgx", SlurmNodes: []string{"n1"}}}
	inst := func(st fleet.NodeState, addr string) []fleet.Node {
		return []fleet.Node{{ID: "n1", Pool: "dgx", State: st, Address: addr}}
	}
	node := func(addr string, flags ...string) []Node {
		return []Node{{Name: "n1", State: "IDLE", Address: addr, Flags: append([]string{"CLOUD"}, flags...)}}
	}
	set := Change{Op: OpSetAddress, Node: "n1", Pool: "dgx", Address: "10.0.0.7"}
	for _, tt := range []struct {
		name  string
		nodes []fleet.Node
		sn    []Node
		want  []Change
	}{
		{"booting, powered down: powered up, then its address", inst(fleet.Pending, "10.0.0.7"), node("n1", "POWERED_DOWN"), []Change{{Op: OpPowerUp, Node: "n1", Pool: "dgx"}, set}},
		{"ready, another address", inst(fleet.Ready, "10.0.0.7"), node("10.0.0.9"), []Change{set}},
		{"ready, its address already", inst(fleet.Ready, "10.0.0.7"), node("10.0.0.7"), nil},
		{"no address listed", inst(fleet.Ready, ""), node("10.0.0.9"), nil},
		{"ready, powered down: left alone", inst(fleet.Ready, "10.0.0.7"), node("n1", "POWERED_DOWN"), nil},
		{"an administrator's drain: left alone", inst(fleet.Ready, "10.0.0.7"), []Node{{Name: "n1", State: "IDLE", Address: "n1", Flags: []string{"DRAIN"}, Reason: "bad HBM"}}, nil},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got := Sync(SyncInput{Pools: pools, Nodes: tt.nodes, Slurm: tt.sn})
			for i := range got.Changes {
				got.Changes[i].Why = ""
			}
			if !reflect.DeepEqual(got.Changes, tt.want) {
				t.Errorf("changes %+v, want %+v", got.Changes, tt.want)
			}
		})
	}
}
