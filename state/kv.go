package state

import (
	"bytes"

	bolt "go.etcd.io/bbolt"
)

// The records are kept in an ordered key-value store of named buckets,
// read and written in transactions: a bbolt file (Open) or etcd
// (OpenEtcd). Store's methods are written once against these interfaces,
// which follow bbolt's names, so both keep the same records the same way.

// kv is where a Store's buckets live.
type kv interface {
	// update runs fn in a read-write transaction and commits what it
	// wrote if fn returns nil; view runs fn in a read-only one.
	update(fn func(tx kvTx) error) error
	view(fn func(tx kvTx) error) error
	close() error
}

// kvTx is one transaction.
type kvTx interface {
	// Bucket returns a top-level bucket: one of those the Store declares,
	// which always exist.
	Bucket(name []byte) kvBucket
}

// kvBucket is a bucket within a transaction: records by key, in key
// order, or buckets nested in it, never both (bbolt refuses a record and
// a nested bucket of one name; etcd would keep both, so the Store never
// makes either). Keys are never empty. A value read is valid until the
// transaction ends.
type kvBucket interface {
	Get(k []byte) []byte
	Put(k, v []byte) error
	Delete(k []byte) error
	// DeleteBefore deletes every record whose key sorts before end and
	// returns how many it deleted.
	DeleteBefore(end []byte) (int, error)
	Cursor() kvCursor
	ForEach(fn func(k, v []byte) error) error
	// Bucket returns the nested bucket, or nil if there is none.
	Bucket(name []byte) kvBucket
	CreateBucketIfNotExists(name []byte) (kvBucket, error)
	// ForEachBucket calls fn with each nested bucket's name, in order.
	ForEachBucket(fn func(name []byte) error) error
}

// kvCursor walks a bucket's records in key order, not its nested buckets;
// a nil key is the end.
type kvCursor interface {
	First() (k, v []byte)
	Last() (k, v []byte)
	Seek(seek []byte) (k, v []byte)
	Next() (k, v []byte)
	// Delete deletes the record the cursor is on.
	Delete() error
}

// boltKV is a bbolt file.
type boltKV struct{ db *bolt.DB }

func (b boltKV) update(fn func(tx kvTx) error) error {
	return b.db.Update(func(tx *bolt.Tx) error { return fn(boltTx{tx}) })
}

func (b boltKV) view(fn func(tx kvTx) error) error {
	return b.db.View(func(tx *bolt.Tx) error { return fn(boltTx{tx}) })
}

func (b boltKV) close() error { return b.db.Close() }

type boltTx struct{ tx *bolt.Tx }

func (t boltTx) Bucket(name []byte) kvBucket { return boltBucketOf(t.tx.Bucket(name)) }

// boltBucket is a *bolt.Bucket; boltBucketOf keeps a missing one nil.
type boltBucket struct{ b *bolt.Bucket }

func boltBucketOf(b *bolt.Bucket) kvBucket {
	if b == nil {
		return nil
	}
	return boltBucket{b}
}

func (b boltBucket) Get(k []byte) []byte   { return b.b.Get(k) }
func (b boltBucket) Put(k, v []byte) error { return b.b.Put(k, v) }
func (b boltBucket) Delete(k []byte) error { return b.b.Delete(k) }
func (b boltBucket) Cursor() kvCursor      { return boltCursor{b.b.Cursor()} }

// ForEach skips the nested buckets, which bbolt's lists with the records.
func (b boltBucket) ForEach(fn func(k, v []byte) error) error {
	return b.b.ForEach(func(k, v []byte) error {
		if v == nil {
			return nil
		}
		return fn(k, v)
	})
}
func (b boltBucket) ForEachBucket(fn func(name []byte) error) error {
	return b.b.ForEachBucket(fn)
}
func (b boltBucket) Bucket(name []byte) kvBucket { return boltBucketOf(b.b.Bucket(name)) }

func (b boltBucket) CreateBucketIfNotExists(name []byte) (kvBucket, error) {
	nb, err := b.b.CreateBucketIfNotExists(name)
	if err != nil {
		return nil, err
	}
	return boltBucket{nb}, nil
}

// boltCursor is a bbolt cursor that steps over nested buckets (whose
// values bbolt gives as nil).
type boltCursor struct{ c *bolt.Cursor }

func (c boltCursor) First() (k, v []byte)           { return c.skip(c.c.First()) }
func (c boltCursor) Seek(seek []byte) (k, v []byte) { return c.skip(c.c.Seek(seek)) }
func (c boltCursor) Next() (k, v []byte)            { return c.skip(c.c.Next()) }
func (c boltCursor) Delete() error                  { return c.c.Delete() }

func (c boltCursor) Last() (k, v []byte) {
	for k, v = c.c.Last(); k != nil && v == nil; k, v = c.c.Prev() {
	}
	return k, v
}

// skip moves on from k while it is a nested bucket.
func (c boltCursor) skip(k, v []byte) ([]byte, []byte) {
	for k != nil && v == nil {
		k, v = c.c.Next()
	}
	return k, v
}

func (b boltBucket) DeleteBefore(end []byte) (int, error) {
	return deleteBefore(boltCursor{b.b.Cursor()}, end)
}

// deleteBefore deletes, one by one, the records before end that c walks,
// and returns how many it deleted.
func deleteBefore(c kvCursor, end []byte) (int, error) {
	n := 0
	for k, _ := c.First(); k != nil && bytes.Compare(k, end) < 0; k, _ = c.First() {
		if err := c.Delete(); err != nil {
			return n, err
		}
		n++
	}
	return n, nil
}
