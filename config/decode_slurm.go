package config

import (
	"maps"
	"slices"
	"strings"
	"time"
	"unicode"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/gohcl"
	"github.com/hashicorp/hcl/v2/hclsyntax"

	"github.com/fleetcast/autoscaler/fleet"
	"github.com/fleetcast/autoscaler/slurm/hostlist"
)

// The bounds of the slurm block's settings.
const (
	// MinSlurmInterval bounds slurm.interval: reading the queue more
	// often loads the cluster's controller for nothing (a cycle plans
	// with the latest read).
	MinSlurmInterval = time.Second
	// MaxSlurmInterval and MaxSlurmTimeout bound slurm.interval and
	// slurm.timeout so that a read, its two commands each at their
	// timeout, ends well within the time pushed demand counts (10
	// minutes): the queue's demand never lapses between reads that
	// succeed.
	MaxSlurmInterval = 5 * time.Minute
	MaxSlurmTimeout  = time.Minute
	// MaxSlurmOutputMiB bounds slurm.max_output_mib: what one command may
	// print, in MiB.
	MaxSlurmOutputMiB = 4096
)

// partition is a slurm block's partition "NAME" block, decoded: its
// name, its pools (each once), and where each is.
type partition struct {
	name    string
	pools   []string
	poolsAt []hcl.Range // each pool's name in the list
}

// decodeSlurm decodes a slurm block: its settings, the defaults for what
// it leaves out, and its partition blocks, whose pools assignPartitions
// checks once every pool is known.
func (d *decoder) decodeSlurm(b *hcl.Block) (*fleet.SlurmSettings, []partition) {
	out := slurmDefaults()
	var v slurmBody
	d.decode(b.Body, &v)
	v.Validate(d, out)
	if v.Rest == nil {
		return out, nil
	}
	// The partition blocks. The schema names the block's attributes too,
	// so that a misspelt one gets a suggestion.
	schema, _ := gohcl.ImpliedBodySchema(&v)
	for i := range schema.Attributes {
		schema.Attributes[i].Required = false // decoded already
	}
	schema.Blocks = append(schema.Blocks, partitionSchema)
	content, diags := v.Rest.Content(schema)
	d.decoded(diags)
	var parts []partition
	seen := map[string]*hcl.Block{}
	for _, pb := range content.Blocks {
		name := pb.Labels[0]
		if prev, dup := seen[name]; dup {
			d.errorf(pb.LabelRanges[0], "Duplicate partition block",
				"A partition %q block was already defined at %s; one block lists all of a partition's pools.", name, defPos(prev.DefRange))
			continue
		}
		seen[name] = pb
		parts = append(parts, d.decodePartition(pb))
	}
	return out, parts
}

// Validate checks the slurm block's settings and fills out: a conf path
// and commands that are not empty, an interval of at least
// MinSlurmInterval, a timeout longer than 0, and an output bound of 1 to
// MaxSlurmOutputMiB MiB. Every error points at the value it refuses.
func (s *slurmBody) Validate(d *decoder, out *fleet.SlurmSettings) {
	if d.check(s.ConfAt, s.Conf != "", "conf must be the path of the cluster's slurm.conf, given to the commands as SLURM_CONF; leave it out for the commands' own.") == set {
		out.Conf = s.Conf
	}
	if d.check(s.SqueueAt, s.Squeue != "", "squeue must be the squeue command, a name found on the PATH or a path; leave it out for %q.", out.Squeue) == set {
		out.Squeue = s.Squeue
	}
	if d.check(s.SinfoAt, s.Sinfo != "", "sinfo must be the sinfo command, a name found on the PATH or a path; leave it out for %q.", out.Sinfo) == set {
		out.Sinfo = s.Sinfo
	}
	if d.check(s.ScontrolAt, s.Scontrol != "", "scontrol must be the scontrol command, a name found on the PATH or a path; leave it out for %q.", out.Scontrol) == set {
		out.Scontrol = s.Scontrol
	}
	if d.check(s.ScancelAt, s.Scancel != "", "scancel must be the scancel command, a name found on the PATH or a path; leave it out for %q.", out.Scancel) == set {
		out.Scancel = s.Scancel
	}
	if d.state(s.SignalJobsAt) == set {
		if sig, ok := jobSignal(s.SignalJobs); ok {
			out.SignalJobs = sig
		} else {
			d.invalid(s.SignalJobsAt, "signal_jobs must be the signal a draining node's jobs are asked to checkpoint by, one of %s (\"SIG\" before it is fine), got %q; leave it out to send none.",
				strings.Join(jobSignals, ", "), s.SignalJobs)
		}
	}
	if d.check(s.TierAt, s.Tier == "qos" || s.Tier == "partition", "tier must be where a job's tier comes from, \"qos\" or \"partition\", got %q; leave it out for \"qos\".", s.Tier) == set {
		out.Tier = s.Tier
	}
	d.durationWithin("interval", s.Interval, s.IntervalAt, MinSlurmInterval, MaxSlurmInterval, &out.Interval)
	d.durationWithin("timeout", s.Timeout, s.TimeoutAt, 0, MaxSlurmTimeout, &out.Timeout)
	if d.between("max_output_mib", s.MaxOutputMiB, 1, MaxSlurmOutputMiB, s.MaxOutputMiBAt) == set {
		out.MaxOutputMiB = s.MaxOutputMiB
	}
}

