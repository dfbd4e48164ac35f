package state

import (
	"errors"
	"fmt"
	"maps"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"
	"pgregory.net/rapid"
)

var t0 = time.Date(2026, 11, 30, 10, 0, 0, 0, time.UTC)

func open(t *testing.T, dir string) *Store {
	t.Helper()
	s, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestReopenKeepsEverything(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "state")
	s := open(t, dir)
	launch := Intent{Key: "fc-launch-1", Kind: IntentLaunch, Pool: "a100", Count: 2, Target: 5, Created: t0}
	term := Intent{Key: "fc-term-1", Kind: IntentTerminate, Pool: "a100", Node: "i-1", Created: t0.Add(-time.Minute)}
	drain := Drain{Node: "i-2", Pool: "a100", Started: t0, Deadline: t0.Add(30 * time.Minute)}
	backoff := Backoff{Pool: "h100-spot", Failures: 2, Until: t0.Add(10 * time.Minute), Reason: "InsufficientInstanceCapacity"}
	for _, err := range []error{
		s.PutIntent(launch), s.PutIntent(term), s.PutDrain(drain), s.PutBackoff(backoff),
		s.AppendDemand("fleet", Sample{t0, 10}, Sample{t0.Add(time.Minute), 12.5}),
	} {
		if err != nil {
			t.Fatal(err)
		}
	}
	if err := s.PutCancelled("i-3", t0); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(dir); err != nil || fi.Mode().Perm() != 0o700 {
		t.Errorf("state dir: %v, %v; want mode 0700", fi.Mode().Perm(), err)
	}
	if fi, err := os.Stat(filepath.Join(dir, FileName)); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("state file: %v, %v; want mode 0600", fi.Mode().Perm(), err)
	}

	s = open(t, dir)
	defer s.Close()
	intents, err := s.Intents()
	if err != nil {
		t.Fatal(err)
	}
	if want := []Intent{term, launch}; !slices.Equal(intents, want) {
		t.Errorf("intents = %+v, want %+v (oldest first)", intents, want)
	}
	if drains, err := s.Drains(); err != nil || !slices.Equal(drains, []Drain{drain}) {
		t.Errorf("drains = %+v, %v", drains, err)
	}
	if bs, err := s.Backoffs(); err != nil || !slices.Equal(bs, []Backoff{backoff}) {
		t.Errorf("backoffs = %+v, %v", bs, err)
	}
	got, err := s.Demand("fleet", t0.Add(time.Second))
	if err != nil || !slices.Equal(got, []Sample{{t0.Add(time.Minute), 12.5}}) {
		t.Errorf("demand since t0+1s = %+v, %v", got, err)
	}
	if c, err := s.CancelledDrains(); err != nil || !slices.Equal(c, []Cancelled{{"i-3", t0}}) {
		t.Errorf("cancelled = %+v, %v", c, err)
	}
	if err := s.DeleteCancelled("i-3"); err != nil {
		t.Fatal(err)
	}
	if c, _ := s.CancelledDrains(); len(c) != 0 {
		t.Errorf("cancelled after delete: %+v", c)
	}
	if err := s.DoneIntent(launch.Key); err != nil {
		t.Fatal(err)
	}
	if err := s.DoneIntent(launch.Key); err != nil {
		t.Errorf("done twice: %v, want no error", err)
	}
	if intents, _ := s.Intents(); !slices.Equal(intents, []Intent{term}) {
		t.Errorf("after done: %+v", intents)
	}
}

func TestIntentKeyOnce(t *testing.T) {
	s := open(t, t.TempDir())
	defer s.Close()
	in := Intent{Key: "k", Kind: IntentDrain, Pool: "p", Node: "n", Created: t0}
	if err := s.PutIntent(in); err != nil {
		t.Fatal(err)
	}
	if err := s.PutIntent(in); err == nil || !strings.Contains(err.Error(), "already journaled") {
		t.Errorf("second put of key k: %v, want already journaled", err)
	}
}

