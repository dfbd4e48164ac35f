package layout

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
)

const module = "github.com/fleetcast/autoscaler/"

// layersDoc is the page whose table of layers places every package of
// the module: a package may import only packages of lower layers. A
// package not in the table fails the test: place it there.
const layersDoc = "docs/architecture.md"

// readLayers reads the table of layers from layersDoc: its rows
// "| N | what | `pkg`, `pkg` |", under the heading "### Layers".
func readLayers(t *testing.T) map[string]int {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", layersDoc))
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(b), "\n### Layers\n")
	if !ok {
		t.Fatalf("%s has no \"### Layers\" section", layersDoc)
	}
	row := regexp.MustCompile("^\\| (\\d+) \\|[^|]*\\|(.*)\\|$")
	pkg := regexp.MustCompile("`([^`]+)`")
	layers := map[string]int{}
	for _, line := range strings.Split(section, "\n") {
		if strings.HasPrefix(line, "#") {
			break
		}
		m := row.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		n, _ := strconv.Atoi(m[1])
		for _, p := range pkg.FindAllStringSubmatch(m[2], -1) {
			if at, ok := layers[p[1]]; ok {
				t.Errorf("%s: %s is in layers %d and %d", layersDoc, p[1], at, n)
			}
			layers[p[1]] = n
		}
	}
	if len(layers) < 10 {
		t.Fatalf("%s: %d packages in its table of layers; is the table there?", layersDoc, len(layers))
	}
	return layers
}

// forbidden are edges the layers allow that must not come back: each
// part reaches what is above or beside it through an interface instead.
var forbidden = map[string][]string{
	// The simulated fleet drives simulate's cluster; the controller is
	// wired to it by the binary.
	"simfleet": {"controller"},
	// Node credentials ask a pool's provider (a capability), not a cloud's
	// package.
	"nodeauth": {"providers/aws", "providers/gcp", "providers/plugin", "providers/sim"},
}

// TestImportsPointDown: every package of the module imports only packages
// of lower layers (test files aside), and none of the forbidden edges.
func TestImportsPointDown(t *testing.T) {
	layers := readLayers(t)
	cmd := exec.Command("go", "list", "-f", "{{.ImportPath}} {{join .Imports \" \"}}", "./...")
	cmd.Dir = filepath.Join("..", "..")
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		fields := strings.Fields(line)
		pkg := strings.TrimPrefix(fields[0], module)
		from, ok := layers[pkg]
		if !ok {
			t.Errorf("%s is in no layer: place it in the table of layers in %s", pkg, layersDoc)
			continue
		}
		for _, imp := range fields[1:] {
			if !strings.HasPrefix(imp, module) {
				continue
			}
			imp = strings.TrimPrefix(imp, module)
			to, ok := layers[imp]
			switch {
			case !ok:
				t.Errorf("%s imports %s, which is in no layer", pkg, imp)
			case to >= from:
				t.Errorf("%s (layer %d) imports %s (layer %d): imports point down only", pkg, from, imp, to)
			}
			for _, f := range forbidden[pkg] {
				if imp == f {
					t.Errorf("%s imports %s, a forbidden edge", pkg, imp)
				}
			}
		}
	}
}

// knowsConfig are the only packages that may depend on package config:
// the wiring (daemon, cmd/autoscaler), the registry and the providers'
// block decoders. Every other part takes its own typed settings (package
// fleet's, or a provider's), so it can be built and tested without a
// config file.
var knowsConfig = []string{"config", "daemon", "cmd/autoscaler", "providers/registry",
	"providers/aws/awsconfig", "providers/gcp/gcpconfig", "providers/plugin/pluginconfig", "providers/sim/simconfig"}

// plainValues are the pure parts: they take plain values and link no
// HCL at all.
var plainValues = []string{"planner", "forecast"}

// TestPartsTakeSettings: no package but those of knowsConfig depends on
// package config, directly or through what it imports (tests aside), and
// no package of plainValues on the HCL stack.
func TestPartsTakeSettings(t *testing.T) {
	cmd := exec.Command("go", "list", "-f", "{{.ImportPath}}{{range .Deps}} {{.}}{{end}}", "./...")
	cmd.Dir = filepath.Join("..", "..")
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	if len(lines) < 10 {
		t.Fatalf("go list listed %d packages", len(lines))
	}
	for _, line := range lines {
		fields := strings.Fields(line)
		p := strings.TrimPrefix(fields[0], module)
		for _, dep := range fields[1:] {
			switch {
			case dep == module+"config" && !slices.Contains(knowsConfig, p):
				t.Errorf("%s depends on %s: give it typed settings instead (or, if it wires the config, list it in knowsConfig)", p, dep)
			case slices.Contains(plainValues, p) && (strings.Contains(dep, "/hcl") || strings.Contains(dep, "go-cty")):
				t.Errorf("%s depends on %s: it takes plain values", p, dep)
			}
		}
	}
}

// TestOnlyTheAgentNeedsCgo: of the binaries, only the agent's depends on a
// package with cgo (go-nvml) beyond the standard library's optional ones;
// the controller's builds with CGO_ENABLED=0 into a static binary (make
// release).
func TestOnlyTheAgentNeedsCgo(t *testing.T) {
	if pkgs := cgoDeps(t, "./cmd/autoscaler"); len(pkgs) > 0 {
		t.Errorf("cmd/autoscaler depends on packages with cgo: %v; only the agent (cmd/autoscaler-agent) may", pkgs)
	}
	if pkgs := cgoDeps(t, "./cmd/autoscaler-agent"); !slices.Contains(pkgs, "github.com/NVIDIA/go-nvml/pkg/nvml") {
		t.Errorf("the agent's cgo packages are %v; want go-nvml's among them: is this test still looking?", pkgs)
	}
}

// cgoDeps are the packages pkg depends on that have cgo files, but for
// the standard library's, which build without cgo too (runtime/cgo, net,
// os/user).
func cgoDeps(t *testing.T, pkg string) []string {
	t.Helper()
	cmd := exec.Command("go", "list", "-deps", "-f", "{{.ImportPath}} {{len .CgoFiles}}", pkg)
	cmd.Dir = filepath.Join("..", "..")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=1")
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list %s: %v", pkg, err)
	}
	var pkgs []string
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		if p, n, _ := strings.Cut(line, " "); n != "0" && !strings.HasPrefix(p, "runtime/cgo") && !strings.HasPrefix(p, "net") && !strings.HasPrefix(p, "os/user") {
			pkgs = append(pkgs, p)
		}
	}
	return pkgs
}
