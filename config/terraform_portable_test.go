package config_test

// The Terraform examples are meant to be copied out of the repository and
// applied from wherever they land, so everything a module reads from disk
// must be in its own directory.

import (
	"context"
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
	"time"

	"github.com/hashicorp/hcl/v2/hclsyntax"
)

// fileFunctions are Terraform's functions that read a file at a path given
// as their first argument.
var fileFunctions = []string{"file", "templatefile", "filebase64", "filemd5", "filesha1", "filesha256",
	"filesha512", "filebase64sha256", "filebase64sha512"}

// TestExamplesTerraformSelfContained copies each Terraform example to a
// directory of its own, as a user copying it out of the repository would,
// and checks that every file the module reads (file(), templatefile() and
// the like, with paths made of path.module and literals) is a file inside
// the copy. Where terraform is installed with a local mirror of the
// module's providers, `terraform init -plugin-dir` and `terraform validate`
// run in the copy too.
func TestExamplesTerraformSelfContained(t *testing.T) {
	byDir := map[string][]string{}
	for _, path := range terraformFiles(t, terraformDir) {
		byDir[filepath.Dir(path)] = append(byDir[filepath.Dir(path)], path)
	}
	if len(byDir) == 0 {
		t.Fatalf("no Terraform modules under %s", terraformDir)
	}
	for _, dir := range slices.Sorted(maps.Keys(byDir)) {
		t.Run(moduleName(dir), func(t *testing.T) {
			copyDir := filepath.Join(t.TempDir(), filepath.Base(dir))
			if err := copyModule(dir, copyDir); err != nil {
				t.Fatal(err)
			}
			paths, err := filepath.Glob(filepath.Join(copyDir, "*.tf"))
			if err != nil || len(paths) == 0 {
				t.Fatalf("no .tf files in the copy %s (%v)", copyDir, err)
			}
			slices.Sort(paths)
			m := loadModule(t, copyDir, paths, nil)
			read := 0
			for _, name := range fileFunctions {
				for _, call := range m.calls(name) {
					read++
					if err := m.readsInside(call, copyDir); err != nil {
						t.Errorf("%s: %s(): %v", tfPos(call.Range()), name, err)
					}
				}
			}
			if read == 0 {
				t.Fatalf("%s reads no file: the check has nothing to check", dir)
			}
			t.Run("terraform validate", func(t *testing.T) { terraformValidate(t, m, copyDir) })
		})
	}
}

// readsInside checks that the path call reads, evaluated with path.module
// the module's directory, is a regular file inside dir.
func (m *tfModule) readsInside(call *hclsyntax.FunctionCallExpr, dir string) error {
	if len(call.Args) == 0 {
		return errors.New("no path argument")
	}
	path, err := m.str(call.Args[0])
	if err != nil {
		return fmt.Errorf("the path must be path.module and literals: %w", err)
	}
	abs, err := filepath.Abs(filepath.Clean(path))
	if err != nil {
		return err
	}
	root, err := filepath.Abs(dir)
	if err != nil {
		return err
	}
	rel, err := filepath.Rel(root, abs)
	if err != nil || rel == ".." || strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
		return fmt.Errorf("reads %s, outside the module's directory (%s): a copy of the module elsewhere would not find it; keep the file in the module", abs, m.exprText(call.Args[0]))
	}
	info, err := os.Stat(abs)
	if err != nil {
		return fmt.Errorf("reads %s: %w", rel, err)
	}
	if !info.Mode().IsRegular() {
		return fmt.Errorf("reads %s, which is not a regular file", rel)
	}
	return nil
}

// exprText is expr's source text.
func (m *tfModule) exprText(expr hclsyntax.Expression) string {
	r := expr.Range()
	for _, f := range m.files {
		if f.Body.(*hclsyntax.Body).SrcRange.Filename == r.Filename {
			return string(r.SliceBytes(f.Bytes))
		}
	}
	return ""
}

// copyModule copies the regular files of the module in src (not
// Terraform's working directory, state or variable files) to dst.
func copyModule(src, dst string) error {
	return filepath.WalkDir(src, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(src, path)
		if err != nil {
			return err
		}
		name := d.Name()
		switch {
		case d.IsDir() && name == ".terraform":
			return filepath.SkipDir
		case d.IsDir():
			return os.MkdirAll(filepath.Join(dst, rel), 0o755)
		case !d.Type().IsRegular(), strings.HasPrefix(name, "terraform.tfstate"), name == ".terraform.lock.hcl",
			strings.HasSuffix(name, ".tfvars"):
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(dst, rel), b, info.Mode().Perm())
	})
}

