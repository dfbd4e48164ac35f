package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/fleetcast/autoscaler/internal/cli"
	"github.com/fleetcast/autoscaler/internal/gcptest"
)

// renameDir is out with dir written name, carets included: the carets
// under a source line that held dir (in what they mark) are as many
// fewer or more. Tests use it so that a temporary directory does not
// change what they compare.
func renameDir(out, dir, name string) string {
	lines := strings.Split(out, "\n")
	for i, l := range lines {
		n := strings.Count(l, dir)
		lines[i] = strings.ReplaceAll(l, dir, name)
		if n > 0 && i+1 < len(lines) && strings.HasSuffix(lines[i+1], "^") {
			next := lines[i+1]
			carets := len(next) - len(strings.TrimRight(next, "^"))
			lines[i+1] = next[:len(next)-carets] + strings.Repeat("^", max(1, carets-n*(len(dir)-len(name))))
		}
	}
	return strings.Join(lines, "\n")
}

// TestValidateSourceLines: each error is printed with its place, then
// the line of the file it is on and a caret under what it refuses, as a
// compiler does; the count of errors last.
func TestValidateSourceLines(t *testing.T) {
	for _, tt := range []struct{ name, config, golden string }{
		{"three errors", "test-fixtures/three-errors.hcl", "validate-three-errors.golden"},
		// A suggestion for a misspelt provider, capacity or plugin, as
		// HCL gives one for a misspelt attribute; none for a name close
		// to none.
		{"misspelt names", "test-fixtures/misspelt-names.hcl", "validate-misspelt-names.golden"},
		// Simulated and real pools mixed: at the pool that differs.
		{"mixed pools", "test-fixtures/mixed-pools.hcl", "validate-mixed-pools.golden"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			code, out, errOut := cmdline("validate", "-config", tt.config)
			if code != cli.ExitError || out != "" {
				t.Errorf("exit %d, stdout %q; want 1 and nothing", code, out)
			}
			fixture(t, tt.golden, errOut)
		})
	}
}

// TestValidateJSON: `validate -json` prints one JSON object, as
// `terraform validate -json` does: valid, the counts of errors and
// warnings, and each diagnostic with its range; exit 1 when it is not
// valid.
func TestValidateJSON(t *testing.T) {
	code, out, errOut := cmdline("validate", "-json", "-config", "test-fixtures/three-errors.hcl")
	if code != cli.ExitError || errOut != "" {
		t.Errorf("exit %d, stderr %q; want 1 and nothing", code, errOut)
	}
	fixture(t, "validate-three-errors.json", out)

	code, out, errOut = cmdline("validate", "-json", "-config", localConfig)
	var v struct {
		Valid        *bool `json:"valid"`
		ErrorCount   *int  `json:"error_count"`
		WarningCount *int  `json:"warning_count"`
		Diagnostics  []any `json:"diagnostics"`
	}
	if err := json.Unmarshal([]byte(out), &v); err != nil || code != cli.ExitOK {
		t.Fatalf("exit %d, %v:\n%s%s", code, err, out, errOut)
	}
	if v.Valid == nil || !*v.Valid || v.ErrorCount == nil || *v.ErrorCount != 0 || v.WarningCount == nil || *v.WarningCount != 0 || v.Diagnostics == nil || len(v.Diagnostics) != 0 {
		t.Errorf("a valid config: %s", out)
	}
}

// TestPluginChecksumMismatch: a plugin whose executable is not the one
// its sha256 names is refused at its sha256 attribute, saying the
// checksum it found as well as the one expected: by validate, which
// starts it, by validate -files, which reads it, and by plan.
func TestPluginChecksumMismatch(t *testing.T) {
	dir := t.TempDir()
	exe := filepath.Join(dir, "racks")
	body := []byte("#!/bin/sh\nexit 0\n")
	if err := os.WriteFile(exe, body, 0o755); err != nil {
		t.Fatal(err)
	}
	conf := filepath.Join(dir, "fleet.hcl")
	src := `pool "onprem" {
  provider       = "plugin"
  plugin         = "racks"
  instance_type  = "rack"
  gpus_per_node  = 8
  price_per_hour = 10
  max            = 4
}

plugin "racks" {
  path   = "` + exe + `"
  sha256 = "` + strings.Repeat("0", 64) + `"
}
`
	if err := os.WriteFile(conf, []byte(src), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		args   []string
		golden string
	}{
		{[]string{"validate", "-config", conf}, "checksum-validate.golden"},
		{[]string{"validate", "-files", "-config", conf}, "checksum-validate-files.golden"},
		{[]string{"plan", "-config", conf}, "checksum-plan.golden"},
	} {
		t.Run(strings.Join(tt.args[:len(tt.args)-2], " "), func(t *testing.T) {
			code, _, errOut := cmdline(tt.args...)
			if code != cli.ExitError {
				t.Errorf("exit %d, want 1", code)
			}
			fixture(t, tt.golden, renameDir(errOut, dir, "$DIR"))
		})
	}
}

