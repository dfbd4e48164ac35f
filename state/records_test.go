package state

import (
	"context"
	"fmt"
	"math"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/fleetcast/autoscaler/internal/etcdtest"
	"pgregory.net/rapid"
)

// step is one operation on a Records and what it must come to. Its result
// is compared as fmt's %+v prints it (so nil and empty lists are alike,
// and times are compared with their zone and monotonic reading).
type step struct {
	// op says what the step does, in failures.
	op string
	do func(r Records) (any, error)
	// want, when set, is what the result must print as; err, when set, a
	// part of the error the step must fail with ("" for none).
	want any
	err  string
}

// pair is a step's results: the Store's and the Memory's.
type pair struct {
	got any
	err error
}

// two makes a step's result of two values.
func two(a, b any) []any { return []any{a, b} }

// ok is a write that must succeed.
func ok(op string, do func(r Records) error) step {
	return step{op: op, do: func(r Records) (any, error) { return nil, do(r) }}
}

// fails is a write that must fail with an error containing want.
func fails(op, want string, do func(r Records) error) step {
	return step{op: op, do: func(r Records) (any, error) { return nil, do(r) }, err: want}
}

// read is a read that must return want, if want is not nil.
func read(op string, want any, do func(r Records) (any, error)) step {
	return step{op: op, do: do, want: want}
}

// minute is t0 plus m minutes.
func minute(m int) time.Time { return t0.Add(time.Duration(m) * time.Minute) }