func TestBadRecordsRefused(t *testing.T) {
	s := open(t, t.TempDir())
	defer s.Close()
	tests := []struct {
		name string
		err  error
		want string
	}{
		{"intent no key", s.PutIntent(Intent{Kind: IntentLaunch, Pool: "p", Count: 1, Target: 1, Created: t0}), "key is empty"},
		{"intent bad kind", s.PutIntent(Intent{Key: "k", Kind: "reboot", Pool: "p", Created: t0}), `kind "reboot"`},
		{"intent no pool", s.PutIntent(Intent{Key: "k", Kind: IntentDrain, Node: "n", Created: t0}), "pool is empty"},
		{"launch count 0", s.PutIntent(Intent{Key: "k", Kind: IntentLaunch, Pool: "p", Created: t0}), "count >= 1"},
		{"launch target < count", s.PutIntent(Intent{Key: "k", Kind: IntentLaunch, Pool: "p", Count: 3, Target: 2, Created: t0}), "target >= count"},
		{"terminate no node", s.PutIntent(Intent{Key: "k", Kind: IntentTerminate, Pool: "p", Created: t0}), "terminate with no node"},
		{"intent no time", s.PutIntent(Intent{Key: "k", Kind: IntentTerminate, Pool: "p", Node: "n"}), "created is not set"},
		{"drain no node", s.PutDrain(Drain{Pool: "p", Started: t0, Deadline: t0}), "no node"},
		{"drain no pool", s.PutDrain(Drain{Node: "n", Started: t0, Deadline: t0}), "pool is empty"},
		{"drain deadline before start", s.PutDrain(Drain{Node: "n", Pool: "p", Started: t0, Deadline: t0.Add(-1)}), "deadline after it"},
		{"backoff no pool", s.PutBackoff(Backoff{Failures: 1}), "no pool"},
		{"backoff negative failures", s.PutBackoff(Backoff{Pool: "p", Failures: -1}), "at least 0"},
		{"cancelled no node", s.PutCancelled("", t0), "want a node and a time"},
		{"demand NaN", s.AppendDemand("fleet", Sample{t0, math.NaN()}), "is NaN"},
		{"demand unnamed", s.AppendDemand("", Sample{t0, 1}), "no name"},
	}
	for _, tt := range tests {
		if tt.err == nil || !strings.Contains(tt.err.Error(), tt.want) {
			t.Errorf("%s: %v, want an error containing %q", tt.name, tt.err, tt.want)
		}
	}
	for name, f := range map[string]func() (int, error){
		"intents":  func() (int, error) { x, err := s.Intents(); return len(x), err },
		"drains":   func() (int, error) { x, err := s.Drains(); return len(x), err },
		"backoffs": func() (int, error) { x, err := s.Backoffs(); return len(x), err },
		"demand":   func() (int, error) { x, err := s.DemandSeries(); return len(x), err },
	} {
		if n, err := f(); n != 0 || err != nil {
			t.Errorf("%s: %d stored after refusals (%v), want none", name, n, err)
		}
	}
}

