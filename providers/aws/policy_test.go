package aws

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclparse"
	"github.com/hashicorp/hcl/v2/hclsyntax"
	"github.com/zclconf/go-cty/cty"
	"github.com/zclconf/go-cty/cty/function"
	"github.com/zclconf/go-cty/cty/function/stdlib"

	"github.com/fleetcast/autoscaler/fleet"
	"github.com/fleetcast/autoscaler/providers"
)

// policy is the least-privilege IAM policy shipped in iam-policy.json.
type policy struct {
	Version   string
	Statement []struct {
		Sid       string
		Effect    string
		Action    stringOrList
		Resource  stringOrList
		Condition map[string]map[string]string
	}
}

// stringOrList is an IAM field that is a string or a list of strings.
type stringOrList []string

func (s *stringOrList) UnmarshalJSON(b []byte) error {
	var one string
	if json.Unmarshal(b, &one) == nil {
		*s = []string{one}
		return nil
	}
	return json.Unmarshal(b, (*[]string)(s))
}

func readPolicy(t *testing.T) policy {
	t.Helper()
	b, err := os.ReadFile("iam-policy.json")
	if err != nil {
		t.Fatal(err)
	}
	var p policy
	d := json.NewDecoder(strings.NewReader(string(b)))
	d.DisallowUnknownFields()
	if err := d.Decode(&p); err != nil {
		t.Fatalf("iam-policy.json: %v", err)
	}
	return p
}

// allowed reports whether the policy allows an action ("ec2:RunInstances").
func (p policy) allowed(action string) bool {
	for _, s := range p.Statement {
		if s.Effect == "Allow" && slices.Contains(s.Action, action) {
			return true
		}
	}
	return false
}

func readOnly(action string) bool {
	_, name, _ := strings.Cut(action, ":")
	return strings.HasPrefix(name, "Describe") || strings.HasPrefix(name, "Get") || strings.HasPrefix(name, "List")
}

// TestPolicyIsLeastPrivilege: no statement allows a changing action on
// every resource, and every changing action on instances or groups is
// conditioned on Fleetcast's ownership tag (or on launching, for tags).
func TestPolicyIsLeastPrivilege(t *testing.T) {
	p := readPolicy(t)
	if p.Version != "2012-10-17" {
		t.Errorf("Version %q", p.Version)
	}
	for _, s := range p.Statement {
		for _, a := range s.Action {
			if strings.Contains(a, "*") {
				t.Errorf("statement %s allows a wildcard action %s", s.Sid, a)
			}
			if readOnly(a) {
				continue
			}
			if slices.Contains(s.Resource, "*") {
				t.Errorf("statement %s allows changing action %s on Resource \"*\"", s.Sid, a)
			}
		}
		if s.Sid == "ScaleOnlyFleetcastGroups" || s.Sid == "TerminateOnlyFleetcastInstances" || s.Sid == "RunOnlyTaggedInstances" {
			cond := s.Condition["StringEquals"]
			if cond["aws:ResourceTag/"+TagManaged] != "true" && cond["aws:RequestTag/"+TagManaged] != "true" {
				t.Errorf("statement %s is not conditioned on %s=true: %v", s.Sid, TagManaged, s.Condition)
			}
		}
	}
}

