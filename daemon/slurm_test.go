package daemon

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/fleetcast/autoscaler/fleet"
	"github.com/fleetcast/autoscaler/internal/slurmtest"
	"github.com/fleetcast/autoscaler/loop"
)

// TestStartReadsSlurm: with a slurm block, Start reads the queue before
// the first cycle (its plan shows it), and Run reads it again in the
// background every interval while cycles run, and stops reading when Run
// returns.
func TestStartReadsSlurm(t *testing.T) {
	cfg, dir := localConfig(t), t.TempDir()
	count := filepath.Join(dir, "reads")
	script := func(name, body string) string { return slurmtest.Script(t, dir, name, body) }
	set := fleet.DefaultSlurmSettings()
	set.Interval = 20 * time.Millisecond
	set.Squeue = script("squeue", "echo x >> "+count+"; cat "+slurmtest.Capture(t, "squeue-22.05-limits.json"))
	set.Sinfo = script("sinfo", "cat "+slurmtest.Capture(t, "sinfo-22.05.json"))
	cfg.Slurm = &set
	d, err := Start(context.Background(), Options{Config: cfg, Speed: 6e3, SimStart: monday, Listen: "127.0.0.1:0", StateDir: filepath.Join(dir, "state")})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	if n := reads(t, count); n != 1 {
		t.Fatalf("%d reads at start; want 1", n)
	}
	var first *fleet.Queue
	if err := d.Run(context.Background(), 30*time.Minute, func(_ time.Time, r loop.CycleResult) {
		if first == nil {
			first = r.Plan.Queue
		}
	}); err != nil {
		t.Fatal(err)
	}
	if first == nil || first.Degraded != "" || first.ReadAt.IsZero() || first.RunningJobs != 1 {
		t.Fatalf("the first cycle's queue: %+v", first)
	}
	// 30 cycles at 10 ms each: about 300 ms, some 15 reads.
	after := reads(t, count)
	if after < 4 {
		t.Errorf("%d reads over 30 cycles at a 20 ms interval; want several", after)
	}
	time.Sleep(100 * time.Millisecond)
	if n := reads(t, count); n != after {
		t.Errorf("%d reads after Run returned, %d when it did", n, after)
	}
}

// reads is how many times the squeue stand-in ran.
func reads(t *testing.T, path string) int {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	return len(b) / 2
}

// TestStartSlurmReadBounded: a cluster that does not answer delays the
// start by firstRead, not by the commands' own timeout; the controller
// starts degraded, and Run reads again at once.
func TestStartSlurmReadBounded(t *testing.T) {
	cfg, dir := localConfig(t), t.TempDir()
	set := fleet.DefaultSlurmSettings()
	set.Timeout = 50 * time.Second
	set.Squeue = slurmtest.Script(t, dir, "squeue", "exec sleep 60")
	set.Sinfo = slurmtest.Script(t, dir, "sinfo", "cat "+slurmtest.Capture(t, "sinfo-22.05.json"))
	cfg.Slurm = &set
	start := time.Now()
	d, err := Start(context.Background(), Options{Config: cfg, Speed: 6e3, SimStart: monday, Listen: "127.0.0.1:0", StateDir: filepath.Join(dir, "state")})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	if took := time.Since(start); took > firstRead+5*time.Second {
		t.Errorf("Start took %v with squeue hung; it bounds its read to %v", took, firstRead)
	}
	if q := d.one.slurm.Queue(d.clock()); q.Degraded == "" || !q.ReadAt.IsZero() {
		t.Errorf("the queue after a read cut short: %+v", q)
	}
	// Slurm answers now: Run reads at once, not an interval (30 s) on.
	slurmtest.Script(t, dir, "squeue", "cat "+slurmtest.Capture(t, "squeue-22.05.json"))
	if err := d.Run(context.Background(), 30*time.Minute, nil); err != nil {
		t.Fatal(err)
	}
	if q := d.one.slurm.Queue(d.clock()); q.Degraded != "" || q.ReadAt.IsZero() {
		t.Errorf("the queue after Run: %+v", q)
	}
}
