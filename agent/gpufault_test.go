package agent

import (
	"os"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/dgxa100"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/server"

	"github.com/fleetcast/autoscaler/agent/gpu"
	"github.com/fleetcast/autoscaler/agent/report"
)

// TestNoSafeDrainWhileGPUsUnread: after one good NVML reading (go-nvml's
// DGX A100 mock, no process but the job's), the GPUs fall off the bus
// for six hours; a drain arrives and the job checkpoints. Nobody can see
// what runs on the GPUs now, so the agent reports them unhealthy and the
// drain never safe (before, it reported healthy=false and drain=safe
// together, from the last good reading's count of unknown processes);
// once they read again, with no process nobody claims, it is safe.
func TestNoSafeDrainWhileGPUsUnread(t *testing.T) {
	srv := dgxa100.New()
	var lost atomic.Bool
	for _, d := range srv.Devices {
		dev := d.(*server.Device)
		dev.GetUtilizationRatesFunc = func() (nvml.Utilization, nvml.Return) {
			if lost.Load() {
				return nvml.Utilization{}, nvml.ERROR_GPU_IS_LOST
			}
			return nvml.Utilization{}, nvml.SUCCESS
		}
		dev.GetComputeRunningProcessesFunc = func() ([]nvml.ProcessInfo, nvml.Return) {
			if lost.Load() {
				return nil, nvml.ERROR_GPU_IS_LOST
			}
			return nil, nvml.SUCCESS
		}
	}
	r, err := gpu.Open(srv)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	t0 := time.Date(2026, 12, 6, 6, 0, 0, 0, time.UTC)
	c := &clock{t0}
	a, err := New(Config{Node: "i-1", Now: c.now, Signal: func(int, syscall.Signal) error { return nil }, GPUs: r})
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Register("train", []int{0}, []int{os.Getpid()}); err != nil {
		t.Fatal(err)
	}
	if rep := a.Report(); !rep.Healthy || len(rep.Unknown) != 0 {
		t.Fatalf("the first reading: healthy %v, unknown %v", rep.Healthy, rep.Unknown)
	}
	lost.Store(true)
	for _, after := range []time.Duration{time.Minute, 6 * time.Hour} {
		c.t = t0.Add(after)
		if rep := a.Report(); rep.Healthy {
			t.Fatalf("%s after the GPUs were lost: reported healthy", after)
		}
	}
	_ = a.Drain(&report.DrainRequest{ID: "d", Since: c.t, Deadline: c.t.Add(20 * time.Minute), Signal: "SIGUSR1"})
	c.t = c.t.Add(time.Second)
	if err := a.Checkpoint("train"); err != nil {
		t.Fatal(err)
	}
	for range 3 {
		c.t = c.t.Add(time.Minute)
		a.Tick()
		if rep := a.Report(); rep.Healthy || rep.Drain.State == report.SafeToTerminate {
			t.Fatalf("healthy %v, drain %q: the drain reported safe while the GPUs cannot be read (%s)", rep.Healthy, rep.Drain.State, rep.GPUError)
		}
	}
	lost.Store(false)
	if rep := a.Report(); !rep.Healthy || rep.Drain.State != report.SafeToTerminate {
		t.Errorf("the GPUs read again, nothing unclaimed on them: healthy %v, drain %q; want safe", rep.Healthy, rep.Drain.State)
	}
}
