package gpu

import (
	"errors"
	"strings"
	"testing"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/dgxa100"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/dgxh100"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/dgxh200"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/server"
)

// busy sets utilisation and processes on a mock machine: GPU i runs one
// process of PID 1000+i using i GiB, at 10*i percent.
func busy(s *server.Server) *server.Server {
	for i, d := range s.Devices {
		dev := d.(*server.Device)
		dev.GetUtilizationRatesFunc = func() (nvml.Utilization, nvml.Return) {
			return nvml.Utilization{Gpu: uint32(10 * i), Memory: uint32(5 * i)}, nvml.SUCCESS
		}
		dev.GetComputeRunningProcessesFunc = func() ([]nvml.ProcessInfo, nvml.Return) {
			if i == 0 {
				return nil, nvml.SUCCESS // GPU 0 is idle
			}
			return []nvml.ProcessInfo{{Pid: uint32(1000 + i), UsedGpuMemory: uint64(i) << 30}}, nvml.SUCCESS
		}
		dev.MemoryInfo.Used = uint64(i) << 30
	}
	return s
}

func TestReadMockMachines(t *testing.T) {
	for _, tt := range []struct {
		name string
		srv  *server.Server
		gpu  string
	}{
		{"DGX A100", dgxa100.New(), "A100"},
		{"DGX H100", dgxh100.New(), "H100"},
		{"DGX H200", dgxh200.New(), "H200"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			r, err := Open(busy(tt.srv))
			if err != nil {
				t.Fatal(err)
			}
			defer r.Close()
			gpus, err := r.Read()
			if err != nil {
				t.Fatal(err)
			}
			if len(gpus) != 8 {
				t.Fatalf("%d GPUs, want 8", len(gpus))
			}
			for i, g := range gpus {
				if g.Index != i || !strings.Contains(g.Name, tt.gpu) || g.UUID == "" || g.MemoryTotal == 0 ||
					g.MemoryUsed != uint64(i)<<30 || g.UtilGPU != 10*i || g.UtilMemory != 5*i || g.MIG {
					t.Fatalf("GPU %d: %+v", i, g)
				}
				if i == 0 && len(g.Processes) != 0 || i > 0 && (len(g.Processes) != 1 || g.Processes[0].PID != 1000+i || g.Processes[0].GPU != i) {
					t.Fatalf("GPU %d processes: %+v", i, g.Processes)
				}
			}
		})
	}
}

func TestReadMIG(t *testing.T) {
	srv := busy(dgxa100.New())
	dev := srv.Devices[3].(*server.Device)
	if ret, _ := dev.SetMigMode(nvml.DEVICE_MIG_ENABLE); ret != nvml.SUCCESS {
		t.Fatalf("enable MIG: %v", ret)
	}
	info, ret := dev.GetGpuInstanceProfileInfo(nvml.GPU_INSTANCE_PROFILE_1_SLICE)
	if ret != nvml.SUCCESS {
		t.Fatalf("profile: %v", ret)
	}
	for range 2 {
		if _, ret := dev.CreateGpuInstance(&info); ret != nvml.SUCCESS {
			t.Fatalf("create GPU instance: %v", ret)
		}
	}
	r, err := Open(srv)
	if err != nil {
		t.Fatal(err)
	}
	gpus, err := r.Read()
	if err != nil {
		t.Fatal(err)
	}
	if g := gpus[3]; !g.MIG || g.Instances != 2 {
		t.Fatalf("GPU 3: MIG %v with %d instances, want 2", g.MIG, g.Instances)
	}
}

func TestReadErrors(t *testing.T) {
	srv := busy(dgxa100.New())
	srv.Devices[5].(*server.Device).GetUtilizationRatesFunc = func() (nvml.Utilization, nvml.Return) {
		return nvml.Utilization{}, nvml.ERROR_GPU_IS_LOST
	}
	r, err := Open(srv)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.Read(); err == nil || err.Error() != "GPU 5: utilisation: GPU is lost (fell off the bus)" {
		t.Fatalf("err = %v", err)
	}
}

// TestOpenWithoutLibrary checks the path of a machine without
// libnvidia-ml: the real go-nvml library's Init fails, and Open says so
// without calling anything else (which would kill the process).
func TestOpenWithoutLibrary(t *testing.T) {
	r, err := Open(nvml.New())
	if err == nil {
		r.Close()
		t.Skip("this machine has libnvidia-ml: the library-missing path cannot be shown here")
	}
	if !errors.Is(err, ErrNoLibrary) {
		t.Fatalf("err = %v, want ErrNoLibrary", err)
	}
	// And an Init that fails otherwise names the error.
	srv := dgxa100.New()
	srv.InitFunc = func() nvml.Return { return nvml.ERROR_DRIVER_NOT_LOADED }
	if _, err := Open(srv); err == nil || !strings.Contains(err.Error(), "NVIDIA driver not loaded") {
		t.Fatalf("err = %v", err)
	}
}

// BenchmarkRead is one sample of 8 GPUs through the mock: the agent's own
// cost per sample, NVML's excluded.
func BenchmarkRead(b *testing.B) {
	r, err := Open(busy(dgxh100.New()))
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := r.Read(); err != nil {
			b.Fatal(err)
		}
	}
}
