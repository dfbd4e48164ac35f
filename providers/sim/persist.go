package sim

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"time"

	"github.com/fleetcast/autoscaler/fleet"
	"github.com/fleetcast/autoscaler/providers"
)

// saved is a simulated cloud on disk.
type saved struct {
	Groups map[string]savedGroup `json:"groups"`
	NextID int                   `json:"next_id"`
	// Keys are the launch keys remembered, with when each launched.
	Keys map[string]time.Time `json:"launch_keys"`
	// OldKeys are launch keys as files before launch_keys listed them,
	// without times: they are remembered from loading on.
	OldKeys []string `json:"keys,omitempty"`
	RNG     []byte   `json:"rng"`
}

type savedGroup struct {
	Target    int                  `json:"target"`
	Instances []providers.Instance `json:"instances"`
}

// SaveTo saves the cloud to path now and after every change from then on
// (written to a temporary file, synced and renamed, so a crash leaves the
// old state or the new, never half of one): a simulated cloud that
// outlives the controller, as a real one does.
func (c *Cloud) SaveTo(path string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.path = path
	return c.save()
}

// save writes the cloud to c.path; c.mu is held.
func (c *Cloud) save() error {
	rng, err := c.src.MarshalBinary()
	if err != nil {
		return err
	}
	s := saved{Groups: map[string]savedGroup{}, NextID: c.nextID, RNG: rng}
	for name, g := range c.groups {
		s.Groups[name] = savedGroup{Target: g.target, Instances: g.instances}
	}
	s.Keys = c.keys
	data, err := json.Marshal(s)
	if err != nil {
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(c.path), ".sim-cloud-*")
	if err != nil {
		return fmt.Errorf("saving the simulated cloud: %w", err)
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return fmt.Errorf("saving the simulated cloud to %s: %w", c.path, err)
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return fmt.Errorf("saving the simulated cloud to %s: %w", c.path, err)
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	if err := os.Rename(tmp.Name(), c.path); err != nil {
		return err
	}
	// The rename is durable once the directory is synced.
	dir, err := os.Open(filepath.Dir(c.path))
	if err != nil {
		return err
	}
	defer dir.Close()
	return dir.Sync()
}

// Load reads a cloud saved with SaveTo and keeps saving it there. Pools not
// in the file start empty; a group in the file for a pool the config no
// longer has is kept, as a real cloud keeps the instances of a pool taken
// out of a config: its instances are orphans (see Orphans), for the
// controller to reap.
func Load(path string, pools []fleet.Pool, clock func() time.Time) (*Cloud, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("simulated cloud: %w", err)
	}
	var s saved
	if err := fleet.DecodeJSON(data, &s); err != nil {
		return nil, fmt.Errorf("simulated cloud %s: %w", path, err)
	}
	c := New(pools, 0, clock)
	for name, sg := range s.Groups {
		g := c.groups[name]
		if g == nil {
			// A pool the config no longer has: its instances stay, running.
			g = &group{pool: fleet.Pool{Name: name}}
			c.groups[name] = g
		}
		if sg.Target != len(sg.Instances) {
			return nil, fmt.Errorf("simulated cloud %s: group %q has target %d but %d instances", path, name, sg.Target, len(sg.Instances))
		}
		g.target, g.instances = sg.Target, sg.Instances
	}
	if err := c.src.UnmarshalBinary(s.RNG); err != nil {
		return nil, fmt.Errorf("simulated cloud %s: rng: %w", path, err)
	}
	c.rng = rand.New(c.src)
	c.nextID = s.NextID
	for k, at := range s.Keys {
		c.keys[k] = at
	}
	for _, k := range s.OldKeys {
		c.keys[k] = clock()
	}
	c.path = path
	return c, nil
}
