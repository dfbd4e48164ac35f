package layout

import (
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

const module = "github.com/fleetcast/autoscaler/"

// layers places every package of the module: a package may import only
// packages of lower layers. From the bottom: the vocabulary and the
// records (0); the formats and the interfaces every part speaks (1); the
// parts (2); what assembles parts into a decision loop, an actuator or
// the credentials, and the providers' config blocks (3); the runners, the
// live controller and the simulator, and the list of providers (4); what
// runs them on something (the simulated fleet, examples, scripts: 5); the
// running controller, wired from a config (6); and the binary, which
// parses flags and prints (7). A package not in the table fails the test:
// place it.
var layers = map[string]int{
	"fleet": 0, "state": 0, "internal/secretfile": 0, "internal/testpki": 0, "internal/gcptest": 0,
	"internal/metadatamock": 0, "internal/mototest": 0, "internal/proctest": 0, "internal/layout": 0, "internal/golden": 0, "internal/checksum": 0,
	"providers/plugin/proto": 0,

	"forecast": 1, "trace": 1, "config": 1, "agent/report": 1, "providers": 1, "internal/identitytest": 1,

	"planner": 2, "agent": 2, "agent/gpu": 2, "agent/spot": 2, "apiauth": 2, "providers/aws": 2,
	"providers/gcp": 2, "providers/sim": 2, "providers/plugin": 2, "internal/crashtest": 2,
	"controller/reports": 2,

	"loop": 3, "actuator": 3, "nodeauth": 3, "sdk": 3, "providers/aws/awsconfig": 3, "providers/gcp/gcpconfig": 3,
	"providers/plugin/pluginconfig": 3, "providers/sim/simconfig": 3,

	"controller": 4, "simulate": 4, "nodeauth/nodeauthtest": 4, "providers/registry": 4,

	"simfleet": 5, "examples/plugins/commands": 5, "scripts/trymoto": 5, "scripts/mutants": 5,

	"daemon": 6,

	"cmd/autoscaler": 7,
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
			t.Errorf("%s is in no layer: place it in the layers table", pkg)
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

// settingsOnly are the parts that take their own typed settings (package
// fleet's, or a provider's), never the decoded config: each can be built
// and tested without a config file, and only the wiring (daemon,
// cmd/autoscaler), the registry and the providers' block decoders
// (providers/*/*config) know the config.
var settingsOnly = []string{"controller", "loop", "simulate", "actuator", "planner", "forecast", "simfleet",
	"providers/sim", "providers/aws", "providers/gcp", "providers/plugin", "sdk", "nodeauth", "apiauth", "agent"}

// plainValues are the pure parts: they take plain values and link no
// HCL at all.
var plainValues = []string{"planner", "forecast"}

// TestPartsTakeSettings: no part of settingsOnly depends on package
// config, directly or through what it imports, and no part of
// plainValues on the HCL stack.
func TestPartsTakeSettings(t *testing.T) {
	for _, p := range settingsOnly {
		cmd := exec.Command("go", "list", "-deps", "./"+p)
		cmd.Dir = filepath.Join("..", "..")
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("go list -deps ./%s: %v", p, err)
		}
		for _, dep := range strings.Fields(string(out)) {
			switch {
			case dep == module+"config":
				t.Errorf("%s depends on %s (go list -deps): give it typed settings instead", p, dep)
			case slices.Contains(plainValues, p) && (strings.Contains(dep, "/hcl") || strings.Contains(dep, "go-cty")):
				t.Errorf("%s depends on %s: it takes plain values", p, dep)
			}
		}
	}
}
