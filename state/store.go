// Package state is the controller's durable state: one bbolt file under
// controller.state_dir holding the demand history the forecaster needs, the
// journal of intents (each cloud change is written here, with its
// idempotency key, before it is made), the launches it made lately (so it
// knows which instances are its own), the drains in progress, the
// pools' capacity-error back-offs, and the hashes of the nodes' credentials
// and of the API tokens. A restarted controller reads them back
// and finishes or undoes what it finds (docs/design.md rules 4 and 8).
//
// Every write is one bbolt transaction, committed and synced to disk before
// the call returns. A file that is not a Fleetcast state file, is corrupted,
// or was written by a newer Fleetcast is refused with an error naming it;
// nothing is overwritten or silently dropped.
package state

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	bolt "go.etcd.io/bbolt"
	bolterrors "go.etcd.io/bbolt/errors"
)

// FileName is the state file's name inside the state directory.
const FileName = "fleetcast.db"

// Version is the layout of the state file this code writes. A file with a
// greater version is refused rather than misread.
const Version = 1

// format marks a bbolt file as a Fleetcast state file.
const format = "fleetcast-state"

// lockTimeout is how long Open waits for another process's lock on the file.
const lockTimeout = time.Second

var (
	bucketMeta     = []byte("meta")
	bucketDemand   = []byte("demand")
	bucketIntents  = []byte("intents")
	bucketDrains   = []byte("drains")
	bucketBackoffs = []byte("backoffs")
	bucketCancels  = []byte("cancelled")
	bucketDrainLog = []byte("drain-log")
	bucketReady    = []byte("ready")
	bucketLaunches = []byte("launches")
	bucketSeen     = []byte("seen")
	bucketCreds    = []byte("credentials")
	keyFormat      = []byte("format")
	keyVersion     = []byte("version")
	keyFleet       = []byte("fleet")
)

// ErrInUse is returned by Open when another process holds the state file:
// two controllers must never share one state.
var ErrInUse = errors.New("state file in use by another process")

// Store is an open state file. Its methods are safe for concurrent use.
type Store struct {
	db   *bolt.DB
	path string
}

// Open opens the state file in dir, creating dir (mode 0700) and the file
// (mode 0600) if they do not exist. It refuses a file another process has
// open (ErrInUse), one that is not a Fleetcast state file, one that fails
// bbolt's consistency check, and one written by a newer version.
func Open(dir string) (*Store, error) {
	if dir == "" {
		return nil, errors.New("state: no state directory (controller.state_dir)")
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("state: creating state directory: %w", err)
	}
	path := filepath.Join(dir, FileName)
	db, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: lockTimeout})
	switch {
	case errors.Is(err, bolterrors.ErrTimeout):
		return nil, fmt.Errorf("state: %s: %w (is another controller running with this state_dir?)", path, ErrInUse)
	case errors.As(err, new(*fs.PathError)):
		// Permissions, a read-only disk: the file itself may be fine.
		return nil, fmt.Errorf("state: opening %s: %w", path, err)
	case err != nil:
		return nil, corrupted(path, err)
	}
	s := &Store{db: db, path: path}
	if err := s.init(); err != nil {
		db.Close()
		return nil, err
	}
	return s, nil
}

// corrupted wraps an error reading the file with what to do about it.
func corrupted(path string, err error) error {
	return fmt.Errorf("state: %s is corrupted or not a bbolt file: %w; move it aside to start afresh "+
		"(the controller then rebuilds its view from the cloud's ownership tags, but loses its demand history)", path, err)
}

