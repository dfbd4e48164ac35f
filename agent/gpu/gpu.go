// Package gpu reads GPU occupancy through NVML (github.com/NVIDIA/go-nvml):
// per GPU its index, UUID, name, memory, utilisation, compute processes
// and MIG mode. It is the only package of the agent that touches NVML (and
// so needs cgo).
//
// NVML must be initialised before any other call, and calling anything
// after a failed Init kills the process; so Open calls Init first and
// returns an error (ErrNoLibrary where libnvidia-ml is absent) without
// touching NVML again.
package gpu

import (
	"errors"
	"fmt"

	"github.com/NVIDIA/go-nvml/pkg/nvml"

	"github.com/fleetcast/autoscaler/agent/report"
)

// ErrNoLibrary means NVML's library (libnvidia-ml.so) is not installed.
var ErrNoLibrary = errors.New("NVML library (libnvidia-ml.so) not found: install the NVIDIA driver, or run the agent without GPU data (-no-gpu)")

// Reader reads the GPUs of a machine. Create it with Open, release it with
// Close. It keeps no state of its own: NVML's calls are safe to make
// concurrently.
type Reader struct {
	lib nvml.Interface
}

// Open initialises NVML through lib: nvml.New() on a real machine, a
// go-nvml mock in tests. If Init fails, nothing else is called.
func Open(lib nvml.Interface) (*Reader, error) {
	switch ret := lib.Init(); ret {
	case nvml.SUCCESS:
		return &Reader{lib: lib}, nil
	case nvml.ERROR_LIBRARY_NOT_FOUND:
		return nil, ErrNoLibrary
	default:
		return nil, fmt.Errorf("NVML init: %s", errorString(ret))
	}
}

// OpenSystem opens the machine's own NVML library (libnvidia-ml.so).
func OpenSystem() (*Reader, error) { return Open(nvml.New()) }

// Close shuts NVML down.
func (r *Reader) Close() error {
	if ret := r.lib.Shutdown(); ret != nvml.SUCCESS {
		return fmt.Errorf("NVML shutdown: %s", errorString(ret))
	}
	return nil
}

// Read returns every GPU's occupancy. An error names the GPU and the call
// that failed: the caller reports the node unhealthy rather than idle.
func (r *Reader) Read() ([]report.GPU, error) {
	n, ret := r.lib.DeviceGetCount()
	if ret != nvml.SUCCESS {
		return nil, fmt.Errorf("NVML device count: %s", errorString(ret))
	}
	out := make([]report.GPU, 0, n)
	for i := range n {
		g, err := r.read(i)
		if err != nil {
			return nil, fmt.Errorf("GPU %d: %w", i, err)
		}
		out = append(out, g)
	}
	return out, nil
}

func (r *Reader) read(i int) (report.GPU, error) {
	g := report.GPU{Index: i}
	dev, ret := r.lib.DeviceGetHandleByIndex(i)
	if ret != nvml.SUCCESS {
		return g, fmt.Errorf("handle: %s", errorString(ret))
	}
	if g.UUID, ret = dev.GetUUID(); ret != nvml.SUCCESS {
		return g, fmt.Errorf("UUID: %s", errorString(ret))
	}
	if g.Name, ret = dev.GetName(); ret != nvml.SUCCESS {
		return g, fmt.Errorf("name: %s", errorString(ret))
	}
	mem, ret := dev.GetMemoryInfo()
	if ret != nvml.SUCCESS {
		return g, fmt.Errorf("memory: %s", errorString(ret))
	}
	g.MemoryTotal, g.MemoryUsed = mem.Total, min(mem.Used, mem.Total)
	// NVML does not give utilisation for MIG-enabled GPUs: left at 0,
	// the processes still tell that the GPU is in use.
	util, ret := dev.GetUtilizationRates()
	switch ret {
	case nvml.SUCCESS:
		g.UtilGPU, g.UtilMemory = int(min(util.Gpu, 100)), int(min(util.Memory, 100))
	case nvml.ERROR_NOT_SUPPORTED:
	default:
		return g, fmt.Errorf("utilisation: %s", errorString(ret))
	}
	procs, ret := dev.GetComputeRunningProcesses()
	if ret != nvml.SUCCESS {
		return g, fmt.Errorf("compute processes: %s", errorString(ret))
	}
	for _, p := range procs {
		g.Processes = append(g.Processes, report.Process{PID: int(p.Pid), GPU: i, UsedMemory: p.UsedGpuMemory})
	}
	mode, _, ret := dev.GetMigMode()
	switch {
	case ret == nvml.ERROR_NOT_SUPPORTED: // no MIG on this GPU
	case ret != nvml.SUCCESS:
		return g, fmt.Errorf("MIG mode: %s", errorString(ret))
	case mode == nvml.DEVICE_MIG_ENABLE:
		g.MIG = true
		g.Instances = r.migInstances(dev)
	}
	return g, nil
}

// migInstances counts a MIG-enabled GPU's GPU instances, over every
// profile the GPU supports.
func (r *Reader) migInstances(dev nvml.Device) int {
	n := 0
	for profile := range nvml.GPU_INSTANCE_PROFILE_COUNT {
		info, ret := dev.GetGpuInstanceProfileInfo(profile)
		if ret != nvml.SUCCESS {
			continue // a profile this GPU lacks
		}
		gis, ret := dev.GetGpuInstances(&info)
		if ret == nvml.SUCCESS {
			n += len(gis)
		}
	}
	return n
}

// errorString names an NVML return code without calling NVML (whose
// ErrorString needs an initialised library).
func errorString(ret nvml.Return) string {
	switch ret {
	case nvml.ERROR_UNINITIALIZED:
		return "NVML not initialised"
	case nvml.ERROR_INVALID_ARGUMENT:
		return "invalid argument"
	case nvml.ERROR_NOT_SUPPORTED:
		return "not supported"
	case nvml.ERROR_NO_PERMISSION:
		return "no permission"
	case nvml.ERROR_DRIVER_NOT_LOADED:
		return "NVIDIA driver not loaded"
	case nvml.ERROR_GPU_IS_LOST:
		return "GPU is lost (fell off the bus)"
	case nvml.ERROR_LIBRARY_NOT_FOUND:
		return "NVML library not found"
	case nvml.ERROR_TIMEOUT:
		return "timeout"
	}
	return fmt.Sprintf("NVML error %d", int(ret))
}
