package usage

import (
	"math"
	"sync"
	"time"

	"github.com/fleetcast/autoscaler/fleet"
	"github.com/fleetcast/autoscaler/state"
)

// Options are an Accountant's bounds.
type Options struct {
	// MaxTeams and MaxTiers bound the teams and tiers kept (100 and 20
	// when 0); later ones are folded into Other.
	MaxTeams, MaxTiers int
}

// teamTier is a usage hour's team and tier.
type teamTier struct{ team, tier string }

// idleTT is the team and tier of idle charges.
var idleTT = teamTier{IdleLabel, IdleLabel}

// nodeBook is what the accountant keeps of a node between cycles: its
// meter, what the last snapshot saw on it, and its cost not yet split
// among its jobs (acc).
type nodeBook struct {
	meter Meter
	pool  string
	gpus  int
	price float64
	// boughtFor are the teams the node was bought for, charged for its
	// free GPUs until it first holds a job (used).
	boughtFor []Holder
	used      bool
	// gen is the last observation that saw the node; slot spreads the
	// nodes over the cycles that settle them (settleEvery).
	gen  uint64
	slot uint64
	// seq is the node's fleet.Node.JobsSeq its jobs were last read at;
	// jobs are those jobs, and held the GPUs each holds there.
	seq  uint64
	jobs []*jobBook
	held []float64
	// acc is what the node cost since its last split, all in one hour,
	// with the jobs and free GPUs it has now: split when they change,
	// when its hour ends, when the node goes, every settleEvery cycles,
	// and before a report (settle).
	acc struct {
		set   bool
		hour  time.Time
		cost  Micros
		hours float64
	}
}

// jobBook is a job running, as last seen.
type jobBook struct {
	rec state.UsageJob
	tt  teamTier
	// refs counts the nodes that list the job, and gpus the GPUs it
	// holds on them: it ends when no node lists it.
	refs int
	gpus int
	// hb is the job's team and tier's book of the hour hourAt.
	hourAt time.Time
	hb     *hourBook
}

// settleEvery is how many cycles apart a node's cost is split among its
// jobs while nothing on it changes: each cycle settles one in
// settleEvery of the nodes, so a cycle's cost grows with the nodes, not
// their jobs, and the books the store keeps trail the fleet by at most
// that many cycles.
const settleEvery = 15

// credit is a purchase of count nodes of a pool for teams, until its
// deadline: the next nodes first seen in the pool take it.
type credit struct {
	count int
	teams []Holder
	until time.Time
}

// Accountant charges a fleet's cost to the teams that used it, cycle by
// cycle (Observe), and keeps the usage hours and job records for the
// store. Each interval between two cycles is charged by what the first of
// them saw (a node's jobs, the pending demand); a node first seen is
// charged from its launch, or the cycle before, whichever is later.
// Charging a cycle costs no lookup of a node's jobs whose list has not
// changed. Its methods are safe for concurrent use.
type Accountant struct {
	mu           sync.Mutex
	teams, tiers *Labels
	gen          uint64
	slots        uint64
	lastAt       time.Time
	// restored is set until the first observation after Restore, which
	// ends the restored jobs no node lists.
	restored bool
	pending  []Waiting // folded, as last seen
	nodes    map[string]*nodeBook
	credits  map[string][]credit
	jobs     map[string]*jobBook
	hours    map[time.Time]map[teamTier]*hourBook
	// closed are the totals of the hours closed, for Totals.
	closed       map[Key]Amount
	closedWaited map[teamTier]float64
	queueTotal   map[teamTier]*Histogram
	// recent is each team's used GPU-hours of the hours closed, decayed
	// to recentAt (ForForecast).
	recent   map[string]float64
	recentAt time.Time
	waiting  []Waiting
	// scratch
	ended   []*jobBook
	fresh   []*jobBook
	weights []float64
	shares  []Micros
	rems    []remainder
}

