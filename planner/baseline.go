package planner

import (
	"fmt"
	"math"
	"slices"
	"sort"
	"time"

	"github.com/fleetcast/autoscaler/fleet"
)

// Baseline is a recommended size for the reserved baseline. The planner
// shows it and buys nothing: reservations are bought by people.
type Baseline struct {
	// Pool is the reserved pool the recommendation is for.
	Pool string `json:"pool"`
	// BurstPool is the on-demand pool whose price the reservation is weighed against.
	BurstPool string `json:"burst_pool"`
	// Nodes and GPUs are the recommended reservation.
	Nodes int `json:"nodes"`
	GPUs  int `json:"gpus"`
	// CurrentNodes is the reservation now (the pool's max).
	CurrentNodes int `json:"current_nodes"`
	// BreakEven is price_reserved / price_on_demand per GPU-hour: a GPU is
	// worth reserving when it would be busy more than this share of the time.
	BreakEven float64 `json:"break_even"`
	// BusyShare is the share of the history during which the last
	// recommended GPU would have been busy.
	BusyShare float64 `json:"busy_share"`
	// CostPerHour is the expected cost per hour of serving the history with
	// the recommended reservation plus on-demand burst; CurrentCostPerHour
	// the same with the current reservation.
	CostPerHour        float64 `json:"cost_per_hour"`
	CurrentCostPerHour float64 `json:"current_cost_per_hour"`
	// HistorySteps is how many history values the recommendation rests on.
	HistorySteps int `json:"history_steps"`
	// WholeNodes is the reservation the whole history alone would
	// justify; Nodes differs when the halves of the history disagree.
	WholeNodes int `json:"whole_history_nodes"`
	// HistoryHours is how long the history the recommendation rests on
	// is, in hours (HistorySteps of its step).
	HistoryHours float64 `json:"history_hours"`
	// TooShort is set when that history is shorter than the least the
	// advice rests on (MinAdviceHistory, for a plan): there is no advice
	// yet (Nodes is the reservation now, and no cost is worked out).
	TooShort bool `json:"too_short,omitempty"`
	// MinHistoryHours is that least history, in hours.
	MinHistoryHours float64 `json:"min_history_hours"`
}

// MinAdviceHistory is the least history a plan's advice rests on: a
// reservation is a commitment of months, not to be sized from a few hours
// of demand (a quiet night, one busy afternoon).
const MinAdviceHistory = 7 * 24 * time.Hour

// MinAdviceHalf is the least history each half must hold for the advice
// to weigh the halves apart: a week, so neither half is a part of the
// weekly cycle.
const MinAdviceHalf = 7 * 24 * time.Hour

// RecommendBaseline recommends how many nodes of the cheapest reserved pool
// to reserve, given the history of what the fleet held (fleet.State.Held,
// or its demand): the number that minimises the expected cost of serving
// that history with reserved nodes plus burst capacity from the cheapest
// on-demand pool (or the cheapest non-reserved pool, if there is no
// on-demand one). This is the break-even rule: reserve a GPU when it
// would be busy more than price_reserved / price_on_demand of the time.
//
// A reservation is a commitment, so it changes only as far as both halves
// of the history agree, when each holds at least MinAdviceHalf: it grows
// to at most the lesser of what the whole history and each half alone
// justify, and shrinks to at least the greater. A level held only in a
// burst in one half (a bursty first week, a launch) is not committed to
// until the history shows it again. With less than minHistory of history
// (a plan's: MinAdviceHistory) it advises nothing (TooShort). It returns nil without a
// reserved pool, a burst pool or history.
func RecommendBaseline(history fleet.Series, pools []fleet.Pool, minHistory time.Duration) *Baseline {
	var res, burst, anyBurst *fleet.Pool
	cheaper := func(a, b *fleet.Pool) bool { return b == nil || fleet.CompareForLaunch(a, b) < 0 }
	for i := range pools {
		p := &pools[i]
		switch {
		case p.GPUsPerNode <= 0:
		case p.Capacity == fleet.Reserved:
			if cheaper(p, res) {
				res = p
			}
		case p.Capacity == fleet.OnDemand:
			if cheaper(p, burst) {
				burst = p
			}
			fallthrough
		default:
			if cheaper(p, anyBurst) {
				anyBurst = p
			}
		}
	}
	if burst == nil {
		burst = anyBurst
	}
	demand := make([]float64, 0, len(history.Values))
	for _, v := range history.Values {
		if !math.IsNaN(v) && !math.IsInf(v, 0) {
			demand = append(demand, math.Max(v, 0))
		}
	}
	if res == nil || burst == nil || len(demand) == 0 {
		return nil
	}
	if r := res.PricePerGPUHour() / burst.PricePerGPUHour(); math.IsInf(r, 0) || math.IsNaN(r) {
		// Burst capacity (next to) free: nothing to weigh a reservation against.
		return nil
	}
	span := time.Duration(len(demand)) * history.Step
	if span < minHistory {
		return &Baseline{Pool: res.Name, BurstPool: burst.Name, Nodes: res.Max, GPUs: res.Max * res.GPUsPerNode, CurrentNodes: res.Max,
			BreakEven: res.PricePerGPUHour() / burst.PricePerGPUHour(), HistorySteps: len(demand), HistoryHours: span.Hours(), TooShort: true, MinHistoryHours: minHistory.Hours()}
	}
	// Each half's own best level (when each holds a whole week: shorter
	// halves would split the weekly cycle), then the whole history's
	// (which sorts it).
	lo, hi := -1, -1
	if half := len(demand) / 2; half > 0 && time.Duration(half)*history.Step >= MinAdviceHalf {
		a, _ := bestReservation(slices.Clone(demand[:half]), res, burst)
		b, _ := bestReservation(slices.Clone(demand[half:]), res, burst)
		lo, hi = min(a, b), max(a, b)
	}
	whole, costOf := bestReservation(demand, res, burst)
	best, cur := whole, res.Max
	switch {
	case lo < 0:
	case whole > cur:
		best = max(cur, min(whole, lo)) // grow only as far as both halves agree
	case whole < cur:
		best = min(cur, max(whole, hi)) // and shrink only as far
	}
	bestCost := costOf(best)
	burstGPU := burst.PricePerGPUHour()
	gpn := res.GPUsPerNode
	t := float64(len(demand))
	b := &Baseline{
		Pool:               res.Name,
		BurstPool:          burst.Name,
		Nodes:              best,
		GPUs:               best * gpn,
		CurrentNodes:       res.Max,
		BreakEven:          res.PricePerGPUHour() / burstGPU,
		CostPerHour:        cents(bestCost),
		CurrentCostPerHour: cents(costOf(res.Max)),
		HistorySteps:       len(demand),
		WholeNodes:         whole,
		HistoryHours:       span.Hours(),
		MinHistoryHours:    minHistory.Hours(),
	}
	if best > 0 {
		level := float64(b.GPUs - 1)
		b.BusyShare = float64(len(demand)-sort.SearchFloat64s(demand, level+1e-9)) / t
	}
	return b
}

