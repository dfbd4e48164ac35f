package agent

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/fleetcast/autoscaler/agent/report"
	"github.com/fleetcast/autoscaler/internal/secretfile"
)

// Credential is the agent's node credential. It lives in File (mode
// 0600); when there is none, or the controller refuses it (revoked, or a
// controller that lost its state), the agent bootstraps: it presents the
// fleet's bootstrap secret with the instance's signed identity and gets a
// new one, which only the controller can refuse. It is rotated by Rotate.
// Neither the credential nor the secret is ever logged.
type Credential struct {
	// File holds the credential. A bootstrap or rotation rewrites it
	// (atomically, mode 0600); a file others may read is refused.
	File string
	// BootstrapFile holds the fleet's bootstrap secret (mode 0600); empty:
	// the agent cannot bootstrap (unless IdentityOnly) and needs a
	// credential in File that an operator issued (`autoscaler token
	// issue`).
	BootstrapFile string
	// IdentityOnly says the instance's identity is proof enough (a Compute
	// Engine identity token, minted on the instance for the controller):
	// the agent bootstraps with it alone, and no secret is read or sent.
	IdentityOnly bool
	// Identity returns the instance's signed identity for a bootstrap.
	Identity func(ctx context.Context) (*report.CredentialRequest, error)
	// Controller is the controller's base URL.
	Controller string
	Node       string
	Client     *http.Client
	Log        hclog.Logger

	mu    sync.Mutex
	token string
}

// FixedCredential is a credential held in memory only, which the agent
// cannot renew (for tests and embedding).
func FixedCredential(token string) *Credential { return &Credential{token: token} }

// RefusedError is the controller's refusal of a request for lack of a
// good credential (401) or with another node's (403).
type RefusedError struct {
	Status int
	// Code is the controller's typed code (nodeauth.Code), "" if none.
	Code   string
	Reason string
}

func (e *RefusedError) Error() string {
	return fmt.Sprintf("refused with %d %s: %s", e.Status, e.Code, e.Reason)
}

// refusal reads a non-200 answer into an error: a *RefusedError for 401
// and 403.
func refusal(what string, resp *http.Response) error {
	msg, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	reason := strings.TrimSpace(string(msg))
	if resp.StatusCode == http.StatusUnauthorized || resp.StatusCode == http.StatusForbidden {
		return fmt.Errorf("%s: %w", what, &RefusedError{Status: resp.StatusCode, Code: resp.Header.Get(report.CodeHeader), Reason: reason})
	}
	return fmt.Errorf("%s refused with %s: %s", what, resp.Status, reason)
}

// Token returns the credential, from File when it is not in memory yet,
// bootstrapping when File holds none.
func (c *Credential) Token(ctx context.Context) (string, error) {
	c.mu.Lock()
	token := c.token
	c.mu.Unlock()
	if token != "" {
		return token, nil
	}
	if c.File == "" {
		return "", errors.New("no credential")
	}
	token, err := secretfile.Read(c.File)
	switch {
	case err == nil && token != "":
		c.mu.Lock()
		c.token = token
		c.mu.Unlock()
		return token, nil
	case err != nil && !errors.Is(err, os.ErrNotExist):
		return "", fmt.Errorf("credential: %w", err)
	case !c.canBootstrap():
		return "", fmt.Errorf("credential: %s holds none and the agent cannot bootstrap (no -bootstrap-token-file): ask an operator for one (`autoscaler token issue %s`)", c.File, c.Node)
	}
	if err := c.Bootstrap(ctx); err != nil {
		return "", err
	}
	return c.Token(ctx)
}

// Refused handles the controller's refusal of the credential. A
// credential in File other than the one in use (an operator put one
// there) is taken up first, and a rotation's kept one dropped; else the
// one a rotation made whose answer was lost is taken up; otherwise the
// agent bootstraps again when it can (the controller refuses that too
// unless the node's credential was revoked or lost).
func (c *Credential) Refused(ctx context.Context, e *RefusedError) error {
	if e.Status != http.StatusUnauthorized {
		return fmt.Errorf("the controller refused this node's credential (%s): %s", e.Code, e.Reason)
	}
	c.mu.Lock()
	used := c.token
	c.mu.Unlock()
	if c.File != "" {
		if tok, err := secretfile.Read(c.File); err == nil && tok != "" && tok != used {
			os.Remove(c.next())
			c.set(tok)
			return nil
		}
		if next, err := secretfile.Read(c.next()); err == nil && next != "" && next != used {
			if err := c.takeNext(next); err != nil {
				return err
			}
			return nil
		}
	}
	if !c.canBootstrap() {
		return fmt.Errorf("the controller refused this node's credential (%s): %s; put a new one in %s (`autoscaler token issue %s`)", e.Code, e.Reason, c.File, c.Node)
	}
	if c.Log != nil {
		c.Log.Warn("the controller refused the credential; bootstrapping again", "code", e.Code, "reason", e.Reason)
	}
	return c.Bootstrap(ctx)
}

// canBootstrap says the agent can get itself a credential: with the
// bootstrap secret, or with its identity alone.
func (c *Credential) canBootstrap() bool { return c.BootstrapFile != "" || c.IdentityOnly }

