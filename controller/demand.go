package controller

import (
	"cmp"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/fleetcast/autoscaler/agent/report"
	"github.com/fleetcast/autoscaler/apiauth"
	"github.com/fleetcast/autoscaler/fleet"
	"github.com/fleetcast/autoscaler/mig"
	"github.com/fleetcast/autoscaler/usage"
)

// DemandPattern is the route of the pending-demand endpoint.
const DemandPattern = "POST /v1/demand"

// DemandPush is what a scheduler sends to POST /v1/demand: the GPUs its
// jobs are waiting for now, per pool, per GPU model, or for any pool,
// demand it announces ahead, and when its running jobs are expected to
// end. Each push's pending lines replace the source's previous ones (a
// push with announcements or running lines but no "pending" leaves them;
// one with none of the three clears them); its running lines replace the
// source's previous ones, but for the ends of jobs pushed before, which
// can only move earlier (a push without "running", or with null, leaves
// them); its announcements add to, update or cancel the source's earlier
// ones, by id. A bad line refuses the whole push.
//
//	{"source": "slurm-prod", "pending": [{"pool": "a100-od", "gpus": 16}, {"gpu_model": "H100", "gpus": 8}, {"gpus": 4}],
//	 "announce": [{"id": "train-42", "start_at": "2026-12-01T09:00:00Z", "gpus": 64, "duration": "6h"}, {"id": "eval-7", "cancel": true}],
//	 "running": [{"job": "train-7", "expected_end": "2026-12-01T06:00:00Z"}]}
type DemandPush struct {
	// Source names the scheduler (or queue) pushing; pushes from different
	// sources add up.
	Source  string          `json:"source"`
	Pending []PendingDemand `json:"pending"`
	// Announce is demand wanted later (a pipeline's next stage, a booked
	// training run): it is provisioned one lead time before its start,
	// and forgotten once its start passes (its jobs are pending or running
	// by then, and pushed as such).
	Announce []AnnouncedDemand `json:"announce,omitempty"`
	// Running is when running jobs are expected to end: the scheduler's
	// time limits. Each is a hint on the job of that ID its agent reports
	// (fleet.Job.ExpectedEnd), as the agent's own -expected-end is.
	Running []RunningJob `json:"running"`
}

// RunningJob is one line of a push's running jobs: the job of this ID (as
// its agent registered it: `autoscaler-agent register -job`), on Node when set (the
// node's ID as the controller names it; otherwise on every node that
// reports it, as a multi-node job's do), is expected to end by
// ExpectedEnd, on the controller's clock. Of the schedulers' ends and the
// agent's, the earliest counts; IDs are matched across sources.
type RunningJob struct {
	Job         string    `json:"job"`
	Node        string    `json:"node,omitempty"`
	ExpectedEnd time.Time `json:"expected_end,omitzero"`
}

// runningKey is what a running line is about: a job, on a node or ("")
// on every node.
type runningKey struct{ job, node string }

func (r RunningJob) key() runningKey { return runningKey{r.Job, r.Node} }

// AnnouncedDemand is one announcement of a push: GPUs wanted from StartAt
// for Duration ("6h"; empty: until further notice), or, with Cancel, the
// cancellation of the source's announcement of that ID.
type AnnouncedDemand struct {
	ID       string    `json:"id"`
	StartAt  time.Time `json:"start_at,omitzero"`
	GPUs     int       `json:"gpus,omitempty"`
	Duration string    `json:"duration,omitempty"`
	Cancel   bool      `json:"cancel,omitempty"`
}

// The bounds of announcements and running lines: more, or further ahead,
// is a mistake.
const (
	maxAnnouncements  = 1000
	maxAnnounceAhead  = 90 * 24 * time.Hour
	maxAnnouncedSpell = 365 * 24 * time.Hour
	maxRunning        = 10_000
	maxRunningAhead   = 365 * 24 * time.Hour
)

