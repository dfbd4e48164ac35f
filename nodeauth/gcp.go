package nodeauth

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"google.golang.org/api/idtoken"
)

// GCPInstance is what a Compute Engine instance identity token says of its
// instance (its google.compute_engine claims).
type GCPInstance struct {
	InstanceID, InstanceName, ProjectID, Zone string
	// Created is when the instance was created (zero if the token does
	// not say), on Google's clock.
	Created time.Time
}

// Validator checks an ID token's signature, audience and expiry, as
// idtoken.Validator does against Google's published keys.
type Validator interface {
	Validate(ctx context.Context, token, audience string) (*idtoken.Payload, error)
}

// GCPVerifier checks the instance identity tokens Compute Engine's
// metadata server signs for an instance
// (instance/service-accounts/default/identity?audience=...&format=full):
// signed by Google (RS256, Google's keys), issued by accounts.google.com,
// for Audience, not expired nor issued in the future, with the instance's
// claims. A token can be minted only on the instance it names, lasts an
// hour and is good for one audience, so it is the node's proof on its own:
// GCP nodes need no bootstrap secret (and so no Secret Manager, nor the
// cloud-platform scope, to read one).
type GCPVerifier struct {
	// Audience is the audience the tokens must be for
	// (controller.gcp_identity_audience): the controller's URL as the
	// agents reach it.
	Audience string
	// Validator checks signatures: idtoken.NewValidator, against
	// Google's keys (fetched, and cached as long as Google says).
	Validator Validator
	// Now is the clock (time.Now when nil).
	Now func() time.Time
}

// gcpIssuers are the issuers of Compute Engine identity tokens.
var gcpIssuers = map[string]bool{"https://accounts.google.com": true, "accounts.google.com": true}

// maxIssuedAhead is how far in the future a token's issue time may be (the
// clocks' skew).
const maxIssuedAhead = 5 * time.Minute

// Verify checks token and returns the instance it names.
func (v *GCPVerifier) Verify(ctx context.Context, token string) (GCPInstance, error) {
	if v.Audience == "" || v.Validator == nil {
		return GCPInstance{}, errors.New("no audience or validator configured")
	}
	// Compute Engine signs with RS256 and Google's keys; idtoken would
	// also take ES256, against Identity-Aware Proxy's.
	head, _, _ := strings.Cut(token, ".")
	var h struct {
		Alg string `json:"alg"`
	}
	if b, err := base64.RawURLEncoding.DecodeString(head); err != nil || json.Unmarshal(b, &h) != nil || h.Alg != "RS256" {
		return GCPInstance{}, fmt.Errorf("not an RS256 token (its header says %q): Compute Engine signs identity tokens with RS256", h.Alg)
	}
	p, err := v.Validator.Validate(ctx, token, v.Audience)
	if err != nil {
		return GCPInstance{}, err
	}
	now := time.Now
	if v.Now != nil {
		now = v.Now
	}
	switch {
	case !gcpIssuers[p.Issuer]:
		return GCPInstance{}, fmt.Errorf("issued by %q, not by Google (accounts.google.com)", p.Issuer)
	case time.Unix(p.IssuedAt, 0).After(now().Add(maxIssuedAhead)):
		return GCPInstance{}, fmt.Errorf("issued at %s, in the future", time.Unix(p.IssuedAt, 0).UTC().Format(time.RFC3339))
	}
	google, _ := p.Claims["google"].(map[string]any)
	ce, _ := google["compute_engine"].(map[string]any)
	claim := func(name string) string { s, _ := ce[name].(string); return s }
	in := GCPInstance{InstanceID: claim("instance_id"), InstanceName: claim("instance_name"), ProjectID: claim("project_id"), Zone: claim("zone")}
	if sec, ok := ce["instance_creation_timestamp"].(float64); ok && sec > 0 {
		in.Created = time.Unix(int64(sec), 0).UTC()
	}
	if in.InstanceName == "" || in.ProjectID == "" || in.Zone == "" {
		return GCPInstance{}, errors.New("no instance in the token (google.compute_engine claims): the agent must ask for format=full")
	}
	return in, nil
}
