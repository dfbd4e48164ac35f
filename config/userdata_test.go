package config_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"
	"github.com/zclconf/go-cty/cty"
)

// TestAWSUserDataRenders renders the AWS launch template's user data as
// Terraform's templatefile does (HCL template syntax) with every variable
// main.tf passes, and checks that the result is a bash script that parses
// and that it runs the node set-up script unchanged.
func TestAWSUserDataRenders(t *testing.T) {
	const dir = "../examples/terraform/aws/"
	src, err := os.ReadFile(dir + "user_data.sh.tftpl")
	if err != nil {
		t.Fatal(err)
	}
	setup, err := os.ReadFile(dir + "node-setup.sh")
	if err != nil {
		t.Fatal(err)
	}
	tmpl, diags := hclsyntax.ParseTemplate(src, "user_data.sh.tftpl", hcl.InitialPos)
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	vars := map[string]cty.Value{
		"pool": cty.StringVal("aws-spot-a100"), "region": cty.StringVal("us-east-1"),
		"agent_url": cty.StringVal("https://artifacts.example.internal/autoscaler"), "agent_sha256": cty.StringVal(strings.Repeat("a", 64)),
		"controller_url": cty.StringVal("https://fleetcast.internal:8790"), "controller_ca_pem": cty.StringVal("-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----"),
		"bootstrap_token_parameter": cty.StringVal("/fleetcast/bootstrap-token"), "setup_script": cty.StringVal(string(setup)),
	}
	// main.tf passes exactly these.
	tf, err := os.ReadFile(dir + "main.tf")
	if err != nil {
		t.Fatal(err)
	}
	for name := range vars {
		if !strings.Contains(string(tf), "\n    "+name+" ") {
			t.Errorf("main.tf does not pass %s to user_data.sh.tftpl", name)
		}
	}
	out, diags := tmpl.Value(&hcl.EvalContext{Variables: vars})
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	script := out.AsString()
	// EC2 takes at most 16 KB of user data (before base64); leave room for
	// a CA bundle of a few certificates.
	if n := len(script) + 6<<10; n > 16<<10 {
		t.Errorf("the user data is %d bytes; with a 6 KiB CA bundle it would pass EC2's 16 KB limit", len(script))
	}
	if !strings.Contains(script, string(setup)) {
		t.Error("the rendered user data does not hold node-setup.sh as it is")
	}
	if !strings.Contains(script, `[ -n "${secret:-}" ]`) {
		t.Error("the rendered user data does not check the secret it read")
	}
	if _, err := exec.LookPath("bash"); err != nil {
		t.Skip("no bash to parse the rendered script")
	}
	cmd := exec.Command("bash", "-n")
	cmd.Stdin = strings.NewReader(script)
	if msg, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("the rendered user data does not parse as bash: %v\n%s", err, msg)
	}
}

// TestExamplesBootMakeSocketGroup: each Terraform example's node setup
// makes the group whose members may use the agent's local API (the
// agent's default -socket-group) before it starts the agent, so that jobs
// of users in it can register. (cmd/autoscaler's TestNodeSetupUnit runs
// the AWS script and checks the group it makes.)
func TestExamplesBootMakeSocketGroup(t *testing.T) {
	const makeGroup = "groupadd --force --system fleetcast"
	for _, tt := range []struct {
		path, start string
	}{
		{"../examples/terraform/aws/node-setup.sh", "systemctl enable --now"},
		{"../examples/terraform/gcp/startup.sh.tftpl", "systemctl enable --now"},
	} {
		t.Run(filepath.Base(tt.path), func(t *testing.T) {
			b, err := os.ReadFile(tt.path)
			if err != nil {
				t.Fatal(err)
			}
			src := string(b)
			made, started := strings.Index(src, makeGroup), strings.Index(src, tt.start)
			switch {
			case started < 0:
				t.Fatalf("%s does not start the agent (%q): the check is stale", tt.path, tt.start)
			case made < 0:
				t.Errorf("%s does not make the agent's socket group (%s): only root's jobs could register", tt.path, makeGroup)
			case made > started:
				t.Errorf("%s makes the agent's socket group after it starts the agent, which then finds none", tt.path)
			}
		})
	}
}
