package nodeauth

import (
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"
	"unicode"

	"github.com/hashicorp/go-hclog"

	"github.com/fleetcast/autoscaler/agent/report"
	"github.com/fleetcast/autoscaler/apiauth"
	"github.com/fleetcast/autoscaler/fleet"
	"github.com/fleetcast/autoscaler/internal/secretfile"
	"github.com/fleetcast/autoscaler/providers"
	"github.com/fleetcast/autoscaler/state"
)

// MinSecret is the shortest bootstrap secret accepted, in characters
// (`openssl rand -hex 32` makes 64).
const MinSecret = 32

// Server serves the credential routes:
//
//	POST   /v1/agents/{node}/credential         issue: the bootstrap secret and the instance's signed identity (AWS), a Compute Engine identity token alone (GCP), or an operator's API token
//	POST   /v1/agents/{node}/credential/rotate  rotate: the node's credential
//	DELETE /v1/agents/{node}/credential         revoke (?forget=true: and forget the node): an operator's API token
//	GET    /v1/credentials                      list (no secrets): an operator's API token
//
// The router they are added to checks the API tokens (apiauth.Router).
// Every refusal is a 4xx with the reason as text and its Code in
// report.CodeHeader, and changes nothing.
type Server struct {
	Registry *Registry
	// BootstrapFile holds the bootstrap secrets, one per line (mode 0600,
	// each at least MinSecret characters). It is read at every request, so
	// a change counts at once. Empty: nodes cannot bootstrap.
	BootstrapFile string
	// AWSRoots is the trust root of AWS instance identity documents; with
	// none, AWS nodes cannot bootstrap.
	AWSRoots []*x509.Certificate
	// GCP checks Compute Engine instance identity tokens; nil: GCP nodes
	// cannot bootstrap.
	GCP *GCPVerifier
	// Plugins check the identities nodes of plugin pools present (a
	// plugin.Set); nil: such nodes cannot bootstrap.
	Plugins providers.IdentityVerifier
	// Live says which managed pool node is a live instance of, and the
	// zone its group lists it in ("" if none), as the controller last
	// observed its fleet.
	Live func(node string) (pool fleet.Pool, zone string, ok bool)
	// Machine, if set, is the cloud's ID of the machine the group lists
	// under node's name, where the cloud names one (a Compute Engine
	// instance's); "" when unknown. A GCP bootstrap must prove that
	// machine: a VM made under the name outside the group proves another.
	Machine func(node string) string
	Log     hclog.Logger
	// Replacements counts the good node credentials operators replaced
	// (nil: not counted).
	Replacements interface{ Inc() }

	// verifying bounds the plugins' identity checks running at once.
	verifyOnce sync.Once
	verifying  chan struct{}
}

// MaxPluginVerifies is how many plugin identity checks run at once; a
// bootstrap beyond them is told to try again (503 busy).
const MaxPluginVerifies = 4

// The routes an operator alone may call.
const (
	RevokePattern = "DELETE /v1/agents/{node}/credential"
	ListPattern   = "GET /v1/credentials"
)

// Routes adds the routes to rt, each with the access it needs.
func (s *Server) Routes(rt *apiauth.Router) {
	rt.HandleFunc(report.CredentialPattern, apiauth.Bootstrap, s.issue)
	rt.HandleFunc(report.RotatePattern, apiauth.Node, s.rotate)
	rt.HandleFunc(RevokePattern, apiauth.NeedOperator, s.revoke)
	rt.HandleFunc(ListPattern, apiauth.NeedOperator, s.list)
}

func (s *Server) log() hclog.Logger {
	if s.Log == nil {
		return hclog.NewNullLogger()
	}
	return s.Log
}