// TestRecordsConform runs sequences of operations on a fresh Store and a
// fresh Memory and checks that both return the same results and the same
// errors (the Store's naming its file where the Memory's names
// "memory"), and, where a step says, what they must be.
func TestRecordsConform(t *testing.T) {
	etcd := etcdtest.Start(t).Client(t)
	east := time.FixedZone("UTC+1", 3600)
	now := time.Now() // with a monotonic clock reading, in the local zone
	at := func(m int, v float64) Sample { return Sample{minute(m), v} }
	drain := func(node string, start int) Drain {
		return Drain{Node: node, Pool: "od", Started: minute(start), Deadline: minute(start + 30)}
	}
	launch := func(key string, m int, claimed ...string) Launch {
		return Launch{Key: key, Pool: "a", Count: 2, At: minute(m), Claimed: claimed}
	}
	intent := func(key string, kind IntentKind, m int) Intent {
		in := Intent{Key: key, Kind: kind, Pool: "a", Node: "i-1", Created: minute(m)}
		if kind == IntentLaunch {
			in.Node, in.Count, in.Target = "", 1, 3
		}
		return in
	}
	demand := func(series string, since time.Time) func(r Records) (any, error) {
		return func(r Records) (any, error) { return r.Demand(series, since) }
	}
	latest := func(series string) func(r Records) (any, error) {
		return func(r Records) (any, error) { x, ok, err := r.LatestDemand(series); return two(x, ok), err }
	}
	series := func(r Records) (any, error) { return r.DemandSeries() }
	fill := func(series string, step time.Duration, xs ...Sample) func(r Records) (any, error) {
		return func(r Records) (any, error) {
			added, kept, err := r.FillDemand(series, step, xs...)
			return two(added, kept), err
		}
	}
	backoffs := func(r Records) (any, error) { return r.Backoffs() }
	drains := func(r Records) (any, error) { return r.Drains() }
	drainLog := func(since time.Time) func(r Records) (any, error) {
		return func(r Records) (any, error) { return r.DrainLog(since) }
	}
	intents := func(r Records) (any, error) { return r.Intents() }
	launches := func(r Records) (any, error) { return r.Launches() }
	const step10 = 10 * time.Minute

	for _, tt := range []struct {
		name  string
		steps []step
	}{
		{"demand append, replace, read", []step{
			read("no series", []string(nil), series),
			ok("append out of order", func(r Records) error { return r.AppendDemand("fleet", at(2, 2), at(0, 0), at(1, 1)) }),
			ok("replace 1m", func(r Records) error { return r.AppendDemand("fleet", at(1, 11)) }),
			ok("two at 5m in one call: the last wins", func(r Records) error { return r.AppendDemand("fleet", at(5, 5), at(5, 55)) }),
			ok("a time in another zone", func(r Records) error {
				return r.AppendDemand("fleet", Sample{minute(4).In(east), 4})
			}),
			ok("another series", func(r Records) error { return r.AppendDemand("held", at(3, 32)) }),
			ok("a series with no samples", func(r Records) error { return r.AppendDemand("empty") }),
			fails("no name", "no name", func(r Records) error { return r.AppendDemand("", at(9, 1)) }),
			fails("NaN", "is NaN", func(r Records) error { return r.AppendDemand("fleet", at(9, 1), at(10, math.NaN())) }),
			fails("Inf", "is +Inf", func(r Records) error { return r.AppendDemand("other", at(9, math.Inf(1))) }),
			read("all", []Sample{at(0, 0), at(1, 11), at(2, 2), at(4, 4), at(5, 55)}, demand("fleet", time.Time{})),
			read("since 1m", []Sample{at(1, 11), at(2, 2), at(4, 4), at(5, 55)}, demand("fleet", minute(1))),
			read("since 1m30s", []Sample{at(2, 2), at(4, 4), at(5, 55)}, demand("fleet", minute(1).Add(30*time.Second))),
			read("since 1m, in another zone", []Sample{at(1, 11), at(2, 2), at(4, 4), at(5, 55)}, demand("fleet", minute(1).In(east))),
			read("since after the last", []Sample(nil), demand("fleet", minute(6))),
			read("unknown series", []Sample(nil), demand("unknown", time.Time{})),
			read("empty series", []Sample(nil), demand("empty", time.Time{})),
			read("latest", two(at(5, 55), true), latest("fleet")),
			read("latest of none", two(Sample{}, false), latest("unknown")),
			read("latest of an empty series", two(Sample{}, false), latest("empty")),
			read("series, sorted", []string{"empty", "fleet", "held"}, series),
		}},
		{"demand before 1970 and with a monotonic reading", []step{
			ok("before 1970", func(r Records) error {
				return r.AppendDemand("fleet", Sample{time.Unix(-100, 0), 1}, Sample{time.Unix(-50, 0), 2})
			}),
			read("one sample, at 1970", []Sample{{time.Unix(0, 0).UTC(), 2}}, demand("fleet", time.Unix(-1000, 0))),
			ok("now", func(r Records) error { return r.AppendDemand("now", Sample{now, 1}) }),
			read("now, in UTC", nil, demand("now", time.Time{})),
			ok("prune before 1970", func(r Records) error { _, err := r.PruneDemand(time.Unix(-10, 0)); return err }),
			read("still there", []Sample{{time.Unix(0, 0).UTC(), 2}}, demand("fleet", time.Time{})),
		}},
		{"demand prune", []step{
			ok("fleet", func(r Records) error { return r.AppendDemand("fleet", at(0, 0), at(1, 1), at(2, 2), at(3, 3)) }),
			ok("held", func(r Records) error { return r.AppendDemand("held", at(0, 9), at(1, 9)) }),
			read("prune before 2m", 4, func(r Records) (any, error) { return r.PruneDemand(minute(2)) }),
			read("fleet left", []Sample{at(2, 2), at(3, 3)}, demand("fleet", time.Time{})),
			read("held left", []Sample(nil), demand("held", time.Time{})),
			read("a pruned series stays named", []string{"fleet", "held"}, series),
			read("latest of a pruned series", two(Sample{}, false), latest("held")),
			read("prune again", 0, func(r Records) (any, error) { return r.PruneDemand(minute(2)) }),
			ok("append after the prune", func(r Records) error { return r.AppendDemand("fleet", at(4, 4), at(1, 1)) }),
			read("fleet after", []Sample{at(1, 1), at(2, 2), at(3, 3), at(4, 4)}, demand("fleet", time.Time{})),
			read("prune everything", 4, func(r Records) (any, error) { return r.PruneDemand(minute(60)) }),
			read("latest after", two(Sample{}, false), latest("fleet")),
		}},
		{"demand fill", []step{
			ok("recorded in steps 0 and 20m", func(r Records) error { return r.AppendDemand("fleet", at(3, 7), at(21, 9)) }),
			read("recorded steps kept", two([]Sample(nil), 3), fill("fleet", step10, at(0, 1), at(20, 2), at(29, 3))),
			read("empty steps filled; the first of one step wins", two([]Sample{at(-10, 1), at(12, 2), at(30, 3)}, 2),
				fill("fleet", step10, at(-10, 1), at(12, 2), at(15, 5), at(30, 3), at(39, 4))),
			read("filled", []Sample{at(-10, 1), at(3, 7), at(12, 2), at(21, 9), at(30, 3)}, demand("fleet", time.Time{})),
			fails("NaN records nothing", "is NaN", func(r Records) error {
				_, _, err := r.FillDemand("fleet", step10, at(50, 1), at(60, math.NaN()))
				return err
			}),
			fails("step 0", "positive step", func(r Records) error { _, _, err := r.FillDemand("fleet", 0, at(50, 1)); return err }),
			fails("no name", "no name", func(r Records) error { _, _, err := r.FillDemand("", step10, at(50, 1)); return err }),
			read("nothing more", []Sample{at(-10, 1), at(3, 7), at(12, 2), at(21, 9), at(30, 3)}, demand("fleet", time.Time{})),
			read("a new series", two([]Sample{at(0, 1)}, 0), fill("new", time.Hour, at(0, 1))),
			read("a new series with nothing", two([]Sample(nil), 0), fill("none", time.Hour)),
			read("series", []string{"fleet", "new", "none"}, series),
			read("steps counted as Truncate counts them", two([]Sample{at(65, 1)}, 1), fill("new", time.Hour, at(59, 2), at(65, 1))),
			read("latest", two(at(65, 1), true), latest("new")),
		}},
		{"back-offs", []step{
			read("none", []Backoff(nil), backoffs),
			ok("c", func(r Records) error {
				return r.PutBackoff(Backoff{Pool: "c", Failures: 1, Until: minute(5), Reason: "x"})
			}),
			ok("a", func(r Records) error { return r.PutBackoff(Backoff{Pool: "a", Failures: 1, Until: minute(5)}) }),
			ok("b", func(r Records) error { return r.PutBackoff(Backoff{Pool: "b", Failures: 1}) }),
			ok("a again", func(r Records) error {
				return r.PutBackoff(Backoff{Pool: "a", Failures: 2, Until: minute(10), Refused: minute(0), Held: 3, Reason: "stockout"})
			}),
			fails("no pool", "no pool", func(r Records) error { return r.PutBackoff(Backoff{Failures: 1}) }),
			fails("negative failures", "at least 0", func(r Records) error { return r.PutBackoff(Backoff{Pool: "d", Failures: -1}) }),
			fails("negative held", "at least 0", func(r Records) error { return r.PutBackoff(Backoff{Pool: "d", Held: -1}) }),
			ok("delete b", func(r Records) error { return r.DeleteBackoff("b") }),
			ok("delete one not there", func(r Records) error { return r.DeleteBackoff("z") }),
			read("by pool", []Backoff{{Pool: "a", Failures: 2, Until: minute(10), Refused: minute(0), Held: 3, Reason: "stockout"},
				{Pool: "c", Failures: 1, Until: minute(5), Reason: "x"}}, backoffs),
			ok("delete all", func(r Records) error { return cmpErr(r.DeleteBackoff("a"), r.DeleteBackoff("c")) }),
			read("none left", []Backoff(nil), backoffs),
		}},
		{"drains and the drain log", []step{
			read("none", []Drain(nil), drains),
			ok("c at 5m", func(r Records) error { return r.PutDrain(drain("c", 5)) }),
			ok("a at 1m", func(r Records) error { return r.PutDrain(drain("a", 1)) }),
			ok("b at 3m", func(r Records) error { return r.PutDrain(drain("b", 3)) }),
			ok("z at 3m", func(r Records) error { return r.PutDrain(drain("z", 3)) }),
			ok("y at 3m, in another zone", func(r Records) error {
				d := drain("y", 3)
				d.Started = d.Started.In(east)
				return r.PutDrain(d)
			}),
			ok("a at 1m again, a later deadline", func(r Records) error {
				d := drain("a", 1)
				d.Deadline = minute(40)
				return r.PutDrain(d)
			}),
			fails("no node", "no node", func(r Records) error { return r.PutDrain(Drain{Pool: "p", Started: t0, Deadline: t0}) }),
			fails("no pool", "pool is empty", func(r Records) error { return r.PutDrain(Drain{Node: "n", Started: t0, Deadline: t0}) }),
			fails("no start", "deadline after it", func(r Records) error { return r.PutDrain(Drain{Node: "n", Pool: "p", Deadline: t0}) }),
			fails("deadline before start", "deadline after it", func(r Records) error {
				return r.PutDrain(Drain{Node: "n", Pool: "p", Started: t0, Deadline: t0.Add(-1)})
			}),
			read("in progress, by node", nil, drains),
			read("the log: one entry of a's drain", nil, drainLog(time.Time{})),
			ok("a again, begun at 7m", func(r Records) error { return r.PutDrain(drain("a", 7)) }),
			ok("b finished", func(r Records) error { return r.DeleteDrain("b") }),
			ok("delete one not there", func(r Records) error { return r.DeleteDrain("q") }),
			read("in progress", nil, drains),
			read("log since 3m: ties by node; b finished but logged", []string{"b", "y", "z", "c", "a"}, nodesOf(drainLog(minute(3)))),
			read("log since 2m", []string{"b", "y", "z", "c", "a"}, nodesOf(drainLog(minute(2)))),
			read("log since 3m and a nanosecond", []string{"c", "a"}, nodesOf(drainLog(minute(3).Add(1)))),
			read("log since after the last", []Drain(nil), drainLog(minute(8))),
			read("prune before 3m", 1, func(r Records) (any, error) { return r.PruneDrainLog(minute(3)) }),
			read("log after", []string{"b", "y", "z", "c", "a"}, nodesOf(drainLog(time.Time{}))),
			read("prune before 5m", 3, func(r Records) (any, error) { return r.PruneDrainLog(minute(5)) }),
			ok("d at 2m, before the rest", func(r Records) error { return r.PutDrain(drain("d", 2)) }),
			read("log", []string{"d", "c", "a"}, nodesOf(drainLog(time.Time{}))),
			read("prune all", 3, func(r Records) (any, error) { return r.PruneDrainLog(minute(60)) }),
			read("log empty", []Drain(nil), drainLog(time.Time{})),
			read("the drains in progress stay", []string{"a", "c", "d", "y", "z"}, nodesOf(drains)),
		}},
		{"halted", []step{
			read("never", time.Time{}, func(r Records) (any, error) { return r.Halted() }),
			ok("halted at 5m, in another zone", func(r Records) error { return r.PutHalted(minute(5).In(east)) }),
			read("in UTC", minute(5), func(r Records) (any, error) { return r.Halted() }),
			ok("halted now", func(r Records) error { return r.PutHalted(now) }),
			read("now, in UTC", nil, func(r Records) (any, error) { return r.Halted() }),
			ok("halted at zero", func(r Records) error { return r.PutHalted(time.Time{}) }),
			read("zero", time.Time{}, func(r Records) (any, error) { return r.Halted() }),
		}},
		{"intents", []step{
			read("none", []Intent(nil), intents),
			ok("k2, a launch at 0", func(r Records) error { return r.PutIntent(intent("k2", IntentLaunch, 0)) }),
			ok("k3, a termination at -1m", func(r Records) error { return r.PutIntent(intent("k3", IntentTerminate, -1)) }),
			ok("k1, a drain at 0", func(r Records) error { return r.PutIntent(intent("k1", IntentDrain, 0)) }),
			ok("k0, a reap at 1m", func(r Records) error { return r.PutIntent(intent("k0", IntentReap, 1)) }),
			fails("k1 again", "already journaled", func(r Records) error { return r.PutIntent(intent("k1", IntentCancelDrain, 5)) }),
			fails("no key", "key is empty", func(r Records) error { return r.PutIntent(intent("", IntentLaunch, 0)) }),
			fails("bad kind", `kind "reboot"`, func(r Records) error { return r.PutIntent(intent("k", "reboot", 0)) }),
			fails("no pool", "pool is empty", func(r Records) error {
				return r.PutIntent(Intent{Key: "k", Kind: IntentDrain, Node: "n", Created: t0})
			}),
			fails("launch of 0", "count >= 1", func(r Records) error {
				return r.PutIntent(Intent{Key: "k", Kind: IntentLaunch, Pool: "p", Created: t0})
			}),
			fails("target under count", "target >= count", func(r Records) error {
				return r.PutIntent(Intent{Key: "k", Kind: IntentLaunch, Pool: "p", Count: 3, Target: 2, Created: t0})
			}),
			fails("more names than instances", `names "a,b" for a launch of 1`, func(r Records) error {
				return r.PutIntent(Intent{Key: "k", Kind: IntentLaunch, Pool: "p", Count: 1, Target: 1, Names: "a,b", Created: t0})
			}),
			fails("terminate of no node", "terminate with no node", func(r Records) error {
				return r.PutIntent(Intent{Key: "k", Kind: IntentTerminate, Pool: "p", Created: t0})
			}),
			fails("no time", "created is not set", func(r Records) error {
				return r.PutIntent(Intent{Key: "k", Kind: IntentTerminate, Pool: "p", Node: "n"})
			}),
			read("oldest first, ties by key", []Intent{intent("k3", IntentTerminate, -1), intent("k1", IntentDrain, 0),
				intent("k2", IntentLaunch, 0), intent("k0", IntentReap, 1)}, intents),
			ok("k2 done", func(r Records) error { return r.DoneIntent("k2") }),
			ok("k2 done again", func(r Records) error { return r.DoneIntent("k2") }),
			read("left", []Intent{intent("k3", IntentTerminate, -1), intent("k1", IntentDrain, 0), intent("k0", IntentReap, 1)}, intents),
			ok("k2 again, once done", func(r Records) error { return r.PutIntent(intent("k2", IntentLaunch, 2)) }),
			read("k2 last", []string{"k3", "k1", "k0", "k2"}, func(r Records) (any, error) {
				ins, err := r.Intents()
				var keys []string
				for _, in := range ins {
					keys = append(keys, in.Key)
				}
				return keys, err
			}),
		}},
		{"launches", []step{
			read("none", []Launch(nil), launches),
			ok("intent k", func(r Records) error { return r.PutIntent(intent("k", IntentLaunch, 0)) }),
			ok("intent k9", func(r Records) error { return r.PutIntent(intent("k9", IntentLaunch, 0)) }),
			ok("settle k", func(r Records) error { return r.SettleLaunch(launch("k", 0)) }),
			fails("settle k9 with no time", "at is not set", func(r Records) error { return r.SettleLaunch(Launch{Key: "k9", Pool: "a", Count: 1}) }),
			read("k settled, k9 not", []Intent{intent("k9", IntentLaunch, 0)}, intents),
			ok("settle one with no intent", func(r Records) error { return r.SettleLaunch(launch("k8", 3)) }),
			ok("put two", func(r Records) error { return r.PutLaunches(launch("k0", -1, "i-9"), launch("k", 0, "i-1")) }),
			ok("an empty claim list", func(r Records) error {
				return r.PutLaunches(Launch{Key: "k8", Pool: "a", Count: 1, At: minute(3), Claimed: []string{}, Spent: 1})
			}),
			ok("a tie with k", func(r Records) error { return r.PutLaunches(launch("j", 0)) }),
			fails("no key", "want a key and a pool", func(r Records) error { return r.PutLaunches(Launch{Pool: "a", At: t0}) }),
			fails("negative count, with a good one", "neither negative", func(r Records) error {
				return r.PutLaunches(launch("new", 5), Launch{Key: "x", Pool: "a", Count: -1, At: t0})
			}),
			fails("negative spent", "neither negative", func(r Records) error { return r.PutLaunches(Launch{Key: "x", Pool: "a", Spent: -1, At: t0}) }),
			fails("no time", "at is not set", func(r Records) error { return r.PutLaunches(Launch{Key: "x", Pool: "a"}) }),
			read("oldest first, ties by key; none of a refused batch", []Launch{launch("k0", -1, "i-9"), launch("j", 0), launch("k", 0, "i-1"),
				{Key: "k8", Pool: "a", Count: 1, At: minute(3), Spent: 1}}, launches),
			read("unclaimed", []int{1, 2, 1, 0}, func(r Records) (any, error) {
				ls, err := r.Launches()
				var n []int
				for _, l := range ls {
					n = append(n, l.Unclaimed())
				}
				return n, err
			}),
			ok("delete k0, j and one not there", func(r Records) error { return r.DeleteLaunches("k0", "j", "zz") }),
			ok("delete none", func(r Records) error { return r.DeleteLaunches() }),
			read("left", []Launch{launch("k", 0, "i-1"), {Key: "k8", Pool: "a", Count: 1, At: minute(3), Spent: 1}}, launches),
		}},
		{"ready, seen and cancelled", []step{
			read("none ready", []NodeTime(nil), func(r Records) (any, error) { return r.ReadyNodes() }),
			ok("ready", func(r Records) error { return r.PutReady(t0, "i-3", "i-1", "i-2") }),
			fails("one with no node", "want a node and a time", func(r Records) error { return r.PutReady(t0, "i-4", "") }),
			fails("no time", "want a node and a time", func(r Records) error { return r.PutReady(time.Time{}, "i-5") }),
			ok("i-2 again, later", func(r Records) error { return r.PutReady(minute(1), "i-2") }),
			ok("none", func(r Records) error { return r.PutReady(t0) }),
			ok("forget i-1 and one not there", func(r Records) error { return r.DeleteReady("i-1", "i-9") }),
			read("ready, by node", []NodeTime{{"i-2", minute(1)}, {"i-3", t0}}, func(r Records) (any, error) { return r.ReadyNodes() }),
			ok("seen", func(r Records) error { return r.PutSeen(t0, "b", "a") }),
			fails("seen, no node", "seen node", func(r Records) error { return r.PutSeen(t0, "") }),
			ok("forget b", func(r Records) error { return r.DeleteSeen("b") }),
			read("seen", []NodeTime{{"a", t0}}, func(r Records) (any, error) { return r.SeenNodes() }),
			ok("cancelled", func(r Records) error { return r.PutCancelled("n2", t0) }),
			ok("cancelled, another", func(r Records) error { return r.PutCancelled("n1", minute(2)) }),
			fails("cancelled, no node", "cancelled drain", func(r Records) error { return r.PutCancelled("", t0) }),
			fails("cancelled, no time", "want a node and a time", func(r Records) error { return r.PutCancelled("n3", time.Time{}) }),
			read("cancelled, by node", []Cancelled{{"n1", minute(2)}, {"n2", t0}}, func(r Records) (any, error) { return r.CancelledDrains() }),
			ok("forget n1", func(r Records) error { return r.DeleteCancelled("n1") }),
			read("cancelled left", []Cancelled{{"n2", t0}}, func(r Records) (any, error) { return r.CancelledDrains() }),
			ok("cancelled now, in the local zone", func(r Records) error { return r.PutCancelled("n5", now) }),
			ok("cancelled now, in another", func(r Records) error { return r.PutCancelled("n6", now.In(east)) }),
			read("cancelled, as read back", nil, func(r Records) (any, error) { return r.CancelledDrains() }),
			ok("forget n5, n6", func(r Records) error { return cmpErr(r.DeleteCancelled("n5"), r.DeleteCancelled("n6")) }),
			read("ready untouched", []NodeTime{{"i-2", minute(1)}, {"i-3", t0}}, func(r Records) (any, error) { return r.ReadyNodes() }),
		}},
		{"pools", []step{
			read("none", []PoolRecord(nil), func(r Records) (any, error) { return r.Pools() }),
			ok("b, a", func(r Records) error {
				return r.PutPools(PoolRecord{Name: "b", GPUsPerNode: 8, PricePerHour: 1.5}, PoolRecord{Name: "a", InstanceType: "p5", GPUsPerNode: 8, PricePerHour: 98.32})
			}),
			fails("a again, and one with no name", "no name", func(r Records) error {
				return r.PutPools(PoolRecord{Name: "a", GPUsPerNode: 1}, PoolRecord{GPUsPerNode: 8})
			}),
			fails("a price of NaN", "unsupported value: NaN", func(r Records) error { return r.PutPools(PoolRecord{Name: "c", PricePerHour: math.NaN()}) }),
			fails("a price of -Inf", "unsupported value: -Inf", func(r Records) error { return r.PutPools(PoolRecord{Name: "c", PricePerHour: math.Inf(-1)}) }),
			ok("none", func(r Records) error { return r.PutPools() }),
			ok("b again", func(r Records) error {
				return r.PutPools(PoolRecord{Name: "b", GPUsPerNode: 4, PricePerHour: 0.1 + 0.2})
			}),
			read("by name", []PoolRecord{{Name: "a", InstanceType: "p5", GPUsPerNode: 8, PricePerHour: 98.32}, {Name: "b", GPUsPerNode: 4, PricePerHour: 0.1 + 0.2}},
				func(r Records) (any, error) { return r.Pools() }),
		}},
		{"credentials", []step{
			read("none", []Credential(nil), func(r Records) (any, error) { return r.Credentials() }),
			ok("n2", func(r Records) error {
				return r.PutCredential(Credential{Node: "n2", Pool: "a", Hash: "h2", Previous: "h1", PreviousUntil: minute(5), Issued: t0, Registered: minute(-60),
					Via: "bootstrap", Rotations: 1, Nonce: "nonce", Instance: "vm-1", InstanceCreated: minute(-61)})
			}),
			ok("n1", func(r Records) error {
				return r.PutCredential(Credential{Node: "n1", Hash: "h", Issued: t0, Registered: t0, Via: "operator"})
			}),
			ok("n1 revoked", func(r Records) error {
				return r.PutCredential(Credential{Node: "n1", Hash: "h", Issued: t0, Registered: t0, Via: "operator", Revoked: minute(1)})
			}),
			fails("no node", "no node or hash", func(r Records) error { return r.PutCredential(Credential{Hash: "h"}) }),
			fails("no hash", "no node or hash", func(r Records) error { return r.PutCredential(Credential{Node: "n3"}) }),
			ok("n3", func(r Records) error { return r.PutCredential(Credential{Node: "n3", Hash: "h3"}) }),
			read("by node", nil, func(r Records) (any, error) { return r.Credentials() }),
			ok("forget n3, n2 and one not there", func(r Records) error { return r.DeleteCredentials("n3", "n2", "n9") }),
			read("left", []Credential{{Node: "n1", Hash: "h", Issued: t0, Registered: t0, Via: "operator", Revoked: minute(1)}},
				func(r Records) (any, error) { return r.Credentials() }),
		}},
		{"API tokens", []step{
			read("none", []APIToken(nil), func(r Records) (any, error) { return r.APITokens() }),
			ok("slurm", func(r Records) error {
				return r.PutAPIToken(APIToken{Name: "slurm", Scope: "demand", Hash: "h1", Created: t0})
			}),
			ok("grafana", func(r Records) error {
				return r.PutAPIToken(APIToken{Name: "grafana", Scope: "read", Hash: "h2", Created: t0, By: "admin"})
			}),
			ok("slurm rotated", func(r Records) error {
				return r.PutAPIToken(APIToken{Name: "slurm", Scope: "demand", Hash: "h3", Previous: "h1", PreviousUntil: minute(10),
					Created: t0, Rotated: minute(1), Rotations: 1, By: "admin"})
			}),
			fails("no name", "no name, hash or scope", func(r Records) error { return r.PutAPIToken(APIToken{Scope: "read", Hash: "h"}) }),
			fails("no hash", "no name, hash or scope", func(r Records) error { return r.PutAPIToken(APIToken{Name: "x", Scope: "read"}) }),
			fails("no scope", "no name, hash or scope", func(r Records) error { return r.PutAPIToken(APIToken{Name: "x", Hash: "h"}) }),
			read("by name", []APIToken{{Name: "grafana", Scope: "read", Hash: "h2", Created: t0, By: "admin"},
				{Name: "slurm", Scope: "demand", Hash: "h3", Previous: "h1", PreviousUntil: minute(10), Created: t0, Rotated: minute(1), Rotations: 1, By: "admin"}},
				func(r Records) (any, error) { return r.APITokens() }),
			ok("revoke grafana", func(r Records) error { return r.DeleteAPIToken("grafana") }),
			ok("revoke one not there", func(r Records) error { return r.DeleteAPIToken("nobody") }),
			read("left", []string{"slurm"}, func(r Records) (any, error) {
				ts, err := r.APITokens()
				var names []string
				for _, t := range ts {
					names = append(names, t.Name)
				}
				return names, err
			}),
		}},
		{"the fleet's name", []step{
			ok("claim prod", func(r Records) error { return r.ClaimFleet("prod") }),
			ok("claim prod again", func(r Records) error { return r.ClaimFleet("prod") }),
			fails("claim staging", `is fleet "prod"'s, and controller.fleet is "staging"`, func(r Records) error { return r.ClaimFleet("staging") }),
			fails("claim no name", `set controller.fleet back to "prod"`, func(r Records) error { return r.ClaimFleet("") }),
		}},
		{"usage hours and job records", []step{
			ok("two hours and three jobs", func(r Records) error {
				return r.PutUsage([]UsageHour{
					{Hour: minute(0), Team: "alpha", Tier: "critical", Charges: []UsageCharge{{Pool: "od", Kind: "used", Micros: 16_000_000, GPUHours: 4}}, Started: 1, Queue: []int64{900}},
					{Hour: minute(60).In(east), Team: "idle", Tier: "idle", Charges: []UsageCharge{{Pool: "od", Kind: "idle", Micros: 8_000_000, GPUHours: 2}}},
				}, []UsageJob{
					{ID: "a1", Team: "alpha", Tier: "critical", Name: "train", Pool: "od", Nodes: 2, GPUs: 16, Submitted: minute(-15).In(east), Start: minute(0), LastCheckpoint: now, Checkpoints: 3, Micros: 1, GPUHours: 0.5},
					{ID: "b1", Team: "beta", Tier: "standard", Pool: "od", Start: minute(30), End: minute(90), Micros: 2},
					{ID: "c1", Team: "beta", Tier: "standard", Pool: "od", Start: minute(120)},
				})
			}),
			read("the hours from 0:30", 1, func(r Records) (any, error) { h, err := r.UsageHours(minute(30), time.Time{}); return len(h), err }),
			read("every hour", nil, func(r Records) (any, error) { return r.UsageHours(time.Time{}, time.Time{}) }),
			read("the jobs started in [0:00, 2:00)", []string{"a1", "b1"}, func(r Records) (any, error) {
				js, err := r.UsageJobs(minute(0), minute(120))
				var ids []string
				for _, j := range js {
					ids = append(ids, j.ID)
				}
				return ids, err
			}),
			read("every job", nil, func(r Records) (any, error) { return r.UsageJobs(time.Time{}, time.Time{}) }),
			ok("a1 again, further on", func(r Records) error {
				return r.PutUsage(nil, []UsageJob{{ID: "a1", Team: "alpha", Tier: "critical", Pool: "od", Start: minute(0), Micros: 5, GPUHours: 1}})
			}),
			read("a1 replaced", nil, func(r Records) (any, error) { return r.UsageJobs(minute(0), minute(1)) }),
			fails("an hour not on the hour", "want the start of an hour", func(r Records) error {
				return r.PutUsage([]UsageHour{{Hour: minute(5), Team: "a", Tier: "b"}}, nil)
			}),
			fails("a job ending before its start", "before its start", func(r Records) error {
				return r.PutUsage(nil, []UsageJob{{ID: "x", Start: minute(10), End: minute(5)}})
			}),
			fails("a job starting in 1969", "want a time from 1970 to 2262", func(r Records) error {
				return r.PutUsage(nil, []UsageJob{{ID: "x", Start: time.Date(1969, 1, 1, 0, 0, 0, 0, time.UTC)}})
			}),
			read("pruned: the hours before 1:00, the jobs ended before 2:00", 2, func(r Records) (any, error) {
				return r.PruneUsage(minute(60), minute(120))
			}),
			read("the jobs left", []string{"a1", "c1"}, func(r Records) (any, error) {
				js, err := r.UsageJobs(time.Time{}, time.Time{})
				var ids []string
				for _, j := range js {
					ids = append(ids, j.ID)
				}
				return ids, err
			}),
		}},
		{"views", []step{
			ok("plan and fleet", func(r Records) error {
				return r.PutViews(View{Name: "plan", At: minute(1), JSON: []byte(`{"at":"x"}`)}, View{Name: "fleet", At: minute(1).In(east), JSON: []byte(`[]`)})
			}),
			ok("plan again", func(r Records) error {
				return r.PutViews(View{Name: "plan", At: minute(2), JSON: []byte(`{"at":"y"}`)})
			}),
			fails("not JSON", "want a name, a time and JSON", func(r Records) error { return r.PutViews(View{Name: "plan", At: minute(3), JSON: []byte(`{`)}) }),
			fails("no time", "want a name, a time and JSON", func(r Records) error { return r.PutViews(View{Name: "plan", JSON: []byte(`{}`)}) }),
			read("by name", nil, func(r Records) (any, error) {
				vs, err := r.Views()
				var out []string
				for _, v := range vs {
					out = append(out, v.Name+" "+v.At.UTC().Format(time.RFC3339)+" "+string(v.JSON))
				}
				return out, err
			}),
		}},
		{"the fleet's empty name", []step{
			ok("claim no name", func(r Records) error { return r.ClaimFleet("") }),
			ok("again", func(r Records) error { return r.ClaimFleet("") }),
			fails("claim prod", `is fleet ""'s`, func(r Records) error { return r.ClaimFleet("prod") }),
		}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			s := open(t, t.TempDir())
			defer s.Close()
			e := openEtcd(t, etcd, "/conform/"+tt.name+"/", nil)
			m := &Memory{}
			for i, st := range tt.steps {
				where := fmt.Sprintf("step %d (%s)", i, st.op)
				mgot, merr := st.do(m)
				mem, merrText := fmt.Sprintf("%+v", mgot), errText(merr, m.Path())
				for _, r := range []*Store{s, e} {
					res, err := st.do(r)
					got := fmt.Sprintf("%+v", res)
					if got != mem {
						t.Errorf("%s: %s %s, memory %s", where, r.Path(), got, mem)
					}
					if st.want != nil {
						if want := fmt.Sprintf("%+v", st.want); got != want {
							t.Errorf("%s: %s %s; want %s", where, r.Path(), got, want)
						}
					}
					serr := errText(err, r.Path())
					switch {
					case serr != merrText:
						t.Errorf("%s: %s error %q, memory error %q", where, r.Path(), serr, merrText)
					case st.err == "" && serr != "":
						t.Errorf("%s: %s; want no error", where, serr)
					case st.err != "" && !strings.Contains(serr, st.err):
						t.Errorf("%s: error %q; want one containing %q", where, serr, st.err)
					}
				}
			}
		})
	}
}

