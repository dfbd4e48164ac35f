// Package gpmtest plays NVML's GPU performance monitoring (GPM) on
// go-nvml's mock machines, for tests of what reads SM activity: the
// agent's GPU reader and the controller's allocated-idle; and partitions
// their GPUs by MIG (PartitionMIG), for tests of what reads instances.
package gpmtest

import (
	"fmt"
	"sync"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/server"
)

// Install gives srv's GPUs GPM: each supports it, and GPU i's SM activity
// between two samples is sm(i), in percent, as the second is read. sm is
// called with no lock of Install's held.
func Install(srv *server.Server, sm func(gpu int) float64) {
	var mu sync.Mutex
	taken := map[nvml.GpmSample]int{} // the GPU each live sample was taken on
	srv.GpmSampleAllocFunc = func() (nvml.GpmSample, nvml.Return) {
		s := &mock.GpmSample{}
		s.FreeFunc = func() nvml.Return {
			mu.Lock()
			defer mu.Unlock()
			delete(taken, s)
			return nvml.SUCCESS
		}
		return s, nvml.SUCCESS
	}
	srv.GpmMetricsGetFunc = func(m *nvml.GpmMetricsGetType) nvml.Return {
		mu.Lock()
		g, ok := taken[m.Sample2]
		mu.Unlock()
		if !ok {
			return nvml.ERROR_INVALID_ARGUMENT
		}
		m.Metrics[0].NvmlReturn, m.Metrics[0].Value = uint32(nvml.SUCCESS), sm(g)
		return nvml.SUCCESS
	}
	for i, d := range srv.Devices {
		dev := d.(*server.Device)
		dev.GpmQueryDeviceSupportFunc = func() (nvml.GpmSupport, nvml.Return) {
			return nvml.GpmSupport{Version: nvml.GPM_SUPPORT_VERSION, IsSupportedDevice: 1}, nvml.SUCCESS
		}
		dev.GpmSampleGetFunc = func(s nvml.GpmSample) nvml.Return {
			mu.Lock()
			defer mu.Unlock()
			taken[s] = i
			return nvml.SUCCESS
		}
	}
}

// PartitionMIG turns MIG on for dev and makes n GPU instances of NVML
// profile on it, as `nvidia-smi mig -cgi` does; its utilisation rates then
// read as NVML reads them under MIG: not supported.
func PartitionMIG(dev *server.Device, profile, n int) error {
	if ret, _ := dev.SetMigMode(nvml.DEVICE_MIG_ENABLE); ret != nvml.SUCCESS {
		return fmt.Errorf("enable MIG: %v", ret)
	}
	info, ret := dev.GetGpuInstanceProfileInfo(profile)
	if ret != nvml.SUCCESS {
		return fmt.Errorf("profile %d: %v", profile, ret)
	}
	for range n {
		if _, ret := dev.CreateGpuInstance(&info); ret != nvml.SUCCESS {
			return fmt.Errorf("create GPU instance: %v", ret)
		}
	}
	dev.GetUtilizationRatesFunc = func() (nvml.Utilization, nvml.Return) {
		return nvml.Utilization{}, nvml.ERROR_NOT_SUPPORTED
	}
	return nil
}
