package usage

import (
	"math"
	"slices"
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
	// IdleWindow is how long a job's GPUs must stay idle for that time to
	// be allocated-idle (10 minutes when 0).
	IdleWindow time.Duration
	// Teams are kept whatever other teams come first (the config's teams:
	// a budget's spend is counted under its team's own name); they take
	// room within MaxTeams.
	Teams []string
}

// teamTier is a usage hour's team and tier.
type teamTier struct{ team, tier string }

// idleTT is the team and tier of idle charges.
var idleTT = teamTier{IdleLabel, IdleLabel}

// nodeBook is what the accountant keeps of a node between cycles: its
// meter, what the last snapshot saw on it, and its cost not yet split
// among its jobs (acc).
type nodeBook struct {
	id    string
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
	// cps are the jobs' last checkpoints as last read, to see a new one
	// without touching the job's book; read is set once its jobs have
	// been read.
	cps  []time.Time
	read bool
	// idle is each job's idleness on the node, as last read.
	idle []slotIdle
	// acc is what a settle charges the node within one hour, split at
	// the hour's end and at the settle's (chargeHours, splitAcc).
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
	// said is the team and tier as last said, before folding.
	said teamTier
	// refs counts the nodes that list the job, and gpus the GPUs it
	// holds on them: it ends when no node lists it.
	refs int
	gpus int
	// restored is set on a running job's record taken back from the
	// store (Restore) and not seen since; queued once its queue time is
	// counted; flushGen is the observation that last put its record in a
	// flush.
	restored bool
	queued   bool
	flushGen uint64
	// hb is the job's team and tier's book of the hour hourAt.
	hourAt time.Time
	hb     *hourBook
}

// settleEvery is how many cycles apart a node's cost is split among its
// jobs while nothing on it changes: each cycle settles one in
// settleEvery of the nodes, so a cycle's cost grows with the nodes, not
// their jobs, and the books the store keeps trail the fleet by at most
// that many cycles.
const settleEvery = 30

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
// A node is charged lazily: its cost since its last charge is reckoned
// and split among its jobs every settleEvery cycles, when its jobs, size
// or price change, when its hour has ended, when it goes, and before the
// books are read (Live, Totals); a node whose jobs are as before costs a
// cycle no lookup of them. Its methods are safe for concurrent use.
type Accountant struct {
	mu           sync.Mutex
	teams, tiers *Labels
	gen          uint64
	slots        uint64
	lastAt       time.Time
	// restoredBy, once set (at the first observation after Restore), is
	// when the restored jobs no node has listed since are taken to have
	// ended: agents report to a new controller within their interval,
	// and its first cycles see no jobs until they do.
	restoredBy time.Time
	restored   bool
	// window is Options.IdleWindow; splitAt is the time a settle charges
	// up to, which decides whether an idle run is as long as the window.
	window  time.Duration
	splitAt time.Time
	// tombs are the restored jobs taken for ended at the grace, by ID,
	// in case a node lists them later; forgotten at the next Restore.
	tombs map[string]*jobBook
	// order are the nodes of the last snapshot, in its order, so that a
	// snapshot of the same nodes finds each without a lookup.
	order, prev []*nodeBook
	pending     []Waiting // folded, as last seen
	nodes       map[string]*nodeBook
	credits     map[string][]credit
	jobs        map[string]*jobBook
	hours       map[time.Time]map[teamTier]*hourBook
	// closed are the totals of the hours closed, for Totals.
	closed       map[Key]Amount
	closedWaited map[teamTier]float64
	queueTotal   map[teamTier]*Histogram
	// shown are the GPU-hours Totals last gave, which it never goes
	// below.
	shown       map[Key]float64
	shownWaited map[TeamTier]float64
	// recent is each team's used GPU-hours of the hours closed, decayed
	// to recentAt (ForForecast).
	recent   map[string]float64
	recentAt time.Time
	waiting  []Waiting
	// scratch
	ended    []*jobBook
	fresh    []*jobBook
	flushing []*jobBook
	weights  []float64
	shares   []Micros
	rems     []remainder
}