// TestPolicyCoversCalls: every AWS call in the provider's source, and
// every call a full run of the provider makes against the local server, is
// allowed by the policy.
func TestPolicyCoversCalls(t *testing.T) {
	p := readPolicy(t)
	files, _ := filepath.Glob("*.go")
	call := regexp.MustCompile(`c\.(asg|ec2)\.([A-Z]\w+)\(|(autoscaling|ec2)\.New(\w+)Paginator\(`)
	seen := 0
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		src, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range call.FindAllStringSubmatch(string(src), -1) {
			svc, op := m[1], m[2]
			if svc == "" {
				svc, op = m[3], m[4]
			}
			if svc == "asg" {
				svc = "autoscaling"
			}
			seen++
			if !p.allowed(svc + ":" + op) {
				t.Errorf("%s calls %s:%s, which iam-policy.json does not allow", f, svc, op)
			}
		}
	}
	if seen < 10 {
		t.Fatalf("found only %d AWS calls in the source: the pattern is stale", seen)
	}

	// The calls a run makes: both pool kinds, every method.
	e := newEnv(t)
	ctx := context.Background()
	lt := e.fix.template(t, "gpu", "p4d.24xlarge")
	e.fix.group(t, "g", lt, "p", 0, 4, 1)
	for _, pool := range []fleet.Pool{e.asgPool("p", "g", 4), e.ec2Pool("s", lt, fleet.Spot)} {
		g, err := e.p.Describe(ctx, pool)
		if err != nil {
			t.Fatal(err)
		}
		if err := e.p.Launch(ctx, pool, providers.LaunchRequest{Count: 1, Target: g.Target + 1, Key: "k-" + pool.Name}); err != nil {
			t.Fatal(err)
		}
		g, err = e.p.Describe(ctx, pool)
		if err != nil {
			t.Fatal(err)
		}
		if err := e.p.SetProtected(ctx, pool, []string{g.Instances[0].ID}, true); err != nil {
			t.Fatal(err)
		}
		if err := e.p.Terminate(ctx, pool, []string{g.Instances[0].ID}); err != nil {
			t.Fatal(err)
		}
		if _, err := e.p.Facts(ctx, pool); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := e.p.SpotPrice(ctx, e.ec2Pool("s", lt, fleet.Spot)); err != nil {
		t.Fatal(err)
	}
	for _, a := range e.proxy.Actions() {
		if !p.allowed(a) {
			t.Errorf("the provider called %s, which iam-policy.json does not allow", a)
		}
	}
}

// terraformDir is the Terraform that makes the controller's role.
const terraformDir = "../../examples/terraform/aws"

// tfResource is a resource block of the Terraform.
type tfResource struct {
	typ, name string
	body      *hclsyntax.Body
}

func (r tfResource) String() string {
	return fmt.Sprintf("%s.%s (%s:%d)", r.typ, r.name, r.body.SrcRange.Filename, r.body.SrcRange.Start.Line)
}

// refersTo returns the names of the resources of type typ that expr refers
// to, as in aws_iam_role.controller.name.
func refersTo(expr hclsyntax.Expression, typ string) []string {
	var names []string
	for _, trav := range expr.Variables() {
		if trav.RootName() == typ && len(trav) > 1 {
			if attr, ok := trav[1].(hcl.TraverseAttr); ok && !slices.Contains(names, attr.Name) {
				names = append(names, attr.Name)
			}
		}
	}
	return names
}

// terraformPolicy is the copy of iam-policy.json that the Terraform reads,
// in its own directory so that the module works wherever it is copied.
const terraformPolicy = terraformDir + "/iam-policy.json"

