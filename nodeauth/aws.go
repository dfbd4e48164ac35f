package nodeauth

import (
	"crypto"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/fleetcast/autoscaler/agent/report"
)

// AWSDocument is the part of an EC2 instance identity document the
// controller reads.
type AWSDocument struct {
	InstanceID       string    `json:"instanceId"`
	Region           string    `json:"region"`
	AccountID        string    `json:"accountId"`
	AvailabilityZone string    `json:"availabilityZone"`
	InstanceType     string    `json:"instanceType"`
	PendingTime      time.Time `json:"pendingTime"`
}

// VerifyAWS checks an instance identity document's signature (RSA with
// SHA-256, the metadata service's /latest/dynamic/instance-identity/signature)
// against the trust root, the public certificates AWS publishes for its
// regions (tests use their own), and returns the document.
func VerifyAWS(id *report.AWSIdentity, roots []*x509.Certificate) (AWSDocument, error) {
	if id == nil || id.Document == "" || id.Signature == "" {
		return AWSDocument{}, errors.New("no instance identity document and signature")
	}
	sig, err := base64.StdEncoding.DecodeString(strings.Join(strings.Fields(id.Signature), ""))
	if err != nil {
		return AWSDocument{}, fmt.Errorf("the identity signature is not base64: %w", err)
	}
	digest := sha256.Sum256([]byte(id.Document))
	verified := false
	for _, c := range roots {
		if key, ok := c.PublicKey.(*rsa.PublicKey); ok && rsa.VerifyPKCS1v15(key, crypto.SHA256, digest[:], sig) == nil {
			verified = true
			break
		}
	}
	if !verified {
		return AWSDocument{}, fmt.Errorf("the identity document's signature does not verify against any of the %d trusted certificate(s)", len(roots))
	}
	var doc AWSDocument
	if err := json.Unmarshal([]byte(id.Document), &doc); err != nil {
		return AWSDocument{}, fmt.Errorf("the identity document is not JSON: %w", err)
	}
	if doc.InstanceID == "" {
		return AWSDocument{}, errors.New("the identity document names no instanceId")
	}
	return doc, nil
}

// LoadCertificates reads the PEM certificates in path (one or more, as for
// AWS's per-region identity certificates concatenated), the trust root of
// VerifyAWS. A file with none, or with a certificate that is not RSA, is an
// error naming it.
func LoadCertificates(path string) ([]*x509.Certificate, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("identity certificates: %w", err)
	}
	var out []*x509.Certificate
	for n := 1; ; n++ {
		var b *pem.Block
		if b, data = pem.Decode(data); b == nil {
			break
		}
		if b.Type != "CERTIFICATE" {
			continue
		}
		c, err := x509.ParseCertificate(b.Bytes)
		if err != nil {
			return nil, fmt.Errorf("identity certificates: %s, block %d: %w", path, n, err)
		}
		if _, ok := c.PublicKey.(*rsa.PublicKey); !ok {
			return nil, fmt.Errorf("identity certificates: %s, block %d (%s): not an RSA certificate (use AWS's RSA certificate for the region, which verifies the identity signature)", path, n, c.Subject)
		}
		out = append(out, c)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("identity certificates: %s holds no PEM CERTIFICATE block", path)
	}
	return out, nil
}
