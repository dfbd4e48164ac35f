package state

import (
	"errors"
	"fmt"
	"time"
)

// logKey orders times as text of a fixed width (UTC, to the nanosecond),
// so the drain log's keys sort by time and read plainly in errors.
func logKey(t time.Time) string { return t.UTC().Format("2006-01-02T15:04:05.000000000Z") }

// Drain is a drain in progress: the controller's record, never an
// agent's (docs/design.md rule 11).
type Drain struct {
	Node string `json:"node"`
	Pool string `json:"pool"`
	// Started is when the drain was decided; jobs must checkpoint after it.
	Started time.Time `json:"started"`
	// Deadline is when the drain is cancelled if jobs have not
	// checkpointed or exited.
	Deadline time.Time `json:"deadline"`
}

// PutDrain records (or updates) a node's drain.
func (s *Store) PutDrain(d Drain) error {
	if err := checkDrain(d); err != nil {
		return err
	}
	return s.kv.update(func(tx kvTx) error {
		if err := putJSON(tx.Bucket(bucketDrains), d.Node, d); err != nil {
			return err
		}
		// The log outlives the drain: the scale-in budget counts drains
		// begun within its window, finished or not.
		return putJSON(tx.Bucket(bucketDrainLog), logKey(d.Started)+"/"+d.Node, d)
	})
}

// checkDrain checks the fields a drain record must have.
func checkDrain(d Drain) error {
	switch {
	case d.Node == "":
		return errors.New("state: drain with no node")
	case d.Pool == "":
		return fmt.Errorf("state: drain of %s: pool is empty", d.Node)
	case d.Started.IsZero() || d.Deadline.Before(d.Started):
		return fmt.Errorf("state: drain of %s: started %s, deadline %s: expected a start and a deadline after it",
			d.Node, d.Started.UTC().Format(time.RFC3339), d.Deadline.UTC().Format(time.RFC3339))
	}
	return nil
}

// DrainLog returns the drains begun at or after since, finished or not,
// oldest first.
func (s *Store) DrainLog(since time.Time) ([]Drain, error) {
	var out []Drain
	err := s.kv.view(func(tx kvTx) error {
		c := tx.Bucket(bucketDrainLog).Cursor()
		for k, v := c.Seek([]byte(logKey(since))); k != nil; k, v = c.Next() {
			d, err := decode[Drain](s, bucketDrainLog, k, v)
			if err != nil {
				return err
			}
			out = append(out, d)
		}
		return nil
	})
	return out, err
}

// PruneDrainLog deletes the drain log's entries begun before t and returns
// how many it deleted.
func (s *Store) PruneDrainLog(before time.Time) (int, error) {
	n := 0
	err := s.kv.update(func(tx kvTx) error {
		d, err := tx.Bucket(bucketDrainLog).DeleteBefore([]byte(logKey(before)))
		n += d
		if err != nil {
			return fmt.Errorf("state: pruning the drain log: %w", err)
		}
		return nil
	})
	return n, err
}

// DeleteDrain forgets a node's drain (finished, cancelled, or the node is
// gone).
func (s *Store) DeleteDrain(node string) error { return s.deleteKeys(bucketDrains, node) }

// Drains returns the drains in progress, by node.
func (s *Store) Drains() ([]Drain, error) { return all[Drain](s, bucketDrains) }
