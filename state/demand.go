package state

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"time"
)

// Sample is one demand observation.
type Sample struct {
	Time  time.Time
	Value float64
}

// AppendDemand records demand samples of the named series (for example
// "fleet" or a pool's name). A sample at a time already recorded replaces
// it. NaN and infinite values are refused.
func (s *Store) AppendDemand(series string, samples ...Sample) error {
	if series == "" {
		return errors.New("state: demand series with no name")
	}
	for _, x := range samples {
		if math.IsNaN(x.Value) || math.IsInf(x.Value, 0) {
			return fmt.Errorf("state: demand %s at %s is %v", series, x.Time.UTC().Format(time.RFC3339), x.Value)
		}
	}
	return s.kv.update(func(tx kvTx) error {
		b, err := tx.Bucket(bucketDemand).CreateBucketIfNotExists([]byte(series))
		if err != nil {
			return fmt.Errorf("state: demand %s: %w", series, err)
		}
		for _, x := range samples {
			k := timeKey(x.Time)
			if err := b.Put(k, sealed(k, floatValue(x.Value))); err != nil {
				return fmt.Errorf("state: demand %s: %w", series, err)
			}
		}
		return nil
	})
}

// Demand returns the named series' samples at or after since, oldest
// first; none if the series was never recorded.
func (s *Store) Demand(series string, since time.Time) ([]Sample, error) {
	var out []Sample
	err := s.kv.view(func(tx kvTx) error {
		b := tx.Bucket(bucketDemand).Bucket([]byte(series))
		if b == nil {
			return nil
		}
		c := b.Cursor()
		for k, v := c.Seek(timeKey(since)); k != nil; k, v = c.Next() {
			x, err := s.sample(series, k, v)
			if err != nil {
				return err
			}
			out = append(out, x)
		}
		return nil
	})
	return out, err
}

// LatestDemand returns the named series' newest sample; ok is false when
// the series holds none.
func (s *Store) LatestDemand(series string) (x Sample, ok bool, err error) {
	err = s.kv.view(func(tx kvTx) error {
		b := tx.Bucket(bucketDemand).Bucket([]byte(series))
		if b == nil {
			return nil
		}
		k, v := b.Cursor().Last()
		if k == nil {
			return nil
		}
		x, err = s.sample(series, k, v)
		ok = err == nil
		return err
	})
	return x, ok, err
}

// sample decodes one demand entry.
func (s *Store) sample(series string, k, v []byte) (Sample, error) {
	data, err := unseal(k, v)
	if err == nil && (len(k) != 8 || len(data) != 8) {
		err = fmt.Errorf("entry of %d+%d bytes, expected 8+8", len(k), len(data))
	}
	if err != nil {
		return Sample{}, fmt.Errorf("state: %s: demand/%s/%x: %w", s.path, series, k, err)
	}
	return Sample{
		Time:  time.Unix(0, int64(binary.BigEndian.Uint64(k))).UTC(),
		Value: math.Float64frombits(binary.BigEndian.Uint64(data)),
	}, nil
}

// DemandSeries lists the names of the recorded demand series, sorted.
func (s *Store) DemandSeries() ([]string, error) {
	var out []string
	err := s.kv.view(func(tx kvTx) error {
		return tx.Bucket(bucketDemand).ForEachBucket(func(k []byte) error {
			out = append(out, string(k))
			return nil
		})
	})
	return out, err
}

// PruneDemand deletes every series' samples before t, so the history stays
// as long as the forecaster needs and no longer. It returns how many it
// deleted.
func (s *Store) PruneDemand(before time.Time) (int, error) {
	n := 0
	err := s.kv.update(func(tx kvTx) error {
		return tx.Bucket(bucketDemand).ForEachBucket(func(name []byte) error {
			d, err := tx.Bucket(bucketDemand).Bucket(name).DeleteBefore(timeKey(before))
			n += d
			if err != nil {
				return fmt.Errorf("state: pruning demand %s: %w", name, err)
			}
			return nil
		})
	})
	return n, err
}

// FillDemand records those of the samples of the named series whose step
// holds no sample yet, and leaves the others out: what is recorded wins.
// A step is the span of length step that a sample's time falls in, counted
// as time.Time.Truncate counts it (as the decision loop does), so a sample
// of a step the controller recorded in, at whatever time within it, is left
// out, as is a second sample of one step in the same call. It returns the
// samples it added, in the order given, and how many it left out. NaN and
// infinite values are refused, and then nothing is recorded.
func (s *Store) FillDemand(series string, step time.Duration, samples ...Sample) (added []Sample, kept int, err error) {
	switch {
	case series == "":
		return nil, 0, errors.New("state: demand series with no name")
	case step <= 0:
		return nil, 0, fmt.Errorf("state: filling demand %s: step %v, want a positive step", series, step)
	}
	for _, x := range samples {
		if math.IsNaN(x.Value) || math.IsInf(x.Value, 0) {
			return nil, 0, fmt.Errorf("state: demand %s at %s is %v", series, x.Time.UTC().Format(time.RFC3339), x.Value)
		}
	}
	err = s.kv.update(func(tx kvTx) error {
		added, kept = nil, 0
		b, err := tx.Bucket(bucketDemand).CreateBucketIfNotExists([]byte(series))
		if err != nil {
			return fmt.Errorf("state: demand %s: %w", series, err)
		}
		c := b.Cursor()
		for _, x := range samples {
			from := x.Time.Truncate(step)
			if k, _ := c.Seek(timeKey(from)); k != nil && bytes.Compare(k, timeKey(from.Add(step))) < 0 {
				kept++
				continue
			}
			k := timeKey(x.Time)
			if err := b.Put(k, sealed(k, floatValue(x.Value))); err != nil {
				return fmt.Errorf("state: demand %s: %w", series, err)
			}
			added = append(added, x)
		}
		return nil
	})
	if err != nil {
		return nil, 0, err
	}
	return added, kept, nil
}