// Bootstrap gets a new credential with the bootstrap secret and the
// instance's identity, and keeps it in File.
func (c *Credential) Bootstrap(ctx context.Context) error {
	secret := ""
	if !c.IdentityOnly {
		var err error
		if secret, err = secretfile.Read(c.BootstrapFile); err != nil {
			return fmt.Errorf("bootstrap secret: %w", err)
		}
	}
	if c.Identity == nil {
		return errors.New("bootstrap: no source of the instance's identity (-identity)")
	}
	nonce, err := c.nonce()
	if err != nil {
		return err
	}
	id, err := c.Identity(ctx)
	if err != nil {
		return fmt.Errorf("bootstrap: the instance's identity: %w", err)
	}
	id.Nonce = nonce
	body, err := json.Marshal(id)
	if err != nil {
		return err
	}
	a, err := c.call(ctx, "/credential", secret, body, "bootstrap")
	if err != nil {
		return err
	}
	if a.Credential == "" {
		return errors.New("bootstrap: the controller's answer holds no credential")
	}
	if c.Log != nil {
		c.Log.Info("node credential obtained", "issued", a.Issued)
	}
	return c.keep(a.Credential)
}

// Rotate replaces the credential with one the agent makes and keeps
// first (in File + ".next", synced), sending the controller only its
// hash: if the answer is lost, the controller holds nothing the agent
// lacks. A kept one from a rotation whose answer was lost is offered again
// rather than a fresh one (the controller takes the same rotation again);
// one the controller refused outright is dropped.
func (c *Credential) Rotate(ctx context.Context) error {
	token, err := c.Token(ctx)
	if err != nil {
		return err
	}
	if c.File == "" {
		return errors.New("rotation: no credential file to keep the new credential in")
	}
	next, err := secretfile.Read(c.next())
	if err != nil || next == "" || next == token {
		next = report.NewCredential(c.Node)
		if err := secretfile.Write(c.next(), next); err != nil {
			return fmt.Errorf("rotation: %w", err)
		}
	}
	body, _ := json.Marshal(report.RotateRequest{Next: report.Hash(next)})
	a, err := c.call(ctx, "/credential/rotate", token, body, "rotation")
	var refused *RefusedError
	if errors.As(err, &refused) {
		// Not taken (the credential was revoked, rotated out or is
		// another's): the kept one will never be good.
		os.Remove(c.next())
	}
	if err != nil {
		return err
	}
	if err := c.takeNext(next); err != nil {
		return err
	}
	if c.Log != nil {
		c.Log.Info("node credential rotated", "issued", a.Issued)
	}
	return nil
}

// takeNext makes the rotation's kept credential the one in File, and
// uses it.
func (c *Credential) takeNext(next string) error {
	if err := os.Rename(c.next(), c.File); err != nil {
		return fmt.Errorf("taking up the rotated credential: %w", err)
	}
	if err := secretfile.SyncDir(c.File); err != nil {
		return fmt.Errorf("taking up the rotated credential: %w", err)
	}
	c.set(next)
	return nil
}

// next is where a rotation keeps the new credential until the controller
// took it.
func (c *Credential) next() string { return c.File + ".next" }

// nonce returns the agent's bootstrap nonce, kept beside the credential
// (File + ".nonce", mode 0600), made on first use: after a revocation only
// the agent with it may bootstrap the node again.
func (c *Credential) nonce() (string, error) {
	path := c.File + ".nonce"
	n, err := secretfile.Read(path)
	switch {
	case err == nil && len(n) >= 32:
		return n, nil
	case err == nil:
		// Damaged: a new one would lock the node out after a revocation
		// without anyone knowing why.
		return "", fmt.Errorf("bootstrap nonce %s holds %d characters, want at least 32: restore it, or remove it and have an operator run `autoscaler token revoke -forget %s`", path, len(n), c.Node)
	case !errors.Is(err, os.ErrNotExist):
		return "", fmt.Errorf("bootstrap nonce: %w", err)
	}
	raw := make([]byte, 32)
	rand.Read(raw)
	n = hex.EncodeToString(raw)
	if err := secretfile.Write(path, n); err != nil {
		return "", fmt.Errorf("bootstrap nonce: %w", err)
	}
	return n, nil
}

func (c *Credential) set(token string) {
	c.mu.Lock()
	c.token = token
	c.mu.Unlock()
}

// Issued returns when the credential in File was written (zero when there
// is no file): what rotation is timed from, across restarts.
func (c *Credential) Issued() time.Time {
	if c.File == "" {
		return time.Time{}
	}
	fi, err := os.Stat(c.File)
	if err != nil {
		return time.Time{}
	}
	return fi.ModTime()
}

func (c *Credential) call(ctx context.Context, path, bearer string, body []byte, what string) (report.CredentialAnswer, error) {
	resp, err := post(ctx, c.Client, c.Controller, c.Node, path, bearer, body)
	if err != nil {
		return report.CredentialAnswer{}, fmt.Errorf("%s at %s: %w", what, c.Controller, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return report.CredentialAnswer{}, refusal(what, resp)
	}
	var a report.CredentialAnswer
	if err := json.NewDecoder(io.LimitReader(resp.Body, 64<<10)).Decode(&a); err != nil {
		return report.CredentialAnswer{}, fmt.Errorf("%s: the controller's answer: %w", what, err)
	}
	return a, nil
}

// post sends a JSON body to the controller's route for node
// (/v1/agents/{node} and path) with a bearer token; client is a 15-second
// one when nil.
func post(ctx context.Context, client *http.Client, controller, node, path, bearer string, body []byte) (*http.Response, error) {
	u := strings.TrimSuffix(controller, "/") + "/v1/agents/" + url.PathEscape(node) + path
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, u, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	if bearer != "" {
		req.Header.Set("Authorization", "Bearer "+bearer)
	}
	if client == nil {
		client = &http.Client{Timeout: 15 * time.Second}
	}
	return client.Do(req)
}

// keep writes the credential to File and uses it from now on.
func (c *Credential) keep(token string) error {
	if c.File != "" {
		if err := secretfile.Write(c.File, token); err != nil {
			return fmt.Errorf("keeping the credential: %w", err)
		}
	}
	c.set(token)
	return nil
}
