// Package config reads and validates a Fleetcast fleet config written in HCL.
//
// One file describes the pools and the policies of one controller. Every
// optional field has a default, set in one place: Defaults.
package config

import (
	"fmt"
	"net"
	"time"

	"github.com/fleetcast/autoscaler/fleet"
	"github.com/hashicorp/hcl/v2"
)

// Config is a parsed and validated fleet config.
type Config struct {
	// Pools are the pools in the order the file gives them.
	Pools      []fleet.Pool
	Forecast   fleet.ForecastSettings
	Drain      fleet.DrainSettings
	Limits     fleet.Limits
	Controller Controller
	// Demand names the demand sources beyond the agents and the pushed
	// pending demand.
	Demand Demand
	// Synthetic describes the generated workload the simulated cloud starts
	// from when no state is given.
	Synthetic Synthetic
	// Simulate holds the `simulate` command's model settings.
	Simulate Simulate
	// Plugins are the provider plugins, by their blocks' order.
	Plugins []Plugin
	// Origin is the file the config was parsed from, and where each of
	// its blocks and attributes is; nil for one not parsed from a file.
	Origin *Origin
}

// Plugin is a `plugin "NAME"` block: a provider plugin's executable,
// which must have SHA256 before it runs, its arguments and environment,
// and its config block, which the plugin checks (Config, as JSON values,
// with where each is in ConfigAt).
type Plugin struct {
	Name, Path, SHA256 string
	Args               []string
	// Env is the plugin's whole environment, KEY=VALUE: it gets no more.
	Env      []string
	Config   map[string]any
	ConfigAt map[string]hcl.Range
	DefRange hcl.Range
}

// PluginNamed is the config's plugin of that name.
func (c *Config) PluginNamed(name string) (Plugin, bool) {
	for _, p := range c.Plugins {
		if p.Name == name {
			return p, true
		}
	}
	return Plugin{}, false
}

// Simulate is the `simulate` block: what `autoscaler simulate` assumes of
// jobs and of the cloud beyond the pools. Its flags override it.
type Simulate struct {
	// CheckpointInterval is how often jobs checkpoint unless the trace says.
	CheckpointInterval time.Duration
	// SpotInterruptionsPerHour is the rate at which the cloud reclaims each
	// spot node, per node-hour; 0 for none.
	SpotInterruptionsPerHour float64
	// SpotNotice is the warning the cloud gives before reclaiming a spot node.
	SpotNotice time.Duration
	// CheckpointDuration is how long a checkpoint asked for by a drain (or
	// a spot notice passed on as one) takes to be durable; 0 for at once.
	CheckpointDuration time.Duration
	// UnresponsiveJobs is the share of jobs (0 to 1) that ignore a drain
	// and checkpoint only on their own schedule.
	UnresponsiveJobs float64
	// Reservations is how the policies hold reservations: ReservationsConfigured
	// (every policy holds exactly the configured ones for the whole run) or
	// ReservationsAdvised (the predictive policy follows the baseline advice).
	Reservations string
	// AdviceAfter is the history the advised reservation waits for before
	// its first commitment.
	AdviceAfter time.Duration
	// HeadroomGPUs is the headroom policy's buffer: GPUs kept free as whole
	// empty nodes; 0 makes it the reactive policy.
	HeadroomGPUs int
	// HeadroomPlaceholders is the size of the headroom policy's
	// placeholders: PlaceholdersNode (as wide as a node: the buffer is
	// whole empty nodes) or PlaceholdersGPU (one GPU each: the buffer also
	// fills busy nodes' fragments).
	HeadroomPlaceholders string
}

// The values of simulate.headroom_placeholders.
const (
	PlaceholdersNode = "node"
	PlaceholdersGPU  = "gpu"
)

// PlaceholderSizes are the values simulate.headroom_placeholders takes.
var PlaceholderSizes = []string{PlaceholdersNode, PlaceholdersGPU}

// The values of simulate.reservations.
const (
	ReservationsConfigured = "configured"
	ReservationsAdvised    = "advised"
)

// ReservationModes are the values simulate.reservations takes.
var ReservationModes = []string{ReservationsConfigured, ReservationsAdvised}

