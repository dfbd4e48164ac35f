package simulate

import (
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/fleetcast/autoscaler/fleet"
	"github.com/fleetcast/autoscaler/trace"
)

// teamPool is a simulated pool of gpn-GPU nodes with a 10-minute lead.
func teamPool(name string, c fleet.CapacityType, gpn int, price float64, lo, hi int) fleet.Pool {
	return fleet.Pool{Name: name, Provider: "sim", InstanceType: "gpu", GPUsPerNode: gpn, Capacity: c,
		PricePerHour: price, LeadTime: 10 * time.Minute, ProvisionTimeout: 30 * time.Minute, Min: lo, Max: hi}
}

// teamJobs are n generated jobs, sorted by submission: the i-th submitted
// at i gaps and a random part of one, of 1 to 16 GPUs, running 10 minutes
// to longest, each of a team drawn from teams (a team named twice drawn
// twice as often); more, if set, adds to each.
func teamJobs(rng *rand.Rand, n int, gap, longest time.Duration, teams []string, more func(*trace.Job)) []trace.Job {
	jobs := make([]trace.Job, 0, n)
	for i := range n {
		j := trace.Job{Submit: time.Duration(i)*gap + time.Duration(rng.IntN(int(gap/time.Second)))*time.Second,
			GPUs: []int{1, 2, 4, 8, 16}[rng.IntN(5)], Duration: time.Duration(rng.IntN(int((longest-10*time.Minute)/time.Minute)))*time.Minute + 10*time.Minute,
			Team: teams[rng.IntN(len(teams))]}
		if more != nil {
			more(&j)
		}
		jobs = append(jobs, j)
	}
	slices.SortStableFunc(jobs, func(a, b trace.Job) int { return int(a.Submit - b.Submit) })
	return jobs
}

// sharedFleet is a reservation of nodes 8-GPU nodes and an on-demand
// pool, with team a's share of the reservation half and b's a quarter.
func sharedFleet(nodes int) *fleet.Settings {
	set := fleet.DefaultSettings()
	set.Pools = []fleet.Pool{teamPool("res", fleet.Reserved, 8, 20, nodes, nodes), teamPool("od", fleet.OnDemand, 8, 55, 0, 30)}
	set.Teams = []fleet.Team{{Name: "a", ReservedShare: 0.5}, {Name: "b", ReservedShare: 0.25}}
	return &set
}

// TestShareReclaimed: team c borrows the whole reservation; when team a,
// whose share is half of it, has a job queued, c's job is asked to
// checkpoint and stop (its share lent returns at its next checkpoint),
// a's job starts on the reservation once the checkpoint is durable, and
// c's job, requeued with nothing lost, runs on demand.
func TestShareReclaimed(t *testing.T) {
	set := sharedFleet(1)
	tr := jobsTrace(trace.Job{GPUs: 8, Duration: 10 * time.Hour, Team: "c"},
		trace.Job{Submit: time.Hour, GPUs: 4, Duration: time.Hour, Team: "a"})
	var starts []string
	opt := Options{Policies: []string{"reactive"}, CheckpointDuration: 2 * time.Minute}
	opt.started = func(e *engine, id int32) {
		j := &e.jobs[id]
		starts = append(starts, e.pools[e.nodes[j.nodes[0]].pool].spec.Name+":"+j.id+"@"+time.Duration(e.now*1e9).String())
	}
	rep, err := Run(set, tr, opt)
	if err != nil {
		t.Fatal(err)
	}
	r := rep.Policies[0]
	// c's job on the reservation at 0; a's at 1h, after c's checkpoint
	// (the pass runs at once, the checkpoint takes 2 minutes); c's again
	// on demand once the node bought for a's queued job is up (10
	// minutes after it queued).
	want := []string{"res:0@0s", "res:1@1h2m0s", "od:0@1h10m0s"}
	if !slices.Equal(starts, want) {
		t.Errorf("starts %v, want %v", starts, want)
	}
	if r.Reclaimed != 1 || r.MovedJobs != 1 || r.LostGPUHours != 0 {
		t.Errorf("reclaimed %d, moved %d, lost %v GPU-h; want 1, 1, none", r.Reclaimed, r.MovedJobs, r.LostGPUHours)
	}
}

