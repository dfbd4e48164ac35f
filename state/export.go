package state

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"time"
)

// exportHeader begins an export file; the number is Version.
const exportHeader = "fleetcast-state-export"

// exported is one record of an export file: its bucket's path, key and
// value (sealed, as kept); with no key, a nested bucket, which may hold
// no record.
type exported struct {
	Bucket []string `json:"b"`
	Key    []byte   `json:"k,omitempty"`
	Value  []byte   `json:"v,omitempty"`
}

// Export writes every record to w, one per line after a header, and a
// last line with the SHA-256 of all before it: a backup, and the way to
// move a state between a bbolt file and etcd (LoadExport). It reads in one
// transaction, so the records are one moment's. It returns how many
// records it wrote.
func (s *Store) Export(w io.Writer) (int, error) {
	h := sha256.New()
	bw := bufio.NewWriter(io.MultiWriter(w, h))
	fmt.Fprintf(bw, "%s %d\n", exportHeader, Version)
	n := 0
	enc := json.NewEncoder(bw)
	var walk func(path []string, b kvBucket) error
	walk = func(path []string, b kvBucket) error {
		if err := b.ForEach(func(k, v []byte) error {
			n++
			return enc.Encode(exported{Bucket: path, Key: k, Value: v})
		}); err != nil {
			return err
		}
		return b.ForEachBucket(func(name []byte) error {
			nested := append(path[:len(path):len(path)], string(name))
			if err := enc.Encode(exported{Bucket: nested}); err != nil {
				return err
			}
			return walk(nested, b.Bucket(name))
		})
	}
	err := s.kv.view(func(tx kvTx) error {
		for _, name := range buckets {
			if err := walk([]string{string(name)}, tx.Bucket(name)); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("state: exporting %s: %w", s.path, err)
	}
	if err := bw.Flush(); err != nil {
		return 0, fmt.Errorf("state: exporting %s: %w", s.path, err)
	}
	if _, err := fmt.Fprintf(w, "sha256 %x\n", h.Sum(nil)); err != nil {
		return 0, fmt.Errorf("state: exporting %s: %w", s.path, err)
	}
	return n, nil
}

// LoadExport reads an export file (Export) into s, which must hold no records
// yet: a state is restored whole or not at all, never merged. It checks
// the file's checksum, version and every record's own checksum before it
// writes anything, and names the line of what it refuses. It returns how
// many records it wrote.
func (s *Store) LoadExport(r io.Reader, name string) (int, error) {
	data, err := io.ReadAll(r)
	if err != nil {
		return 0, fmt.Errorf("state: reading %s: %w", name, err)
	}
	records, n, err := parseExport(data, name)
	if err != nil {
		return 0, err
	}
	// Marked first, unmarked last: a restore cut short (the process
	// killed, etcd lost) leaves a state that is refused at open, never
	// one that looks whole.
	at := []byte(time.Now().UTC().Format(time.RFC3339))
	err = s.kv.update(func(tx kvTx) error {
		for _, name := range buckets {
			empty := true
			b := tx.Bucket(name)
			b.ForEach(func(k, _ []byte) error {
				empty = empty && isMarker(name, k)
				return nil
			})
			b.ForEachBucket(func([]byte) error { empty = false; return nil })
			if !empty {
				return fmt.Errorf("it holds records already (bucket %s): import into a new state, never over one", name)
			}
		}
		return tx.Bucket(bucketMeta).Put(keyRestoring, at)
	})
	if err == nil {
		err = s.kv.update(func(tx kvTx) error {
			for _, x := range records {
				b := tx.Bucket([]byte(x.Bucket[0]))
				for _, nested := range x.Bucket[1:] {
					var err error
					if b, err = b.CreateBucketIfNotExists([]byte(nested)); err != nil {
						return err
					}
				}
				if x.Key == nil {
					continue
				}
				if x.Value == nil {
					x.Value = []byte{}
				}
				if err := b.Put(x.Key, x.Value); err != nil {
					return err
				}
			}
			return nil
		})
		if _, atomic := s.kv.(boltKV); err == nil || atomic {
			// Whole, or (a bbolt file's one transaction) none of it.
			err = errors.Join(err, s.kv.update(func(tx kvTx) error { return tx.Bucket(bucketMeta).Delete(keyRestoring) }))
		}
	}
	if err != nil {
		return 0, fmt.Errorf("state: importing %s into %s: %w", name, s.path, err)
	}
	return n, nil
}

// parseExport reads an export file's records (the marker records, which
// every state has its own of, left out), checking the file's checksum,
// its version and each record; n counts the file's records.
func parseExport(data []byte, name string) (records []exported, n int, err error) {
	body, sum, ok := cutLastLine(data)
	if !ok || !strings.HasPrefix(sum, "sha256 ") {
		return nil, 0, fmt.Errorf("state: %s: no checksum line at its end: not a whole export (cut short?)", name)
	}
	if got := sha256.Sum256(body); hex.EncodeToString(got[:]) != strings.TrimPrefix(sum, "sha256 ") {
		return nil, 0, fmt.Errorf("state: %s: checksum %x, the file says %s: the file is damaged", name, got, strings.TrimPrefix(sum, "sha256 "))
	}
	lines := bytes.Split(bytes.TrimSuffix(body, []byte("\n")), []byte("\n"))
	head, version, _ := strings.Cut(string(lines[0]), " ")
	v, err := strconv.Atoi(version)
	switch {
	case head != exportHeader || err != nil || v < 1:
		return nil, 0, fmt.Errorf("state: %s:1: %q, expected %q and a version: not a Fleetcast state export", name, lines[0], exportHeader+" 1")
	case v > Version:
		return nil, 0, fmt.Errorf("state: %s:1: written by a newer Fleetcast (state version %d; this one reads up to %d)", name, v, Version)
	}
	// Each record once, and no record where a nested bucket of its name
	// is (bbolt refuses one; etcd would keep both).
	seen := map[string]bool{}
	for i, line := range lines[1:] {
		var x exported
		d := json.NewDecoder(bytes.NewReader(line))
		d.DisallowUnknownFields()
		if err := d.Decode(&x); err != nil {
			return nil, 0, fmt.Errorf("state: %s:%d: %w", name, i+2, err)
		}
		if _, err := d.Token(); err != io.EOF {
			return nil, 0, fmt.Errorf("state: %s:%d: more after the record", name, i+2)
		}
		if err := checkExported(x); err != nil {
			return nil, 0, fmt.Errorf("state: %s:%d: %s/%q: %w", name, i+2, strings.Join(x.Bucket, "/"), x.Key, err)
		}
		path := x.Bucket
		if x.Key != nil {
			path = append(slices.Clone(x.Bucket), string(x.Key))
		}
		at := strings.Join(path, "\x00")
		if seen[at] {
			return nil, 0, fmt.Errorf("state: %s:%d: %s: a second record or bucket of this name", name, i+2, strings.Join(path, "/"))
		}
		seen[at] = true
		if x.Key != nil {
			n++
		}
		if isMarker([]byte(x.Bucket[0]), x.Key) {
			continue // s has its own
		}
		records = append(records, x)
	}
	return records, n, nil
}

// isMarker reports whether k is one of the meta bucket's marker records,
// which every state holds from its start.
func isMarker(bucket, k []byte) bool {
	return bytes.Equal(bucket, bucketMeta) && (bytes.Equal(k, keyFormat) || bytes.Equal(k, keyVersion))
}

// checkExported checks that a record names a known bucket, has a key, and
// carries its own checksum (the meta bucket's records are plain).
func checkExported(x exported) error {
	known := false
	for _, b := range buckets {
		known = known || len(x.Bucket) > 0 && x.Bucket[0] == string(b)
	}
	switch {
	case len(x.Bucket) == 0:
		return errors.New("no bucket")
	case !known:
		return errors.New("no such bucket")
	case slices.Contains(x.Bucket[1:], ""):
		return errors.New("a nested bucket with no name")
	case x.Key == nil && len(x.Bucket) > 1 && x.Value == nil:
		return nil // a nested bucket
	case len(x.Key) == 0:
		return errors.New("no key")
	case x.Bucket[0] == string(bucketMeta):
		return nil
	}
	_, err := unseal(x.Key, x.Value)
	return err
}

// cutLastLine splits data before its last line, and returns that line
// without its newline.
func cutLastLine(data []byte) (body []byte, last string, ok bool) {
	t := bytes.TrimSuffix(data, []byte("\n"))
	i := bytes.LastIndexByte(t, '\n')
	if i < 0 {
		return nil, "", false
	}
	return data[:i+1], string(t[i+1:]), true
}
