package nodeauthtest

import (
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/fleetcast/autoscaler/apiauth"
	"github.com/fleetcast/autoscaler/state"
)

// RootToken is the root token of NewAPI's tokens.
const RootToken = "root-token-0123456789abcdef"

// API is API tokens in memory for tests: the root token and one token of
// each scope, named for its scope.
type API struct {
	*apiauth.Tokens
	// Of is the secret of the token of each scope.
	Of map[apiauth.Scope]string
}

// NewAPI returns API tokens in memory: RootToken, and one token of each
// scope.
func NewAPI(t testing.TB) *API {
	tokens, err := apiauth.NewTokens(&APIMemory{}, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := tokens.SetRoot(RootToken, "FLEETCAST_API_TOKEN"); err != nil {
		t.Fatal(err)
	}
	a := &API{Tokens: tokens, Of: map[apiauth.Scope]string{}}
	for _, s := range apiauth.Scopes {
		secret, _, err := tokens.Create(string(s), s, apiauth.RootName)
		if err != nil {
			t.Fatal(err)
		}
		a.Of[s] = secret
	}
	return a
}

// APIMemory is an apiauth.Store in memory.
type APIMemory struct {
	mu sync.Mutex
	m  map[string]state.APIToken
}

// PutAPIToken records t.
func (s *APIMemory) PutAPIToken(t state.APIToken) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.m == nil {
		s.m = map[string]state.APIToken{}
	}
	s.m[t.Name] = t
	return nil
}

// DeleteAPIToken forgets a token.
func (s *APIMemory) DeleteAPIToken(name string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.m, name)
	return nil
}

// APITokens returns the records, by name.
func (s *APIMemory) APITokens() ([]state.APIToken, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]state.APIToken, 0, len(s.m))
	for _, t := range s.m {
		out = append(out, t)
	}
	slices.SortFunc(out, func(a, b state.APIToken) int { return strings.Compare(a.Name, b.Name) })
	return out, nil
}
