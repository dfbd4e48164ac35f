package main

import (
	"context"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
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
	"github.com/fleetcast/autoscaler/config"
	"github.com/fleetcast/autoscaler/internal/secretfile"
	"github.com/fleetcast/autoscaler/state"
)

// runToken is `autoscaler token list|issue|revoke`: the operator's hand on
// node credentials, through the running controller's API (the state file
// is the controller's alone while it runs).
func runToken(e *env, args []string) int {
	if len(args) == 0 || strings.HasPrefix(args[0], "-") {
		fmt.Fprintln(e.stderr, "token: want a command: list, issue NODE or revoke NODE")
		return exitUsage
	}
	sub := args[0]
	if sub != "list" && sub != "issue" && sub != "revoke" {
		fmt.Fprintf(e.stderr, "token: unknown command %q; want list, issue or revoke\n", sub)
		return exitUsage
	}
	fs := newFlagSet(e, "token "+sub, "token "+sub+" -config FILE [-addr URL] [-ca-file FILE]"+map[string]string{"list": "", "issue": " NODE", "revoke": " [-forget] NODE"}[sub])
	path := fs.String("config", "", "the controller's fleet config (for its address, TLS certificate and state directory)")
	addr := fs.String("addr", "", "the controller's API URL (default: from controller.listen, on 127.0.0.1)")
	caFile := fs.String("ca-file", "", "PEM file of the CA(s) of the controller's certificate (default: controller.tls_cert_file itself)")
	forget := false
	if sub == "revoke" {
		fs.BoolVar(&forget, "forget", false, "forget the node too, so that any agent with the bootstrap secret and the instance's identity may bootstrap it (one that lost its files), not only the one that registered it")
	}
	// The node comes first or last: `token revoke NODE -config F` or
	// `token revoke -config F NODE`.
	rest, node := args[1:], ""
	if sub != "list" {
		switch {
		case len(rest) > 0 && !strings.HasPrefix(rest[0], "-"):
			node, rest = rest[0], rest[1:]
		case len(rest) > 0 && !strings.HasPrefix(rest[len(rest)-1], "-"):
			node, rest = rest[len(rest)-1], rest[:len(rest)-1]
		}
	}
	log, code, ok := setup(e, fs, rest)
	if !ok {
		return code
	}
	if sub != "list" && node == "" {
		fmt.Fprintf(e.stderr, "token %s: name the node: token %s -config FILE NODE\n", sub, sub)
		return exitUsage
	}
	cfg, ok := loadConfig(e, log, *path)
	if !ok {
		return exitError
	}
	method, route := map[string]string{"list": "GET", "issue": "POST", "revoke": "DELETE"}[sub], "/v1/credentials"
	if sub != "list" {
		route = "/v1/agents/" + url.PathEscape(node) + "/credential"
	}
	if forget {
		route += "?forget=true"
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	body, code, err := callController(ctx, cfg.Controller, *addr, *caFile, method, route, true)
	if err != nil {
		fmt.Fprintf(e.stderr, "token %s: %v\n", sub, err)
		return code
	}
	switch sub {
	case "issue":
		var a report.CredentialAnswer
		if err := json.Unmarshal(body, &a); err != nil {
			fmt.Fprintln(e.stderr, "token issue: the controller's answer:", err)
			return exitError
		}
		fmt.Fprintln(e.stderr, "credential issued for", node, "(shown once; put it in the agent's -token-file, mode 0600; any earlier one is void)")
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
			return exitError
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
	return exitOK
}

// callController makes one call to the running controller's API, with
// the API token (FLEETCAST_API_TOKEN, else the one in controller.state_dir;
// needed says the call cannot do without it), and returns the answer's
// body, or an error and the exit status it calls for.
func callController(ctx context.Context, ctrl config.Controller, addr, caFile, method, route string, needed bool) ([]byte, int, error) {
	apiToken := os.Getenv("FLEETCAST_API_TOKEN")
	if apiToken == "" && (needed || ctrl.StateDir != "") {
		var err error
		if apiToken, err = secretfile.Read(filepath.Join(ctrl.StateDir, "api-token")); err != nil && needed {
			return nil, exitError, fmt.Errorf("the API token: %w (set FLEETCAST_API_TOKEN, or run where the controller's state directory is)", err)
		}
	}
	base, client, err := apiClient(ctrl, addr, caFile)
	if err != nil {
		return nil, exitUsage, err
	}
	req, err := http.NewRequestWithContext(ctx, method, base+route, nil)
	if err != nil {
		return nil, exitError, err
	}
	if apiToken != "" {
		req.Header.Set("Authorization", "Bearer "+apiToken)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := client.Do(req)
	if err != nil {
		return nil, exitError, err
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
	if resp.StatusCode != http.StatusOK {
		return nil, exitError, fmt.Errorf("the controller answered %s: %s", resp.Status, strings.TrimSpace(string(body)))
	}
	return body, exitOK, nil
}

// apiClient returns the controller API's base URL and a client for it.
// Without addr it is controller.listen (127.0.0.1 for every interface),
// over HTTPS when the controller serves it; plain http is refused off
// loopback unless controller.insecure; the certificate is verified against
// caFile, else against controller.tls_cert_file itself (a certificate
// trusts itself), for the name the certificate gives.
func apiClient(c config.Controller, addr, caFile string) (string, *http.Client, error) {
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
	} else if u.Scheme == "http" && !config.Loopback(u.Host) && !c.Insecure {
		return "", nil, fmt.Errorf("-addr %s is plain http to a host other than loopback: the API token would cross the network in the clear; use https", addr)
	}
	if caFile == "" {
		caFile = c.TLSCertFile
	}
	tr, data, err := tlsTransport(caFile)
	if err != nil {
		return "", nil, fmt.Errorf("the controller's certificate: %w", err)
	}
	if data != nil {
		if u, err := url.Parse(addr); err == nil && config.Loopback(u.Host) {
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
