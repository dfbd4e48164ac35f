package state

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/fleetcast/autoscaler/internal/etcdtest"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// fill writes one of every record into r.
func fill(t testing.TB, r Records) {
	t.Helper()
	for _, err := range []error{
		r.ClaimFleet(""),
		r.AppendDemand("fleet", Sample{t0, 10}, Sample{t0.Add(time.Minute), 12.5}),
		r.AppendDemand("held/a b", Sample{t0, 1}),
		r.PutIntent(Intent{Key: "fc-launch-a-t7-1", Kind: IntentLaunch, Pool: "a", Count: 1, Target: 2, Created: t0}),
		r.PutDrain(Drain{Node: "i-1", Pool: "a", Started: t0, Deadline: t0.Add(time.Hour)}),
		r.PutBackoff(Backoff{Pool: "a", Failures: 1, Until: t0}),
		r.PutHalted(t0),
		r.PutLaunches(Launch{Key: "k", Pool: "a", Count: 2, At: t0, Claimed: []string{"i-1"}}),
		r.PutSeen(t0, "i-1"), r.PutReady(t0, "i-1"), r.PutCancelled("i-2", t0),
		r.PutPools(PoolRecord{Name: "a", GPUsPerNode: 8, PricePerHour: 32}),
		r.PutCredential(Credential{Node: "i-1", Hash: "h", Issued: t0}),
		r.PutAPIToken(APIToken{Name: "slurm", Scope: "demand", Hash: "h", Created: t0}),
		r.PutUsage([]UsageHour{{Hour: t0, Team: "a", Tier: "b"}}, []UsageJob{{ID: "j", Team: "a", Tier: "b", Pool: "a", Start: t0}}),
	} {
		if err != nil {
			t.Fatal(err)
		}
	}
}

// TestExportImport: a state exported from bbolt and imported into etcd,
// and back into a new bbolt file, exports the same records again, and
// reads the same through every method.
func TestExportImport(t *testing.T) {
	etcd := etcdtest.Start(t).Client(t)
	from := open(t, t.TempDir())
	defer from.Close()
	fill(t, from)
	var first bytes.Buffer
	n, err := from.Export(&first)
	if err != nil || n < 15 {
		t.Fatalf("export: %d records, %v", n, err)
	}
	e := openEtcd(t, etcd, "/imported/", nil)
	if m, err := e.LoadExport(bytes.NewReader(first.Bytes()), "backup"); err != nil || m != n {
		t.Fatalf("import: %d records, %v; exported %d", m, err, n)
	}
	var second bytes.Buffer
	if _, err := e.Export(&second); err != nil {
		t.Fatal(err)
	}
	back := open(t, t.TempDir())
	defer back.Close()
	if _, err := back.LoadExport(bytes.NewReader(second.Bytes()), "backup"); err != nil {
		t.Fatal(err)
	}
	var third bytes.Buffer
	back.Export(&third)
	if first.String() != second.String() || second.String() != third.String() {
		t.Fatalf("exports differ:\nbbolt\n%s\netcd\n%s\nbbolt again\n%s", first.String(), second.String(), third.String())
	}
	for _, r := range []*Store{e, back} {
		for name, read := range map[string]func(r Records) (any, error){
			"series":  func(r Records) (any, error) { return r.DemandSeries() },
			"demand":  func(r Records) (any, error) { return r.Demand("fleet", time.Time{}) },
			"intents": func(r Records) (any, error) { return r.Intents() },
			"usage":   func(r Records) (any, error) { return r.UsageJobs(time.Time{}, time.Time{}) },
			"tokens":  func(r Records) (any, error) { return r.APITokens() },
		} {
			a, aerr := read(from)
			b, berr := read(r)
			if fmt.Sprint(a, aerr) != fmt.Sprint(b, berr) {
				t.Errorf("%s: %s reads %v %v, the original %v %v", name, r.Path(), b, berr, a, aerr)
			}
		}
	}
	if err := back.ClaimFleet("prod"); err == nil {
		t.Error("the fleet's claim was not carried over")
	}
}