// Reason explains the recommendation in words.
func (b *Baseline) Reason() string {
	if b.TooShort {
		return fmt.Sprintf("no advice yet: a reservation is a commitment of months, sized from %s of history at least; there is %s (%d steps). Keep %d reserved node(s) in %s until then",
			fleet.FormatDuration(time.Duration(b.MinHistoryHours*float64(time.Hour))), fleet.FormatDuration(time.Duration(b.HistoryHours*float64(time.Hour))), b.HistorySteps, b.CurrentNodes, b.Pool)
	}
	verb := "keep"
	switch {
	case b.Nodes > b.CurrentNodes:
		verb = "grow to"
	case b.Nodes < b.CurrentNodes:
		verb = "shrink to"
	}
	why := fmt.Sprintf("%s %d reserved node(s) (%d GPUs) in %s, now %d: a reserved GPU pays off when busy more than %.0f%% of the time (price vs %s); expected $%.2f/h vs $%.2f/h now over %d steps of history",
		verb, b.Nodes, b.GPUs, b.Pool, b.CurrentNodes, 100*b.BreakEven, b.BurstPool, b.CostPerHour, b.CurrentCostPerHour, b.HistorySteps)
	if b.WholeNodes != b.Nodes {
		why += fmt.Sprintf("; the whole history alone would justify %d, but its halves disagree (a commitment changes only as far as both halves of the history agree)", b.WholeNodes)
	}
	return why
}

// reservationCost is, for demand sorted, the expected cost per hour of
// serving it with nodes reserved nodes of res and the rest from burst.
func reservationCost(demand []float64, res, burst *fleet.Pool) func(nodes int) float64 {
	// suffix[i] = sum of demand[i:], for the expected overflow above a level.
	suffix := make([]float64, len(demand)+1)
	for i := len(demand) - 1; i >= 0; i-- {
		suffix[i] = suffix[i+1] + demand[i]
	}
	t := float64(len(demand))
	return func(nodes int) float64 {
		c := float64(nodes) * float64(res.GPUsPerNode)
		i := sort.SearchFloat64s(demand, c+1e-9) // first value above c
		overflow := (suffix[i] - c*float64(len(demand)-i)) / t
		return float64(nodes)*res.PricePerHour + overflow*burst.PricePerGPUHour()
	}
}

// bestReservation is the number of res nodes that serves demand (sorted
// here, in place) at the least expected cost, the fewest of equals, and
// the cost of any number (reservationCost).
func bestReservation(demand []float64, res, burst *fleet.Pool) (int, func(nodes int) float64) {
	slices.Sort(demand)
	costOf := reservationCost(demand, res, burst)
	maxNodes := int(math.Ceil(demand[len(demand)-1] / float64(res.GPUsPerNode)))
	best, bestCost := 0, costOf(0)
	for n := 1; n <= maxNodes; n++ {
		if c := costOf(n); c < bestCost-1e-9 {
			best, bestCost = n, c
		}
	}
	return best, costOf
}
