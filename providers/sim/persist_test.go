package sim

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/fleetcast/autoscaler/fleet"
	"github.com/fleetcast/autoscaler/providers"
)

func TestSaveAndLoad(t *testing.T) {
	t0 := time.Date(2026, 11, 30, 10, 0, 0, 0, time.UTC)
	clock := func() time.Time { return t0 }
	a := fleet.Pool{Name: "a", Provider: "sim", InstanceType: "x", GPUsPerNode: 8, Capacity: fleet.OnDemand, LeadTime: time.Minute, Max: 10, Zones: []string{"z1", "z2"}}
	b := a
	b.Name = "b"
	path := filepath.Join(t.TempDir(), "cloud.json")
	c := New([]fleet.Pool{a, b}, 7, clock)
	if err := c.SaveTo(path); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := c.Launch(ctx, a, providers.LaunchRequest{Count: 3, Target: 3, Key: "k1"}); err != nil {
		t.Fatal(err)
	}
	g, _ := c.Describe(ctx, a)
	if err := c.Terminate(ctx, a, []string{g.Instances[0].ID}); err != nil {
		t.Fatal(err)
	}

	// What a restarted process sees: the cloud as it was, its launch keys
	// remembered, and new instances numbered after the old ones.
	d, err := Load(path, []fleet.Pool{a, b}, clock)
	if err != nil {
		t.Fatal(err)
	}
	got, _ := d.Describe(ctx, a)
	if got.Target != 2 || len(got.Instances) != 2 || got.Instances[0].ID != g.Instances[1].ID {
		t.Fatalf("loaded group: %+v, want the 2 instances left", got)
	}
	if err := d.Launch(ctx, a, providers.LaunchRequest{Count: 3, Target: 5, Key: "k1"}); err != nil {
		t.Fatal(err)
	}
	if got, _ := d.Describe(ctx, a); got.Target != 2 {
		t.Errorf("a launch key seen before the restart launched again: target %d", got.Target)
	}
	if err := d.Launch(ctx, a, providers.LaunchRequest{Count: 1, Target: 3, Key: "k2"}); err != nil {
		t.Fatal(err)
	}
	got, _ = d.Describe(ctx, a)
	ids := map[string]bool{}
	for _, in := range append(g.Instances, got.Instances...) {
		ids[in.ID] = true
	}
	if len(ids) != 4 {
		t.Errorf("instance IDs reused after a restart: %v", got.Instances)
	}
	for name, tt := range map[string]struct {
		data  string
		pools []fleet.Pool
		want  string
	}{
		"not JSON":     {"nope", []fleet.Pool{a, b}, "cloud.json"},
		"bad rng":      {`{"groups": {}, "next_id": 0, "launch_keys": {}, "rng": "AAAA"}`, []fleet.Pool{a, b}, "rng: "},
		"inconsistent": {`{"groups": {"a": {"target": 2, "instances": []}}, "next_id": 0, "launch_keys": {}, "rng": null}`, []fleet.Pool{a, b}, "target 2 but 0 instances"},
	} {
		p := filepath.Join(t.TempDir(), "cloud.json")
		os.WriteFile(p, []byte(tt.data), 0o600)
		if _, err := Load(p, tt.pools, clock); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: %v, want %q", name, err, tt.want)
		}
	}
}