// jobSignals are the signals slurm.signal_jobs may name: those a job can
// catch (no KILL or STOP) and that scancel knows by name.
var jobSignals = []string{"USR1", "USR2", "TERM", "INT", "HUP", "QUIT", "CONT", "URG", "ALRM", "XCPU", "WINCH"}

// jobSignal is the name of a signal_jobs value in jobSignals, upper case
// and without "SIG", and whether it is one.
func jobSignal(v string) (string, bool) {
	sig := strings.TrimPrefix(strings.ToUpper(strings.TrimSpace(v)), "SIG")
	return sig, slices.Contains(jobSignals, sig)
}

// durationWithin is duration for one that must be at least lo (above 0
// when lo is 0) and at most hi.
func (d *decoder) durationWithin(name, text string, r hcl.Range, lo, hi time.Duration, dst *time.Duration) state {
	if st := d.state(r); st != set {
		return st
	}
	if dur, err := fleet.ParseDuration(text); err == nil && (dur < lo || dur > hi) && (lo > 0 || dur > 0) {
		if lo > 0 {
			d.invalid(r, "%s must be %s to %s, got %q.", name, fleet.FormatDuration(lo), fleet.FormatDuration(hi), text)
		} else {
			d.invalid(r, "%s must be longer than 0 and at most %s, got %q.", name, fleet.FormatDuration(hi), text)
		}
		return bad
	}
	return d.duration(name, text, r, false, dst) // refuses what does not parse, and 0
}

// decodePartition decodes a partition block: a name Slurm could give a
// partition, and pools, at least one, each named once.
func (d *decoder) decodePartition(b *hcl.Block) partition {
	p := partition{name: b.Labels[0]}
	if p.name == "" || strings.ContainsFunc(p.name, func(r rune) bool { return r == ',' || unicode.IsSpace(r) }) {
		d.errorf(b.LabelRanges[0], "Invalid partition name",
			"A partition is named as in Slurm: not empty, with no commas or whitespace, got %q.", p.name)
	}
	var v partitionBody
	if !d.decode(b.Body, &v) {
		return p
	}
	if d.check(v.PoolsAt, len(v.Pools) > 0, "pools must name at least one pool, whose nodes serve partition %q, got [].", p.name) != set {
		return p
	}
	at := elementRanges(d.attrs[v.PoolsAt.Start.Byte], v.PoolsAt, len(v.Pools))
	for i, name := range v.Pools {
		if j := slices.Index(v.Pools[:i], name); j >= 0 {
			d.invalid(at[i], "pools names pool %q twice (first at %s); name each pool once.", name, defPos(at[j]))
			continue
		}
		p.pools, p.poolsAt = append(p.pools, name), append(p.poolsAt, at[i])
	}
	return p
}

// elementRanges are where each of the n elements of a list attribute's
// value is: each element's own range where a writes the list out, else
// the whole value's, whole.
func elementRanges(a *hclsyntax.Attribute, whole hcl.Range, n int) []hcl.Range {
	var exprs []hclsyntax.Expression
	if a != nil {
		e := a.Expr
		for {
			p, ok := e.(*hclsyntax.ParenthesesExpr)
			if !ok {
				break
			}
			e = p.Expression
		}
		if t, ok := e.(*hclsyntax.TupleConsExpr); ok && len(t.Exprs) == n {
			exprs = t.Exprs
		}
	}
	out := make([]hcl.Range, n)
	for i := range out {
		out[i] = whole
		if exprs != nil {
			out[i] = exprs[i].Range()
		}
	}
	return out
}