// TestTerraformPolicyIsCopy: the Terraform's iam-policy.json is this
// package's, byte for byte, so the role it makes allows exactly what the
// provider's tests check against the calls it makes.
func TestTerraformPolicyIsCopy(t *testing.T) {
	want, err := os.ReadFile("iam-policy.json")
	if err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(terraformPolicy)
	if err != nil {
		t.Fatalf("the Terraform's copy of the policy: %v (cp providers/aws/iam-policy.json examples/terraform/aws/)", err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("examples/terraform/aws/iam-policy.json differs from providers/aws/iam-policy.json: the controller's role would not allow what the provider calls; copy it again (cp providers/aws/iam-policy.json examples/terraform/aws/)")
	}
}

// TestTerraformUsesPolicy: the controller's role in examples/terraform/aws,
// behind the instance profile its output controller_instance_profile_name
// names, may be assumed by EC2 and is used by nothing else, and its only
// policy is the module's iam-policy.json, read with file(): the copy of
// this package's that TestTerraformPolicyIsCopy keeps equal, so the role
// cannot drift from what the provider calls.
func TestTerraformUsesPolicy(t *testing.T) {
	files, err := filepath.Glob(filepath.Join(terraformDir, "*.tf"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no .tf files in %s (%v)", terraformDir, err)
	}
	// The changing actions: a copy of the policy would name them; nothing
	// else in the Terraform (a node's role, say) needs them.
	var actions []string
	for _, s := range readPolicy(t).Statement {
		for _, a := range s.Action {
			if !readOnly(a) && !slices.Contains(actions, a) {
				actions = append(actions, a)
			}
		}
	}
	parser := hclparse.NewParser()
	byType := map[string][]tfResource{}
	var profileOutput hclsyntax.Expression
	for _, path := range files {
		f, diags := parser.ParseHCLFile(path)
		if diags.HasErrors() {
			t.Fatalf("%s: %s", path, diags.Error())
		}
		for _, b := range f.Body.(*hclsyntax.Body).Blocks {
			switch {
			case b.Type == "resource" && len(b.Labels) == 2:
				byType[b.Labels[0]] = append(byType[b.Labels[0]], tfResource{typ: b.Labels[0], name: b.Labels[1], body: b.Body})
			case b.Type == "output" && len(b.Labels) == 1 && b.Labels[0] == "controller_instance_profile_name":
				if attr, ok := b.Body.Attributes["value"]; ok {
					profileOutput = attr.Expr
				}
			}
		}
		// A second copy, inline, would say what the policy allows.
		for _, a := range actions {
			if strings.Contains(string(f.Bytes), a) {
				t.Errorf("%s names %s: the controller's policy is iam-policy.json, read with file(), not written inline", path, a)
			}
		}
	}
	if jsons, _ := filepath.Glob(filepath.Join(terraformDir, "*.json")); !slices.Equal(jsons, []string{filepath.Clean(terraformPolicy)}) {
		t.Errorf("%s holds %v: want iam-policy.json alone, the copy of providers/aws/iam-policy.json", terraformDir, jsons)
	}

	// The controller's instance profile is the one its output names.
	if profileOutput == nil {
		t.Fatalf("%s has no output controller_instance_profile_name with a value", terraformDir)
	}
	names := refersTo(profileOutput, "aws_iam_instance_profile")
	if len(names) != 1 {
		t.Fatalf("output controller_instance_profile_name must refer to one aws_iam_instance_profile, refers to %v", names)
	}
	pi := slices.IndexFunc(byType["aws_iam_instance_profile"], func(r tfResource) bool { return r.name == names[0] })
	if pi < 0 {
		t.Fatalf("output controller_instance_profile_name refers to aws_iam_instance_profile.%s, which %s does not define", names[0], terraformDir)
	}
	profile := byType["aws_iam_instance_profile"][pi]
	var roles []string
	if attr, ok := profile.body.Attributes["role"]; ok {
		roles = refersTo(attr.Expr, "aws_iam_role")
	}
	if len(roles) != 1 {
		t.Fatalf("%s: role must refer to one aws_iam_role, refers to %v", profile, roles)
	}
	role := roles[0]
	i := slices.IndexFunc(byType["aws_iam_role"], func(r tfResource) bool { return r.name == role })
	if i < 0 {
		t.Fatalf("%s: refers to aws_iam_role.%s, which %s does not define", profile, role, terraformDir)
	}
	// The controller's role is never a node's: no other profile has it, and
	// no resource (a launch template) uses its profile.
	for _, rs := range byType {
		for _, r := range rs {
			if r.typ == "aws_iam_instance_profile" && r.name != profile.name {
				if attr, ok := r.body.Attributes["role"]; ok && slices.Contains(refersTo(attr.Expr, "aws_iam_role"), role) {
					t.Errorf("%s also has the controller's role aws_iam_role.%s", r, role)
				}
			}
			if r.typ == profile.typ && r.name == profile.name {
				continue
			}
			hclsyntax.VisitAll(r.body, func(n hclsyntax.Node) hcl.Diagnostics {
				if e, ok := n.(*hclsyntax.ScopeTraversalExpr); ok && slices.Contains(refersTo(e, profile.typ), profile.name) {
					t.Errorf("%s uses the controller's instance profile (%s): it is the controller's alone", r, profile)
				}
				return nil
			})
		}
	}
	checkAssumedByEC2(t, byType["aws_iam_role"][i])
	for _, attr := range []string{"inline_policy", "managed_policy_arns"} {
		_, isAttr := byType["aws_iam_role"][i].body.Attributes[attr]
		if isAttr || slices.ContainsFunc(byType["aws_iam_role"][i].body.Blocks, func(b *hclsyntax.Block) bool { return b.Type == attr }) {
			t.Errorf("%s sets %s: its only policy is iam-policy.json", byType["aws_iam_role"][i], attr)
		}
	}

	// Every policy of the role: exactly one, an inline policy read from
	// iam-policy.json.
	inline := 0
	for typ, rs := range byType {
		for _, r := range rs {
			attr, ok := r.body.Attributes["role"]
			if !ok || !slices.Contains(refersTo(attr.Expr, "aws_iam_role"), role) || typ == "aws_iam_instance_profile" {
				continue
			}
			if typ != "aws_iam_role_policy" {
				t.Errorf("%s gives the controller's role more than iam-policy.json", r)
				continue
			}
			inline++
			checkPolicyFile(t, r)
		}
	}
	if inline != 1 {
		t.Errorf("the controller's role aws_iam_role.%s has %d aws_iam_role_policy resources; want 1, read from iam-policy.json", role, inline)
	}
}

// checkPolicyFile checks that r's policy is file(PATH), where PATH, with
// path.module the Terraform's directory, is this package's iam-policy.json.
func checkPolicyFile(t *testing.T, r tfResource) {
	t.Helper()
	var call *hclsyntax.FunctionCallExpr
	if attr, ok := r.body.Attributes["policy"]; ok {
		call, _ = attr.Expr.(*hclsyntax.FunctionCallExpr)
	}
	if call == nil || call.Name != "file" || len(call.Args) != 1 {
		t.Errorf("%s: policy must be file(\"${path.module}/iam-policy.json\")", r)
		return
	}
	ctx := &hcl.EvalContext{Variables: map[string]cty.Value{"path": cty.ObjectVal(map[string]cty.Value{"module": cty.StringVal(terraformDir)})}}
	v, diags := call.Args[0].Value(ctx)
	if diags.HasErrors() || v.Type() != cty.String {
		t.Errorf("%s: the policy's path is not a string of path.module and literals: %s", r, diags.Error())
		return
	}
	got, err := os.Stat(v.AsString())
	if err != nil {
		t.Errorf("%s: policy reads %s: %v", r, v.AsString(), err)
		return
	}
	want, err := os.Stat(terraformPolicy)
	if err != nil {
		t.Fatal(err)
	}
	if !os.SameFile(got, want) {
		t.Errorf("%s: policy reads %s, not the module's iam-policy.json (the copy of providers/aws/iam-policy.json)", r, v.AsString())
	}
}

// checkAssumedByEC2 checks that role r may be assumed by EC2 (its instance
// profile's instances) and by nothing else.
func checkAssumedByEC2(t *testing.T, r tfResource) {
	t.Helper()
	attr, ok := r.body.Attributes["assume_role_policy"]
	if !ok {
		t.Fatalf("%s has no assume_role_policy", r)
	}
	ctx := &hcl.EvalContext{Functions: map[string]function.Function{"jsonencode": stdlib.JSONEncodeFunc}}
	v, diags := attr.Expr.Value(ctx)
	if diags.HasErrors() || v.Type() != cty.String {
		t.Fatalf("%s: assume_role_policy must be jsonencode of literals: %s", r, diags.Error())
	}
	var doc struct {
		Statement []struct {
			Effect    string
			Action    stringOrList
			Principal struct{ Service stringOrList }
		}
	}
	if err := json.Unmarshal([]byte(v.AsString()), &doc); err != nil {
		t.Fatalf("%s: assume_role_policy: %v", r, err)
	}
	if len(doc.Statement) != 1 {
		t.Fatalf("%s: assume_role_policy has %d statements; want 1", r, len(doc.Statement))
	}
	s := doc.Statement[0]
	if s.Effect != "Allow" || !slices.Equal(s.Action, []string{"sts:AssumeRole"}) || !slices.Equal(s.Principal.Service, []string{"ec2.amazonaws.com"}) {
		t.Errorf("%s: assume_role_policy %s; want ec2.amazonaws.com allowed sts:AssumeRole, and no more", r, v.AsString())
	}
}