// NewAccountant makes an Accountant.
func NewAccountant(o Options) *Accountant {
	if o.MaxTeams <= 0 {
		o.MaxTeams = 100
	}
	if o.MaxTiers <= 0 {
		o.MaxTiers = 20
	}
	return &Accountant{
		teams: NewLabels(o.MaxTeams), tiers: NewLabels(o.MaxTiers),
		nodes: map[string]*nodeBook{}, credits: map[string][]credit{}, jobs: map[string]*jobBook{},
		hours: map[time.Time]map[teamTier]*hourBook{}, closed: map[Key]Amount{},
		closedWaited: map[teamTier]float64{}, queueTotal: map[teamTier]*Histogram{}, recent: map[string]float64{},
	}
}

// Flush is what an Observe changed, for the store: the usage hours
// touched (the hour in progress, and any it closed) and the job records
// new, ended, or (at each hour's end) still running.
type Flush struct {
	Hours []state.UsageHour
	Jobs  []state.UsageJob
}

// Observe charges the interval since the last snapshot by what it saw,
// takes s as the last, and returns what changed for the store. A
// snapshot at the last one's time charges nothing and is taken as the
// last; one before it changes nothing.
func (a *Accountant) Observe(s Snapshot) Flush {
	a.mu.Lock()
	defer a.mu.Unlock()
	if !a.lastAt.IsZero() && s.At.Before(a.lastAt) {
		return Flush{}
	}
	var f Flush
	if !a.lastAt.IsZero() {
		a.charge(s.At)
	}
	a.gen++
	a.ended, a.fresh = a.ended[:0], a.fresh[:0]
	for i := range s.Nodes {
		n := &s.Nodes[i]
		nb := a.nodes[n.ID]
		if nb == nil {
			nb = a.newNode(n, s.At)
			a.nodes[n.ID] = nb
		}
		if nb.gpus != n.GPUs || nb.pool != n.Pool {
			a.settle(nb) // split among what it was
		}
		nb.gen, nb.pool, nb.gpus, nb.price = a.gen, n.Pool, n.GPUs, n.Price
		refresh := (nb.slot+a.gen)%settleEvery == 0
		if refresh {
			a.settle(nb)
		}
		if n.JobsSeq == 0 || n.JobsSeq != nb.seq || refresh {
			a.seeJobs(nb, n, s.At)
		}
	}
	for id, nb := range a.nodes {
		if nb.gen != a.gen {
			a.settle(nb)
			a.drop(nb)
			delete(a.nodes, id)
		}
	}
	if a.restored {
		a.restored = false
		for _, jb := range a.jobs {
			if jb.refs == 0 {
				a.ended = append(a.ended, jb)
			}
		}
	}
	for _, jb := range a.ended {
		if jb.refs == 0 && a.jobs[jb.rec.ID] == jb {
			jb.rec.End = s.At
			f.Jobs = append(f.Jobs, jb.rec)
			delete(a.jobs, jb.rec.ID)
		}
	}
	if !a.lastAt.IsZero() && s.At.Truncate(time.Hour).After(a.lastAt.Truncate(time.Hour)) {
		// At each hour's end every running job's record is written.
		for _, jb := range a.jobs {
			f.Jobs = append(f.Jobs, jb.rec)
		}
	} else {
		for _, jb := range a.fresh {
			f.Jobs = append(f.Jobs, jb.rec)
		}
	}
	a.pending = a.pending[:0]
	a.waiting = a.waiting[:0]
	at := map[teamTier]int{}
	for _, w := range s.Pending {
		w.Team, w.Tier = a.teams.Fold(w.Team), a.tiers.Fold(w.Tier)
		a.pending = append(a.pending, w)
		k := teamTier{w.Team, w.Tier}
		i, ok := at[k]
		if !ok {
			i = len(a.waiting)
			a.waiting = append(a.waiting, Waiting{Team: w.Team, Tier: w.Tier})
			at[k] = i
		}
		a.waiting[i].GPUs += w.GPUs
		a.waiting[i].Jobs += max(w.Jobs, 1)
	}
	// An hour is closed once no charge can reach it: a node first seen
	// now is charged from as early as the last snapshot, at the next.
	cutoff := a.lastAt.UTC().Truncate(time.Hour)
	a.lastAt = s.At
	closing := false
	for h := range a.hours {
		closing = closing || h.Before(cutoff)
	}
	if closing || a.gen%settleEvery == 1 {
		// The hours in progress, for the store, every settleEvery
		// cycles (from the first), and with the hours closed.
		a.flushHours(cutoff, &f)
	}
	return f
}

