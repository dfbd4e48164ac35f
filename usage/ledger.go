// Package usage says who used what: it splits what each node costs among
// the jobs on it by the GPUs they hold, charges the free GPUs of capacity
// bought for a team's demand to that team and the rest to idle, and
// summarises queue times per team and tier. It is pure: values in, values
// out. The controller and the simulator both charge through it, so a
// report reads the same for a live fleet and a replayed trace
// (docs/usage.md).
package usage

import (
	"cmp"
	"math"
	"slices"
	"time"
)

// Kind is what a charge is for.
type Kind string

// The kinds of charge.
const (
	// Used is GPUs held by a job: charged to the job's team and tier.
	Used Kind = "used"
	// BoughtFor is free GPUs of burst capacity bought for a team's
	// pending or forecast demand, before the node first holds a job:
	// charged to that team.
	BoughtFor Kind = "bought_for"
	// Idle is free GPUs nobody's purchase explains: reservations and
	// minimums unused, capacity left over after its work ended.
	Idle Kind = "idle"
	// IdleBeforeExecution and Stalled are parts of Used, never added to
	// it: GPUs a job held while allocated-idle (its GPUs' activity under
	// the threshold for at least the window, docs/usage.md), before its
	// first busy reading (waiting on data or set-up) or after one.
	IdleBeforeExecution Kind = "idle_before_execution"
	Stalled             Kind = "stalled"
)

// Kinds are the kinds of charge, in the order reports show them.
var Kinds = []Kind{Used, BoughtFor, Idle}

// Part reports whether a charge of kind k is a part of Used
// (IdleBeforeExecution, Stalled): never added to the fleet's spend.
func (k Kind) Part() bool { return k == IdleBeforeExecution || k == Stalled }

// The labels a report uses for what is not a team or tier of its own.
const (
	// Unattributed is the team or tier of a job nobody labelled.
	Unattributed = "unattributed"
	// Other is the team or tier of every label past the cap (Labels).
	Other = "other"
	// IdleLabel is the team and tier of idle charges.
	IdleLabel = "idle"
)

// Micros is an amount of money in millionths of a US dollar. Charges are
// counted in it so that a node's cost splits among its jobs exactly, and
// a report's rows add up to the fleet's spend to the micro-dollar.
type Micros int64

// MicrosOf is dollars in Micros, rounded to the nearest.
func MicrosOf(dollars float64) Micros { return Micros(math.Round(dollars * 1e6)) }

// Dollars is m in US dollars.
func (m Micros) Dollars() float64 { return float64(m) / 1e6 }

// Key is what a charge is to: a team and tier, a pool, a kind.
type Key struct {
	Team string `json:"team"`
	Tier string `json:"tier"`
	Pool string `json:"pool"`
	Kind Kind   `json:"kind"`
}

// Amount is what was charged to a Key: money, and the GPU-hours it paid
// for.
type Amount struct {
	Micros   Micros  `json:"micros"`
	GPUHours float64 `json:"gpu_hours"`
}

// Add adds b to a.
func (a *Amount) Add(b Amount) {
	a.Micros += b.Micros
	a.GPUHours += b.GPUHours
}

// Holder is a share of a node: a job's GPUs, with its team and tier, or
// a team's part of a purchase.
type Holder struct {
	Team string
	Tier string
	GPUs float64
}

// Node is one node over one interval, to be charged: what it cost, and
// who held it.
type Node struct {
	Pool string
	// GPUs is the node's GPUs (at least 1 counts).
	GPUs int
	// Cost is what the node cost over the interval, and Hours how long
	// the interval was.
	Cost  Micros
	Hours float64
	// Jobs hold GPUs on the node. Should they hold more than the node
	// has (a report in error), they share it in proportion.
	Jobs []Holder
	// BoughtFor, when set, are the teams the node was bought for, by
	// their share of the purchase (GPUs pending or forecast): its free
	// GPUs are charged to them (BoughtFor). Empty: free GPUs are Idle.
	BoughtFor []Holder
}

// Charge is one line of a node's split.
type Charge struct {
	Key
	Amount
	// Job is the index in Node.Jobs of the job charged, for Used; -1
	// otherwise.
	Job int
}