// TestSharesKept: over runs of generated traces of three teams (a with
// half the reservation, b a quarter, c none), no job starts on a reserved
// node where its GPUs take what is kept for another team's share while
// that team has jobs queued: each start leaves at least the unused
// shares of the other teams with jobs queued free on the reservation.
// Shares, holdings, queues and free GPUs are counted here from the
// engine's nodes, jobs and queue, not from its books. And predictive
// scaling loses nothing (the reactive baseline's scale-in evicts, as
// Cluster Autoscaler's does; a share given back never loses work: its
// borrower checkpoints first).
func TestSharesKept(t *testing.T) {
	for seed := uint64(1); seed <= 3; seed++ {
		rng := rand.New(rand.NewPCG(seed, 5))
		jobs := teamJobs(rng, 400, 5*time.Minute, 190*time.Minute, []string{"a", "b", "c", "c"},
			func(j *trace.Job) { j.CheckpointInterval = time.Duration(rng.IntN(60)+5) * time.Minute })
		set := sharedFleet(4)
		starts, checked := 0, 0
		// One policy a run: the hooks run in the policy's goroutine.
		opt := Options{Seed: int64(seed), UnresponsiveJobs: -1}
		opt.started = func(e *engine, id int32) {
			starts++
			j := &e.jobs[id]
			team := e.groups[byTeam].table.names[j.group[byTeam]]
			onRes := false
			for _, ni := range j.nodes {
				onRes = onRes || e.pools[e.nodes[ni].pool].spec.Capacity == fleet.Reserved
			}
			if !onRes {
				return
			}
			reserved, free := 0, 0
			held, queued := map[string]int{}, map[string]int{}
			for _, n := range e.live {
				if e.pools[n.pool].spec.Capacity != fleet.Reserved || n.state == booting || n.state == gone {
					continue
				}
				if n.state == up {
					free += n.free
				}
				left := n.gpn
				for _, x := range n.jobs {
					g := min(e.jobs[x].gpus, left)
					left -= g
					held[e.groups[byTeam].table.names[e.jobs[x].group[byTeam]]] += g
				}
			}
			for i := range e.pools {
				reserved += e.pools[i].reserved * e.pools[i].spec.GPUsPerNode
			}
			for _, k := range e.keys {
				for _, x := range e.classes[k].ids {
					queued[e.groups[byTeam].table.names[e.jobs[x].group[byTeam]]] += e.jobs[x].gpus
				}
			}
			kept := 0
			for _, tm := range set.Teams {
				if tm.Name != team && queued[tm.Name] > 0 {
					kept += max(int(tm.ReservedShare*float64(reserved))-held[tm.Name], 0)
				}
			}
			checked++
			if free < kept {
				t.Errorf("seed %d, %v: team %s's job of %d GPUs started on the reservation, leaving %d GPUs free of the %d kept for the other teams' shares (held %v, queued %v)",
					seed, time.Duration(e.now*1e9), team, j.gpus, free, kept, held, queued)
			}
		}
		reclaimed := 0
		for _, pol := range []string{"reactive", "predictive"} {
			opt.Policies = []string{pol}
			rep, err := Run(set, jobsTrace(jobs...), opt)
			if err != nil {
				t.Fatal(err)
			}
			for _, r := range rep.Policies {
				reclaimed += r.Reclaimed
				if r.Policy == "predictive" && r.LostScaleInGPUHours != 0 {
					t.Errorf("seed %d, %s: %v GPU-hours lost to scale-in", seed, r.Policy, r.LostScaleInGPUHours)
				}
			}
		}
		if checked == 0 || reclaimed == 0 {
			t.Fatalf("seed %d: of %d starts, %d on the reservation, %d runs reclaimed: the property was not exercised", seed, starts, checked, reclaimed)
		}
	}
}

