package main

import (
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/fleetcast/autoscaler/internal/cli"
)

// tokenRun is a controller (`run` as a process, on the simulated cloud)
// listening on a free loopback address, with its config; extra are more
// flags for run (split at blanks).
func tokenRun(t *testing.T, extra string) (conf string, r *liveRun) {
	t.Helper()
	dir := t.TempDir()
	conf = localConfigIn(t, dir)
	addr := freeAddr(t)
	src, _ := os.ReadFile(conf)
	if err := os.WriteFile(conf, []byte(strings.Replace(string(src), `listen        = "127.0.0.1:8790"`, `listen        = "`+addr+`"`, 1)), 0o600); err != nil {
		t.Fatal(err)
	}
	r, _ = startRunCLI(t, filepath.Join(dir, "run.log"), conf, addr, filepath.Join(dir, "state"), "-sim-speed 60", extra)
	return conf, r
}

// TestAPITokensCLI: an operator (the root token in the state directory)
// gives a scheduler a demand token and monitoring a read token with
// `api-token create`; each does its job and nothing else; `api-token
// rotate` and `revoke` take effect at once; `token issue` refuses to
// replace a good node credential without -replace and a reason, which it
// logs and counts.
func TestAPITokensCLI(t *testing.T) {
	conf, r := tokenRun(t, "")
	t.Setenv("FLEETCAST_API_TOKEN", "")
	create := func(scope, name string) string {
		t.Helper()
		code, out, errOut := cmdline("api-token", "create", "-config", conf, "-scope", scope, name)
		if code != cli.ExitOK || !strings.Contains(errOut, "API token "+name+" (scope "+scope+") created") {
			t.Fatalf("api-token create %s %s: exit %d %q %q", scope, name, code, out, errOut)
		}
		return strings.TrimSpace(out)
	}
	sched, grafana := create("demand", "slurm-prod"), create("read", "grafana")
	push := `{"source": "slurm", "pending": [{"gpus": 8}]}`
	if code, body := r.call("POST", "/v1/demand", sched, push); code != http.StatusNoContent {
		t.Errorf("the scheduler's push: %d %s", code, body)
	}
	if code, _ := r.call("POST", "/v1/demand", grafana, push); code != http.StatusForbidden {
		t.Errorf("monitoring pushes demand: %d, want 403", code)
	}
	if code, body := r.call("POST", "/v1/agents/rack-7/credential", sched, ""); code != http.StatusForbidden || !strings.Contains(body, `API token "slurm-prod" has scope demand`) {
		t.Errorf("the scheduler asks for a node credential: %d %s, want 403", code, body)
	}
	// The scheduler's token in FLEETCAST_API_TOKEN gets the CLI nowhere.
	t.Setenv("FLEETCAST_API_TOKEN", sched)
	if code, _, errOut := cmdline("token", "issue", "-config", conf, "rack-7"); code != cli.ExitError || !strings.Contains(errOut, "403 Forbidden") {
		t.Errorf("token issue with a demand token: exit %d %q", code, errOut)
	}
	if code, _, errOut := cmdline("api-token", "create", "-config", conf, "-scope", "operator", "mine"); code != cli.ExitError || !strings.Contains(errOut, "403 Forbidden") {
		t.Errorf("api-token create with a demand token: exit %d %q", code, errOut)
	}
	t.Setenv("FLEETCAST_API_TOKEN", "")

	// Node credentials: a second issue for a node with a good credential
	// needs -replace and a reason.
	if code, out, errOut := cmdline("token", "issue", "-config", conf, "rack-7"); code != cli.ExitOK || strings.TrimSpace(out) == "" {
		t.Fatalf("token issue: exit %d %q %q", code, out, errOut)
	}
	if code, _, errOut := cmdline("token", "issue", "rack-7", "-config", conf); code != cli.ExitError || !strings.Contains(errOut, "409 Conflict") || !strings.Contains(errOut, "token issue -replace REASON rack-7") {
		t.Errorf("a second issue without -replace: exit %d %q", code, errOut)
	}
	if code, out, errOut := cmdline("token", "issue", "-config", conf, "-replace", "its disk was replaced", "rack-7"); code != cli.ExitOK || strings.TrimSpace(out) == "" || !strings.Contains(errOut, "credential replaced for rack-7") {
		t.Errorf("token issue -replace: exit %d %q %q", code, out, errOut)
	}
	if _, body := r.call("GET", "/metrics", "", ""); !strings.Contains(body, "fleetcast_credential_replacements_total 1\n") {
		t.Error("/metrics does not count the replacement")
	}
	r.waitFor("the replacement in the log", 10*time.Second, func() bool {
		out := r.output()
		return strings.Contains(out, "node credential replaced by an operator") && strings.Contains(out, "token=root") && strings.Contains(out, `reason="its disk was replaced"`)
	})

	// The list: root from the state directory, the two tokens, who used
	// them.
	code, out, errOut := cmdline("api-token", "list", "-config", conf)
	if code != cli.ExitOK {
		t.Fatalf("api-token list: exit %d %q", code, errOut)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 4 || !strings.HasPrefix(lines[0], "NAME") || !strings.HasPrefix(lines[1], "root ") || !strings.Contains(lines[1], "from "+filepath.Join(r.stateDir, "api-token")) ||
		!strings.HasPrefix(lines[2], "grafana ") || !strings.HasPrefix(lines[3], "slurm-prod ") || !strings.Contains(lines[3], "by root") || strings.Contains(out, sched) {
		t.Errorf("api-token list:\n%s", out)
	}

	// Rotation with a grace keeps the old secret good for it; revocation
	// ends both at once.
	code, out, errOut = cmdline("api-token", "rotate", "-config", conf, "-grace", "1h", "slurm-prod")
	next := strings.TrimSpace(out)
	if code != cli.ExitOK || next == "" || next == sched || !strings.Contains(errOut, "the old secret is good until") {
		t.Fatalf("api-token rotate: exit %d %q %q", code, out, errOut)
	}
	for _, s := range []string{sched, next} {
		if code, _ := r.call("POST", "/v1/demand", s, push); code != http.StatusNoContent {
			t.Errorf("a push after the rotation: %d", code)
		}
	}
	if code, out, errOut := cmdline("api-token", "revoke", "-config", conf, "slurm-prod"); code != cli.ExitOK || !strings.Contains(out, "revoked API token slurm-prod") {
		t.Fatalf("api-token revoke: exit %d %q %q", code, out, errOut)
	}
	for _, s := range []string{sched, next} {
		if code, _ := r.call("POST", "/v1/demand", s, push); code != http.StatusUnauthorized {
			t.Errorf("a push with a revoked token: %d, want 401", code)
		}
	}
	if code, _, errOut := cmdline("api-token", "revoke", "-config", conf, "root"); code != cli.ExitError || !strings.Contains(errOut, "409 Conflict") {
		t.Errorf("revoking root: exit %d %q", code, errOut)
	}
	for _, args := range [][]string{
		{"api-token"}, {"api-token", "make"}, {"api-token", "create", "-config", conf, "x"}, {"api-token", "create", "-config", conf, "-scope", "admin", "x"},
		{"api-token", "rotate", "-config", conf}, {"token", "issue", "-config", conf},
	} {
		if code, _, _ := cmdline(args...); code != cli.ExitUsage {
			t.Errorf("%q: exit %d, want %d", args, code, cli.ExitUsage)
		}
	}
}

// TestLoopbackReadsFlag: on loopback the reads are open by default, and
// with -loopback-reads=false they need a token that may read.
func TestLoopbackReadsFlag(t *testing.T) {
	_, open := tokenRun(t, "")
	if code, _ := open.call("GET", "/v1/fleet", "", ""); code != http.StatusOK {
		t.Errorf("GET /v1/fleet on loopback without a token: %d, want 200", code)
	}
	conf, closed := tokenRun(t, "-loopback-reads=false")
	if code, _ := closed.call("GET", "/v1/fleet", "", ""); code != http.StatusUnauthorized {
		t.Errorf("GET /v1/fleet with -loopback-reads=false and no token: %d, want 401", code)
	}
	t.Setenv("FLEETCAST_API_TOKEN", "")
	code, out, errOut := cmdline("api-token", "create", "-config", conf, "-scope", "read", "grafana")
	if code != cli.ExitOK {
		t.Fatalf("api-token create: exit %d %q", code, errOut)
	}
	if code, _ := closed.call("GET", "/v1/fleet", strings.TrimSpace(out), ""); code != http.StatusOK {
		t.Errorf("GET /v1/fleet with a read token: %d, want 200", code)
	}
	if code, _ := closed.call("GET", "/healthz", "", ""); code != http.StatusOK {
		t.Errorf("GET /healthz without a token: %d, want 200", code)
	}
}