// TestNoCloudCredentials: without cloud credentials, plan and run on an
// AWS or a GCP config stop with one line that says so and how to set
// them, not the SDK's account of each place it looked.
func TestNoCloudCredentials(t *testing.T) {
	home := t.TempDir()
	for k, v := range map[string]string{
		"HOME": home, "AWS_CONFIG_FILE": "/dev/null", "AWS_SHARED_CREDENTIALS_FILE": "/dev/null", "AWS_EC2_METADATA_DISABLED": "true",
		"AWS_PROFILE": "", "AWS_ACCESS_KEY_ID": "", "AWS_SECRET_ACCESS_KEY": "", "AWS_SESSION_TOKEN": "", "AWS_ROLE_ARN": "", "AWS_WEB_IDENTITY_TOKEN_FILE": "",
		"AWS_CONTAINER_CREDENTIALS_RELATIVE_URI": "", "AWS_CONTAINER_CREDENTIALS_FULL_URI": "", "AWS_ENDPOINT_URL": "",
		"GOOGLE_APPLICATION_CREDENTIALS": "", "CLOUDSDK_CONFIG": filepath.Join(home, "gcloud"), "GCE_METADATA_HOST": "",
	} {
		t.Setenv(k, v)
	}
	const (
		noAWS = "no AWS credentials found: set AWS_PROFILE or AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY, or run on an instance with a role\n"
		noGCP = "no GCP credentials found: set GOOGLE_APPLICATION_CREDENTIALS to a service account key file, or run gcloud auth application-default login, or run on a VM with a service account\n"
	)
	aws, err := os.ReadFile("../../examples/aws.hcl")
	if err != nil {
		t.Fatal(err)
	}
	awsConf := localExample(t, string(aws)) // its files at hand, so that run gets as far as AWS
	for _, tt := range []struct {
		name string
		args []string
		want string
	}{
		{"plan aws", []string{"plan", "-config", awsConf}, "plan: " + noAWS},
		{"run aws", []string{"run", "-config", awsConf, "-for", "1ms", "-listen", "127.0.0.1:0"}, "run: " + noAWS},
		{"plan gcp", []string{"plan", "-config", "test-fixtures/gcp.hcl"}, "plan: " + noGCP},
		{"run gcp", []string{"run", "-config", "test-fixtures/gcp.hcl", "-for", "1ms", "-listen", "127.0.0.1:0", "-state-dir", t.TempDir()}, "run: " + noGCP},
	} {
		t.Run(tt.name, func(t *testing.T) {
			code, _, errOut := cmdline(append(tt.args, "-log-level", "error")...)
			if code != cli.ExitError || errOut != tt.want {
				t.Errorf("exit %d, stderr:\n%s\nwant 1 and:\n%s", code, errOut, tt.want)
			}
		})
	}
}

// TestCloudErrorsAtTheirPlace: what a cloud says a pool's config got
// wrong at start (its VMs' GPUs, a group that does not exist) is an error at the attribute it is about, with its
// source line, from plan and run.
func TestCloudErrorsAtTheirPlace(t *testing.T) {
	f := gcpAccount(t)
	f.AddGroup(&gcptest.Group{Project: "my-gpu-project", Zone: "us-central1-a", Name: "fleetcast-ondemand-a100", Template: a100Template,
		Labels: map[string]string{gcptest.LabelFleet: "default"}}, 1)
	src, err := os.ReadFile("test-fixtures/gcp.hcl")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	for _, tt := range []struct {
		name, from, to, golden string
	}{
		{"gpus", "gpus_per_node  = 8", "gpus_per_node  = 4", "cloud-gpus.golden"},
		{"no such group", `mig     = "fleetcast-ondemand-a100"`, `mig     = "fleetcast-a100"`, "cloud-mig.golden"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			conf := filepath.Join(dir, strings.ReplaceAll(tt.name, " ", "-")+".hcl")
			text := strings.Replace(withEndpoint(string(src), "http://127.0.0.1:1"), tt.from, tt.to, 1)
			text = strings.Replace(text, "http://127.0.0.1:1", f.URL(), 1)
			if !strings.Contains(text, tt.to) || os.WriteFile(conf, []byte(text), 0o600) != nil {
				t.Fatal("cannot write the config")
			}
			for _, cmd := range [][]string{{"plan"}, {"run", "-for", "1ms", "-listen", "127.0.0.1:0", "-state-dir", t.TempDir()}} {
				code, _, errOut := cmdline(append(cmd, "-config", conf, "-log-level", "error")...)
				if code != cli.ExitError {
					t.Errorf("%s: exit %d, want 1", cmd[0], code)
				}
				fixture(t, tt.golden, renameDir(strings.ReplaceAll(errOut, f.URL(), "$URL"), dir, "$DIR"))
			}
		})
	}
}