// Controller is the `controller` block: the long-running loop.
type Controller struct {
	// Interval between control cycles.
	Interval time.Duration
	// Listen is the address of the HTTP API.
	Listen string
	// StateDir holds the controller's durable state.
	StateDir string
	// AgentTimeout: a node whose agent has not reported for this long is
	// silent and never treated as idle.
	AgentTimeout time.Duration
	// Fleet names the fleet: set as a tag (fleetcast/fleet) on every
	// instance the controller launches where the cloud keeps tags, so that
	// it reaps only its own fleet's orphans (instances of pools taken out
	// of the config), never another controller's (a staging fleet beside
	// prod). Lowercase letters, digits and dashes, at most 63.
	Fleet string
	// TLSCertFile and TLSKeyFile are the API's certificate (with its chain)
	// and key, PEM; both or neither. They are read again when they change,
	// so a renewed certificate needs no restart.
	TLSCertFile string
	TLSKeyFile  string
	// Insecure allows plain HTTP on an address other than loopback: agents'
	// credentials and the API token then cross the network in the clear.
	Insecure bool
	// BootstrapTokenFile holds the fleet's bootstrap secret (mode 0600, at
	// least 32 characters), which a node presents with the cloud's signed
	// identity of its instance to get its own credential; it can do nothing
	// else. Empty: nodes cannot bootstrap (an operator issues credentials).
	BootstrapTokenFile string
	// AWSIdentityCertificates is a PEM file of the certificates that sign
	// EC2 instance identity documents (AWS publishes one per region; the
	// RSA ones), the trust root of AWS nodes' bootstrap.
	AWSIdentityCertificates string
	// GCPIdentityAudience is the audience Compute Engine identity tokens
	// must be for, the controller's URL as the agents reach it: set, GCP
	// nodes bootstrap with the identity token the metadata server signs
	// for it, and need no bootstrap secret. Empty: they cannot bootstrap.
	GCPIdentityAudience string
}

// TLS reports whether the API serves HTTPS.
func (c Controller) TLS() bool { return c.TLSCertFile != "" }

// Loopback reports whether a listen address (host:port) accepts only
// connections from this machine: 127.0.0.0/8, ::1 or localhost. An empty
// host (":8790") listens on every interface.
func Loopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// CheckListen says why the API may not serve on addr as configured: plain
// HTTP on an address other than loopback, without Insecure.
func (c Controller) CheckListen(addr string) error {
	if c.TLS() || c.Insecure || Loopback(addr) {
		return nil
	}
	return fmt.Errorf("the API would serve plain HTTP on %s, which is not a loopback address: agents' credentials and the API token would cross the network in the clear. Set controller.tls_cert_file and tls_key_file, or listen on 127.0.0.1, or set controller.insecure = true to accept it", addr)
}

// Demand is the `demand` block: an optional Prometheus query for the GPUs
// in use, for fleets that already export DCGM metrics. The demand history
// (what the forecaster learns from) counts the larger of the agents' GPUs
// in use and the query's answer; the planner's view of each node, and so
// every drain, still comes from the agents alone.
type Demand struct {
	// PrometheusURL is the Prometheus server's base URL, e.g.
	// "http://prometheus:9090"; empty for no query.
	PrometheusURL string
	// PrometheusQuery is a PromQL expression giving the GPUs in use: a
	// scalar, or an instant vector whose samples are summed.
	PrometheusQuery string
	// PrometheusTimeout bounds each query.
	PrometheusTimeout time.Duration
	// Backfill, with a query, has the controller fill the steps of its
	// demand history's window (forecast.history) that it has not recorded
	// from the query's past answers (a range query) when it starts; the
	// recorded steps win. Default true; false where the query counts only
	// part of the demand (the GPUs on nodes without agents, say).
	Backfill bool
}

// Synthetic is the `synthetic` block: the documented generated workload the
// simulated cloud uses for `plan` and `run` when no real data exists. Demand
// follows a daily cycle between BaseGPUs (at PeakHour+12) and PeakGPUs (at
// PeakHour), with noise.
type Synthetic struct {
	// Seed makes the workload and fleet reproducible.
	Seed int64
	// BaseGPUs and PeakGPUs are the trough and peak of the daily cycle;
	// zero means 25% and 75% of the fleet's maximum GPUs.
	BaseGPUs int
	PeakGPUs int
	// PeakHour is the hour of day (UTC, 0-23) of the peak.
	PeakHour int
	// Noise is the relative standard deviation of demand around the cycle.
	Noise float64
}