func TestDemandPrune(t *testing.T) {
	s := open(t, t.TempDir())
	defer s.Close()
	for i := range 10 {
		if err := s.AppendDemand("fleet", Sample{t0.Add(time.Duration(i) * time.Minute), float64(i)}); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.AppendDemand("a100", Sample{t0, 1}, Sample{t0.Add(9 * time.Minute), 2}); err != nil {
		t.Fatal(err)
	}
	// A sample at a recorded time replaces it.
	if err := s.AppendDemand("fleet", Sample{t0.Add(9 * time.Minute), 99}); err != nil {
		t.Fatal(err)
	}
	n, err := s.PruneDemand(t0.Add(5 * time.Minute))
	if err != nil || n != 6 {
		t.Fatalf("prune = %d, %v; want 6 (5 of fleet, 1 of a100)", n, err)
	}
	got, _ := s.Demand("fleet", time.Time{})
	if len(got) != 5 || !got[0].Time.Equal(t0.Add(5*time.Minute)) || got[4].Value != 99 {
		t.Errorf("fleet after prune: %+v", got)
	}
	if names, _ := s.DemandSeries(); !slices.Equal(names, []string{"a100", "fleet"}) {
		t.Errorf("series = %v", names)
	}
	if x, ok, err := s.LatestDemand("fleet"); !ok || err != nil || x != (Sample{t0.Add(9 * time.Minute), 99}) {
		t.Errorf("latest = %+v, %v, %v", x, ok, err)
	}
	if _, ok, err := s.LatestDemand("unknown"); ok || err != nil {
		t.Errorf("latest of an unknown series: %v, %v", ok, err)
	}
	if got, err := s.Demand("unknown", time.Time{}); got != nil || err != nil {
		t.Errorf("unknown series: %v, %v; want nothing", got, err)
	}
}

func TestSecondOpenIsInUse(t *testing.T) {
	dir := t.TempDir()
	s := open(t, dir)
	defer s.Close()
	_, err := Open(dir)
	if !errors.Is(err, ErrInUse) || !strings.Contains(err.Error(), filepath.Join(dir, FileName)) {
		t.Errorf("second open: %v, want ErrInUse naming the file", err)
	}
}

func TestRefusesForeignAndDamagedFiles(t *testing.T) {
	valid := func(t *testing.T, dir string) []byte {
		s := open(t, dir)
		for i := range 50 {
			if err := s.PutIntent(Intent{Key: fmt.Sprint("k", i), Kind: IntentDrain, Pool: "p", Node: "n", Created: t0}); err != nil {
				t.Fatal(err)
			}
		}
		s.Close()
		data, err := os.ReadFile(filepath.Join(dir, FileName))
		if err != nil {
			t.Fatal(err)
		}
		return data
	}
	tests := []struct {
		name  string
		setup func(t *testing.T, path string)
		want  string
	}{
		{"not bbolt", func(t *testing.T, path string) {
			os.WriteFile(path, []byte(strings.Repeat("this is not a database\n", 1000)), 0o600)
		}, "corrupted or not a bbolt file"},
		{"empty file of zeros", func(t *testing.T, path string) {
			os.WriteFile(path, make([]byte, 8192), 0o600)
		}, "corrupted or not a bbolt file"},
		{"truncated", func(t *testing.T, path string) {
			data := valid(t, t.TempDir())
			os.WriteFile(path, data[:100], 0o600)
		}, "corrupted or not a bbolt file"},
		{"foreign bbolt", func(t *testing.T, path string) {
			db, err := bolt.Open(path, 0o600, nil)
			if err != nil {
				t.Fatal(err)
			}
			db.Update(func(tx *bolt.Tx) error {
				b, _ := tx.CreateBucket([]byte("vault"))
				return b.Put([]byte("k"), []byte("v"))
			})
			db.Close()
		}, "not a Fleetcast state file"},
		{"other format marker", func(t *testing.T, path string) {
			db, _ := bolt.Open(path, 0o600, nil)
			db.Update(func(tx *bolt.Tx) error {
				b, _ := tx.CreateBucket(bucketMeta)
				return b.Put(keyFormat, []byte("something-else"))
			})
			db.Close()
		}, `meta.format is "something-else"`},
		{"newer version", func(t *testing.T, path string) {
			s := open(t, filepath.Dir(path))
			s.kv.update(func(tx kvTx) error { return tx.Bucket(bucketMeta).Put(keyVersion, []byte("7")) })
			s.Close()
		}, "newer Fleetcast (state version 7"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			path := filepath.Join(dir, FileName)
			tt.setup(t, path)
			before, _ := os.ReadFile(path)
			s, err := Open(dir)
			if err == nil {
				s.Close()
				t.Fatalf("opened; want an error containing %q", tt.want)
			}
			if !strings.Contains(err.Error(), tt.want) || !strings.Contains(err.Error(), path) {
				t.Errorf("error %q; want it to contain %q and name %s", err, tt.want, path)
			}
			if after, _ := os.ReadFile(path); string(after) != string(before) {
				t.Error("the refused file was changed")
			}
		})
	}
}