// PendingDemand is one line of a push: GPUs waiting for a named pool, for
// any pool of a GPU model, for any pool serving a partition (a pool's
// partitions, from the slurm block; a comma-separated list for jobs
// pending in several), for a model's pools of a partition, or, with
// none, for any pool. The planner serves scoped demand in its pools only
// (fleet.ScopedDemand).
//
// MinGPUsPerNode, if set, narrows any scope but a pool to the pools whose
// nodes have at least that many GPUs (jobs asking 8 GPUs of one node are
// not served by 4-GPU nodes). Nodes, if set, asks for that many whole
// empty nodes of the scope's pools, whatever their width (jobs on several
// nodes: -N 2 runs on two nodes, not on one twice as wide); GPUs is then
// their GPUs, for the totals (fleet.ScopedDemand.Nodes). MIG, if set, is
// a MIG profile its jobs each ask one GPU instance of, Instances of them,
// served by the pools whose layout has it; GPUs is then the GPUs they
// need at least, for the totals (fleet.ScopedDemand.MIG).
type PendingDemand struct {
	Pool           string `json:"pool,omitempty"`
	GPUModel       string `json:"gpu_model,omitempty"`
	Partition      string `json:"partition,omitempty"`
	SlurmNode      string `json:"slurm_node,omitempty"`
	MinGPUsPerNode int    `json:"min_gpus_per_node,omitempty"`
	Nodes          int    `json:"nodes,omitempty"`
	MIG            string `json:"mig,omitempty"`
	Instances      int    `json:"instances,omitempty"`
	GPUs           int    `json:"gpus"`
	// Team and Tier are who the line's jobs belong to and their tier
	// (fleet.ValidLabel), for the report of who used what: the teams a
	// launch for pending demand is bought for, and each team's waiting.
	// Empty for unknown ("unattributed"). Jobs is how many jobs the line
	// stands for (1 when 0).
	Team string `json:"team,omitempty"`
	Tier string `json:"tier,omitempty"`
	Jobs int    `json:"jobs,omitempty"`
	// Requested marks the controller's Slurm source's lines for nodes
	// Slurm asks to power up (fleet.ScopedDemand.Requested); no push
	// sets it.
	Requested bool `json:"-"`
}

// maxGPUsPerNode bounds a pending line's GPUs per node.
const maxGPUsPerNode = 1024

// reservedSources is the prefix of the sources the controller's own
// readers push under (SlurmSourceName): a push may not take their names.
const reservedSources = "fleetcast:"

