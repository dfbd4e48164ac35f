package pluginconfig

import (
	"testing"

	"github.com/hashicorp/hcl/v2"

	"github.com/fleetcast/autoscaler/config"
	"github.com/fleetcast/autoscaler/fleet"
	"github.com/fleetcast/autoscaler/providers/plugin"
)

// TestWhere: a plugin's diagnostic is placed at what its path names, as
// near as the config has it.
func TestWhere(t *testing.T) {
	at := func(line int) hcl.Range {
		return hcl.Range{Filename: "fleet.hcl", Start: hcl.Pos{Line: line, Column: 1}}
	}
	spec := config.Plugin{Name: "racks", DefRange: at(1), ConfigAt: map[string]hcl.Range{"endpoint": at(2), "list_command": at(3)}}
	pools := []fleet.Pool{
		{Name: "a", Settings: plugin.Settings{Plugin: "racks", PluginAt: at(10), BlockAt: at(11), TargetAt: map[string]hcl.Range{"rack": at(12)}}},
		{Name: "a-2", Settings: plugin.Settings{Plugin: "racks", PluginAt: at(20)}},
		{Name: "a.b", Settings: plugin.Settings{Plugin: "racks", PluginAt: at(30), BlockAt: at(31), TargetAt: map[string]hcl.Range{"x": at(32)}}},
	}
	for _, tt := range []struct {
		path string
		line int
	}{
		{"config.endpoint", 2},
		{"config.list_command[0]", 3},
		{"config.endpoint.host", 2},
		{"config.missing", 1},
		{"config", 1},
		{"", 1},
		{"pool.a.target.rack", 12},
		{"pool.a.target.rack.name", 12},
		{"pool.a.target.row", 11},
		{"pool.a.target", 11},
		{"pool.a", 10},
		{"pool.a-2", 20},
		{"pool.a-2.target.rack", 20}, // no target block: its plugin attribute
		{"pool.a-", 1},
		{"pool.b.target.rack", 1},
		{"pools.a", 1},
		{"pool.a.b.target.x", 32}, // the longest name, not pool a
		{"pool.a.b", 30},
		{"pool.a.targets", 10},
	} {
		if got := Where(plugin.Diagnostic{Path: tt.path}, spec, pools); got.Start.Line != tt.line {
			t.Errorf("Where(%q) at line %d; want %d", tt.path, got.Start.Line, tt.line)
		}
	}
}
