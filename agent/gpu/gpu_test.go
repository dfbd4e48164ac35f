package gpu

import (
	"errors"
	"fmt"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/dgxa100"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/dgxb200"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/dgxh100"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/dgxh200"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/gpus"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/server"

	"github.com/fleetcast/autoscaler/agent/gpu/gpmtest"
	"github.com/fleetcast/autoscaler/agent/report"
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
			newFakeGPM(t, constSM(50)).install(tt.srv)
			r := openTicking(t, busy(tt.srv))
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
					g.MemoryUsed != uint64(i)<<30 || g.UtilGPU != 10*i || g.UtilMemory != 5*i || g.MIG || g.SMActive != nil {
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
	r := openTicking(t, srv)
	gpus, err := r.Read()
	if err != nil {
		t.Fatal(err)
	}
	if g := gpus[3]; !g.MIG || g.Instances != 2 {
		t.Fatalf("GPU 3: MIG %v with %d instances, want 2", g.MIG, g.Instances)
	}
}

// TestReadMIGDevices: the 80 GB A100 in a 3g.40gb x2 layout reports each
// GPU instance, its profile by NVIDIA's name, its memory and the processes
// that run in it (NVML gives each process its GPU instance), by instance
// ID; the GPU's processes are all of them.
func TestReadMIGDevices(t *testing.T) {
	srv, err := server.New(server.WithGPUs(gpus.A100_SXM4_80GB))
	if err != nil {
		t.Fatal(err)
	}
	dev := srv.Devices[0].(*server.Device)
	if err := gpmtest.PartitionMIG(dev, nvml.GPU_INSTANCE_PROFILE_3_SLICE, 2); err != nil {
		t.Fatal(err)
	}
	dev.GetComputeRunningProcessesFunc = func() ([]nvml.ProcessInfo, nvml.Return) {
		return []nvml.ProcessInfo{{Pid: 11, UsedGpuMemory: 5 << 30, GpuInstanceId: 1}, {Pid: 10, UsedGpuMemory: 7 << 30, GpuInstanceId: 0},
			{Pid: 12, UsedGpuMemory: 1 << 30, GpuInstanceId: 1}}, nvml.SUCCESS
	}
	r := openTicking(t, srv)
	read, err := r.Read()
	if err != nil {
		t.Fatal(err)
	}
	g := read[0]
	want := []report.MIGDevice{
		{ID: 0, ProfileID: 2, Profile: "3g.40gb", MemoryTotal: 40192 << 20, Processes: []report.Process{{PID: 10, UsedMemory: 7 << 30}}},
		{ID: 1, ProfileID: 2, Profile: "3g.40gb", MemoryTotal: 40192 << 20, Processes: []report.Process{{PID: 11, UsedMemory: 5 << 30}, {PID: 12, UsedMemory: 1 << 30}}},
	}
	if !g.MIG || g.Instances != 2 || !reflect.DeepEqual(g.MIGDevices, want) || len(g.Processes) != 3 {
		t.Errorf("GPU 0: MIG %v, %d instances %+v, %d processes; want 2 instances %+v and 3 processes", g.MIG, g.Instances, g.MIGDevices, len(g.Processes), want)
	}
	now := time.Now()
	rep := report.Report{Node: "n", SentAt: now, Healthy: true, GPUs: read}
	if err := rep.Validate(now, time.Minute, 1); err != nil {
		t.Errorf("the report does not validate: %v", err)
	}
}

func TestReadErrors(t *testing.T) {
	srv := busy(dgxa100.New())
	srv.Devices[5].(*server.Device).GetUtilizationRatesFunc = func() (nvml.Utilization, nvml.Return) {
		return nvml.Utilization{}, nvml.ERROR_GPU_IS_LOST
	}
	r := openTicking(t, srv)
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
	srv := dgxh100.New()
	newFakeGPM(b, constSM(50)).install(srv)
	r := openTicking(b, busy(srv))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := r.Read(); err != nil {
			b.Fatal(err)
		}
	}
}

// openTicking opens lib's NVML on a clock a minute later at each
// reading (ticking), failing the test if it cannot.
func openTicking(tb testing.TB, lib nvml.Interface) *Reader {
	tb.Helper()
	r, err := Open(lib)
	if err != nil {
		tb.Fatal(err)
	}
	r.Clock(ticking())
	return r
}