// Validate checks a push against the configured pools and the time now,
// and names the first bad field.
func (d *DemandPush) Validate(pools []fleet.Pool, now time.Time) error {
	if d.Source == "" || len(d.Source) > 128 {
		return errors.New("source: want a name of 1 to 128 characters")
	}
	if strings.HasPrefix(d.Source, reservedSources) {
		return fmt.Errorf("source: %q: names beginning %q are the controller's own sources", d.Source, reservedSources)
	}
	for i, p := range d.Pending {
		at := fmt.Sprintf("pending[%d]", i)
		switch {
		case p.Pool != "" && (p.GPUModel != "" || p.Partition != "" || p.SlurmNode != "" || p.MinGPUsPerNode != 0):
			return fmt.Errorf("%s: a pool is a scope of its own: want pool alone, or any of gpu_model, partition, slurm_node and min_gpus_per_node (none for any pool)", at)
		case p.SlurmNode != "" && !slices.ContainsFunc(pools, func(q fleet.Pool) bool { return slices.Contains(q.SlurmNodes, p.SlurmNode) }):
			return fmt.Errorf("%s.slurm_node: no pool has Slurm node %q", at, p.SlurmNode)
		case p.MinGPUsPerNode < 0 || p.MinGPUsPerNode > maxGPUsPerNode:
			return fmt.Errorf("%s.min_gpus_per_node: %d, want 0 to %d", at, p.MinGPUsPerNode, maxGPUsPerNode)
		case p.GPUs < 0 || p.GPUs > fleet.MaxDemandGPUs:
			return fmt.Errorf("%s.gpus: %d, want 0 to %d", at, p.GPUs, fleet.MaxDemandGPUs)
		case fleet.ValidLabel(p.Team) != "":
			return fmt.Errorf("%s.team: %s", at, fleet.ValidLabel(p.Team))
		case fleet.ValidLabel(p.Tier) != "":
			return fmt.Errorf("%s.tier: %s", at, fleet.ValidLabel(p.Tier))
		case p.Jobs < 0 || p.Jobs > fleet.MaxDemandGPUs:
			return fmt.Errorf("%s.jobs: %d, want 0 to %d", at, p.Jobs, fleet.MaxDemandGPUs)
		case p.MIG != "" && (p.Instances < 1 || p.Instances > fleet.MaxDemandGPUs):
			return fmt.Errorf("%s.instances: %d, want 1 to %d GPU instances of profile %s", at, p.Instances, fleet.MaxDemandGPUs, p.MIG)
		case p.MIG != "" && p.GPUs < 1:
			return fmt.Errorf("%s.gpus: %d; a line of MIG instances counts the GPUs they need at least (its instances over the most a GPU of its pools holds), 1 or more", at, p.GPUs)
		case p.MIG == "" && p.Instances != 0:
			return fmt.Errorf("%s.instances: %d, but no MIG profile is named (mig)", at, p.Instances)
		case p.MIG != "" && p.Nodes != 0:
			return fmt.Errorf("%s.nodes: a line for a MIG profile counts instances, not whole nodes", at)
		case p.MIG != "" && !slices.ContainsFunc(pools, func(q fleet.Pool) bool { return hasProfile(q, p.MIG) }):
			return fmt.Errorf("%s.mig: no pool's GPU model has MIG profile %q", at, p.MIG)
		case p.Nodes < 0 || p.Nodes > p.GPUs:
			return fmt.Errorf("%s.nodes: %d, want 0 to its gpus (%d): whole nodes, each of at least one GPU", at, p.Nodes, p.GPUs)
		case p.Pool != "" && !slices.ContainsFunc(pools, func(q fleet.Pool) bool { return q.Name == p.Pool }):
			return fmt.Errorf("%s.pool: unknown pool %q", at, p.Pool)
		case p.GPUModel != "" && (slices.Contains(strings.Split(p.GPUModel, "|"), "") || !slices.ContainsFunc(pools, func(q fleet.Pool) bool { return q.ServesModel(p.GPUModel) })):
			return fmt.Errorf("%s.gpu_model: no pool has GPU model %q", at, p.GPUModel)
		case p.Partition != "" && !slices.ContainsFunc(pools, func(q fleet.Pool) bool { return q.ServesPartition(p.Partition) }):
			return fmt.Errorf("%s.partition: no pool serves partition %q (a slurm block's partition blocks name each partition's pools)", at, p.Partition)
		case p.Partition != "" && p.GPUModel != "" && !slices.ContainsFunc(pools, func(q fleet.Pool) bool {
			return q.ServesPartition(p.Partition) && q.ServesModel(p.GPUModel)
		}):
			return fmt.Errorf("%s: no pool of partition %q has GPU model %q", at, p.Partition, p.GPUModel)
		case p.scope() != (fleet.ScopedDemand{}) && p.MIG == "" && !slices.ContainsFunc(pools, func(q fleet.Pool) bool { return p.scope().Serves(&q) }):
			return fmt.Errorf("%s: no pool serves %s", at, p.scope())
		}
	}
	if len(d.Announce) > maxAnnouncements {
		return fmt.Errorf("announce: %d announcements, want at most %d", len(d.Announce), maxAnnouncements)
	}
	seen := map[string]bool{}
	for i, a := range d.Announce {
		at := fmt.Sprintf("announce[%d]", i)
		if a.ID == "" || len(a.ID) > 128 {
			return fmt.Errorf("%s.id: want an id of 1 to 128 characters", at)
		}
		if seen[a.ID] {
			return fmt.Errorf("%s.id: %q announced twice in one push", at, a.ID)
		}
		seen[a.ID] = true
		if a.Cancel {
			if !a.StartAt.IsZero() || a.GPUs != 0 || a.Duration != "" {
				return fmt.Errorf("%s: a cancellation has only id and cancel", at)
			}
			continue
		}
		if _, err := a.duration(); err != nil {
			return fmt.Errorf("%s.duration: %w", at, err)
		}
		switch {
		case a.StartAt.IsZero():
			return fmt.Errorf("%s.start_at: required (RFC 3339, e.g. 2026-12-01T09:00:00Z)", at)
		case a.StartAt.After(now.Add(maxAnnounceAhead)):
			return fmt.Errorf("%s.start_at: %s is more than %s ahead", at, a.StartAt.Format(time.RFC3339), fleet.FormatDuration(maxAnnounceAhead))
		case a.GPUs < 0 || a.GPUs > fleet.MaxDemandGPUs:
			return fmt.Errorf("%s.gpus: %d, want 0 to %d", at, a.GPUs, fleet.MaxDemandGPUs)
		}
	}
	return d.validateRunning(now)
}

