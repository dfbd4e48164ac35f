package daemon

import (
	"crypto/x509"
	"errors"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/hcl/v2"

	"github.com/fleetcast/autoscaler/config"
	"github.com/fleetcast/autoscaler/nodeauth"
	"github.com/fleetcast/autoscaler/providers/registry"
)

// LoadStartFiles checks what the controller reads at start from the
// files the config names: the certificates that sign EC2 instance
// identity documents, and the API's TLS certificate and key. `run` (Start)
// and `validate -files` both call it, so that the files validate passes
// are the ones run takes. What is wrong with a file is an error at the
// attribute that names it (see atAttribute), all of them joined.
func LoadStartFiles(cfg *config.Config, log hclog.Logger) error {
	_, _, err := loadStartFiles(cfg, log)
	return err
}

// loadStartFiles is LoadStartFiles, with what the files hold (certs is nil
// without TLS).
func loadStartFiles(cfg *config.Config, log hclog.Logger) (awsRoots []*x509.Certificate, certs *certFiles, err error) {
	var errs []error
	if f := cfg.Controller.AWSIdentityCertificates; f != "" {
		if awsRoots, err = nodeauth.LoadCertificates(f); err != nil {
			errs = append(errs, atAttribute(cfg.Origin, "Unusable file", err, "controller", "aws_identity_certificates"))
		}
	}
	if cfg.Controller.TLS() {
		if certs, err = newCertFiles(cfg.Controller.TLSCertFile, cfg.Controller.TLSKeyFile, log.Named("tls")); err != nil {
			errs = append(errs, atAttribute(cfg.Origin, "Unusable file", err, "controller", "tls_cert_file"))
		}
	}
	if len(errs) > 0 {
		return nil, nil, errors.Join(errs...)
	}
	return awsRoots, certs, nil
}

// atAttribute is err as an error at the attribute at path in the
// config's file (a *registry.DiagnosticsError, which reportError prints
// with its source line); err itself where the file does not set it.
func atAttribute(origin *config.Origin, summary string, err error, path ...string) error {
	at := origin.Where(path...)
	if at.Filename == "" {
		return err
	}
	return &registry.DiagnosticsError{Diags: hcl.Diagnostics{{Severity: hcl.DiagError, Summary: summary, Detail: err.Error() + ".", Subject: at.Ptr()}}}
}
