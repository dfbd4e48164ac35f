package main

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/fleetcast/autoscaler/internal/cli"
	"github.com/fleetcast/autoscaler/internal/testpki"
)

// TestValidateExampleFiles: examples/aws.hcl passes validate, which says
// which of the files it names it did not check; validate -files refuses
// it where those files are missing (as run would at start), each at the
// attribute that names it, saying which file and why run needs it; and
// passes a copy whose files are all there.
func TestValidateExampleFiles(t *testing.T) {
	const example = "../../examples/aws.hcl"
	// What each says names the config, the count of files and their
	// attributes, each missing file at its place with its path; the words
	// are those of testdata/validate-example-files.golden.
	tr := &transcript{}
	code, out, errOut := cmdline("validate", "-config", example)
	tr.add("validate", code, out, errOut)
	lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	last := lines[len(lines)-1]
	if code != cli.ExitOK || !strings.HasPrefix(last, example+": 4 file(s) ") ||
		!strings.Contains(last, "(controller.tls_cert_file, controller.tls_key_file, controller.bootstrap_token_file, controller.aws_identity_certificates)") {
		t.Errorf("validate: exit %d, stdout:\n%s\nwant 0 and a last line naming the 4 files not checked%s", code, out, errOut)
	}

	src, err := os.ReadFile(example)
	if err != nil {
		t.Fatal(err)
	}
	code, out, errOut = cmdline("validate", "-files", "-config", example)
	tr.add("validate -files", code, out, errOut)
	if code != cli.ExitError || !strings.HasSuffix(errOut, example+": 4 error(s)\n") {
		t.Errorf("validate -files: exit %d, want 1 and 4 errors:\n%s", code, errOut)
	}
	for _, f := range []struct{ attr, path string }{
		{"tls_cert_file", "/etc/fleetcast/tls/controller.crt"},
		{"tls_key_file", "/etc/fleetcast/tls/controller.key"},
		{"bootstrap_token_file", "/etc/fleetcast/bootstrap-token"},
		{"aws_identity_certificates", "/etc/fleetcast/aws-identity-us-east-1.pem"},
	} {
		line, col := attributeAt(t, string(src), f.attr)
		want := regexp.MustCompile(fmt.Sprintf(`(?m)^%s:%d:%d: error: .*\bcontroller\.%s\b.* %s\b`,
			regexp.QuoteMeta(example), line, col, f.attr, regexp.QuoteMeta(f.path)))
		if !want.MatchString(errOut) {
			t.Errorf("validate -files lacks\n%s\n%s", want, errOut)
		}
	}

	local := localExample(t, string(src))
	code, out, errOut = cmdline("validate", "-files", "-config", local)
	tr.normalize = func(s string) string { return strings.ReplaceAll(s, local, "$LOCAL") }
	tr.add("validate -files, the files at hand", code, out, errOut)
	if lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n"); code != cli.ExitOK || !strings.HasPrefix(lines[len(lines)-1], local+": 4 file(s) ") {
		t.Errorf("validate -files with the files at hand: exit %d, stdout:\n%s\nwant a last line of the 4 files checked%s", code, out, errOut)
	}
	tr.check(t, "validate-example-files.golden", 3)
}

// attributeAt is the line and column of the value of the first
// attribute named name in src.
func attributeAt(t *testing.T, src, name string) (int, int) {
	t.Helper()
	for i, l := range strings.Split(src, "\n") {
		if strings.HasPrefix(strings.TrimSpace(l), name+" ") {
			return i + 1, strings.Index(l, "\"") + 1
		}
	}
	t.Fatalf("no attribute %s", name)
	return 0, 0
}

// TestValidateFiles: validate -files refuses each file run could not
// read as the config names it (missing, a directory, a secret or a key
// others may read, a plugin that may not be run or is not the one its
// sha256 names, a certificate that does not parse), each at its
// attribute with its source line, saying which file and why run needs
// it; and counts the files it checked when they are all good. Without -files, validate lists the files it
// did not check.
func TestValidateFiles(t *testing.T) {
	dir := t.TempDir()
	write := func(name, body string, mode os.FileMode) string {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, []byte(body), mode); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(path, mode); err != nil { // whatever the umask
			t.Fatal(err)
		}
		return path
	}
	exe := "#!/bin/sh\nexit 0\n"
	sum := sha256.Sum256([]byte(exe))
	pki := testpki.New(t, dir)
	_, _, identity, err := testpki.SelfSignedRSA("identity")
	if err != nil {
		t.Fatal(err)
	}
	good := map[string]string{
		"cert": pki.CertFile, "key": pki.KeyFile,
		"bootstrap": write("bootstrap-token", strings.Repeat("s", 32)+"\n", 0o600), "identity": write("aws-identity.pem", string(identity), 0o644),
		"plugin": write("racks", exe, 0o755), "sha256": hex.EncodeToString(sum[:]),
	}
	unusable := maps.Clone(good)
	unusable["cert"], unusable["identity"] = write("garbage.crt", "not PEM\n", 0o644), write("garbage.pem", "not PEM\n", 0o644)
	bad := map[string]string{
		"cert": filepath.Join(dir, "missing.crt"), "key": write("everyone.key", "PEM\n", 0o644),
		"bootstrap": write("others-token", strings.Repeat("s", 32)+"\n", 0o640), "identity": dir,
		"plugin": write("not-executable", exe, 0o644), "sha256": hex.EncodeToString(sum[:]),
	}
	wrongSum := maps.Clone(good)
	wrongSum["sha256"] = strings.Repeat("0", 64)
	conf := func(name string, f map[string]string) string {
		src := fmt.Sprintf(`pool "onprem" {
  provider       = "plugin"
  plugin         = "racks"
  instance_type  = "dgx-a100"
  gpus_per_node  = 8
  price_per_hour = 10
  max            = 4
}

plugin "racks" {
  path   = %q
  sha256 = %q
}

controller {
  listen                    = "127.0.0.1:8790"
  tls_cert_file             = %q
  tls_key_file              = %q
  bootstrap_token_file      = %q
  aws_identity_certificates = %q
}
`, f["plugin"], f["sha256"], f["cert"], f["key"], f["bootstrap"], f["identity"])
		return write(name, src, 0o600)
	}
	for _, tt := range []struct {
		name   string
		args   []string
		code   int
		golden string // of stdout when it exits 0, else of stderr
	}{
		{"all good", []string{"validate", "-files", "-skip-plugins", "-config", conf("good.hcl", good)}, cli.ExitOK, "validate-files-good.golden"},
		{"not checked", []string{"validate", "-skip-plugins", "-config", conf("good.hcl", good)}, cli.ExitOK, "validate-files-unchecked.golden"},
		{"all bad", []string{"validate", "-files", "-config", conf("bad.hcl", bad)}, cli.ExitError, "validate-files-bad.golden"},
		{"wrong checksum", []string{"validate", "-files", "-config", conf("sum.hcl", wrongSum)}, cli.ExitError, "validate-files-checksum.golden"},
		// Files that are there but that run could not load at start.
		{"unusable", []string{"validate", "-files", "-skip-plugins", "-config", conf("unusable.hcl", unusable)}, cli.ExitError, "validate-files-unusable.golden"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			code, out, errOut := cmdline(tt.args...)
			got := errOut
			if tt.code == cli.ExitOK {
				got = out
			}
			if code != tt.code {
				t.Errorf("exit %d, want %d\n%s%s", code, tt.code, out, errOut)
			}
			fixture(t, tt.golden, renameDir(got, dir, "$DIR"))
		})
	}
}