// validateRunning checks the push's running lines.
func (d *DemandPush) validateRunning(now time.Time) error {
	if len(d.Running) > maxRunning {
		return fmt.Errorf("running: %d jobs, want at most %d", len(d.Running), maxRunning)
	}
	seen := make(map[runningKey]bool, len(d.Running))
	for i, r := range d.Running {
		at := fmt.Sprintf("running[%d]", i)
		switch {
		case r.Job == "" || len(r.Job) > report.MaxIDLen:
			return fmt.Errorf("%s.job: want the job's id, 1 to %d characters", at, report.MaxIDLen)
		case len(r.Node) > report.MaxIDLen:
			return fmt.Errorf("%s.node: %d characters, want at most %d", at, len(r.Node), report.MaxIDLen)
		case r.ExpectedEnd.IsZero():
			return fmt.Errorf("%s.expected_end: required (RFC 3339, e.g. 2026-12-01T09:00:00Z)", at)
		case r.ExpectedEnd.After(now.Add(maxRunningAhead)):
			return fmt.Errorf("%s.expected_end: %s is more than %s ahead", at, r.ExpectedEnd.Format(time.RFC3339), fleet.FormatDuration(maxRunningAhead))
		case seen[r.key()]:
			return fmt.Errorf("%s: job %q (node %q) listed twice in one push", at, r.Job, r.Node)
		}
		seen[r.key()] = true
	}
	return nil
}

// duration is the announcement's duration; 0 when it has none.
func (a AnnouncedDemand) duration() (time.Duration, error) {
	if a.Duration == "" {
		return 0, nil
	}
	d, err := fleet.ParseDuration(a.Duration)
	switch {
	case err != nil:
		return 0, err
	case d <= 0 || d > maxAnnouncedSpell:
		return 0, fmt.Errorf("%q, want above 0 and at most %s", a.Duration, fleet.FormatDuration(maxAnnouncedSpell))
	}
	return d, nil
}

// Pending holds the schedulers' latest pushes. A push older than its TTL is
// forgotten: a scheduler that stopped pushing no longer holds capacity up.
// It is safe for concurrent use.
type Pending struct {
	// TTL is how long a push counts (10 minutes when 0).
	TTL time.Duration
	// Budgeted are the teams with burst budgets (fleet.Team.Budgeted):
	// Demand keeps their scoped lines apart, each naming its team.
	Budgeted []string

	mu       sync.Mutex
	bySource map[string]pushed
	// announced are each source's announcements, by id.
	announced map[string]map[string]fleet.Announcement
	// running are each source's latest running lines, as pushed.
	running map[string]pushedRunning
}

type pushedRunning struct {
	at    time.Time
	lines []RunningJob
}

type pushed struct {
	at   time.Time
	push DemandPush
}

// Set records a source's push at time at, replacing its previous one.
func (p *Pending) Set(at time.Time, d DemandPush) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.bySource == nil {
		p.bySource = map[string]pushed{}
	}
	d.Pending = slices.Clone(d.Pending)
	d.Announce = nil
	p.bySource[d.Source] = pushed{at: at, push: d}
}

// SetRunning records a source's running lines (d.Running) at time at,
// replacing its previous ones; a job (on a node) it pushed before keeps
// the earlier of its two ends, so that a scheduler pushing ever later ends
// cannot hold a node. d is checked (Validate).
func (p *Pending) SetRunning(at time.Time, d DemandPush) { p.setRunning(at, d, true) }

// setRunning is SetRunning; without keepEarlier, the lines replace the
// source's previous ones as they are (a source the controller trusts: its
// own read of a scheduler, whose time limits may be raised).
func (p *Pending) setRunning(at time.Time, d DemandPush, keepEarlier bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.running == nil {
		p.running = map[string]pushedRunning{}
	}
	var before map[runningKey]time.Time
	if old, ok := p.running[d.Source]; ok && keepEarlier && at.Sub(old.at) <= p.ttl() {
		before = make(map[runningKey]time.Time, len(old.lines))
		for _, l := range old.lines {
			before[l.key()] = l.ExpectedEnd
		}
	}
	lines := slices.Clone(d.Running)
	for i, l := range lines {
		if e, ok := before[l.key()]; ok && e.Before(l.ExpectedEnd) {
			lines[i].ExpectedEnd = e
		}
	}
	p.running[d.Source] = pushedRunning{at: at, lines: lines}
}

