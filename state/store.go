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
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
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
	// buckets are the top-level buckets, meta first.
	buckets    = [][]byte{bucketMeta, bucketDemand, bucketIntents, bucketDrains, bucketBackoffs, bucketCancels, bucketDrainLog, bucketReady, bucketLaunches, bucketSeen, bucketCreds, bucketAPITokens, bucketPools, bucketUsageHours, bucketUsageJobs, bucketViews}
	keyFormat  = []byte("format")
	keyVersion = []byte("version")
	keyFleet   = []byte("fleet")
	// keyRestoring marks a state a restore is being written into.
	keyRestoring = []byte("restoring")
)

// ErrInUse is returned by Open when another process holds the state file:
// two controllers must never share one state.
var ErrInUse = errors.New("state file in use by another process")

// Store is an open state: a bbolt file (Open) or a prefix in etcd
// (OpenEtcd). Its methods are safe for concurrent use.
type Store struct {
	kv   kv
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
	if err := initBolt(db, path); err != nil {
		db.Close()
		return nil, err
	}
	return &Store{kv: boltKV{db}, path: path}, nil
}

// corrupted wraps an error reading the file with what to do about it.
func corrupted(path string, err error) error {
	return fmt.Errorf("state: %s is corrupted or not a bbolt file: %w; move it aside to start afresh "+
		"(the controller then rebuilds its view from the cloud's ownership tags, but loses its demand history)", path, err)
}

// initBolt checks the file's consistency and marker, and writes the marker
// and buckets into a new file.
func initBolt(db *bolt.DB, path string) (err error) {
	// bbolt panics on some damaged pages its check passes (a key's length
	// beyond its page): such a file is corrupted too, never a crash.
	defer func() {
		if r := recover(); r != nil {
			err = corrupted(path, fmt.Errorf("%v", r))
		}
	}()
	err = db.View(func(tx *bolt.Tx) error {
		// Read every error: the check's goroutine stops only when the
		// channel is drained.
		var first error
		for err := range tx.Check() {
			if first == nil {
				first = corrupted(path, err)
			}
		}
		return first
	})
	if err != nil {
		return err
	}
	return db.Update(func(tx *bolt.Tx) error {
		meta := tx.Bucket(bucketMeta)
		if meta == nil {
			empty := true
			tx.ForEach(func([]byte, *bolt.Bucket) error { empty = false; return nil })
			if !empty {
				return fmt.Errorf("state: %s is a bbolt file but not a Fleetcast state file (no %q bucket); refusing to change it", path, bucketMeta)
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
		} else if err := checkMarker(path, meta.Get(keyFormat), meta.Get(keyVersion)); err != nil {
			return err
		} else if err := checkRestored(path, meta.Get(keyRestoring)); err != nil {
			return err
		}
		for _, b := range buckets[1:] {
			if _, err := tx.CreateBucketIfNotExists(b); err != nil {
				return fmt.Errorf("state: %s: creating bucket %s: %w", path, b, err)
			}
		}
		return nil
	})
}

// checkMarker refuses a state whose marker is not a Fleetcast state's or
// is a newer version's.
func checkMarker(path string, f, version []byte) error {
	if !bytes.Equal(f, []byte(format)) {
		return fmt.Errorf("state: %s: meta.format is %q, expected %q: not a Fleetcast state file", path, f, format)
	}
	v, err := strconv.Atoi(string(version))
	if err != nil || v < 1 {
		return fmt.Errorf("state: %s: meta.version is %q, expected a positive integer", path, version)
	}
	if v > Version {
		return fmt.Errorf("state: %s: written by a newer Fleetcast (state version %d; this one reads up to %d)", path, v, Version)
	}
	return nil
}

// checkRestored refuses a state a restore into was cut short (restoring
// is its marker, nil for none).
func checkRestored(path string, restoring []byte) error {
	if restoring == nil {
		return nil
	}
	return fmt.Errorf("state: %s: a restore into it (autoscaler state import) was cut short at %s: it may hold part of the records: stop every controller on it, empty it (a new state directory, or delete the etcd prefix), import again, and start them", path, restoring)
}

// Path is the state file's path.
func (s *Store) Path() string { return s.path }

// Close flushes and closes the file.
func (s *Store) Close() error { return s.kv.close() }

// deleteKeys deletes keys from a bucket, in one transaction.
func (s *Store) deleteKeys(bucket []byte, keys ...string) error {
	return s.kv.update(func(tx kvTx) error {
		for _, k := range keys {
			if err := tx.Bucket(bucket).Delete([]byte(k)); err != nil {
				return err
			}
		}
		return nil
	})
}

// ClaimFleet records the fleet the state belongs to (the config's
// controller.fleet) the first time, and refuses another name after: its
// launch records, drains and journal are that fleet's, and a controller
// renamed would count none of its instances (they carry the old name) and
// launch the whole fleet again. The error says how to go on.
func (s *Store) ClaimFleet(name string) error {
	return s.kv.update(func(tx kvTx) error {
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
