package config_test

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hashicorp/hcl/v2"

	"github.com/fleetcast/autoscaler/config"
	"github.com/fleetcast/autoscaler/internal/checksum"
	"github.com/fleetcast/autoscaler/providers/registry"
)

// TestInputFiles: the files a config names for run to read, each with
// the attribute that names it and where; a plugin no pool names is not
// one (run does not start it), and a config with none has none.
func TestInputFiles(t *testing.T) {
	sum := strings.Repeat("0", 64)
	src := `pool "rack" {
  provider       = "plugin"
  plugin         = "used"
  instance_type  = "dgx"
  gpus_per_node  = 8
  price_per_hour = 1
  max            = 2
}
plugin "used" {
  path   = "/opt/used"
  sha256 = "` + sum + `"
}
plugin "unused" {
  path   = "/opt/unused"
  sha256 = "` + sum + `"
}
controller {
  tls_cert_file             = "c.crt"
  tls_key_file              = "c.key"
  bootstrap_token_file      = "token"
  aws_identity_certificates = "aws.pem"
}
`
	cfg, diags := config.Parse("f.hcl", []byte(src), registry.Blocks())
	if diags.HasErrors() {
		t.Fatal(formatAll(diags))
	}
	var got []string
	for _, f := range cfg.InputFiles() {
		got = append(got, f.Field+"="+f.Path+"@"+f.At.String())
		if f.Why == "" {
			t.Errorf("%s: no reason", f.Field)
		}
		if (f.Plugin != "") != (f.SHA256 != "" && f.SHA256At.Start.Line == 11) {
			t.Errorf("%s: plugin %q, sha256 %q at %s", f.Field, f.Plugin, f.SHA256, f.SHA256At)
		}
	}
	want := []string{
		"controller.tls_cert_file=c.crt@f.hcl:18,31-38",
		"controller.tls_key_file=c.key@f.hcl:19,31-38",
		"controller.bootstrap_token_file=token@f.hcl:20,31-38",
		"controller.aws_identity_certificates=aws.pem@f.hcl:21,31-40",
		"plugin.used.path=/opt/used@f.hcl:10,12-23",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("input files:\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	cfg, diags = config.Parse("f.hcl", []byte(simPool("a", "")), registry.Blocks())
	if diags.HasErrors() || len(cfg.InputFiles()) != 0 {
		t.Errorf("a config naming no file: %v, %+v", diags, cfg.InputFiles())
	}
}

// TestCheckInputFiles: each way a file run needs can be unusable is an
// error of its own at the attribute (a checksum's at sha256), and a
// usable file none.
func TestCheckInputFiles(t *testing.T) {
	dir := t.TempDir()
	write := func(name, body string, mode os.FileMode) string {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, []byte(body), mode); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(path, mode); err != nil {
			t.Fatal(err)
		}
		return path
	}
	exe := "#!/bin/sh\n"
	h := sha256.Sum256([]byte(exe))
	sum := hex.EncodeToString(h[:])
	file := write("file", "x", 0o644)
	secret := write("secret", "x", 0o600)
	unreadable := write("unreadable", "x", 0o000)
	program := write("program", exe, 0o755)
	for _, tt := range []struct {
		name    string
		f       config.InputFile
		summary string // "" for none
		detail  string // a fragment of it
	}{
		{"readable", config.InputFile{Path: file}, "", ""},
		{"secret", config.InputFile{Path: secret, Refused: 0o077}, "", ""},
		{"program", config.InputFile{Path: program, Plugin: "p", SHA256: sum}, "", ""},
		{"missing", config.InputFile{Path: filepath.Join(dir, "nope")}, "Missing file", "which does not exist"},
		{"directory", config.InputFile{Path: dir}, "Not a file", "which is a directory"},
		{"others may read", config.InputFile{Path: file, Refused: 0o077}, "File others may read", "which has mode -rw-r--r--: run refuses it"},
		{"not executable", config.InputFile{Path: file, Plugin: "p"}, "File not executable", "no one may run it"},
		{"unreadable", config.InputFile{Path: unreadable}, "Unreadable file", "permission denied"},
		{"checksum", config.InputFile{Path: program, Plugin: "p", SHA256: strings.Repeat("0", 64)}, "Checksum mismatch",
			"which has SHA-256 " + sum + ", but sha256 expects " + strings.Repeat("0", 64)},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if tt.name == "unreadable" && os.Geteuid() == 0 {
				t.Skip("root reads any file")
			}
			tt.f.Field, tt.f.Why = "controller.x", "what it is for"
			tt.f.At = hclRange("f.hcl", 3)
			tt.f.SHA256At = hclRange("f.hcl", 4)
			diags := config.CheckInputFiles([]config.InputFile{tt.f})
			if tt.summary == "" {
				if len(diags) != 0 {
					t.Fatalf("errors: %s", formatAll(diags))
				}
				return
			}
			line := 3
			if tt.summary == "Checksum mismatch" {
				line = 4
			}
			if len(diags) != 1 || diags[0].Summary != tt.summary || !strings.Contains(diags[0].Detail, tt.detail) ||
				!strings.HasPrefix(diags[0].Detail, "controller.x names "+tt.f.Path+", which ") || !strings.HasSuffix(diags[0].Detail, "; run needs it: what it is for.") ||
				diags[0].Subject == nil || diags[0].Subject.Start.Line != line {
				t.Errorf("got %s\nwant one %q at line %d with %q", formatAll(diags), tt.summary, line, tt.detail)
			}
		})
	}
	var ce *checksum.Error
	if err := checksum.VerifySHA256(program, strings.Repeat("0", 64)); !errors.As(err, &ce) || ce.Got != sum || ce.Path != program {
		t.Errorf("VerifySHA256 of another: %v", err)
	}
	if err := checksum.VerifySHA256(program, sum); err != nil {
		t.Errorf("VerifySHA256 of its own: %v", err)
	}
}

// hclRange is a range on line of file.
func hclRange(file string, line int) hcl.Range {
	return hcl.Range{Filename: file, Start: hcl.Pos{Line: line, Column: 1}, End: hcl.Pos{Line: line, Column: 2}}
}
