package planner

import (
	"slices"
	"testing"
	"time"

	"github.com/fleetcast/autoscaler/fleet"
	"github.com/fleetcast/autoscaler/forecast"
)

// step is a forecast of 0 GPUs for its first 10-minute step and v after.
func step(v float64) forecast.Forecast {
	f := flat(v)
	for _, row := range f.Values {
		row[0] = 0
	}
	return f
}

// TestLeftToFaster: what a slower, dearer pool would buy one lead time
// ahead is left to a cheaper pool that boots sooner and can be counted on
// (not backed off, below its max, and if its cloud refused it, below what
// it held since), which buys it when its own lead time reaches that time;
// the rest is bought now. No unmet demand is noted for what was left.
func TestLeftToFaster(t *testing.T) {
	spot := pool("spot", fleet.Spot, 12, 8*time.Minute, 0, 10)
	slow := pool("gcp", fleet.OnDemand, 29, 12*time.Minute, 0, 40)
	type launch struct {
		pool  string
		count int
	}
	tests := []struct {
		name   string
		spot   fleet.Pool
		slow   *fleet.Pool
		limits fleet.Limits
		unmet  bool // over the limits: demand unmet is noted
		status fleet.PoolStatus
		nodes  []fleet.Node
		want   []launch
		left   bool // a note says some was left to the faster pool
		later  []launch
	}{{
		name:  "left to the cheaper pool that boots sooner",
		spot:  spot,
		left:  true,
		later: []launch{{"spot", 2}},
	}, {
		name:   "a refused pool is counted on up to what it held since",
		spot:   spot,
		status: fleet.PoolStatus{Name: "spot", Refused: true, HeldSinceRefusal: 2},
		nodes:  []fleet.Node{ready("spot-1", "spot", time.Minute)},
		left:   true,
		later:  []launch{{"spot", 1}},
	}, {
		name:   "a refused pool at what it held is not",
		spot:   spot,
		status: fleet.PoolStatus{Name: "spot", Refused: true, HeldSinceRefusal: 1},
		nodes:  []fleet.Node{ready("spot-1", "spot", time.Minute)},
		want:   []launch{{"gcp", 1}},
		// At its own lead time the cheapest pool still tries: how its
		// cloud's capacity is found again.
		later: []launch{{"spot", 1}},
	}, {
		name:   "a backed-off pool is not",
		spot:   spot,
		status: fleet.PoolStatus{Name: "spot", BackoffUntil: t0.Add(time.Hour), BackoffReason: "insufficient capacity"},
		want:   []launch{{"gcp", 2}},
		later:  []launch{{"gcp", 2}},
	}, {
		name:  "beyond its max the rest is bought now",
		spot:  pool("spot", fleet.Spot, 12, 8*time.Minute, 0, 1),
		want:  []launch{{"gcp", 1}},
		left:  true,
		later: []launch{{"spot", 1}, {"gcp", 1}},
	}, {
		// Named to come first of the two at the same price.
		name:  "a pool no cheaper is not",
		spot:  pool("a-spot", fleet.Spot, 29, 8*time.Minute, 0, 10),
		want:  []launch{{"gcp", 2}},
		later: []launch{{"a-spot", 2}},
	}, {
		name:   "no more is left than the fleet's max_gpus leaves room for",
		spot:   spot,
		limits: fleet.Limits{MaxGPUs: 4},
		slow: func() *fleet.Pool {
			p := pool("gcp", fleet.OnDemand, 29, 12*time.Minute, 0, 40)
			p.GPUsPerNode = 1
			return &p
		}(),
		want:  []launch{{"gcp", 4}},
		unmet: true,
		later: []launch{{"gcp", 4}},
	}, {
		name:   "what is left holds the room the limits leave: the dearer pool does not take it",
		spot:   spot,
		limits: fleet.Limits{MaxGPUs: 8},
		left:   true,
		unmet:  true,
		later:  []launch{{"spot", 1}},
	}, {
		name:   "nor more than max_spend_per_hour leaves room for",
		spot:   spot,
		limits: fleet.Limits{MaxSpendPerHour: 20},
		left:   true,
		unmet:  true,
		later:  []launch{{"spot", 1}},
	}, {
		name:  "a pool that boots no sooner buys for itself",
		spot:  pool("spot", fleet.Spot, 12, 12*time.Minute, 0, 10),
		want:  []launch{{"spot", 2}},
		later: []launch{{"spot", 2}},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pools := []fleet.Pool{tt.spot, slow}
			if tt.slow != nil {
				pools[1] = *tt.slow
			}
			st := fleet.State{Nodes: tt.nodes}
			if tt.status.Name != "" {
				st.Pools = []fleet.PoolStatus{tt.status}
			}
			if err := st.Validate(pools); err != nil {
				t.Fatal(err)
			}
			launches := func(p Plan) []launch {
				var got []launch
				for _, a := range actions(p, Launch) {
					got = append(got, launch{a.Pool, a.Count})
				}
				return got
			}
			cfg := testConfig(pools...)
			if tt.limits != (fleet.Limits{}) {
				cfg.Limits.MaxGPUs, cfg.Limits.MaxSpendPerHour = tt.limits.MaxGPUs, tt.limits.MaxSpendPerHour
			}
			in := Input{Settings: cfg.Settings(), State: &st, Forecast: step(16), Now: t0}
			p := Make(in)
			if got := launches(p); !slices.Equal(got, tt.want) {
				t.Errorf("launches %v, want %v\n%s", got, tt.want, describe(p))
			}
			if got := len(notesCoded(p, ReasonLeftToFaster)) > 0; got != tt.left {
				t.Errorf("left to a faster pool noted: %v, want %v\n%s", got, tt.left, describe(p))
			}
			if got := len(notesCoded(p, ReasonUnmetDemand)) > 0; got != tt.unmet {
				t.Errorf("unmet demand noted: %v, want %v (none for what was left)\n%s", got, tt.unmet, describe(p))
			}
			// Three minutes on, the faster pool's lead time reaches the
			// step (nothing having been launched before).
			in.Now = t0.Add(3 * time.Minute)
			p = Make(in)
			if got := launches(p); !slices.Equal(got, tt.later) {
				t.Errorf("launches three minutes on %v, want %v\n%s", got, tt.later, describe(p))
			}
		})
	}
}
