package config_test

// The example configs in ../examples must load without a single diagnostic,
// and examples/cloud.hcl must agree with the Terraform in
// ../examples/terraform that creates its pools' groups: the same group
// names, bounds, instance types and pool tags, and groups whose size
// Terraform leaves to the controller.
//
// The Terraform is read with HCL alone, without Terraform or its providers.
// Expressions the checks read must be literals or refer only to variables
// (var.NAME stands for the variable's default, or its value in exampleVars
// for the checks against the example configs); resources are found by type
// and label, and one resource's reference to another (a group's launch
// template) is followed by its traversal, e.g. aws_launch_template.a100["x"].id.

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclparse"
	"github.com/hashicorp/hcl/v2/hclsyntax"
	"github.com/hashicorp/hcl/v2/hclwrite"
	"github.com/zclconf/go-cty/cty"

	"github.com/fleetcast/autoscaler/config"
	"github.com/fleetcast/autoscaler/fleet"
	"github.com/fleetcast/autoscaler/internal/mototest"
	"github.com/fleetcast/autoscaler/providers/aws"
	"github.com/fleetcast/autoscaler/providers/gcp"
	"github.com/fleetcast/autoscaler/providers/registry"
)

const (
	examplesDir  = "../examples"
	terraformDir = "../examples/terraform"
	// cloudExample is the example config whose pools the Terraform creates.
	cloudExample = "../examples/cloud.hcl"
)

// groupKinds are the Terraform resources that are a pool's group: the
// resource type, how a pool's settings name the group, and the
// attribute the controller owns, which Terraform must ignore once the group
// exists.
var groupKinds = []struct {
	typ, attr, owned string
	group            func(fleet.Pool) string
}{
	{typ: "aws_autoscaling_group", attr: "asg", owned: "desired_capacity", group: func(p fleet.Pool) string { return aws.SettingsOf(p).ASG }},
	{typ: "google_compute_instance_group_manager", attr: "mig", owned: "target_size", group: func(p fleet.Pool) string { return gcp.SettingsOf(p).MIG }},
}

// TestExamplesLoad loads every example config; any diagnostic, even a
// warning, fails it.
func TestExamplesLoad(t *testing.T) {
	paths, err := filepath.Glob(filepath.Join(examplesDir, "*.hcl"))
	more, err2 := filepath.Glob(filepath.Join(examplesDir, "*", "*.hcl"))
	if err != nil || err2 != nil || len(paths) == 0 || len(more) == 0 {
		t.Fatalf("no example configs in %s, or none in its directories (err %v, %v)", examplesDir, err, err2)
	}
	for _, path := range append(paths, more...) {
		rel, _ := filepath.Rel(examplesDir, path)
		t.Run(rel, func(t *testing.T) {
			cfg, diags := registry.Load(path)
			for _, diag := range diags {
				t.Error(config.FormatDiagnostic(diag))
			}
			if cfg == nil && !diags.HasErrors() {
				t.Error("Load returned no config and no errors")
			}
		})
	}
}

// TestExamplesTerraformParses parses every .tf file under the Terraform
// examples as HCL.
func TestExamplesTerraformParses(t *testing.T) {
	paths := terraformFiles(t, terraformDir)
	if len(paths) == 0 {
		t.Fatalf("no .tf files under %s", terraformDir)
	}
	parser := hclparse.NewParser()
	for _, path := range paths {
		_, diags := parser.ParseHCLFile(path)
		for _, diag := range diags {
			t.Error(config.FormatDiagnostic(diag))
		}
	}
}

// TestExamplesTerraformFmt checks that the Terraform examples are formatted
// as `terraform fmt` writes them: always with hclwrite.Format (the
// formatter terraform fmt ends with), and with `terraform fmt -check` too
// when terraform is installed. Only .tf files: the .tftpl files are
// templates of shell scripts, which terraform fmt does not format either.
func TestExamplesTerraformFmt(t *testing.T) {
	paths := terraformFiles(t, terraformDir)
	if len(paths) == 0 {
		t.Fatalf("no .tf files under %s", terraformDir)
	}
	t.Run("hclwrite", func(t *testing.T) {
		for _, path := range paths {
			src, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			if diff := unformatted(path, src); diff != "" {
				t.Error(diff)
			}
		}
	})
	t.Run("terraform", func(t *testing.T) {
		bin, err := exec.LookPath("terraform")
		if err != nil {
			t.Skip("terraform is not installed; the hclwrite check stands in for it")
		}
		out, err := exec.Command(bin, "fmt", "-check", "-recursive", "-list=true", terraformDir).Output()
		if err != nil {
			t.Errorf("terraform fmt -check %s: %v; files to format:\n%s", terraformDir, err, out)
		}
	})
}