// newNode starts a node first seen at now: its meter from its launch, or
// the last snapshot, whichever is later (from now at the first
// snapshot), and, launched by this controller outside a reservation, a
// purchase's teams.
func (a *Accountant) newNode(n *Seen, now time.Time) *nodeBook {
	a.slots++
	nb := &nodeBook{slot: a.slots}
	start := now
	if !a.lastAt.IsZero() && n.LaunchedAt.Before(now) {
		start = a.lastAt
		if n.LaunchedAt.After(start) {
			start = n.LaunchedAt
		}
	}
	nb.meter.Charge(n.Price, start)
	if n.Ours && !n.Reserved {
		nb.boughtFor = a.takeCredit(n.Pool, now)
	}
	return nb
}

// seeJobs takes n's jobs as nb's: the job books of the same list as
// before as they are, those of a changed list looked up (and made for
// jobs new), the node's cost so far split among the old list first; and
// each job's last checkpoint.
func (a *Accountant) seeJobs(nb *nodeBook, n *Seen, now time.Time) {
	same := len(nb.jobs) == len(n.Jobs)
	for k := 0; same && k < len(n.Jobs); k++ {
		same = nb.jobs[k].rec.ID == n.Jobs[k].ID && nb.held[k] == float64(n.Jobs[k].GPUs)
	}
	if !same {
		a.settle(nb)
		a.drop(nb)
		nb.jobs = make([]*jobBook, len(n.Jobs))
		nb.held = make([]float64, len(n.Jobs))
		for k := range n.Jobs {
			j := &n.Jobs[k]
			jb := a.job(j, n.Pool, now)
			jb.refs++
			jb.gpus += j.GPUs
			jb.rec.GPUs, jb.rec.Nodes = max(jb.rec.GPUs, jb.gpus), max(jb.rec.Nodes, jb.refs)
			nb.jobs[k], nb.held[k] = jb, float64(j.GPUs)
		}
	}
	for k := range n.Jobs {
		if r := &nb.jobs[k].rec; n.Jobs[k].LastCheckpoint.After(r.LastCheckpoint) {
			r.LastCheckpoint = n.Jobs[k].LastCheckpoint
			r.Checkpoints++
		}
	}
	nb.seq = n.JobsSeq
}

// drop takes nb's jobs off it: each that no other node lists is a
// candidate to end.
func (a *Accountant) drop(nb *nodeBook) {
	for k, jb := range nb.jobs {
		jb.refs--
		jb.gpus -= int(nb.held[k])
		if jb.refs <= 0 {
			a.ended = append(a.ended, jb)
		}
	}
	nb.jobs, nb.held = nil, nil
}

// settle splits what nb cost since its last split among its jobs and its
// free GPUs' owners, into their books.
func (a *Accountant) settle(nb *nodeBook) {
	if !nb.acc.set {
		return
	}
	a.split(nb, nb.acc.cost, nb.acc.hours, nb.acc.hour)
	nb.acc.set, nb.acc.cost, nb.acc.hours = false, 0, 0
}

// settleAll settles every node: the books are then whole to the last
// snapshot.
func (a *Accountant) settleAll() {
	for _, nb := range a.nodes {
		a.settle(nb)
	}
}

// job is j's book, made if j is new: its labels folded, its start (now
// where it says none, or one ahead), and its queue time counted in the
// hour it was first seen.
func (a *Accountant) job(j *fleet.Job, pool string, now time.Time) *jobBook {
	if jb := a.jobs[j.ID]; jb != nil {
		return jb
	}
	start := j.Start
	if start.IsZero() || start.After(now) {
		start = now
	}
	jb := &jobBook{rec: state.UsageJob{
		ID: j.ID, Team: a.teams.Fold(j.Team), Tier: a.tiers.Fold(j.Tier), Name: j.Name, Pool: pool,
		Submitted: j.Submitted, Eligible: j.Eligible, Start: start, LastCheckpoint: j.LastCheckpoint,
	}}
	jb.tt = teamTier{jb.rec.Team, jb.rec.Tier}
	a.jobs[j.ID] = jb
	a.fresh = append(a.fresh, jb)
	b := a.hour(now.Truncate(time.Hour), jb.tt)
	b.started++
	if d, ok := j.QueueTime(); ok {
		q := math.Round(d.Seconds())
		b.queue = append(b.queue, int64(q))
		h := a.queueTotal[jb.tt]
		if h == nil {
			h = &Histogram{}
			a.queueTotal[jb.tt] = h
		}
		h.add(q)
	}
	return jb
}

