package actuator

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

// IsUnlisted reports whether id is a stand-in for an instance a keyed group
// does not list yet (see Reading).
func IsUnlisted(id string) bool { return strings.HasPrefix(id, unlistedPrefix) }

// standIns adds n stand-ins for instances a launch (its key, decided at)
// made or may have made that the cloud does not list, as the controller's
// own, launching since at.
func (o *ownership) standIns(key string, n int, at time.Time) {
	if n > 0 && o.at == nil {
		o.at, o.by = map[string]time.Time{}, map[string]string{}
	}
	for k := range n {
		id := fmt.Sprintf("%s%s/%d", unlistedPrefix, key, k)
		o.unlisted = append(o.unlisted, providers.Instance{ID: id, State: providers.InstancePending, LaunchedAt: at, LaunchKey: key})
		o.at[id], o.by[id] = at, key
	}
}

// ownership is which of a pool's instances this controller launched.
type ownership struct {
	// at is when the launch behind each owned instance (claimed, listed
	// now or not) or stand-in was decided, on the controller's clock: its
	// provisioning deadline runs from then. Nil when the pool has no
	// launch records.
	at map[string]time.Time
	// by is the key of the launch behind each owned instance or stand-in.
	by map[string]string
	// unlisted are stand-ins for a keyed group's launched instances not
	// listed yet.
	unlisted []providers.Instance
	// changed are the launches whose claims changed, to be stored.
	changed []state.Launch
	// taken is claim's scratch: the instances claimed.
	taken map[string]bool
}

// claim works out which of a pool's instances its launches (the
// controller's records of what it launched there, oldest first) account
// for (docs/design.md rule 7), now. Only those are ever terminated for missing
// their provisioning deadline; every other instance is unknown.
//
//   - In a keyed group (each instance carries its launch's key), a
//     launch's instances are those listed with its key; the units of it
//     not listed yet become stand-ins.
//   - In a group with a target size of its own, an instance is claimed
//     only in the cycle the controller first sees it (fresh, on its own
//     clock; no cloud clock is compared with the controller's), and only
//     by a launch decided before and within its provisioning timeout, at
//     most as many as the launch added, newest launch and newest instance
//     (by the cloud's launch times, compared with each other only) first,
//     and for good. When more instances show for the first time than
//     those launches have units left (the group replaced one, a person or
//     another controller raised it), none is claimed, then or later: they
//     are unknown. A launch's units still unclaimed match the capacity the
//     group owes (Owed stand-ins), newest launch first, while its record
//     could still be its (two provisioning timeouts from the later of its
//     decision and since, the controller's start), and unless the group
//     owes more than those units.
//
// An instance seen before a launch, or beyond its count, is never the
// launch's: a fleet the controller adopted, another controller's or a
// person's instances stay unknown.
//
// It fills o, whose maps and slices it reuses.
func claim(o *ownership, launches []state.Launch, instances []providers.Instance, keyed bool, fresh func(id string) bool, timeout time.Duration, now, since time.Time) {
	clear(o.at)
	clear(o.by)
	o.unlisted, o.changed = o.unlisted[:0], o.changed[:0]
	if len(launches) == 0 {
		return // the common case: every instance is known or unknown already
	}
	if o.at == nil {
		o.at, o.by = map[string]time.Time{}, map[string]string{}
	}
	if o.taken == nil {
		o.taken = map[string]bool{}
	}
	taken := o.taken
	clear(taken)
	for _, l := range launches {
		for _, id := range l.Claimed {
			taken[id] = true
		}
	}
	// The real instances no launch has claimed that may be claimed now:
	// in a keyed group any, else those first seen now; newest first.
	var free []providers.Instance
	for k := range instances {
		if in := &instances[k]; !in.Owed && (keyed || fresh(in.ID)) && !taken[in.ID] {
			free = append(free, *in)
		}
	}
	slices.SortFunc(free, func(a, b providers.Instance) int {
		return cmp.Or(b.LaunchedAt.Compare(a.LaunchedAt), strings.Compare(a.ID, b.ID))
	})
	open := func(l *state.Launch) bool { return now.After(l.At) && now.Sub(l.At) <= timeout }
	units := 0
	for i := range launches {
		if open(&launches[i]) {
			units += launches[i].Unclaimed()
		}
	}
	ambiguous := !keyed && len(free) > units
	for i := len(launches) - 1; i >= 0; i-- {
		l := &launches[i]
		before := len(l.Claimed)
		for _, in := range free {
			if !keyed && (ambiguous || !open(l) || l.Unclaimed() == 0) {
				break
			}
			if taken[in.ID] || (keyed && in.LaunchKey != l.Key) {
				continue
			}
			l.Claimed = append(l.Claimed, in.ID)
			taken[in.ID] = true
		}
		if len(l.Claimed) != before {
			o.changed = append(o.changed, *l)
		}
		for _, id := range l.Claimed {
			o.at[id], o.by[id] = l.At, l.Key
		}
	}
	if keyed {
		for _, l := range launches {
			o.standIns(l.Key, l.Unclaimed(), l.At)
		}
		return
	}
	if ambiguous {
		return
	}
	// The capacity the group owes, newest first, for the newest launches'
	// unclaimed units.
	var owed []providers.Instance
	for k := range instances {
		if instances[k].Owed {
			owed = append(owed, instances[k])
		}
	}
	slices.SortFunc(owed, func(a, b providers.Instance) int {
		return cmp.Or(b.LaunchedAt.Compare(a.LaunchedAt), strings.Compare(a.ID, b.ID))
	})
	var owing []*state.Launch
	left := 0
	for i := len(launches) - 1; i >= 0; i-- {
		if l := &launches[i]; l.Unclaimed() > 0 && now.Sub(later(l.At, since)) <= 2*timeout {
			owing, left = append(owing, l), left+l.Unclaimed()
		}
	}
	if len(owed) > left {
		return // the group owes more than this controller asked for
	}
	for _, l := range owing {
		for range l.Unclaimed() {
			if len(owed) == 0 {
				return
			}
			o.at[owed[0].ID], o.by[owed[0].ID] = l.At, l.Key
			owed = owed[1:]
		}
	}
}