// TestShareReclaimCases: a lent share comes back where the free reserved
// GPUs are scattered over nodes too (a's job waits for room on one node),
// never below the borrower's own share (b's wide job counts all it holds),
// and is neither kept nor given back for a job that may not run on the
// reservation. Each case pins every run's start: pool, job, time.
func TestShareReclaimCases(t *testing.T) {
	tests := []struct {
		name      string
		nodes     int
		jobs      []trace.Job
		tiers     bool
		reclaimed int
		starts    []string
	}{
		// c's jobs leave 2 GPUs free on each node: a's 4-GPU job fits
		// once one of them leaves.
		{name: "scattered", nodes: 2, jobs: []trace.Job{
			{GPUs: 6, Duration: 10 * time.Hour, Team: "c"}, {GPUs: 6, Duration: 10 * time.Hour, Team: "c"},
			{Submit: time.Hour, GPUs: 4, Duration: time.Hour, Team: "a"}},
			reclaimed: 1, starts: []string{"res:0@0s", "res:1@0s", "res:2@1h2m0s", "od:0@1h10m0s"}},
		// b (a quarter of 3 nodes: 6 GPUs) holds 16 in a wide job: giving
		// it back would leave b none, so a's job waits for on-demand.
		{name: "a wide borrower", nodes: 3, jobs: []trace.Job{
			{GPUs: 16, Duration: 10 * time.Hour, Team: "b"}, {GPUs: 8, Duration: 10 * time.Hour, Team: "a"},
			{Submit: time.Hour, GPUs: 4, Duration: time.Hour, Team: "a"}},
			reclaimed: 0, starts: []string{"res:1@0s", "res:0@0s", "od:2@1h10m0s"}},
		// a's job may not run on the reservation: nothing is given back
		// for it, and c's next job takes the reservation's free GPUs.
		{name: "a job that may not run there", nodes: 1, tiers: true, jobs: []trace.Job{
			{GPUs: 4, Duration: 10 * time.Hour, Team: "c"},
			{Submit: time.Hour, GPUs: 4, Duration: time.Hour, Team: "a", Tier: "od_only"},
			{Submit: time.Hour + 5*time.Minute, GPUs: 4, Duration: time.Hour, Team: "c"}},
			reclaimed: 0, starts: []string{"res:0@0s", "res:2@1h5m0s", "od:1@1h10m0s"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			set := sharedFleet(tt.nodes)
			if tt.tiers {
				set.Tiers = []fleet.Tier{{Name: "any", Rank: 1, WaitValuePerGPUHour: 500, Default: true},
					{Name: "od_only", Rank: 2, WaitValuePerGPUHour: 500, CapacityTypes: []fleet.CapacityType{fleet.OnDemand}}}
			}
			var starts []string
			opt := Options{Policies: []string{"reactive"}, CheckpointDuration: 2 * time.Minute}
			opt.started = func(e *engine, id int32) {
				j := &e.jobs[id]
				starts = append(starts, e.pools[e.nodes[j.nodes[0]].pool].spec.Name+":"+j.id+"@"+time.Duration(e.now*1e9).String())
			}
			rep, err := Run(set, jobsTrace(tt.jobs...), opt)
			if err != nil {
				t.Fatal(err)
			}
			if r := rep.Policies[0]; r.Reclaimed != tt.reclaimed || !slices.Equal(starts, tt.starts) || r.LostGPUHours != 0 {
				t.Errorf("reclaimed %d, starts %v, %v GPU-h lost; want %d, %v, none", r.Reclaimed, starts, r.LostGPUHours, tt.reclaimed, tt.starts)
			}
		})
	}
}

