// Package plugin is the provider of pools driven by an out-of-process
// plugin: its protocol (proto/), served by a plugin (Serve) and called by
// the controller (Start, Client, Supervise) through hashicorp/go-plugin,
// and a plugin pool's settings, which the config decodes and checks.
package plugin

import (
	"github.com/hashicorp/hcl/v2"

	"github.com/fleetcast/autoscaler/fleet"
)

// Settings are a plugin pool's settings: the plugin it names (its
// `plugin` attribute, a `plugin "NAME"` block of the config) and its
// `target` block, whose attributes the plugin checks.
type Settings struct {
	// Plugin is the plugin's name.
	Plugin string `json:"plugin,omitempty"`
	// Target is the pool's settings for the plugin, as JSON values.
	Target map[string]any `json:"target,omitempty"`

	// Where each is in the config, for diagnostics (the plugin's
	// included: a target attribute's at TargetAt[name]).
	PluginAt hcl.Range            `json:"-"`
	TargetAt map[string]hcl.Range `json:"-"`
	BlockAt  hcl.Range            `json:"-"`
}

// Provider is fleet.ProviderPlugin.
func (Settings) Provider() string { return fleet.ProviderPlugin }

// PluginName is the plugin the pool names, and where (config.PluginUser).
func (s Settings) PluginName() (string, hcl.Range) { return s.Plugin, s.PluginAt }

// SettingsOf returns a plugin pool's settings; the zero Settings for a
// pool made without them.
func SettingsOf(pool fleet.Pool) Settings {
	s, _ := pool.Settings.(Settings)
	return s
}
