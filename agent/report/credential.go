package report

import "time"

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
	// AWS is the instance identity document and its signature, as the EC2
	// instance metadata service serves them
	// (/latest/dynamic/instance-identity/document and .../signature).
	AWS *AWSIdentity `json:"aws,omitempty"`
}

// AWSIdentity is an EC2 instance's identity document, signed by AWS.
type AWSIdentity struct {
	// Document is the document's bytes, exactly as served.
	Document string `json:"document"`
	// Signature is the base64 RSA-SHA256 signature of Document (line breaks
	// allowed, as served).
	Signature string `json:"signature"`
}

// CredentialAnswer is the controller's answer to an issue or rotation: the
// node's new credential, shown once.
type CredentialAnswer struct {
	Node       string    `json:"node"`
	Credential string    `json:"credential"`
	Issued     time.Time `json:"issued"`
}