// unformatted compares src, the file at path, with its form after
// hclwrite.Format, and describes the first line that differs ("" when
// there is none).
func unformatted(path string, src []byte) string {
	formatted := hclwrite.Format(src)
	if bytes.Equal(src, formatted) {
		return ""
	}
	have, want := strings.Split(string(src), "\n"), strings.Split(string(formatted), "\n")
	line := 0
	for line < len(have) && line < len(want) && have[line] == want[line] {
		line++
	}
	at := func(lines []string) string {
		if line < len(lines) {
			return fmt.Sprintf("%q", lines[line])
		}
		return "the end of the file"
	}
	return fmt.Sprintf("%s:%d: not formatted (run terraform fmt):\n  have %s\n  want %s", path, line+1, at(have), at(want))
}

// TestExamplesTerraformTemplates checks every templatefile call in the
// Terraform examples: the template exists, parses, and is given every
// variable it uses; and every .tftpl file is used.
func TestExamplesTerraformTemplates(t *testing.T) {
	for _, m := range loadModules(t) {
		t.Run(moduleName(m.dir), func(t *testing.T) {
			used := map[string]bool{}
			for _, call := range m.calls("templatefile") {
				if len(call.Args) != 2 {
					t.Errorf("%s: templatefile takes 2 arguments, got %d", tfPos(call.Range()), len(call.Args))
					continue
				}
				path, err := m.str(call.Args[0])
				if err != nil {
					t.Errorf("template path: %v", err)
					continue
				}
				used[filepath.Clean(path)] = true
				given := objectKeys(t, call.Args[1])
				for _, name := range templateVariables(t, path) {
					if !given[name] {
						t.Errorf("%s uses ${%s}, which the templatefile call at %s does not give", path, name, tfPos(call.Range()))
					}
				}
			}
			templates, _ := filepath.Glob(filepath.Join(m.dir, "*.tftpl"))
			for _, path := range templates {
				if !used[filepath.Clean(path)] {
					t.Errorf("%s is not used by any templatefile call", path)
				}
			}
		})
	}
}

// TestExamplesTerraformAgrees checks that examples/cloud.hcl and the
// Terraform examples describe the same groups.
func TestExamplesTerraformAgrees(t *testing.T) {
	cfg, diags := registry.Load(cloudExample)
	if diags.HasErrors() {
		t.Fatalf("%s:\n%s", cloudExample, formatAll(diags))
	}
	mods := loadModulesWith(t, exampleVars)

	checked := 0
	for _, pool := range cfg.Pools {
		switch pool.Provider {
		case "aws":
			t.Run(pool.Name, func(t *testing.T) { checkAutoScalingGroup(t, mods, pool) })
		case "gcp":
			t.Run(pool.Name, func(t *testing.T) { checkInstanceGroupManager(t, mods, pool) })
		default:
			continue
		}
		checked++
	}
	if checked == 0 {
		t.Errorf("%s has no aws or gcp pool to check", cloudExample)
	}

	// Every group in the Terraform belongs to a pool, and leaves its size to
	// the controller.
	for _, kind := range groupKinds {
		names := map[string]bool{}
		for _, pool := range cfg.Pools {
			if name := kind.group(pool); name != "" {
				names[name] = true
			}
		}
		for _, m := range mods {
			for _, r := range m.resourcesOf(kind.typ) {
				name, err := m.str(attrExpr(r.body, "name"))
				switch {
				case err != nil:
					t.Errorf("%s: name: %v", r, err)
				case !names[name]:
					t.Errorf("%s: group %q is in no pool of %s (no pool has %s = %q)", r, name, cloudExample, kind.attr, name)
				}
				if !slices.Contains(ignoredChanges(r.body), kind.owned) {
					t.Errorf("%s: lifecycle { ignore_changes } must name %s: the controller owns it, and every apply would reset it", r, kind.owned)
				}
			}
		}
	}
}

