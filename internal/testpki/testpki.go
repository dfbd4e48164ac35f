// Package testpki makes what a controller's TLS and bootstrap need, for
// tests and for scripts/try-moto.sh: a CA and a server certificate it
// signed for 127.0.0.1 and localhost, a bootstrap secret, a stand-in trust
// root for identity documents, and a copy of an example config that points
// at them instead of /etc/fleetcast and /var/lib/fleetcast.
package testpki

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/hex"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// PKI is a CA and a server certificate it signed, as files.
type PKI struct {
	CAFile, CertFile, KeyFile string
	// Pool trusts the CA.
	Pool *x509.CertPool
}

// New is Write for a test, which it fails if the files cannot be made.
func New(t testing.TB, dir string) PKI {
	t.Helper()
	p, err := Write(dir)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// Write makes a CA and a server certificate for 127.0.0.1, localhost and
// fleetcast.internal, valid for a day, into dir (ca.pem, controller.crt,
// controller.key; mode 0600).
func Write(dir string) (PKI, error) {
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return PKI{}, err
	}
	caTmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "fleetcast test CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		return PKI{}, err
	}
	ca, err := x509.ParseCertificate(caDER)
	if err != nil {
		return PKI{}, err
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return PKI{}, err
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "fleetcast.internal"},
		DNSNames: []string{"fleetcast.internal", "localhost"}, IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		return PKI{}, err
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return PKI{}, err
	}
	p := PKI{CAFile: filepath.Join(dir, "ca.pem"), CertFile: filepath.Join(dir, "controller.crt"), KeyFile: filepath.Join(dir, "controller.key"), Pool: x509.NewCertPool()}
	p.Pool.AddCert(ca)
	for path, block := range map[string]*pem.Block{p.CAFile: {Type: "CERTIFICATE", Bytes: caDER}, p.CertFile: {Type: "CERTIFICATE", Bytes: der}, p.KeyFile: {Type: "EC PRIVATE KEY", Bytes: keyDER}} {
		if err := os.WriteFile(path, pem.EncodeToMemory(block), 0o600); err != nil {
			return PKI{}, err
		}
	}
	return p, nil
}

// LocalConfig writes into dir a copy of the example config src (the text
// of examples/aws.hcl or cloud.hcl) whose state directory, TLS
// certificate and key, bootstrap secret and identity trust root are files
// made in dir, and returns the copy's path and the PKI. The trust root is
// a fresh RSA certificate no AWS key signs with: nodes cannot bootstrap
// against it, which is right for a controller no real node reaches.
func LocalConfig(src, dir string) (string, PKI, error) {
	p, err := Write(dir)
	if err != nil {
		return "", PKI{}, err
	}
	raw := make([]byte, 32)
	rand.Read(raw)
	secret := filepath.Join(dir, "bootstrap-token")
	if err := os.WriteFile(secret, []byte(hex.EncodeToString(raw)+"\n"), 0o600); err != nil {
		return "", PKI{}, err
	}
	_, _, certPEM, err := SelfSignedRSA("stand-in identity signer")
	if err != nil {
		return "", PKI{}, err
	}
	identity := filepath.Join(dir, "identity.pem")
	if err := os.WriteFile(identity, certPEM, 0o644); err != nil {
		return "", PKI{}, err
	}
	text := strings.NewReplacer(
		`"/var/lib/fleetcast"`, `"`+filepath.Join(dir, "state")+`"`,
		`"/etc/fleetcast/tls/controller.crt"`, `"`+p.CertFile+`"`,
		`"/etc/fleetcast/tls/controller.key"`, `"`+p.KeyFile+`"`,
		`"/etc/fleetcast/bootstrap-token"`, `"`+secret+`"`,
		`"/etc/fleetcast/aws-identity-us-east-1.pem"`, `"`+identity+`"`,
	).Replace(src)
	conf := filepath.Join(dir, "fleet.hcl")
	return conf, p, os.WriteFile(conf, []byte(text), 0o600)
}

// SelfSignedRSA makes a 2048-bit RSA key (the size of AWS's identity
// signing keys) and a self-signed certificate for it, valid for a day,
// also PEM-encoded.
func SelfSignedRSA(cn string) (*rsa.PrivateKey, *x509.Certificate, []byte, error) {
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return nil, nil, nil, err
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(3), Subject: pkix.Name{CommonName: cn},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour)}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, nil, nil, err
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, nil, nil, err
	}
	return key, cert, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), nil
}
