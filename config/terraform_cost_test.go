package config_test

// What the Terraform examples cost when applied as they come: a capacity
// reservation is paid for every hour, used or not, so the defaults must
// reserve nothing and launch nothing, and each module's README must say
// what every resource it makes costs.

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"
	"github.com/hashicorp/hcl/v2/hclwrite"

	"github.com/fleetcast/autoscaler/fleet"
	"github.com/fleetcast/autoscaler/providers/registry"
)

// reservationKinds are the Terraform resources that hold capacity paid for
// whether instances run in it or not, and the attribute that counts the
// instances each holds.
var reservationKinds = map[string]string{
	"aws_ec2_capacity_reservation": "instance_count",
	"google_compute_reservation":   "specific_reservation.count",
}

// sizeAttrs are, per group type, the attributes that set how many
// instances the group runs when Terraform creates it.
var sizeAttrs = map[string][]string{
	"aws_autoscaling_group":                 {"min_size", "desired_capacity"},
	"google_compute_instance_group_manager": {"target_size"},
}

// TestExamplesTerraformDefaultsBuyNothing: a module applied with its
// defaults (only the variables that have none given) reserves no capacity
// and starts no GPU instance, so it costs next to nothing until the
// controller launches for demand, or an operator asks for a reservation
// (reserved_nodes). The controller config for those defaults, the example
// config without the pools whose groups the defaults do not make, is valid.
func TestExamplesTerraformDefaultsBuyNothing(t *testing.T) {
	mods := loadModules(t)
	for _, m := range mods {
		t.Run(moduleName(m.dir), func(t *testing.T) {
			for _, r := range m.resources {
				attr, isReservation := reservationKinds[r.typ]
				attrs, isGroup := sizeAttrs[r.typ]
				if !isReservation && !isGroup {
					continue
				}
				n, err := m.count(r)
				if err != nil {
					t.Errorf("%s: count: %v", r, err)
					continue
				}
				if n == 0 {
					continue
				}
				if isReservation {
					attrs = []string{attr}
				}
				for _, a := range attrs {
					v, err := m.integer(nestedAttrExpr(r, a))
					switch {
					case err != nil:
						t.Errorf("%s: %s: %v", r, a, err)
					case v != 0 && isReservation:
						t.Errorf("%s: with the defaults it reserves %d x %s, paid every hour whether used or not; the default must be 0 (an operator sets the size)", r, n*v, m.instanceType(r))
					case v != 0:
						t.Errorf("%s: %s = %d with the defaults; want 0: the controller launches for demand", r, a, v)
					}
				}
			}
		})
	}

	// The config for a fleet made with the defaults: examples/cloud.hcl
	// without the pools whose groups those defaults do not make.
	cfg, diags := registry.Load(cloudExample)
	if diags.HasErrors() {
		t.Fatalf("%s:\n%s", cloudExample, formatAll(diags))
	}
	var absent []string
	for _, pool := range cfg.Pools {
		if !madeAtDefaults(mods, pool) {
			absent = append(absent, pool.Name)
		}
	}
	if len(absent) == len(cfg.Pools) {
		t.Fatalf("the defaults make none of the groups of %s's pools", cloudExample)
	}
	path := withoutPools(t, cloudExample, absent)
	if _, diags := registry.Load(path); len(diags) > 0 {
		t.Errorf("%s without pools %v (the groups the Terraform's defaults do not make):\n%s", cloudExample, absent, formatAll(diags))
	}
}

// madeAtDefaults reports whether the Terraform, at its defaults, makes the
// group a pool names: a pool of another provider is taken as made.
func madeAtDefaults(mods []*tfModule, pool fleet.Pool) bool {
	for _, kind := range groupKinds {
		name := kind.group(pool)
		if name == "" {
			continue
		}
		for _, m := range mods {
			for _, r := range m.resourcesOf(kind.typ) {
				if got, err := m.str(attrExpr(r.body, "name")); err == nil && got == name {
					n, err := m.count(r)
					return err == nil && n > 0
				}
			}
		}
		return false
	}
	return true
}

