package main

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/dgxa100"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/server"
	"google.golang.org/api/idtoken"
	"google.golang.org/api/option"

	"github.com/fleetcast/autoscaler/agent"
	"github.com/fleetcast/autoscaler/agent/report"
	"github.com/fleetcast/autoscaler/apiauth"
	"github.com/fleetcast/autoscaler/controller"
	"github.com/fleetcast/autoscaler/controller/reports"
	"github.com/fleetcast/autoscaler/fleet"
	"github.com/fleetcast/autoscaler/internal/identitytest"
	"github.com/fleetcast/autoscaler/internal/metadatamock"
	"github.com/fleetcast/autoscaler/internal/mototest"
	"github.com/fleetcast/autoscaler/internal/proctest"
	"github.com/fleetcast/autoscaler/nodeauth"
	"github.com/fleetcast/autoscaler/nodeauth/nodeauthtest"
	"github.com/fleetcast/autoscaler/providers/gcp"
	"github.com/fleetcast/autoscaler/state"
)

// TestMain doubles as a training job when FLEETCAST_TEST_JOB is set
// ("SOCKET ID"): it registers with `autoscaler-agent register` and, on
// SIGUSR1, writes a checkpoint file and runs `autoscaler-agent checkpoint`.
//
// With FLEETCAST_TEST_CLI set, it is the autoscaler command itself, or the
// agent's with "agent" first (testRun), run with the arguments in that
// variable (separated by spaces); with FLEETCAST_TEST_HWM=FILE,
// it writes its peak resident set (KiB) to FILE before it exits.
func TestMain(m *testing.M) {
	if spec := os.Getenv("FLEETCAST_TEST_CLI"); spec != "" {
		code := testRun(strings.Fields(spec), os.Stdout, os.Stderr)
		if path := os.Getenv("FLEETCAST_TEST_HWM"); path != "" {
			// The process's own peak resident set since its exec (VmHWM,
			// per address space): its rusage would start from the peak
			// of the test process that started it (os/exec uses vfork).
			status, _ := os.ReadFile("/proc/self/status")
			for _, line := range strings.Split(string(status), "\n") {
				if v, ok := strings.CutPrefix(line, "VmHWM:"); ok {
					os.WriteFile(path, []byte(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB"))), 0o600)
				}
			}
		}
		os.Exit(code)
	}
	if spec := os.Getenv("FLEETCAST_TEST_JOB"); spec != "" {
		f := strings.Fields(spec)
		os.Exit(trainingJob(f[0], f[1]))
	}
	code := m.Run()
	mototest.Stop()
	// No plugin process outlives the tests.
	for _, path := range builtPlugins.paths {
		if left := proctest.Running(path); len(left) > 0 && code == 0 {
			fmt.Fprintf(os.Stderr, "plugin processes left running: %s: %v\n", path, left)
			code = 1
		}
	}
	os.Exit(code)
}

// idleDGXA100 is go-nvml's mock DGX A100 with its eight GPUs idle.
func idleDGXA100() *server.Server {
	s := dgxa100.New()
	for _, d := range s.Devices {
		dev := d.(*server.Device)
		dev.GetUtilizationRatesFunc = func() (nvml.Utilization, nvml.Return) { return nvml.Utilization{}, nvml.SUCCESS }
		dev.GetComputeRunningProcessesFunc = func() ([]nvml.ProcessInfo, nvml.Return) { return nil, nvml.SUCCESS }
	}
	return s
}

func trainingJob(socket, id string) int {
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGUSR1)
	if code := testRun([]string{"agent", "register", "-job", id, "-gpus", "0", "-pid", strconv.Itoa(os.Getpid()), "-socket", socket}, io.Discard, os.Stderr); code != 0 {
		return code
	}
	os.Stdout.WriteString("ready\n")
	for range sigs {
		if err := os.WriteFile(filepath.Join(filepath.Dir(socket), id+".ckpt"), []byte("weights"), 0o600); err != nil {
			return 1
		}
		if code := testRun([]string{"agent", "checkpoint", "-job", id, "-step", "1000", "-socket", socket}, io.Discard, os.Stderr); code != 0 {
			return code
		}
	}
	return 0
}

// startJobs starts training jobs (this test binary, see TestMain) on the
// agent at socket and waits until each has registered; they are killed
// when the test ends.
func startJobs(t *testing.T, socket string, ids ...string) {
	t.Helper()
	for _, id := range ids {
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), "FLEETCAST_TEST_JOB="+socket+" "+id)
		out, _ := cmd.StdoutPipe()
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
		if line, err := bufio.NewReader(out).ReadString('\n'); err != nil || line != "ready\n" {
			t.Fatalf("job %s: %q %v", id, line, err)
		}
	}
}

