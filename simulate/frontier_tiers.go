package simulate

import (
	"fmt"
	"io"
	"math"
	"slices"
	"strings"
	"text/tabwriter"
)

// TierFrontier is the frontiers read with one tier's waiting: cost (the
// whole run's) against the GPU-hours the tier's jobs waited.
type TierFrontier struct {
	Tier string `json:"tier"`
	// AtBuffers is Frontier.AtBuffers with the tier's waiting: each
	// headroom buffer's, and what predictive (perfect, untiered) cost at
	// it.
	AtBuffers []BufferLevel `json:"at_buffers"`
	// ByCost is the tier's waiting on predictive's frontier against the
	// untiered one's at equal cost (TierAtCost); nil unless predictive's
	// choice by cost and the untiered frontier both ran.
	ByCost *TierAtCost `json:"by_cost,omitempty"`
}

// TierAtCost is what tiered provisioning changes in one tier's waiting at
// equal cost: the predictive (tiered) and untiered frontiers read at one
// cost, predictive's choice by cost's (Predictive is then that point's
// own waiting) or, where the untiered frontier's cheapest point costs
// more, that point's (so that both are read where both reach).
type TierAtCost struct {
	CostUSD    float64     `json:"cost_usd"`
	Predictive CostReading `json:"predictive"`
	Untiered   CostReading `json:"untiered"`
}

// CostReading is one policy's frontier read at a cost (readCost).
type CostReading struct {
	// Reached is false when the cost is below the frontier's cheapest
	// point, or not a number: the waiting there is unknown.
	Reached bool `json:"reached"`
	// Beyond is true when the cost is above that of the point that waits
	// least: WaitGPUHours is that point's waiting, which it reaches for
	// less, so an upper bound on the waiting at the cost.
	Beyond bool `json:"beyond"`
	// WaitGPUHours is the waiting at the cost; nil when not reached.
	WaitGPUHours *float64 `json:"wait_gpu_hours,omitempty"`
	// Between names the points read, as Reading.Between.
	Between []string `json:"between"`
	// CheapestUSD is the cost of the frontier's cheapest point.
	CheapestUSD float64 `json:"cheapest_usd,omitempty"`
}

// readCost reads a policy's frontier (hullOf) at a cost: the waiting on
// the straight line between the two points whose costs the cost lies
// between. The inverse of readAt on the same line.
func readCost(points []FrontierPoint, policy string, cost float64) CostReading {
	hull := hullOf(points, policy)
	if len(hull) == 0 {
		return CostReading{}
	}
	name := func(p FrontierPoint) string { return levelText(p.Policy, p.Level) }
	cheapest := hull[len(hull)-1]
	r := CostReading{CheapestUSD: cheapest.CostUSD}
	if math.IsNaN(cost) || cost < cheapest.CostUSD {
		r.Between = []string{name(cheapest)}
		return r
	}
	r.Reached = true
	i := 0 // hull[i] costs at least cost, hull[i+1] less
	for i+1 < len(hull) && hull[i+1].CostUSD >= cost {
		i++
	}
	a := hull[i]
	wait := a.WaitGPUHours
	r.WaitGPUHours, r.Between = &wait, []string{name(a)}
	switch {
	case cost == a.CostUSD:
	case cost > a.CostUSD:
		r.Beyond = true // i is 0: the point that waits least costs less
	default:
		b := hull[i+1]
		wait += (a.CostUSD - cost) / (a.CostUSD - b.CostUSD) * (b.WaitGPUHours - a.WaitGPUHours)
		r.Between = append(r.Between, name(b))
	}
	return r
}

// tierNames are the tiers the points' runs split their figures by, in
// rank order; none without tiers.
func (f *Frontier) tierNames() []string {
	for _, p := range f.Points {
		if len(p.Tiers) > 0 {
			names := make([]string, len(p.Tiers))
			for i, t := range p.Tiers {
				names[i] = t.Tier
			}
			return names
		}
	}
	return nil
}

// tierPoints are f's points with the tier's waiting as theirs (NaN where
// a run has no row for the tier).
func (f *Frontier) tierPoints(tier string) []FrontierPoint {
	out := slices.Clone(f.Points)
	for i := range out {
		out[i].WaitGPUHours = tierWait(&out[i], tier)
	}
	return out
}

// tierWait is the GPU-hours tier's jobs waited in p's run, NaN where it
// has no row for the tier.
func tierWait(p *FrontierPoint, tier string) float64 {
	for _, t := range p.Tiers {
		if t.Tier == tier {
			return t.WaitGPUHours
		}
	}
	return math.NaN()
}

