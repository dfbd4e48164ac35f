package providers_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/fleetcast/autoscaler/fleet"
	"github.com/fleetcast/autoscaler/providers"
	"github.com/fleetcast/autoscaler/providers/sim"
)

// twoFaced is a reaper whose list also names a pool another provider's
// config has, and another fleet's instance, as a buggy provider might.
type twoFaced struct {
	providers.Provider
	calls int
}

func (r *twoFaced) Orphans(ctx context.Context, fleetName string, pools []fleet.Pool) ([]providers.Orphan, error) {
	r.calls++
	return []providers.Orphan{
		{Instance: providers.Instance{ID: "a", Fleet: fleetName}, Pool: "gone"},
		{Instance: providers.Instance{ID: "b", Fleet: fleetName}, Pool: "elsewhere"},
		{Instance: providers.Instance{ID: "c", Fleet: "staging"}, Pool: "gone"},
	}, errors.New("one region could not be read")
}

func (r *twoFaced) TerminateOrphan(context.Context, string, providers.Orphan) error { return nil }

// TestListOrphans: each reaper is asked once, for the pools it serves;
// an orphan of a pool the config has on another provider, or of another
// fleet, is left out; what a reaper could not read is its error.
func TestListOrphans(t *testing.T) {
	p := func(name string) fleet.Pool {
		return fleet.Pool{Name: name, Provider: "sim", InstanceType: "x", GPUsPerNode: 1, Capacity: fleet.OnDemand, LeadTime: time.Minute, Max: 4}
	}
	cloud := sim.New([]fleet.Pool{p("a"), p("b")}, 1, time.Now)
	r := &twoFaced{Provider: cloud}
	clouds := map[string]providers.Provider{"a": r, "b": r, "elsewhere": cloud}
	lists := providers.ListOrphans(context.Background(), "prod", []fleet.Pool{p("a"), p("b"), p("elsewhere")}, clouds)
	if len(lists) != 2 || r.calls != 1 {
		t.Fatalf("%d lists, %d calls; want one per reaper (the fake and the simulated cloud), each asked once", len(lists), r.calls)
	}
	if l := lists[0]; len(l.Orphans) != 1 || l.Orphans[0].ID != "a" || l.Err == nil {
		t.Fatalf("the fake's list %+v", l)
	}
}
