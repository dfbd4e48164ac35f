// Package pluginconfig decodes a plugin pool's `plugin` attribute and
// `target` block in the fleet config into the plugin provider's settings
// (plugin.Settings), and finds in the config what a plugin's diagnostic
// names: the config knows the blocks' syntax, the provider only its
// settings.
package pluginconfig

import (
	"strings"

	"github.com/hashicorp/hcl/v2"

	"github.com/fleetcast/autoscaler/config"
	"github.com/fleetcast/autoscaler/fleet"
	"github.com/fleetcast/autoscaler/providers/plugin"
)

// Block is what a plugin pool's config holds: the `plugin` attribute
// naming its plugin, and a `target` block (optional) of its settings for
// the plugin (a config.ProviderBlock).
var Block = config.ProviderBlock{Name: fleet.ProviderPlugin, BlockType: "target", Attribute: "plugin", Optional: true, Decode: decodeBlock}

// decodeBlock decodes a plugin pool's `plugin` attribute and `target`
// block (the Block's Decode).
func decodeBlock(in config.ProviderInput, pool fleet.Pool, decode config.Decoder) (fleet.ProviderSettings, hcl.Diagnostics) {
	s := plugin.Settings{Target: map[string]any{}, TargetAt: map[string]hcl.Range{}}
	var diags hcl.Diagnostics
	if a := in.Attribute; a != nil {
		v, vd := a.Expr.Value(nil)
		diags = append(diags, vd...)
		switch {
		case vd.HasErrors():
		case !v.IsWhollyKnown() || v.IsNull() || v.Type().FriendlyName() != "string":
			diags = append(diags, config.InvalidValue(a.Expr.Range(), "plugin must be the name of a plugin block, a string."))
		case v.AsString() == "":
			diags = append(diags, config.InvalidValue(a.Expr.Range(), "plugin must not be empty."))
		default:
			s.Plugin, s.PluginAt = v.AsString(), a.Expr.Range()
		}
	}
	if in.Block != nil {
		s.BlockAt = in.Block.DefRange
		vals, ats, td := config.LiteralAttributes(in.Block.Body)
		diags = append(diags, td...)
		s.Target, s.TargetAt = vals, ats
	}
	return s, diags
}

// Where is the place in the config of what a plugin's diagnostic names
// (its Path): "config.ATTR" in the plugin's config block,
// "pool.NAME.target.ATTR" in that pool's target block (a deeper path, such
// as "config.ATTR.key" or "config.ATTR[2]", at its attribute),
// "pool.NAME.target" at that block, "pool.NAME" at the pool's plugin
// attribute; else the plugin block. The plugin's own words follow.
func Where(d plugin.Diagnostic, spec config.Plugin, pools []fleet.Pool) hcl.Range {
	attr := func(path string) string {
		if i := strings.IndexAny(path, ".["); i >= 0 {
			return path[:i]
		}
		return path
	}
	if rest, ok := strings.CutPrefix(d.Path, "config."); ok {
		if r, ok := spec.ConfigAt[attr(rest)]; ok {
			return r
		}
	}
	if rest, ok := strings.CutPrefix(d.Path, "pool."); ok {
		// The pool of the longest name the path starts with (a name
		// may hold dots).
		var (
			pool  *fleet.Pool
			after string
		)
		for i := range pools {
			a, ok := strings.CutPrefix(rest, pools[i].Name)
			if ok && (a == "" || a[0] == '.') && (pool == nil || len(pools[i].Name) > len(pool.Name)) {
				pool, after = &pools[i], a
			}
		}
		if pool != nil {
			s := plugin.SettingsOf(*pool)
			if path, ok := strings.CutPrefix(after, ".target."); ok {
				if r, ok := s.TargetAt[attr(path)]; ok {
					return r
				}
			}
			if (after == ".target" || strings.HasPrefix(after, ".target.")) && s.BlockAt.Filename != "" {
				return s.BlockAt
			}
			if s.PluginAt.Filename != "" {
				return s.PluginAt
			}
		}
	}
	return spec.DefRange
}