// checkAutoScalingGroup checks the Auto Scaling group of an aws pool: its
// name, pool tags, bounds and launch template, and for a reserved pool the
// capacity reservation the launch template targets.
func checkAutoScalingGroup(t *testing.T, mods []*tfModule, pool fleet.Pool) {
	asg := aws.SettingsOf(pool).ASG
	if asg == "" {
		t.Fatalf("the pool has no asg; this check finds Auto Scaling groups by name")
	}
	m, group := findNamed(t, mods, "aws_autoscaling_group", asg)
	if group == nil {
		t.Fatalf("no aws_autoscaling_group has name = %q", asg)
	}

	tags := asgTags(t, m, group)
	for key, want := range map[string]string{"fleetcast/pool": pool.Name, "fleetcast/managed": "true"} {
		if got, ok := tags[key]; !ok || got != want {
			t.Errorf("%s: tag %q = %q, want %q, propagated at launch", group, key, got, want)
		}
	}
	checkInt(t, m, group, "min_size", pool.Min)
	checkInt(t, m, group, "max_size", pool.Max)

	lt := m.referenced(t, group.body, "aws_launch_template")
	if lt == nil {
		t.Fatalf("%s refers to no aws_launch_template", group)
	}
	checkString(t, m, lt, "instance_type", pool.InstanceType)
	// A mixed instances policy may override the launch template's type.
	for _, override := range nestedBlocks(group.body, "mixed_instances_policy", "launch_template", "override") {
		if expr := attrExpr(override.Body, "instance_type"); expr != nil {
			if got, err := m.str(expr); err != nil || got != pool.InstanceType {
				t.Errorf("%s: override instance_type = %q (%v), want %q", group, got, err, pool.InstanceType)
			}
		}
	}

	if pool.Capacity == fleet.Reserved {
		cr := m.referenced(t, lt.body, "aws_ec2_capacity_reservation")
		if cr == nil {
			t.Fatalf("%s is for a reserved pool but targets no aws_ec2_capacity_reservation", lt)
		}
		checkString(t, m, cr, "instance_type", pool.InstanceType)
		checkInt(t, m, cr, "instance_count", pool.Max)
	}
}

// checkInstanceGroupManager checks the managed instance group of a gcp
// pool: its name and zone, and its instance template's machine type and
// pool label and metadata.
func checkInstanceGroupManager(t *testing.T, mods []*tfModule, pool fleet.Pool) {
	mig := gcp.SettingsOf(pool).MIG
	m, group := findNamed(t, mods, "google_compute_instance_group_manager", mig)
	if group == nil {
		t.Fatalf("no google_compute_instance_group_manager has name = %q", mig)
	}
	checkString(t, m, group, "zone", gcp.SettingsOf(pool).Zone)

	tpl := m.referenced(t, group.body, "google_compute_instance_template")
	if tpl == nil {
		t.Fatalf("%s refers to no google_compute_instance_template", group)
	}
	checkString(t, m, tpl, "machine_type", pool.InstanceType)
	for _, attr := range []string{"labels", "metadata"} {
		got, err := m.objectItem(attrExpr(tpl.body, attr), "fleetcast-pool")
		if err != nil || got != pool.Name {
			t.Errorf("%s: %s[\"fleetcast-pool\"] = %q (%v), want %q", tpl, attr, got, err, pool.Name)
		}
	}
}

// checkString checks that attribute name of r is the string want.
func checkString(t *testing.T, m *tfModule, r *tfResource, name, want string) {
	t.Helper()
	got, err := m.str(attrExpr(r.body, name))
	if err != nil {
		t.Errorf("%s: %s: %v", r, name, err)
	} else if got != want {
		t.Errorf("%s: %s = %q, want %q", r, name, got, want)
	}
}

// checkInt checks that attribute name of r is the whole number want.
func checkInt(t *testing.T, m *tfModule, r *tfResource, name string, want int) {
	t.Helper()
	got, err := m.integer(attrExpr(r.body, name))
	if err != nil {
		t.Errorf("%s: %s: %v", r, name, err)
	} else if got != want {
		t.Errorf("%s: %s = %d, want %d", r, name, got, want)
	}
}

// tfModule is what the checks need of one Terraform module, a directory of
// .tf files: its files, its resources, and a context in which var.NAME is
// the default of variable NAME (unknown when it has none) and path.module
// is the directory.
type tfModule struct {
	dir       string
	files     []*hcl.File
	resources []*tfResource
	ctx       *hcl.EvalContext
}

// tfResource is one resource block.
type tfResource struct {
	typ, name string
	body      *hclsyntax.Body
}

func (r *tfResource) String() string {
	return fmt.Sprintf("%s.%s (%s)", r.typ, r.name, tfPos(r.body.SrcRange))
}

// exampleVars are the variables, beyond their defaults, under which the
// example configs (examples/cloud.hcl, examples/aws.hcl, the moto example)
// describe what the Terraform makes: their reserved-a100 pool is the group
// and capacity reservation that reserved_nodes = 4 makes. The default, 0,
// reserves nothing (see TestExamplesTerraformDefaultsBuyNothing).
var exampleVars = map[string]cty.Value{"reserved_nodes": cty.NumberIntVal(4)}

