package state

import (
	"reflect"
	"strings"
	"testing"
	"time"
)

// FuzzUsageJob: any bytes read as a job record either are refused or
// read back as a record that encodes to the same record again; none
// crashes the reader.
func FuzzUsageJob(f *testing.F) {
	at := time.Date(2026, 11, 30, 10, 0, 0, 0, time.UTC)
	f.Add(encodeUsageJob(UsageJob{ID: "42", Team: "vision", Tier: "standard", Name: "resnet", Pool: "od", Nodes: 2, GPUs: 16,
		Submitted: at, Start: at.Add(time.Minute), End: at.Add(time.Hour), Checkpoints: 3, Micros: 12_345_678, GPUHours: 15.5}))
	f.Add(encodeUsageJob(UsageJob{ID: "x", Start: at}))
	f.Add(encodeUsageJob(UsageJob{ID: "idle", Start: at, Micros: 9_000_000, GPUHours: 3, IdleBeforeMicros: 2_000_000,
		IdleBeforeGPUHours: 1, StalledMicros: 1_000_000, StalledGPUHours: 0.5}))
	f.Add([]byte{usageJobVersion, 200})
	f.Fuzz(func(t *testing.T, b []byte) {
		j, err := parseUsageJob(b)
		if err != nil {
			return
		}
		again, err := parseUsageJob(encodeUsageJob(j))
		if err != nil || !reflect.DeepEqual(again, j) {
			t.Fatalf("%+v read back as %+v, %v", j, again, err)
		}
	})
}

// TestUsageJobDamaged: a job record whose bytes were damaged on disk is
// an error naming the file, the bucket and the key, never a different
// record.
func TestUsageJobDamaged(t *testing.T) {
	dir := t.TempDir()
	s, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	at := time.Date(2026, 11, 30, 10, 0, 0, 0, time.UTC)
	j := UsageJob{ID: "42", Team: "vision", Start: at, Micros: 5}
	if err := s.PutUsage(nil, []UsageJob{j}); err != nil {
		t.Fatal(err)
	}
	if err := s.kv.update(func(tx kvTx) error {
		b := tx.Bucket(bucketUsageJobs)
		k := []byte(usageJobKey(j))
		v := append([]byte(nil), b.Get(k)...)
		v[3] ^= 0xff
		return b.Put(k, v)
	}); err != nil {
		t.Fatal(err)
	}
	_, err = s.UsageJobs(time.Time{}, time.Time{})
	if err == nil || !strings.Contains(err.Error(), s.Path()) || !strings.Contains(err.Error(), "usage-jobs/"+usageJobKey(j)) || !strings.Contains(err.Error(), "damaged") {
		t.Errorf("a damaged job record read: %v; want an error naming the file, bucket and key", err)
	}
}

// TestUsageJobIdleParts: a job record with allocated-idle parts reads
// back whole (version 2), one without them is written as before (version
// 1, which this controller still reads) and reads back the same.
func TestUsageJobIdleParts(t *testing.T) {
	at := time.Date(2026, 12, 7, 10, 0, 0, 0, time.UTC)
	for _, j := range []UsageJob{
		{ID: "prep", Team: "vision", Pool: "od", Start: at, Micros: 9_000_000, GPUHours: 3, IdleBeforeMicros: 4_000_000, IdleBeforeGPUHours: 1},
		{ID: "train", Team: "nlp", Pool: "od", Start: at, Micros: 9_000_000, GPUHours: 3, StalledMicros: 2_666_667, StalledGPUHours: 2.0 / 3},
		{ID: "plain", Team: "nlp", Pool: "od", Start: at, Micros: 1, GPUHours: 0.5},
	} {
		b := encodeUsageJob(j)
		idle := j.IdleBeforeMicros != 0 || j.StalledMicros != 0
		if wantVersion := map[bool]byte{false: usageJobVersion, true: usageJobIdleVersion}[idle]; b[0] != wantVersion {
			t.Errorf("%s: version %d, want %d", j.ID, b[0], wantVersion)
		}
		got, err := parseUsageJob(b)
		if err != nil || !reflect.DeepEqual(got, j) {
			t.Errorf("%s: read back %+v, %v; want %+v", j.ID, got, err, j)
		}
		if _, err := parseUsageJob(b[:len(b)-1]); err == nil {
			t.Errorf("%s: a record cut short by a byte read back", j.ID)
		}
	}
}