func TestOpenErrorIsNotCalledCorruption(t *testing.T) {
	dir := t.TempDir()
	// A directory where the file should be: an OS error, not a damaged file.
	if err := os.Mkdir(filepath.Join(dir, FileName), 0o700); err != nil {
		t.Fatal(err)
	}
	_, err := Open(dir)
	if err == nil || strings.Contains(err.Error(), "corrupted") || !strings.Contains(err.Error(), "opening "+filepath.Join(dir, FileName)) {
		t.Errorf("open: %v; want the OS error, not advice to move the file aside", err)
	}
}

func TestDrainLog(t *testing.T) {
	dir := t.TempDir()
	s := open(t, dir)
	for i, node := range []string{"i-1", "i-2", "i-3"} {
		at := t0.Add(time.Duration(i) * 10 * time.Minute)
		if err := s.PutDrain(Drain{Node: node, Pool: "od", Started: at, Deadline: at.Add(20 * time.Minute)}); err != nil {
			t.Fatal(err)
		}
	}
	// The log outlives the drain: finished drains still count.
	if err := s.DeleteDrain("i-2"); err != nil {
		t.Fatal(err)
	}
	s.Close()
	s = open(t, dir)
	defer s.Close()
	got, err := s.DrainLog(t0.Add(10 * time.Minute))
	if err != nil || len(got) != 2 || got[0].Node != "i-2" || got[1].Node != "i-3" || !got[0].Started.Equal(t0.Add(10*time.Minute)) {
		t.Fatalf("drain log since +10m = %+v, %v; want i-2 and i-3", got, err)
	}
	if n, err := s.PruneDrainLog(t0.Add(15 * time.Minute)); n != 2 || err != nil {
		t.Fatalf("prune = %d, %v; want 2", n, err)
	}
	if got, _ := s.DrainLog(time.Time{}); len(got) != 1 || got[0].Node != "i-3" {
		t.Fatalf("after prune: %+v", got)
	}
}

func TestUndecodableRecordNamed(t *testing.T) {
	s := open(t, t.TempDir())
	defer s.Close()
	s.kv.update(func(tx kvTx) error {
		return tx.Bucket(bucketDrains).Put([]byte("i-9"), sealed([]byte("i-9"), []byte(`{"node": 7}`)))
	})
	_, err := s.Drains()
	if err == nil || !strings.Contains(err.Error(), "drains/i-9") || !strings.Contains(err.Error(), s.Path()) {
		t.Errorf("drains: %v; want an error naming the file, bucket and key", err)
	}
}

