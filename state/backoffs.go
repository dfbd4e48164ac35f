package state

import (
	"errors"
	"fmt"
	"time"
)

// Backoff is a pool its cloud refused capacity: backed off after capacity
// errors (the planner does not launch into it before Until), and what it
// is known to supply since.
type Backoff struct {
	Pool string `json:"pool"`
	// Failures in a row; the back-off grows with them (providers.Backoff).
	// 0 once a launch succeeded since: the refusal is still remembered
	// (Refused, Held), but the pool is not backed off.
	Failures int       `json:"failures"`
	Until    time.Time `json:"until"`
	// Reason is the last error, in words.
	Reason string `json:"reason"`
	// Refused is when the cloud last refused the pool; zero in records
	// written before it was kept.
	Refused time.Time `json:"refused,omitzero"`
	// Held is the most nodes the pool was seen with since it was first
	// refused: what its cloud is known to supply (the planner counts on no
	// more of it when it leaves a launch to it,
	// fleet.PoolStatus.HeldSinceRefusal).
	Held int `json:"held,omitempty"`
}

// PutBackoff records (or updates) a pool's back-off.
func (s *Store) PutBackoff(b Backoff) error {
	if err := checkBackoff(b); err != nil {
		return err
	}
	return s.kv.update(func(tx kvTx) error { return putJSON(tx.Bucket(bucketBackoffs), b.Pool, b) })
}

// checkBackoff checks the fields a back-off record must have.
func checkBackoff(b Backoff) error {
	switch {
	case b.Pool == "":
		return errors.New("state: back-off with no pool")
	case b.Failures < 0:
		return fmt.Errorf("state: back-off of %s: %d failures, expected at least 0", b.Pool, b.Failures)
	case b.Held < 0:
		return fmt.Errorf("state: back-off of %s: held %d nodes, expected at least 0", b.Pool, b.Held)
	}
	return nil
}

// DeleteBackoff clears a pool's back-off (a launch succeeded).
func (s *Store) DeleteBackoff(pool string) error { return s.deleteKeys(bucketBackoffs, pool) }

// Backoffs returns the pools' back-offs, by pool.
func (s *Store) Backoffs() ([]Backoff, error) { return all[Backoff](s, bucketBackoffs) }