// readTiers fills f.Tiers: the frontiers read at each buffer's waiting of
// each tier, and predictive's choice by cost against the untiered
// frontier at its cost.
func (f *Frontier) readTiers() {
	untiered := slices.ContainsFunc(f.Points, func(p FrontierPoint) bool { return p.Policy == "untiered" })
	for _, name := range f.tierNames() {
		g := Frontier{Points: f.tierPoints(name)}
		g.readBuffers()
		tf := TierFrontier{Tier: name, AtBuffers: g.AtBuffers}
		if i := slices.IndexFunc(g.Points, isByCost); i >= 0 && untiered {
			tf.ByCost = atEqualCost(g.Points, g.Points[i])
		}
		f.Tiers = append(f.Tiers, tf)
	}
}

// atEqualCost reads the predictive and untiered frontiers of points at
// the cost of predictive's choice by cost, byCost, or at the untiered
// frontier's cheapest point where that costs more (TierAtCost).
func atEqualCost(points []FrontierPoint, byCost FrontierPoint) *TierAtCost {
	wait := byCost.WaitGPUHours
	at := &TierAtCost{CostUSD: byCost.CostUSD, Untiered: readCost(points, "untiered", byCost.CostUSD),
		Predictive: CostReading{Between: []string{levelText(byCost.Policy, byCost.Level)}}}
	if !math.IsNaN(wait) {
		at.Predictive.Reached, at.Predictive.WaitGPUHours = true, &wait
	}
	if c := at.Untiered.CheapestUSD; !at.Untiered.Reached && c > byCost.CostUSD {
		at.CostUSD, at.Predictive, at.Untiered = c, readCost(points, "predictive", c), readCost(points, "untiered", c)
	}
	return at
}

// isByCost reports whether p is predictive's choice by cost.
func isByCost(p FrontierPoint) bool { return p.Policy == "predictive" && p.Level == 0 }

// writeTiers writes, with tiers, each point's waiting by tier; each
// tier's frontiers read at the buffers' waiting of the tier; and each
// tier's waiting under predictive's choice by cost against the untiered
// frontier's at the same cost.
func (f *Frontier) writeTiers(w io.Writer) error {
	names := f.tierNames()
	if len(names) == 0 {
		return nil
	}
	fmt.Fprintf(w, "\nwaited GPU-hours by tier (cost is the whole run's; untiered: predictive planning as if the config had no tiers):\n\n")
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "policy\tlevel\tcost $\t%s\t\n", strings.Join(names, "\t"))
	for _, p := range f.Points {
		fmt.Fprintf(tw, "%s\t%s\t%.0f\t", p.Policy, levelText(p.Policy, p.Level), p.CostUSD)
		for _, name := range names {
			fmt.Fprintf(tw, "%.0f\t", tierWait(&p, name))
		}
		fmt.Fprintln(tw)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, t := range f.Tiers {
		title := fmt.Sprintf("tier %s: at each buffer's waiting of the tier, the frontiers read there", t.Tier)
		if err := writeBuffers(w, title, t.AtBuffers, f.tierPoints(t.Tier)); err != nil {
			return err
		}
	}
	var rows []TierFrontier
	for _, t := range f.Tiers {
		if t.ByCost != nil {
			rows = append(rows, t)
		}
	}
	if len(rows) == 0 {
		return nil
	}
	fmt.Fprintf(w, "\nat equal cost, each tier's waiting on predictive's frontier against the untiered one's (at predictive's choice by cost,\nor where the untiered frontier's cheapest point costs more, at that point):\n\n")
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "tier\tcost $\tpredictive GPU-h\tbetween\tuntiered GPU-h\tbetween\tpredictive/untiered\t")
	for _, t := range rows {
		b := t.ByCost
		p, pb := costCell(b.Predictive)
		u, ub := costCell(b.Untiered)
		ratio := "-"
		switch {
		case !b.Predictive.Reached || !b.Untiered.Reached || *b.Untiered.WaitGPUHours == 0 || b.Predictive.Beyond && b.Untiered.Beyond:
		case b.Untiered.Beyond:
			ratio = fmt.Sprintf(">=%.2f", *b.Predictive.WaitGPUHours / *b.Untiered.WaitGPUHours)
		case b.Predictive.Beyond:
			ratio = fmt.Sprintf("<=%.2f", *b.Predictive.WaitGPUHours / *b.Untiered.WaitGPUHours)
		default:
			ratio = fmt.Sprintf("%.2f", *b.Predictive.WaitGPUHours / *b.Untiered.WaitGPUHours)
		}
		fmt.Fprintf(tw, "%s\t%.0f\t%s\t%s\t%s\t%s\t%s\t\n", t.Tier, b.CostUSD, p, pb, u, ub, ratio)
	}
	return tw.Flush()
}

// costCell is a frontier read at a cost as a table's waiting and points
// read: <= where the cost is past the point that waits least.
func costCell(r CostReading) (wait, between string) {
	between = strings.Join(r.Between, " to ")
	switch {
	case !r.Reached:
		return "not reached", "its cheapest, " + between + ", costs more"
	case r.Beyond:
		return fmt.Sprintf("<=%.0f", *r.WaitGPUHours), between + ", costing less"
	}
	return fmt.Sprintf("%.0f", *r.WaitGPUHours), between
}