// TestSharesReturned: over runs of generated traces (as TestSharesKept),
// a lent share comes back at the borrowers' next checkpoint: no team's job
// that may run on the reservation and fits its unused share on one node
// stays queued, from tick to tick, for longer than two checkpoints, a
// scheduler pass and a tick (a pass may wait for another team's
// checkpoints) while some reserved node would hold it once the borrowers
// there (teams holding more than their shares, each left at least its
// share, their jobs honouring drains) gave their GPUs back. Everything is
// counted here from the engine's nodes, jobs and queue.
func TestSharesReturned(t *testing.T) {
	for seed := uint64(1); seed <= 3; seed++ {
		rng := rand.New(rand.NewPCG(seed, 9))
		jobs := teamJobs(rng, 400, 5*time.Minute, 190*time.Minute, []string{"a", "b", "c", "c"}, nil)
		set := sharedFleet(4)
		ckpt := 2 * time.Minute
		late := int64((preemptEvery*time.Second + 2*ckpt + time.Minute) / time.Second)
		ticks, waited := 0, 0
		since := map[string]int64{} // job -> the first tick it could have had its share back
		// One policy a run: the hooks run in the policy's goroutine.
		opt := Options{Seed: int64(seed), UnresponsiveJobs: -1, CheckpointDuration: ckpt}
		opt.ticked = func(e *engine) {
			ticks++
			could := map[string]bool{}
			defer func() {
				for id := range since {
					if !could[id] {
						delete(since, id)
					}
				}
			}()
			names := e.groups[byTeam].table.names
			reserved := 0
			for i := range e.pools {
				reserved += e.pools[i].reserved * e.pools[i].spec.GPUsPerNode
			}
			share := map[string]int{}
			for _, tm := range set.Teams {
				share[tm.Name] = int(tm.ReservedShare * float64(reserved))
			}
			// What each team holds on the reservation, a job on several
			// nodes all it holds there.
			held := map[string]int{}
			for _, n := range e.live {
				if e.pools[n.pool].spec.Capacity != fleet.Reserved || n.state == booting || n.state == gone {
					continue
				}
				left := n.gpn
				for _, x := range n.jobs {
					g := min(e.jobs[x].gpus, left)
					left -= g
					held[names[e.jobs[x].group[byTeam]]] += g
				}
			}
			for _, k := range e.keys {
				for _, id := range e.classes[k].ids {
					j := &e.jobs[id]
					team := names[j.group[byTeam]]
					if share[team] == 0 || j.gpus > 8 || j.gpus > share[team]-held[team] {
						continue
					}
					// A reserved node that would hold it once its
					// borrowers gave back.
					for _, n := range e.live {
						if e.pools[n.pool].spec.Capacity != fleet.Reserved || n.state != up {
							continue
						}
						room, over := n.free, map[string]int{}
						for _, x := range n.jobs {
							v := &e.jobs[x]
							b := names[v.group[byTeam]]
							whole := v.gpus // all a wide job holds on the reservation
							if _, ok := over[b]; !ok {
								over[b] = held[b] - share[b]
							}
							if v.saveAt >= 0 || v.preempted || over[b] >= whole {
								room += min(v.gpus, n.gpn)
								if v.saveAt < 0 && !v.preempted {
									over[b] -= whole
								}
							}
						}
						if room >= j.gpus {
							could[j.id] = true
							if _, ok := since[j.id]; !ok {
								since[j.id] = e.now
							}
							if e.now-since[j.id] <= late {
								break
							}
							waited++
							t.Errorf("seed %d, %v: team %s's job %s of %d GPUs queued since %v, its share lent: node %s would hold it",
								seed, time.Duration(e.now*1e9), team, j.id, j.gpus, time.Duration(j.queuedAt*1e9), n.id)
							return
						}
					}
				}
			}
		}
		for _, pol := range []string{"reactive", "predictive"} {
			opt.Policies = []string{pol}
			clear(since)
			if _, err := Run(set, jobsTrace(jobs...), opt); err != nil {
				t.Fatal(err)
			}
		}
		if ticks == 0 || waited > 0 {
			t.Fatalf("seed %d: %d ticks, %d shares not returned", seed, ticks, waited)
		}
	}
}
