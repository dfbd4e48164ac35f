package config_test

import (
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"
	"github.com/zclconf/go-cty/cty"
)

// secretKinds are the Terraform resources that hold the controller's API
// tokens, one per scope, by module.
var secretKinds = map[string]string{"aws": "aws_secretsmanager_secret", "gcp": "google_secret_manager_secret"}

// TestExamplesTerraformAPITokens: each cloud's Terraform keeps the API
// tokens in its secret store, one secret per scope and never a value;
// the scheduler may read the demand token alone, monitoring the read
// token alone, and nothing it grants reaches the operator token.
func TestExamplesTerraformAPITokens(t *testing.T) {
	for _, m := range loadModules(t) {
		cloud := filepath.Base(m.dir)
		typ, ok := secretKinds[cloud]
		if !ok {
			continue
		}
		t.Run(cloud, func(t *testing.T) {
			secret := m.resource(typ, "api_token")
			if secret == nil {
				t.Fatalf("no %s.api_token", typ)
			}
			if _, ok := secret.body.Attributes["for_each"]; !ok {
				t.Errorf("%s: want one secret per scope (for_each over local.api_token_scopes)", secret)
			}
			if got := m.localStrings(t, "api_token_scopes"); !slices.Equal(got, []string{"operator", "demand", "read"}) {
				t.Errorf("local.api_token_scopes = %v, want the three scopes", got)
			}
			for _, r := range m.resources {
				if strings.HasSuffix(r.typ, "_secret_version") {
					t.Errorf("%s: a token's value in Terraform would be in its state; an operator puts it", r)
				}
			}
			want := map[string]string{"scheduler_api_token": "demand", "monitoring_api_token": "read"}
			granted := map[string]bool{}
			for _, r := range m.resources {
				if r.typ == typ {
					continue
				}
				scopes := secretScopes(r.body, typ)
				if len(scopes) == 0 {
					continue
				}
				scope, named := want[r.name]
				if !named || len(scopes) != 1 || scopes[0] != scope {
					t.Errorf("%s grants the API token secrets %v; only scheduler_api_token (demand) and monitoring_api_token (read) may grant one, one each", r, scopes)
					continue
				}
				granted[r.name] = true
			}
			for name := range want {
				if !granted[name] {
					t.Errorf("no resource %s grants its token's secret", name)
				}
			}
			// Nothing else grants secrets by name or wildcard (an ARN
			// pattern, a project-wide accessor role).
			for _, r := range m.resources {
				text := strings.ToLower(m.text(r))
				if r.typ != typ && want[r.name] == "" && (strings.Contains(text, "secretsmanager") || strings.Contains(text, "secretmanager")) {
					t.Errorf("%s grants access to secrets: only scheduler_api_token and monitoring_api_token may, each to its token", r)
				}
			}
		})
	}
}

// secretScopes are the keys of typ.api_token["KEY"] that body refers to.
func secretScopes(body *hclsyntax.Body, typ string) []string {
	var out []string
	hclsyntax.VisitAll(body, func(n hclsyntax.Node) hcl.Diagnostics {
		e, ok := n.(*hclsyntax.ScopeTraversalExpr)
		if !ok || len(e.Traversal) < 3 || e.Traversal.RootName() != typ {
			return nil
		}
		if a, ok := e.Traversal[1].(hcl.TraverseAttr); !ok || a.Name != "api_token" {
			return nil
		}
		key := "(any)"
		if ix, ok := e.Traversal[2].(hcl.TraverseIndex); ok && ix.Key.Type() == cty.String {
			key = ix.Key.AsString()
		}
		if !slices.Contains(out, key) {
			out = append(out, key)
		}
		return nil
	})
	return out
}

// localStrings is the value of the module's local name, a list of
// literal strings.
func (m *tfModule) localStrings(t *testing.T, name string) []string {
	t.Helper()
	for _, f := range m.files {
		for _, b := range f.Body.(*hclsyntax.Body).Blocks {
			if b.Type != "locals" {
				continue
			}
			if a, ok := b.Body.Attributes[name]; ok {
				v, diags := a.Expr.Value(nil)
				if diags.HasErrors() || !v.CanIterateElements() {
					t.Fatalf("local.%s: want a list of strings: %s", name, diags.Error())
				}
				var out []string
				for _, e := range v.AsValueSlice() {
					if e.Type() != cty.String {
						t.Fatalf("local.%s: want strings, has %s", name, e.Type().FriendlyName())
					}
					out = append(out, e.AsString())
				}
				return out
			}
		}
	}
	return nil
}

// text is r's source text.
func (m *tfModule) text(r *tfResource) string {
	for _, f := range m.files {
		if f.Body.(*hclsyntax.Body).SrcRange.Filename == r.body.SrcRange.Filename {
			return string(r.body.SrcRange.SliceBytes(f.Bytes))
		}
	}
	return ""
}
