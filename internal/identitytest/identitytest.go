// Package identitytest stands in for AWS's signing of instance identity
// documents in tests: a fresh RSA key with a self-signed certificate,
// which the tests configure as the controller's trust root
// (controller.aws_identity_certificates), and signatures made the way the
// metadata service's /latest/dynamic/instance-identity/signature is; and
// for Google's signing of Compute Engine identity tokens (Google).
package identitytest

import (
	"github.com/fleetcast/autoscaler/internal/testpki"

	"crypto"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"os"
	"path/filepath"
	"testing"
)

// Signer signs identity documents.
type Signer struct {
	Key  *rsa.PrivateKey
	Cert *x509.Certificate
	// PEM is Cert, PEM-encoded.
	PEM []byte
}

// New makes a signer with a 2048-bit key (AWS's size).
func New(t testing.TB) *Signer {
	t.Helper()
	key, cert, certPEM, err := testpki.SelfSignedRSA("test identity signer")
	if err != nil {
		t.Fatal(err)
	}
	return &Signer{Key: key, Cert: cert, PEM: certPEM}
}

// Sign returns document's signature as the metadata service serves it:
// base64, in lines of 76 characters.
func (s *Signer) Sign(t testing.TB, document []byte) string {
	t.Helper()
	digest := sha256.Sum256(document)
	sig, err := rsa.SignPKCS1v15(rand.Reader, s.Key, crypto.SHA256, digest[:])
	if err != nil {
		t.Fatal(err)
	}
	b := base64.StdEncoding.EncodeToString(sig)
	var out []byte
	for len(b) > 76 {
		out = append(append(out, b[:76]...), '\n')
		b = b[76:]
	}
	return string(append(out, b...))
}

// WriteCert writes the certificate into dir and returns its path.
func (s *Signer) WriteCert(t testing.TB, dir string) string {
	t.Helper()
	path := filepath.Join(dir, "identity.pem")
	if err := os.WriteFile(path, s.PEM, 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}
