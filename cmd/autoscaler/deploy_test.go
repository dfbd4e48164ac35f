package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"crypto/tls"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/autoscaling"
	astypes "github.com/aws/aws-sdk-go-v2/service/autoscaling/types"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"

	"github.com/fleetcast/autoscaler/agent/report"
	"github.com/fleetcast/autoscaler/fleet"
	"github.com/fleetcast/autoscaler/internal/agentcmd"
	"github.com/fleetcast/autoscaler/internal/identitytest"
	"github.com/fleetcast/autoscaler/internal/metadatamock"
	"github.com/fleetcast/autoscaler/internal/mototest"
	"github.com/fleetcast/autoscaler/internal/testpki"
	"github.com/fleetcast/autoscaler/nodeauth"
)

// localExample writes a copy of an example config whose controller runs
// here (testpki.LocalConfig) and returns its path.
func localExample(t *testing.T, src string) string {
	t.Helper()
	conf, _, err := testpki.LocalConfig(src, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	return conf
}

// identityMock runs the metadata mock as instance id: its instance
// identity document signed by signer (the mock serves what it is
// configured with, so the document it serves is read from a first mock,
// signed, and served with its signature by a second). Spot notices are
// held back for an hour.
func identityMock(t *testing.T, dir, id string, signer *identitytest.Signer) (endpoint string, identity *report.AWSIdentity) {
	t.Helper()
	conf := func(sig string) string {
		c := map[string]any{
			"metadata": map[string]any{"values": map[string]any{"instance-id": id}},
			"dynamic": map[string]any{"values": map[string]any{
				"instance-identity-document":  map[string]any{"instanceId": id, "region": "us-east-1", "availabilityZone": "us-east-1a"},
				"instance-identity-signature": sig,
			}},
		}
		b, _ := json.Marshal(c)
		path := filepath.Join(dir, "aemm-"+id+".json")
		if err := os.WriteFile(path, b, 0o600); err != nil {
			t.Fatal(err)
		}
		return path
	}
	first := metadatamock.Start(t, "-c", conf("unsigned"), "-d", "3600", "--rebalance-delay-sec", "3600")
	resp, err := http.Get(first + "/latest/dynamic/instance-identity/document")
	if err != nil {
		t.Fatal(err)
	}
	doc, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	sig := signer.Sign(t, doc)
	return metadatamock.Start(t, "-c", conf(sig), "-d", "3600", "--rebalance-delay-sec", "3600"), &report.AWSIdentity{Document: string(doc), Signature: sig}
}

// TestDeployOnAWS walks the documented deployment end to end, on a local
// moto_server and AWS's metadata mock: the controller serves HTTPS with
// its certificate; the Terraform's node set-up script (run unmodified, as
// the user data runs it, with its own root and the agent in the
// foreground) installs the agent on two instances of an Auto Scaling group,
// and each agent bootstraps its own credential with the bootstrap secret
// and its signed identity document, reports and becomes ready. Then the
// credentials are held to their word: node A's posting for node B is
// refused with 403; a revoked one, and one rotated out, with 401; the
// bootstrap secret for an already-registered node, or for an id that is
// no live instance, is refused.
func TestDeployOnAWS(t *testing.T) {
	ec, as := motoAccount(t, mototest.URL(t))
	ctx := context.Background()
	if _, err := ec.CreateLaunchTemplate(ctx, &ec2.CreateLaunchTemplateInput{LaunchTemplateName: aws.String("fleetcast-a100"),
		LaunchTemplateData: &ec2types.RequestLaunchTemplateData{ImageId: aws.String("ami-12c6146b"), InstanceType: ec2types.InstanceType("p4d.24xlarge")}}); err != nil {
		t.Fatal(err)
	}
	if _, err := as.CreateAutoScalingGroup(ctx, &autoscaling.CreateAutoScalingGroupInput{
		AutoScalingGroupName: aws.String("fleetcast-ondemand-a100"),
		LaunchTemplate:       &astypes.LaunchTemplateSpecification{LaunchTemplateName: aws.String("fleetcast-a100")},
		MinSize:              aws.Int32(0), MaxSize: aws.Int32(4), DesiredCapacity: aws.Int32(2),
		AvailabilityZones: []string{"us-east-1a"},
		Tags: []astypes.Tag{{Key: aws.String("fleetcast/managed"), Value: aws.String("true"), PropagateAtLaunch: aws.Bool(true)},
			{Key: aws.String("fleetcast/pool"), Value: aws.String("aws-ondemand-a100"), PropagateAtLaunch: aws.Bool(true)}},
	}); err != nil {
		t.Fatal(err)
	}
	g, err := as.DescribeAutoScalingGroups(ctx, &autoscaling.DescribeAutoScalingGroupsInput{AutoScalingGroupNames: []string{"fleetcast-ondemand-a100"}})
	if err != nil || len(g.AutoScalingGroups) != 1 || len(g.AutoScalingGroups[0].Instances) != 2 {
		t.Fatalf("the group: %+v, %v", g, err)
	}
	idA, idB := aws.ToString(g.AutoScalingGroups[0].Instances[0].InstanceId), aws.ToString(g.AutoScalingGroups[0].Instances[1].InstanceId)

	// The controller's side: its certificate, the bootstrap secret, the
	// trust root for identity documents.
	dir, err := os.MkdirTemp("", "fcd") // short paths: the agents' unix sockets live under it
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	ca := testpki.New(t, dir)
	signer := identitytest.New(t)
	secret := strings.Repeat("5ec7e7", 11)
	bootstrap := filepath.Join(dir, "bootstrap-token")
	if err := os.WriteFile(bootstrap, []byte(secret+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	addr := freeAddr(t)
	conf := filepath.Join(dir, "fleet.hcl")
	if err := os.WriteFile(conf, []byte(fmt.Sprintf(`
pool "aws-ondemand-a100" {
  provider       = "aws"
  region         = "us-east-1"
  zones          = ["us-east-1a"]
  instance_type  = "p4d.24xlarge"
  gpus_per_node  = 8
  price_per_hour = 32.77
  lead_time      = "9m"
  min            = 2
  max            = 4
  aws {
    asg = "fleetcast-ondemand-a100"
  }
}
controller {
  interval                  = "1s"
  listen                    = %q
  state_dir                 = %q
  tls_cert_file             = %q
  tls_key_file              = %q
  bootstrap_token_file      = %q
  aws_identity_certificates = %q
}
`, addr, filepath.Join(dir, "state"), ca.CertFile, ca.KeyFile, bootstrap, signer.WriteCert(t, dir))), 0o600); err != nil {
		t.Fatal(err)
	}
	ctlOutput, _ := startCLI(t, filepath.Join(dir, "controller.log"), "run -config "+conf+" -log-level info")
	logs := func() string {
		out := "controller:\n" + ctlOutput()
		for _, n := range []string{"a", "b"} {
			b, _ := os.ReadFile(filepath.Join(dir, "node-"+n+".log"))
			out += "\nnode " + n + ":\n" + string(b)
		}
		return out
	}
	client := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: ca.Pool}}}
	base := "https://" + addr
	waitFor := func(what string, limit time.Duration, ok func() bool) {
		t.Helper()
		for start := time.Now(); !ok(); time.Sleep(100 * time.Millisecond) {
			if time.Since(start) > limit {
				t.Fatalf("%s: not within %v\n%s", what, limit, logs())
			}
		}
	}
	waitFor("the controller serving HTTPS", 30*time.Second, func() bool {
		resp, err := client.Get(base + "/healthz")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == 200
	})
	if resp, err := (&http.Client{Timeout: time.Second}).Get("http://" + addr + "/healthz"); err == nil {
		if resp.StatusCode < 400 {
			t.Errorf("plain HTTP is served beside HTTPS: %s", resp.Status)
		}
		resp.Body.Close()
	}

	// The agent binary the script downloads: this test binary as the
	// agent's command, checked by its SHA-256 as a release would be.
	agentBin := filepath.Join(dir, "autoscaler-agent-linux-amd64")
	if err := os.WriteFile(agentBin, []byte("#!/bin/sh\nFLEETCAST_TEST_CLI=\"agent $*\" exec "+os.Args[0]+" -test.run='^$'\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	raw, _ := os.ReadFile(agentBin)
	sum := sha256.Sum256(raw)
	ids := map[string]*report.AWSIdentity{}
	roots := map[string]string{}
	for _, n := range []struct{ name, id string }{{"a", idA}, {"b", idB}} {
		endpoint, identity := identityMock(t, dir, n.id, signer)
		ids[n.id] = identity
		root := filepath.Join(dir, n.name)
		roots[n.id] = root
		nodeLog, err := os.Create(filepath.Join(dir, "node-"+n.name+".log"))
		if err != nil {
			t.Fatal(err)
		}
		setup := exec.Command("bash", "../../examples/terraform/aws/node-setup.sh",
			"--metadata-url", endpoint, "--root", root, "--service-manager", "exec",
			"--controller", base, "--pool", "aws-ondemand-a100",
			"--agent-url", "file://"+agentBin, "--agent-sha256", hex.EncodeToString(sum[:]),
			"--bootstrap-token-file", bootstrap, "--ca-file", ca.CAFile,
			"--agent-flags", "-interval 500ms -metrics 127.0.0.1:0 -notice-interval 1s -rotate-every 3s")
		setup.Env = append(os.Environ(), "FLEETCAST_TEST_NVML=dgxa100")
		setup.Stdout, setup.Stderr = nodeLog, nodeLog
		if err := setup.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = setup.Process.Signal(syscall.SIGTERM); _ = setup.Wait() })
	}
	apiToken := func() string {
		b, err := os.ReadFile(filepath.Join(dir, "state", "api-token"))
		if err != nil {
			t.Fatal(err)
		}
		return strings.TrimSpace(string(b))
	}()
	credOf := func(id string) string {
		b, _ := os.ReadFile(filepath.Join(roots[id], "etc", "fleetcast", "credential"))
		return strings.TrimSpace(string(b))
	}
	fleetView := func() (nodes map[string]fleet.Node) {
		req, _ := http.NewRequest("GET", base+"/v1/fleet", nil)
		req.Header.Set("Authorization", "Bearer "+apiToken)
		resp, err := client.Do(req)
		if err != nil {
			return nil
		}
		defer resp.Body.Close()
		var v struct {
			State struct {
				Nodes []fleet.Node `json:"nodes"`
			} `json:"state"`
		}
		if resp.StatusCode != 200 || json.NewDecoder(resp.Body).Decode(&v) != nil {
			return nil
		}
		nodes = map[string]fleet.Node{}
		for _, n := range v.State.Nodes {
			nodes[n.ID] = n
		}
		return nodes
	}
	reported := func(id string, after time.Time) func() bool {
		return func() bool {
			n, ok := fleetView()[id]
			return ok && n.State == fleet.Ready && !n.Unknown && n.LastReport.After(after)
		}
	}
	start := time.Now()
	for _, id := range []string{idA, idB} {
		waitFor("node "+id+" reporting over HTTPS with its own credential, ready", 60*time.Second, reported(id, start))
		if fi, err := os.Stat(filepath.Join(roots[id], "etc", "fleetcast", "credential")); err != nil || fi.Mode().Perm() != 0o600 {
			t.Errorf("node %s's credential file: %v, %v; want mode 0600", id, fi, err)
		}
	}

	post := func(path, bearer string, body []byte) (int, string) {
		t.Helper()
		req, _ := http.NewRequest("POST", base+path, bytes.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Authorization", "Bearer "+bearer)
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		msg, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, resp.Header.Get(report.CodeHeader) + ": " + string(msg)
	}
	reportOf := func(id string) []byte {
		b, _ := json.Marshal(report.Report{Node: id, SentAt: time.Now(), Healthy: true, Drain: report.DrainStatus{State: report.NotDraining}})
		return b
	}

	// Node A's credential speaks for A only.
	credA := credOf(idA)
	if code, msg := post("/v1/agents/"+idB+"/report", credA, reportOf(idB)); code != 403 {
		t.Errorf("node A's credential posting for node B: %d %s, want 403", code, msg)
	}
	// The bootstrap secret for a registered node, and for an id that is no
	// live instance (with a good signature), is refused.
	const nonce = "an-attackers-nonce-0123456789abcdef"
	again, _ := json.Marshal(report.CredentialRequest{Nonce: nonce, AWS: ids[idA]})
	if code, msg := post("/v1/agents/"+idA+"/credential", secret, again); code != 409 || !strings.Contains(msg, string(nodeauth.Registered)) {
		t.Errorf("the bootstrap secret for registered node A: %d %s, want 409 %s", code, msg, nodeauth.Registered)
	}
	ghostDoc := []byte(`{"instanceId": "i-0123456789abcdef0", "region": "us-east-1"}`)
	ghost, _ := json.Marshal(report.CredentialRequest{Nonce: nonce, AWS: &report.AWSIdentity{Document: string(ghostDoc), Signature: signer.Sign(t, ghostDoc)}})
	if code, msg := post("/v1/agents/i-0123456789abcdef0/credential", secret, ghost); code != 403 || !strings.Contains(msg, string(nodeauth.NotLive)) {
		t.Errorf("the bootstrap secret for no live instance: %d %s, want 403 %s", code, msg, nodeauth.NotLive)
	}

	// Rotation: each agent rotates its credential every 3 s; once the
	// new one was used, the old one is refused.
	waitFor("node B rotating its credential", 30*time.Second, func() bool { return credOf(idB) != "" && credOf(idB) != credA && credOf(idB) != "" })
	oldB := credOf(idB)
	waitFor("node B rotating again", 30*time.Second, func() bool { return credOf(idB) != oldB })
	rotated := time.Now()
	waitFor("node B reporting with the new credential", 30*time.Second, reported(idB, rotated))
	if code, msg := post("/v1/agents/"+idB+"/report", oldB, reportOf(idB)); code != 401 || !strings.Contains(msg, string(nodeauth.Superseded)) {
		t.Errorf("node B's rotated-out credential: %d %s, want 401 %s", code, msg, nodeauth.Superseded)
	}

	// Revocation, by the operator's command: A's credential is refused
	// at once, and its agent bootstraps again and reports on.
	credA = credOf(idA)
	code, out, errOut := cmdline("token", "revoke", "-config", conf, idA)
	if code != 0 || !strings.Contains(out, "revoked "+idA) {
		t.Fatalf("token revoke: exit %d %s %s", code, out, errOut)
	}
	if code, msg := post("/v1/agents/"+idA+"/report", credA, reportOf(idA)); code != 401 || !strings.Contains(msg, string(nodeauth.Revoked)) && !strings.Contains(msg, string(nodeauth.Superseded)) {
		t.Errorf("node A's revoked credential: %d %s, want 401", code, msg)
	}
	revoked := time.Now()
	waitFor("node A bootstrapping again after its revocation and reporting", 60*time.Second, reported(idA, revoked.Add(time.Second)))
	// ... which a copy of its identity document with the secret could not
	// have done: only the agent that registered the node (its nonce) may.
	code, out, errOut = cmdline("token", "revoke", "-config", conf, idA)
	if code != 0 {
		t.Fatalf("token revoke: exit %d %s %s", code, out, errOut)
	}
	if code, msg := post("/v1/agents/"+idA+"/credential", secret, again); code != 409 {
		t.Errorf("a copy of revoked node A's identity with the secret: %d %s, want 409", code, msg)
	}
	code, out, errOut = cmdline("token", "list", "-config", conf)
	if code != 0 || !strings.Contains(out, idA) || !strings.Contains(out, idB) || !strings.Contains(out, "bootstrap") {
		t.Errorf("token list: exit %d\n%s%s", code, out, errOut)
	}
	if out := ctlOutput(); !strings.Contains(out, "node registered") {
		t.Errorf("the controller logged no registration:\n%s", out)
	}
}

// TestNodeSetupUnit: the unit node-setup.sh writes runs exactly the
// command it runs with --service-manager exec: every argument quoted for
// systemd (spaces, quotes, % and $ kept as they are), extra flags split
// at blanks and never glob-expanded.
func TestNodeSetupUnit(t *testing.T) {
	dir, err := os.MkdirTemp("", "fcu")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	endpoint := metadatamock.Start(t, "-d", "3600", "--rebalance-delay-sec", "3600")
	bin := filepath.Join(dir, "autoscaler")
	os.WriteFile(bin, []byte("#!/bin/sh\n"), 0o755)
	raw, _ := os.ReadFile(bin)
	sum := sha256.Sum256(raw)
	for _, f := range []string{"secret", "ca.pem", "a.ckpt", "b.ckpt"} {
		os.WriteFile(filepath.Join(dir, f), []byte("x"), 0o600)
	}
	root := filepath.Join(dir, "root dir")
	script, err := filepath.Abs("../../examples/terraform/aws/node-setup.sh")
	if err != nil {
		t.Fatal(err)
	}
	// The node's group database, where the script makes the agent's socket
	// group (groupadd --prefix, which needs root); the machine's own must
	// not change.
	_, noGroupadd := exec.LookPath("groupadd")
	makesGroup := os.Geteuid() == 0 && noGroupadd == nil
	hostGroups, _ := os.ReadFile("/etc/group")
	if makesGroup {
		os.MkdirAll(filepath.Join(root, "etc"), 0o755)
		os.WriteFile(filepath.Join(root, "etc", "group"), []byte("root:x:0:\n"), 0o644)
		os.WriteFile(filepath.Join(root, "etc", "gshadow"), []byte("root:*::\n"), 0o600)
	}
	cmd := exec.Command("bash", script, "--metadata-url", endpoint, "--root", root,
		"--service-manager", "none", "--controller", "https://fleetcast.internal:8790", "--pool", "gpu",
		"--agent-url", "file://"+bin, "--agent-sha256", hex.EncodeToString(sum[:]),
		"--bootstrap-token-file", filepath.Join(dir, "secret"), "--ca-file", filepath.Join(dir, "ca.pem"),
		"--agent-flags", "-drain-hook /bin/echo%n$HOME -checkpoints *.ckpt")
	cmd.Dir = dir // *.ckpt would match here if it were expanded
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("node-setup.sh: %v\n%s", err, out)
	}
	unit, err := os.ReadFile(filepath.Join(root, "etc/systemd/system/fleetcast-agent.service"))
	if err != nil {
		t.Fatal(err)
	}
	var execStart string
	for _, line := range strings.Split(string(unit), "\n") {
		if v, ok := strings.CutPrefix(line, "ExecStart="); ok {
			execStart = v
		}
	}
	args := systemdSplit(t, execStart)
	want := []string{filepath.Join(root, "usr/local/bin/autoscaler-agent"), "-controller", "https://fleetcast.internal:8790"}
	if len(args) < len(want) || !slices.Equal(args[:len(want)], want) {
		t.Fatalf("ExecStart %q splits to %q", execStart, args)
	}
	joined := strings.Join(args, "\x00")
	for _, w := range []string{"-drain-hook\x00/bin/echo%n$HOME", "-checkpoints\x00*.ckpt", "-state\x00" + filepath.Join(root, "var/lib/fleetcast/agent-state.json")} {
		if !strings.Contains(joined, w) {
			t.Errorf("ExecStart %q lacks %q", execStart, strings.ReplaceAll(w, "\x00", " "))
		}
	}
	if !strings.Contains(string(unit), "Type=simple") || !strings.Contains(string(unit), "Documentation=https://") {
		t.Errorf("unit:\n%s", unit)
	}
	t.Run("socket group", func(t *testing.T) {
		if !makesGroup {
			t.Skip("needs root and groupadd to make the group in the node's root")
		}
		groups, err := os.ReadFile(filepath.Join(root, "etc", "group"))
		if err != nil {
			t.Fatal(err)
		}
		if n := strings.Count("\n"+string(groups), "\n"+agentcmd.DefaultSocketGroup+":x:"); n != 1 {
			t.Errorf("the node's /etc/group has %d %s groups; want 1, for the agent's socket:\n%s", n, agentcmd.DefaultSocketGroup, groups)
		}
		if now, _ := os.ReadFile("/etc/group"); !bytes.Equal(now, hostGroups) {
			t.Errorf("node-setup.sh --root changed this machine's /etc/group")
		}
	})
}

// systemdSplit splits an ExecStart value as systemd does for the quoting
// node-setup.sh writes: double-quoted words with \" and \\ escapes, %%
// for % and $$ for $.
func systemdSplit(t *testing.T, s string) []string {
	t.Helper()
	var out []string
	for s = strings.TrimSpace(s); s != ""; s = strings.TrimSpace(s) {
		if s[0] != '"' {
			t.Fatalf("unquoted word in ExecStart: %q", s)
		}
		var b strings.Builder
		i := 1
		for ; i < len(s) && s[i] != '"'; i++ {
			switch {
			case s[i] == '\\' && i+1 < len(s):
				i++
				b.WriteByte(s[i])
			case (s[i] == '%' || s[i] == '$') && i+1 < len(s) && s[i+1] == s[i]:
				i++
				b.WriteByte(s[i])
			case s[i] == '%' || s[i] == '$':
				t.Fatalf("a lone %c in ExecStart, which systemd would expand: %q", s[i], s)
			default:
				b.WriteByte(s[i])
			}
		}
		out = append(out, b.String())
		s = s[min(i+1, len(s)):]
	}
	return out
}