// Ends is the expected ends of running jobs that fresh pushes tell (within
// the TTL, as pending demand), for Apply.
func (p *Pending) Ends(now time.Time) Ends {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out Ends
	for src, x := range p.running {
		if now.Sub(x.at) > p.ttl() {
			delete(p.running, src)
			continue
		}
		for _, l := range x.lines {
			if out == nil {
				out = Ends{}
			}
			out[l.Job] = append(out[l.Job], nodeEnd{node: l.Node, at: l.ExpectedEnd})
		}
	}
	return out
}

// Ends are schedulers' expected ends of running jobs, by job ID.
type Ends map[string][]nodeEnd

type nodeEnd struct {
	node string // "" for every node
	at   time.Time
}

// Apply sets the expected end of each of n's jobs that the schedulers
// name to the earliest end they give for it on n, when that is earlier
// than the end its agent reported (or it reported none).
func (e Ends) Apply(n *fleet.Node) {
	if len(e) == 0 {
		return
	}
	for i := range n.Jobs {
		j := &n.Jobs[i]
		for _, x := range e[j.ID] {
			if (x.node == "" || x.node == n.ID) && (j.ExpectedEnd.IsZero() || x.at.Before(j.ExpectedEnd)) {
				j.ExpectedEnd = x.at
			}
		}
	}
}

// Announce records a source's announcements (d.Announce): each adds to,
// updates or cancels (Cancel) the source's announcement of its id. d is
// checked (Validate).
func (p *Pending) Announce(d DemandPush) {
	if len(d.Announce) == 0 {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.announced == nil {
		p.announced = map[string]map[string]fleet.Announcement{}
	}
	mine := p.announced[d.Source]
	if mine == nil {
		mine = map[string]fleet.Announcement{}
		p.announced[d.Source] = mine
	}
	for _, a := range d.Announce {
		if a.Cancel {
			delete(mine, a.ID)
			continue
		}
		dur, _ := a.duration()
		mine[a.ID] = fleet.Announcement{ID: d.Source + "/" + a.ID, StartAt: a.StartAt, GPUs: a.GPUs, Duration: dur}
	}
	if len(mine) == 0 {
		delete(p.announced, d.Source)
	}
}

// Announced is the announcements whose start is after now (ahead), and
// those whose start has passed and whose duration has not (underWay:
// their jobs are in the demand now, and the loop leaves them out of the
// history it forecasts from), each by start (then id); the rest, over or
// without a duration and started, are forgotten.
func (p *Pending) Announced(now time.Time) (ahead, underWay []fleet.Announcement) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for src, mine := range p.announced {
		for id, a := range mine {
			switch {
			case a.StartAt.After(now):
				ahead = append(ahead, a)
			case a.Duration > 0 && a.Covers(now):
				underWay = append(underWay, a)
			default:
				delete(mine, id)
			}
		}
		if len(mine) == 0 {
			delete(p.announced, src)
		}
	}
	for _, as := range [][]fleet.Announcement{ahead, underWay} {
		slices.SortFunc(as, func(a, b fleet.Announcement) int {
			return cmp.Or(a.StartAt.Compare(b.StartAt), strings.Compare(a.ID, b.ID))
		})
	}
	return ahead, underWay
}