// ticking is a clock a minute later at each reading: every Read is over
// MinSMInterval after the last.
func ticking() func() time.Time {
	var mu sync.Mutex
	at := time.Date(2026, 12, 7, 10, 0, 0, 0, time.UTC)
	return func() time.Time {
		mu.Lock()
		defer mu.Unlock()
		at = at.Add(time.Minute)
		return at
	}
}

// fakeGPM plays NVML's GPM on a mock machine. Its samples know the GPU and
// their number n there (the GPU's GpmSampleGet calls before: the reading,
// while every reading samples the GPU), and the SM activity between two
// samples is sm(GPU, the later one's n).
// It counts samples allocated and freed, and fails a test that uses a
// freed sample, frees one twice, or compares two GPUs' samples.
type fakeGPM struct {
	t  testing.TB
	sm func(gpu, n int) float64
	// Each nil means no failure: support answers GpmQueryDeviceSupport;
	// failGet fails a GPU's GpmSampleGet at a reading, failCall the
	// GpmMetricsGet call, failMetric the metric's own return.
	support                       func(gpu int) (nvml.GpmSupport, nvml.Return)
	failGet, failCall, failMetric func(gpu, n int) bool
	failAlloc                     bool

	mu sync.Mutex
	// samples holds the samples allocated and not freed.
	samples       map[*mock.GpmSample]*fakeSample
	gets          map[int]int // GpmSampleGet calls by GPU
	asked         int         // GpmQueryDeviceSupport calls
	allocs, frees int
}

type fakeSample struct{ gpu, n int } // -1 until filled

func newFakeGPM(t testing.TB, sm func(gpu, n int) float64) *fakeGPM {
	return &fakeGPM{t: t, sm: sm, samples: map[*mock.GpmSample]*fakeSample{}, gets: map[int]int{}}
}

func constSM(v float64) func(int, int) float64 { return func(int, int) float64 { return v } }

// install sets srv's GPM functions and its devices'.
func (f *fakeGPM) install(srv *server.Server) {
	srv.GpmSampleAllocFunc = f.alloc
	srv.GpmMetricsGetFunc = f.metrics
	for i, d := range srv.Devices {
		dev := d.(*server.Device)
		dev.GpmQueryDeviceSupportFunc = func() (nvml.GpmSupport, nvml.Return) {
			f.mu.Lock()
			defer f.mu.Unlock()
			f.asked++
			if f.support != nil {
				return f.support(i)
			}
			return nvml.GpmSupport{Version: nvml.GPM_SUPPORT_VERSION, IsSupportedDevice: 1}, nvml.SUCCESS
		}
		dev.GpmSampleGetFunc = func(s nvml.GpmSample) nvml.Return { return f.get(i, s) }
	}
}

func (f *fakeGPM) alloc() (nvml.GpmSample, nvml.Return) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.failAlloc {
		return nil, nvml.ERROR_MEMORY
	}
	s := &mock.GpmSample{}
	s.FreeFunc = func() nvml.Return {
		f.mu.Lock()
		defer f.mu.Unlock()
		if f.samples[s] == nil {
			f.t.Errorf("a GPM sample freed twice")
			return nvml.ERROR_INVALID_ARGUMENT
		}
		delete(f.samples, s)
		f.frees++
		return nvml.SUCCESS
	}
	f.samples[s] = &fakeSample{gpu: -1, n: -1}
	f.allocs++
	return s, nvml.SUCCESS
}

// sample is s's state; f.mu is held.
func (f *fakeGPM) sample(s nvml.GpmSample) *fakeSample {
	ms, _ := s.(*mock.GpmSample)
	fs := f.samples[ms]
	if fs == nil {
		f.t.Errorf("a freed or unknown GPM sample used")
	}
	return fs
}

func (f *fakeGPM) get(gpu int, s nvml.GpmSample) nvml.Return {
	f.mu.Lock()
	defer f.mu.Unlock()
	n := f.gets[gpu]
	f.gets[gpu]++
	fs := f.sample(s)
	if fs == nil {
		return nvml.ERROR_INVALID_ARGUMENT
	}
	if f.failGet != nil && f.failGet(gpu, n) {
		return nvml.ERROR_UNKNOWN
	}
	fs.gpu, fs.n = gpu, n
	return nvml.SUCCESS
}

