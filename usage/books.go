package usage

import (
	"cmp"
	"math"
	"slices"
	"time"

	"github.com/fleetcast/autoscaler/fleet"
	"github.com/fleetcast/autoscaler/state"
)

// Flush is what an Observe changed, for the store: the usage hours
// touched (the hours in progress, and any it closed) and the job records
// new or ended.
type Flush struct {
	Hours []state.UsageHour
	Jobs  []state.UsageJob
}

// Merge is f with g after it: g's records replace f's of the same hour,
// team and tier, or job and start.
func (f Flush) Merge(g Flush) Flush {
	if len(f.Hours) == 0 && len(f.Jobs) == 0 {
		return g
	}
	out := Flush{Hours: slices.Clone(f.Hours), Jobs: slices.Clone(f.Jobs)}
	hour := make(map[string]int, len(out.Hours))
	for i, h := range out.Hours {
		hour[h.Hour.UTC().String()+"/"+h.Team+"/"+h.Tier] = i
	}
	for _, h := range g.Hours {
		if i, ok := hour[h.Hour.UTC().String()+"/"+h.Team+"/"+h.Tier]; ok {
			out.Hours[i] = h
		} else {
			out.Hours = append(out.Hours, h)
		}
	}
	job := make(map[string]int, len(out.Jobs))
	for i, j := range out.Jobs {
		job[j.ID+"/"+j.Start.UTC().String()] = i
	}
	for _, j := range g.Jobs {
		if i, ok := job[j.ID+"/"+j.Start.UTC().String()]; ok {
			out.Jobs[i] = j
		} else {
			out.Jobs = append(out.Jobs, j)
		}
	}
	return out
}

// hourBook is one team and tier's hour in progress.
type hourBook struct {
	charges []poolCharge
	waited  float64
	started int
	queue   []int64
}

// poolCharge is what one pool charged a team and tier, of one kind.
type poolCharge struct {
	pool string
	kind Kind
	Amount
}

// add adds am to the pool's charge of the kind.
func (b *hourBook) add(pool string, kind Kind, am Amount) {
	for i := range b.charges {
		if c := &b.charges[i]; c.pool == pool && c.kind == kind {
			c.Add(am)
			return
		}
	}
	b.charges = append(b.charges, poolCharge{pool: pool, kind: kind, Amount: am})
}

// hour is tt's book of the hour starting at h, made if new.
func (a *Accountant) hour(h time.Time, tt teamTier) *hourBook {
	h = h.UTC()
	m := a.hours[h]
	if m == nil {
		m = map[teamTier]*hourBook{}
		a.hours[h] = m
	}
	b := m[tt]
	if b == nil {
		b = &hourBook{}
		m[tt] = b
	}
	return b
}

// Restore takes back what an earlier run recorded: the usage hours of
// the hour in progress and the records of jobs that were running, so
// that their figures go on from there. It is for a new Accountant, before
// its first Observe; a job it already holds is kept as it is.
func (a *Accountant) Restore(hours []state.UsageHour, jobs []state.UsageJob) {
	a.mu.Lock()
	defer a.mu.Unlock()
	clear(a.tombs)
	for _, h := range hours {
		b := a.hour(h.Hour, teamTier{a.teams.Fold(h.Team), a.tiers.Fold(h.Tier)})
		for _, c := range h.Charges {
			b.add(c.Pool, Kind(c.Kind), Amount{Micros: Micros(c.Micros), GPUHours: c.GPUHours})
		}
		b.waited += h.WaitedGPUHours
		b.started += h.Started
		b.queue = append(b.queue, h.Queue...)
	}
	for _, j := range jobs {
		if !j.End.IsZero() || a.jobs[j.ID] != nil {
			continue
		}
		j.Team, j.Tier = a.teams.Fold(j.Team), a.tiers.Fold(j.Tier)
		// Its queue time was counted when it was first seen.
		a.jobs[j.ID] = &jobBook{rec: j, tt: teamTier{j.Team, j.Tier}, restored: true, queued: true}
		a.restored, a.restoredBy = true, time.Time{}
	}
}