// Demand is the pending GPUs of every source whose push is fresh at now,
// and the part of them that waits for a pool, a GPU model or a partition,
// summed by scope and tier (GPU models without regard to case), and by
// team for the teams with budgets (Budgeted), sorted by scope, then tier,
// then team.
func (p *Pending) Demand(now time.Time) (int, []fleet.ScopedDemand) {
	ttl := p.ttl()
	p.mu.Lock()
	defer p.mu.Unlock()
	total := 0
	// By scope, lines of whole nodes apart.
	type key struct {
		scope fleet.ScopedDemand
		whole bool
	}
	byScope := map[key]fleet.ScopedDemand{}
	for src, x := range p.bySource {
		if now.Sub(x.at) > ttl {
			delete(p.bySource, src)
			continue
		}
		for _, l := range x.push.Pending {
			total += l.GPUs
			sc := l.scope()
			if l.GPUs <= 0 || sc == (fleet.ScopedDemand{}) && l.Nodes == 0 {
				continue
			}
			sc.Tier, sc.Requested = l.Tier, l.Requested // not part of the scope: the planner buys by them
			if slices.Contains(p.Budgeted, l.Team) {
				sc.Team = l.Team // nothing is bought for it while its team is over budget
			}
			k := key{scope: sc, whole: l.Nodes > 0}
			sum := byScope[k]
			sum.GPUs += l.GPUs
			sum.Nodes += l.Nodes
			sum.Instances += l.Instances
			byScope[k] = sum
		}
	}
	scoped := make([]fleet.ScopedDemand, 0, len(byScope))
	for k, sum := range byScope {
		d := k.scope
		d.GPUs, d.Nodes, d.Instances = sum.GPUs, sum.Nodes, sum.Instances
		scoped = append(scoped, d)
	}
	slices.SortFunc(scoped, func(a, b fleet.ScopedDemand) int {
		return cmp.Or(strings.Compare(a.Pool, b.Pool), strings.Compare(a.Partition, b.Partition), strings.Compare(a.SlurmNode, b.SlurmNode), strings.Compare(a.GPUModel, b.GPUModel),
			cmp.Compare(a.MinGPUsPerNode, b.MinGPUsPerNode), strings.Compare(a.MIG, b.MIG), cmp.Compare(a.Nodes, b.Nodes), strings.Compare(a.Tier, b.Tier),
			strings.Compare(a.Team, b.Team), strings.Compare(strconv.FormatBool(a.Requested), strconv.FormatBool(b.Requested)))
	})
	return total, scoped
}

// Tiers is the pending GPUs of the fresh pushes at now by tier
// (fleet.State.PendingTiers), each tier once, in the order they first
// appear (sources by name, then their lines): the controller's Slurm
// source's too, whose lines carry its jobs' tiers. Lines of no tier are
// left to the default tier (fleet.PendingByTier).
func (p *Pending) Tiers(now time.Time) []fleet.TierGPUs {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []fleet.TierGPUs
	for _, src := range p.fresh(now) {
		for _, l := range p.bySource[src].push.Pending {
			if l.Tier == "" || l.GPUs <= 0 {
				continue
			}
			if i := slices.IndexFunc(out, func(t fleet.TierGPUs) bool { return t.Tier == l.Tier }); i >= 0 {
				out[i].GPUs += l.GPUs
			} else {
				out = append(out, fleet.TierGPUs{Tier: l.Tier, GPUs: l.GPUs})
			}
		}
	}
	return out
}