// init checks the file's consistency and marker, and writes the marker and
// buckets into a new file.
func (s *Store) init() (err error) {
	// bbolt panics on some damaged pages its check passes (a key's length
	// beyond its page): such a file is corrupted too, never a crash.
	defer func() {
		if r := recover(); r != nil {
			err = corrupted(s.path, fmt.Errorf("%v", r))
		}
	}()
	err = s.db.View(func(tx *bolt.Tx) error {
		// Read every error: the check's goroutine stops only when the
		// channel is drained.
		var first error
		for err := range tx.Check() {
			if first == nil {
				first = corrupted(s.path, err)
			}
		}
		return first
	})
	if err != nil {
		return err
	}
	return s.db.Update(func(tx *bolt.Tx) error {
		meta := tx.Bucket(bucketMeta)
		if meta == nil {
			empty := true
			tx.ForEach(func([]byte, *bolt.Bucket) error { empty = false; return nil })
			if !empty {
				return fmt.Errorf("state: %s is a bbolt file but not a Fleetcast state file (no %q bucket); refusing to change it", s.path, bucketMeta)
			}
			meta, err := tx.CreateBucket(bucketMeta)
			if err != nil {
				return err
			}
			if err := meta.Put(keyFormat, []byte(format)); err != nil {
				return err
			}
			if err := meta.Put(keyVersion, []byte(strconv.Itoa(Version))); err != nil {
				return err
			}
		} else {
			if f := meta.Get(keyFormat); !bytes.Equal(f, []byte(format)) {
				return fmt.Errorf("state: %s: meta.format is %q, expected %q: not a Fleetcast state file", s.path, f, format)
			}
			v, err := strconv.Atoi(string(meta.Get(keyVersion)))
			if err != nil || v < 1 {
				return fmt.Errorf("state: %s: meta.version is %q, expected a positive integer", s.path, meta.Get(keyVersion))
			}
			if v > Version {
				return fmt.Errorf("state: %s: written by a newer Fleetcast (state version %d; this one reads up to %d)", s.path, v, Version)
			}
		}
		for _, b := range [][]byte{bucketDemand, bucketIntents, bucketDrains, bucketBackoffs, bucketCancels, bucketDrainLog, bucketReady, bucketLaunches, bucketSeen, bucketCreds, bucketAPITokens, bucketPools} {
			if _, err := tx.CreateBucketIfNotExists(b); err != nil {
				return fmt.Errorf("state: %s: creating bucket %s: %w", s.path, b, err)
			}
		}
		return nil
	})
}

// Path is the state file's path.
func (s *Store) Path() string { return s.path }

// Close flushes and closes the file.
func (s *Store) Close() error { return s.db.Close() }

// logKey orders times as text of a fixed width (UTC, to the nanosecond),
// so the drain log's keys sort by time and read plainly in errors.
func logKey(t time.Time) string { return t.UTC().Format("2006-01-02T15:04:05.000000000Z") }

// timeKey orders times as bytes: big-endian nanoseconds since 1970 (times
// before 1970 sort as the earliest).
func timeKey(t time.Time) []byte {
	k := make([]byte, 8)
	binary.BigEndian.PutUint64(k, uint64(max(t.UnixNano(), 0)))
	return k
}

func floatValue(v float64) []byte {
	b := make([]byte, 8)
	binary.BigEndian.PutUint64(b, math.Float64bits(v))
	return b
}

// IntentKind is the cloud change an intent announces.
type IntentKind string

// The kinds of intent the controller journals.
const (
	// IntentLaunch grows a pool's group to Target (Count more instances).
	IntentLaunch IntentKind = "launch"
	// IntentTerminate removes Node from its pool.
	IntentTerminate IntentKind = "terminate"
	// IntentDrain cordons Node and asks its jobs to checkpoint.
	IntentDrain IntentKind = "drain"
	// IntentCancelDrain returns Node to service.
	IntentCancelDrain IntentKind = "cancel_drain"
	// IntentReap removes Node, an orphan of Pool (a pool the config no
	// longer has).
	IntentReap IntentKind = "reap"
)

func (k IntentKind) valid() bool {
	switch k {
	case IntentLaunch, IntentTerminate, IntentDrain, IntentCancelDrain, IntentReap:
		return true
	}
	return false
}

// Intent is a cloud change the controller is about to make, journaled
// before it is made and removed once the cloud shows it done (or undone).
type Intent struct {
	// Key is the change's idempotency key (a client token or tag the cloud
	// sees), unique among intents.
	Key  string     `json:"key"`
	Kind IntentKind `json:"kind"`
	Pool string     `json:"pool"`
	// Node is the node acted on; empty for launches.
	Node string `json:"node,omitempty"`
	// Count and Target are a launch's instances and the group's size once
	// they are added.
	Count  int `json:"count,omitempty"`
	Target int `json:"target,omitempty"`
	// Created is when the controller decided.
	Created time.Time `json:"created"`
}

// Validate checks the fields an intent must have.
func (in Intent) Validate() error {
	switch {
	case in.Key == "":
		return errors.New("intent: key is empty")
	case !in.Kind.valid():
		return fmt.Errorf("intent %s: kind %q, expected launch, terminate, drain or cancel_drain", in.Key, in.Kind)
	case in.Pool == "":
		return fmt.Errorf("intent %s: pool is empty", in.Key)
	case in.Kind == IntentLaunch && (in.Count < 1 || in.Target < in.Count):
		return fmt.Errorf("intent %s: launch of %d to target %d, expected count >= 1 and target >= count", in.Key, in.Count, in.Target)
	case in.Kind != IntentLaunch && in.Node == "":
		return fmt.Errorf("intent %s: %s with no node", in.Key, in.Kind)
	case in.Created.IsZero():
		return fmt.Errorf("intent %s: created is not set", in.Key)
	}
	return nil
}