// fail answers with a refusal, logged as the security event it is.
func (s *Server) fail(w http.ResponseWriter, r *http.Request, what string, err error) {
	var e *Error
	if !errors.As(err, &e) {
		s.log().Error(what, "node", r.PathValue("node"), "remote", r.RemoteAddr, "error", err)
		http.Error(w, "the controller could not do it; try again", http.StatusInternalServerError)
		return
	}
	args := []any{"node", r.PathValue("node"), "remote", r.RemoteAddr, "code", e.Code, "reason", e.Reason}
	if op, ok := apiauth.Caller(r.Context()); ok {
		args = append(args, "token", op.Name)
	}
	s.log().Warn(what+" refused", args...)
	report.Refuse(w, e, e.Status)
}

// secrets returns the bootstrap secrets now in the file, one per line: a
// second line lets a new secret in while nodes that carry the old one
// remain.
func (s *Server) secrets() ([]string, error) {
	if s.BootstrapFile == "" {
		return nil, refuse(http.StatusForbidden, Disabled, "this controller takes no bootstrap requests (controller.bootstrap_token_file is not set), and the request's bearer is no API token: a node's credential is issued by an operator with an operator API token (`autoscaler token issue NODE`)")
	}
	b, err := secretfile.Read(s.BootstrapFile)
	if err != nil {
		return nil, fmt.Errorf("bootstrap secret: %w", err)
	}
	var out []string
	for n, line := range strings.Split(b, "\n") {
		line = strings.TrimSpace(line)
		if line == "" {
			continue
		}
		if len(line) < MinSecret {
			return nil, fmt.Errorf("bootstrap secret %s, line %d: %d characters, want at least %d", s.BootstrapFile, n+1, len(line), MinSecret)
		}
		out = append(out, line)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("bootstrap secret %s is empty", s.BootstrapFile)
	}
	return out, nil
}

func (s *Server) issue(w http.ResponseWriter, r *http.Request) {
	node := r.PathValue("node")
	if op, ok := apiauth.Caller(r.Context()); ok {
		// The router lets an operator's API token through; any other
		// is refused here too.
		if !op.Scope.Allows(apiauth.Operator) {
			s.fail(w, r, "issuing a node credential", refuse(http.StatusForbidden, Code(apiauth.WrongScope), "API token %q has scope %s; issuing a node credential needs operator", op.Name, op.Scope))
			return
		}
		s.operatorIssue(w, r, node, op)
		return
	}
	proof, err := s.bootstrap(w, r, node)
	if err != nil {
		s.fail(w, r, "bootstrap", err)
		return
	}
	pool := proof.pool
	token, c, err := s.Registry.Bootstrap(node, pool, report.Hash(proof.nonce), proof.machine)
	if err != nil {
		s.fail(w, r, "bootstrap", err)
		return
	}
	s.log().Info("node registered", "node", node, "pool", pool, "via", ViaBootstrap, "remote", r.RemoteAddr)
	report.WriteJSON(w, report.CredentialAnswer{Node: node, Credential: token, Issued: c.Issued})
}

// maxReason bounds the reason an operator gives for a replacement.
const maxReason = 1024

