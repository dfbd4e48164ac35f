// Package plugin is the provider of pools driven by an out-of-process
// plugin. So far it holds a pool's settings, which the config decodes and
// checks; this build does not drive plugin pools yet, and `validate`,
// `plan` and `run` say so.
package plugin

import (
	"github.com/hashicorp/hcl/v2"

	"github.com/fleetcast/autoscaler/config"
	"github.com/fleetcast/autoscaler/fleet"
)

// Settings are a plugin pool's settings: the attributes of its `plugin`
// block.
type Settings struct {
	// Command is the plugin's executable.
	Command string `hcl:"command" json:"command,omitempty"`
	// Args are its arguments.
	Args []string `hcl:"args,optional" json:"args,omitempty"`
	// Target is the pool's settings for the plugin, which the plugin
	// checks.
	Target map[string]string `hcl:"target,optional" json:"target,omitempty"`

	// Where the command's value is in the config, for diagnostics.
	CommandAt hcl.Range `hcl:"command,attr_value_range" json:"-"`
}

// Provider is fleet.ProviderPlugin.
func (Settings) Provider() string { return fleet.ProviderPlugin }

// SettingsOf returns a plugin pool's settings; the zero Settings for a
// pool made without them.
func SettingsOf(pool fleet.Pool) Settings {
	s, _ := pool.Settings.(Settings)
	return s
}

// DecodeBlock decodes a pool's `plugin` block with decode and checks it (a
// config.ProviderBlock's Decode).
func DecodeBlock(block *hcl.Block, pool fleet.Pool, decode config.Decoder) (fleet.ProviderSettings, hcl.Diagnostics) {
	var s Settings
	decode(block.Body, &s)
	return s, s.Validate(pool)
}

// Validate checks that the command is not empty. The diagnostic points at
// its value.
func (s *Settings) Validate(fleet.Pool) hcl.Diagnostics {
	if s.CommandAt.Filename != "" && s.Command == "" {
		return hcl.Diagnostics{config.InvalidValue(s.CommandAt, "command must not be empty.")}
	}
	return nil
}