// withoutPools writes a copy of the config at path without the pool
// blocks named, and returns the copy's path.
func withoutPools(t *testing.T, path string, names []string) string {
	t.Helper()
	src, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	f, diags := hclwrite.ParseConfig(src, path, hcl.InitialPos)
	if diags.HasErrors() {
		t.Fatalf("%s:\n%s", path, formatAll(diags))
	}
	for _, b := range f.Body().Blocks() {
		if b.Type() == "pool" && len(b.Labels()) == 1 && slices.Contains(names, b.Labels()[0]) {
			f.Body().RemoveBlock(b)
		}
	}
	out := filepath.Join(t.TempDir(), filepath.Base(path))
	if err := os.WriteFile(out, f.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}
	return out
}

// count is how many instances of r the module makes: its count, or 1
// without one. A for_each resource counts as 1 (its keys are checked where
// they are referred to).
func (m *tfModule) count(r *tfResource) (int, error) {
	expr := attrExpr(r.body, "count")
	if expr == nil {
		return 1, nil
	}
	return m.integer(expr)
}

// nestedAttrExpr returns the expression of a dotted attribute name of r,
// such as specific_reservation.count (a nested block's attribute), or nil.
func nestedAttrExpr(r *tfResource, name string) hclsyntax.Expression {
	parts := strings.Split(name, ".")
	blocks := nestedBlocks(r.body, parts[:len(parts)-1]...)
	if len(blocks) != 1 {
		return nil
	}
	return attrExpr(blocks[0].Body, parts[len(parts)-1])
}

// instanceType is r's instance or machine type, for messages.
func (m *tfModule) instanceType(r *tfResource) string {
	for _, a := range []string{"instance_type", "specific_reservation.instance_properties.machine_type"} {
		if s, err := m.str(nestedAttrExpr(r, a)); err == nil {
			return s
		}
	}
	return "instances"
}

// TestExamplesTerraformCostsDocumented: each module's README has a "What
// it costs" section that names every type of resource the module makes
// and gives prices per hour and per month with their source, so nobody
// applies it without knowing what it bills.
func TestExamplesTerraformCostsDocumented(t *testing.T) {
	for _, m := range loadModules(t) {
		t.Run(moduleName(m.dir), func(t *testing.T) {
			readme := filepath.Join(m.dir, "README.md")
			src, err := os.ReadFile(readme)
			if err != nil {
				t.Fatal(err)
			}
			section, ok := markdownSection(string(src), "What it costs")
			if !ok {
				t.Fatalf("%s has no \"## What it costs\" section", readme)
			}
			var types []string
			for _, r := range m.resources {
				if !slices.Contains(types, r.typ) {
					types = append(types, r.typ)
				}
			}
			for _, typ := range types {
				if !strings.Contains(section, "`"+typ+"`") {
					t.Errorf("%s, What it costs: `%s` is not named; say what it costs (even if nothing)", readme, typ)
				}
			}
			for _, want := range []*regexp.Regexp{
				regexp.MustCompile(`\$[0-9][0-9,.]* (an|per) hour`),
				regexp.MustCompile(`\$[0-9][0-9,.]* (a|per) month`),
				regexp.MustCompile(`\]\(https://[^)]*(pricing|price)[^)]*\)`),
			} {
				if !want.MatchString(section) {
					t.Errorf("%s, What it costs: nothing matches %s (prices per hour and per month, and a link to the price list they come from)", readme, want)
				}
			}
		})
	}
}

// markdownSection returns the text under the "## heading" of a markdown
// page, up to the next heading of that level or above.
func markdownSection(page, heading string) (string, bool) {
	lines := strings.Split(page, "\n")
	start := slices.Index(lines, "## "+heading)
	if start < 0 {
		return "", false
	}
	end := len(lines)
	for i := start + 1; i < len(lines); i++ {
		if strings.HasPrefix(lines[i], "## ") || strings.HasPrefix(lines[i], "# ") {
			end = i
			break
		}
	}
	return strings.Join(lines[start+1:end], "\n"), true
}