func (f *fakeGPM) metrics(m *nvml.GpmMetricsGetType) nvml.Return {
	f.mu.Lock()
	defer f.mu.Unlock()
	s1, s2 := f.sample(m.Sample1), f.sample(m.Sample2)
	switch {
	case s1 == nil || s2 == nil:
		return nvml.ERROR_INVALID_ARGUMENT
	case s1.gpu != s2.gpu || s1.gpu < 0 || s1.n >= s2.n:
		f.t.Errorf("GPM metrics between sample %d of GPU %d and sample %d of GPU %d", s1.n, s1.gpu, s2.n, s2.gpu)
		return nvml.ERROR_INVALID_ARGUMENT
	case m.NumMetrics != 1 || m.Metrics[0].MetricId != uint32(nvml.GPM_METRIC_SM_UTIL):
		f.t.Errorf("GPM metrics asked: %d, first %d; want GPM_METRIC_SM_UTIL only", m.NumMetrics, m.Metrics[0].MetricId)
		return nvml.ERROR_INVALID_ARGUMENT
	case f.failCall != nil && f.failCall(s2.gpu, s2.n):
		return nvml.ERROR_UNKNOWN
	case f.failMetric != nil && f.failMetric(s2.gpu, s2.n):
		m.Metrics[0].NvmlReturn = uint32(nvml.ERROR_NOT_SUPPORTED)
		return nvml.SUCCESS
	}
	m.Metrics[0].NvmlReturn, m.Metrics[0].Value = uint32(nvml.SUCCESS), f.sm(s2.gpu, s2.n)
	return nvml.SUCCESS
}

// live is the samples allocated and not freed.
func (f *fakeGPM) live() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.allocs - f.frees
}

// none marks a GPU's reading without SM activity (SMActive nil).
const none = -1

// The SM activity fakeGPM gives at each reading of a DGX's eight GPUs
// (rawSM), and what the agent reports of it (wantSM): rounded, and
// clamped to 0-100. The first reading has no interval.
var (
	rawSM = [3][8]float64{
		{},
		{0, 12.4, 12.5, 37.49, 50, 99.5, 100, 100.7},
		{100, 87.6, 3, 0.4, 64.2, -1, 25, 70},
	}
	wantSM = [3][8]int{
		{none, none, none, none, none, none, none, none},
		{0, 12, 13, 37, 50, 100, 100, 100},
		{100, 88, 3, 0, 64, 0, 25, 70},
	}
	noSM = [3][8]int{
		{none, none, none, none, none, none, none, none},
		{none, none, none, none, none, none, none, none},
		{none, none, none, none, none, none, none, none},
	}
)

// checkSM checks a reading's SM activity and the activity each GPU
// reports (report.GPU.Activity) against want.
func checkSM(t *testing.T, reading int, gpus []report.GPU, want []int) {
	t.Helper()
	if len(gpus) != len(want) {
		t.Fatalf("reading %d: %d GPUs, want %d", reading, len(gpus), len(want))
	}
	for i, g := range gpus {
		pct, src := g.Activity()
		switch {
		case want[i] == none && g.SMActive != nil:
			t.Errorf("reading %d, GPU %d: SM activity %d, want none", reading, i, *g.SMActive)
		case want[i] == none && g.MIG && (src != "" || pct != 0):
			t.Errorf("reading %d, GPU %d: MIG enabled: activity %d from %q, want none (NVML reads no utilisation)", reading, i, pct, src)
		case want[i] == none && !g.MIG && (src != report.ActivityUtil || pct != g.UtilGPU):
			t.Errorf("reading %d, GPU %d: activity %d from %q, want the utilisation %d", reading, i, pct, src, g.UtilGPU)
		case want[i] != none && g.SMActive == nil:
			t.Errorf("reading %d, GPU %d: no SM activity, want %d", reading, i, want[i])
		case want[i] != none && (*g.SMActive != want[i] || pct != want[i] || src != report.ActivitySM):
			t.Errorf("reading %d, GPU %d: SM activity %d, activity %d from %q; want %d from %q", reading, i, *g.SMActive, pct, src, want[i], report.ActivitySM)
		}
	}
}