// assignPartitions adds each partition's name to its pools' Partitions,
// each pool's sorted and without duplicates. A pool the config has no
// block for is an error at its name in the list.
func (d *decoder) assignPartitions(pools []fleet.Pool, parts []partition) {
	index := make(map[string]int, len(pools))
	for i := range pools {
		index[pools[i].Name] = i
	}
	names := slices.Sorted(maps.Keys(index))
	for _, part := range parts {
		for i, name := range part.pools {
			j, ok := index[name]
			if !ok {
				d.errorf(part.poolsAt[i], "Unknown pool",
					"Partition %q names pool %q, which the config has no pool %q block for; pools names the pools whose nodes serve the partition.%s",
					part.name, name, name, didYouMean(name, names))
				continue
			}
			pools[j].Partitions = append(pools[j].Partitions, part.name)
		}
	}
	for i := range pools {
		slices.Sort(pools[i].Partitions)
		pools[i].Partitions = slices.Compact(pools[i].Partitions)
	}
}

// decodePoolSlurm decodes a pool's slurm block: nodes, a Slurm hostlist
// of the pool's node names, each once, at least the pool's max of them.
// It returns the names (nil where they are wrong) and where they are.
func (d *decoder) decodePoolSlurm(b *hcl.Block, p fleet.Pool) ([]string, hcl.Range) {
	var v poolSlurmBody
	if !d.decode(b.Body, &v) || d.state(v.NodesAt) != set {
		return nil, v.NodesAt
	}
	names, err := hostlist.Expand(v.Nodes)
	if err != nil { // an empty list too
		d.invalid(v.NodesAt, "nodes must be a Slurm hostlist of the pool's node names, as slurm.conf declares them (\"gpu-[01-32]\"): %v.", err)
		return nil, v.NodesAt
	}
	seen := make(map[string]bool, len(names))
	for _, n := range names {
		if seen[n] {
			d.invalid(v.NodesAt, "nodes names node %q twice; name each node once.", n)
			return nil, v.NodesAt
		}
		seen[n] = true
	}
	if p.Max > 0 && len(names) < p.Max {
		d.invalid(v.NodesAt, "nodes names %d nodes, fewer than the pool's max (%d): each node the pool may have is one of its Slurm nodes.", len(names), p.Max)
		return nil, v.NodesAt
	}
	return names, v.NodesAt
}

// checkSlurmNodes checks the pools that are sets of Slurm nodes against
// the rest of the config: the slurm block that says how to reach the
// cluster, a provider whose instances are named (a plugin's servers), and
// nodes shared by pools only where the pools' instances are alike (the
// same GPUs per node and GPU model): a node either can serve, whose
// request falls back from one to the other.
func (d *decoder) checkSlurmNodes(cfg *Config, pools []poolResult) {
	owner := map[string]int{}
	for i, pr := range pools {
		b := pr.body
		if b.slurm == nil {
			continue
		}
		if cfg.Slurm == nil {
			d.errorf(b.slurm.DefRange, "Missing slurm block",
				"Pool %q is a set of Slurm nodes, so the config needs a slurm block, which says how to reach the cluster: slurm { conf = \"/etc/slurm/slurm.conf\" }.", b.Name)
		}
		p := cfg.Pools[i]
		if _, named := p.Settings.(PluginUser); !named && p.Provider != "" {
			d.errorf(b.slurm.DefRange, "Unnamed instances",
				"Pool %q has provider = %q, whose instances have IDs of their own; a pool's Slurm nodes are its instances by name, as a plugin's servers are (provider = \"plugin\", each server listed by its node's name).", b.Name, p.Provider)
		}
		for _, n := range p.SlurmNodes {
			j, shared := owner[n]
			if !shared {
				continue
			}
			if q := cfg.Pools[j]; q.GPUsPerNode != p.GPUsPerNode || !strings.EqualFold(q.GPUModel, p.GPUModel) {
				d.invalid(b.slurmNodesAt, "nodes names node %q, which pool %q has too (at %s), with %d GPUs per node of model %q, not %d of %q: pools share a Slurm node only where their instances are alike, so that either serves it.",
					n, pools[j].body.Name, defPos(pools[j].body.slurmNodesAt), q.GPUsPerNode, q.GPUModel, p.GPUsPerNode, p.GPUModel)
				break
			}
		}
		for _, n := range p.SlurmNodes {
			if _, dup := owner[n]; !dup {
				owner[n] = i
			}
		}
	}
}
