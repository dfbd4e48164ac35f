package gcp

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/hashicorp/hcl/v2/hclparse"
	"github.com/hashicorp/hcl/v2/hclsyntax"

	"github.com/fleetcast/autoscaler/fleet"
	"github.com/fleetcast/autoscaler/internal/gcptest"
	"github.com/fleetcast/autoscaler/providers"
)

// role is the controller's custom role, controller-role.json.
type role struct {
	Title, Description string
	Permissions        []string
}

func readRole(t *testing.T) role {
	t.Helper()
	b, err := os.ReadFile("controller-role.json")
	if err != nil {
		t.Fatal(err)
	}
	var r role
	d := json.NewDecoder(strings.NewReader(string(b)))
	d.DisallowUnknownFields()
	if err := d.Decode(&r); err != nil {
		t.Fatalf("controller-role.json: %v", err)
	}
	return r
}

// TestRoleCoversCalls: every Compute Engine call in the provider's
// source, and every call a run of the provider makes (zonal and regional
// groups, every method), needs a permission of the role; and the role
// holds nothing else, and no wildcard.
func TestRoleCoversCalls(t *testing.T) {
	r := readRole(t)
	used := map[string]bool{}
	need := func(where, perm string) {
		used[perm] = true
		if !slices.Contains(r.Permissions, perm) {
			t.Errorf("%s needs %s, which controller-role.json does not grant", where, perm)
		}
	}
	// The source: each client method called, and the clients made.
	call := regexp.MustCompile(`g\.c\.(zonal|regional|instances)\.([A-Z]\w+)\(|compute\.New(\w+)RESTClient\(`)
	perms := map[string]string{
		"zonal.Get": "compute.instanceGroupManagers.get", "regional.Get": "compute.instanceGroupManagers.get",
		"zonal.ListManagedInstances": "compute.instanceGroupManagers.get", "regional.ListManagedInstances": "compute.instanceGroupManagers.get",
		"zonal.Resize": "compute.instanceGroupManagers.update", "regional.Resize": "compute.instanceGroupManagers.update",
		"zonal.DeleteInstances": "compute.instanceGroupManagers.update", "regional.DeleteInstances": "compute.instanceGroupManagers.update",
		"instances.Get":             "compute.instances.get",
		"new.InstanceGroupManagers": "", "new.RegionInstanceGroupManagers": "", "new.Instances": "",
		"new.MachineTypes": "compute.machineTypes.get", "new.InstanceTemplates": "compute.instanceTemplates.get",
		"new.RegionInstanceTemplates": "compute.instanceTemplates.get", "new.Reservations": "compute.reservations.get",
	}
	seen := 0
	for _, f := range []string{"gcp.go", "mig.go", "facts.go"} {
		src, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range call.FindAllStringSubmatch(string(src), -1) {
			key := m[1] + "." + m[2]
			if m[3] != "" {
				key = "new." + m[3]
			}
			perm, ok := perms[key]
			if !ok {
				t.Errorf("%s calls %s, whose permission this test does not know: add it", f, key)
				continue
			}
			seen++
			if perm != "" {
				need(f+" ("+key+")", perm)
			}
		}
	}
	if seen < 10 {
		t.Fatalf("found only %d Compute Engine calls in the source: the pattern is stale", seen)
	}
	// A run: every method, zonal and regional, with operations to wait on.
	for _, s := range []Settings{{Project: "ml", Zone: "us-central1-a", MIG: "a100"}, {Project: "ml", Region: "us-central1", MIG: "a100"}} {
		f := gcptest.NewCompute(t)
		f.SetSlowOps(1)
		f.AddGroup(&gcptest.Group{Project: s.Project, Zone: s.Zone, Region: s.Region, Name: s.MIG,
			Template: "https://www.googleapis.com/compute/v1/projects/ml/global/instanceTemplates/a100-template"}, 1)
		f.AddGroup(&gcptest.Group{Project: s.Project, Zone: s.Zone, Region: s.Region, Name: "reserved",
			Template: "https://www.googleapis.com/compute/v1/projects/ml/global/instanceTemplates/reserved-template"}, 1)
		p := newTestProvider(t, f, nil)
		pool := migPool("gcp-a100", s)
		reserved := s
		reserved.MIG = "reserved"
		res := migPool("gcp-reserved", reserved)
		res.Capacity, res.Max = fleet.Reserved, 4
		ctx := context.Background()
		if err := p.Resolve(ctx, []fleet.Pool{pool, res}); err != nil {
			t.Fatal(err)
		}
		if err := p.Launch(ctx, pool, providers.LaunchRequest{Count: 1, Target: 2, Key: "k"}); err != nil {
			t.Fatal(err)
		}
		g, err := p.Describe(ctx, pool)
		if err != nil {
			t.Fatal(err)
		}
		if err := p.Terminate(ctx, pool, []string{g.Instances[0].ID}); err != nil {
			t.Fatal(err)
		}
		for _, perm := range f.Permissions() {
			need("a run against the fake", perm)
		}
	}
	for _, perm := range r.Permissions {
		if strings.Contains(perm, "*") || !used[perm] {
			t.Errorf("controller-role.json grants %s, which the provider never needs", perm)
		}
	}
}