type drainingController struct {
	mu    sync.Mutex
	drain *report.DrainRequest
	state report.DrainState
}

func (c *drainingController) Accept(_ context.Context, r *report.Report) (report.Answer, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.state = r.Drain.State
	return report.Answer{Drain: c.drain}, nil
}

// TestAgentCLIDrain drains a node whose jobs are real processes that
// checkpoint with `autoscaler-agent checkpoint` when signalled.
func TestAgentCLIDrain(t *testing.T) {
	dir, err := os.MkdirTemp("", "fc")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(dir)
	socket := filepath.Join(dir, "agent.sock")
	a, err := agent.New(agent.Config{Node: "i-1", LongRunningAfter: time.Nanosecond})
	if err != nil {
		t.Fatal(err)
	}
	l, err := agent.ListenUnix(socket)
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: a.Handler()}
	go srv.Serve(l)
	defer srv.Close()
	tokens := nodeauthtest.New(t)
	ctl := &drainingController{}
	cs := httptest.NewServer((&reports.Receiver{Credentials: tokens, Store: ctl}).Handler())
	defer cs.Close()
	rep := &agent.Reporter{Agent: a, Controller: cs.URL, Credential: agent.FixedCredential(tokens.For("i-1"))}
	startJobs(t, socket, "train-a", "train-b")
	now := time.Now()
	ctl.mu.Lock()
	ctl.drain = &report.DrainRequest{ID: "d1", Since: now, Deadline: now.Add(time.Minute), Signal: "SIGUSR1"}
	ctl.mu.Unlock()
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		a.Tick()
		if err := rep.Send(context.Background()); err != nil {
			t.Fatal(err)
		}
		ctl.mu.Lock()
		state := ctl.state
		ctl.mu.Unlock()
		if state == report.SafeToTerminate {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("drain state %q after 20 s", state)
		}
	}
	for _, id := range []string{"train-a", "train-b"} {
		if _, err := os.Stat(filepath.Join(dir, id+".ckpt")); err != nil {
			t.Fatalf("safe before %s checkpointed: %v", id, err)
		}
	}
}

// noticeController is the controller's own agents view behind the report
// receiver, remembering the last report taken.
type noticeController struct {
	agents *controller.Agents
	mu     sync.Mutex
	last   report.Report
}

func (c *noticeController) Accept(ctx context.Context, r *report.Report) (report.Answer, error) {
	c.mu.Lock()
	c.last = *r
	c.mu.Unlock()
	return c.agents.Accept(ctx, r)
}

