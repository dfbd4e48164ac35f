// Package nodeauthtest is the test helper beside nodeauth, as
// net/http/httptest is beside net/http: it gives tests node credentials (a
// nodeauth.Registry in memory, and each node's credential, issued on first
// use) and API tokens in memory.
package nodeauthtest

import (
	"sync"
	"testing"

	"github.com/fleetcast/autoscaler/nodeauth"
	"github.com/fleetcast/autoscaler/state"
)

// Tokens is a registry and the credentials it issued, by node.
type Tokens struct {
	*nodeauth.Registry
	t      testing.TB
	mu     sync.Mutex
	issued map[string]string
}

// New returns an empty registry in memory.
func New(t testing.TB) *Tokens {
	r, err := nodeauth.NewRegistry(&Memory{}, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	return &Tokens{Registry: r, t: t, issued: map[string]string{}}
}

// For returns node's credential, issuing it (as an operator would) the
// first time.
func (k *Tokens) For(node string) string {
	k.mu.Lock()
	defer k.mu.Unlock()
	if tok, ok := k.issued[node]; ok {
		return tok
	}
	tok, _, err := k.Issue(node, "", nodeauth.ViaOperator, "")
	if err != nil {
		k.t.Fatal(err)
	}
	k.issued[node] = tok
	return tok
}

// Memory is a nodeauth.Store in memory.
type Memory struct {
	mu sync.Mutex
	m  map[string]state.Credential
}

// PutCredential records c.
func (s *Memory) PutCredential(c state.Credential) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.m == nil {
		s.m = map[string]state.Credential{}
	}
	s.m[c.Node] = c
	return nil
}

// DeleteCredentials forgets nodes' records.
func (s *Memory) DeleteCredentials(nodes ...string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, n := range nodes {
		delete(s.m, n)
	}
	return nil
}

// Credentials returns the records.
func (s *Memory) Credentials() ([]state.Credential, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]state.Credential, 0, len(s.m))
	for _, c := range s.m {
		out = append(out, c)
	}
	return out, nil
}
