package state

import (
	"fmt"
	"time"
)

// Credential is a node's credential as the controller keeps it: never the
// credential itself, only its SHA-256, so a copy of the state file
// impersonates no node.
type Credential struct {
	Node string `json:"node"`
	// Pool is the pool the node proved it belongs to ("" when an operator
	// issued the credential).
	Pool string `json:"pool,omitempty"`
	// Hash is the hex SHA-256 of the current credential.
	Hash string `json:"hash,omitempty"`
	// Previous is the hex SHA-256 of the credential the last rotation
	// replaced, still good until PreviousUntil or until the node first
	// presents the new one (the rotation's answer may have been lost);
	// "" when there is none.
	Previous      string    `json:"previous,omitempty"`
	PreviousUntil time.Time `json:"previous_until,omitzero"`
	// Issued is when the current credential was issued; Registered when the
	// node first got one of this line (rotations keep it).
	Issued     time.Time `json:"issued"`
	Registered time.Time `json:"registered"`
	// Via says how the node got it: "bootstrap" (the bootstrap secret and
	// the cloud's signed identity of the instance) or "operator" (the API
	// token).
	Via string `json:"via"`
	// Rotations counts the rotations since Registered.
	Rotations int `json:"rotations,omitempty"`
	// Revoked is when an operator revoked it (zero while it is good): a
	// revoked node's credential is refused, and the agent that registered
	// the node may bootstrap again.
	Revoked time.Time `json:"revoked,omitzero"`
	// Nonce is the hex SHA-256 of the bootstrap nonce the node's first
	// bootstrap presented: only that agent may bootstrap the node again
	// after a revocation ("" when none was bound).
	Nonce string `json:"nonce,omitempty"`
	// Instance is the cloud's ID of the machine whose bootstrap registered
	// the node, where the node's name outlives its machine (a Compute
	// Engine instance name, which a managed instance group's recreate or
	// autohealing gives a new VM): a bootstrap that proves another machine
	// under the name is a new node's, if it was created after this one
	// (InstanceCreated, on the cloud's clock). "" when none was bound.
	Instance        string    `json:"instance,omitempty"`
	InstanceCreated time.Time `json:"instance_created,omitzero"`
}

// PutCredential records a node's credential, replacing any before it.
func (s *Store) PutCredential(c Credential) error {
	if c.Node == "" || c.Hash == "" {
		return fmt.Errorf("state: credential with no node or hash: %+v", c)
	}
	return s.kv.update(func(tx kvTx) error { return putJSON(tx.Bucket(bucketCreds), c.Node, c) })
}

// DeleteCredentials forgets nodes' credentials, in one transaction.
func (s *Store) DeleteCredentials(nodes ...string) error { return s.deleteKeys(bucketCreds, nodes...) }

// Credentials returns every node's credential record, by node.
func (s *Store) Credentials() ([]Credential, error) { return all[Credential](s, bucketCreds) }
