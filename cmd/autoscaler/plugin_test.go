package main

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"

	"github.com/fleetcast/autoscaler/planner"
)

// testPluginBinary builds the plugin package's test plugin (an in-memory
// rack kept in a state file) and returns its path and SHA-256.
func testPluginBinary(t *testing.T) (path, sum string) {
	return buildPlugin(t, "../../providers/plugin/testdata/plugin", "test-racks")
}

// builtPlugins are the plugin executables the tests built, whose
// processes TestMain checks are all gone at the end.
var builtPlugins struct {
	sync.Mutex
	paths []string
}

// buildPlugin builds the plugin in the package directory pkg as name,
// in a temporary directory, and returns its path and SHA-256.
func buildPlugin(t *testing.T, pkg, name string) (path, sum string) {
	t.Helper()
	path = filepath.Join(t.TempDir(), name)
	builtPlugins.Lock()
	builtPlugins.paths = append(builtPlugins.paths, path)
	builtPlugins.Unlock()
	if out, err := exec.Command("go", "build", "-o", path, pkg).CombinedOutput(); err != nil {
		t.Fatalf("building the plugin %s: %v\n%s", pkg, err, out)
	}
	b, _ := os.ReadFile(path)
	s := sha256.Sum256(b)
	return path, hex.EncodeToString(s[:])
}

