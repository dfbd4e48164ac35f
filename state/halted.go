package state

import (
	"fmt"
	"time"
)

var keyHalted = []byte("halted")

// PutHalted records that scale-in was found halted at t (too many agents
// silent at once).
func (s *Store) PutHalted(t time.Time) error {
	return s.kv.update(func(tx kvTx) error {
		return tx.Bucket(bucketMeta).Put(keyHalted, []byte(t.UTC().Format(time.RFC3339Nano)))
	})
}

// Halted is when scale-in was last found halted; zero if never.
func (s *Store) Halted() (time.Time, error) {
	var t time.Time
	err := s.kv.view(func(tx kvTx) error {
		v := tx.Bucket(bucketMeta).Get(keyHalted)
		if v == nil {
			return nil
		}
		var err error
		if t, err = time.Parse(time.RFC3339Nano, string(v)); err != nil {
			return fmt.Errorf("state: %s: meta/halted: %w", s.path, err)
		}
		return nil
	})
	return t, err
}
