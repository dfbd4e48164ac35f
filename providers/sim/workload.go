package sim

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/fleetcast/autoscaler/fleet"
	"github.com/fleetcast/autoscaler/providers"
)

// Workload is the synthetic GPU demand the simulated cloud starts from when
// there is no real data. Demand follows a daily cosine cycle between Base
// (12 hours from the peak) and Peak (at PeakHour UTC); on Saturdays and
// Sundays the swing above Base is 60% of a weekday's. Each step's value is
// multiplied by 1 + Noise·z, with z a standard normal drawn from the seed and
// the time alone, so any window of the series is reproducible.
type Workload struct {
	Base, Peak float64
	PeakHour   int
	Noise      float64
	Seed       int64
}

// NewWorkload makes the workload of a config's `synthetic` block; unset base
// and peak are 25% and 75% of the GPUs the fleet of s can hold.
func NewWorkload(s fleet.Settings, syn fleet.SyntheticSettings) Workload {
	w := Workload{Base: float64(syn.BaseGPUs), Peak: float64(syn.PeakGPUs), PeakHour: syn.PeakHour, Noise: syn.Noise, Seed: syn.Seed}
	fleetMax := float64(s.MaxFleetGPUs())
	if syn.BaseGPUs == 0 {
		w.Base = math.Round(0.25 * fleetMax)
	}
	if syn.PeakGPUs == 0 {
		w.Peak = math.Max(w.Base, math.Round(0.75*fleetMax))
	}
	return w
}

// Mean is the demand at t without noise.
func (w Workload) Mean(t time.Time) float64 {
	t = t.UTC()
	hour := float64(t.Hour()) + float64(t.Minute())/60 + float64(t.Second())/3600
	cycle := (1 + math.Cos(2*math.Pi*(hour-float64(w.PeakHour))/24)) / 2
	swing := (w.Peak - w.Base) * cycle
	if wd := t.Weekday(); wd == time.Saturday || wd == time.Sunday {
		swing *= 0.6
	}
	return w.Base + swing
}

// At is the demand at t, with noise, rounded to whole GPUs, never negative.
// The noise depends on the seed and the minute t falls in.
func (w Workload) At(t time.Time) float64 {
	z := rand.New(rand.NewPCG(uint64(w.Seed), uint64(t.Unix()/60))).NormFloat64()
	return math.Max(0, math.Round(w.Mean(t)*(1+w.Noise*z)))
}

// History is the workload sampled every step over length, ending at end.
func (w Workload) History(end time.Time, step, length time.Duration) fleet.Series {
	n := int(length / step)
	s := fleet.Series{Start: end.Add(-time.Duration(n) * step), Step: step, Values: make([]float64, n)}
	for i := range s.Values {
		s.Values[i] = w.At(s.Start.Add(time.Duration(i) * step))
	}
	return s
}

