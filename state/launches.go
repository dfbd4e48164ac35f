package state

import (
	"fmt"
	"slices"
	"strings"
	"time"
)

// Launch is a launch this controller made and the cloud took: the
// capacity it asked a pool's group for, kept while that capacity may still
// be launching. Only capacity a Launch accounts for is this controller's
// own, and only its own is terminated when it misses its provisioning
// deadline (docs/design.md rule 7); any other instance is unknown and left to
// its agent.
type Launch struct {
	// Key is the launch's idempotency key (the intent's).
	Key  string `json:"key"`
	Pool string `json:"pool"`
	// Count is how many instances the launch added.
	Count int `json:"count"`
	// At is when the launch was decided, on the controller's clock.
	At time.Time `json:"at"`
	// Claimed are the instances found to be the launch's, in the order
	// found; gone ones stay listed, so that no unit of the launch is
	// claimed twice.
	Claimed []string `json:"claimed,omitempty"`
	// Spent counts units of the launch that were given up without an
	// instance (capacity the group never launched, terminated at its
	// deadline).
	Spent int `json:"spent,omitempty"`
}

// Unclaimed is how many of the launch's instances are neither claimed nor
// spent.
func (l Launch) Unclaimed() int { return max(0, l.Count-len(l.Claimed)-l.Spent) }

// Validate checks the fields a launch record must have.
func (l Launch) Validate() error {
	switch {
	case l.Key == "" || l.Pool == "":
		return fmt.Errorf("launch %q of pool %q: want a key and a pool", l.Key, l.Pool)
	case l.Count < 0 || l.Spent < 0:
		return fmt.Errorf("launch %s: count %d, spent %d: want neither negative", l.Key, l.Count, l.Spent)
	case l.At.IsZero():
		return fmt.Errorf("launch %s: at is not set", l.Key)
	}
	return nil
}

// SettleLaunch records a launch the cloud took and clears its intent, in
// one transaction: a crash leaves the intent (which recovery settles) or
// the record, never neither.
func (s *Store) SettleLaunch(l Launch) error {
	if err := l.Validate(); err != nil {
		return fmt.Errorf("state: %w", err)
	}
	return s.kv.update(func(tx kvTx) error {
		if err := putJSON(tx.Bucket(bucketLaunches), l.Key, l); err != nil {
			return err
		}
		return tx.Bucket(bucketIntents).Delete([]byte(l.Key))
	})
}

// PutLaunches updates launch records (their claims), in one transaction.
func (s *Store) PutLaunches(ls ...Launch) error {
	for _, l := range ls {
		if err := l.Validate(); err != nil {
			return fmt.Errorf("state: %w", err)
		}
	}
	return s.kv.update(func(tx kvTx) error {
		for _, l := range ls {
			if err := putJSON(tx.Bucket(bucketLaunches), l.Key, l); err != nil {
				return err
			}
		}
		return nil
	})
}

// DeleteLaunches forgets launch records, in one transaction.
func (s *Store) DeleteLaunches(keys ...string) error { return s.deleteKeys(bucketLaunches, keys...) }

// Launches returns the launch records, oldest first (ties by key).
func (s *Store) Launches() ([]Launch, error) {
	out, err := all[Launch](s, bucketLaunches)
	slices.SortFunc(out, func(a, b Launch) int {
		if c := a.At.Compare(b.At); c != 0 {
			return c
		}
		return strings.Compare(a.Key, b.Key)
	})
	return out, err
}
