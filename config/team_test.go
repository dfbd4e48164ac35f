package config_test

import (
	"slices"
	"testing"

	"github.com/fleetcast/autoscaler/config"
	"github.com/fleetcast/autoscaler/fleet"
	"github.com/fleetcast/autoscaler/providers/registry"
)

// team is a team block with the given body.
func team(name, body string) string { return "team \"" + name + "\" {\n" + body + "}\n" }

// TestParseTeams: team blocks come out in the config's order, with their
// budgets (a budget of 0 is one) and shares, in the settings the planner
// reads.
func TestParseTeams(t *testing.T) {
	src := simPool("a", "") +
		team("vision", "  reserved_share = 0.25\n  burst_budget_per_day = 2400\n") +
		team("ml@corp", "  burst_budget_per_day = 0\n") +
		team("speech", "  reserved_share = 0.75\n")
	cfg, diags := config.Parse("test.hcl", []byte(src), registry.Blocks())
	if diags.HasErrors() {
		t.Fatal(formatAll(diags))
	}
	want := []fleet.Team{{Name: "vision", Budgeted: true, BurstBudgetPerDay: 2400, ReservedShare: 0.25},
		{Name: "ml@corp", Budgeted: true}, {Name: "speech", ReservedShare: 0.75}}
	if got := cfg.Settings().Teams; !slices.Equal(got, want) {
		t.Fatalf("teams %+v, want %+v", got, want)
	}
	if got := fleet.BudgetedTeams(want); !slices.Equal(got, []string{"vision", "ml@corp"}) {
		t.Errorf("budgeted %v", got)
	}
	if cfg, _ := config.Parse("test.hcl", []byte(simPool("a", "")), registry.Blocks()); len(cfg.Teams) != 0 {
		t.Errorf("no team blocks, teams %+v", cfg.Teams)
	}
}

// TestParseTeamErrors: each wrong team is refused where it is wrong.
func TestParseTeamErrors(t *testing.T) {
	tests := []struct {
		name string
		src  string
		want []wantDiag
	}{
		{"negative budget", team("a", "  burst_budget_per_day = -1\n"),
			[]wantDiag{{summary: "Invalid value", detail: "burst_budget_per_day must be 0 or more dollars", at: "-1"}}},
		{"share over 1", team("a", "  reserved_share = 1.5\n"),
			[]wantDiag{{summary: "Invalid value", detail: "reserved_share must be 0 to 1 (the team's share of the reserved GPUs), got 1.5.", at: "1.5"}}},
		{"shares add up over 1", team("a", "  reserved_share = 0.6\n") + team("b", "  reserved_share = 0.5\n"),
			[]wantDiag{{summary: "Reserved shares over 1", detail: `The teams' reserved shares add up to 1.1 with team "b"'s`, at: "0.5"}}},
		{"bad name", team("a b", ""),
			[]wantDiag{{summary: "Invalid value", detail: `A team's name is its jobs' team label, 1 to 64 letters, digits and ._-:@+: "a b": want letters`, at: `"a b"`}}},
		{"a report's word", team("idle", ""),
			[]wantDiag{{summary: "Invalid value", detail: `"idle" is the reports' word`, at: `"idle"`}}},
		{"duplicate name", team("a", "") + team("a", ""),
			[]wantDiag{{summary: "Duplicate team name", detail: `A team named "a" was already defined at test.hcl:`, at: `"a"`, nth: 1}}},
		{"more than the books tell apart", "usage {\n  max_teams = 1\n}\n" + team("a", "") + team("b", ""),
			[]wantDiag{{summary: "Too many teams", detail: "at most usage.max_teams (1) teams", at: `team "b"`}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) { wantErrors(t, simPool("p", "")+tt.src, 0, tt.want, false) })
	}
}
