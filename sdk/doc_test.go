package sdk_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/fleetcast/autoscaler/fleet"
	"github.com/fleetcast/autoscaler/providers"
	"github.com/fleetcast/autoscaler/providers/plugin"
)

// TestDocPlugin: the package doc's plugin is complete: it builds, as it
// is, and serves through the controller's side of the protocol, two
// servers and then a typed lack of capacity.
func TestDocPlugin(t *testing.T) {
	src, err := os.ReadFile("sdk.go")
	if err != nil {
		t.Fatal(err)
	}
	var code []string
	on := false
	for _, l := range strings.Split(string(src), "\n") {
		if l == "//\tpackage main" {
			on = true
		}
		if !on {
			continue
		}
		if l == "//" {
			code = append(code, "")
			continue
		}
		rest, ok := strings.CutPrefix(l, "//\t")
		if !ok {
			break
		}
		code = append(code, rest)
		if rest == "}" && strings.Contains(strings.Join(code, "\n"), "func main()") {
			break
		}
	}
	if len(code) < 20 {
		t.Fatalf("no plugin found in the package doc (%d lines)", len(code))
	}
	dir := t.TempDir()
	main := filepath.Join(dir, "main.go")
	if err := os.WriteFile(main, []byte(strings.Join(code, "\n")+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	wd, _ := os.Getwd()
	overlay, _ := json.Marshal(map[string]any{"Replace": map[string]string{filepath.Join(wd, "testdata", "doc", "main.go"): main}})
	ov := filepath.Join(dir, "overlay.json")
	if err := os.WriteFile(ov, overlay, 0o600); err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "racks")
	if out, err := exec.Command("go", "build", "-overlay", ov, "-o", bin, "./testdata/doc").CombinedOutput(); err != nil {
		t.Fatalf("the doc's plugin does not build: %v\n%s\n%s", err, out, strings.Join(code, "\n"))
	}
	b, _ := os.ReadFile(bin)
	sum := sha256.Sum256(b)
	c, err := plugin.Start(context.Background(), plugin.Spec{Name: "racks", Path: bin, SHA256: hex.EncodeToString(sum[:])}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx := context.Background()
	pool := fleet.Pool{Name: "racks", Provider: fleet.ProviderPlugin, GPUsPerNode: 8, Max: 4}
	if diags, err := c.Configure(ctx, []fleet.Pool{pool}, "prod"); err != nil || len(diags) > 0 {
		t.Fatalf("configure: %+v, %v", diags, err)
	}
	if err := c.Launch(ctx, pool, providers.LaunchRequest{Count: 2, Target: 2, Key: "k1"}); err != nil {
		t.Fatal(err)
	}
	if g, err := c.Describe(ctx, pool); err != nil || len(g.Instances) != 2 {
		t.Fatalf("describe: %+v, %v; want the 2 servers", g, err)
	}
	// It checks no node identities: every one is refused.
	var refused *providers.RefusedError
	if err := c.VerifyIdentity(ctx, pool, "gpu-01", "anything"); !errors.As(err, &refused) {
		t.Fatalf("an identity for a plugin that checks none: %v; want refused", err)
	}
	var ice *providers.InsufficientCapacityError
	if err := c.Launch(ctx, pool, providers.LaunchRequest{Count: 1, Target: 3, Key: "k2"}); !errors.As(err, &ice) {
		t.Fatalf("a third server: %v; want insufficient capacity", err)
	}
}