// operatorIssue issues node a credential for an operator (op): refused
// while the node holds a good one, unless the request says to replace it
// and why; a replacement is logged with the operator's token and reason,
// and counted.
func (s *Server) operatorIssue(w http.ResponseWriter, r *http.Request, node string, op apiauth.Token) {
	var req report.IssueRequest
	if r.ContentLength != 0 {
		body, status, reason := report.ReadJSON(w, r, 4<<10, "credential request")
		if status != http.StatusOK {
			s.fail(w, r, "issuing a node credential", refuse(status, Malformed, "%s", reason))
			return
		}
		if len(body) > 0 {
			if err := fleet.DecodeJSON(body, &req); err != nil {
				s.fail(w, r, "issuing a node credential", refuse(http.StatusBadRequest, Malformed, "credential request: %v", err))
				return
			}
		}
	}
	req.Reason = strings.TrimSpace(req.Reason)
	switch {
	case req.Replace && req.Reason == "":
		s.fail(w, r, "issuing a node credential", refuse(http.StatusBadRequest, Malformed, "a replacement needs a reason (`autoscaler token issue -replace REASON %s`): it goes in the controller's log", node))
		return
	case len(req.Reason) > maxReason || strings.ContainsFunc(req.Reason, unicode.IsControl):
		s.fail(w, r, "issuing a node credential", refuse(http.StatusBadRequest, Malformed, "reason: want one line of at most %d bytes", maxReason))
		return
	case !req.Replace && req.Reason != "":
		s.fail(w, r, "issuing a node credential", refuse(http.StatusBadRequest, Malformed, "a reason goes with replace only"))
		return
	}
	var (
		token    string
		c        state.Credential
		replaced bool
		err      error
	)
	if req.Replace {
		token, c, replaced, err = s.Registry.Replace(node)
	} else {
		token, c, err = s.Registry.Issue(node, "", ViaOperator, "")
	}
	if err != nil {
		s.fail(w, r, "issuing a node credential", err)
		return
	}
	if replaced {
		s.log().Warn("node credential replaced by an operator: the agent that held it is refused from now on", "node", node, "token", op.Name, "reason", req.Reason, "remote", r.RemoteAddr)
		if s.Replacements != nil {
			s.Replacements.Inc()
		}
	} else {
		s.log().Info("node registered", "node", node, "via", ViaOperator, "token", op.Name, "remote", r.RemoteAddr)
	}
	report.WriteJSON(w, report.CredentialAnswer{Node: node, Credential: token, Issued: c.Issued})
}

// proof is what a bootstrap proved: the node's pool, the request's nonce,
// and the machine, where the cloud names one that a name may outlive (a
// Compute Engine instance).
type proof struct {
	pool, nonce string
	machine     Machine
}

// bootstrap checks a bootstrap request: the secret (but for a GCP
// identity token, which is proof enough), the identity, that it is node's
// and that node is live.
func (s *Server) bootstrap(w http.ResponseWriter, r *http.Request, node string) (proof, error) {
	got, ok := report.BearerToken(r)
	good := false
	if ok || s.GCP == nil {
		secrets, err := s.secrets()
		if err != nil {
			return proof{}, err
		}
		for _, secret := range secrets {
			good = good || ok && same(got, secret)
		}
		if !good && s.GCP == nil {
			return proof{}, refuse(http.StatusUnauthorized, BadSecret, "missing or wrong bootstrap secret (or an operator's API token)")
		}
	}
	body, status, reason := report.ReadJSON(w, r, 64<<10, "credential request")
	if status != http.StatusOK {
		return proof{}, refuse(status, Malformed, "%s", reason)
	}
	var req report.CredentialRequest
	if err := fleet.DecodeJSON(body, &req); err != nil {
		return proof{}, refuse(http.StatusBadRequest, Malformed, "credential request: %v", err)
	}
	if len(req.Nonce) < MinSecret {
		return proof{}, refuse(http.StatusBadRequest, Malformed, "credential request: nonce must be at least %d characters (the agent's bootstrap nonce)", MinSecret)
	}
	switch {
	case req.GCP != nil && req.AWS == nil:
		return s.bootstrapGCP(r, node, req)
	case !good:
		return proof{}, refuse(http.StatusUnauthorized, BadSecret, "missing or wrong bootstrap secret (or an operator's API token)")
	case req.Plugin != nil && req.AWS == nil:
		return s.bootstrapPlugin(r, node, req)
	case req.AWS == nil:
		return proof{}, refuse(http.StatusBadRequest, BadIdentity, "credential request: no identity (want \"aws\": the instance identity document and its signature; \"gcp\": a Compute Engine identity token; or \"plugin\": what the pool's plugin checks)")
	}
	if len(s.AWSRoots) == 0 {
		return proof{}, refuse(http.StatusForbidden, Disabled, "this controller has no trust root for AWS identity documents (controller.aws_identity_certificates)")
	}
	doc, err := VerifyAWS(req.AWS, s.AWSRoots)
	if err != nil {
		return proof{}, refuse(http.StatusForbidden, BadIdentity, "instance identity: %v", err)
	}
	if doc.InstanceID != node {
		return proof{}, refuse(http.StatusForbidden, BadIdentity, "the identity document is instance %q's, not %q's", doc.InstanceID, node)
	}
	var p fleet.Pool
	ok = false
	if s.Live != nil {
		p, _, ok = s.Live(node)
	}
	if !ok {
		return proof{}, refuse(http.StatusForbidden, NotLive, "instance %q is no live instance of a managed pool as the controller last observed them (a node that just booted: try again after the next cycle)", node)
	}
	if p.Region != "" && doc.Region != p.Region {
		return proof{}, refuse(http.StatusForbidden, BadIdentity, "instance %q's identity is in region %q, its pool %s in %q", node, doc.Region, p.Name, p.Region)
	}
	return proof{pool: p.Name, nonce: req.Nonce}, nil
}

