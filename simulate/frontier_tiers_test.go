package simulate

import (
	"bytes"
	"encoding/json"
	"math"
	"reflect"
	"slices"
	"strings"
	"testing"
)

// TestReadCost: a frontier read at a cost runs along the same straight
// lines as readAt, the other way: below the cheapest point it is not
// reached, above the point that waits least that point's waiting bounds it
// (Beyond), and points off the lower hull are skipped.
func TestReadCost(t *testing.T) {
	points := []FrontierPoint{
		pt("predictive", 0.5, 1000, 100),
		pt("predictive", 0.95, 100, 160), // waits as long as p99, dearer
		pt("predictive", 0.9, 200, 120),
		pt("predictive", 0.8, 500, 130),  // beaten by p90
		pt("predictive", 0.7, 600, 119),  // above the line from p90 to p50
		pt("predictive", 0.6, 1200, 100), // as cheap as p50, waiting longer
		pt("predictive", 0.99, 100, 150),
		pt("predictive", 0, math.NaN(), 1),
		pt("headroom", 0, 50, 1),
	}
	tests := []struct {
		cost    float64
		reached bool
		beyond  bool
		wait    float64
		between []string
	}{
		{90, false, false, 0, []string{"p50"}},
		{math.NaN(), false, false, 0, []string{"p50"}},
		{100, true, false, 1000, []string{"p50"}},
		{110, true, false, 600, []string{"p90", "p50"}}, // 200 + (120-110)/(120-100) * (1000-200)
		{120, true, false, 200, []string{"p90"}},
		{135, true, false, 150, []string{"p99", "p90"}}, // 100 + (150-135)/(150-120) * (200-100)
		{150, true, false, 100, []string{"p99"}},
		{200, true, true, 100, []string{"p99"}},
	}
	for _, tt := range tests {
		r := readCost(points, "predictive", tt.cost)
		wait := 0.0
		if r.WaitGPUHours != nil {
			wait = *r.WaitGPUHours
		}
		if r.Reached != tt.reached || r.Beyond != tt.beyond || (r.WaitGPUHours != nil) != tt.reached || !near(wait, tt.wait) ||
			!reflect.DeepEqual(r.Between, tt.between) || r.CheapestUSD != 100 {
			t.Errorf("at $%v: %+v (wait %v), want reached %v, beyond %v, %v GPU-hours, between %v", tt.cost, r, wait, tt.reached, tt.beyond, tt.wait, tt.between)
		}
	}
	if r := readCost(points, "untiered", 100); r.Reached || r.Between != nil {
		t.Errorf("a policy with no points: %+v", r)
	}
}

// tierPt is a frontier point whose run split its waiting between two
// tiers.
func tierPt(policy string, level, cost, critical, bestEffort float64) FrontierPoint {
	p := pt(policy, level, critical+bestEffort, cost)
	p.Tiers = []TeamResult{{Tier: "critical", WaitGPUHours: critical}, {Tier: "best_effort", WaitGPUHours: bestEffort}}
	return p
}