// terraformValidate runs `terraform init -plugin-dir MIRROR` and
// `terraform validate` in dir, the copy of module m; it skips when
// terraform is not on PATH or no local mirror has every provider the
// module requires.
func terraformValidate(t *testing.T, m *tfModule, dir string) {
	bin, err := exec.LookPath("terraform")
	if err != nil {
		t.Skip("terraform is not on PATH; the check of the files the module reads stands in for terraform validate")
	}
	sources := m.requiredProviders(t)
	mirror, missing := providerMirror(sources)
	if mirror == "" {
		t.Skipf("no local provider mirror has %s (looked in %s); set FLEETCAST_TF_PLUGIN_DIR to one to run terraform validate",
			missing, strings.Join(mirrorCandidates(), ", "))
	}
	// No user CLI config (credentials, other mirrors, a plugin cache), no
	// update check: the run reads nothing but the copy and the mirror.
	rc := filepath.Join(t.TempDir(), "terraformrc")
	if err := os.WriteFile(rc, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	env := append(os.Environ(), "TF_CLI_CONFIG_FILE="+rc, "CHECKPOINT_DISABLE=1", "TF_IN_AUTOMATION=1", "TF_INPUT=0")
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	for _, args := range [][]string{
		{"init", "-input=false", "-backend=false", "-no-color", "-plugin-dir", mirror},
		{"validate", "-no-color"},
	} {
		cmd := exec.CommandContext(ctx, bin, args...)
		cmd.Dir, cmd.Env = dir, env
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("terraform %s in a copy of %s: %v\n%s", args[0], filepath.Base(m.dir), err, out)
		}
	}
}

// requiredProviders returns the source addresses of the providers the
// module's terraform { required_providers } block names, in full
// (registry.terraform.io/hashicorp/aws).
func (m *tfModule) requiredProviders(t *testing.T) []string {
	t.Helper()
	var out []string
	for _, f := range m.files {
		for _, tb := range blocksOf(f.Body.(*hclsyntax.Body), "terraform") {
			for _, rp := range blocksOf(tb.Body, "required_providers") {
				for name, attr := range rp.Body.Attributes {
					v, diags := attr.Expr.Value(nil)
					if diags.HasErrors() || !v.Type().IsObjectType() || !v.Type().HasAttribute("source") {
						t.Fatalf("%s: required_providers.%s: want an object with a source", tfPos(attr.SrcRange), name)
					}
					src := v.GetAttr("source").AsString()
					if strings.Count(src, "/") == 1 {
						src = "registry.terraform.io/" + src
					}
					out = append(out, strings.ToLower(src))
				}
			}
		}
	}
	if len(out) == 0 {
		t.Fatalf("%s requires no provider: want a required_providers block", m.dir)
	}
	slices.Sort(out)
	return out
}

// mirrorCandidates are the directories looked in for a local provider
// mirror: $FLEETCAST_TF_PLUGIN_DIR, Terraform's own implied local mirror
// directories on Linux, and /opt/tf-plugins.
func mirrorCandidates() []string {
	var dirs []string
	if d := os.Getenv("FLEETCAST_TF_PLUGIN_DIR"); d != "" {
		dirs = append(dirs, d)
	}
	if home, err := os.UserHomeDir(); err == nil {
		dirs = append(dirs, filepath.Join(home, ".terraform.d", "plugins"))
		data := os.Getenv("XDG_DATA_HOME")
		if data == "" {
			data = filepath.Join(home, ".local", "share")
		}
		dirs = append(dirs, filepath.Join(data, "terraform", "plugins"))
	}
	return append(dirs, "/usr/local/share/terraform/plugins", "/usr/share/terraform/plugins", "/opt/tf-plugins")
}

// providerMirror returns the first candidate directory that holds every
// provider in sources (in the HOST/NAMESPACE/TYPE layout), or "" and what
// no candidate holds.
func providerMirror(sources []string) (dir, missing string) {
	has := func(d, src string) bool {
		info, err := os.Stat(filepath.Join(d, filepath.FromSlash(src)))
		return err == nil && info.IsDir()
	}
	candidates := mirrorCandidates()
	for _, d := range candidates {
		if !slices.ContainsFunc(sources, func(src string) bool { return !has(d, src) }) {
			return d, ""
		}
	}
	for _, src := range sources {
		if !slices.ContainsFunc(candidates, func(d string) bool { return has(d, src) }) {
			return "", src
		}
	}
	return "", strings.Join(sources, " and ") + " together"
}