// loadModules loads every directory under terraformDir that has .tf files,
// with every variable at its default.
func loadModules(t *testing.T) []*tfModule {
	t.Helper()
	return loadModulesWith(t, nil)
}

// loadModulesWith is loadModules with the variables in vars set (in every
// module that declares them) instead of their defaults.
func loadModulesWith(t *testing.T, vars map[string]cty.Value) []*tfModule {
	t.Helper()
	byDir := map[string][]string{}
	for _, path := range terraformFiles(t, terraformDir) {
		byDir[filepath.Dir(path)] = append(byDir[filepath.Dir(path)], path)
	}
	if len(byDir) == 0 {
		t.Fatalf("no Terraform modules under %s", terraformDir)
	}
	var mods []*tfModule
	for _, dir := range slices.Sorted(maps.Keys(byDir)) {
		mods = append(mods, loadModule(t, dir, byDir[dir], vars))
	}
	return mods
}

// loadModule parses the .tf files of the module in dir; a variable it
// declares that is in set takes that value instead of its default.
func loadModule(t *testing.T, dir string, paths []string, set map[string]cty.Value) *tfModule {
	t.Helper()
	m := &tfModule{dir: dir}
	parser := hclparse.NewParser()
	vars := map[string]cty.Value{}
	for _, path := range paths {
		file, diags := parser.ParseHCLFile(path)
		if diags.HasErrors() {
			t.Fatalf("%s:\n%s", path, formatAll(diags))
		}
		m.files = append(m.files, file)
		for _, b := range file.Body.(*hclsyntax.Body).Blocks {
			switch {
			case b.Type == "resource" && len(b.Labels) == 2:
				m.resources = append(m.resources, &tfResource{typ: b.Labels[0], name: b.Labels[1], body: b.Body})
			case b.Type == "variable" && len(b.Labels) == 1:
				vars[b.Labels[0]] = cty.DynamicVal
				if def := attrExpr(b.Body, "default"); def != nil {
					v, diags := def.Value(nil)
					if diags.HasErrors() {
						t.Fatalf("variable %q: default:\n%s", b.Labels[0], formatAll(diags))
					}
					vars[b.Labels[0]] = v
				}
				if v, ok := set[b.Labels[0]]; ok {
					vars[b.Labels[0]] = v
				}
			}
		}
	}
	m.ctx = &hcl.EvalContext{Variables: map[string]cty.Value{
		"var":  cty.ObjectVal(vars),
		"path": cty.ObjectVal(map[string]cty.Value{"module": cty.StringVal(dir)}),
	}}
	return m
}

// terraformFiles returns the .tf files under root, leaving out Terraform's
// working directories.
func terraformFiles(t *testing.T, root string) []string {
	t.Helper()
	var paths []string
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		switch {
		case err != nil:
			return err
		case d.IsDir() && d.Name() == ".terraform":
			return filepath.SkipDir
		case !d.IsDir() && filepath.Ext(path) == ".tf":
			paths = append(paths, path)
		}
		return nil
	})
	if err != nil {
		t.Fatalf("walking %s: %v", root, err)
	}
	return paths
}

// resourcesOf returns the module's resources of type typ.
func (m *tfModule) resourcesOf(typ string) []*tfResource {
	var out []*tfResource
	for _, r := range m.resources {
		if r.typ == typ {
			out = append(out, r)
		}
	}
	return out
}

// resource returns the resource typ.name, or nil.
func (m *tfModule) resource(typ, name string) *tfResource {
	for _, r := range m.resourcesOf(typ) {
		if r.name == name {
			return r
		}
	}
	return nil
}

// findNamed returns the one resource of type typ, in any module, whose name
// attribute is name, and its module; nil if there is none.
func findNamed(t *testing.T, mods []*tfModule, typ, name string) (*tfModule, *tfResource) {
	t.Helper()
	var foundIn *tfModule
	var found *tfResource
	for _, m := range mods {
		for _, r := range m.resourcesOf(typ) {
			if got, err := m.str(attrExpr(r.body, "name")); err != nil || got != name {
				continue
			}
			if found != nil {
				t.Fatalf("both %s and %s have name = %q", found, r, name)
			}
			foundIn, found = m, r
		}
	}
	return foundIn, found
}

