package state

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/fleetcast/autoscaler/internal/etcdtest"
	"go.etcd.io/etcd/server/v3/embed"
	"pgregory.net/rapid"
)

// kvOp is one operation inside a transaction; it returns what it read.
type kvOp func(tx kvTx) string

// TestKVConform runs random transactions of reads and writes, cursors
// and nested buckets on a bbolt file and on etcd, and checks that every
// read inside them reads the same: etcd's transactions lay their own
// writes over their snapshot as bbolt's see their own. The etcd member
// takes at most two operations a transaction and its cursors read two
// records at a time, so that writes are split and reads paged.
func TestKVConform(t *testing.T) {
	etcd := etcdtest.StartWith(t, func(c *embed.Config) { c.MaxTxnOps = 2 }).Client(t)
	run := 0
	rapid.Check(t, func(rt *rapid.T) {
		run++
		dir, err := os.MkdirTemp("", "fleetcast-kv-")
		if err != nil {
			rt.Fatal(err)
		}
		defer os.RemoveAll(dir)
		b, err := Open(dir)
		if err != nil {
			rt.Fatal(err)
		}
		defer b.Close()
		e, err := OpenEtcd(context.Background(), EtcdOptions{Client: etcd, Prefix: fmt.Sprintf("/kv/%d/", run), MaxTxnOps: 2})
		if err != nil {
			rt.Fatal(err)
		}
		e.kv.(*etcdKV).page = 2

		key := rapid.SampledFrom([]string{"a", "b", "b\x00", "c", "d/e", "e"})
		nested := rapid.SampledFrom([]string{"x", "y/z", "%"})
		// bucket is the bucket an op works in: a top-level one, or one
		// nested in demand (nil if there is none).
		bucket := func(rt *rapid.T) func(tx kvTx) kvBucket {
			switch n := rapid.IntRange(0, 2).Draw(rt, "bucket"); n {
			case 0:
				return func(tx kvTx) kvBucket { return tx.Bucket(bucketIntents) }
			default:
				name := nested.Draw(rt, "nested")
				return func(tx kvTx) kvBucket { return tx.Bucket(bucketDemand).Bucket([]byte(name)) }
			}
		}
		for i := range rapid.IntRange(1, 8).Draw(rt, "transactions") {
			var ops []kvOp
			write := rapid.Bool().Draw(rt, "write")
			for range rapid.IntRange(1, 12).Draw(rt, "ops") {
				in := bucket(rt)
				k := key.Draw(rt, "key")
				switch op := rapid.IntRange(0, 8).Draw(rt, "op"); {
				case op == 0 && write:
					v := rapid.SampledFrom([]string{"", "1", "22"}).Draw(rt, "value")
					ops = append(ops, func(tx kvTx) string {
						if b := in(tx); b != nil {
							return errString(b.Put([]byte(k), []byte(v)))
						}
						return "no bucket"
					})
				case op == 1 && write:
					ops = append(ops, func(tx kvTx) string {
						if b := in(tx); b != nil {
							return errString(b.Delete([]byte(k)))
						}
						return "no bucket"
					})
				case op == 2 && write:
					ops = append(ops, func(tx kvTx) string {
						if b := in(tx); b != nil {
							n, err := b.DeleteBefore([]byte(k))
							return fmt.Sprint(n, errString(err))
						}
						return "no bucket"
					})
				case op == 3 && write:
					name := nested.Draw(rt, "nested")
					ops = append(ops, func(tx kvTx) string {
						_, err := tx.Bucket(bucketDemand).CreateBucketIfNotExists([]byte(name))
						return errString(err)
					})
				case op == 4:
					ops = append(ops, func(tx kvTx) string {
						if b := in(tx); b != nil {
							return fmt.Sprintf("%q", b.Get([]byte(k)))
						}
						return "no bucket"
					})
				case op == 5:
					ops = append(ops, func(tx kvTx) string {
						var names []string
						err := tx.Bucket(bucketDemand).ForEachBucket(func(n []byte) error {
							names = append(names, string(n))
							return nil
						})
						return fmt.Sprintf("%q %s", names, errString(err))
					})
				default:
					// A cursor: placed, then moved on; in a write, it may
					// delete where it stands.
					start := rapid.IntRange(0, 2).Draw(rt, "start")
					moves := rapid.IntRange(0, 4).Draw(rt, "moves")
					del := write && rapid.Bool().Draw(rt, "delete")
					ops = append(ops, func(tx kvTx) string {
						b := in(tx)
						if b == nil {
							return "no bucket"
						}
						c := b.Cursor()
						var out strings.Builder
						var ck, cv []byte
						switch start {
						case 0:
							ck, cv = c.First()
						case 1:
							ck, cv = c.Seek([]byte(k))
						default:
							ck, cv = c.Last()
						}
						fmt.Fprintf(&out, "%q=%q", ck, cv)
						if del && ck != nil {
							fmt.Fprintf(&out, " delete %s", errString(c.Delete()))
							ck, cv = c.First()
							fmt.Fprintf(&out, " %q=%q", ck, cv)
						}
						for range moves {
							if ck == nil {
								break
							}
							ck, cv = c.Next()
							fmt.Fprintf(&out, " %q=%q", ck, cv)
						}
						return out.String()
					})
				}
			}
			rollback := write && rapid.IntRange(0, 4).Draw(rt, "rollback") == 0
			var got [2][]string
			for j, s := range []*Store{b, e} {
				run := func(tx kvTx) error {
					for _, op := range ops {
						got[j] = append(got[j], op(tx))
					}
					if rollback {
						return fmt.Errorf("rolled back")
					}
					return nil
				}
				var err error
				if write {
					err = s.kv.update(run)
				} else {
					err = s.kv.view(run)
				}
				got[j] = append(got[j], "end: "+errString(err))
			}
			if a, b := strings.Join(got[0], "\n"), strings.Join(got[1], "\n"); a != b {
				rt.Fatalf("transaction %d: bbolt read\n%s\netcd read\n%s", i, a, b)
			}
		}
	})
}

// errString is err's text, or "ok".
func errString(err error) string {
	if err == nil {
		return "ok"
	}
	return err.Error()
}

// TestKVCutThenPut: a range deleted and then written into, in one
// transaction, keeps what was written and nothing else of the range.
func TestKVCutThenPut(t *testing.T) {
	etcd := etcdtest.Start(t).Client(t)
	for _, s := range []*Store{open(t, t.TempDir()), openEtcd(t, etcd, "/cut/", nil)} {
		put := func(tx kvTx, k string) error { return tx.Bucket(bucketIntents).Put([]byte(k), []byte(k)) }
		if err := s.kv.update(func(tx kvTx) error {
			return cmpErr(put(tx, "a"), put(tx, "b"), put(tx, "c"), put(tx, "d"))
		}); err != nil {
			t.Fatal(err)
		}
		if err := s.kv.update(func(tx kvTx) error {
			n, err := tx.Bucket(bucketIntents).DeleteBefore([]byte("d"))
			if n != 3 {
				t.Errorf("%s: deleted %d, want 3", s.Path(), n)
			}
			return cmpErr(err, put(tx, "b"))
		}); err != nil {
			t.Fatal(err)
		}
		var got []string
		s.kv.view(func(tx kvTx) error {
			return tx.Bucket(bucketIntents).ForEach(func(k, _ []byte) error { got = append(got, string(k)); return nil })
		})
		if fmt.Sprint(got) != "[b d]" {
			t.Errorf("%s: %q left, want [b d]", s.Path(), got)
		}
	}
}