// charge charges every node of the last snapshot its cost up to now,
// into its accumulated cost (split when its hour ends), and the pending
// demand's waiting, hour by hour.
func (a *Accountant) charge(now time.Time) {
	for _, nb := range a.nodes {
		for from := nb.meter.At(); from.Before(now); {
			to := hourEnd(from, now)
			hour := from.Truncate(time.Hour)
			cost := nb.meter.Charge(nb.price, to)
			if nb.acc.set && !nb.acc.hour.Equal(hour) {
				a.settle(nb)
			}
			nb.acc.set, nb.acc.hour = true, hour
			nb.acc.cost += cost
			nb.acc.hours += to.Sub(from).Hours()
			from = to
		}
		if len(nb.jobs) > 0 && !nb.used {
			// Bought for a team until its first job: from here its free
			// GPUs are idle.
			a.settle(nb)
			nb.used = true
		}
	}
	for from := a.lastAt; from.Before(now); {
		to := hourEnd(from, now)
		hour := from.Truncate(time.Hour)
		for _, w := range a.pending {
			if w.GPUs > 0 {
				a.hour(hour, teamTier{w.Team, w.Tier}).waited += float64(w.GPUs) * to.Sub(from).Hours()
			}
		}
		from = to
	}
}

// split charges a node's cost over an interval of the hour starting at
// hour, as Split does, to its jobs' books and the hour's.
func (a *Accountant) split(nb *nodeBook, cost Micros, hours float64, hour time.Time) {
	gpus := float64(max(nb.gpus, 1))
	held := 0.0
	for _, h := range nb.held {
		held += max(h, 0)
	}
	whole := max(gpus, held)
	free := whole - held
	w := a.weights[:0]
	for _, h := range nb.held {
		w = append(w, max(h, 0))
	}
	var bought []Holder
	boughtGPUs := 0.0
	if free > 0 && !nb.used {
		for _, b := range nb.boughtFor {
			boughtGPUs += max(b.GPUs, 0)
		}
		if boughtGPUs > 0 {
			bought = nb.boughtFor
		}
	}
	if free > 0 {
		if bought != nil {
			for _, b := range bought {
				w = append(w, free*max(b.GPUs, 0)/boughtGPUs)
			}
		} else {
			w = append(w, free)
		}
	}
	a.weights = w
	a.shares, a.rems = apportionInto(cost, w, a.shares[:0], a.rems[:0])
	amount := func(i int) Amount { return Amount{Micros: a.shares[i], GPUHours: w[i] * hours * gpus / whole} }
	for k, jb := range nb.jobs {
		am := amount(k)
		jb.rec.Micros += int64(am.Micros)
		jb.rec.GPUHours += am.GPUHours
		if jb.hb == nil || !jb.hourAt.Equal(hour) {
			jb.hb, jb.hourAt = a.hour(hour, jb.tt), hour
		}
		jb.hb.add(nb.pool, Used, am)
	}
	if free <= 0 {
		return
	}
	k := len(nb.jobs)
	if bought == nil {
		a.hour(hour, idleTT).add(nb.pool, Idle, amount(k))
		return
	}
	for i, b := range bought {
		a.hour(hour, teamTier{b.Team, b.Tier}).add(nb.pool, BoughtFor, amount(k+i))
	}
}

// hourEnd is the end of from's hour, or now if sooner.
func hourEnd(from, now time.Time) time.Time {
	if e := from.Truncate(time.Hour).Add(time.Hour); e.Before(now) {
		return e
	}
	return now
}