// TestReadSMActive reads go-nvml's mock DGX machines three times, their
// GPM played by fakeGPM: SM activity on the GPUs with GPM from the second
// reading (the first has no interval), none on the others (the A100 has
// no GPM), and none for a reading whose GPM calls fail, the next one
// reading again. After each reading every GPU with GPM keeps one sample
// (live), the ones replaced freed; Close frees the rest.
func TestReadSMActive(t *testing.T) {
	h100 := func(f *fakeGPM) *server.Server { return dgxh100.New() }
	for _, tt := range []struct {
		name  string
		srv   func(f *fakeGPM) *server.Server // f is installed on it after
		want  [3][8]int
		live  int  // samples kept between readings
		asked bool // whether the GPUs are asked for GPM support
	}{
		{"DGX A100: no GPM", func(*fakeGPM) *server.Server { return dgxa100.New() }, noSM, 0, false},
		{"DGX H100", h100, wantSM, 8, true},
		{"DGX H200", func(*fakeGPM) *server.Server { return dgxh200.New() }, wantSM, 8, true},
		{"DGX B200", func(*fakeGPM) *server.Server { return dgxb200.New() }, wantSM, 8, true},
		{"GPM unsupported", func(f *fakeGPM) *server.Server {
			f.support = func(gpu int) (nvml.GpmSupport, nvml.Return) {
				if gpu%2 == 0 {
					return nvml.GpmSupport{Version: nvml.GPM_SUPPORT_VERSION}, nvml.SUCCESS
				}
				return nvml.GpmSupport{}, nvml.ERROR_NOT_SUPPORTED
			}
			return dgxh100.New()
		}, noSM, 0, true},
		{"a driver without GPM", func(*fakeGPM) *server.Server {
			srv := dgxh100.New()
			srv.LookupSymbolFunc = func(name string) error {
				if name == "nvmlGpmMetricsGet" {
					return errors.New("undefined symbol")
				}
				return nil
			}
			return srv
		}, noSM, 0, false},
		{"samples cannot be allocated", func(f *fakeGPM) *server.Server {
			f.failAlloc = true
			return dgxh100.New()
		}, noSM, 0, true},
		// GPU 2's sample fails at the second reading: the third spans
		// both intervals. GPU 6's always fails.
		{"a sample fails", func(f *fakeGPM) *server.Server {
			f.failGet = func(gpu, n int) bool { return gpu == 2 && n == 1 || gpu == 6 }
			return dgxh100.New()
		}, [3][8]int{
			{none, none, none, none, none, none, none, none},
			{0, 12, none, 37, 50, 100, none, 100},
			{100, 88, 3, 0, 64, 0, none, 70},
		}, 7, true},
		// GPU 3's GpmMetricsGet fails at the second reading, GPU 5's
		// metric at the third.
		{"the metric fails", func(f *fakeGPM) *server.Server {
			f.failCall = func(gpu, n int) bool { return gpu == 3 && n == 1 }
			f.failMetric = func(gpu, n int) bool { return gpu == 5 && n == 2 }
			return dgxh100.New()
		}, [3][8]int{
			{none, none, none, none, none, none, none, none},
			{0, 12, 13, none, 50, 100, 100, 100},
			{100, 88, 3, 0, 64, none, 25, 70},
		}, 8, true},
		{"a MIG GPU", func(*fakeGPM) *server.Server {
			srv := dgxh100.New()
			srv.Devices[4].(*server.Device).MigMode = nvml.DEVICE_MIG_ENABLE
			return srv
		}, [3][8]int{
			{none, none, none, none, none, none, none, none},
			{0, 12, 13, 37, none, 100, 100, 100},
			{100, 88, 3, 0, none, 0, 25, 70},
		}, 7, true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			f := newFakeGPM(t, func(gpu, n int) float64 { return rawSM[n][gpu] })
			srv := tt.srv(f)
			f.install(srv)
			r := openTicking(t, busy(srv))
			for n, want := range tt.want {
				gpus, err := r.Read()
				if err != nil {
					t.Fatalf("reading %d: %v", n, err)
				}
				checkSM(t, n, gpus, want[:])
				if live := f.live(); live != tt.live {
					t.Errorf("after reading %d: %d samples kept, want %d (allocated %d)", n, live, tt.live, f.allocs)
				}
			}
			if asked := f.asked > 0; asked != tt.asked {
				t.Errorf("GPM support asked %d times, want asked: %v", f.asked, tt.asked)
			} else if asked && f.asked != 8 {
				t.Errorf("GPM support asked %d times, want once per GPU", f.asked)
			}
			if err := r.Close(); err != nil {
				t.Fatal(err)
			}
			if live := f.live(); live != 0 {
				t.Errorf("after Close: %d samples not freed", live)
			}
		})
	}
}