// TestLaunchKeysExpire: a launch key is remembered for KeyLifetime, then
// forgotten (as EC2 forgets a client token), so the set does not grow for
// ever; a file from before launch_keys keeps its keys.
func TestLaunchKeysExpire(t *testing.T) {
	now := time.Date(2026, 11, 30, 10, 0, 0, 0, time.UTC)
	clock := func() time.Time { return now }
	a := fleet.Pool{Name: "a", Provider: "sim", InstanceType: "x", GPUsPerNode: 8, Capacity: fleet.OnDemand, LeadTime: time.Minute, Max: 10}
	c := New([]fleet.Pool{a}, 1, clock)
	ctx := context.Background()
	target := func() int { g, _ := c.Describe(ctx, a); return g.Target }
	if err := c.Launch(ctx, a, providers.LaunchRequest{Target: 1, Key: "k1"}); err != nil {
		t.Fatal(err)
	}
	now = now.Add(KeyLifetime)
	if c.Launch(ctx, a, providers.LaunchRequest{Target: 2, Key: "k1"}); target() != 1 {
		t.Fatalf("a key reused within its lifetime launched: target %d", target())
	}
	now = now.Add(time.Second)
	if c.Launch(ctx, a, providers.LaunchRequest{Target: 2, Key: "k2"}); len(c.keys) != 1 {
		t.Fatalf("keys = %v; want only k2 once k1 is past its lifetime", c.keys)
	}

	path := filepath.Join(t.TempDir(), "cloud.json")
	if err := c.SaveTo(path); err != nil {
		t.Fatal(err)
	}
	data, _ := os.ReadFile(path)
	var old map[string]any
	if err := json.Unmarshal(data, &old); err != nil {
		t.Fatal(err)
	}
	delete(old, "launch_keys")
	old["keys"] = []string{"old"}
	data, _ = json.Marshal(old)
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	d, err := Load(path, []fleet.Pool{a}, clock)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := d.keys["old"]; !ok {
		t.Errorf("keys from an older file were lost: %v", d.keys)
	}
}

// TestOrphans: a pool taken out of the config keeps its instances, as a
// real cloud would. Those this fleet's controller launched are orphans;
// another fleet's, and those launched outside Fleetcast (no launch key),
// are never listed, and another fleet's is never terminated.
func TestOrphans(t *testing.T) {
	now := time.Date(2026, 11, 30, 10, 0, 0, 0, time.UTC)
	clock := func() time.Time { return now }
	a := fleet.Pool{Name: "a", Provider: "sim", InstanceType: "x", GPUsPerNode: 8, Capacity: fleet.OnDemand, LeadTime: time.Minute, Max: 10}
	gone := a
	gone.Name = "gone"
	c := New([]fleet.Pool{a, gone}, 1, clock)
	path := filepath.Join(t.TempDir(), "cloud.json")
	if err := c.SaveTo(path); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for _, r := range []providers.LaunchRequest{
		{Count: 2, Key: "k1", Fleet: "prod"},
		{Count: 1, Key: "k2", Fleet: "staging"},
		{Count: 1, Fleet: "prod"}, // not by a controller: no key
	} {
		if err := c.Launch(ctx, gone, r); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.Launch(ctx, a, providers.LaunchRequest{Count: 1, Key: "k3", Fleet: "prod"}); err != nil {
		t.Fatal(err)
	}
	now = now.Add(2 * time.Minute)
	d, err := Load(path, []fleet.Pool{a}, clock) // "gone" is no longer configured
	if err != nil {
		t.Fatal(err)
	}
	orphans, err := d.Orphans(ctx, "prod", []fleet.Pool{a})
	if err != nil {
		t.Fatal(err)
	}
	if len(orphans) != 2 || orphans[0].Pool != "gone" || orphans[0].State != providers.InstanceRunning || orphans[0].Fleet != "prod" {
		t.Fatalf("orphans %+v, want the two prod instances launched in gone, running", orphans)
	}
	if o, _ := d.Orphans(ctx, "", []fleet.Pool{a}); len(o) != 0 {
		t.Fatalf("orphans of no fleet: %+v", o)
	}
	staging, _ := d.Orphans(ctx, "staging", []fleet.Pool{a})
	if len(staging) != 1 {
		t.Fatalf("staging's orphans %+v", staging)
	}
	if err := d.TerminateOrphan(ctx, "prod", staging[0]); err == nil || !strings.Contains(err.Error(), `of fleet "staging", not "prod"`) {
		t.Fatalf("prod terminating staging's instance: %v", err)
	}
	if err := d.TerminateOrphan(ctx, "prod", orphans[0]); err != nil {
		t.Fatal(err)
	}
	if o, _ := d.Orphans(ctx, "prod", []fleet.Pool{a}); len(o) != 1 || o[0].ID != orphans[1].ID {
		t.Fatalf("after reaping one: %+v", o)
	}
	e, err := Load(path, []fleet.Pool{a}, clock) // saved after the change
	if err != nil {
		t.Fatal(err)
	}
	if o, _ := e.Orphans(ctx, "prod", []fleet.Pool{a}); len(o) != 1 {
		t.Fatalf("after a restart: %+v", o)
	}
}
