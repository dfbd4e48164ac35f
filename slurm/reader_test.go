package slurm

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/fleetcast/autoscaler/internal/slurmtest"
)

// TestReadFails: every way a command can fail is an error naming the
// command and why, within the read's bounds. (A slurmctld that is down is
// TestReadLiveCluster's: these are what a real cluster does not do on
// demand: hang, print too much, print what is not JSON.)
func TestReadFails(t *testing.T) {
	dir := t.TempDir()
	script := func(name, body string) string { return slurmtest.Script(t, dir, name, body) }
	ok := script("ok", `echo '{"jobs": [], "nodes": []}'`)
	for _, tt := range []struct {
		name    string
		squeue  string
		max     int
		timeout time.Duration
		want    string
	}{
		{"not found", filepath.Join(dir, "missing"), 0, 0, "missing --json: "},
		{"exit with a message", script("exit1", `echo "squeue: error: Invalid user for SlurmUser slurm" >&2; exit 1`), 0, 0, "exit 1: squeue: error: Invalid user"},
		{"hangs", script("hang", "exec sleep 30"), 0, 300 * time.Millisecond, "no answer within 300ms"},
		{"prints too much", script("much", `head -c 100000 /dev/zero`), 1000, 0, "printed more than 1000 bytes"},
		{"not JSON", script("text", `echo "No jobs"`), 0, 0, "not JSON"},
		{"Slurm's error", script("err", `echo '{"errors": [{"description": "Invalid query"}], "jobs": []}'`), 0, 0, "Slurm says: Invalid query"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			r := &Reader{Squeue: tt.squeue, Sinfo: ok, MaxOutput: tt.max, Timeout: tt.timeout}
			start := time.Now()
			_, err := r.Read(context.Background())
			if err == nil || !strings.Contains(err.Error(), tt.want) || !strings.HasPrefix(err.Error(), tt.squeue+" --json") {
				t.Fatalf("Read: %v; want an error naming %s and saying %q", err, tt.squeue, tt.want)
			}
			if took := time.Since(start); took > 5*time.Second {
				t.Errorf("took %v", took)
			}
		})
	}
	s, err := (&Reader{Squeue: ok, Sinfo: ok, Conf: "/etc/nowhere/slurm.conf"}).Read(context.Background())
	if err != nil || len(s.Jobs) != 0 {
		t.Fatalf("%+v, %v", s, err)
	}
}