// TestAgentSpotNotice runs the agent command as a process on a node whose
// metadata service, AWS's own mock, announces a spot interruption four
// seconds after it starts, with a fixed deadline two minutes ahead. Two
// jobs that checkpoint on SIGUSR1 run there. Both checkpoint, and the
// controller gets a report of the node drained (safe) with the notice,
// long before the deadline; its view of the node says when the cloud
// takes it (so its planner launches the replacement, see
// controller.TestSpotNoticeReplacedAhead).
func TestAgentSpotNotice(t *testing.T) {
	deadline := time.Now().Add(2 * time.Minute).UTC().Truncate(time.Second)
	endpoint := metadatamock.Start(t, "spot", "-d", "4", "-t", deadline.Format(time.RFC3339), "--rebalance-delay-sec", "3600")
	ctl := &noticeController{agents: controller.NewAgents(time.Now)}
	a := startReportingAgent(t, ctl, "-interval 1s -notice-interval 200ms -imds-endpoint "+endpoint)
	socket, agentLog, dir := a.socket, a.log, filepath.Dir(a.socket)
	for start := time.Now(); ; time.Sleep(20 * time.Millisecond) {
		if _, err := os.Stat(socket); err == nil {
			break
		}
		if time.Since(start) > 20*time.Second {
			t.Fatalf("the agent's socket did not appear:\n%s", agentLog())
		}
	}
	startJobs(t, socket, "train-a", "train-b")
	var last report.Report
	for start := time.Now(); ; time.Sleep(50 * time.Millisecond) {
		ctl.mu.Lock()
		last = ctl.last
		ctl.mu.Unlock()
		if last.Notice != nil && last.Drain.State == report.SafeToTerminate {
			break
		}
		if time.Since(start) > 30*time.Second {
			t.Fatalf("no report of the node drained with the notice within 30 s; last %+v\nagent log:\n%s", last, agentLog())
		}
	}
	if time.Now().After(deadline.Add(-time.Minute)) {
		t.Errorf("drained at %v, less than a minute before the notice's deadline %v", time.Now(), deadline)
	}
	if n := last.Notice; n.Kind != report.Interruption || n.Action != "terminate" || !n.Time.Equal(deadline) {
		t.Errorf("notice %+v, want the interruption to terminate at %v", n, deadline)
	}
	for _, id := range []string{"train-a", "train-b"} {
		if _, err := os.Stat(filepath.Join(dir, id+".ckpt")); err != nil {
			t.Errorf("safe before %s checkpointed: %v", id, err)
		}
		var ck time.Time
		for _, j := range last.Jobs {
			if j.ID == id {
				ck = j.LastCheckpoint
			}
		}
		if ck.IsZero() {
			t.Errorf("job %s reported without a checkpoint: %+v", id, last.Jobs)
		}
	}
	n := fleet.Node{ID: "i-1"}
	ctl.agents.Observe(&n)
	if !n.InterruptAt.Equal(deadline) {
		t.Errorf("the controller's view: interrupt at %v, want %v", n.InterruptAt, deadline)
	}
	// A job that comes now is refused: the node is going. The local API
	// answers 409 Conflict (a draining node's refusal); the command fails,
	// naming the node, in the words of testdata/register-draining.golden.
	var stderr bytes.Buffer
	if code := testRun([]string{"agent", "register", "-job", "late", "-gpus", "0", "-pid", strconv.Itoa(os.Getpid()), "-socket", socket}, io.Discard, &stderr); code == 0 || !strings.Contains(stderr.String(), "node i-1 ") {
		t.Errorf("register on the node under notice: exit %d, %q", code, stderr.String())
	}
	pinned(t, "register-draining.golden", regexp.MustCompile(`\(drain [^)]*\)`).ReplaceAllString(stderr.String(), "(drain $$DRAIN)"))
	local := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "unix", socket)
	}}}
	resp, err := local.Post("http://agent/v1/jobs", "application/json", strings.NewReader(fmt.Sprintf(`{"id": "late", "gpus": [0], "pids": [%d]}`, os.Getpid())))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusConflict {
		t.Errorf("POST /v1/jobs on the node under notice: %s, want 409 Conflict", resp.Status)
	}
}

