// Package gpu reads GPU occupancy through NVML (github.com/NVIDIA/go-nvml):
// per GPU its index, UUID, name, memory, utilisation, SM activity (through
// GPM, where the GPU has it), compute processes and MIG mode. It is the
// only package of the agent that touches NVML (and so needs cgo).
//
// NVML must be initialised before any other call, and calling anything
// after a failed Init kills the process; so Open calls Init first and
// returns an error (ErrNoLibrary where libnvidia-ml is absent) without
// touching NVML again.
package gpu

import (
	"fmt"
	"math"
	"slices"
	"sync"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"

	"github.com/fleetcast/autoscaler/agent/report"
	"github.com/fleetcast/autoscaler/mig"
)

// ErrNoLibrary means NVML's library (libnvidia-ml.so) is not installed. Its
// NoLibrary method says so to callers that do not import this package (the
// agent's command line, internal/agentcmd, which imports no NVML).
var ErrNoLibrary error = noLibrary{}

// noLibrary is ErrNoLibrary's type.
type noLibrary struct{}

func (noLibrary) Error() string {
	return "NVML library (libnvidia-ml.so) not found: install the NVIDIA driver, or run the agent without GPU data (-no-gpu)"
}

// NoLibrary reports that NVML's library is missing.
func (noLibrary) NoLibrary() bool { return true }

// Reader reads the GPUs of a machine. Create it with Open, release it with
// Close. It is safe for concurrent use: NVML's calls are, and the state it
// keeps between readings (each GPM-capable GPU's last GPM sample, for its
// SM activity) is under a mutex.
type Reader struct {
	lib nvml.Interface
	// gpm is set when the library has the functions SM activity needs
	// (GPM came with the R520 drivers): calling one it lacks would crash
	// the process.
	gpm bool

	mu sync.Mutex
	// now is the clock SM activity's intervals are timed by (Clock).
	now func() time.Time
	// sm holds each GPU's GPM state, by UUID; get is GpmMetricsGet's
	// argument (19 KB), reused.
	sm  map[string]*smState
	get nvml.GpmMetricsGetType
}

// smState is a GPU's GPM state: whether it can report SM activity, asked
// once, its last GPM sample (nil before the first) and when it was taken,
// and the SM activity last read (nil: none).
type smState struct {
	capable bool
	prev    nvml.GpmSample
	prevAt  time.Time
	last    *int
}

// MinSMInterval is the shortest interval SM activity is read over: a Read
// sooner than that after a GPU's last sample (a metrics scrape just after
// a report, say) gives the activity last read, so no reading covers a
// few milliseconds, in which a working job's GPUs may well be still.
const MinSMInterval = 5 * time.Second

// drop frees the GPU's last sample.
func (s *smState) drop() {
	if s.prev != nil {
		s.prev.Free()
		s.prev = nil
	}
	s.last = nil
}

// Open initialises NVML through lib: nvml.New() on a real machine, a
// go-nvml mock in tests. If Init fails, nothing else is called. Where the
// library lacks GPM's functions (a driver before R520), no GPU reports SM
// activity.
func Open(lib nvml.Interface) (*Reader, error) {
	switch ret := lib.Init(); ret {
	case nvml.SUCCESS:
		r := &Reader{lib: lib, gpm: true, sm: map[string]*smState{}, now: time.Now}
		// The library's functions that reading SM activity calls.
		for _, name := range []string{"nvmlDeviceGetArchitecture", "nvmlGpmQueryDeviceSupport", "nvmlGpmSampleAlloc",
			"nvmlGpmSampleGet", "nvmlGpmSampleFree", "nvmlGpmMetricsGet"} {
			if lib.Extensions().LookupSymbol(name) != nil {
				r.gpm = false // a driver older than GPM: utilisation only
			}
		}
		return r, nil
	case nvml.ERROR_LIBRARY_NOT_FOUND:
		return nil, ErrNoLibrary
	default:
		return nil, fmt.Errorf("NVML init: %s", errorString(ret))
	}
}

// Clock sets the clock that times SM activity's intervals (MinSMInterval):
// time.Now unless a test sets another.
func (r *Reader) Clock(now func() time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.now = now
}

// OpenSystem opens the machine's own NVML library (libnvidia-ml.so).
func OpenSystem() (*Reader, error) { return Open(nvml.New()) }

// Close frees the GPM samples kept and shuts NVML down.
func (r *Reader) Close() error {
	r.mu.Lock()
	for uuid, st := range r.sm {
		st.drop()
		delete(r.sm, uuid)
	}
	r.mu.Unlock()
	if ret := r.lib.Shutdown(); ret != nvml.SUCCESS {
		return fmt.Errorf("NVML shutdown: %s", errorString(ret))
	}
	return nil
}

// Read returns every GPU's occupancy. An error names the GPU and the call
// that failed: the caller reports the node unhealthy rather than idle.
//
// A GPU's SMActive is its SM activity since the previous Read (of any
// caller) that sampled it, through NVML's GPM: Hopper and later, MIG
// disabled; a Read within MinSMInterval of that sample gives the activity
// it read. It is nil on the first Read of each GPU (no interval yet),
// on GPUs without GPM (SMActive is then never set, and the caller uses
// the utilisation), while MIG is enabled, and on a Read whose GPM calls
// fail; such a failure fails nothing else.
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
	r.forget(out)
	return out, nil
}

