package main

import (
	"bytes"
	"context"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/fleetcast/autoscaler/agent/report"
	"github.com/fleetcast/autoscaler/fleet"
	"github.com/fleetcast/autoscaler/internal/cli"
	"github.com/fleetcast/autoscaler/internal/secretfile"
	"github.com/fleetcast/autoscaler/state"
)

// runToken is `autoscaler token list|issue|revoke`: the operator's hand on
// node credentials, through the running controller's API (the state file
// is the controller's alone while it runs).
func runToken(e *env, args []string) int {
	if len(args) == 0 || strings.HasPrefix(args[0], "-") {
		fmt.Fprintln(e.stderr, "token: want a command: list, issue NODE or revoke NODE")
		return cli.ExitUsage
	}
	sub := args[0]
	if sub != "list" && sub != "issue" && sub != "revoke" {
		fmt.Fprintf(e.stderr, "token: unknown command %q; want list, issue or revoke\n", sub)
		return cli.ExitUsage
	}
	fs := cli.NewFlagSet(e.stderr, "autoscaler", "token "+sub, "token "+sub+" -config FILE [-addr URL] [-ca-file FILE]"+map[string]string{"list": "", "issue": " [-replace REASON] NODE", "revoke": " [-forget] NODE"}[sub])
	c := controllerFlags(fs)
	forget, replace := false, ""
	switch sub {
	case "revoke":
		fs.BoolVar(&forget, "forget", false, "forget the node too, so that any agent with the bootstrap secret and the instance's identity may bootstrap it (one that lost its files), not only the one that registered it")
	case "issue":
		fs.StringVar(&replace, "replace", "", "replace the node's credential even while it is good, cutting off the agent that holds it; the reason goes in the controller's log (without it, an issue for a node that holds a good credential is refused)")
	}
	what := "node"
	if sub == "list" {
		what = ""
	}
	log, node, code, ok := cli.SetupNamed(e.stderr, fs, args[1:], what)
	if !ok {
		return code
	}
	cfg, ok := loadConfig(e, log, c.path)
	if !ok {
		return cli.ExitError
	}
	method, route := map[string]string{"list": "GET", "issue": "POST", "revoke": "DELETE"}[sub], "/v1/credentials"
	if sub != "list" {
		route = "/v1/agents/" + url.PathEscape(node) + "/credential"
	}
	if forget {
		route += "?forget=true"
	}
	var req any
	if replace != "" {
		req = report.IssueRequest{Replace: true, Reason: replace}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	body, code, err := callController(ctx, cfg.Controller, c.addr, c.caFile, method, route, req, true)
	if err != nil {
		fmt.Fprintf(e.stderr, "token %s: %v\n", sub, err)
		return code
	}
	switch sub {
	case "issue":
		var a report.CredentialAnswer
		if err := json.Unmarshal(body, &a); err != nil {
			fmt.Fprintln(e.stderr, "token issue: the controller's answer:", err)
			return cli.ExitError
		}
		if replace != "" {
			fmt.Fprintln(e.stderr, "credential replaced for", node, "(shown once; put it in the agent's -token-file, mode 0600; the agent that held the old one is refused from now on)")
		} else {
			fmt.Fprintln(e.stderr, "credential issued for", node, "(shown once; put it in the agent's -token-file, mode 0600)")
		}
		fmt.Fprintln(e.stdout, a.Credential)
	case "revoke":
		if forget {
			fmt.Fprintf(e.stdout, "revoked and forgot %s: its agent is refused from now on; any agent with the bootstrap secret and the instance's identity may bootstrap it\n", node)
		} else {
			fmt.Fprintf(e.stdout, "revoked %s: its agent is refused from now on, and the agent that registered it bootstraps again\n", node)
		}
	case "list":
		var list []state.Credential
		if err := json.Unmarshal(body, &list); err != nil {
			fmt.Fprintln(e.stderr, "token list: the controller's answer:", err)
			return cli.ExitError
		}
		tw := tabwriter.NewWriter(e.stdout, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "NODE\tPOOL\tVIA\tREGISTERED\tISSUED\tROTATIONS\tREVOKED")
		for _, c := range list {
			revoked := "-"
			if !c.Revoked.IsZero() {
				revoked = c.Revoked.Format(time.RFC3339)
			}
			pool := c.Pool
			if pool == "" {
				pool = "-"
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%d\t%s\n", c.Node, pool, c.Via, c.Registered.Format(time.RFC3339), c.Issued.Format(time.RFC3339), c.Rotations, revoked)
		}
		tw.Flush()
	}
	return cli.ExitOK
}

// apiFlags are the flags of a command that calls the running controller.
type apiFlags struct{ path, addr, caFile string }

// controllerFlags adds the flags of a call to the running controller to
// fs: its config, its address and its certificate's CA.
func controllerFlags(fs *flag.FlagSet) *apiFlags {
	c := &apiFlags{}
	fs.StringVar(&c.path, "config", "", "the controller's fleet config (for its address, TLS certificate and state directory)")
	fs.StringVar(&c.addr, "addr", "", "the controller's API URL (default: from controller.listen, on 127.0.0.1)")
	fs.StringVar(&c.caFile, "ca-file", "", "PEM file of the CA(s) of the controller's certificate (default: controller.tls_cert_file itself)")
	return c
}

// callController makes one call to the running controller's API, with
// an API token (FLEETCAST_API_TOKEN, else the root token in
// controller.state_dir; needed says the call cannot do without one) and
// req as its JSON body (nil: none), and returns the answer's body, or an
// error and the exit status it calls for.
func callController(ctx context.Context, ctrl fleet.ControllerSettings, addr, caFile, method, route string, req any, needed bool) ([]byte, int, error) {
	apiToken := os.Getenv("FLEETCAST_API_TOKEN")
	if apiToken == "" && (needed || ctrl.StateDir != "") {
		var err error
		if apiToken, err = secretfile.Read(filepath.Join(ctrl.StateDir, "api-token")); err != nil && needed {
			return nil, cli.ExitError, fmt.Errorf("the API token: %w (set FLEETCAST_API_TOKEN to a token of the scope this needs, or run where the controller's state directory is, for its root token)", err)
		}
	}
	return callControllerAs(ctx, ctrl, addr, caFile, apiToken, method, route, req)
}

// callControllerAs is callController with the API token given ("" for
// none).
func callControllerAs(ctx context.Context, ctrl fleet.ControllerSettings, addr, caFile, apiToken, method, route string, req any) ([]byte, int, error) {
	base, client, err := apiClient(ctrl, addr, caFile)
	if err != nil {
		return nil, cli.ExitUsage, err
	}
	var payload io.Reader
	if req != nil {
		b, err := json.Marshal(req)
		if err != nil {
			return nil, cli.ExitError, err
		}
		payload = bytes.NewReader(b)
	}
	hreq, err := http.NewRequestWithContext(ctx, method, base+route, payload)
	if err != nil {
		return nil, cli.ExitError, err
	}
	if apiToken != "" {
		hreq.Header.Set("Authorization", "Bearer "+apiToken)
	}
	hreq.Header.Set("Content-Type", "application/json")
	resp, err := client.Do(hreq)
	if err != nil {
		return nil, cli.ExitError, err
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
	if resp.StatusCode != http.StatusOK {
		return nil, cli.ExitError, fmt.Errorf("the controller answered %s: %s", resp.Status, strings.TrimSpace(string(body)))
	}
	return body, cli.ExitOK, nil
}

// apiClient returns the controller API's base URL and a client for it.
// Without addr it is controller.listen (127.0.0.1 for every interface),
// over HTTPS when the controller serves it; plain http is refused off
// loopback unless controller.insecure; the certificate is verified against
// caFile, else against controller.tls_cert_file itself (a certificate
// trusts itself), for the name the certificate gives.
func apiClient(c fleet.ControllerSettings, addr, caFile string) (string, *http.Client, error) {
	if addr == "" {
		host, port, err := net.SplitHostPort(c.Listen)
		if err != nil {
			return "", nil, fmt.Errorf("controller.listen %q: %w", c.Listen, err)
		}
		if ip := net.ParseIP(host); host == "" || ip != nil && ip.IsUnspecified() {
			host = "127.0.0.1" // every interface: this machine's loopback is one
		}
		scheme := "http"
		if c.TLS() {
			scheme = "https"
		}
		addr = scheme + "://" + net.JoinHostPort(host, port)
	}
	if u, err := url.Parse(addr); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return "", nil, fmt.Errorf("-addr %q: want the controller's URL, such as https://fleetcast.internal:8790", addr)
	} else if u.Scheme == "http" && !fleet.Loopback(u.Host) && !c.Insecure {
		return "", nil, fmt.Errorf("-addr %s is plain http to a host other than loopback: the API token would cross the network in the clear; use https", addr)
	}
	if caFile == "" {
		caFile = c.TLSCertFile
	}
	tr, data, err := cli.TLSTransport(caFile)
	if err != nil {
		return "", nil, fmt.Errorf("the controller's certificate: %w", err)
	}
	if data != nil {
		if u, err := url.Parse(addr); err == nil && fleet.Loopback(u.Host) {
			// On loopback, check the certificate for the name it is for.
			if b, _ := pem.Decode(data); b != nil {
				if leaf, err := x509.ParseCertificate(b.Bytes); err == nil {
					switch {
					case len(leaf.DNSNames) > 0:
						tr.TLSClientConfig.ServerName = leaf.DNSNames[0]
					case len(leaf.IPAddresses) > 0:
						tr.TLSClientConfig.ServerName = leaf.IPAddresses[0].String()
					}
				}
			}
		}
	}
	return strings.TrimSuffix(addr, "/"), &http.Client{Transport: tr, Timeout: 30 * time.Second}, nil
}