// Teams is the pending GPUs of the fresh pushes at now of each team with
// a budget (Budgeted), by team and tier (fleet.State.PendingTeams), in
// the order they first appear: summed from the lines PendingGPUs is
// (Demand), the Slurm source's too, whose lines carry its jobs' accounts
// and only the GPUs a pool serves.
func (p *Pending) Teams(now time.Time) []fleet.TeamGPUs {
	if len(p.Budgeted) == 0 {
		return nil
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []fleet.TeamGPUs
	for _, src := range p.fresh(now) {
		for _, l := range p.bySource[src].push.Pending {
			if l.GPUs <= 0 || !slices.Contains(p.Budgeted, l.Team) {
				continue
			}
			if i := slices.IndexFunc(out, func(t fleet.TeamGPUs) bool { return t.Team == l.Team && t.Tier == l.Tier }); i >= 0 {
				out[i].GPUs += l.GPUs
			} else {
				out = append(out, fleet.TeamGPUs{Team: l.Team, Tier: l.Tier, GPUs: l.GPUs})
			}
		}
	}
	return out
}

// fresh is the sources whose pushes count at now, by name. Callers hold
// p.mu.
func (p *Pending) fresh(now time.Time) []string {
	ttl := p.ttl()
	return slices.DeleteFunc(slices.Sorted(maps.Keys(p.bySource)), func(src string) bool { return now.Sub(p.bySource[src].at) > ttl })
}

// Waiting is the demand the fresh pushes say is pending now, line by
// line, with each line's team, tier and scope, for the report of who used
// what; a line of no team is unattributed. The controller's own Slurm
// source is left out: its read says whose its jobs are
// (SlurmSource.Waiting).
func (p *Pending) Waiting(now time.Time) []usage.Waiting {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []usage.Waiting
	for _, src := range p.fresh(now) {
		if src == SlurmSourceName {
			continue
		}
		for _, l := range p.bySource[src].push.Pending {
			if l.GPUs > 0 {
				out = append(out, usage.Waiting{Team: l.Team, Tier: l.Tier, GPUs: l.GPUs, Jobs: max(l.Jobs, 1), Scope: l.scope()})
			}
		}
	}
	return out
}

// hasProfile reports whether pool p's GPU model has MIG profile name (its
// layout may not name it: demand for it is then unmet, and the plan says
// so).
func hasProfile(p fleet.Pool, name string) bool {
	m, err := mig.Lookup(p.GPUModel)
	return err == nil && m.Profile(name) != nil
}

// scope is the line's scope, GPU models in upper case (they match
// without regard to case); the zero scope for any pool. It leaves its
// nodes and GPUs out.
func (p PendingDemand) scope() fleet.ScopedDemand {
	return fleet.ScopedDemand{Pool: p.Pool, GPUModel: strings.ToUpper(p.GPUModel), Partition: p.Partition, SlurmNode: p.SlurmNode,
		MinGPUsPerNode: p.MinGPUsPerNode, MIG: strings.ToLower(p.MIG)}
}

// ttl is how long a push counts.
func (p *Pending) ttl() time.Duration {
	if p.TTL <= 0 {
		return 10 * time.Minute
	}
	return p.TTL
}

// DemandReceiver serves POST /v1/demand for schedulers: a JSON
// DemandPush, and every refusal a 4xx with the reason as text that
// changes nothing. The router it is served on checks the caller's token
// (scope demand: apiauth.NeedDemand).
type DemandReceiver struct {
	Pools   []fleet.Pool
	Pending *Pending
	// Now is the controller's clock (time.Now when nil).
	Now func() time.Time
	// MaxBytes bounds a push's body (1 MiB when 0: room for about 10,000
	// running jobs).
	MaxBytes int64
	Log      hclog.Logger

	// rootWarned are the sources warned that they push with the root
	// token.
	rootWarned sync.Map
}

// ServeHTTP handles one push.
func (dr *DemandReceiver) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	status, reason := dr.receive(w, r)
	if status != http.StatusNoContent {
		if dr.Log != nil {
			dr.Log.Debug("demand push refused", "status", status, "reason", reason)
		}
		http.Error(w, reason, status)
		return
	}
	w.WriteHeader(status)
}

func (dr *DemandReceiver) receive(w http.ResponseWriter, r *http.Request) (int, string) {
	limit := dr.MaxBytes
	if limit <= 0 {
		limit = 1 << 20
	}
	body, status, reason := report.ReadJSON(w, r, limit, "push")
	if status != http.StatusOK {
		return status, reason
	}
	var push DemandPush
	if err := fleet.DecodeJSON(body, &push); err != nil {
		return http.StatusBadRequest, "demand: " + err.Error()
	}
	now := time.Now
	if dr.Now != nil {
		now = dr.Now
	}
	at := now()
	if err := push.Validate(dr.Pools, at); err != nil {
		return http.StatusUnprocessableEntity, "demand: " + err.Error()
	}
	if push.Pending != nil || len(push.Announce) == 0 && push.Running == nil {
		// A push of announcements or running jobs alone leaves the
		// pending demand as it was.
		dr.Pending.Set(at, push)
	}
	dr.Pending.Announce(push)
	if push.Running != nil {
		dr.Pending.SetRunning(at, push)
	}
	if caller, _ := apiauth.Caller(r.Context()); caller.Name == apiauth.RootName && dr.Log != nil {
		if _, warned := dr.rootWarned.LoadOrStore(push.Source, true); !warned {
			dr.Log.Warn("demand pushed with the root token, an operator's, which can also issue node credentials: give the scheduler a token of scope demand (autoscaler api-token create -scope demand NAME)", "source", push.Source)
		}
	}
	if dr.Log != nil {
		caller, _ := apiauth.Caller(r.Context())
		dr.Log.Debug("demand pushed", "source", push.Source, "token", caller.Name, "lines", len(push.Pending), "announced", len(push.Announce), "running", len(push.Running))
	}
	return http.StatusNoContent, ""
}