// Split divides n's cost among its jobs by the GPUs they hold, and its
// free GPUs among the teams it was bought for, or to idle. The charges'
// Micros add up to n.Cost exactly (the largest remainders take the odd
// micro-dollars), and their GPU-hours to n.GPUs times n.Hours. It
// appends to out and returns it.
func Split(n Node, out []Charge) []Charge {
	gpus := float64(max(n.GPUs, 1))
	held := 0.0
	for _, j := range n.Jobs {
		held += max(j.GPUs, 0)
	}
	whole := max(gpus, held)
	free := whole - held
	start := len(out)
	weights := make([]float64, 0, len(n.Jobs)+len(n.BoughtFor)+1)
	for i, j := range n.Jobs {
		out = append(out, Charge{Key: Key{Team: OrUnattributed(j.Team), Tier: OrUnattributed(j.Tier), Pool: n.Pool, Kind: Used}, Job: i})
		weights = append(weights, max(j.GPUs, 0))
	}
	if free > 0 {
		bought := 0.0
		for _, b := range n.BoughtFor {
			bought += max(b.GPUs, 0)
		}
		if bought > 0 {
			for _, b := range n.BoughtFor {
				if b.GPUs <= 0 {
					continue
				}
				out = append(out, Charge{Key: Key{Team: OrUnattributed(b.Team), Tier: OrUnattributed(b.Tier), Pool: n.Pool, Kind: BoughtFor}, Job: -1})
				weights = append(weights, free*b.GPUs/bought)
			}
		} else {
			out = append(out, Charge{Key: Key{Team: IdleLabel, Tier: IdleLabel, Pool: n.Pool, Kind: Idle}, Job: -1})
			weights = append(weights, free)
		}
	}
	shares := Apportion(n.Cost, weights)
	for i := range weights {
		c := &out[start+i]
		c.Micros = shares[i]
		c.GPUHours = weights[i] * n.Hours * gpus / whole
	}
	return out
}

// Apportion divides total among weights in proportion, in whole
// micro-dollars that add up to total exactly: each gets the floor of its
// quota, and the largest remainders (earliest first among equals) one
// more. With no positive weight, the first gets everything (nil when
// there is none).
func Apportion(total Micros, weights []float64) []Micros {
	out, _ := apportionInto(total, weights, nil, nil)
	return out
}

// remainder is a share's fractional part, for apportionInto.
type remainder struct {
	i int
	r float64
}

// apportionInto is Apportion into out and with rems as scratch, both
// reused (appended to from empty) and returned.
func apportionInto(total Micros, weights []float64, out []Micros, rems []remainder) ([]Micros, []remainder) {
	if len(weights) == 0 {
		return out, rems
	}
	sum := 0.0
	for _, w := range weights {
		sum += max(w, 0)
	}
	for range weights {
		out = append(out, 0)
	}
	if sum <= 0 {
		out[0] = total
		return out, rems
	}
	given := Micros(0)
	for i, w := range weights {
		q := float64(total) * max(w, 0) / sum
		f := math.Floor(q)
		out[i] = Micros(f)
		given += out[i]
		rems = append(rems, remainder{i, q - f})
	}
	left := total - given
	if left == 0 {
		return out, rems
	}
	if left > 0 && left <= 8 && left < Micros(len(rems)) {
		// The few largest remainders, earliest first among equals, one
		// more each: a selection.
		for k := Micros(0); k < left; k++ {
			best := -1
			for i := range rems {
				if rems[i].r >= 0 && (best < 0 || rems[i].r > rems[best].r) {
					best = i
				}
			}
			out[rems[best].i]++
			rems[best].r = -1
		}
		return out, rems
	}
	// Otherwise (many shares, or float error): the largest remainders
	// get one more, or the smallest one less, in a stable order.
	slices.SortStableFunc(rems, func(a, b remainder) int { return cmp.Compare(b.r, a.r) })
	step := Micros(1)
	if left < 0 {
		step, left = -1, -left
		slices.Reverse(rems)
	}
	for k := Micros(0); k < left; k++ {
		out[rems[int(k)%len(rems)].i] += step
	}
	return out, rems
}

// OrUnattributed is a team or tier label, or Unattributed for none.
func OrUnattributed(s string) string {
	if s == "" {
		return Unattributed
	}
	return s
}

// Meter prices a node's life so that charging it over many intervals
// adds up to its price times its whole time to the micro-dollar: each
// charge is the rounded cost from the start of the meter's stretch at
// its price, less what it has charged in that stretch already. The zero
// Meter starts at its first Charge.
type Meter struct {
	start  time.Time // the stretch at price began
	at     time.Time // the last charge
	price  float64
	billed Micros // charged since start
}

// Charge is what the node costs from the meter's last charge to now at
// price dollars per hour; the first charge starts the meter and costs
// nothing. A new price starts a new stretch at the last charge. A now not
// after the last charge charges nothing.
func (m *Meter) Charge(price float64, now time.Time) Micros {
	if m.at.IsZero() {
		m.start, m.at, m.price = now, now, price
		return 0
	}
	if !now.After(m.at) {
		return 0
	}
	if price != m.price {
		m.start, m.price, m.billed = m.at, price, 0
	}
	total := MicrosOf(m.price * now.Sub(m.start).Hours())
	c := total - m.billed
	m.billed, m.at = total, now
	return c
}

// At is when the meter last charged (or started); zero before its first
// Charge.
func (m *Meter) At() time.Time { return m.at }
