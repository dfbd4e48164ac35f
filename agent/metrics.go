package agent

import (
	"net/http"
	"strconv"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/fleetcast/autoscaler/agent/report"
)

// MetricsHandler serves the agent's state as Prometheus metrics, read from
// a fresh report at each scrape.
func (a *Agent) MetricsHandler() http.Handler {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collector{a})
	return promhttp.HandlerFor(reg, promhttp.HandlerOpts{})
}

var (
	descUtil     = prometheus.NewDesc("fleetcast_agent_gpu_utilization_ratio", "GPU utilisation, 0-1.", []string{"gpu", "uuid"}, nil)
	descSM       = prometheus.NewDesc("fleetcast_agent_gpu_sm_active_ratio", "Share of the GPU's SMs busy since the last reading (GPM), 0-1; only GPUs that report it.", []string{"gpu", "uuid"}, nil)
	descMem      = prometheus.NewDesc("fleetcast_agent_gpu_memory_used_bytes", "GPU memory in use.", []string{"gpu", "uuid"}, nil)
	descProcs    = prometheus.NewDesc("fleetcast_agent_gpu_processes", "Compute processes on the GPU.", []string{"gpu", "uuid"}, nil)
	descJobs     = prometheus.NewDesc("fleetcast_agent_jobs", "Jobs registered with the agent.", nil, nil)
	descUnknown  = prometheus.NewDesc("fleetcast_agent_unknown_processes", "GPU processes no job claims.", nil, nil)
	descHealthy  = prometheus.NewDesc("fleetcast_agent_gpus_healthy", "1 when the GPUs were read.", nil, nil)
	descDraining = prometheus.NewDesc("fleetcast_agent_drain_state", "1 for the drain's current state.", []string{"state"}, nil)
)

type collector struct{ a *Agent }

func (collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descUtil, descSM, descMem, descProcs, descJobs, descUnknown, descHealthy, descDraining} {
		ch <- d
	}
}

func (c collector) Collect(ch chan<- prometheus.Metric) {
	r := c.a.Report()
	for _, g := range r.GPUs {
		idx := strconv.Itoa(g.Index)
		ch <- prometheus.MustNewConstMetric(descUtil, prometheus.GaugeValue, float64(g.UtilGPU)/100, idx, g.UUID)
		if g.SMActive != nil {
			ch <- prometheus.MustNewConstMetric(descSM, prometheus.GaugeValue, float64(*g.SMActive)/100, idx, g.UUID)
		}
		ch <- prometheus.MustNewConstMetric(descMem, prometheus.GaugeValue, float64(g.MemoryUsed), idx, g.UUID)
		ch <- prometheus.MustNewConstMetric(descProcs, prometheus.GaugeValue, float64(len(g.Processes)), idx, g.UUID)
	}
	ch <- prometheus.MustNewConstMetric(descJobs, prometheus.GaugeValue, float64(len(r.Jobs)))
	ch <- prometheus.MustNewConstMetric(descUnknown, prometheus.GaugeValue, float64(len(r.Unknown)))
	healthy := 0.0
	if r.Healthy {
		healthy = 1
	}
	ch <- prometheus.MustNewConstMetric(descHealthy, prometheus.GaugeValue, healthy)
	for _, s := range []report.DrainState{report.NotDraining, report.Draining, report.SafeToTerminate, report.DrainFailed} {
		v := 0.0
		if r.Drain.State == s {
			v = 1
		}
		ch <- prometheus.MustNewConstMetric(descDraining, prometheus.GaugeValue, v, string(s))
	}
}
