package state

import (
	"net/url"
	"slices"
	"sort"
	"strings"

	bolterrors "go.etcd.io/bbolt/errors"
	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// The errors bbolt gives for the same misuse.
var (
	errKeyRequired = bolterrors.ErrKeyRequired
	errNotWritable = bolterrors.ErrTxNotWritable
)

// etcdPage is how many records a cursor reads from etcd at once.
const etcdPage = 512

// etcdBucket is a bucket of an etcd transaction; path names it.
type etcdBucket struct {
	tx   *etcdTx
	path string
}

// start and end bound the etcd keys of the bucket's records.
func (b *etcdBucket) start() string { return b.tx.kv.o.Prefix + "r/" + b.path + "\x00" }
func (b *etcdBucket) end() string   { return b.tx.kv.o.Prefix + "r/" + b.path + "\x01" }

// marker is the key that says a bucket nested in b exists.
func (b *etcdBucket) marker(name []byte) string {
	return b.tx.kv.o.Prefix + "b/" + b.path + url.PathEscape(string(name))
}

func (b *etcdBucket) Get(k []byte) []byte {
	key := b.start() + string(k)
	if v, ok := b.tx.over[key]; ok {
		if v == nil {
			return nil
		}
		return *v
	}
	if b.tx.cutAt(key) {
		return nil
	}
	resp, err := b.tx.get(key)
	if err != nil || len(resp.Kvs) == 0 {
		return nil
	}
	return value(resp.Kvs[0])
}

// value is a record's value; an empty one is not nil, as in bbolt.
func value(kv *mvccpb.KeyValue) []byte {
	if kv.Value == nil {
		return []byte{}
	}
	return kv.Value
}

func (b *etcdBucket) Put(k, v []byte) error {
	if len(k) == 0 {
		return errKeyRequired
	}
	if v == nil {
		v = []byte{}
	}
	return b.tx.write(b.start()+string(k), v)
}

func (b *etcdBucket) Delete(k []byte) error { return b.tx.write(b.start()+string(k), nil) }

// DeleteBefore deletes the records before end as one range, counted at the
// snapshot; where this transaction wrote in that range already, one by one.
func (b *etcdBucket) DeleteBefore(end []byte) (int, error) {
	if !b.tx.writable {
		return 0, errNotWritable
	}
	from, to := b.start(), b.start()+string(end)
	if len(end) == 0 {
		return 0, nil
	}
	_, _, wrote := b.tx.overAfter(from, to)
	for _, r := range b.tx.cut {
		wrote = wrote || (r[0] < to && from < r[1])
	}
	if wrote {
		n, err := deleteBefore(b.Cursor(), end)
		if err == nil {
			err = b.tx.err
		}
		return n, err
	}
	resp, err := b.tx.get(from, clientv3.WithRange(to), clientv3.WithCountOnly())
	if err != nil {
		return 0, err
	}
	b.tx.cut = append(b.tx.cut, [2]string{from, to})
	return int(resp.Count), nil
}

func (b *etcdBucket) Cursor() kvCursor { return &etcdCursor{b: b} }

func (b *etcdBucket) ForEach(fn func(k, v []byte) error) error {
	c := b.Cursor()
	for k, v := c.First(); k != nil; k, v = c.Next() {
		if err := fn(k, v); err != nil {
			return err
		}
	}
	return b.tx.err
}

func (b *etcdBucket) Bucket(name []byte) kvBucket {
	m := b.marker(name)
	nested := &etcdBucket{tx: b.tx, path: b.path + url.PathEscape(string(name)) + "/"}
	if v, ok := b.tx.over[m]; ok {
		if v == nil {
			return nil
		}
		return nested
	}
	resp, err := b.tx.get(m, clientv3.WithCountOnly())
	if err != nil || resp.Count == 0 {
		return nil
	}
	return nested
}

func (b *etcdBucket) CreateBucketIfNotExists(name []byte) (kvBucket, error) {
	if len(name) == 0 {
		return nil, errKeyRequired
	}
	if nb := b.Bucket(name); nb != nil {
		return nb, nil
	}
	if b.tx.err != nil {
		return nil, b.tx.err
	}
	if err := b.tx.write(b.marker(name), []byte{}); err != nil {
		return nil, err
	}
	return &etcdBucket{tx: b.tx, path: b.path + url.PathEscape(string(name)) + "/"}, nil
}

func (b *etcdBucket) ForEachBucket(fn func(name []byte) error) error {
	prefix := b.marker(nil)
	resp, err := b.tx.get(prefix, clientv3.WithPrefix(), clientv3.WithKeysOnly())
	if err != nil {
		return err
	}
	seen := map[string]bool{}
	for _, kv := range resp.Kvs {
		seen[string(kv.Key)] = true
	}
	for k, v := range b.tx.over {
		if strings.HasPrefix(k, prefix) {
			seen[k] = v != nil
		}
	}
	var names []string
	for k, live := range seen {
		rest := strings.TrimPrefix(k, prefix)
		if !live || strings.Contains(rest, "/") {
			continue
		}
		name, err := url.PathUnescape(rest)
		if err != nil {
			continue
		}
		names = append(names, name)
	}
	sort.Strings(names)
	for _, n := range names {
		if err := fn([]byte(n)); err != nil {
			return err
		}
	}
	return nil
}

// etcdCursor walks a bucket: the snapshot's records read a page at a
// time, merged with what the transaction wrote.
type etcdCursor struct {
	b *etcdBucket
	// page holds the snapshot's records from the key from on, in order;
	// more says whether records may follow its last.
	page []*mvccpb.KeyValue
	from string
	more bool
	// at is the etcd key the cursor is on ("" at the end).
	at string
}

// snapAfter is the snapshot's first record at or after key that this
// transaction neither wrote nor deleted.
func (c *etcdCursor) snapAfter(key string) (k string, v []byte) {
	end := c.b.end()
	for {
		if c.page == nil || key < c.from || (c.more && key > string(c.page[len(c.page)-1].Key)) {
			resp, err := c.b.tx.get(key, clientv3.WithRange(end), clientv3.WithLimit(c.b.tx.kv.page))
			if err != nil {
				return "", nil
			}
			c.page, c.from, c.more = resp.Kvs, key, resp.More
			if c.page == nil {
				c.page = []*mvccpb.KeyValue{}
			}
		}
		i := sort.Search(len(c.page), func(i int) bool { return string(c.page[i].Key) >= key })
		for ; i < len(c.page); i++ {
			k := string(c.page[i].Key)
			if _, wrote := c.b.tx.over[k]; wrote || c.b.tx.cutAt(k) {
				continue
			}
			return k, value(c.page[i])
		}
		if !c.more || len(c.page) == 0 {
			return "", nil
		}
		key = string(c.page[len(c.page)-1].Key) + "\x00"
		c.page = nil
	}
}

// seek puts the cursor on the first live record at or after key.
func (c *etcdCursor) seek(key string) (k, v []byte) {
	end := c.b.end()
	sk, sv := c.snapAfter(key)
	for {
		ok, ov, found := c.b.tx.overAfter(key, end)
		if !found || (sk != "" && sk < ok) {
			break
		}
		if ov != nil {
			c.at = ok
			return c.key(ok), *ov
		}
		key = ok + "\x00"
	}
	if sk == "" {
		c.at = ""
		return nil, nil
	}
	c.at = sk
	return c.key(sk), sv
}

// key is the record's key within its bucket.
func (c *etcdCursor) key(etcdKey string) []byte {
	return []byte(strings.TrimPrefix(etcdKey, c.b.start()))
}

func (c *etcdCursor) First() (k, v []byte) { return c.seek(c.b.start()) }

func (c *etcdCursor) Seek(seek []byte) (k, v []byte) { return c.seek(c.b.start() + string(seek)) }

func (c *etcdCursor) Next() (k, v []byte) {
	if c.at == "" {
		return nil, nil
	}
	return c.seek(c.at + "\x00")
}

// Last reads the bucket's last records from the end, a page at a time.
func (c *etcdCursor) Last() (k, v []byte) {
	start, end := c.b.start(), c.b.end()
	var last string
	var lastV []byte
	for to := end; last == ""; {
		resp, err := c.b.tx.get(start, clientv3.WithRange(to), clientv3.WithLimit(c.b.tx.kv.page),
			clientv3.WithSort(clientv3.SortByKey, clientv3.SortDescend))
		if err != nil {
			return nil, nil
		}
		for _, kv := range resp.Kvs {
			k := string(kv.Key)
			if _, wrote := c.b.tx.over[k]; !wrote && !c.b.tx.cutAt(k) {
				last, lastV = k, value(kv)
				break
			}
		}
		if !resp.More || len(resp.Kvs) == 0 {
			break
		}
		to = string(resp.Kvs[len(resp.Kvs)-1].Key)
	}
	// What this transaction wrote may come after.
	i, _ := slices.BinarySearch(c.b.tx.keys, end)
	for i--; i >= 0 && c.b.tx.keys[i] >= start; i-- {
		k := c.b.tx.keys[i]
		if v := c.b.tx.over[k]; v != nil {
			if k > last {
				last, lastV = k, *v
			}
			break
		}
	}
	if last == "" {
		c.at = ""
		return nil, nil
	}
	c.at = last
	return c.key(last), lastV
}

func (c *etcdCursor) Delete() error {
	if c.at == "" {
		return errKeyRequired
	}
	return c.b.tx.write(c.at, nil)
}
