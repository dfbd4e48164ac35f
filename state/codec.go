package state

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"hash/crc32"
	"math"
	"time"
)

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

func putJSON(b kvBucket, key string, v any) error {
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
	err := s.kv.view(func(tx kvTx) error {
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
