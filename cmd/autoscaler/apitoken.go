package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/fleetcast/autoscaler/apiauth"
	"github.com/fleetcast/autoscaler/fleet"
	"github.com/fleetcast/autoscaler/internal/cli"
)

// runAPIToken is `autoscaler api-token create|list|rotate|revoke`: the API
// tokens of schedulers (scope demand), monitoring (read) and operators,
// through the running controller's API with an operator's token.
func runAPIToken(e *env, args []string) int {
	subs := map[string]string{"create": " -scope demand|read|operator NAME", "list": "", "rotate": " [-grace DURATION] NAME", "revoke": " NAME"}
	if len(args) == 0 || strings.HasPrefix(args[0], "-") {
		fmt.Fprintln(e.stderr, "api-token: want a command: create, list, rotate or revoke")
		return cli.ExitUsage
	}
	sub := args[0]
	synopsis, ok := subs[sub]
	if !ok {
		fmt.Fprintf(e.stderr, "api-token: unknown command %q; want create, list, rotate or revoke\n", sub)
		return cli.ExitUsage
	}
	fs := cli.NewFlagSet(e.stderr, "autoscaler", "api-token "+sub, "api-token "+sub+" -config FILE [-addr URL] [-ca-file FILE]"+synopsis)
	c := controllerFlags(fs)
	var scope string
	var grace cli.Duration
	switch sub {
	case "create":
		fs.StringVar(&scope, "scope", "", "what the token may do: demand (a scheduler's pushes), read (plans, fleet, forecast, plugins) or operator (node credentials, API tokens, and what the others may)")
	case "rotate":
		fs.Var(&grace, "grace", "how long the old secret stays good, at most 7d (default 0: refused at once)")
	}
	what := "token"
	if sub == "list" {
		what = ""
	}
	log, name, code, ok := cli.SetupNamed(e.stderr, fs, args[1:], what)
	if !ok {
		return code
	}
	if sub == "create" {
		if _, err := apiauth.ParseScope(scope); err != nil {
			fmt.Fprintf(e.stderr, "api-token create: -scope %v\n", err)
			return cli.ExitUsage
		}
	}
	cfg, ok := loadConfig(e, log, c.path)
	if !ok {
		return cli.ExitError
	}
	var (
		method, route = "GET", "/v1/api-tokens"
		req           any
	)
	switch sub {
	case "create":
		method, req = "POST", apiauth.CreateRequest{Name: name, Scope: apiauth.Scope(scope)}
	case "rotate":
		method, route, req = "POST", route+"/"+url.PathEscape(name)+"/rotate", apiauth.RotateRequest{Grace: fleet.FormatDuration(grace.D)}
	case "revoke":
		method, route = "DELETE", route+"/"+url.PathEscape(name)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	body, code, err := callController(ctx, cfg.Controller, c.addr, c.caFile, method, route, req, true)
	if err != nil {
		fmt.Fprintf(e.stderr, "api-token %s: %v\n", sub, err)
		return code
	}
	switch sub {
	case "create", "rotate":
		var a apiauth.Answer
		if err := json.Unmarshal(body, &a); err != nil {
			fmt.Fprintf(e.stderr, "api-token %s: the controller's answer: %v\n", sub, err)
			return cli.ExitError
		}
		done := "created"
		if sub == "rotate" {
			done = "rotated; the old secret is refused from now on"
			if !a.PreviousUntil.IsZero() {
				done = "rotated; the old secret is good until " + a.PreviousUntil.Format(time.RFC3339)
			}
		}
		fmt.Fprintf(e.stderr, "API token %s (scope %s) %s. Its secret, shown once, is on stdout: keep it in a secret store\n", a.Name, a.Scope, done)
		fmt.Fprintln(e.stdout, a.Token)
	case "revoke":
		fmt.Fprintf(e.stdout, "revoked API token %s: it is refused from now on\n", name)
	case "list":
		var list []apiauth.Listed
		if err := json.Unmarshal(body, &list); err != nil {
			fmt.Fprintln(e.stderr, "api-token list: the controller's answer:", err)
			return cli.ExitError
		}
		tw := tabwriter.NewWriter(e.stdout, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "NAME\tSCOPE\tCREATED\tROTATED\tLAST USED\tNOTE")
		at := func(t time.Time) string {
			if t.IsZero() {
				return "-"
			}
			return t.Format(time.RFC3339)
		}
		for _, l := range list {
			note := "by " + l.By
			switch {
			case l.Source != "":
				note = "from " + l.Source
			case !l.PreviousUntil.IsZero():
				note += "; old secret good until " + at(l.PreviousUntil)
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", l.Name, l.Scope, at(l.Created), at(l.Rotated), at(l.LastUsed), note)
		}
		tw.Flush()
	}
	return cli.ExitOK
}