// referenced returns the one resource of type typ that body refers to
// anywhere (in attributes, nested and dynamic blocks), or nil if it refers
// to none.
func (m *tfModule) referenced(t *testing.T, body *hclsyntax.Body, typ string) *tfResource {
	t.Helper()
	var names []string
	hclsyntax.VisitAll(body, func(n hclsyntax.Node) hcl.Diagnostics {
		if e, ok := n.(*hclsyntax.ScopeTraversalExpr); ok && e.Traversal.RootName() == typ && len(e.Traversal) > 1 {
			if attr, ok := e.Traversal[1].(hcl.TraverseAttr); ok && !slices.Contains(names, attr.Name) {
				names = append(names, attr.Name)
			}
		}
		return nil
	})
	switch len(names) {
	case 0:
		return nil
	case 1:
		if r := m.resource(typ, names[0]); r != nil {
			return r
		}
		t.Fatalf("%s: refers to %s.%s, which %s does not define", tfPos(body.SrcRange), typ, names[0], m.dir)
	default:
		t.Fatalf("%s: refers to several %s resources: %v", tfPos(body.SrcRange), typ, names)
	}
	return nil
}

// calls returns every call of function name in the module.
func (m *tfModule) calls(name string) []*hclsyntax.FunctionCallExpr {
	var out []*hclsyntax.FunctionCallExpr
	for _, f := range m.files {
		hclsyntax.VisitAll(f.Body.(*hclsyntax.Body), func(n hclsyntax.Node) hcl.Diagnostics {
			if call, ok := n.(*hclsyntax.FunctionCallExpr); ok && call.Name == name {
				out = append(out, call)
			}
			return nil
		})
	}
	return out
}

// value evaluates expr, which may refer to nothing but var and path, to a
// known value.
func (m *tfModule) value(expr hclsyntax.Expression) (cty.Value, error) {
	if expr == nil {
		return cty.NilVal, fmt.Errorf("not set")
	}
	v, diags := expr.Value(m.ctx)
	if diags.HasErrors() {
		return cty.NilVal, fmt.Errorf("%s: cannot evaluate: %s", tfPos(expr.Range()), formatAll(diags))
	}
	if !v.IsWhollyKnown() {
		return cty.NilVal, fmt.Errorf("%s: refers to a variable without a default", tfPos(expr.Range()))
	}
	if v.IsNull() {
		return cty.NilVal, fmt.Errorf("%s: is null", tfPos(expr.Range()))
	}
	return v, nil
}

// str evaluates expr to a string.
func (m *tfModule) str(expr hclsyntax.Expression) (string, error) {
	v, err := m.value(expr)
	if err != nil {
		return "", err
	}
	if v.Type() != cty.String {
		return "", fmt.Errorf("%s: is %s, not a string", tfPos(expr.Range()), v.Type().FriendlyName())
	}
	return v.AsString(), nil
}

// integer evaluates expr to a whole number.
func (m *tfModule) integer(expr hclsyntax.Expression) (int, error) {
	v, err := m.value(expr)
	if err != nil {
		return 0, err
	}
	if v.Type() != cty.Number || !v.AsBigFloat().IsInt() {
		return 0, fmt.Errorf("%s: is not a whole number", tfPos(expr.Range()))
	}
	i, _ := v.AsBigFloat().Int64()
	return int(i), nil
}

// objectItem returns the string value of item key of expr, an object
// constructor such as { fleetcast-pool = "x", other = f(y) }. Only that
// item is evaluated.
func (m *tfModule) objectItem(expr hclsyntax.Expression, key string) (string, error) {
	obj, ok := expr.(*hclsyntax.ObjectConsExpr)
	if !ok {
		return "", fmt.Errorf("not an object constructor")
	}
	for _, item := range obj.Items {
		if k, diags := item.KeyExpr.Value(nil); !diags.HasErrors() && k.Type() == cty.String && k.AsString() == key {
			return m.str(item.ValueExpr)
		}
	}
	return "", fmt.Errorf("no item %q", key)
}

// asgTags returns the tags of an Auto Scaling group's tag blocks that are
// propagated at launch.
func asgTags(t *testing.T, m *tfModule, group *tfResource) map[string]string {
	t.Helper()
	tags := map[string]string{}
	for _, b := range blocksOf(group.body, "tag") {
		key, errK := m.str(attrExpr(b.Body, "key"))
		value, errV := m.str(attrExpr(b.Body, "value"))
		propagate, errP := m.value(attrExpr(b.Body, "propagate_at_launch"))
		if err := errors.Join(errK, errV, errP); err != nil {
			t.Errorf("%s: tag at %s: %v", group, tfPos(b.Range()), err)
			continue
		}
		if propagate.Type() == cty.Bool && propagate.True() {
			tags[key] = value
		}
	}
	return tags
}

// ignoredChanges returns the attributes that body's lifecycle block names
// in ignore_changes.
func ignoredChanges(body *hclsyntax.Body) []string {
	var names []string
	for _, lc := range blocksOf(body, "lifecycle") {
		expr := attrExpr(lc.Body, "ignore_changes")
		if expr == nil {
			continue
		}
		exprs, diags := hcl.ExprList(expr)
		if diags.HasErrors() {
			continue
		}
		for _, e := range exprs {
			if trav, diags := hcl.AbsTraversalForExpr(e); !diags.HasErrors() {
				names = append(names, trav.RootName())
			}
		}
	}
	return names
}

