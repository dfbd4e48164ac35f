package state

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"time"
)

var bucketViews = []byte("views")

// View is what the leader last showed of a read of its API (the plan, the
// fleet, the forecast), kept for the other replicas to serve: owned by
// package controller, which writes them after each cycle when it is one
// of several replicas.
type View struct {
	// Name names the read: "plan", "fleet", "forecast".
	Name string `json:"name"`
	// At is the cycle it is of.
	At time.Time `json:"at"`
	// JSON is the read's answer: null where the cycle made none.
	JSON json.RawMessage `json:"json"`
	// Forward says the answer was too large to keep: the other replicas
	// ask the leader for it.
	Forward bool `json:"forward,omitempty"`
}

// checkView checks a view's fields.
func checkView(v View) error {
	if v.Name == "" || v.At.IsZero() || !json.Valid(v.JSON) {
		return fmt.Errorf("state: view %q at %v: want a name, a time and JSON", v.Name, v.At)
	}
	return nil
}

// PutViews records views, replacing those of their names, in one
// transaction.
func (s *Store) PutViews(views ...View) error {
	for _, v := range views {
		if err := checkView(v); err != nil {
			return err
		}
	}
	return s.kv.update(func(tx kvTx) error {
		for _, v := range views {
			if err := putJSON(tx.Bucket(bucketViews), v.Name, v); err != nil {
				return err
			}
		}
		return nil
	})
}

// Views returns the views, by name.
func (s *Store) Views() ([]View, error) { return all[View](s, bucketViews) }

// PutViews records views, replacing those of their names.
func (m *Memory) PutViews(views ...View) error {
	for _, v := range views {
		if err := checkView(v); err != nil {
			return err
		}
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.views == nil {
		m.views = map[string]View{}
	}
	for _, v := range views {
		v.At = wall(v.At)
		v.JSON = slices.Clone(v.JSON)
		m.views[v.Name] = v
	}
	return nil
}

// Views returns the views, by name.
func (m *Memory) Views() ([]View, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []View
	for _, name := range slices.Sorted(maps.Keys(m.views)) {
		out = append(out, m.views[name])
	}
	return out, nil
}
