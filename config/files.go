package config

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"

	"github.com/fleetcast/autoscaler/internal/checksum"
	"github.com/hashicorp/hcl/v2"
)

// InputFile is a file the config names that `run` reads and does not
// make itself (unlike the state directory and the API token in it): a
// certificate, a key, a secret, a plugin's executable. `validate -files`
// checks that each exists and can be read, as `run` will need it.
type InputFile struct {
	// Field is the attribute that names it, as a path:
	// "controller.tls_cert_file", "plugin.racks.path".
	Field string
	// Path is the file.
	Path string
	// At is where the file sets it (the zero Range for a Config not
	// parsed from a file).
	At hcl.Range
	// Why says what `run` needs it for: what it is, and when it is read.
	Why string
	// Refused are the permission bits `run` refuses the file with (a key
	// or a secret others may read); 0 for none.
	Refused fs.FileMode
	// Plugin names the plugin whose executable it is: `run` starts it,
	// checked against SHA256 first (the sha256 attribute, at SHA256At).
	// "" for a file that is only read.
	Plugin   string
	SHA256   string
	SHA256At hcl.Range
}

// InputFiles are the files the config names that `run` reads and does
// not make itself, in the order of the config's fields: the API's TLS
// certificate and key, the bootstrap secrets, the AWS identity
// certificates, the ha block's CAs, certificate and key, the Slurm
// cluster's slurm.conf, and the executable of each plugin a pool names.
func (c *Config) InputFiles() []InputFile {
	var out []InputFile
	add := func(f InputFile, path ...string) {
		if f.Path != "" {
			f.At = c.Origin.Where(path...)
			out = append(out, f)
		}
	}
	ct := c.Controller
	add(InputFile{Field: "controller.tls_cert_file", Path: ct.TLSCertFile,
		Why: "the API's certificate, read at start and again when it changes"}, "controller", "tls_cert_file")
	add(InputFile{Field: "controller.tls_key_file", Path: ct.TLSKeyFile, Refused: 0o004,
		Why: "the API certificate's private key, read at start (and refused if everyone may read it)"}, "controller", "tls_key_file")
	add(InputFile{Field: "controller.bootstrap_token_file", Path: ct.BootstrapTokenFile, Refused: 0o077,
		Why: "the fleet's bootstrap secrets, read at each node's bootstrap (and refused unless only its owner may read it)"}, "controller", "bootstrap_token_file")
	add(InputFile{Field: "controller.aws_identity_certificates", Path: ct.AWSIdentityCertificates,
		Why: "the certificates that sign EC2 instance identity documents (the trust root of AWS nodes' bootstrap), read at start"}, "controller", "aws_identity_certificates")
	if ha := ct.HA; ha != nil {
		add(InputFile{Field: "controller.ha.api_ca", Path: ha.APICAFile,
			Why: "the CA of the replicas' API certificates, with which a follower checks the leader's as it forwards, read at start"}, "controller", "ha", "api_ca")
		add(InputFile{Field: "controller.ha.tls.ca", Path: ha.TLSCAFile,
			Why: "the CA of the etcd members' certificates, read at start"}, "controller", "ha", "tls", "ca")
		add(InputFile{Field: "controller.ha.tls.cert", Path: ha.TLSCertFile,
			Why: "this replica's client certificate for etcd, read at start"}, "controller", "ha", "tls", "cert")
		add(InputFile{Field: "controller.ha.tls.key", Path: ha.TLSKeyFile, Refused: 0o004,
			Why: "the etcd client certificate's private key, read at start (and refused if everyone may read it)"}, "controller", "ha", "tls", "key")
	}
	if c.Slurm != nil {
		add(InputFile{Field: "slurm.conf", Path: c.Slurm.Conf,
			Why: "the Slurm cluster's slurm.conf, given to squeue and sinfo as SLURM_CONF at each read"}, "slurm", "conf")
	}
	used := map[string]bool{}
	for _, p := range c.Pools {
		if u, ok := p.Settings.(PluginUser); ok {
			name, _ := u.PluginName()
			used[name] = true
		}
	}
	for _, p := range c.Plugins {
		if !used[p.Name] {
			continue // run starts only the plugins its pools name
		}
		add(InputFile{Field: "plugin." + p.Name + ".path", Path: p.Path, Plugin: p.Name, SHA256: p.SHA256, SHA256At: c.Origin.Where("plugin", p.Name, "sha256"),
			Why: fmt.Sprintf("the executable of plugin %s, started for its pools once its SHA-256 is checked", p.Name)}, "plugin", p.Name, "path")
	}
	return out
}

// CheckInputFiles checks that each file exists, is a file, can be read,
// has no permission bit `run` refuses it with, and, for an executable,
// may be run and has its SHA-256. Each error is at the attribute that
// names the file (a checksum's at the sha256 attribute), and says which
// file, what is wrong and what `run` needs it for.
func CheckInputFiles(files []InputFile) hcl.Diagnostics {
	var diags hcl.Diagnostics
	for _, f := range files {
		if diag := checkInputFile(f); diag != nil {
			diags = append(diags, diag)
		}
	}
	return diags
}

// checkInputFile is CheckInputFiles for one file; nil when it passes.
func checkInputFile(f InputFile) *hcl.Diagnostic {
	fail := func(at hcl.Range, summary, what string) *hcl.Diagnostic {
		diag := &hcl.Diagnostic{Severity: hcl.DiagError, Summary: summary,
			Detail: fmt.Sprintf("%s names %s, which %s; run needs it: %s.", f.Field, f.Path, what, f.Why)}
		if at.Filename != "" {
			diag.Subject = at.Ptr()
		}
		return diag
	}
	fi, err := os.Stat(f.Path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return fail(f.At, "Missing file", "does not exist")
	case err != nil:
		return fail(f.At, "Unreadable file", fmt.Sprintf("cannot be read (%v)", unwrapPath(err)))
	case fi.IsDir():
		return fail(f.At, "Not a file", "is a directory")
	case fi.Mode().Perm()&f.Refused != 0:
		return fail(f.At, "File others may read", fmt.Sprintf("has mode %v: run refuses it (chmod 600 it)", fi.Mode().Perm()))
	case f.Plugin != "" && fi.Mode().Perm()&0o111 == 0:
		return fail(f.At, "File not executable", fmt.Sprintf("has mode %v: no one may run it", fi.Mode().Perm()))
	}
	r, err := os.Open(f.Path)
	if err == nil {
		_, err = r.Read(make([]byte, 1))
		r.Close()
	}
	if err != nil && err != io.EOF {
		return fail(f.At, "Unreadable file", fmt.Sprintf("cannot be read (%v)", unwrapPath(err)))
	}
	if f.Plugin == "" || f.SHA256 == "" {
		return nil
	}
	err = checksum.VerifySHA256(f.Path, f.SHA256)
	if ce := (*checksum.Error)(nil); errors.As(err, &ce) {
		at := f.SHA256At
		if at.Filename == "" {
			at = f.At
		}
		return fail(at, "Checksum mismatch", fmt.Sprintf("has SHA-256 %s, but sha256 expects %s (if this is the executable to run, set sha256 to what sha256sum prints)", ce.Got, ce.Want))
	}
	if err != nil {
		return fail(f.At, "Unreadable file", fmt.Sprintf("cannot be read (%v)", unwrapPath(err)))
	}
	return nil
}

// unwrapPath is a *fs.PathError's own error (the path is said already).
func unwrapPath(err error) error {
	if pe := (*fs.PathError)(nil); errors.As(err, &pe) {
		return pe.Err
	}
	return err
}