// TestImportRefuses: a damaged, cut or foreign file, a record damaged
// under a good checksum, and a state that holds records are refused, and
// nothing is written.
func TestImportRefuses(t *testing.T) {
	src := open(t, t.TempDir())
	defer src.Close()
	fill(t, src)
	var buf bytes.Buffer
	src.Export(&buf)
	good := buf.String()
	resum := func(body string) string { return body + fmt.Sprintf("sha256 %x\n", sha256.Sum256([]byte(body))) }
	body := good[:strings.LastIndex(strings.TrimSuffix(good, "\n"), "\n")+1]
	for _, tt := range []struct {
		name, file, want string
	}{
		{"damaged", strings.Replace(good, "fleet", "fleex", 1), "the file is damaged"},
		{"cut short", good[:len(good)/2], "checksum"},
		{"empty", "", "no checksum line"},
		{"foreign", resum("something else 1\n"), "not a Fleetcast state export"},
		{"newer", resum("fleetcast-state-export 9\n"), "written by a newer Fleetcast"},
		{"a record damaged", resum(body + `{"b":["intents"],"k":"YQ==","v":"YWJjZGVm"}` + "\n"),
			fmt.Sprintf("backup:%d: intents/\"a\": checksum", strings.Count(body, "\n")+1)},
		{"an unknown bucket", resum(body + `{"b":["nope"],"k":"YQ==","v":"YQ=="}` + "\n"), "no such bucket"},
		{"no bucket", resum(body + `{"b":[]}` + "\n"), "no bucket"},
		{"a record twice", resum(body + `{"b":["meta"],"k":"ZmxlZXQ="}` + "\n"), "a second record or bucket of this name"},
		{"a record where a bucket is", resum(body + `{"b":["demand"],"k":"ZmxlZXQ=","v":"` + base64.StdEncoding.EncodeToString(sealed([]byte("fleet"), []byte("1"))) + `"}` + "\n"),
			"demand/fleet: a second record or bucket"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			dst := open(t, t.TempDir())
			defer dst.Close()
			_, err := dst.LoadExport(strings.NewReader(tt.file), "backup")
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("import: %v, want an error containing %q", err, tt.want)
			}
			if in, _ := dst.Intents(); len(in) != 0 {
				t.Errorf("%d intents written by a refused import", len(in))
			}
		})
	}
	if _, err := src.LoadExport(strings.NewReader(good), "backup"); err == nil || !strings.Contains(err.Error(), "holds records already") {
		t.Errorf("import over records: %v", err)
	}
}

// TestRestoreCutShort: a state a restore was cut short in (its marker
// left) is refused at open, as a bbolt file and on etcd; and a state that
// must exist is not made where there is none.
func TestRestoreCutShort(t *testing.T) {
	etcd := etcdtest.Start(t).Client(t)
	dir := t.TempDir()
	b := open(t, dir)
	e := openEtcd(t, etcd, "/cut-short/", nil)
	for _, s := range []*Store{b, e} {
		if err := s.kv.update(func(tx kvTx) error { return tx.Bucket(bucketMeta).Put(keyRestoring, []byte("2026-12-07T10:00:00Z")) }); err != nil {
			t.Fatal(err)
		}
	}
	b.Close()
	if _, err := Open(dir); err == nil || !strings.Contains(err.Error(), "was cut short at 2026-12-07T10:00:00Z") {
		t.Errorf("bbolt: %v", err)
	}
	if _, err := OpenEtcd(context.Background(), EtcdOptions{Client: etcd, Prefix: "/cut-short/"}); err == nil || !strings.Contains(err.Error(), "was cut short") {
		t.Errorf("etcd: %v", err)
	}
	if _, err := OpenEtcd(context.Background(), EtcdOptions{Client: etcd, Prefix: "/nothing/", Existing: true}); err == nil || !strings.Contains(err.Error(), "no state there") {
		t.Errorf("an existing state where there is none: %v", err)
	}
	if resp, _ := etcd.Get(context.Background(), "/nothing/", clientv3.WithPrefix(), clientv3.WithCountOnly()); resp.Count != 0 {
		t.Errorf("%d keys written opening a state that must exist", resp.Count)
	}
}

// FuzzParseExport: whatever an export file holds, reading it never
// panics, and what it accepts names known buckets and carries each
// record's own checksum.
func FuzzParseExport(f *testing.F) {
	dir, err := os.MkdirTemp("", "fleetcast-fuzz-")
	if err != nil {
		f.Fatal(err)
	}
	defer os.RemoveAll(dir)
	s, err := Open(dir)
	if err != nil {
		f.Fatal(err)
	}
	fill(f, s)
	var buf bytes.Buffer
	s.Export(&buf)
	s.Close()
	f.Add(buf.Bytes())
	f.Add([]byte("fleetcast-state-export 1\nsha256 x\n"))
	body := "fleetcast-state-export 1\n{\"b\":[]}\n"
	f.Add([]byte(body + fmt.Sprintf("sha256 %x\n", sha256.Sum256([]byte(body)))))
	f.Fuzz(func(t *testing.T, data []byte) {
		records, _, err := parseExport(data, "fuzz")
		if err != nil {
			return
		}
		for _, x := range records {
			if err := checkExported(x); err != nil {
				t.Errorf("accepted %+v: %v", x, err)
			}
		}
	})
}