// templateVariables returns the names of the variables the template file at
// path uses.
func templateVariables(t *testing.T, path string) []string {
	t.Helper()
	src, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	expr, diags := hclsyntax.ParseTemplate(src, path, hcl.InitialPos)
	if diags.HasErrors() {
		t.Fatalf("%s:\n%s", path, formatAll(diags))
	}
	var names []string
	for _, trav := range expr.Variables() {
		if !slices.Contains(names, trav.RootName()) {
			names = append(names, trav.RootName())
		}
	}
	return names
}

// objectKeys returns the keys of expr, an object constructor.
func objectKeys(t *testing.T, expr hclsyntax.Expression) map[string]bool {
	t.Helper()
	obj, ok := expr.(*hclsyntax.ObjectConsExpr)
	if !ok {
		t.Fatalf("%s: templatefile's variables must be an object constructor", tfPos(expr.Range()))
	}
	keys := map[string]bool{}
	for _, item := range obj.Items {
		k, diags := item.KeyExpr.Value(nil)
		if diags.HasErrors() || k.Type() != cty.String {
			t.Fatalf("%s: the key must be a name or a string", tfPos(item.KeyExpr.Range()))
		}
		keys[k.AsString()] = true
	}
	return keys
}

// attrExpr returns the expression of attribute name of body, or nil.
func attrExpr(body *hclsyntax.Body, name string) hclsyntax.Expression {
	if attr, ok := body.Attributes[name]; ok {
		return attr.Expr
	}
	return nil
}

// blocksOf returns body's blocks of type typ.
func blocksOf(body *hclsyntax.Body, typ string) []*hclsyntax.Block {
	var out []*hclsyntax.Block
	for _, b := range body.Blocks {
		if b.Type == typ {
			out = append(out, b)
		}
	}
	return out
}

// nestedBlocks returns the blocks at the end of a path of block types, e.g.
// mixed_instances_policy > launch_template > override.
func nestedBlocks(body *hclsyntax.Body, path ...string) []*hclsyntax.Block {
	level := []*hclsyntax.Block{{Body: body}}
	for _, typ := range path {
		var next []*hclsyntax.Block
		for _, b := range level {
			next = append(next, blocksOf(b.Body, typ)...)
		}
		level = next
	}
	return level
}

// tfPos formats the start of r as FILE:LINE.
func tfPos(r hcl.Range) string {
	return fmt.Sprintf("%s:%d", r.Filename, r.Start.Line)
}

// TestAWSExampleAgrees checks that examples/aws.hcl's Auto Scaling group
// pools, found by name or by tag, are the groups the Terraform makes.
func TestAWSExampleAgrees(t *testing.T) {
	const path = "../examples/aws.hcl"
	cfg, diags := registry.Load(path)
	if diags.HasErrors() {
		t.Fatalf("%s:\n%s", path, formatAll(diags))
	}
	mods := loadModulesWith(t, exampleVars)
	checked := 0
	for _, pool := range cfg.Pools {
		if tag := aws.SettingsOf(pool).ASGTag; tag != "" {
			k, v, _ := strings.Cut(tag, "=")
			var names []string
			for _, m := range mods {
				for _, r := range m.resourcesOf("aws_autoscaling_group") {
					if asgTags(t, m, r)[k] == v {
						name, _ := m.str(attrExpr(r.body, "name"))
						names = append(names, name)
					}
				}
			}
			if len(names) != 1 {
				t.Fatalf("pool %s: asg_tag %s finds %d groups in the Terraform (%v); want exactly one", pool.Name, tag, len(names), names)
			}
			pool.Settings = aws.Settings{ASG: names[0]}
		}
		if aws.SettingsOf(pool).ASG == "" {
			continue
		}
		t.Run(pool.Name, func(t *testing.T) { checkAutoScalingGroup(t, mods, pool) })
		checked++
	}
	if checked != 3 {
		t.Errorf("%s: %d Auto Scaling group pools checked, want 3", path, checked)
	}
}