// Generate makes a simulated cloud holding a plausible fleet at now, and the
// fleet state an observer would see: the workload's demand history over
// forecast.history; in each pool its `sim.initial` nodes (default: min),
// ready, with jobs placed first-fit on reserved, then cheaper nodes, up to the
// demand at now (what does not fit is pending); jobs of 1-8 GPUs started
// minutes to days ago, their last checkpoints up to 50 minutes old (a few
// young ones never checkpointed); one launch in the cheapest burst pool that
// the simulated cloud accepts, 3 minutes ago (pools that refuse it are
// backed off); and, so that every kind of decision shows, a drain in
// progress (6 minutes old, its job not yet checkpointed) in the dearest burst
// pool with two or more nodes, and a silent agent (7 minutes) in a fleet of
// six or more nodes. Everything is deterministic for the synthetic seed.
func Generate(s fleet.Settings, syn fleet.SyntheticSettings, now time.Time) (*Cloud, fleet.State) {
	seed := syn.Seed
	cloud := New(s.Pools, seed, func() time.Time { return now })
	rng := rand.New(rand.NewPCG(uint64(seed), 0xf1ee7))
	w := NewWorkload(s, syn)
	step := s.Forecast.Step
	end := now.Truncate(step)
	st := fleet.State{CapturedAt: now, History: w.History(end, step, s.Forecast.History)}

	pools := byPrice(s.Pools)
	var burst []*fleet.Pool
	for _, p := range pools {
		if p.Capacity != fleet.Reserved {
			burst = append(burst, p)
		}
	}
	// The node that will be mid-drain: the dearest burst pool with 2+ nodes.
	drainPool := ""
	for _, p := range slices.Backward(burst) {
		if s := cloud.groups[p.Name].settings; s.Initial >= 2 {
			drainPool = p.Name
			break
		}
	}

	// Ready nodes, in placement order: the node to drain first (its jobs
	// were placed before the drain), then reserved, then cheaper pools.
	var nodes []fleet.Node
	drainIdx := -1
	for _, p := range pools {
		g := cloud.groups[p.Name]
		for range min(g.settings.Initial, g.settings.Capacity) {
			launched := now.Add(-time.Duration(2+rng.IntN(70)) * time.Hour)
			id := cloud.add(g, zoneOf(p, rng), providers.InstanceRunning, launched).ID
			n := fleet.Node{ID: id, Pool: p.Name, State: fleet.Ready, LaunchedAt: launched,
				LastReport: now.Add(-time.Duration(rng.IntN(50)) * time.Second)}
			if p.Name == drainPool && drainIdx < 0 {
				drainIdx = len(nodes)
			}
			nodes = append(nodes, n)
		}
	}
	order := make([]int, 0, len(nodes))
	if drainIdx >= 0 {
		order = append(order, drainIdx)
	}
	for i := range nodes {
		if i != drainIdx {
			order = append(order, i)
		}
	}

	// Jobs, first-fit, up to the demand now.
	free := make([]int, len(nodes))
	for i := range nodes {
		free[i] = s.Pool(nodes[i].Pool).GPUsPerNode
	}
	want := int(w.At(now))
	for j := 0; want > 0; j++ {
		size := min([]int{1, 1, 2, 4, 8, 8}[rng.IntN(6)], want)
		job := makeJob(j, size, now, rng)
		placed := false
		for _, i := range order {
			if free[i] >= size {
				free[i] -= size
				nodes[i].Jobs = append(nodes[i].Jobs, job)
				placed = true
				break
			}
		}
		if !placed {
			st.PendingGPUs += size
		}
		want -= size
	}
	for i := range nodes {
		if len(nodes[i].Jobs) == 0 {
			nodes[i].IdleSince = now.Add(-time.Duration(5+rng.IntN(85)) * time.Minute)
		}
	}

	if drainIdx >= 0 {
		n := &nodes[drainIdx]
		n.State = fleet.Draining
		n.DrainStartedAt = now.Add(-6 * time.Minute)
		n.DrainAcked = true // its agent holds the drain
		for k := range n.Jobs {
			j := &n.Jobs[k]
			j.Start = minTime(j.Start, n.DrainStartedAt.Add(-10*time.Minute))
			if k == 0 && !j.LastCheckpoint.Before(n.DrainStartedAt) {
				j.LastCheckpoint = n.DrainStartedAt.Add(-9 * time.Minute)
			}
		}
	}
	if len(nodes) >= 6 {
		// The last ready node of the dearest pool goes silent.
		for i := len(nodes) - 1; i >= 0; i-- {
			if nodes[i].State == fleet.Ready {
				nodes[i].LastReport = now.Add(-7 * time.Minute)
				break
			}
		}
	}

	// One launch 3 minutes ago, in the cheapest burst pool that accepts it.
	launched := now.Add(-3 * time.Minute)
	for _, p := range burst {
		g := cloud.groups[p.Name]
		s := g.settings
		if g.target >= p.Max {
			continue
		}
		if g.target >= s.Capacity || (s.ErrorRate > 0 && rng.Float64() < s.ErrorRate) {
			st.Pools = append(st.Pools, fleet.PoolStatus{Name: p.Name,
				BackoffUntil:  launched.Add(providers.Backoff(1)),
				BackoffReason: "insufficient capacity (simulated) at " + launched.UTC().Format("15:04")})
			continue
		}
		id := cloud.add(g, zoneOf(p, rng), providers.InstancePending, launched).ID
		nodes = append(nodes, fleet.Node{ID: id, Pool: p.Name, State: fleet.Pending, LaunchedAt: launched})
		break
	}
	st.Nodes = nodes
	return cloud, st
}

// makeJob makes the j-th synthetic job.
func makeJob(j, gpus int, now time.Time, rng *rand.Rand) fleet.Job {
	ageMin := int(math.Min(rng.ExpFloat64()*180, 72*60)) + 1
	start := now.Add(-time.Duration(ageMin) * time.Minute)
	job := fleet.Job{ID: fmt.Sprintf("job-%04d", j), GPUs: gpus, Start: start, LongRunning: ageMin >= 60}
	if ageMin < 15 && rng.IntN(2) == 0 {
		return job // young, never checkpointed
	}
	ck := min(rng.IntN(50), ageMin)
	job.LastCheckpoint = now.Add(-time.Duration(ck) * time.Minute)
	return job
}

// byPrice orders pools the way capacity is bought (fleet.CompareForLaunch).
func byPrice(pools []fleet.Pool) []*fleet.Pool {
	out := make([]*fleet.Pool, len(pools))
	for i := range pools {
		out[i] = &pools[i]
	}
	slices.SortStableFunc(out, fleet.CompareForLaunch)
	return out
}

func zoneOf(p *fleet.Pool, rng *rand.Rand) string {
	if len(p.Zones) == 0 {
		return ""
	}
	return p.Zones[rng.IntN(len(p.Zones))]
}

func minTime(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}