// terraformRole is the copy of controller-role.json that the Terraform
// reads, in its own directory so that the module works wherever it is
// copied.
const terraformRole = "../../examples/terraform/gcp/controller-role.json"

// TestTerraformRoleIsCopy: the Terraform's controller-role.json is this
// package's, byte for byte, so the role it makes grants exactly what the
// provider's tests check against the calls it makes.
func TestTerraformRoleIsCopy(t *testing.T) {
	want, err := os.ReadFile("controller-role.json")
	if err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(terraformRole)
	if err != nil {
		t.Fatalf("the Terraform's copy of the role: %v (cp providers/gcp/controller-role.json examples/terraform/gcp/)", err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("examples/terraform/gcp/controller-role.json differs from providers/gcp/controller-role.json: the controller's role would not grant what the provider calls; copy it again (cp providers/gcp/controller-role.json examples/terraform/gcp/)")
	}
}

// TestTerraformUsesRole: the Terraform's custom role takes its
// permissions from the module's controller-role.json (the copy
// TestTerraformRoleIsCopy keeps equal to this package's), not from a list
// written inline, and is the controller's service account's.
func TestTerraformUsesRole(t *testing.T) {
	src, err := os.ReadFile("../../examples/terraform/gcp/controller.tf")
	if err != nil {
		t.Fatal(err)
	}
	file, diags := hclparse.NewParser().ParseHCL(src, "controller.tf")
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	var roleOK, memberOK, fileOK bool
	for _, b := range file.Body.(*hclsyntax.Body).Blocks {
		switch {
		case b.Type == "locals":
			if a, ok := b.Body.Attributes["controller_role"]; ok {
				text := string(a.Expr.Range().SliceBytes(src))
				fileOK = strings.Contains(text, `file("${path.module}/controller-role.json")`)
			}
		case b.Type == "resource" && len(b.Labels) == 2 && b.Labels[0] == "google_project_iam_custom_role":
			a, ok := b.Body.Attributes["permissions"]
			roleOK = ok && string(a.Expr.Range().SliceBytes(src)) == "local.controller_role.permissions"
		case b.Type == "resource" && len(b.Labels) == 2 && b.Labels[0] == "google_project_iam_member":
			a, ok := b.Body.Attributes["role"]
			m, okm := b.Body.Attributes["member"]
			memberOK = ok && okm && strings.Contains(string(a.Expr.Range().SliceBytes(src)), "google_project_iam_custom_role.controller") &&
				strings.Contains(string(m.Expr.Range().SliceBytes(src)), "google_service_account.controller.email")
		}
	}
	if !fileOK || !roleOK || !memberOK {
		t.Fatalf("controller.tf: role file read %v, permissions from it %v, granted to the controller's service account %v", fileOK, roleOK, memberOK)
	}
}