// TestUnformatted: the check that stands in for terraform fmt names the
// file and the first line that differs, and passes formatted files.
func TestUnformatted(t *testing.T) {
	for _, tt := range []struct {
		name, src, want string
	}{
		{name: "formatted", src: "a  = 1\nbb = 2\n", want: ""},
		{name: "unaligned equals", src: "a  = 1\nbb = 2\nc = 3\n",
			want: "x.tf:3: not formatted (run terraform fmt):\n  have \"c = 3\"\n  want \"c  = 3\""},
		{name: "indentation", src: "resource \"x\" \"y\" {\n    a = 1\n}\n",
			want: "x.tf:2: not formatted (run terraform fmt):\n  have \"    a = 1\"\n  want \"  a = 1\""},
		{name: "spaces around an operator", src: "a = 1+2\n",
			want: "x.tf:1: not formatted (run terraform fmt):\n  have \"a = 1+2\"\n  want \"a = 1 + 2\""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if got := unformatted("x.tf", []byte(tt.src)); got != tt.want {
				t.Errorf("unformatted:\n%s\nwant:\n%s", got, tt.want)
			}
		})
	}
}

// TestMotoExampleAgrees checks the example fleet that the AWS tests and
// scripts/try-moto.sh make on moto_server (internal/mototest) against the
// Terraform and examples/aws.hcl: exactly the Terraform's groups, with its
// names, tags, sizes and launch templates, and a launch template for every
// pool of aws.hcl run from one.
func TestMotoExampleAgrees(t *testing.T) {
	const awsExample = "../examples/aws.hcl"
	mods := loadModulesWith(t, exampleVars)
	templates := map[string]mototest.LaunchTemplate{}
	for _, lt := range mototest.ExampleTemplates {
		templates[lt.Name] = lt
	}
	used := map[string]bool{}
	for _, g := range mototest.ExampleGroups {
		t.Run(g.Name, func(t *testing.T) {
			used[g.LaunchTemplate] = true
			m, group := findNamed(t, mods, "aws_autoscaling_group", g.Name)
			if group == nil {
				t.Fatalf("the Terraform has no aws_autoscaling_group with name = %q", g.Name)
			}
			if tags := asgTags(t, m, group); !maps.Equal(tags, g.Tags()) {
				t.Errorf("%s: tags propagated at launch %v; the moto example has %v", group, tags, g.Tags())
			}
			checkInt(t, m, group, "min_size", int(g.Min))
			checkInt(t, m, group, "max_size", int(g.Max))
			checkInt(t, m, group, "desired_capacity", int(g.Desired))
			lt := m.referenced(t, group.body, "aws_launch_template")
			if lt == nil {
				t.Fatalf("%s refers to no aws_launch_template", group)
			}
			name, err := m.launchTemplateName(group.body, lt)
			switch {
			case err != nil:
				t.Errorf("%s: %v", lt, err)
			case name != g.LaunchTemplate:
				t.Errorf("%s: the group's launch template is named %q; the moto example's is %q", group, name, g.LaunchTemplate)
			}
			checkString(t, m, lt, "instance_type", templates[g.LaunchTemplate].InstanceType)
		})
	}
	n := 0
	for _, m := range mods {
		n += len(m.resourcesOf("aws_autoscaling_group"))
	}
	if n != len(mototest.ExampleGroups) {
		t.Errorf("the Terraform has %d Auto Scaling groups; the moto example has %d", n, len(mototest.ExampleGroups))
	}

	cfg, diags := registry.Load(awsExample)
	if diags.HasErrors() {
		t.Fatalf("%s:\n%s", awsExample, formatAll(diags))
	}
	for _, pool := range cfg.Pools {
		var found []string
		for _, g := range mototest.ExampleGroups {
			k, v, _ := strings.Cut(aws.SettingsOf(pool).ASGTag, "=")
			if g.Name == aws.SettingsOf(pool).ASG || (k != "" && g.Tags()[k] == v) {
				found = append(found, g.Name)
				if g.Pool != pool.Name {
					t.Errorf("%s: pool %s's group %s is tagged fleetcast/pool=%s in the moto example", awsExample, pool.Name, g.Name, g.Pool)
				}
			}
		}
		switch name := aws.SettingsOf(pool).LaunchTemplate; {
		case name != "":
			used[name] = true
			if lt, ok := templates[name]; !ok || lt.InstanceType != pool.InstanceType {
				t.Errorf("%s: pool %s runs launch template %q (%s); the moto example has %+v", awsExample, pool.Name, name, pool.InstanceType, lt)
			}
		case len(found) != 1:
			t.Errorf("%s: pool %s's group is %d groups of the moto example (%v); want 1", awsExample, pool.Name, len(found), found)
		}
	}
	for name := range templates {
		if !used[name] {
			t.Errorf("the moto example's launch template %s is used by no group and no pool of %s", name, awsExample)
		}
	}
}