// forget frees the GPM state of GPUs no longer read (gone from the
// machine).
func (r *Reader) forget(read []report.GPU) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for uuid, st := range r.sm {
		if !slices.ContainsFunc(read, func(g report.GPU) bool { return g.UUID == uuid }) {
			st.drop()
			delete(r.sm, uuid)
		}
	}
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
		g.MIGDevices = migDevices(dev, g.Name, i, procs)
		g.Instances = len(g.MIGDevices)
	}
	g.SMActive = r.smActive(dev, g.UUID, g.MIG)
	return g, nil
}

// smActive samples dev's GPM and returns the percentage of its SMs busy
// between its previous sample and this one (GPM_METRIC_SM_UTIL), or nil:
// see Read. A failed sample is freed at once and the previous one kept,
// so the next reading spans both intervals; a failed metric still keeps
// the new sample. A GPU keeps one sample at most between readings.
func (r *Reader) smActive(dev nvml.Device, uuid string, mig bool) *int {
	r.mu.Lock()
	defer r.mu.Unlock()
	st := r.sm[uuid]
	if st == nil {
		st = &smState{capable: r.gpm && gpmCapable(dev)}
		r.sm[uuid] = st
	}
	if !st.capable {
		return nil
	}
	if mig {
		// GPM on a MIG GPU samples each GPU instance (GpmMigSampleGet):
		// not read, and the sample from before MIG is stale.
		st.drop()
		return nil
	}
	now := r.now()
	if st.prev != nil && now.Sub(st.prevAt) < MinSMInterval {
		return clonePct(st.last)
	}
	st.last = nil
	cur, ret := r.lib.GpmSampleAlloc()
	if ret != nvml.SUCCESS {
		return nil
	}
	if ret := dev.GpmSampleGet(cur); ret != nvml.SUCCESS {
		cur.Free()
		return nil
	}
	prev := st.prev
	st.prev, st.prevAt = cur, now
	if prev == nil {
		return nil
	}
	defer prev.Free()
	get := &r.get
	get.NumMetrics, get.Sample1, get.Sample2 = 1, prev, cur
	get.Metrics[0] = nvml.GpmMetric{MetricId: uint32(nvml.GPM_METRIC_SM_UTIL)}
	ret = r.lib.GpmMetricsGet(get)
	m := get.Metrics[0]
	get.Sample1, get.Sample2 = nil, nil
	if ret != nvml.SUCCESS {
		return nil
	}
	if nvml.Return(m.NvmlReturn) != nvml.SUCCESS || math.IsNaN(m.Value) {
		return nil
	}
	pct := int(math.Round(min(max(m.Value, 0), 100)))
	st.last = &pct
	return clonePct(st.last)
}

// clonePct is a copy of p, so no report shares the Reader's.
func clonePct(p *int) *int {
	if p == nil {
		return nil
	}
	v := *p
	return &v
}

// gpmCapable asks whether dev has GPM. NVML has it on Hopper and later:
// older GPUs are not asked.
func gpmCapable(dev nvml.Device) bool {
	arch, ret := dev.GetArchitecture()
	if ret != nvml.SUCCESS || arch < nvml.DEVICE_ARCH_HOPPER {
		return false
	}
	support, ret := dev.GpmQueryDeviceSupport()
	return ret == nvml.SUCCESS && support.IsSupportedDevice != 0
}

// migDevices are a MIG-enabled GPU's GPU instances, over every profile
// the GPU supports, by instance ID: each its profile (named from the GPU's
// name, package mig), memory, and the processes of procs (the GPU's, GPU
// index gpu) that run in it (NVML gives each process its GPU instance).
func migDevices(dev nvml.Device, name string, gpu int, procs []nvml.ProcessInfo) []report.MIGDevice {
	var out []report.MIGDevice
	for profile := range nvml.GPU_INSTANCE_PROFILE_COUNT {
		info, ret := dev.GetGpuInstanceProfileInfo(profile)
		if ret != nvml.SUCCESS {
			continue // a profile this GPU lacks
		}
		gis, ret := dev.GetGpuInstances(&info)
		if ret != nvml.SUCCESS {
			continue
		}
		for _, gi := range gis {
			gii, ret := gi.GetInfo()
			if ret != nvml.SUCCESS {
				continue
			}
			d := report.MIGDevice{ID: int(gii.Id), ProfileID: profile, Profile: mig.ProfileName(name, profile), MemoryTotal: info.MemorySizeMB << 20}
			for _, p := range procs {
				if p.GpuInstanceId == gii.Id {
					d.Processes = append(d.Processes, report.Process{PID: int(p.Pid), GPU: gpu, UsedMemory: p.UsedGpuMemory})
				}
			}
			out = append(out, d)
		}
	}
	slices.SortFunc(out, func(a, b report.MIGDevice) int { return a.ID - b.ID })
	return out
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
