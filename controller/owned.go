package controller

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/fleetcast/autoscaler/providers"
	"github.com/fleetcast/autoscaler/state"
)

// unlistedPrefix starts the IDs of stand-ins for instances a launch of this
// controller made in a keyed group that the cloud does not list yet (EC2's
// reads are eventually consistent): they count as launching capacity, so
// the next plan does not buy the same GPUs again, until the instances are
// listed or the provisioning deadline passes. Nothing in the cloud is
// behind them: "terminating" one at its deadline only gives the unit up.
const unlistedPrefix = "unlisted/"

func isUnlisted(id string) bool { return strings.HasPrefix(id, unlistedPrefix) }

// ownership is which of a pool's instances this controller launched.
type ownership struct {
	// at is when the launch behind each owned instance (or stand-in) was
	// decided, on the controller's clock: its provisioning deadline runs
	// from then.
	at map[string]time.Time
	// by is the key of the launch behind each owned instance or stand-in.
	by map[string]string
	// unlisted are stand-ins for a keyed group's launched instances not
	// listed yet.
	unlisted []providers.Instance
	// changed are the launches whose claims changed, to be stored.
	changed []state.Launch
}

// claim works out which of a pool's instances its launches (the
// controller's records of what it launched there, oldest first) account
// for (DESIGN.md rule 7). Only those are ever terminated for missing their
// provisioning deadline; every other instance is unknown.
//
//   - In a keyed group (each instance carries its launch's key), a
//     launch's instances are those listed with its key; the units of it
//     not listed yet become stand-ins.
//   - In a group with a target size of its own, a launch of n claims at
//     most n instances first seen after it was decided and within its
//     provisioning timeout of it (seen is when the controller first saw
//     each instance, on its own clock; no cloud clock is compared with the
//     controller's), newest launch first and the newest instances (by the
//     cloud's launch times, compared with each other only) first, each
//     claimed once and for good; its units still unclaimed match the
//     capacity the group owes (Owed stand-ins), newest launch first. When
//     more new instances show than the units unclaimed, nothing is
//     claimed: they are all unknown.
//
// An instance seen before a launch, or beyond its count, is never the
// launch's: a fleet the controller adopted, another controller's or a
// person's instances stay unknown.
func claim(launches []state.Launch, instances []providers.Instance, keyed bool, seen map[string]time.Time, timeout time.Duration) ownership {
	o := ownership{at: map[string]time.Time{}, by: map[string]string{}}
	if len(launches) == 0 {
		return o // the common case: every instance is known or unknown already
	}
	taken := map[string]bool{}
	for _, l := range launches {
		for _, id := range l.Claimed {
			taken[id] = true
		}
	}
	// Real instances no launch has claimed, newest first.
	var free []providers.Instance
	for _, in := range instances {
		if !in.Owed && !taken[in.ID] {
			free = append(free, in)
		}
	}
	if !keyed {
		slices.SortFunc(free, func(a, b providers.Instance) int {
			return cmp.Or(b.LaunchedAt.Compare(a.LaunchedAt), seen[b.ID].Compare(seen[a.ID]), strings.Compare(a.ID, b.ID))
		})
	}
	present := make(map[string]bool, len(instances))
	for _, in := range instances {
		present[in.ID] = true
	}
	inWindow := func(in providers.Instance, l *state.Launch) bool {
		t := seen[in.ID]
		return t.After(l.At) && t.Sub(l.At) <= timeout
	}
	// More new instances than the launches' units still unclaimed (the
	// group replaced an instance, a person or another controller raised it
	// too): which are this controller's cannot be told, so none is taken
	// for its own. Unknown is the safe side: never terminated at a
	// deadline.
	ambiguous := false
	if !keyed {
		units, news := 0, 0
		for i := range launches {
			units += launches[i].Unclaimed()
		}
		for _, in := range free {
			if slices.ContainsFunc(launches, func(l state.Launch) bool { return l.Unclaimed() > 0 && inWindow(in, &l) }) {
				news++
			}
		}
		ambiguous = news > units
	}
	for i := len(launches) - 1; i >= 0; i-- {
		l := &launches[i]
		before := len(l.Claimed)
		for _, in := range free {
			if !keyed && (ambiguous || l.Unclaimed() == 0) {
				break
			}
			if taken[in.ID] {
				continue
			}
			if keyed {
				if in.LaunchKey != l.Key {
					continue
				}
			} else if !inWindow(in, l) {
				continue
			}
			l.Claimed = append(l.Claimed, in.ID)
			taken[in.ID] = true
		}
		if len(l.Claimed) != before {
			o.changed = append(o.changed, *l)
		}
		for _, id := range l.Claimed {
			if present[id] {
				o.at[id], o.by[id] = l.At, l.Key
			}
		}
	}
	if keyed {
		for _, l := range launches {
			for k := range l.Unclaimed() {
				id := fmt.Sprintf("%s%s/%d", unlistedPrefix, l.Key, k)
				o.unlisted = append(o.unlisted, providers.Instance{ID: id, State: providers.InstancePending, LaunchedAt: l.At, LaunchKey: l.Key})
				o.at[id], o.by[id] = l.At, l.Key
			}
		}
		return o
	}
	// The capacity the group owes, newest first, for the newest launches'
	// unclaimed units.
	var owed []providers.Instance
	for _, in := range instances {
		if in.Owed {
			owed = append(owed, in)
		}
	}
	slices.SortFunc(owed, func(a, b providers.Instance) int {
		return cmp.Or(b.LaunchedAt.Compare(a.LaunchedAt), strings.Compare(a.ID, b.ID))
	})
	for i := len(launches) - 1; i >= 0 && len(owed) > 0 && !ambiguous; i-- {
		for range launches[i].Unclaimed() {
			if len(owed) == 0 {
				break
			}
			o.at[owed[0].ID], o.by[owed[0].ID] = launches[i].At, launches[i].Key
			owed = owed[1:]
		}
	}
	return o
}