// DefaultWaitValue is forecast.wait_value_per_gpu_hour's default: $500
// for a GPU-hour of waiting, about 70 times an on-demand H100's price per
// GPU-hour. With the 10-minute lead times and 30-minute hysteresis of the
// examples it buys on-demand GPUs to about the forecast's 95th
// percentile and spot ones to about its 98th (fleet.ForecastSettings.QuantileFor),
// the levels GPU fleets are commonly provisioned to.
const DefaultWaitValue = 500

// Defaults returns the config every optional field falls back to. It is the
// one place defaults are set; docs/config.md lists the same.
func Defaults() Config {
	return Config{
		Forecast: fleet.ForecastSettings{
			Step:    10 * time.Minute,
			Horizon: 2 * time.Hour,
			// No quantile: each pool's by expected cost, a waiting
			// GPU-hour valued at DefaultWaitValue.
			WaitValuePerGPUHour: DefaultWaitValue,
			History:             14 * 24 * time.Hour,
			Hysteresis:          30 * time.Minute,
		},
		Drain: fleet.DrainSettings{
			CheckpointMaxAge: 30 * time.Minute,
			Timeout:          20 * time.Minute,
			Signal:           "SIGUSR1",
			LongRunningAfter: time.Hour,
		},
		Limits: fleet.Limits{
			MaxScaleInPerCycle: 10,
			ScaleInShare:       0.5,
			ScaleInWindow:      10 * time.Minute,
			SilentShareHalt:    0.3,
			// Cluster Autoscaler's defaults (scale-down-delay-after-add,
			// scale-down-unneeded-time).
			ScaleInDelayAfterLaunch: 10 * time.Minute,
			ScaleInUnneededTime:     10 * time.Minute,
		},
		Controller: Controller{
			Interval:     time.Minute,
			Listen:       "127.0.0.1:8790",
			StateDir:     "./fleetcast-state",
			AgentTimeout: 3 * time.Minute,
			Fleet:        "default",
		},
		Demand: Demand{PrometheusTimeout: 10 * time.Second, Backfill: true},
		Synthetic: Synthetic{
			Seed:     1,
			PeakHour: 15,
			Noise:    0.08,
		},
		Simulate: Simulate{
			CheckpointInterval:   30 * time.Minute,
			SpotNotice:           2 * time.Minute,
			CheckpointDuration:   2 * time.Minute,
			UnresponsiveJobs:     0.02,
			Reservations:         ReservationsConfigured,
			AdviceAfter:          14 * 24 * time.Hour,
			HeadroomGPUs:         128,
			HeadroomPlaceholders: PlaceholdersNode,
		},
	}
}

// poolDefaults are the defaults of a pool's optional fields.
var poolDefaults = struct {
	Capacity fleet.CapacityType
	LeadTime time.Duration
	// ProvisionTimeoutFactor times the lead time is the provisioning deadline.
	ProvisionTimeoutFactor int
}{
	Capacity:               fleet.OnDemand,
	LeadTime:               10 * time.Minute,
	ProvisionTimeoutFactor: 3,
}

// Pool returns the pool with the given name, or nil.
func (c *Config) Pool(name string) *fleet.Pool {
	for i := range c.Pools {
		if c.Pools[i].Name == name {
			return &c.Pools[i]
		}
	}
	return nil
}

// MaxFleetGPUs is the most GPUs the pools can hold together, within
// Limits.MaxGPUs when it is set.
func (c *Config) MaxFleetGPUs() int { s := c.Settings(); return s.MaxFleetGPUs() }

// Settings are what the planner reads of the config: the pools and the
// forecast, drain and limit settings, and the agent timeout.
func (c *Config) Settings() fleet.Settings {
	return fleet.Settings{Pools: c.Pools, Forecast: c.Forecast, Drain: c.Drain, Limits: c.Limits, AgentTimeout: c.Controller.AgentTimeout}
}