// PluginVerifyTimeout bounds a plugin's check of a node's identity.
const PluginVerifyTimeout = 10 * time.Second

// bootstrapPlugin checks the identity a node of a plugin pool presents,
// with the bootstrap secret (checked already): node must be a live
// instance of a plugin pool, and its plugin must accept the document.
func (s *Server) bootstrapPlugin(r *http.Request, node string, req report.CredentialRequest) (proof, error) {
	if s.Plugins == nil {
		return proof{}, refuse(http.StatusForbidden, Disabled, "this controller runs no provider plugins to check a node's identity")
	}
	var (
		p  fleet.Pool
		ok bool
	)
	if s.Live != nil {
		p, _, ok = s.Live(node)
	}
	if !ok || p.Provider != fleet.ProviderPlugin {
		return proof{}, refuse(http.StatusForbidden, NotLive, "instance %q is no live instance of a plugin pool as the controller last observed them (a node that just booted: try again after the next cycle)", node)
	}
	// A few at a time (each may run a command), within the agent's
	// patience (its requests time out at 15 s).
	s.verifyOnce.Do(func() { s.verifying = make(chan struct{}, MaxPluginVerifies) })
	select {
	case s.verifying <- struct{}{}:
		defer func() { <-s.verifying }()
	default:
		return proof{}, refuse(http.StatusServiceUnavailable, Busy, "the controller is checking %d identities already: try again shortly", MaxPluginVerifies)
	}
	ctx, cancel := context.WithTimeout(r.Context(), PluginVerifyTimeout)
	defer cancel()
	if err := s.Plugins.VerifyIdentity(ctx, p, node, req.Plugin.Document); err != nil {
		var refused *providers.RefusedError
		if errors.As(err, &refused) {
			// The plugin's words (a command's stderr) are the
			// controller's log's, not the caller's.
			s.log().Warn("a plugin refused a node's identity", "node", node, "pool", p.Name, "remote", r.RemoteAddr, "error", err)
			return proof{}, refuse(http.StatusForbidden, BadIdentity, "pool %s's plugin refuses %q's identity (the controller's log says why)", p.Name, node)
		}
		// The plugin could not say (down, slow): not a refusal.
		return proof{}, fmt.Errorf("checking %q's identity with pool %s's plugin: %w", node, p.Name, err)
	}
	return proof{pool: p.Name, nonce: req.Nonce}, nil
}