// Bought records a purchase: count nodes of pool bought for teams (by
// their share: GPUs pending or forecast), whose nodes, first seen in the
// pool by until, are charged to those teams while they idle before
// their first job. A purchase for no team (a pool's minimum, a reserved
// baseline) is not recorded: its idle time is Idle.
func (a *Accountant) Bought(pool string, count int, teams []Holder, until time.Time) {
	if count <= 0 || len(teams) == 0 {
		return
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	folded := make([]Holder, 0, len(teams))
	for _, t := range teams {
		if t.GPUs > 0 {
			folded = append(folded, Holder{Team: a.teams.Fold(t.Team), Tier: a.tiers.Fold(t.Tier), GPUs: t.GPUs})
		}
	}
	if len(folded) > 0 {
		a.credits[pool] = append(a.credits[pool], credit{count: count, teams: folded, until: until})
	}
}

// takeCredit takes one node of the pool's oldest live purchase, and
// returns its teams; nil when none.
func (a *Accountant) takeCredit(pool string, now time.Time) []Holder {
	cs := a.credits[pool]
	for len(cs) > 0 && (cs[0].count <= 0 || now.After(cs[0].until)) {
		cs = cs[1:]
	}
	if len(cs) == 0 {
		delete(a.credits, pool)
		return nil
	}
	cs[0].count--
	a.credits[pool] = cs
	return cs[0].teams
}

// ForPending is who the pending demand a pool serves is (demand waiting
// for any pool, and for the pool's scopes): its teams and tiers by the
// GPUs they wait for, for Bought. With no pool, all of it.
func ForPending(pending []Waiting, pool *fleet.Pool) []Holder {
	var out []Holder
	for _, w := range pending {
		if w.GPUs <= 0 || pool != nil && w.Scope != (fleet.ScopedDemand{}) && !w.Scope.Serves(pool) {
			continue
		}
		i := slices.IndexFunc(out, func(h Holder) bool { return h.Team == w.Team && h.Tier == w.Tier })
		if i < 0 {
			out = append(out, Holder{Team: w.Team, Tier: w.Tier})
			i = len(out) - 1
		}
		out[i].GPUs += float64(w.GPUs)
	}
	return out
}

// recentHalfLife is the half-life of the use ForForecast weighs.
const recentHalfLife = 12 * time.Hour

// ForForecast is who a purchase ahead of the forecast is for: the teams
// by the GPU-hours they used lately (the hours closed decayed by a
// half-life of half a day, and the hour in progress), as the forecast is
// made from their use. Empty before any use.
func (a *Accountant) ForForecast() []Holder {
	a.mu.Lock()
	defer a.mu.Unlock()
	by := make(map[string]float64, len(a.recent))
	for t, h := range a.recent {
		by[t] = h
	}
	for _, m := range a.hours {
		for tt, b := range m {
			for _, c := range b.charges {
				if c.kind == Used {
					by[tt.team] += c.GPUHours
				}
			}
		}
	}
	var out []Holder
	for team, h := range by {
		if h > 0 {
			out = append(out, Holder{Team: team, GPUs: h})
		}
	}
	slices.SortFunc(out, func(x, y Holder) int { return cmp.Compare(x.Team, y.Team) })
	return out
}

// flushHours puts the hours touched into f: those in progress, and
// those before cutoff, which it then closes into the totals and forgets.
func (a *Accountant) flushHours(cutoff time.Time, f *Flush) {
	for _, h := range a.openHours() {
		f.Hours = append(f.Hours, rows(h, a.hours[h])...)
		if h.Before(cutoff) {
			a.close(h)
		}
	}
}

// openHours are the hours the books hold, in order.
func (a *Accountant) openHours() []time.Time {
	hours := make([]time.Time, 0, len(a.hours))
	for h := range a.hours {
		hours = append(hours, h)
	}
	slices.SortFunc(hours, func(x, y time.Time) int { return x.Compare(y) })
	return hours
}

// close adds the hour h's books to the totals and the recent use, and
// forgets them.
func (a *Accountant) close(h time.Time) {
	end := h.Add(time.Hour)
	if !a.recentAt.IsZero() {
		decay := math.Exp2(-end.Sub(a.recentAt).Hours() / recentHalfLife.Hours())
		for t := range a.recent {
			a.recent[t] *= decay
		}
	}
	a.recentAt = end
	for tt, b := range a.hours[h] {
		for _, c := range b.charges {
			k := Key{Team: tt.team, Tier: tt.tier, Pool: c.pool, Kind: c.kind}
			x := a.closed[k]
			x.Add(c.Amount)
			a.closed[k] = x
			if c.kind == Used {
				a.recent[tt.team] += c.GPUHours
			}
		}
		a.closedWaited[tt] += b.waited
	}
	delete(a.hours, h)
}

// rows are an hour's books as records, by team and tier.
func rows(h time.Time, m map[teamTier]*hourBook) []state.UsageHour {
	out := make([]state.UsageHour, 0, len(m))
	for tt, b := range m {
		r := state.UsageHour{Hour: h, Team: tt.team, Tier: tt.tier, WaitedGPUHours: b.waited, Started: b.started, Queue: slices.Clone(b.queue)}
		for _, c := range b.charges {
			r.Charges = append(r.Charges, state.UsageCharge{Pool: c.pool, Kind: string(c.kind), Micros: int64(c.Micros), GPUHours: c.GPUHours})
		}
		slices.SortFunc(r.Charges, func(x, y state.UsageCharge) int {
			return cmp.Or(cmp.Compare(x.Pool, y.Pool), cmp.Compare(x.Kind, y.Kind))
		})
		out = append(out, r)
	}
	slices.SortFunc(out, func(x, y state.UsageHour) int {
		return cmp.Or(cmp.Compare(x.Team, y.Team), cmp.Compare(x.Tier, y.Tier))
	})
	return out
}

// Histogram is queue times counted by QueueBuckets, with their sum.
type Histogram struct {
	Counts []int   `json:"counts"`
	Sum    float64 `json:"sum_s"`
	N      int     `json:"n"`
}

func (h *Histogram) add(s float64) {
	if h.Counts == nil {
		h.Counts = make([]int, len(QueueBuckets)+1)
	}
	h.Counts[bucketOf(s)]++
	h.Sum += s
	h.N++
}

// TeamTier is a team and a tier.
type TeamTier struct{ Team, Tier string }

// Totals are what an Accountant charged since it started (and the hour
// in progress it restored), for metrics: counters that only grow (a
// restart starts them again), and the demand waiting at the last
// snapshot.
type Totals struct {
	Charges map[Key]Amount
	// Waited are the GPU-hours each team and tier's pending jobs waited.
	Waited map[TeamTier]float64
	// Queue are the queue times of the jobs seen starting, by team and
	// tier.
	Queue map[TeamTier]Histogram
	// Waiting is the demand pending at the last snapshot, by team and
	// tier.
	Waiting []Waiting
}

// Totals are the Accountant's totals, a copy, whole to the last snapshot
// (it settles every node).
func (a *Accountant) Totals() Totals {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.settleAll()
	t := Totals{Charges: make(map[Key]Amount, len(a.closed)), Waited: make(map[TeamTier]float64, len(a.closedWaited)), Queue: make(map[TeamTier]Histogram, len(a.queueTotal))}
	for k, v := range a.closed {
		t.Charges[k] = v
	}
	for k, v := range a.closedWaited {
		t.Waited[TeamTier{k.team, k.tier}] = v
	}
	for _, m := range a.hours {
		for tt, b := range m {
			for _, c := range b.charges {
				k := Key{Team: tt.team, Tier: tt.tier, Pool: c.pool, Kind: c.kind}
				x := t.Charges[k]
				x.Add(c.Amount)
				t.Charges[k] = x
			}
			if b.waited > 0 {
				t.Waited[TeamTier{tt.team, tt.tier}] += b.waited
			}
		}
	}
	// Sums of floats in another order may come out a hair lower than a
	// scrape before saw: a counter never goes down.
	if a.shown == nil {
		a.shown, a.shownWaited = map[Key]float64{}, map[TeamTier]float64{}
	}
	for k, v := range t.Charges {
		if p := a.shown[k]; v.GPUHours < p {
			v.GPUHours = p
			t.Charges[k] = v
		}
		a.shown[k] = t.Charges[k].GPUHours
	}
	for k, v := range t.Waited {
		if p := a.shownWaited[k]; v < p {
			t.Waited[k] = p
		}
		a.shownWaited[k] = t.Waited[k]
	}
	for k, v := range a.queueTotal {
		h := *v
		h.Counts = slices.Clone(v.Counts)
		t.Queue[TeamTier{k.team, k.tier}] = h
	}
	t.Waiting = slices.Clone(a.waiting)
	slices.SortFunc(t.Waiting, func(x, y Waiting) int { return cmp.Or(cmp.Compare(x.Team, y.Team), cmp.Compare(x.Tier, y.Tier)) })
	return t
}

// Open settles every node and returns the books of the hours in
// progress as they stand: what a team's spend today needs beyond the
// hours the store holds (the controller's burst budgets).
func (a *Accountant) Open() []state.UsageHour {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.settleAll()
	return a.openRows()
}

// openRows are the rows of the hours in progress. Callers hold a.mu.
func (a *Accountant) openRows() []state.UsageHour {
	var out []state.UsageHour
	for _, h := range a.openHours() {
		out = append(out, rows(h, a.hours[h])...)
	}
	return out
}

// Live is what a report of the fleet now needs beyond the store's
// records: the books of the hours in progress and the running jobs'
// records, each whole to the last snapshot, and the demand waiting.
type Live struct {
	Hours   []state.UsageHour
	Running []state.UsageJob
	Waiting []Waiting
}

// Live settles every node and returns the books as they stand.
func (a *Accountant) Live() Live {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.settleAll()
	l := Live{Hours: a.openRows()}
	l.Running = make([]state.UsageJob, 0, len(a.jobs))
	for _, jb := range a.jobs {
		l.Running = append(l.Running, jb.rec)
	}
	l.Waiting = slices.Clone(a.waiting)
	slices.SortFunc(l.Waiting, func(x, y Waiting) int { return cmp.Or(cmp.Compare(x.Team, y.Team), cmp.Compare(x.Tier, y.Tier)) })
	return l
}
