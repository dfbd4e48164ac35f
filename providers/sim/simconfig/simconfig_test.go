package simconfig_test

import (
	"testing"

	"github.com/fleetcast/autoscaler/config"
	"github.com/fleetcast/autoscaler/providers/sim"
	"github.com/fleetcast/autoscaler/providers/sim/simconfig"
)

// TestSettings: a sim block's settings, with their defaults (capacity =
// max, no errors, initial = min), and its errors, each at its value.
func TestSettings(t *testing.T) {
	blocks := []config.ProviderBlock{simconfig.Block}
	const head = "pool \"p\" {\n  provider = \"sim\"\n  instance_type = \"x\"\n  gpus_per_node = 8\n  price_per_hour = 1\n  min = 1\n  max = 10\n"
	for _, tt := range []struct {
		name, block string
		want        sim.Settings
		err         string // the error's FILE:LINE:COL: error: SUMMARY: DETAIL, or ""
	}{
		{"no block", "", sim.Settings{Capacity: 10, Initial: 1}, ""},
		{"empty block", "  sim {}\n", sim.Settings{Capacity: 10, Initial: 1}, ""},
		{"all set", "  sim {\n    capacity = 4\n    initial = 2\n    capacity_error_rate = 0.1\n  }\n", sim.Settings{Capacity: 4, Initial: 2, ErrorRate: 0.1}, ""},
		{"a stockout", "  sim {\n    capacity = 0\n  }\n", sim.Settings{Capacity: 0, Initial: 1}, ""},
		{"negative capacity", "  sim {\n    capacity = -1\n  }\n", sim.Settings{}, "t.hcl:9:16: error: Invalid value: capacity must be 0 or more, got -1."},
		{"rate above 1", "  sim {\n    capacity_error_rate = 2\n  }\n", sim.Settings{}, "t.hcl:9:27: error: Invalid value: capacity_error_rate must be between 0 and 1, got 2."},
		{"initial above max", "  sim {\n    initial = 11\n  }\n", sim.Settings{}, "t.hcl:9:15: error: Invalid value: initial (11) is greater than the pool's max (10)."},
		{"unknown attribute", "  sim {\n    size = 1\n  }\n", sim.Settings{}, "t.hcl:9:5: error: Unsupported argument: An argument named \"size\" is not expected here."},
	} {
		t.Run(tt.name, func(t *testing.T) {
			cfg, diags := config.Parse("t.hcl", []byte(head+tt.block+"}\n"), blocks)
			if tt.err != "" {
				if len(diags) != 1 || config.FormatDiagnostic(diags[0]) != tt.err {
					t.Fatalf("got %v, want the one error %s", diags, tt.err)
				}
				return
			}
			if diags.HasErrors() {
				t.Fatal(diags)
			}
			if got := sim.SettingsOf(cfg.Pools[0]); got.Capacity != tt.want.Capacity || got.Initial != tt.want.Initial || got.ErrorRate != tt.want.ErrorRate {
				t.Errorf("got %+v, want %+v", got, tt.want)
			}
		})
	}
}