// bootstrapGCP checks a Compute Engine identity token: signed by Google
// for this controller's audience (GCPVerifier), naming node, in the
// project and zone of a live GCP pool that node is an instance of.
func (s *Server) bootstrapGCP(r *http.Request, node string, req report.CredentialRequest) (proof, error) {
	if s.GCP == nil {
		return proof{}, refuse(http.StatusForbidden, Disabled, "this controller takes no Compute Engine identity (controller.gcp_identity_audience is not set)")
	}
	in, err := s.GCP.Verify(r.Context(), req.GCP.Token)
	if err != nil {
		return proof{}, refuse(http.StatusForbidden, BadIdentity, "Compute Engine identity token: %v", err)
	}
	if in.InstanceName != node {
		return proof{}, refuse(http.StatusForbidden, BadIdentity, "the identity token is instance %q's, not %q's", in.InstanceName, node)
	}
	var (
		p    fleet.Pool
		zone string
		ok   bool
	)
	if s.Live != nil {
		p, zone, ok = s.Live(node)
	}
	if !ok || p.Provider != fleet.ProviderGCP {
		return proof{}, refuse(http.StatusForbidden, NotLive, "instance %q is no live instance of a managed GCP pool as the controller last observed them (a node that just booted: try again after the next cycle)", node)
	}
	// Names are unique within a project's zone only: the VM must be the
	// one the group lists, in the zone it lists it in. Where the group
	// runs is the pool's settings' to say (a GCP pool's: its project, and
	// its zone or region); a pool whose settings say nothing matches none.
	project, inZone := "", false
	if place, ok := p.Settings.(providers.IdentityPlace); ok {
		project, inZone = place.IdentityProject(), place.IdentityZone(in.Zone)
	}
	inZone = inZone && zone != "" && in.Zone == zone
	if in.ProjectID != project || !inZone {
		return proof{}, refuse(http.StatusForbidden, BadIdentity, "instance %q's identity is in project %q, zone %q; its pool %s's group in project %q lists it in zone %q",
			node, in.ProjectID, in.Zone, p.Name, project, zone)
	}
	// A managed instance group recreates a VM under its name: the
	// instance's ID tells the machines apart, and must be the one the
	// group lists.
	if s.Machine != nil {
		if listed := s.Machine(node); listed != "" && listed != in.InstanceID {
			return proof{}, refuse(http.StatusForbidden, BadIdentity, "the identity token is instance ID %q's; pool %s's group lists instance ID %q as %q", in.InstanceID, p.Name, listed, node)
		}
	}
	return proof{pool: p.Name, nonce: req.Nonce, machine: Machine{ID: in.InstanceID, Created: in.Created}}, nil
}

func (s *Server) rotate(w http.ResponseWriter, r *http.Request) {
	node := r.PathValue("node")
	token, ok := report.BearerToken(r)
	if !ok {
		s.fail(w, r, "rotation", refuse(http.StatusUnauthorized, Malformed, "missing bearer credential"))
		return
	}
	body, status, reason := report.ReadJSON(w, r, 4<<10, "rotation")
	if status != http.StatusOK {
		s.fail(w, r, "rotation", refuse(status, Malformed, "%s", reason))
		return
	}
	var req report.RotateRequest
	if err := fleet.DecodeJSON(body, &req); err != nil {
		s.fail(w, r, "rotation", refuse(http.StatusBadRequest, Malformed, "rotation: %v", err))
		return
	}
	c, err := s.Registry.Rotate(node, token, req.Next)
	if err != nil {
		s.fail(w, r, "rotation", err)
		return
	}
	report.WriteJSON(w, report.CredentialAnswer{Node: node, Issued: c.Issued})
}

func (s *Server) revoke(w http.ResponseWriter, r *http.Request) {
	c, err := s.Registry.Revoke(r.PathValue("node"), r.URL.Query().Get("forget") == "true")
	if err != nil {
		s.fail(w, r, "revocation", err)
		return
	}
	op, _ := apiauth.Caller(r.Context())
	s.log().Warn("node credential revoked by an operator: its agent is refused from now on", "node", c.Node, "token", op.Name, "forget", r.URL.Query().Get("forget") == "true", "remote", r.RemoteAddr)
	c.Hash, c.Previous, c.Nonce = "", "", ""
	report.WriteJSON(w, c)
}

func (s *Server) list(w http.ResponseWriter, r *http.Request) {
	report.WriteJSON(w, s.Registry.List())
}
