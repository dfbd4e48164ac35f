package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/fleetcast/autoscaler/election"
	"github.com/fleetcast/autoscaler/internal/cli"
	"github.com/fleetcast/autoscaler/internal/etcdtest"
)

// haConfigIn writes the local example with an ha block on the etcd at
// endpoint into dir.
func haConfigIn(t *testing.T, dir, endpoint string) string {
	t.Helper()
	src, err := os.ReadFile(localConfigIn(t, dir))
	if err != nil {
		t.Fatal(err)
	}
	cfg := strings.Replace(string(src), `agent_timeout = "3m"`, `agent_timeout = "3m"
  ha {
    etcd      = ["`+endpoint+`"]
    advertise = "http://127.0.0.1:8790"
  }`, 1)
	path := filepath.Join(dir, "ha.hcl")
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestStateExportImport: a state file's history, exported, imports into
// etcd and exports from there the same, byte for byte; a second import
// over it is refused, as is an import while a replica leads; a damaged
// file is refused with what is wrong.
func TestStateExportImport(t *testing.T) {
	dir := t.TempDir()
	srv := etcdtest.Start(t)
	conf := haConfigIn(t, dir, srv.Endpoints[0])
	stateDir := filepath.Join(dir, "file-state")
	series := hourlySeries(t, dir, 48, 16)
	if code, _, errOut := cmdline("history", "import", "-config", localConfig, "-state-dir", stateDir, "-series", series); code != cli.ExitOK {
		t.Fatalf("history import: %s", errOut)
	}
	backup := filepath.Join(dir, "backup")
	code, out, errOut := cmdline("state", "export", "-config", conf, "-state-dir", stateDir, "-out", backup)
	if code != cli.ExitOK || !strings.Contains(out, "exported ") || !strings.Contains(out, " to "+backup+" (sha256 ") {
		t.Fatalf("export: exit %d, %q %q", code, out, errOut)
	}
	if fi, err := os.Stat(backup); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("backup: %v, %v; want mode 0600", fi, err)
	}
	code, out, errOut = cmdline("state", "import", "-config", conf, "-in", backup)
	if code != cli.ExitOK || !strings.Contains(out, "into etcd:/fleetcast/default/state/") {
		t.Fatalf("import into etcd: exit %d, %q %q", code, out, errOut)
	}
	_, fromEtcd, _ := cmdline("state", "export", "-config", conf)
	original, _ := os.ReadFile(backup)
	if !bytes.Equal([]byte(fromEtcd), original) {
		t.Errorf("etcd's export differs from the file's:\n%s\n---\n%s", fromEtcd, original)
	}
	if code, _, errOut := cmdline("state", "import", "-config", conf, "-in", backup); code != cli.ExitError || !strings.Contains(errOut, "holds records already") {
		t.Errorf("second import: exit %d, %q", code, errOut)
	}
	os.WriteFile(backup+".bad", bytes.Replace(original, []byte("fleet"), []byte("fleex"), 1), 0o600)
	if code, _, errOut := cmdline("state", "import", "-config", conf, "-state-dir", filepath.Join(dir, "other"), "-in", backup+".bad"); code != cli.ExitError || !strings.Contains(errOut, "the file is damaged") {
		t.Errorf("damaged import: exit %d, %q", code, errOut)
	}

	leadAs(t, srv, "http://c1:8790")
	if code, _, errOut := cmdline("state", "import", "-config", conf, "-in", backup); code != cli.ExitError || !strings.Contains(errOut, "http://c1:8790 leads the fleet") {
		t.Errorf("import while a replica leads: exit %d, %q", code, errOut)
	}
}

// TestHAHistoryAndReport: with an ha block, history import writes the
// history into etcd as the fleet's leader (refused while a replica
// leads), and report reads the books from etcd while replicas run.
func TestHAHistoryAndReport(t *testing.T) {
	dir := t.TempDir()
	srv := etcdtest.Start(t)
	conf := haConfigIn(t, dir, srv.Endpoints[0])
	series := hourlySeries(t, dir, 24, 8)
	code, out, errOut := cmdline("history", "import", "-config", conf, "-series", series)
	if code != cli.ExitOK || !strings.Contains(out, "etcd:/fleetcast/default/state/") {
		t.Fatalf("history import into etcd: exit %d, %q %q", code, out, errOut)
	}
	if _, exported, _ := cmdline("state", "export", "-config", conf); !strings.Contains(exported, `"b":["demand","fleet"]`) {
		t.Errorf("the history is not in etcd's state:\n%s", exported)
	}
	if code, out, errOut := cmdline("report", "-config", conf, "-json"); code != cli.ExitOK || !strings.Contains(out, `"rows"`) {
		t.Errorf("report from etcd: exit %d, %q %q", code, out, errOut)
	}
	leadAs(t, srv, "http://c1:8790")
	if code, _, errOut := cmdline("history", "import", "-config", conf, "-series", series); code != cli.ExitError || !strings.Contains(errOut, "http://c1:8790 leads the fleet") {
		t.Errorf("history import while a replica leads: exit %d, %q", code, errOut)
	}
	if code, _, errOut := cmdline("report", "-config", conf); code != cli.ExitOK {
		t.Errorf("report while a replica leads: exit %d, %q", code, errOut)
	}
}

// leadAs makes a replica named name lead the default fleet on srv until
// the test ends.
func leadAs(t *testing.T, srv *etcdtest.Server, name string) {
	t.Helper()
	el, err := election.New(election.Config{Client: srv.Client(t), Prefix: "/fleetcast/default/", TTL: 2 * time.Second, Name: name})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		el.Run(ctx, func(ctx context.Context, _ int64) error { <-ctx.Done(); return nil })
	}()
	t.Cleanup(func() { cancel(); <-done })
	for el.Leading() == 0 {
		time.Sleep(10 * time.Millisecond)
	}
}

// hourlySeries writes a demand series of gpus GPUs an hour for the hours
// before now into dir, and returns its path.
func hourlySeries(t *testing.T, dir string, hours, gpus int) string {
	t.Helper()
	var csv strings.Builder
	csv.WriteString("time,gpus\n")
	now := time.Now().UTC().Truncate(time.Hour)
	for h := hours; h > 0; h-- {
		fmt.Fprintf(&csv, "%s,%d\n", now.Add(-time.Duration(h)*time.Hour).Format(time.RFC3339), gpus)
	}
	path := filepath.Join(dir, "series.csv")
	if err := os.WriteFile(path, []byte(csv.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}
