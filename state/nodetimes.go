package state

import (
	"fmt"
	"time"
)

// NodeTime is a time recorded for a node.
type NodeTime struct {
	Node string    `json:"node"`
	At   time.Time `json:"at"`
}

// Cancelled is a node whose last drain was cancelled (its jobs did not
// checkpoint in time): the planner does not drain it again until they have
// checkpointed since.
type Cancelled = NodeTime

// putNodeTime records a time for nodes in a bucket, in one transaction;
// what names the records in errors.
func (s *Store) putNodeTime(bucket []byte, what string, t time.Time, nodes ...string) error {
	for _, node := range nodes {
		if node == "" || t.IsZero() {
			return fmt.Errorf("state: %s of %q at %v: want a node and a time", what, node, t)
		}
	}
	return s.kv.update(func(tx kvTx) error {
		for _, node := range nodes {
			if err := putJSON(tx.Bucket(bucket), node, NodeTime{Node: node, At: t}); err != nil {
				return err
			}
		}
		return nil
	})
}

// PutCancelled records that a node's drain was cancelled at t.
func (s *Store) PutCancelled(node string, t time.Time) error {
	return s.putNodeTime(bucketCancels, "cancelled drain", t, node)
}

// DeleteCancelled forgets a node's cancelled drain (the node is gone).
func (s *Store) DeleteCancelled(node string) error { return s.deleteKeys(bucketCancels, node) }

// PutReady records that the nodes' agents first reported healthy GPUs at
// t: from then on they are never again taken for launches that failed,
// even when the controller restarts and has no report from them yet. The
// nodes are written in one transaction (a fresh controller may see
// thousands become ready in one cycle).
func (s *Store) PutReady(t time.Time, nodes ...string) error {
	return s.putNodeTime(bucketReady, "ready node", t, nodes...)
}

// DeleteReady forgets nodes that are gone, in one transaction.
func (s *Store) DeleteReady(nodes ...string) error { return s.deleteKeys(bucketReady, nodes...) }

// ReadyNodes returns the nodes that have been ready, by node.
func (s *Store) ReadyNodes() ([]NodeTime, error) { return all[NodeTime](s, bucketReady) }

// PutSeen records that the controller first saw the nodes in their
// clouds at t, in one transaction: an instance first seen after a launch
// may be that launch's, one seen before it is not.
func (s *Store) PutSeen(t time.Time, nodes ...string) error {
	return s.putNodeTime(bucketSeen, "seen node", t, nodes...)
}

// DeleteSeen forgets nodes that are gone, in one transaction.
func (s *Store) DeleteSeen(nodes ...string) error { return s.deleteKeys(bucketSeen, nodes...) }

// SeenNodes returns when each node was first seen, by node.
func (s *Store) SeenNodes() ([]NodeTime, error) { return all[NodeTime](s, bucketSeen) }

// CancelledDrains returns the nodes whose last drain was cancelled, by node.
func (s *Store) CancelledDrains() ([]Cancelled, error) { return all[Cancelled](s, bucketCancels) }