// PutIntent journals an intent. A second intent with the same key is
// refused: the key is what makes the change happen at most once.
func (s *Store) PutIntent(in Intent) error {
	if err := in.Validate(); err != nil {
		return fmt.Errorf("state: %w", err)
	}
	return s.db.Update(func(tx *bolt.Tx) error {
		b := tx.Bucket(bucketIntents)
		if b.Get([]byte(in.Key)) != nil {
			return fmt.Errorf("state: intent %s is already journaled", in.Key)
		}
		return putJSON(b, in.Key, in)
	})
}

// DoneIntent removes an intent once the cloud shows it done or undone.
// Removing one that is not there is not an error (it may have been removed
// before a restart).
func (s *Store) DoneIntent(key string) error {
	return s.db.Update(func(tx *bolt.Tx) error {
		return tx.Bucket(bucketIntents).Delete([]byte(key))
	})
}

// Intents returns the journaled intents, oldest first (ties by key).
func (s *Store) Intents() ([]Intent, error) {
	out, err := all[Intent](s, bucketIntents)
	slices.SortFunc(out, func(a, b Intent) int {
		if c := a.Created.Compare(b.Created); c != 0 {
			return c
		}
		return strings.Compare(a.Key, b.Key)
	})
	return out, err
}

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
	return s.db.Update(func(tx *bolt.Tx) error {
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
	return s.db.Update(func(tx *bolt.Tx) error {
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
	return s.db.Update(func(tx *bolt.Tx) error {
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
	err := s.db.View(func(tx *bolt.Tx) error {
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
	err := s.db.Update(func(tx *bolt.Tx) error {
		c := tx.Bucket(bucketDrainLog).Cursor()
		end := []byte(logKey(before))
		for k, _ := c.First(); k != nil && bytes.Compare(k, end) < 0; k, _ = c.First() {
			if err := c.Delete(); err != nil {
				return fmt.Errorf("state: pruning the drain log: %w", err)
			}
			n++
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
	return s.db.Update(func(tx *bolt.Tx) error {
		for _, node := range nodes {
			if err := putJSON(tx.Bucket(bucket), node, NodeTime{Node: node, At: t}); err != nil {
				return err
			}
		}
		return nil
	})
}

// deleteKeys deletes keys from a bucket, in one transaction.
func (s *Store) deleteKeys(bucket []byte, keys ...string) error {
	return s.db.Update(func(tx *bolt.Tx) error {
		for _, k := range keys {
			if err := tx.Bucket(bucket).Delete([]byte(k)); err != nil {
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

// Credential is a node's credential as the controller keeps it: never the
// credential itself, only its SHA-256, so a copy of the state file
// impersonates no node.
type Credential struct {
	Node string `json:"node"`
	// Pool is the pool the node proved it belongs to ("" when an operator
	// issued the credential).
	Pool string `json:"pool,omitempty"`
	// Hash is the hex SHA-256 of the current credential.
	Hash string `json:"hash,omitempty"`
	// Previous is the hex SHA-256 of the credential the last rotation
	// replaced, still good until PreviousUntil or until the node first
	// presents the new one (the rotation's answer may have been lost);
	// "" when there is none.
	Previous      string    `json:"previous,omitempty"`
	PreviousUntil time.Time `json:"previous_until,omitzero"`
	// Issued is when the current credential was issued; Registered when the
	// node first got one of this line (rotations keep it).
	Issued     time.Time `json:"issued"`
	Registered time.Time `json:"registered"`
	// Via says how the node got it: "bootstrap" (the bootstrap secret and
	// the cloud's signed identity of the instance) or "operator" (the API
	// token).
	Via string `json:"via"`
	// Rotations counts the rotations since Registered.
	Rotations int `json:"rotations,omitempty"`
	// Revoked is when an operator revoked it (zero while it is good): a
	// revoked node's credential is refused, and the agent that registered
	// the node may bootstrap again.
	Revoked time.Time `json:"revoked,omitzero"`
	// Nonce is the hex SHA-256 of the bootstrap nonce the node's first
	// bootstrap presented: only that agent may bootstrap the node again
	// after a revocation ("" when none was bound).
	Nonce string `json:"nonce,omitempty"`
	// Instance is the cloud's ID of the machine whose bootstrap registered
	// the node, where the node's name outlives its machine (a Compute
	// Engine instance name, which a managed instance group's recreate or
	// autohealing gives a new VM): a bootstrap that proves another machine
	// under the name is a new node's, if it was created after this one
	// (InstanceCreated, on the cloud's clock). "" when none was bound.
	Instance        string    `json:"instance,omitempty"`
	InstanceCreated time.Time `json:"instance_created,omitzero"`
}

// PutCredential records a node's credential, replacing any before it.
func (s *Store) PutCredential(c Credential) error {
	if c.Node == "" || c.Hash == "" {
		return fmt.Errorf("state: credential with no node or hash: %+v", c)
	}
	return s.db.Update(func(tx *bolt.Tx) error { return putJSON(tx.Bucket(bucketCreds), c.Node, c) })
}

// DeleteCredentials forgets nodes' credentials, in one transaction.
func (s *Store) DeleteCredentials(nodes ...string) error { return s.deleteKeys(bucketCreds, nodes...) }

// Credentials returns every node's credential record, by node.
func (s *Store) Credentials() ([]Credential, error) { return all[Credential](s, bucketCreds) }

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
	return s.db.Update(func(tx *bolt.Tx) error { return putJSON(tx.Bucket(bucketBackoffs), b.Pool, b) })
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

func putJSON(b *bolt.Bucket, key string, v any) error {
	data, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("state: encoding %s: %w", key, err)
	}
	return b.Put([]byte(key), sealed([]byte(key), data))
}

// castagnoli is the CRC-32C table. bbolt checks its own pages' structure
// but not the bytes of keys and values, so each record carries a checksum
// of its key and value: a damaged record is an error, never a silently
// different value.
var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// sealed is data with the checksum of key and data after it.
func sealed(key, data []byte) []byte {
	out := make([]byte, len(data), len(data)+4)
	copy(out, data)
	return binary.BigEndian.AppendUint32(out, checksum(key, data))
}

func checksum(key, data []byte) uint32 {
	return crc32.Update(crc32.Checksum(key, castagnoli), castagnoli, data)
}

// unseal checks a sealed value and returns its data.
func unseal(key, v []byte) ([]byte, error) {
	if len(v) < 4 {
		return nil, fmt.Errorf("record of %d bytes, too short for its checksum", len(v))
	}
	data := v[:len(v)-4]
	if got, want := binary.BigEndian.Uint32(v[len(v)-4:]), checksum(key, data); got != want {
		return nil, fmt.Errorf("checksum %08x, expected %08x: the record is damaged", got, want)
	}
	return data, nil
}

// all decodes every value of a bucket, in key order. A value that does not
// decode is an error naming the file, bucket and key: never skipped.
func all[T any](s *Store, bucket []byte) ([]T, error) {
	var out []T
	err := s.db.View(func(tx *bolt.Tx) error {
		return tx.Bucket(bucket).ForEach(func(k, v []byte) error {
			x, err := decode[T](s, bucket, k, v)
			out = append(out, x)
			return err
		})
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// decode checks and decodes one sealed JSON record; an error names the
// file, bucket and key.
func decode[T any](s *Store, bucket, k, v []byte) (T, error) {
	var x T
	data, err := unseal(k, v)
	if err == nil {
		d := json.NewDecoder(bytes.NewReader(data))
		d.DisallowUnknownFields()
		err = d.Decode(&x)
	}
	if err != nil {
		return x, fmt.Errorf("state: %s: %s/%s: %w", s.path, bucket, k, err)
	}
	return x, nil
}

// ClaimFleet records the fleet the state belongs to (the config's
// controller.fleet) the first time, and refuses another name after: its
// launch records, drains and journal are that fleet's, and a controller
// renamed would count none of its instances (they carry the old name) and
// launch the whole fleet again. The error says how to go on.
func (s *Store) ClaimFleet(name string) error {
	return s.db.Update(func(tx *bolt.Tx) error {
		meta := tx.Bucket(bucketMeta)
		switch got := meta.Get(keyFleet); {
		case got == nil:
			return meta.Put(keyFleet, []byte(name))
		case string(got) != name:
			return fleetClaimed(s.path, string(got), name)
		}
		return nil
	})
}

// fleetClaimed is ClaimFleet's refusal of name, where the records kept at
// path are fleet got's.
func fleetClaimed(path, got, name string) error {
	return fmt.Errorf("state: %s is fleet %q's, and controller.fleet is %q: the instances carry the name they were launched with, so a renamed controller would not know its own; set controller.fleet back to %q, or start a new fleet with a new state directory",
		path, got, name, got)
}
