package state

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// The records on etcd (designs/ha-etcd.md): every key lives under the
// prefix, a bucket's records under "r/" and the bucket's path (each name
// path-escaped and ended by "/"), then a zero byte, then the record's key;
// a nested bucket is marked by a key under "b/" and its parent's path. The
// values are the bbolt file's, checksums and all, so a state moves between
// the two unchanged (Store.Export, Store.Import).

// ErrNotLeader refuses a write to a fenced Store while this replica does
// not lead: a follower writes nothing.
var ErrNotLeader = errors.New("not the leader: a follower writes nothing to the state")

// ErrFenced refuses a write whose leader's term ended before it committed:
// a later leader has begun, and what this one meant to do is not done.
var ErrFenced = errors.New("fenced: the term this write was made under has ended")

// Fence is what a fenced Store's writes are conditioned on.
type Fence interface {
	// Term returns the election key and its creation revision (the term)
	// while this replica leads; ok is false while it does not.
	Term() (key string, rev int64, ok bool)
}

// EtcdOptions says where in etcd a Store keeps its records.
type EtcdOptions struct {
	Client *clientv3.Client
	// Prefix is where every key lives, for example "/fleetcast/prod/state/".
	Prefix string
	// Fence, when set, conditions every write on the leader's term: a
	// write is refused with ErrNotLeader while the fence holds no term,
	// and with ErrFenced if the term has ended when it commits. Without
	// one, writes are not fenced (one replica on etcd).
	Fence Fence
	// Timeout bounds each request to etcd (5 seconds when zero).
	Timeout time.Duration
	// MaxTxnOps is the most operations one transaction may hold (etcd's
	// --max-txn-ops, 128 when zero). A write of more records is committed
	// in several transactions, each fenced, ranges deleted first and then
	// records in the order written: every write that large (demand
	// imports, usage flushes, prunes, lists of nodes, a restore) is redone
	// whole by whoever leads next, or marked until it is whole (a
	// restore), so a part written is never a record half-changed.
	MaxTxnOps int
	// Existing opens a state that must be there already: nothing is
	// written at open, and a prefix with no state is refused (`state
	// export`).
	Existing bool
}

// maxTxnBytes keeps one transaction well under etcd's request limit
// (1.5 MiB by default).
const maxTxnBytes = 1 << 20

// OpenEtcd opens the records kept in etcd under o.Prefix. The first
// replica to open an empty prefix writes the state's format and version
// there (the one write not fenced: it creates the marker only where none
// is); a prefix holding another format or a newer version is refused.
// ctx bounds the store's life: its requests end when ctx does.
func OpenEtcd(ctx context.Context, o EtcdOptions) (*Store, error) {
	if o.Client == nil {
		return nil, errors.New("state: etcd: no client")
	}
	if o.Prefix == "" || !strings.HasSuffix(o.Prefix, "/") {
		return nil, fmt.Errorf("state: etcd prefix %q: want a prefix ending in /", o.Prefix)
	}
	if o.Timeout <= 0 {
		o.Timeout = 5 * time.Second
	}
	if o.MaxTxnOps <= 0 {
		o.MaxTxnOps = 128
	}
	e := &etcdKV{o: o, ctx: ctx, page: etcdPage}
	path := "etcd:" + o.Prefix
	fk := e.recordKey(bucketMeta, keyFormat)
	meta := e.recordKey(bucketMeta, nil)
	rctx, cancel := context.WithTimeout(ctx, o.Timeout)
	defer cancel()
	create := []clientv3.Op{clientv3.OpPut(fk, format), clientv3.OpPut(e.recordKey(bucketMeta, keyVersion), strconv.Itoa(Version))}
	if o.Existing {
		create = nil
	}
	resp, err := o.Client.Txn(rctx).
		If(clientv3.Compare(clientv3.Version(fk), "=", 0)).
		Then(create...).
		Else(clientv3.OpGet(meta, clientv3.WithPrefix())).
		Commit()
	if err != nil {
		return nil, fmt.Errorf("state: %s: reading the state's marker: %w", path, err)
	}
	if resp.Succeeded && o.Existing {
		return nil, fmt.Errorf("state: %s: no state there (is controller.ha.prefix right?)", path)
	}
	if !resp.Succeeded {
		var f, v, restoring []byte
		for _, kv := range resp.Responses[0].GetResponseRange().Kvs {
			switch strings.TrimPrefix(string(kv.Key), meta) {
			case string(keyFormat):
				f = kv.Value
			case string(keyVersion):
				v = kv.Value
			case string(keyRestoring):
				restoring = kv.Value
			}
		}
		if err := checkMarker(path, f, v); err != nil {
			return nil, err
		}
		if err := checkRestored(path, restoring); err != nil {
			return nil, err
		}
	}
	return &Store{kv: e, path: path}, nil
}

