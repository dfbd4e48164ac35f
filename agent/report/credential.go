package report

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"strings"
	"time"
)

// The routes of node credentials (see nodeauth.Server).
const (
	// CredentialPattern issues a node its credential: with the bootstrap
	// secret and the cloud's signed identity of the instance, or with the
	// operator's API token.
	CredentialPattern = "POST /v1/agents/{node}/credential"
	// RotatePattern exchanges a node's credential for a new one.
	RotatePattern = "POST /v1/agents/{node}/credential/rotate"
)

// CodeHeader is the response header carrying a refusal's typed code (an
// nodeauth.Code such as "revoked"), beside the reason in the body.
const CodeHeader = "Fleetcast-Error"

// CredentialRequest is the body of a request for a node credential made
// with the bootstrap secret: the node's proof of which instance it is.
type CredentialRequest struct {
	// Nonce is the agent's bootstrap nonce, a secret it keeps beside its
	// credential (at least 32 characters): the first bootstrap binds it to
	// the node, and after a revocation only the agent with it may bootstrap
	// the node again.
	Nonce string `json:"nonce"`
	// AWS is the instance identity document and its signature, as the EC2
	// instance metadata service serves them
	// (/latest/dynamic/instance-identity/document and .../signature).
	AWS *AWSIdentity `json:"aws,omitempty"`
	// GCP is the Compute Engine instance identity token, as the metadata
	// server signs it (instance/service-accounts/default/identity, for the
	// controller's audience, format=full). It needs no bootstrap secret.
	GCP *GCPIdentity `json:"gcp,omitempty"`
	// Plugin is an identity a provider plugin checks (a node of a plugin
	// pool: on-prem servers, a neocloud's), with the bootstrap secret.
	Plugin *PluginIdentity `json:"plugin,omitempty"`
}

// PluginIdentity is what a node of a plugin pool presents for its
// plugin to check: the output of the agent's -identity-command.
type PluginIdentity struct {
	Document string `json:"document"`
}

// GCPIdentity is a Compute Engine instance's identity, signed by Google.
type GCPIdentity struct {
	// Token is the ID token (a JWT).
	Token string `json:"token"`
}

// AWSIdentity is an EC2 instance's identity document, signed by AWS.
type AWSIdentity struct {
	// Document is the document's bytes, exactly as served.
	Document string `json:"document"`
	// Signature is the base64 RSA-SHA256 signature of Document (line breaks
	// allowed, as served).
	Signature string `json:"signature"`
}

// RotateRequest is the body of a rotation: the hash of the credential
// the agent made and keeps (nodeauth.NewToken), never the credential.
type RotateRequest struct {
	// Next is the hex SHA-256 of the new credential.
	Next string `json:"next"`
}

// CredentialAnswer is the controller's answer to an issue (the node's new
// credential, shown once) or a rotation (no credential: the agent made it).
type CredentialAnswer struct {
	Node       string    `json:"node"`
	Credential string    `json:"credential,omitempty"`
	Issued     time.Time `json:"issued"`
}

// credentialPrefix marks a Fleetcast node credential (version 1).
const credentialPrefix = "fcn1"

// MaxNode is the longest node name a credential may carry, in bytes.
const MaxNode = 255

// NewCredential returns a fresh credential for node: its name and 32
// random bytes. The controller makes one at a bootstrap; an agent makes
// its next one when it rotates, so that the controller never holds a
// credential the agent lacks.
func NewCredential(node string) string {
	raw := make([]byte, 32)
	rand.Read(raw)
	return credentialPrefix + "." + base64.RawURLEncoding.EncodeToString([]byte(node)) + "." + base64.RawURLEncoding.EncodeToString(raw)
}

// CredentialNode returns the node a credential names; ok is false when it
// is not a Fleetcast node credential.
func CredentialNode(credential string) (node string, ok bool) {
	parts := strings.Split(credential, ".")
	if len(parts) != 3 || parts[0] != credentialPrefix || parts[2] == "" || len(parts[1]) > 4*MaxNode/3+4 {
		return "", false
	}
	b, err := base64.RawURLEncoding.DecodeString(parts[1])
	if err != nil || len(b) == 0 || len(b) > MaxNode {
		return "", false
	}
	return string(b), true
}

// Hash is the hex SHA-256 the controller keeps of a credential or a
// bootstrap nonce, never the secret itself.
func Hash(secret string) string {
	sum := sha256.Sum256([]byte(secret))
	return hex.EncodeToString(sum[:])
}

// IssueRequest is the body of an operator's issue of a node credential
// (with an operator's API token); it may be empty.
type IssueRequest struct {
	// Replace replaces a credential the node holds and that is not
	// revoked: its agent is refused from then on. Without it such an issue
	// is refused (409, "registered").
	Replace bool `json:"replace,omitempty"`
	// Reason says why, for the controller's log; required with Replace.
	Reason string `json:"reason,omitempty"`
}
