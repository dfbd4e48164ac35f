package config_test

import (
	"slices"
	"testing"

	"github.com/fleetcast/autoscaler/config"
	"github.com/fleetcast/autoscaler/fleet"
	"github.com/fleetcast/autoscaler/providers/registry"
)

// tier is a tier block with the given body.
func tier(name, body string) string { return "tier \"" + name + "\" {\n" + body + "}\n" }

// TestParseTiers: tier blocks come out by rank, with their wait values,
// capacity types and default, in the settings the planner reads.
func TestParseTiers(t *testing.T) {
	src := simPool("a", "") +
		tier("best_effort", "  rank = 3\n  wait_value_per_gpu_hour = 0\n  capacity_types = [\"reserved\", \"spot\"]\n") +
		tier("critical", "  rank = 1\n  wait_value_per_gpu_hour = 500\n") +
		tier("standard", "  rank = 2\n  wait_value_per_gpu_hour = 50\n  default = true\n")
	cfg, diags := config.Parse("test.hcl", []byte(src), registry.Blocks())
	if diags.HasErrors() {
		t.Fatal(formatAll(diags))
	}
	want := []fleet.Tier{
		{Name: "critical", Rank: 1, WaitValuePerGPUHour: 500},
		{Name: "standard", Rank: 2, WaitValuePerGPUHour: 50, Default: true},
		{Name: "best_effort", Rank: 3, CapacityTypes: []fleet.CapacityType{fleet.Reserved, fleet.Spot}},
	}
	got := cfg.Settings().Tiers
	if !slices.EqualFunc(got, want, func(a, b fleet.Tier) bool {
		return a.Name == b.Name && a.Rank == b.Rank && a.WaitValuePerGPUHour == b.WaitValuePerGPUHour && a.Default == b.Default && slices.Equal(a.CapacityTypes, b.CapacityTypes)
	}) {
		t.Fatalf("tiers %+v, want %+v", got, want)
	}
	if k := fleet.TierIndex(got, "nobody"); k != 1 {
		t.Errorf("an unknown tier is tier %d, want the default, 1", k)
	}
	if cfg, _ := config.Parse("test.hcl", []byte(simPool("a", "")), registry.Blocks()); len(cfg.Tiers) != 0 {
		t.Errorf("no tier blocks, tiers %+v", cfg.Tiers)
	}
}

// TestParseTierErrors: each wrong tier is refused where it is wrong.
func TestParseTierErrors(t *testing.T) {
	ok := "  rank = 1\n  wait_value_per_gpu_hour = 5\n  default = true\n"
	tests := []struct {
		name string
		src  string
		want []wantDiag
	}{
		{"rank out of range", tier("a", "  rank = 9\n  wait_value_per_gpu_hour = 5\n  default = true\n"),
			[]wantDiag{{summary: "Invalid value", detail: "rank must be 1 to 8, got 9.", at: "9"}}},
		{"negative wait value", tier("a", "  rank = 1\n  wait_value_per_gpu_hour = -1\n  default = true\n"),
			[]wantDiag{{summary: "Invalid value", detail: "wait_value_per_gpu_hour must not be negative", at: "-1"}}},
		{"unknown capacity type", tier("a", ok+"  capacity_types = [\"spots\"]\n"),
			[]wantDiag{{summary: "Invalid value", detail: `Unknown capacity type "spots"; capacity_types lists "reserved", "on_demand" or "spot". Did you mean "spot"?`, at: `["spots"]`}}},
		{"capacity type twice", tier("a", ok+"  capacity_types = [\"spot\", \"spot\"]\n"),
			[]wantDiag{{summary: "Invalid value", detail: `capacity_types lists "spot" twice.`, at: `["spot"`}}},
		{"no capacity type", tier("a", ok+"  capacity_types = []\n"),
			[]wantDiag{{summary: "Invalid value", detail: "capacity_types must list at least one capacity type", at: "[]"}}},
		{"bad name", tier("a b", ok),
			[]wantDiag{{summary: "Invalid value", detail: `A tier's name must be 1 to 63 letters, digits, '-' or '_', got "a b".`, at: `"a b"`}}},
		{"duplicate name", tier("a", ok) + tier("a", "  rank = 2\n  wait_value_per_gpu_hour = 5\n"),
			[]wantDiag{{summary: "Duplicate tier name", detail: `A tier named "a" was already defined at test.hcl:`, at: `"a"`, nth: 1}}},
		{"duplicate rank", tier("a", ok) + tier("b", "  rank = 1\n  wait_value_per_gpu_hour = 5\n"),
			[]wantDiag{{summary: "Duplicate tier rank", detail: `Tier "b" has rank 1, as tier "a"`, at: "1\n", nth: 1}}},
		{"no default", tier("a", "  rank = 1\n  wait_value_per_gpu_hour = 5\n"),
			[]wantDiag{{summary: "No default tier", at: `tier "a"`}}},
		{"two defaults", tier("a", ok) + tier("b", "  rank = 2\n  wait_value_per_gpu_hour = 5\n  default = true\n"),
			[]wantDiag{{summary: "More than one default tier", detail: `Only one tier may be the default, but "a", "b" are.`, at: `tier "a"`}}},
		{"missing rank", tier("a", "  wait_value_per_gpu_hour = 5\n  default = true\n"),
			[]wantDiag{{summary: "Missing required argument", detail: `"rank"`, at: "{", nth: 1}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) { wantErrors(t, simPool("p", "")+tt.src, 0, tt.want, false) })
	}
}
