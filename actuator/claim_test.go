package actuator

import (
	"maps"
	"slices"
	"testing"
	"time"

	"github.com/fleetcast/autoscaler/providers"
	"github.com/fleetcast/autoscaler/state"
)

func TestClaim(t *testing.T) {
	at := func(m int) time.Time { return t0.Add(time.Duration(m) * time.Minute) }
	// The cloud's clock: an hour behind the controller's.
	inst := func(id string, launched ...int) providers.Instance {
		in := providers.Instance{ID: id, State: providers.InstanceRunning, LaunchedAt: at(-600)}
		if len(launched) > 0 {
			in.LaunchedAt = at(launched[0] - 60)
		}
		return in
	}
	keyed := func(id, key string) providers.Instance {
		in := inst(id)
		in.LaunchKey = key
		return in
	}
	owed := func(id string, m int) providers.Instance {
		return providers.Instance{ID: id, State: providers.InstancePending, LaunchedAt: at(m), Owed: true}
	}
	tests := []struct {
		name      string
		launches  []state.Launch
		instances []providers.Instance
		keyed     bool
		seen      map[string]time.Time
		now       int // minutes after t0
		// want maps each owned instance or stand-in to its launch's key.
		want     map[string]string
		claimed  map[string][]string // launch key -> claims after
		unlisted int
	}{{
		name:      "no launch: every instance unknown",
		instances: []providers.Instance{inst("a"), inst("b")},
		seen:      map[string]time.Time{"a": at(0), "b": at(1)},
		now:       1,
		want:      map[string]string{},
	}, {
		name:      "a launch of 2 claims the 2 instances first seen now, not one seen before",
		launches:  []state.Launch{{Key: "k", Pool: "p", Count: 2, At: at(10)}},
		instances: []providers.Instance{inst("old", 20), inst("n1", 10), inst("n2", 11)},
		seen:      map[string]time.Time{"old": at(11), "n1": at(12), "n2": at(12)},
		now:       12,
		want:      map[string]string{"n1": "k", "n2": "k"},
		claimed:   map[string][]string{"k": {"n2", "n1"}},
	}, {
		name:      "past the launch's provisioning timeout, nothing is claimed",
		launches:  []state.Launch{{Key: "k", Pool: "p", Count: 1, At: at(10)}},
		instances: []providers.Instance{inst("late", 50)},
		seen:      map[string]time.Time{"late": at(50)},
		now:       50,
		want:      map[string]string{},
	}, {
		name:      "more new instances than units (the group replaced one too): none is claimed, nor owed capacity",
		launches:  []state.Launch{{Key: "k", Pool: "p", Count: 2, At: at(10)}},
		instances: []providers.Instance{inst("n3", 12), inst("n1", 10), inst("n2", 11), owed("placeholder/g/0", 10)},
		seen:      map[string]time.Time{"n1": at(13), "n2": at(13), "n3": at(13)},
		now:       13,
		want:      map[string]string{},
	}, {
		name:      "and not later either, when one of them has gone",
		launches:  []state.Launch{{Key: "k", Pool: "p", Count: 2, At: at(10)}},
		instances: []providers.Instance{inst("n1", 10), inst("n2", 11)},
		seen:      map[string]time.Time{"n1": at(13), "n2": at(13)},
		now:       14,
		want:      map[string]string{},
	}, {
		name: "a unit is claimed once for good: its instance gone, a new one is not taken for it",
		launches: []state.Launch{{Key: "k", Pool: "p", Count: 1, At: at(10), Claimed: []string{"gone"}},
			{Key: "k2", Pool: "p", Count: 1, At: at(20)}},
		instances: []providers.Instance{inst("ours")},
		seen:      map[string]time.Time{"ours": at(21)},
		now:       21,
		want:      map[string]string{"ours": "k2"},
		claimed:   map[string][]string{"k": {"gone"}, "k2": {"ours"}},
	}, {
		name:      "an old launch's spare unit does not make room for a person's instance",
		launches:  []state.Launch{{Key: "k1", Pool: "p", Count: 1, At: at(-20)}, {Key: "k2", Pool: "p", Count: 1, At: at(20)}},
		instances: []providers.Instance{inst("ours", 20), inst("person", 21)},
		seen:      map[string]time.Time{"ours": at(21), "person": at(21)},
		now:       21,
		want:      map[string]string{},
	}, {
		name:      "newer launches claim newer instances",
		launches:  []state.Launch{{Key: "k1", Pool: "p", Count: 1, At: at(10)}, {Key: "k2", Pool: "p", Count: 1, At: at(20)}},
		instances: []providers.Instance{inst("a", 11), inst("b", 21)},
		seen:      map[string]time.Time{"a": at(22), "b": at(22)},
		now:       22,
		want:      map[string]string{"a": "k1", "b": "k2"},
		claimed:   map[string][]string{"k1": {"a"}, "k2": {"b"}},
	}, {
		name:      "units not claimed match the capacity the group owes, newest launch first",
		launches:  []state.Launch{{Key: "k1", Pool: "p", Count: 1, At: at(10)}, {Key: "k2", Pool: "p", Count: 2, At: at(20), Spent: 1}},
		instances: []providers.Instance{owed("placeholder/g/0", 20), owed("placeholder/g/1", 10)},
		seen:      map[string]time.Time{},
		now:       25,
		want:      map[string]string{"placeholder/g/0": "k2", "placeholder/g/1": "k1"},
	}, {
		name:      "the group owes more than the units: none is matched",
		launches:  []state.Launch{{Key: "k1", Pool: "p", Count: 1, At: at(10)}},
		instances: []providers.Instance{owed("placeholder/g/0", 10), owed("placeholder/g/1", 12)},
		seen:      map[string]time.Time{},
		now:       25,
		want:      map[string]string{},
	}, {
		name:      "owed capacity long after a launch is not the launch's",
		launches:  []state.Launch{{Key: "k1", Pool: "p", Count: 1, At: at(10)}},
		instances: []providers.Instance{owed("placeholder/g/0", 300)},
		seen:      map[string]time.Time{},
		now:       300,
		want:      map[string]string{},
	}, {
		name:      "keyed: a launch's instances carry its key; those not listed yet are stand-ins",
		launches:  []state.Launch{{Key: "k", Pool: "p", Count: 3, At: at(10)}},
		instances: []providers.Instance{keyed("a", "k"), keyed("b", "other-controller"), inst("c")},
		keyed:     true,
		seen:      map[string]time.Time{"a": at(11), "b": at(11), "c": at(11)},
		now:       40,
		want:      map[string]string{"a": "k", "unlisted/k/0": "k", "unlisted/k/1": "k"},
		claimed:   map[string][]string{"k": {"a"}},
		unlisted:  2,
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			after := slices.Clone(tt.launches)
			var o ownership
			claim(&o, after, tt.instances, tt.keyed, func(id string) bool { return tt.seen[id].Equal(at(tt.now)) }, 30*time.Minute, at(tt.now), t0)
			listed := map[string]string{} // claims of instances listed now, and stand-ins
			for id, key := range o.by {
				if IsUnlisted(id) || slices.ContainsFunc(tt.instances, func(in providers.Instance) bool { return in.ID == id }) {
					listed[id] = key
				}
			}
			if !maps.Equal(listed, tt.want) {
				t.Errorf("owned %v; want %v", listed, tt.want)
			}
			for id, key := range o.by {
				for _, l := range tt.launches {
					if l.Key == key && !o.at[id].Equal(l.At) {
						t.Errorf("%s owned from %v; want its launch's %v", id, o.at[id], l.At)
					}
				}
			}
			for _, l := range after {
				if !slices.Equal(l.Claimed, tt.claimed[l.Key]) {
					t.Errorf("launch %s claims %v; want %v", l.Key, l.Claimed, tt.claimed[l.Key])
				}
				if changed := slices.ContainsFunc(o.changed, func(c state.Launch) bool { return c.Key == l.Key }); changed != (len(l.Claimed) != len(tt.launches[slices.IndexFunc(tt.launches, func(x state.Launch) bool { return x.Key == l.Key })].Claimed)) {
					t.Errorf("launch %s reported changed %v", l.Key, changed)
				}
			}
			if len(o.unlisted) != tt.unlisted {
				t.Errorf("%d stand-ins for unlisted instances; want %d", len(o.unlisted), tt.unlisted)
			}
		})
	}
}
