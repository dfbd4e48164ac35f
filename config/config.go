// Package config reads and validates a Fleetcast fleet config written in HCL.
//
// One file describes the pools and the policies of one controller. Every
// optional field has a default, set in one place: Defaults.
package config

import (
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
	Controller fleet.ControllerSettings
	// AgentTimeout is the controller block's agent_timeout: a node whose
	// agent has not reported for this long is silent (the planner's
	// fleet.Settings.AgentTimeout).
	AgentTimeout time.Duration
	// Demand names the demand sources beyond the agents and the pushed
	// pending demand.
	Demand fleet.DemandSettings
	// Synthetic describes the generated workload the simulated cloud starts
	// from when no state is given.
	Synthetic fleet.SyntheticSettings
	// Simulate holds the `simulate` command's model settings.
	Simulate fleet.SimulateSettings
	// Slurm is the slurm block: how the controller reads a Slurm
	// cluster's queue and nodes (its partition blocks are the pools'
	// Partitions); nil when the file has no slurm block.
	Slurm *fleet.SlurmSettings
	// Usage is how who used what is kept (the usage block).
	Usage fleet.UsageSettings
	// Tiers are the classes of service (the tier blocks), by rank; none
	// without tier blocks.
	Tiers []fleet.Tier
	// Teams are the teams' reserved shares and burst budgets (the team
	// blocks), in the config's order; none without team blocks.
	Teams []fleet.Team
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

// Defaults returns the config every optional field falls back to. It is the
// one place defaults are set (every block's but a pool's in package fleet,
// where the parts read them too);
// docs/config.md lists the same. Slurm is nil, as without a slurm block; a
// slurm block's attributes default to slurmDefaults.
func Defaults() Config {
	set := fleet.DefaultSettings()
	return Config{
		Forecast:     set.Forecast,
		Drain:        set.Drain,
		Limits:       set.Limits,
		AgentTimeout: set.AgentTimeout,
		Controller:   fleet.DefaultControllerSettings(),
		Demand:       fleet.DefaultDemandSettings(),
		Synthetic:    fleet.DefaultSyntheticSettings(),
		Simulate:     fleet.DefaultSimulateSettings(),
		Usage:        fleet.DefaultUsageSettings(),
	}
}

// slurmDefaults are the settings of a slurm block that sets none:
// fleet.DefaultSlurmSettings, which Defaults leaves out (no block, no
// Slurm).
func slurmDefaults() *fleet.SlurmSettings {
	s := fleet.DefaultSlurmSettings()
	return &s
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
func (c *Config) Pool(name string) *fleet.Pool { return fleet.PoolNamed(c.Pools, name) }

// MaxFleetGPUs is the most GPUs the pools can hold together, within
// Limits.MaxGPUs when it is set.
func (c *Config) MaxFleetGPUs() int { s := c.Settings(); return s.MaxFleetGPUs() }

// Settings are what the planner reads of the config: the pools and the
// forecast, drain and limit settings, and the agent timeout.
func (c *Config) Settings() fleet.Settings {
	return fleet.Settings{Pools: c.Pools, Forecast: c.Forecast, Drain: c.Drain, Limits: c.Limits, AgentTimeout: c.AgentTimeout, Tiers: c.Tiers, Teams: c.Teams}
}