// launchTemplateName evaluates the name of launch template lt as body (a
// group) refers to it: a for_each template's name with each.key the key
// body indexes it with, as in aws_launch_template.a100["x"].id.
func (m *tfModule) launchTemplateName(body *hclsyntax.Body, lt *tfResource) (string, error) {
	var keys []string
	hclsyntax.VisitAll(body, func(n hclsyntax.Node) hcl.Diagnostics {
		e, ok := n.(*hclsyntax.ScopeTraversalExpr)
		if !ok || e.Traversal.RootName() != lt.typ || len(e.Traversal) < 3 {
			return nil
		}
		if attr, ok := e.Traversal[1].(hcl.TraverseAttr); !ok || attr.Name != lt.name {
			return nil
		}
		if idx, ok := e.Traversal[2].(hcl.TraverseIndex); ok && idx.Key.Type() == cty.String && !slices.Contains(keys, idx.Key.AsString()) {
			keys = append(keys, idx.Key.AsString())
		}
		return nil
	})
	child := *m
	switch len(keys) {
	case 0:
	case 1:
		child.ctx = m.ctx.NewChild()
		child.ctx.Variables = map[string]cty.Value{"each": cty.ObjectVal(map[string]cty.Value{"key": cty.StringVal(keys[0])})}
	default:
		return "", fmt.Errorf("referred to with several keys: %v", keys)
	}
	return child.str(attrExpr(lt.body, "name"))
}

// TestPhillyFairExample: examples/philly-fair.hcl has exactly the pools and
// prices of the shared benchmark's fair-philly.hcl and its simulate block,
// and the policy blocks (forecast, drain, limits, controller) of
// examples/local.hcl, so that a comparison on it is the benchmark's with
// the project's own settings.
func TestPhillyFairExample(t *testing.T) {
	const shared = "../../shared/bench/fair-philly.hcl"
	if _, err := os.Stat(shared); err != nil {
		t.Skipf("%s not found; it lives in ../shared beside the repository", shared)
	}
	load := func(path string) *config.Config {
		cfg, diags := registry.Load(path)
		if diags.HasErrors() {
			t.Fatalf("%s: %s", path, diags.Error())
		}
		return cfg
	}
	ours, bench, local := load(filepath.Join(examplesDir, "philly-fair.hcl")), load(shared), load(filepath.Join(examplesDir, "local.hcl"))
	if !slices.EqualFunc(ours.Pools, bench.Pools, func(a, b fleet.Pool) bool { return fmt.Sprint(a) == fmt.Sprint(b) }) {
		t.Errorf("pools differ from %s:\n ours  %+v\n bench %+v", shared, ours.Pools, bench.Pools)
	}
	if ours.Simulate != bench.Simulate {
		t.Errorf("simulate block differs from %s: %+v, %+v", shared, ours.Simulate, bench.Simulate)
	}
	for _, b := range []struct {
		name       string
		ours, want any
	}{
		{"forecast", ours.Forecast, local.Forecast},
		{"drain", ours.Drain, local.Drain},
		{"limits", ours.Limits, local.Limits},
		{"controller", ours.Controller, local.Controller},
	} {
		if fmt.Sprint(b.ours) != fmt.Sprint(b.want) {
			t.Errorf("%s block differs from examples/local.hcl's:\n ours  %+v\n local %+v", b.name, b.ours, b.want)
		}
	}
}

// TestSlurmExample: examples/slurm/fleet.hcl reads the cluster's
// slurm.conf, its H100 pools serve partition train and its L4 pool
// partition dev, and it is formatted as hclfmt would.
func TestSlurmExample(t *testing.T) {
	path := filepath.Join(examplesDir, "slurm", "fleet.hcl")
	cfg, diags := registry.Load(path)
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	if cfg.Slurm == nil || cfg.Slurm.Conf != "/etc/slurm/slurm.conf" {
		t.Fatalf("slurm block %+v", cfg.Slurm)
	}
	got := map[string]string{}
	for _, p := range cfg.Pools {
		got[p.Name] = strings.Join(p.Partitions, ",") + " " + p.GPUModel
	}
	want := map[string]string{"h100-reserved": "train H100", "h100-spot": "train H100", "h100-od": "train H100", "l4-od": "dev L4"}
	if !maps.Equal(got, want) {
		t.Errorf("pools' partitions and models %v, want %v", got, want)
	}
	src, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if msg := unformatted(path, src); msg != "" {
		t.Error(msg)
	}
}

// moduleName is a Terraform module's directory under terraformDir
// ("aws", "aws/controller"), a subtest's name.
func moduleName(dir string) string {
	rel, err := filepath.Rel(terraformDir, dir)
	if err != nil {
		return filepath.Base(dir)
	}
	return filepath.ToSlash(rel)
}