// TestPluginPools: `plan` and `run` drive a plugin pool through its
// plugin: started after its checksum is checked, configured with the
// config block and the pool's target block, with the environment the
// plugin block gives it. `plan` plans the pool's minimum and launches
// nothing; `run` launches it through the plugin. What the plugin finds
// wrong is an error at the place in the file.
func TestPluginPools(t *testing.T) {
	bin, sum := testPluginBinary(t)
	dir := t.TempDir()
	state := filepath.Join(dir, "racks.json")
	conf := func(endpoint, target string) string {
		path := filepath.Join(t.TempDir(), "fleet.hcl")
		src := fmt.Sprintf(`pool "onprem-a100" {
  provider       = "plugin"
  plugin         = "racks"
  instance_type  = "dgx-a100"
  gpus_per_node  = 8
  price_per_hour = 10
  lead_time      = "15m"
  min            = 1
  max            = 4
%s}

plugin "racks" {
  path   = %q
  sha256 = %q
  env    = { FLEETCAST_TEST_PLUGIN_STATE = %q }
  config {
%s  }
}

controller {
  fleet     = "prod"
  listen    = "127.0.0.1:0"
  state_dir = %q
}
`, target, bin, sum, state, endpoint, filepath.Join(dir, "state"))
		if err := os.WriteFile(path, []byte(src), 0o600); err != nil {
			t.Fatal(err)
		}
		return path
	}
	good := conf("    endpoint = \"https://bmc.example\"\n", "  target {\n    rack = \"r7\"\n  }\n")
	if got, want := fmt.Sprint(actionsOf(planJSON(t, "-config", good))), fmt.Sprint([]planAction{{planner.Launch, "onprem-a100", "", 1, planner.ReasonBelowMin}}); got != want {
		t.Fatalf("plan: actions %s, want %s", got, want)
	}
	if _, err := os.Stat(state); err == nil {
		t.Fatal("plan launched through the plugin")
	}
	code, out, errOut := cmdline("run", "-config", good, "-for", "1ms")
	if code != 0 {
		t.Fatalf("run: exit %d\n%s\n%s", code, out, errOut)
	}
	if !strings.Contains(out, "Fleetcast controller on 1 pool, a cycle every") {
		t.Errorf("run's first line does not say \"on 1 pool\":\n%s", out)
	}
	var s struct {
		Instances map[string]bool `json:"instances"`
	}
	b, _ := os.ReadFile(state)
	if json.Unmarshal(b, &s) != nil || len(s.Instances) != 1 {
		t.Fatalf("after run: the plugin's state %s; want 1 server powered on", b)
	}

	// `validate` has the plugin check its config; `plugins -config`
	// starts it and asks after its pools.
	if code, out, errOut := cmdline("validate", "-config", good); code != 0 || !strings.Contains(out, "valid: 1 pool(s)") {
		t.Errorf("validate: exit %d\n%s\n%s", code, out, errOut)
	}
	code, out, errOut = cmdline("plugins", "-config", good)
	for _, want := range []*regexp.Regexp{
		regexp.MustCompile(`(?m)^PLUGIN +IS +PROTOCOL +POOLS +HEALTH$`),
		regexp.MustCompile(`(?m)^racks +test-racks 0\.0\.1 +1 +onprem-a100 +ok$`),
		regexp.MustCompile(`(?m)^  pool onprem-a100 \(plugin racks\): target 1, 1 instance\(s\), 1 running$`),
	} {
		if code != 0 || !want.MatchString(out) {
			t.Errorf("plugins -config: exit %d, want %s\n%s\n%s", code, want, out, errOut)
		}
	}

	// What the plugin refuses, where it is in the file (the place, and
	// the plugin and the field it names): in `plan`, `validate` and
	// `plugins`. The words are those of testdata/plugin-errors.golden.
	bad := conf("", "  target {\n    row = \"r7\"\n  }\n")
	tr := &transcript{normalize: func(s string) string {
		s = renameDir(s, filepath.Dir(bad), "$DIR")
		return sha256Hex.ReplaceAllString(strings.ReplaceAll(s, bin, "$PLUGIN"), "$$SHA256")
	}}
	wants := [][2]string{
		{bad + ":15:1: error: ", " (plugin racks, config.endpoint)\n"},
		{bad + ":10:3: error: ", " (plugin racks, pool.onprem-a100.target.rack)\n"},
	}
	for _, cmd := range []string{"plan", "validate"} {
		code, out, errOut = cmdline(cmd, "-config", bad)
		tr.add(cmd, code, out, errOut)
		for _, want := range wants {
			if i := strings.Index(errOut, want[0]); code == 0 || i < 0 || !strings.Contains(errOut[i:], want[1]) {
				t.Errorf("%s with what the plugin refuses: exit %d, stderr %q; want %q ... %q", cmd, code, errOut, want[0], want[1])
			}
		}
	}
	if !strings.Contains(errOut, bad+": 2 error(s)\n") {
		t.Errorf("validate does not count the plugin's errors: %q", errOut)
	}
	code, out, errOut = cmdline("plugins", "-config", bad)
	tr.add("plugins", code, out, errOut)
	if code == 0 || !regexp.MustCompile(`(?m)^racks +.* DOWN: .*`+regexp.QuoteMeta(bad+":15:1: ")).MatchString(out) {
		t.Errorf("plugins -config with what the plugin refuses: exit %d\n%s", code, out)
	}

	// A plugin whose checksum is not its executable's never runs;
	// -skip-plugins validates the rest without it.
	b, _ = os.ReadFile(good)
	wrong := filepath.Join(t.TempDir(), "wrong-sum.hcl")
	if err := os.WriteFile(wrong, []byte(strings.Replace(string(b), sum, strings.Repeat("0", 64), 1)), 0o600); err != nil {
		t.Fatal(err)
	}
	// The error names the executable, its checksum and the one expected
	// (the words: test-fixtures/checksum-validate.golden).
	code, out, errOut = cmdline("validate", "-config", wrong)
	tr.add("validate with a wrong checksum", code, out, renameDir(errOut, filepath.Dir(wrong), "$DIR"))
	if i := strings.Index(errOut, ": error: "); code == 0 || i < 0 || !strings.Contains(errOut[i:], " racks: "+bin+" ") ||
		!strings.Contains(errOut[i:], " "+sum+", ") || !strings.Contains(errOut[i:], " "+strings.Repeat("0", 64)+":") {
		t.Errorf("validate with a wrong checksum: exit %d, %q", code, errOut)
	}
	tr.check(t, "plugin-errors.golden", 4)
	if code, out, errOut := cmdline("validate", "-config", wrong, "-skip-plugins"); code != 0 || !strings.Contains(out, "valid") {
		t.Errorf("validate -skip-plugins with a wrong checksum: exit %d\n%s\n%s", code, out, errOut)
	}
}