// etcdKV is a prefix in etcd. Its writes are serialized in this process
// (one leader writes; a deposed one's are fenced out), so a transaction's
// reads at its snapshot are what it writes over.
type etcdKV struct {
	o   EtcdOptions
	ctx context.Context
	// page is how many records a cursor reads at once.
	page int64
	mu   sync.Mutex
}

// bucketPath is the key part naming a bucket.
func bucketPath(names ...[]byte) string {
	var b strings.Builder
	for _, n := range names {
		b.WriteString(url.PathEscape(string(n)))
		b.WriteByte('/')
	}
	return b.String()
}

// recordKey is the etcd key of a record of a top-level bucket.
func (e *etcdKV) recordKey(bucket, key []byte) string {
	return e.o.Prefix + "r/" + bucketPath(bucket) + "\x00" + string(key)
}

func (e *etcdKV) close() error { return nil }

func (e *etcdKV) view(fn func(tx kvTx) error) error {
	tx := &etcdTx{kv: e, over: map[string]*[]byte{}}
	err := fn(tx)
	if tx.err != nil {
		// A read that failed ends the transaction, whatever fn made of
		// the nothing it read.
		return tx.err
	}
	return err
}

func (e *etcdKV) update(fn func(tx kvTx) error) error {
	// Refused at once while this replica does not lead, without waiting
	// on etcd (which a deposed leader may not reach); checked again as
	// the transaction commits.
	if _, err := e.fence(); err != nil {
		return err
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	tx := &etcdTx{kv: e, writable: true, over: map[string]*[]byte{}}
	if err := fn(tx); tx.err != nil {
		return tx.err
	} else if err != nil {
		return err
	}
	return tx.commit()
}

// fence is what a write is conditioned on: the leader's term, or nothing
// without a Fence. It refuses with ErrNotLeader while this replica does
// not lead.
func (e *etcdKV) fence() ([]clientv3.Cmp, error) {
	f := e.o.Fence
	if f == nil {
		return nil, nil
	}
	key, rev, ok := f.Term()
	if !ok {
		return nil, fmt.Errorf("state: etcd:%s: %w", e.o.Prefix, ErrNotLeader)
	}
	return []clientv3.Cmp{clientv3.Compare(clientv3.CreateRevision(key), "=", rev)}, nil
}

// request is a context for one request to etcd.
func (e *etcdKV) request() (context.Context, context.CancelFunc) {
	return context.WithTimeout(e.ctx, e.o.Timeout)
}

// etcdTx is a transaction: reads at one revision of etcd (the first
// read's), with this transaction's own writes laid over them; its writes
// are committed when it ends.
type etcdTx struct {
	kv       *etcdKV
	writable bool
	rev      int64
	// over is what this transaction wrote, by etcd key (nil: deleted);
	// keys is over's keys, sorted.
	over map[string]*[]byte
	keys []string
	// order is over's keys in the order first written: the order they are
	// committed in, so a write split over several transactions leaves
	// what the method wrote first.
	order []string
	// cut are the key ranges [from, to) deleted whole.
	cut [][2]string
	err error
}

func (t *etcdTx) Bucket(name []byte) kvBucket {
	return &etcdBucket{tx: t, path: bucketPath(name)}
}

// get reads from etcd at the transaction's revision.
func (t *etcdTx) get(key string, opts ...clientv3.OpOption) (*clientv3.GetResponse, error) {
	if t.rev > 0 {
		opts = append(opts, clientv3.WithRev(t.rev))
	}
	ctx, cancel := t.kv.request()
	defer cancel()
	resp, err := t.kv.o.Client.Get(ctx, key, opts...)
	if err != nil {
		err = fmt.Errorf("state: etcd:%s: reading %q: %w", t.kv.o.Prefix, strings.TrimPrefix(key, t.kv.o.Prefix), err)
		if t.err == nil {
			t.err = err
		}
		return nil, err
	}
	if t.rev == 0 {
		t.rev = resp.Header.Revision
	}
	return resp, nil
}

// cutAt says whether key lies in a range this transaction deleted.
func (t *etcdTx) cutAt(key string) bool {
	for _, r := range t.cut {
		if key >= r[0] && key < r[1] {
			return true
		}
	}
	return false
}

// write lays a put (v not nil) or a delete over the snapshot.
func (t *etcdTx) write(key string, v []byte) error {
	if !t.writable {
		return errNotWritable
	}
	if _, ok := t.over[key]; !ok {
		i, _ := slices.BinarySearch(t.keys, key)
		t.keys = slices.Insert(t.keys, i, key)
		t.order = append(t.order, key)
	}
	if v == nil {
		t.over[key] = nil
	} else {
		c := append([]byte{}, v...)
		t.over[key] = &c
	}
	return nil
}

// overAfter is this transaction's first written record at or after key
// and before end; v is nil where the transaction deleted it.
func (t *etcdTx) overAfter(key, end string) (k string, v *[]byte, found bool) {
	i, _ := slices.BinarySearch(t.keys, key)
	if i < len(t.keys) && t.keys[i] < end {
		return t.keys[i], t.over[t.keys[i]], true
	}
	return "", nil, false
}

// commit writes what the transaction wrote, fenced.
func (t *etcdTx) commit() error {
	if t.err != nil {
		return t.err
	}
	var ops []clientv3.Op
	var sizes []int
	for _, r := range t.cut {
		// A range deleted keeps the records written into it after.
		from := r[0]
		for _, k := range t.keys {
			if k >= from && k < r[1] && t.over[k] != nil {
				if from < k {
					ops, sizes = append(ops, clientv3.OpDelete(from, clientv3.WithRange(k))), append(sizes, len(from)+len(k))
				}
				from = k + "\x00"
			}
		}
		if from < r[1] {
			ops, sizes = append(ops, clientv3.OpDelete(from, clientv3.WithRange(r[1]))), append(sizes, len(from)+len(r[1]))
		}
	}
	for _, k := range t.order {
		switch v := t.over[k]; {
		case v != nil:
			ops, sizes = append(ops, clientv3.OpPut(k, string(*v))), append(sizes, len(k)+len(*v))
		case !t.cutAt(k):
			ops, sizes = append(ops, clientv3.OpDelete(k)), append(sizes, len(k))
		}
	}
	if len(ops) == 0 {
		return nil
	}
	cmps, err := t.kv.fence()
	if err != nil {
		return err
	}
	for len(ops) > 0 {
		n, size := 0, 0
		for n < len(ops) && n < t.kv.o.MaxTxnOps && (n == 0 || size+sizes[n] <= maxTxnBytes) {
			size += sizes[n]
			n++
		}
		ctx, cancel := t.kv.request()
		resp, err := t.kv.o.Client.Txn(ctx).If(cmps...).Then(ops[:n]...).Commit()
		cancel()
		if err != nil {
			return fmt.Errorf("state: etcd:%s: writing: %w", t.kv.o.Prefix, err)
		}
		if !resp.Succeeded {
			return fmt.Errorf("state: etcd:%s: %w", t.kv.o.Prefix, ErrFenced)
		}
		ops, sizes = ops[n:], sizes[n:]
	}
	return nil
}