// TestAgentGCEPreemption runs the agent command as a process with
// -notices gcp on a node whose metadata server (a fake of Compute
// Engine's: the real path and the Metadata-Flavor headers) says the VM is
// preempted two seconds after the agent starts. The jobs checkpoint, and
// the controller gets a report of the node drained with the notice, its
// deadline 30 seconds after it was seen.
func TestAgentGCEPreemption(t *testing.T) {
	start := time.Now()
	md := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Metadata-Flavor") != "Google" || r.URL.Path != "/computeMetadata/v1/instance/preempted" {
			http.Error(w, "refused", http.StatusForbidden)
			return
		}
		w.Header().Set("Metadata-Flavor", "Google")
		if time.Since(start) < 2*time.Second {
			fmt.Fprint(w, "FALSE")
			return
		}
		fmt.Fprint(w, "TRUE")
	}))
	defer md.Close()
	dir, err := os.MkdirTemp("", "fc")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(dir)
	socket := filepath.Join(dir, "agent.sock")
	tokens := nodeauthtest.New(t)
	ctl := &noticeController{agents: controller.NewAgents(time.Now)}
	cs := httptest.NewServer((&reports.Receiver{Credentials: tokens, Store: ctl}).Handler())
	defer cs.Close()
	tokenFile := filepath.Join(dir, "token")
	if err := os.WriteFile(tokenFile, []byte(tokens.For("gpu-vm-1")+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	agentLog, stop := startCLI(t, filepath.Join(dir, "agent.log"), "agent -controller "+cs.URL+" -token-file "+tokenFile+" -node gpu-vm-1 -no-gpu -socket "+socket+
		" -marker "+filepath.Join(dir, "draining")+" -state "+filepath.Join(dir, "state.json")+" -metrics 127.0.0.1:0 -interval 1s -notice-interval 200ms -notices gcp -gce-metadata-endpoint "+md.URL+"/computeMetadata/v1/")
	defer stop()
	for start := time.Now(); ; time.Sleep(20 * time.Millisecond) {
		if _, err := os.Stat(socket); err == nil {
			break
		}
		if time.Since(start) > 20*time.Second {
			t.Fatalf("the agent's socket did not appear:\n%s", agentLog())
		}
	}
	startJobs(t, socket, "train-a")
	var last report.Report
	for begun := time.Now(); ; time.Sleep(50 * time.Millisecond) {
		ctl.mu.Lock()
		last = ctl.last
		ctl.mu.Unlock()
		if last.Notice != nil && last.Drain.State == report.SafeToTerminate {
			break
		}
		if time.Since(begun) > 30*time.Second {
			t.Fatalf("no report of the node drained with the notice within 30 s; last %+v\nagent log:\n%s", last, agentLog())
		}
	}
	if n := last.Notice; n.Kind != report.Interruption || n.Time.Before(start.Add(2*time.Second+25*time.Second)) || n.Time.After(time.Now().Add(30*time.Second)) {
		t.Errorf("notice %+v; want an interruption about 30 s after the preemption was seen", n)
	}
	if _, err := os.Stat(filepath.Join(dir, "train-a.ckpt")); err != nil {
		t.Errorf("safe before train-a checkpointed: %v", err)
	}
}

// TestAgentGCPBootstrap runs the agent command as a process on a Compute
// Engine VM (a stand-in metadata server that mints the VM's identity
// token, signed by a stand-in for Google's keys) with no credential and no
// bootstrap secret: with -identity gcp it asks the metadata server for a
// token for the controller's audience (format=full), gets its own
// credential from the controller's credential routes with it alone, keeps
// it (mode 0600) and reports with it.
func TestAgentGCPBootstrap(t *testing.T) {
	const audience = "https://fleetcast.internal:8790"
	google := identitytest.NewGoogle(t)
	vm := identitytest.Instance{Name: "a100-vm-1", ID: "8152740126359720177", Project: "ml", Zone: "us-central1-a"}
	md := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		q := r.URL.Query()
		if r.Header.Get("Metadata-Flavor") != "Google" || r.URL.Path != "/computeMetadata/v1/instance/service-accounts/default/identity" || q.Get("format") != "full" {
			http.Error(w, "refused", http.StatusForbidden)
			return
		}
		w.Header().Set("Metadata-Flavor", "Google")
		fmt.Fprint(w, google.Token(t, q.Get("audience"), vm, nil))
	}))
	defer md.Close()
	dir, err := os.MkdirTemp("", "fc")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(dir)
	store, err := state.Open(filepath.Join(dir, "controller"))
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	creds, err := nodeauth.NewRegistry(store, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	v, err := idtoken.NewValidator(context.Background(), option.WithHTTPClient(google.Client()))
	if err != nil {
		t.Fatal(err)
	}
	pool := fleet.Pool{Name: "gcp-a100", Provider: fleet.ProviderGCP, Region: "us-central1", Settings: gcp.Settings{Project: "ml", Zone: "us-central1-a", MIG: "a100"}}
	ctl := &noticeController{agents: controller.NewAgents(time.Now)}
	mux := &apiauth.Router{}
	(&nodeauth.Server{Registry: creds, GCP: &nodeauth.GCPVerifier{Audience: audience, Validator: v},
		Live: func(node string) (fleet.Pool, string, bool) { return pool, vm.Zone, node == vm.Name }}).Routes(mux)
	mux.Handle(reports.Pattern, apiauth.Node, &reports.Receiver{Credentials: creds, Store: ctl})
	cs := httptest.NewServer(mux)
	defer cs.Close()
	credFile := filepath.Join(dir, "credential")
	agentLog, stop := startCLI(t, filepath.Join(dir, "agent.log"), "agent -controller "+cs.URL+" -token-file "+credFile+" -node "+vm.Name+" -no-gpu -socket "+filepath.Join(dir, "agent.sock")+
		" -marker "+filepath.Join(dir, "draining")+" -state "+filepath.Join(dir, "state.json")+" -metrics 127.0.0.1:0 -interval 500ms -notices none"+
		" -identity gcp -gcp-audience "+audience+" -gce-metadata-endpoint "+md.URL+"/computeMetadata/v1/")
	defer stop()
	for begun := time.Now(); ; time.Sleep(50 * time.Millisecond) {
		ctl.mu.Lock()
		node := ctl.last.Node
		ctl.mu.Unlock()
		if node == vm.Name {
			break
		}
		if time.Since(begun) > 30*time.Second {
			t.Fatalf("no report from %s within 30 s\nagent log:\n%s", vm.Name, agentLog())
		}
	}
	fi, err := os.Stat(credFile)
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("the credential file: %v, %v; want mode 0600", fi, err)
	}
	if c := creds.List(); len(c) != 1 || c[0].Node != vm.Name || c[0].Pool != pool.Name || c[0].Via != nodeauth.ViaBootstrap {
		t.Fatalf("credentials %+v; want %s's, bootstrapped, of pool %s", c, vm.Name, pool.Name)
	}
}