// TestDamageNeverSilent damages a state file 16 bytes at a time, all
// through it, and checks each copy either is refused, naming the file, or
// reads back exactly what was written: damage is never a silently
// different state.
func TestDamageNeverSilent(t *testing.T) {
	src := t.TempDir()
	s := open(t, src)
	var intents []Intent
	var demand []Sample
	for i := range 150 {
		in := Intent{Key: fmt.Sprint("fc-", i), Kind: IntentLaunch, Pool: "p", Count: 1 + i%3, Target: 10 + i, Created: t0.Add(time.Duration(i) * time.Second)}
		intents = append(intents, in)
		demand = append(demand, Sample{t0.Add(time.Duration(i) * time.Minute), float64(i) / 3})
		if err := s.PutIntent(in); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.AppendDemand("fleet", demand...); err != nil {
		t.Fatal(err)
	}
	s.Close()
	data, err := os.ReadFile(filepath.Join(src, FileName))
	if err != nil {
		t.Fatal(err)
	}
	refused, intact := 0, 0
	for off := 0; off < len(data); off += 509 {
		damaged := slices.Clone(data)
		for i := off; i < min(off+16, len(damaged)); i++ {
			damaged[i] ^= 0xA5
		}
		dir := t.TempDir()
		path := filepath.Join(dir, FileName)
		if err := os.WriteFile(path, damaged, 0o600); err != nil {
			t.Fatal(err)
		}
		s, err := Open(dir)
		if err == nil {
			var gotIntents []Intent
			var gotDemand []Sample
			if gotIntents, err = s.Intents(); err == nil {
				gotDemand, err = s.Demand("fleet", time.Time{})
			}
			s.Close()
			if err == nil {
				if !slices.Equal(gotIntents, intents) || !slices.Equal(gotDemand, demand) {
					t.Fatalf("damage at byte %d: read back a different state without an error", off)
				}
				intact++
				continue
			}
		}
		if !strings.Contains(err.Error(), path) {
			t.Errorf("damage at byte %d: error %q does not name %s", off, err, path)
		}
		refused++
	}
	t.Logf("%d damaged copies: %d refused, %d read back intact (damage in unused space)", refused+intact, refused, intact)
	if refused == 0 {
		t.Error("no damaged copy was refused")
	}
}

// TestStoreMatchesModel runs random sequences of writes, closes and
// reopens against a map model: what was written is what is read back,
// across restarts.
func TestStoreMatchesModel(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		dir, err := os.MkdirTemp("", "fleetcast-state-")
		if err != nil {
			rt.Fatal(err)
		}
		defer os.RemoveAll(dir)
		s, err := Open(dir)
		if err != nil {
			rt.Fatal(err)
		}
		defer func() { s.Close() }()
		intents := map[string]Intent{}
		drains := map[string]Drain{}
		demand := map[time.Time]float64{}
		key := rapid.SampledFrom([]string{"a", "b", "c", "d"})
		for range rapid.IntRange(1, 40).Draw(rt, "steps") {
			switch rapid.IntRange(0, 5).Draw(rt, "op") {
			case 0:
				in := Intent{Key: key.Draw(rt, "key"), Kind: IntentLaunch, Pool: "p", Count: 1, Target: 3,
					Created: t0.Add(time.Duration(rapid.IntRange(0, 100).Draw(rt, "at")) * time.Second)}
				err := s.PutIntent(in)
				if _, dup := intents[in.Key]; dup != (err != nil) {
					rt.Fatalf("put %s: %v (already there: %v)", in.Key, err, dup)
				}
				if err == nil {
					intents[in.Key] = in
				}
			case 1:
				k := key.Draw(rt, "key")
				if err := s.DoneIntent(k); err != nil {
					rt.Fatal(err)
				}
				delete(intents, k)
			case 2:
				d := Drain{Node: key.Draw(rt, "node"), Pool: "p", Started: t0,
					Deadline: t0.Add(time.Duration(rapid.IntRange(0, 120).Draw(rt, "deadline")) * time.Minute)}
				if err := s.PutDrain(d); err != nil {
					rt.Fatal(err)
				}
				drains[d.Node] = d
			case 3:
				k := key.Draw(rt, "node")
				if err := s.DeleteDrain(k); err != nil {
					rt.Fatal(err)
				}
				delete(drains, k)
			case 4:
				at := t0.Add(time.Duration(rapid.IntRange(0, 20).Draw(rt, "minute")) * time.Minute)
				v := rapid.Float64Range(0, 1e6).Draw(rt, "value")
				if err := s.AppendDemand("fleet", Sample{at, v}); err != nil {
					rt.Fatal(err)
				}
				demand[at] = v
			case 5:
				if err := s.Close(); err != nil {
					rt.Fatal(err)
				}
				if s, err = Open(dir); err != nil {
					rt.Fatal(err)
				}
			}
		}
		gotIntents, err := s.Intents()
		if err != nil {
			rt.Fatal(err)
		}
		if len(gotIntents) != len(intents) {
			rt.Fatalf("intents %v, want %v", gotIntents, intents)
		}
		for i, in := range gotIntents {
			if intents[in.Key] != in {
				rt.Fatalf("intent %+v, want %+v", in, intents[in.Key])
			}
			if i > 0 && in.Created.Before(gotIntents[i-1].Created) {
				rt.Fatalf("intents out of order: %v", gotIntents)
			}
		}
		gotDrains, err := s.Drains()
		if err != nil {
			rt.Fatal(err)
		}
		if want := slices.Sorted(maps.Keys(drains)); len(gotDrains) != len(want) {
			rt.Fatalf("drains %v, want %v", gotDrains, drains)
		}
		for _, d := range gotDrains {
			if drains[d.Node] != d {
				rt.Fatalf("drain %+v, want %+v", d, drains[d.Node])
			}
		}
		got, err := s.Demand("fleet", time.Time{})
		if err != nil {
			rt.Fatal(err)
		}
		if len(got) != len(demand) {
			rt.Fatalf("demand %v, want %v", got, demand)
		}
		for i, x := range got {
			if demand[x.Time] != x.Value || (i > 0 && !x.Time.After(got[i-1].Time)) {
				rt.Fatalf("demand %v, want %v in time order", got, demand)
			}
		}
	})
}