// TestReadSMActiveChanges: a GPU that turns MIG on frees its sample and
// reads no SM activity; turned off, it reads again from its second
// reading. A GPU that leaves the machine has its sample freed.
func TestReadSMActiveChanges(t *testing.T) {
	srv := dgxh100.New()
	f := newFakeGPM(t, func(gpu, n int) float64 { return float64(10*gpu + n) })
	f.install(srv)
	r := openTicking(t, busy(srv))
	defer r.Close()
	gpu4 := srv.Devices[4].(*server.Device)
	for n, step := range []struct {
		change func()
		want   []int
		live   int
	}{
		{func() {}, []int{none, none, none, none, none, none, none, none}, 8},
		{func() {}, []int{1, 11, 21, 31, 41, 51, 61, 71}, 8},
		{func() { gpu4.MigMode = nvml.DEVICE_MIG_ENABLE }, []int{2, 12, 22, 32, none, 52, 62, 72}, 7},
		{func() { gpu4.MigMode = nvml.DEVICE_MIG_DISABLE }, []int{3, 13, 23, 33, none, 53, 63, 73}, 8},
		// GPU 4 was not sampled under MIG: this is its fourth sample.
		{func() { srv.Devices = srv.Devices[:7] }, []int{4, 14, 24, 34, 43, 54, 64}, 7},
	} {
		step.change()
		gpus, err := r.Read()
		if err != nil {
			t.Fatalf("reading %d: %v", n, err)
		}
		checkSM(t, n, gpus, step.want)
		if live := f.live(); live != step.live {
			t.Errorf("after reading %d: %d samples kept, want %d", n, live, step.live)
		}
	}
}

// TestReadSMActiveMinInterval: a Read sooner than MinSMInterval after a
// GPU's last sample (a scrape just after a report) takes no sample and
// gives the activity last read; one as late reads the interval since.
func TestReadSMActiveMinInterval(t *testing.T) {
	srv := dgxh100.New()
	f := newFakeGPM(t, func(gpu, n int) float64 { return float64(10*gpu + n) })
	f.install(srv)
	r, err := Open(busy(srv))
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	at := time.Date(2026, 12, 7, 10, 0, 0, 0, time.UTC)
	r.Clock(func() time.Time { return at })
	for n, step := range []struct {
		after time.Duration
		want  []int
	}{
		{0, []int{none, none, none, none, none, none, none, none}},
		{time.Second, []int{none, none, none, none, none, none, none, none}}, // too soon: nothing read yet
		{MinSMInterval, []int{1, 11, 21, 31, 41, 51, 61, 71}},
		{MinSMInterval - time.Millisecond, []int{1, 11, 21, 31, 41, 51, 61, 71}}, // too soon: as last read
		{time.Millisecond, []int{2, 12, 22, 32, 42, 52, 62, 72}},
	} {
		at = at.Add(step.after)
		gpus, err := r.Read()
		if err != nil {
			t.Fatal(err)
		}
		checkSM(t, n, gpus, step.want)
	}
	if f.live() != 8 {
		t.Errorf("%d samples kept, want 8", f.live())
	}
}

// TestReadConcurrent reads from several goroutines at once (run with
// -race): each GPU's samples stay its own, none is used once freed, and
// Close frees them all.
func TestReadConcurrent(t *testing.T) {
	srv := dgxh100.New()
	f := newFakeGPM(t, func(gpu, n int) float64 { return float64((gpu*13 + n*7) % 101) })
	f.install(srv)
	r := openTicking(t, busy(srv))
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for range 8 {
		wg.Go(func() {
			for range 25 {
				gpus, err := r.Read()
				if err != nil {
					errs <- err
					return
				}
				for _, g := range gpus {
					if g.SMActive != nil && (*g.SMActive < 0 || *g.SMActive > 100) {
						errs <- fmt.Errorf("GPU %d: SM activity %d", g.Index, *g.SMActive)
						return
					}
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if live := f.live(); live != 8 {
		t.Errorf("%d samples kept, want 8", live)
	}
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	if live := f.live(); live != 0 {
		t.Errorf("after Close: %d samples not freed", live)
	}
}