// TestFrontierTiers: with tiers, the frontiers are read again with each
// tier's waiting, and predictive's choice by cost against the untiered
// frontier at its cost, on a frontier made by hand.
func TestFrontierTiers(t *testing.T) {
	f := &Frontier{Trace: "t.csv", Points: []FrontierPoint{
		tierPt("headroom", 0, 1000, 100, 5000), tierPt("headroom", 64, 1200, 20, 4000),
		tierPt("predictive", 0, 1050, 40, 9000), tierPt("predictive", 0.5, 950, 150, 9000), tierPt("predictive", 0.99, 1300, 10, 9000),
		tierPt("untiered", 0, 1200, 30, 100), tierPt("untiered", 0.5, 1000, 90, 300), tierPt("untiered", 0.99, 1400, 5, 50),
	}}
	f.readBuffers()
	f.readTiers()
	if len(f.Tiers) != 2 || f.Tiers[0].Tier != "critical" || f.AtBuffers[0].Untiered == nil {
		t.Fatalf("tiers %+v, buffers %+v", f.Tiers, f.AtBuffers)
	}
	var buf bytes.Buffer
	if err := f.WriteTable(&buf); err != nil {
		t.Fatal(err)
	}
	// By hand, critical: predictive's hull is p99 (10, $1300), by cost
	// (40, $1050), p50 (150, $950); at 100, 1050 + 60/110 * -100 = 995.5;
	// at 20, 1300 + 10/30 * -250 = 1216.7. Untiered's is p99 (5, $1400),
	// by cost (30, $1200), p50 (90, $1000): at 20, 1400 + 15/25 * -200 =
	// 1280; at $1050, 30 + 150/200 * 60 = 75 GPU-hours. Best effort's
	// untiered hull: (50, $1400), (100, $1200), (300, $1000): at $1050,
	// 100 + 150/200 * 200 = 250.
	want := `
tier critical: at each buffer's waiting of the tier, the frontiers read there (straight lines along the lower hull of their points; <= past the cheapest, which waits less):

   buffer  wait GPU-h  cost $  predictive $  vs buffer         between  untiered $  vs buffer            between
   0 GPUs         100    1000           995      -0.5%  by cost to p50      <=1000    <=+0.0%  p50, waiting less
  64 GPUs          20    1200          1217      +1.4%  p99 to by cost        1280      +6.7%     p99 to by cost

predictive by cost: 1.050x reactive's cost for 40% of its waiting
`
	got := buf.String()
	if i := strings.Index(got, "\ntier critical"); i < 0 || !strings.HasPrefix(got[i:], want) {
		t.Errorf("table:\n%s\nwant in it:\n%s", got, want)
	}
	wantCost := `
at equal cost, each tier's waiting on predictive's frontier against the untiered one's (at predictive's choice by cost,
or where the untiered frontier's cheapest point costs more, at that point):

         tier  cost $  predictive GPU-h  between  untiered GPU-h         between  predictive/untiered
     critical    1050                40  by cost              75  by cost to p50                 0.53
  best_effort    1050              9000  by cost             250  by cost to p50                36.00
`
	if !strings.HasSuffix(got, wantCost) {
		t.Errorf("table:\n%s\nwant at its end:\n%s", got, wantCost)
	}
	if !strings.Contains(got, "    untiered      p99    1400         5           50\n") {
		t.Errorf("no untiered row by tier:\n%s", got)
	}
	js, err := json.Marshal(f.Tiers[0].ByCost)
	if err != nil || string(js) != `{"cost_usd":1050,"predictive":{"reached":true,"beyond":false,"wait_gpu_hours":40,"between":["by cost"]},"untiered":{"reached":true,"beyond":false,"wait_gpu_hours":75,"between":["by cost","p50"],"cheapest_usd":1000}}` {
		t.Errorf("JSON (%v): %s", err, js)
	}

	// Cheaper than any untiered point: both frontiers are read at the
	// cheapest untiered point's cost, $1000. Predictive's critical hull is
	// then p99 (10, $1300), by cost (40, $900): 10 + 300/400 * 30 = 32.5;
	// its best-effort hull the choice by cost alone, (9000, $900), which
	// bounds it.
	f.Points[2].CostUSD = 900
	f.Tiers = nil
	f.readTiers()
	buf.Reset()
	want = `
         tier  cost $  predictive GPU-h                between  untiered GPU-h  between  predictive/untiered
     critical    1000                32         p99 to by cost              90      p50                 0.36
  best_effort    1000            <=9000  by cost, costing less             300      p50              <=30.00
`
	if err := f.writeTiers(&buf); err != nil || !strings.HasSuffix(buf.String(), want) || *f.Tiers[0].ByCost.Predictive.WaitGPUHours != 32.5 {
		t.Errorf("table (%v):\n%s", err, buf.String())
	}
}

// TestFrontierRunsUntiered: with tiers, the frontier runs predictive
// untiered at each level too, each point as Run makes it alone, and reads
// every tier; asked for untiered itself, it has nothing to compare.
func TestFrontierRunsUntiered(t *testing.T) {
	cfg := onePool()
	cfg.Pools[0].Max = 200
	cfg.Tiers = threeTiers()
	tr := randomTrace(3, 200)
	opt := Options{Seed: 3, LabelTiers: DefaultLabelTiers}
	f, err := RunFrontier(cfg, tr, opt)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, p := range f.Points {
		if p.Policy == "untiered" {
			n++
		}
	}
	if n != len(FrontierQuantiles)+1 || len(f.Tiers) != 3 || f.AtBuffers[0].Untiered == nil {
		t.Fatalf("%d untiered points, %d tiers read, buffers %+v", n, len(f.Tiers), f.AtBuffers[0])
	}
	for _, tf := range f.Tiers {
		if tf.ByCost == nil || len(tf.AtBuffers) != len(FrontierBuffers) {
			t.Errorf("tier %s: %+v", tf.Tier, tf)
		}
	}
	opt.Untiered, opt.Policies = true, []string{"predictive"}
	rep, err := Run(cfg, tr, opt)
	if err != nil {
		t.Fatal(err)
	}
	i := slices.IndexFunc(f.Points, func(p FrontierPoint) bool { return p.Policy == "untiered" && p.Level == 0 })
	if got := byPolicy(t, rep)["predictive"]; !near(f.Points[i].CostUSD, got.CostUSD) || !near(f.Points[i].WaitGPUHours, got.WaitGPUHours) {
		t.Errorf("untiered by cost: $%v waiting %v in the frontier, $%v waiting %v alone", f.Points[i].CostUSD, f.Points[i].WaitGPUHours, got.CostUSD, got.WaitGPUHours)
	}
	opt.Policies = nil
	g, err := RunFrontier(cfg, tr, opt)
	if err != nil {
		t.Fatal(err)
	}
	if slices.ContainsFunc(g.Points, func(p FrontierPoint) bool { return p.Policy == "untiered" }) || g.Tiers[0].ByCost != nil {
		t.Errorf("untiered frontier compared with itself: %+v", g.Tiers[0])
	}
}
