package state

import (
	"fmt"
	"time"
)

var bucketAPITokens = []byte("api-tokens")

// APIToken is an API token as the controller keeps it: its name, its scope
// and only the SHA-256 of its secret, so a copy of the state file holds no
// token.
type APIToken struct {
	// Name names the token's holder ("slurm-prod", "grafana"); unique.
	Name string `json:"name"`
	// Scope is what it may do: "demand", "read" or "operator".
	Scope string `json:"scope"`
	// Hash is the hex SHA-256 of the current secret.
	Hash string `json:"hash,omitempty"`
	// Previous is the hex SHA-256 of the secret the last rotation
	// replaced, still good until PreviousUntil; "" when there is none.
	Previous      string    `json:"previous,omitempty"`
	PreviousUntil time.Time `json:"previous_until,omitzero"`
	// Created is when the token was created; Rotated when its secret was
	// last replaced (zero if never), and Rotations how often.
	Created   time.Time `json:"created"`
	Rotated   time.Time `json:"rotated,omitzero"`
	Rotations int       `json:"rotations,omitempty"`
	// By names the token that created or last rotated it.
	By string `json:"by,omitempty"`
}

// PutAPIToken records an API token, replacing any of its name.
func (s *Store) PutAPIToken(t APIToken) error {
	if err := checkAPIToken(t); err != nil {
		return err
	}
	return s.kv.update(func(tx kvTx) error { return putJSON(tx.Bucket(bucketAPITokens), t.Name, t) })
}

// checkAPIToken checks the fields an API token's record must have.
func checkAPIToken(t APIToken) error {
	if t.Name == "" || t.Hash == "" || t.Scope == "" {
		return fmt.Errorf("state: API token with no name, hash or scope: %q", t.Name)
	}
	return nil
}

// DeleteAPIToken forgets an API token.
func (s *Store) DeleteAPIToken(name string) error { return s.deleteKeys(bucketAPITokens, name) }

// APITokens returns every API token's record, by name.
func (s *Store) APITokens() ([]APIToken, error) { return all[APIToken](s, bucketAPITokens) }