// BenchmarkAppendDemand is one cycle's demand record: one sample, one
// synced transaction.
func BenchmarkAppendDemand(b *testing.B) {
	s, err := Open(b.TempDir())
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	at := t0
	for b.Loop() {
		at = at.Add(time.Minute)
		if err := s.AppendDemand("fleet", Sample{at, 100}); err != nil {
			b.Fatal(err)
		}
	}
}

func TestReadyNodes(t *testing.T) {
	dir := t.TempDir()
	s := open(t, dir)
	if err := s.PutReady(t0, "i-1", "i-2", "i-3"); err != nil {
		t.Fatal(err)
	}
	if err := s.PutReady(t0, "i-4", ""); err == nil {
		t.Fatal("a ready record with no node was taken")
	}
	if err := s.DeleteReady("i-1", "i-3"); err != nil {
		t.Fatal(err)
	}
	s.Close()
	s = open(t, dir)
	defer s.Close()
	got, err := s.ReadyNodes()
	if err != nil || len(got) != 1 || got[0] != (NodeTime{Node: "i-2", At: t0}) {
		t.Fatalf("ready nodes = %+v, %v; want i-2 alone (i-4 refused with its batch)", got, err)
	}
}

// TestLaunches: a launch is recorded as the controller's own in the same
// transaction that clears its intent, its claims are updated, and it
// survives a restart; bad records are refused.
func TestLaunches(t *testing.T) {
	dir := t.TempDir()
	s := open(t, dir)
	in := Intent{Key: "fc-launch-a-1", Kind: IntentLaunch, Pool: "a", Count: 2, Target: 2, Created: t0}
	if err := s.PutIntent(in); err != nil {
		t.Fatal(err)
	}
	if err := s.SettleLaunch(Launch{Key: in.Key, Pool: "a", Count: 2, At: t0}); err != nil {
		t.Fatal(err)
	}
	if got, _ := s.Intents(); len(got) != 0 {
		t.Fatalf("intents %+v after the launch was settled", got)
	}
	older := Launch{Key: "fc-launch-a-0", Pool: "a", Count: 1, At: t0.Add(-time.Minute), Claimed: []string{"i-9"}, Spent: 0}
	if err := s.PutLaunches(older, Launch{Key: in.Key, Pool: "a", Count: 2, At: t0, Claimed: []string{"i-1"}}); err != nil {
		t.Fatal(err)
	}
	for _, bad := range []Launch{{Pool: "a", At: t0}, {Key: "k", Pool: "a", Count: -1, At: t0}, {Key: "k", Pool: "a"}} {
		if err := s.PutLaunches(bad); err == nil {
			t.Errorf("launch %+v taken", bad)
		}
	}
	if err := s.PutSeen(t0, "i-1", "i-2"); err != nil {
		t.Fatal(err)
	}
	s.Close()
	s = open(t, dir)
	defer s.Close()
	got, err := s.Launches()
	if err != nil || len(got) != 2 || got[0].Key != older.Key || got[1].Unclaimed() != 1 || got[0].Unclaimed() != 0 {
		t.Fatalf("launches %+v, %v; want both, oldest first, with their claims", got, err)
	}
	if err := s.DeleteLaunches(older.Key); err != nil {
		t.Fatal(err)
	}
	if err := s.DeleteSeen("i-2"); err != nil {
		t.Fatal(err)
	}
	if got, _ := s.Launches(); len(got) != 1 || got[0].Key != in.Key {
		t.Fatalf("launches after a delete: %+v", got)
	}
	if seen, err := s.SeenNodes(); err != nil || len(seen) != 1 || seen[0] != (NodeTime{Node: "i-1", At: t0}) {
		t.Fatalf("seen %+v, %v", seen, err)
	}
}