// NewAccountant makes an Accountant.
func NewAccountant(o Options) *Accountant {
	if o.MaxTeams <= 0 {
		o.MaxTeams = 100
	}
	if o.MaxTiers <= 0 {
		o.MaxTiers = 20
	}
	if o.IdleWindow <= 0 {
		o.IdleWindow = 10 * time.Minute
	}
	teams := NewLabels(o.MaxTeams)
	for _, t := range o.Teams {
		teams.Fold(t)
	}
	return &Accountant{window: o.IdleWindow,
		teams: teams, tiers: NewLabels(o.MaxTiers),
		nodes: map[string]*nodeBook{}, credits: map[string][]credit{}, jobs: map[string]*jobBook{}, tombs: map[string]*jobBook{},
		hours: map[time.Time]map[teamTier]*hourBook{}, closed: map[Key]Amount{},
		closedWaited: map[teamTier]float64{}, queueTotal: map[teamTier]*Histogram{}, recent: map[string]float64{},
	}
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
		a.wait(s.At)
	}
	// An hour is closed once no charge can reach it: a node first seen
	// now is charged from as early as the last snapshot, at the next; a
	// node charged last before it is charged now.
	cutoff := a.lastAt.UTC().Truncate(time.Hour)
	a.gen++
	a.ended, a.fresh = a.ended[:0], a.fresh[:0]
	a.prev, a.order = a.order, a.prev[:0]
	i := -1
	s.visit(func(n *Seen) {
		i++
		var nb *nodeBook
		if i < len(a.prev) && a.prev[i].id == n.ID {
			nb = a.prev[i]
		} else if nb = a.nodes[n.ID]; nb == nil {
			nb = a.newNode(n, s.At)
			a.nodes[n.ID] = nb
		}
		if nb.gen == a.gen {
			return // listed twice
		}
		a.order = append(a.order, nb)
		refresh := (nb.slot+a.gen)%settleEvery == 0
		if nb.read && (refresh || nb.gpus != n.GPUs || nb.pool != n.Pool || nb.price != n.Price || nb.meter.At().Before(cutoff)) {
			a.settle(nb, s.At) // split among what it was
		}
		nb.gen, nb.pool, nb.gpus, nb.price = a.gen, n.Pool, n.GPUs, n.Price
		if n.JobsSeq == 0 || n.JobsSeq != nb.seq {
			a.seeJobs(nb, n, s.At)
		} else if refresh {
			// What a scheduler said of the jobs since (their owners,
			// when they were submitted), and their checkpoints.
			a.labels(nb, n, s.At)
			a.checkpoints(nb, n)
		}
	})
	for _, nb := range a.prev {
		if nb.gen != a.gen && a.nodes[nb.id] == nb {
			a.settle(nb, s.At)
			a.drop(nb)
			delete(a.nodes, nb.id)
		}
	}
	if a.restored {
		if a.restoredBy.IsZero() {
			a.restoredBy = s.At.Add(restoreGrace)
		}
		if !s.At.Before(a.restoredBy) {
			a.restored = false
			for _, jb := range a.jobs {
				if jb.restored && jb.refs == 0 {
					a.ended = append(a.ended, jb)
				}
			}
		}
	}
	for _, jb := range a.ended {
		if jb.refs == 0 && !jb.restored && a.jobs[jb.rec.ID] == jb || jb.restored && !a.restored && a.jobs[jb.rec.ID] == jb {
			jb.rec.End = s.At
			if jb.rec.End.Before(jb.rec.Start) {
				jb.rec.End = jb.rec.Start // a clock stepped back
			}
			if jb.restored {
				// Not listed within the grace: ended, unless a node
				// lists it again later (a pool unread for long), when
				// its record goes on (job).
				a.tombs[jb.rec.ID] = jb
			}
			f.Jobs = append(f.Jobs, jb.rec)
			delete(a.jobs, jb.rec.ID)
		}
	}
	for _, jb := range a.fresh {
		a.flushJob(jb)
	}
	for _, jb := range a.flushing {
		if jb.refs > 0 || jb.restored {
			f.Jobs = append(f.Jobs, jb.rec)
		}
	}
	a.flushing = a.flushing[:0]
	a.pending = a.pending[:0]
	a.waiting = a.waiting[:0]
	at := map[teamTier]int{}
	for _, w := range s.Pending {
		w.Team, w.Tier, w.Scope = a.teams.Fold(w.Team), a.tiers.Fold(w.Tier), fleet.ScopedDemand{}
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
	a.lastAt = s.At
	closing := false
	for h := range a.hours {
		closing = closing || h.Before(cutoff)
	}
	if closing {
		// Not an hour an idle run's charges still wait to be counted in.
		cutoff, closing = a.heldFrom(cutoff), false
		for h := range a.hours {
			closing = closing || h.Before(cutoff)
		}
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
	nb := &nodeBook{id: n.ID, slot: a.slots, pool: n.Pool, gpus: n.GPUs, price: n.Price}
	start := now
	// A reserved node is charged from now: its reservation's slot was
	// charged up to now, empty (ReservationNode).
	if !a.lastAt.IsZero() && n.LaunchedAt.Before(now) && !n.Reserved {
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
	same, idled := len(nb.jobs) == len(n.Jobs), false
	for k := 0; same && k < len(n.Jobs); k++ {
		j := &n.Jobs[k]
		same = nb.jobs[k].rec.ID == j.ID && nb.held[k] == float64(j.GPUs)
		idled = idled || !nb.idle[k].since.Equal(j.IdleSince) || nb.idle[k].before != j.FirstBusy.IsZero()
	}
	if same && idled {
		if nb.read {
			a.settle(nb, now) // charged as it was idle or not so far
		}
		for k := range n.Jobs {
			nb.idle[k] = idleOf(&n.Jobs[k], &nb.idle[k])
		}
	}
	if !same {
		if nb.read {
			// What it cost so far is its jobs' as they were (a node
			// first seen is charged from its start as first seen).
			a.settle(nb, now)
		}
		was, wasIdle := nb.jobs, nb.idle
		a.drop(nb)
		nb.jobs = make([]*jobBook, len(n.Jobs))
		nb.held = make([]float64, len(n.Jobs))
		nb.cps = make([]time.Time, len(n.Jobs))
		nb.idle = make([]slotIdle, len(n.Jobs))
		for k := range n.Jobs {
			j := &n.Jobs[k]
			// An idle run goes on where its job still is.
			var st *slotIdle
			if k < len(was) && was[k].rec.ID == j.ID {
				st = &wasIdle[k]
			} else if i := slices.IndexFunc(was, func(jb *jobBook) bool { return jb.rec.ID == j.ID }); i >= 0 {
				st = &wasIdle[i]
			}
			nb.idle[k] = idleOf(j, st)
			jb := a.job(j, n.Pool, now)
			jb.refs++
			jb.restored = false
			jb.gpus += j.GPUs
			jb.rec.GPUs, jb.rec.Nodes = max(jb.rec.GPUs, jb.gpus), max(jb.rec.Nodes, jb.refs)
			nb.jobs[k], nb.held[k] = jb, float64(j.GPUs)
		}
		// Bought for a team until its first job: from here its free
		// GPUs are idle.
		nb.used = nb.used || len(nb.jobs) > 0
	}
	a.labels(nb, n, now)
	a.checkpoints(nb, n)
	nb.seq, nb.read = n.JobsSeq, true
}

// labels takes what n says of its jobs' owners and times where it says
// more than their records: a team or tier said after the job was first
// seen (a scheduler's read after its start, a registration again) gets
// the node's cost from now, what it cost so far split as it was; a
// submission or eligibility said late counts the job's queue time. A
// label left out keeps the one said before.
func (a *Accountant) labels(nb *nodeBook, n *Seen, now time.Time) {
	for k := range n.Jobs {
		if k >= len(nb.jobs) {
			return
		}
		j, jb := &n.Jobs[k], nb.jobs[k]
		tt := jb.tt
		if j.Team != "" && j.Team != jb.said.team {
			tt.team, jb.said.team = a.teams.Fold(j.Team), j.Team
		}
		if j.Tier != "" && j.Tier != jb.said.tier {
			tt.tier, jb.said.tier = a.tiers.Fold(j.Tier), j.Tier
		}
		if tt != jb.tt {
			a.settle(nb, now)
			jb.tt, jb.hb = tt, nil
			jb.rec.Team, jb.rec.Tier = tt.team, tt.tier
		}
		if jb.rec.Name == "" {
			jb.rec.Name = j.Name
		}
		if jb.rec.Submitted.IsZero() && !j.Submitted.IsZero() || jb.rec.Eligible.IsZero() && !j.Eligible.IsZero() {
			jb.rec.Submitted, jb.rec.Eligible = orTime(jb.rec.Submitted, sane(j.Submitted)), orTime(jb.rec.Eligible, sane(j.Eligible))
			a.queue(jb, now)
		}
	}
}

// flushJob puts jb's record in this observation's flush, once.
func (a *Accountant) flushJob(jb *jobBook) {
	if jb.flushGen != a.gen {
		jb.flushGen = a.gen
		a.flushing = append(a.flushing, jb)
	}
}

// checkpoints takes the node's jobs' last checkpoints: a job's book only
// where its checkpoint is new.
func (a *Accountant) checkpoints(nb *nodeBook, n *Seen) {
	for k := range n.Jobs {
		if k >= len(nb.cps) {
			return
		}
		if cp := n.Jobs[k].LastCheckpoint; cp.After(nb.cps[k]) {
			nb.cps[k] = cp
			if r := &nb.jobs[k].rec; cp.After(r.LastCheckpoint) && inRange(cp) {
				r.LastCheckpoint = cp
				r.Checkpoints++
			}
		}
	}
}

// restoreGrace is how long after a restart a restored job's record waits
// for a node to list it again before it is taken to have ended.
const restoreGrace = 10 * time.Minute

// inRange reports whether t can be kept in a record: after 1970 began
// and before 2262.
func inRange(t time.Time) bool {
	return t.After(time.Unix(0, 0)) && t.Before(time.Unix(0, math.MaxInt64))
}

// sane is t, or zero where no record can keep it.
func sane(t time.Time) time.Time {
	if !inRange(t) {
		return time.Time{}
	}
	return t
}

// orTime is t, or else u when t is zero.
func orTime(t, u time.Time) time.Time {
	if t.IsZero() {
		return u
	}
	return t
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

// settle charges nb up to now, as it has been since its last charge, and
// splits what it cost since its last split among its jobs and its free
// GPUs' owners, into their books. A node is charged only here: while
// nothing on it changes, a cycle costs it nothing.
func (a *Accountant) settle(nb *nodeBook, now time.Time) {
	a.splitAt = now
	a.chargeHours(nb, now)
	a.splitAcc(nb)
}

// splitAcc splits nb's accumulated cost into the books.
func (a *Accountant) splitAcc(nb *nodeBook) {
	if !nb.acc.set {
		return
	}
	if nb.gpus > 0 || len(nb.jobs) > 0 {
		// (A reservation with every slot filled has no GPU and costs
		// nothing: nothing to split.)
		a.split(nb, nb.acc.cost, nb.acc.hours, nb.acc.hour)
	}
	nb.acc.set, nb.acc.cost, nb.acc.hours = false, 0, 0
}

// settleAll settles every node up to the last snapshot: the books are
// then whole to it.
func (a *Accountant) settleAll() {
	for _, nb := range a.order {
		a.settle(nb, a.lastAt)
	}
}

// job is j's book, made if j is new: its labels folded, its start (now
// where it says none, or one ahead), and its queue time counted in the
// hour it was first seen.
func (a *Accountant) job(j *fleet.Job, pool string, now time.Time) *jobBook {
	if jb := a.jobs[j.ID]; jb != nil {
		return jb
	}
	if jb := a.tombs[j.ID]; jb != nil {
		// A restored job taken for ended goes on with its record.
		delete(a.tombs, j.ID)
		jb.rec.End, jb.restored = time.Time{}, false
		a.jobs[j.ID] = jb
		a.flushJob(jb)
		return jb
	}
	start := j.Start
	if !inRange(start) || start.After(now) {
		start = now
	}
	jb := &jobBook{rec: state.UsageJob{
		ID: j.ID, Team: a.teams.Fold(j.Team), Tier: a.tiers.Fold(j.Tier), Name: j.Name, Pool: pool,
		Submitted: sane(j.Submitted), Eligible: sane(j.Eligible), Start: start, LastCheckpoint: sane(j.LastCheckpoint),
	}}
	if !jb.rec.LastCheckpoint.IsZero() {
		jb.rec.Checkpoints = 1
	}
	jb.tt, jb.said = teamTier{jb.rec.Team, jb.rec.Tier}, teamTier{j.Team, j.Tier}
	a.jobs[j.ID] = jb
	a.fresh = append(a.fresh, jb)
	a.hour(now.Truncate(time.Hour), jb.tt).started++
	a.queue(jb, now)
	return jb
}

// queue counts jb's queue time, once, in the hour of now, when its record
// says when it was submitted or became eligible.
func (a *Accountant) queue(jb *jobBook, now time.Time) {
	if jb.queued {
		return
	}
	j := fleet.Job{Start: jb.rec.Start, Submitted: jb.rec.Submitted, Eligible: jb.rec.Eligible}
	d, ok := j.QueueTime()
	if !ok {
		return
	}
	jb.queued = true
	q := math.Round(d.Seconds())
	b := a.hour(now.Truncate(time.Hour), jb.tt)
	b.queue = append(b.queue, int64(q))
	h := a.queueTotal[jb.tt]
	if h == nil {
		h = &Histogram{}
		a.queueTotal[jb.tt] = h
	}
	h.add(q)
}

// wait charges the pending demand of the last snapshot its waiting up to
// now, hour by hour.
func (a *Accountant) wait(now time.Time) {
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

// chargeHours charges nb its cost from its last charge to now, hour by
// hour, each hour's accumulated cost split when the next begins.
func (a *Accountant) chargeHours(nb *nodeBook, now time.Time) {
	for from := nb.meter.At(); from.Before(now); {
		to := hourEnd(from, now)
		hour := from.Truncate(time.Hour)
		cost := nb.meter.Charge(nb.price, to)
		if nb.acc.set && !nb.acc.hour.Equal(hour) {
			a.splitAcc(nb)
		}
		nb.acc.set, nb.acc.hour = true, hour
		nb.acc.cost += cost
		nb.acc.hours += to.Sub(from).Hours()
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
		if k < len(nb.idle) && !nb.idle[k].since.IsZero() {
			a.chargeIdle(jb, &nb.idle[k], nb.pool, hour, am)
		}
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