// errText is err's text with path, where the records are kept, as
// "memory"; "" for none.
func errText(err error, path string) string {
	if err == nil {
		return ""
	}
	return strings.ReplaceAll(err.Error(), path, "memory")
}

// cmpErr is the first of errs that is not nil.
func cmpErr(errs ...error) error {
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// nodesOf is a drain read's nodes, in order.
func nodesOf(read func(r Records) (any, error)) func(r Records) (any, error) {
	return func(r Records) (any, error) {
		got, err := read(r)
		var out []string
		for _, d := range got.([]Drain) {
			out = append(out, d.Node)
		}
		return out, err
	}
}

// TestRecordsConformRandomly runs random sequences of writes on a Store
// and a Memory and checks, after each, that both took it or both refused
// it alike, and at the end that every record reads back the same from
// both.
func TestRecordsConformRandomly(t *testing.T) {
	etcd := etcdtest.Start(t).Client(t)
	run := 0
	rapid.Check(t, func(rt *rapid.T) {
		run++
		// Small transactions and pages, so that writes are split and reads
		// paged.
		e, err := OpenEtcd(context.Background(), EtcdOptions{Client: etcd, Prefix: fmt.Sprintf("/random/%d/", run), MaxTxnOps: 2})
		if err != nil {
			rt.Fatal(err)
		}
		e.kv.(*etcdKV).page = 2
		dir, err := os.MkdirTemp("", "fleetcast-records-")
		if err != nil {
			rt.Fatal(err)
		}
		defer os.RemoveAll(dir)
		s, err := Open(dir)
		if err != nil {
			rt.Fatal(err)
		}
		defer s.Close()
		m := &Memory{}
		key := rapid.SampledFrom([]string{"a", "b", "c", ""})
		at := func(label string) time.Time {
			return t0.Add(time.Duration(rapid.IntRange(-30, 30).Draw(rt, label)) * 30 * time.Second)
		}
		sample := rapid.Custom(func(rt *rapid.T) Sample {
			return Sample{at("time"), float64(rapid.IntRange(0, 100).Draw(rt, "value"))}
		})
		for i := range rapid.IntRange(1, 30).Draw(rt, "steps") {
			var op func(r Records) (any, error)
			switch rapid.IntRange(0, 13).Draw(rt, "op") {
			case 0:
				xs := rapid.SliceOfN(sample, 0, 3).Draw(rt, "samples")
				series := key.Draw(rt, "series")
				op = func(r Records) (any, error) { return nil, r.AppendDemand(series, xs...) }
			case 1:
				xs := rapid.SliceOfN(sample, 0, 4).Draw(rt, "samples")
				step := time.Duration(rapid.SampledFrom([]int{0, 1, 2, 5}).Draw(rt, "step")) * time.Minute
				op = func(r Records) (any, error) {
					added, kept, err := r.FillDemand("fleet", step, xs...)
					return two(added, kept), err
				}
			case 2:
				before := at("before")
				op = func(r Records) (any, error) { return r.PruneDemand(before) }
			case 3:
				start := at("start")
				d := Drain{Node: key.Draw(rt, "node"), Pool: "p", Started: start, Deadline: start.Add(time.Duration(rapid.IntRange(-1, 2).Draw(rt, "length")) * time.Minute)}
				op = func(r Records) (any, error) { return nil, r.PutDrain(d) }
			case 4:
				node := key.Draw(rt, "node")
				op = func(r Records) (any, error) { return nil, r.DeleteDrain(node) }
			case 5:
				before := at("before")
				op = func(r Records) (any, error) { return r.PruneDrainLog(before) }
			case 6:
				b := Backoff{Pool: key.Draw(rt, "pool"), Failures: rapid.IntRange(-1, 3).Draw(rt, "failures"), Until: at("until")}
				op = func(r Records) (any, error) { return nil, r.PutBackoff(b) }
			case 7:
				pool := key.Draw(rt, "pool")
				op = func(r Records) (any, error) { return nil, r.DeleteBackoff(pool) }
			case 8:
				in := Intent{Key: key.Draw(rt, "key"), Kind: IntentLaunch, Pool: "p", Count: 1, Target: rapid.IntRange(0, 2).Draw(rt, "target"), Created: at("created")}
				op = func(r Records) (any, error) { return nil, r.PutIntent(in) }
			case 9:
				k := key.Draw(rt, "key")
				op = func(r Records) (any, error) { return nil, r.DoneIntent(k) }
			case 10:
				l := Launch{Key: key.Draw(rt, "key"), Pool: "p", Count: rapid.IntRange(-1, 2).Draw(rt, "count"), At: at("at")}
				op = func(r Records) (any, error) { return nil, r.SettleLaunch(l) }
			case 11:
				l := Launch{Key: key.Draw(rt, "key"), Pool: "p", Count: 2, At: at("at"), Claimed: rapid.SliceOfN(key, 0, 2).Draw(rt, "claimed")}
				op = func(r Records) (any, error) { return nil, r.PutLaunches(l) }
			case 12:
				k := key.Draw(rt, "key")
				op = func(r Records) (any, error) { return nil, r.DeleteLaunches(k) }
			case 13:
				nodes := rapid.SliceOfN(key, 0, 3).Draw(rt, "nodes")
				t := at("t")
				op = func(r Records) (any, error) { return nil, r.PutReady(t, nodes...) }
			}
			mgot, merr := op(m)
			for _, r := range []*Store{s, e} {
				sgot, serr := op(r)
				if a, b := fmt.Sprintf("%+v", sgot), fmt.Sprintf("%+v", mgot); a != b {
					rt.Fatalf("step %d: %s %s, memory %s", i, r.Path(), a, b)
				}
				if a, b := errText(serr, r.Path()), errText(merr, m.Path()); a != b {
					rt.Fatalf("step %d: %s error %q, memory error %q", i, r.Path(), a, b)
				}
			}
		}
		for name, read := range map[string]func(r Records) (any, error){
			"series":    func(r Records) (any, error) { return r.DemandSeries() },
			"demand":    func(r Records) (any, error) { return r.Demand("a", time.Time{}) },
			"demand b":  func(r Records) (any, error) { return r.Demand("b", t0) },
			"fleet":     func(r Records) (any, error) { return r.Demand("fleet", time.Time{}) },
			"latest":    func(r Records) (any, error) { x, ok, err := r.LatestDemand("fleet"); return two(x, ok), err },
			"drains":    func(r Records) (any, error) { return r.Drains() },
			"drain log": func(r Records) (any, error) { return r.DrainLog(time.Time{}) },
			"log since": func(r Records) (any, error) { return r.DrainLog(t0) },
			"backoffs":  func(r Records) (any, error) { return r.Backoffs() },
			"intents":   func(r Records) (any, error) { return r.Intents() },
			"launches":  func(r Records) (any, error) { return r.Launches() },
			"ready":     func(r Records) (any, error) { return r.ReadyNodes() },
		} {
			mgot, merr := read(m)
			for _, r := range []*Store{s, e} {
				sgot, serr := read(r)
				if serr != nil || merr != nil {
					rt.Fatalf("%s: %s %v, memory %v", name, r.Path(), serr, merr)
				}
				if a, b := fmt.Sprintf("%+v", sgot), fmt.Sprintf("%+v", mgot); a != b {
					rt.Fatalf("%s: %s %s, memory %s", name, r.Path(), a, b)
				}
			}
		}
	})
}
