package providers

import (
	"context"

	"github.com/fleetcast/autoscaler/fleet"
)

// OrphanList is what one Reaper found: the fleet's orphans where its pools
// run, or why it could not list them.
type OrphanList struct {
	Reaper  Reaper
	Orphans []Orphan
	Err     error
}

// ListOrphans asks each provider behind the pools that is a Reaper, once,
// for the fleet's orphans where its pools run, in the order the pools
// first name it. An orphan whose pool the config has after all (on another
// provider) is left out: the name is that pool's.
func ListOrphans(ctx context.Context, fleetName string, pools []fleet.Pool, clouds map[string]Provider) []OrphanList {
	var reapers []Reaper
	by := map[Reaper][]fleet.Pool{}
	configured := make(map[string]bool, len(pools))
	for _, p := range pools {
		configured[p.Name] = true
		r, ok := clouds[p.Name].(Reaper)
		if !ok {
			continue
		}
		if _, seen := by[r]; !seen {
			reapers = append(reapers, r)
		}
		by[r] = append(by[r], p)
	}
	out := make([]OrphanList, 0, len(reapers))
	for _, r := range reapers {
		list, err := r.Orphans(ctx, fleetName, by[r])
		kept := list[:0:0]
		for _, o := range list {
			if !configured[o.Pool] && o.Fleet == fleetName {
				kept = append(kept, o)
			}
		}
		out = append(out, OrphanList{Reaper: r, Orphans: kept, Err: err})
	}
	return out
}