// reportingAgent is the agent command run as a process for node i-1,
// without GPUs, reporting to an in-process controller through the real
// report receiver, with the node's credential.
type reportingAgent struct {
	socket string
	cs     *httptest.Server
	log    func() string
	stop   func()
}

// startReportingAgent starts it with the agent flags given (an interval,
// notices), reporting to store, in a directory with a short path (unix
// sockets allow about 100 bytes); all of it is stopped when t ends.
func startReportingAgent(t *testing.T, store report.Store, flags string) *reportingAgent {
	t.Helper()
	dir, err := os.MkdirTemp("", "fc")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	tokens := nodeauthtest.New(t)
	a := &reportingAgent{socket: filepath.Join(dir, "agent.sock"), cs: httptest.NewServer((&reports.Receiver{Credentials: tokens, Store: store}).Handler())}
	t.Cleanup(a.cs.Close)
	tokenFile := filepath.Join(dir, "token")
	if err := os.WriteFile(tokenFile, []byte(tokens.For("i-1")+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	a.log, a.stop = startCLI(t, filepath.Join(dir, "agent.log"), "agent -controller "+a.cs.URL+" -token-file "+tokenFile+" -node i-1 -no-gpu -socket "+a.socket+
		" -marker "+filepath.Join(dir, "draining")+" -state "+filepath.Join(dir, "state.json")+" -metrics 127.0.0.1:0 "+flags)
	return a
}
