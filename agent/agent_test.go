package agent

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/dgxh100"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/server"

	"github.com/fleetcast/autoscaler/agent/gpu"
	"github.com/fleetcast/autoscaler/agent/gpu/gpmtest"
	"github.com/fleetcast/autoscaler/agent/report"
	"github.com/fleetcast/autoscaler/controller/reports"
	"github.com/fleetcast/autoscaler/nodeauth/nodeauthtest"
)

// TestMain doubles as a training job when FLEETCAST_TEST_JOB is set
// ("SOCKET ID MODE"): it registers itself with the agent and, on SIGUSR1,
// writes a checkpoint file and tells the agent (MODE "checkpoint"), or
// ignores the request (MODE "stubborn").
func TestMain(m *testing.M) {
	if spec := os.Getenv("FLEETCAST_TEST_JOB"); spec != "" {
		os.Exit(runJob(strings.Fields(spec)))
	}
	os.Exit(m.Run())
}

func runJob(args []string) int {
	socket, id, mode := args[0], args[1], args[2]
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGUSR1)
	c := Dial(socket)
	ctx := context.Background()
	if err := c.Register(ctx, JobRequest{ID: id, GPUs: []int{0}, PIDs: []int{os.Getpid()}}); err != nil {
		fmt.Println("register:", err)
		return 1
	}
	fmt.Println("ready")
	for range sigs {
		if mode != "checkpoint" {
			continue
		}
		if err := os.WriteFile(filepath.Join(filepath.Dir(socket), id+".ckpt"), []byte("weights"), 0o600); err != nil {
			return 1
		}
		if err := c.Checkpoint(ctx, id); err != nil {
			return 1
		}
	}
	return 0
}

// startJob starts a child job and waits until it registered.
func startJob(t *testing.T, socket, id, mode string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), "FLEETCAST_TEST_JOB="+socket+" "+id+" "+mode)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil || strings.TrimSpace(line) != "ready" {
		t.Fatalf("job %s: %q %v", id, line, err)
	}
	return cmd
}

// controller is a receiver whose store asks for a drain once told to, and
// remembers the last report.
type controller struct {
	mu    sync.Mutex
	drain *report.DrainRequest
	last  report.Report
}

func (c *controller) Accept(_ context.Context, r *report.Report) (report.Answer, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.last = *r
	return report.Answer{Drain: c.drain}, nil
}

func (c *controller) lastState() report.DrainState {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.last.Drain.State
}

// setup starts an agent with its local API, a controller, and a reporter.
func setup(t *testing.T) (*Agent, *controller, *Reporter, string) {
	t.Helper()
	dir, err := os.MkdirTemp("", "fc") // a short path: unix sockets allow about 100 bytes
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	a, err := New(Config{Node: "i-1", LongRunningAfter: time.Nanosecond, MarkerFile: filepath.Join(dir, "draining")})
	if err != nil {
		t.Fatal(err)
	}
	socket := filepath.Join(dir, "agent.sock")
	l, err := ListenUnix(socket)
	if err != nil {
		t.Fatal(err)
	}
	if st, err := os.Stat(socket); err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("socket mode %v, %v; want 0600", st.Mode().Perm(), err)
	}
	srv := &http.Server{Handler: a.Handler()}
	go srv.Serve(l)
	t.Cleanup(func() { srv.Close() })

	tokens := nodeauthtest.New(t)
	ctl := &controller{}
	cs := httptest.NewServer((&reports.Receiver{Credentials: tokens, Store: ctl}).Handler())
	t.Cleanup(cs.Close)
	return a, ctl, &Reporter{Agent: a, Controller: cs.URL, Credential: FixedCredential(tokens.For("i-1"))}, dir
}

// eventually polls cond, ticking the agent and reporting, for up to 10 s.
func eventually(t *testing.T, a *Agent, r *Reporter, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		a.Tick()
		if err := r.Send(context.Background()); err != nil {
			t.Fatal(err)
		}
		if cond() {
			return
		}
	}
	t.Fatal("timed out")
}

// TestDrainEndToEnd: real job processes checkpoint on SIGUSR1; the node is
// safe to terminate only once both have.
func TestDrainEndToEnd(t *testing.T) {
	a, ctl, rep, dir := setup(t)
	startJob(t, filepath.Join(dir, "agent.sock"), "train-a", "checkpoint")
	startJob(t, filepath.Join(dir, "agent.sock"), "train-b", "checkpoint")
	if err := rep.Send(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got := ctl.lastState(); got != report.NotDraining {
		t.Fatalf("state %q before any drain", got)
	}
	now := time.Now()
	ctl.mu.Lock()
	ctl.drain = &report.DrainRequest{ID: "d1", Since: now, Deadline: now.Add(time.Minute), Signal: "SIGUSR1"}
	ctl.mu.Unlock()
	if err := rep.Send(context.Background()); err != nil { // the answer carries the drain
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "draining")); err != nil {
		t.Fatalf("no drain marker: %v", err)
	}
	eventually(t, a, rep, func() bool { return ctl.lastState() == report.SafeToTerminate })
	for _, id := range []string{"train-a", "train-b"} {
		if _, err := os.Stat(filepath.Join(dir, id+".ckpt")); err != nil {
			t.Fatalf("safe before %s wrote its checkpoint: %v", id, err)
		}
	}
}

// TestDrainTimesOut: a job that never checkpoints keeps the node; the
// drain fails at its deadline and the marker is cleared.
func TestDrainTimesOut(t *testing.T) {
	a, ctl, rep, dir := setup(t)
	startJob(t, filepath.Join(dir, "agent.sock"), "stubborn", "stubborn")
	now := time.Now()
	ctl.drain = &report.DrainRequest{ID: "d2", Since: now, Deadline: now.Add(300 * time.Millisecond), Signal: "SIGUSR1"}
	if err := rep.Send(context.Background()); err != nil {
		t.Fatal(err)
	}
	if r := a.Report(); r.Drain.State != report.Draining || len(r.Drain.Waiting) != 1 || r.Drain.Waiting[0] != "stubborn" {
		t.Fatalf("drain %+v", r.Drain)
	}
	eventually(t, a, rep, func() bool { return ctl.lastState() == report.DrainFailed })
	if _, err := os.Stat(filepath.Join(dir, "draining")); !os.IsNotExist(err) {
		t.Fatalf("the drain marker stayed after the drain failed: %v", err)
	}
}

// gpus is a fixed GPU reading.
type gpus []report.GPU

func (g gpus) Read() ([]report.GPU, error) { return g, nil }

// TestUnknownProcesses: a GPU process no job claims is reported as
// unknown work, never idleness.
func TestUnknownProcesses(t *testing.T) {
	alive := func(int, syscall.Signal) error { return nil } // the GPU's processes are made up
	a, err := New(Config{Node: "i-1", Signal: alive, GPUs: gpus{{Index: 0, MemoryTotal: 1 << 30, Processes: []report.Process{{PID: 4242, GPU: 0}, {PID: 777, GPU: 0}}}}})
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Register("train", []int{0}, []int{4242}); err != nil {
		t.Fatal(err)
	}
	r := a.Report()
	if len(r.Unknown) != 1 || r.Unknown[0].PID != 777 || len(r.Jobs) != 1 {
		t.Fatalf("report %+v", r)
	}
	if err := r.Validate(time.Now(), time.Minute, 0); err != nil {
		t.Fatalf("the agent's own report does not validate: %v", err)
	}
}

func TestNoticeAndMetrics(t *testing.T) {
	a, _, _, dir := setup(t)
	startJob(t, filepath.Join(dir, "agent.sock"), "train-a", "checkpoint")
	c := &http.Client{Transport: Dial(filepath.Join(dir, "agent.sock")).http.Transport}
	resp, err := c.Post("http://agent/v1/notice?deadline="+time.Now().Add(2*time.Minute).UTC().Format(time.RFC3339), "", nil)
	if err != nil || resp.StatusCode != http.StatusNoContent {
		t.Fatalf("notice: %v %v", resp, err)
	}
	resp.Body.Close()
	// The job checkpoints at once, and the node is safe before the cloud takes it.
	for deadline := time.Now().Add(10 * time.Second); a.Report().Drain.State != report.SafeToTerminate; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("no checkpoint after a spot notice: %+v", a.Report().Drain)
		}
		a.Tick()
	}
	resp, err = c.Get("http://agent/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	for _, want := range []string{"fleetcast_agent_jobs 1", `fleetcast_agent_drain_state{state="safe"} 1`, "fleetcast_agent_gpus_healthy 0"} {
		if !strings.Contains(string(body), want) {
			t.Errorf("metrics lack %q:\n%s", want, body)
		}
	}
}

// TestReportSMActive: on go-nvml's mock DGX H100 with GPM (GPU i's SMs
// 10i+2.4% busy), the agent's report carries each GPU's SM activity
// (sm_active) from its second reading, the first having no interval; it
// validates, and the metrics give it as a ratio. Only GPUs that report it
// have the gauge.
func TestReportSMActive(t *testing.T) {
	srv := dgxh100.New()
	for _, d := range srv.Devices {
		dev := d.(*server.Device)
		dev.GetUtilizationRatesFunc = func() (nvml.Utilization, nvml.Return) { return nvml.Utilization{Gpu: 100}, nvml.SUCCESS }
		dev.GetComputeRunningProcessesFunc = func() ([]nvml.ProcessInfo, nvml.Return) { return nil, nvml.SUCCESS }
	}
	gpmtest.Install(srv, func(i int) float64 { return float64(10*i) + 2.4 })
	// GPU 7 has no GPM.
	srv.Devices[7].(*server.Device).GpmQueryDeviceSupportFunc = func() (nvml.GpmSupport, nvml.Return) {
		return nvml.GpmSupport{}, nvml.ERROR_NOT_SUPPORTED
	}
	r, err := gpu.Open(srv)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	at := time.Now()
	r.Clock(func() time.Time { at = at.Add(gpu.MinSMInterval); return at }) // each reading over the shortest interval
	a, err := New(Config{Node: "i-1", GPUs: r, Signal: func(int, syscall.Signal) error { return nil }})
	if err != nil {
		t.Fatal(err)
	}
	if rep := a.Report(); len(rep.GPUs) != 8 || slices.ContainsFunc(rep.GPUs, func(g report.GPU) bool { return g.SMActive != nil }) {
		t.Fatalf("the first report: %+v; want 8 GPUs without SM activity", rep.GPUs)
	}
	rep := a.Report()
	if err := rep.Validate(time.Now(), time.Minute, 8); err != nil {
		t.Fatalf("the agent's own report does not validate: %v", err)
	}
	body, err := json.Marshal(rep)
	if err != nil {
		t.Fatal(err)
	}
	var wire struct {
		GPUs []map[string]any `json:"gpus"`
	}
	if err := json.Unmarshal(body, &wire); err != nil {
		t.Fatal(err)
	}
	for i, g := range wire.GPUs {
		sm, ok := g["sm_active"]
		switch {
		case i == 7 && ok:
			t.Errorf("GPU 7, without GPM: sm_active %v", sm)
		case i < 7 && sm != float64(10*i+2):
			t.Errorf("GPU %d: sm_active %v, want %d", i, sm, 10*i+2)
		}
	}
	rec := httptest.NewRecorder()
	a.MetricsHandler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	metrics := rec.Body.String()
	for i, d := range srv.Devices {
		line := fmt.Sprintf("fleetcast_agent_gpu_sm_active_ratio{gpu=%q,uuid=%q} %g\n", strconv.Itoa(i), d.(*server.Device).UUID, float64(10*i+2)/100)
		if got := strings.Contains(metrics, line); got != (i < 7) {
			t.Errorf("GPU %d: metric %q given: %v, want %v", i, strings.TrimSpace(line), got, i < 7)
		}
	}
}

// FuzzLocalAPI: no request body crashes the local API or registers a job
// without an ID.
func FuzzLocalAPI(f *testing.F) {
	f.Add([]byte(`{"id":"train","gpus":[0,1],"pids":[42]}`))
	f.Add([]byte(`{"id":"train","gpus":[0],"pids":[42],"expected_end":"2026-11-30T18:00:00Z"}`))
	f.Add([]byte(`{"id":"train","pids":[42],"expected_end":"soon"}`))
	f.Add([]byte(`{"id":"","pids":[-1]}`))
	f.Add([]byte(`{"id":"x","gpus":"all"}`))
	// Every PID is taken for a live process, so that what parses registers.
	a, _ := New(Config{Node: "i-1", Signal: func(int, syscall.Signal) error { return nil }})
	h := a.Handler()
	f.Fuzz(func(t *testing.T, body []byte) {
		req := httptest.NewRequest(http.MethodPost, "/v1/jobs", bytes.NewReader(body))
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if rec.Code != http.StatusNoContent && (rec.Code < 400 || rec.Code >= 500) {
			t.Fatalf("status %d", rec.Code)
		}
		for _, j := range a.Report().Jobs {
			if j.ID == "" {
				t.Fatal("a job without an ID was registered")
			}
		}
	})
}

// BenchmarkSample is one sample at the agent's cost: reading 8 GPUs
// (go-nvml's mock DGX H100, NVML's own time excluded), building the
// report with a job on each GPU, and encoding it. At one sample a second,
// the target is under 0.5% of a core (5 ms a sample).
func BenchmarkSample(b *testing.B) {
	srv := dgxh100.New()
	for i, d := range srv.Devices {
		dev := d.(*server.Device)
		dev.GetUtilizationRatesFunc = func() (nvml.Utilization, nvml.Return) { return nvml.Utilization{Gpu: 90, Memory: 40}, nvml.SUCCESS }
		dev.GetComputeRunningProcessesFunc = func() ([]nvml.ProcessInfo, nvml.Return) {
			return []nvml.ProcessInfo{{Pid: uint32(1000 + i), UsedGpuMemory: 40 << 30}}, nvml.SUCCESS
		}
	}
	gpmtest.Install(srv, func(int) float64 { return 85 })
	r, err := gpu.Open(srv)
	if err != nil {
		b.Fatal(err)
	}
	at := time.Now()
	// Every reading samples; the mock's processes are made up.
	r.Clock(func() time.Time { at = at.Add(gpu.MinSMInterval); return at })
	alive := func(int, syscall.Signal) error { return nil }
	a, _ := New(Config{Node: "i-1", GPUs: r, Signal: alive})
	for i := range 8 {
		if err := a.Register(fmt.Sprintf("train-%d", i), []int{i}, []int{1000 + i}); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := json.Marshal(a.Report()); err != nil {
			b.Fatal(err)
		}
	}
}

// TestWatchedCheckpointsAndHook: a job that only writes checkpoint files
// (no API call) drains safely; the drain hook runs at the start.
func TestWatchedCheckpointsAndHook(t *testing.T) {
	dir := t.TempDir()
	hookOut := filepath.Join(dir, "hook")
	a, err := New(Config{Node: "i-1", LongRunningAfter: time.Nanosecond, DrainHook: []string{"sh", "-c", "echo $FLEETCAST_DRAIN $FLEETCAST_DRAIN_ID >> " + hookOut},
		Signal: func(int, syscall.Signal) error { return nil }})
	if err != nil {
		t.Fatal(err)
	}
	if err := a.RegisterWatched("train", []int{0}, []int{os.Getpid()}, filepath.Join(dir, "ckpt-*.pt")); err != nil {
		t.Fatal(err)
	}
	time.Sleep(10 * time.Millisecond)
	now := time.Now()
	if err := a.Drain(&report.DrainRequest{ID: "d3", Since: now, Deadline: now.Add(time.Minute), Signal: "SIGUSR1"}); err != nil {
		t.Fatal(err)
	}
	a.Tick()
	if a.Report().Drain.State != report.Draining {
		t.Fatal("safe before any checkpoint")
	}
	time.Sleep(20 * time.Millisecond) // a file time after the drain began
	if err := os.WriteFile(filepath.Join(dir, "ckpt-00042.pt"), []byte("w"), 0o600); err != nil {
		t.Fatal(err)
	}
	a.Tick()
	if got := a.Report().Drain.State; got != report.Draining {
		t.Fatalf("state %q on first sight of the file, want draining until it holds still", got)
	}
	a.Tick()
	if got := a.Report().Drain.State; got != report.SafeToTerminate {
		t.Fatalf("state %q after the checkpoint file, want safe", got)
	}
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		if b, _ := os.ReadFile(hookOut); strings.TrimSpace(string(b)) == "start d3" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the drain hook did not run")
		}
	}
	if err := a.RegisterWatched("bad", nil, nil, "[x"); err == nil {
		t.Fatal("a bad pattern: want an error")
	}
}

// TestDrainingRefusesJobsOverTheAPI: the job's launcher sees the refusal,
// as a 409 with the reason.
func TestDrainingRefusesJobsOverTheAPI(t *testing.T) {
	a, err := New(Config{Node: "i-1", Signal: func(int, syscall.Signal) error { return nil }})
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	if err := a.Drain(&report.DrainRequest{ID: "d9", Since: now, Deadline: now.Add(time.Minute), Signal: "SIGUSR1"}); err != nil {
		t.Fatal(err)
	}
	req := httptest.NewRequest(http.MethodPost, "/v1/jobs", strings.NewReader(`{"id":"new","gpus":[0],"pids":[1]}`))
	req.Header.Set("Content-Type", "application/json")
	w := httptest.NewRecorder()
	a.Handler().ServeHTTP(w, req)
	if w.Code != http.StatusConflict || !strings.Contains(w.Body.String(), "is draining (drain d9) and takes no new jobs") {
		t.Fatalf("register on a draining node: %d %q, want 409 with the reason", w.Code, w.Body.String())
	}
}

// TestExpectedEndOverTheAPI: a job registered with its expected end
// reports it, keeps it across a restart of the agent (the state file), and
// registering again says it anew.
func TestExpectedEndOverTheAPI(t *testing.T) {
	c := &clock{time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)}
	path := filepath.Join(t.TempDir(), "agent-state.json")
	start := func() *Agent {
		t.Helper()
		a, err := New(Config{Node: "i-1", Now: c.now, Signal: func(int, syscall.Signal) error { return nil }, StateFile: path})
		if err != nil {
			t.Fatal(err)
		}
		return a
	}
	register := func(a *Agent, body string) {
		t.Helper()
		req := httptest.NewRequest(http.MethodPost, "/v1/jobs", strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		w := httptest.NewRecorder()
		a.Handler().ServeHTTP(w, req)
		if w.Code != http.StatusNoContent {
			t.Fatalf("register: %d %s", w.Code, w.Body)
		}
	}
	end := time.Date(2026, 11, 30, 18, 0, 0, 0, time.UTC)
	a := start()
	register(a, fmt.Sprintf(`{"id":"train","gpus":[0],"pids":[%d],"expected_end":%q}`, os.Getpid(), end.Format(time.RFC3339)))
	if r := a.Report(); len(r.Jobs) != 1 || !r.Jobs[0].ExpectedEnd.Equal(end) {
		t.Fatalf("report jobs %+v; want the expected end %v", r.Jobs, end)
	}
	b := start()
	if r := b.Report(); len(r.Jobs) != 1 || !r.Jobs[0].ExpectedEnd.Equal(end) {
		t.Fatalf("restarted agent's jobs %+v; want the expected end kept", r.Jobs)
	}
	register(b, fmt.Sprintf(`{"id":"train","gpus":[0],"pids":[%d]}`, os.Getpid()))
	if r := b.Report(); !r.Jobs[0].ExpectedEnd.IsZero() {
		t.Fatalf("registered again without one: expected end %v; want none", r.Jobs[0].ExpectedEnd)
	}
}

// TestJobOwnerOverTheAPI: a job registered with its team, tier, name and
// submission time reports them, keeps them across a restart of the agent
// (the state file), and registering again says them anew; a label that is
// not one (fleet.ValidLabel) and a submission after the job's start (in
// the future by the agent's clock, or after the start a job registered
// again keeps) are refused with 422, naming the field, and register nothing.
func TestJobOwnerOverTheAPI(t *testing.T) {
	c := &clock{time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)}
	path := filepath.Join(t.TempDir(), "agent-state.json")
	start := func() (*Agent, error) {
		return New(Config{Node: "i-1", Now: c.now, Signal: func(int, syscall.Signal) error { return nil }, StateFile: path})
	}
	register := func(a *Agent, body string) *httptest.ResponseRecorder {
		t.Helper()
		req := httptest.NewRequest(http.MethodPost, "/v1/jobs", strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		w := httptest.NewRecorder()
		a.Handler().ServeHTTP(w, req)
		return w
	}
	pid := os.Getpid()
	submitted := c.t.Add(-45 * time.Minute)
	a, err := start()
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		name, body, reason string
	}{
		{"a team with a space", `"team":"ml research"`, `job train: team: "ml research": want letters, digits and ._-:@+ only`},
		{"a tier too long", `"tier":"` + strings.Repeat("b", 65) + `"`, "job train: tier: 65 bytes, at most 64"},
		{"a name with a hash", `"name":"train#7"`, `job train: name: "train#7": want letters`},
		{"submitted in the future", `"submitted":"2026-11-30T12:00:01Z"`,
			"job train: submitted: 2026-11-30T12:00:01Z is after the job's start, 2026-11-30T12:00:00Z by the agent's clock"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			w := register(a, fmt.Sprintf(`{"id":"train","gpus":[0],"pids":[%d],%s}`, pid, tt.body))
			if w.Code != http.StatusUnprocessableEntity || !strings.Contains(w.Body.String(), tt.reason) {
				t.Fatalf("register: %d %q; want 422 and %q", w.Code, w.Body, tt.reason)
			}
			if r := a.Report(); len(r.Jobs) != 0 {
				t.Fatalf("refused, yet registered: %+v", r.Jobs)
			}
		})
	}
	w := register(a, fmt.Sprintf(`{"id":"train","gpus":[0],"pids":[%d],"team":"ml-research","tier":"batch","name":"llama-ft.7","submitted":%q}`, pid, submitted.Format(time.RFC3339)))
	if w.Code != http.StatusNoContent {
		t.Fatalf("register: %d %s", w.Code, w.Body)
	}
	want := func(r report.Report, team, tier, name string, submitted time.Time) bool {
		return len(r.Jobs) == 1 && r.Jobs[0].Team == team && r.Jobs[0].Tier == tier && r.Jobs[0].Name == name && r.Jobs[0].Submitted.Equal(submitted)
	}
	if r := a.Report(); !want(r, "ml-research", "batch", "llama-ft.7", submitted) {
		t.Fatalf("report jobs %+v; want team ml-research, tier batch, name llama-ft.7, submitted %v", r.Jobs, submitted)
	}
	c.t = c.t.Add(time.Hour)
	b, err := start()
	if err != nil {
		t.Fatal(err)
	}
	if r := b.Report(); !want(r, "ml-research", "batch", "llama-ft.7", submitted) {
		t.Fatalf("restarted agent's jobs %+v; want the labels and submission kept", r.Jobs)
	}
	// Registered again, the job keeps its start: a submission after it is
	// refused, though it is in the past now.
	w = register(b, fmt.Sprintf(`{"id":"train","gpus":[0],"pids":[%d],"submitted":"2026-11-30T12:30:00Z"}`, pid))
	if w.Code != http.StatusUnprocessableEntity || !strings.Contains(w.Body.String(), "submitted: 2026-11-30T12:30:00Z is after the job's start, 2026-11-30T12:00:00Z") {
		t.Fatalf("registered again, submitted after its start: %d %q; want 422", w.Code, w.Body)
	}
	if w = register(b, fmt.Sprintf(`{"id":"train","gpus":[0],"pids":[%d],"team":"infra"}`, pid)); w.Code != http.StatusNoContent {
		t.Fatalf("register again: %d %s", w.Code, w.Body)
	}
	if r := b.Report(); !want(r, "infra", "", "", time.Time{}) {
		t.Fatalf("registered again with a team only: jobs %+v; want team infra and nothing else", r.Jobs)
	}
	// A state file whose label is not one is refused, naming it.
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, bytes.Replace(data, []byte(`"team":"infra"`), []byte(`"team":"in fra"`), 1), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := start(); err == nil || !strings.Contains(err.Error(), `jobs[0].team: "in fra": want letters`) {
		t.Fatalf("a state file with a bad team: %v; want it refused, naming jobs[0].team", err)
	}
}

// countingAgent is an agent on clock c whose jobs' processes are alive,
// and a count of the checkpoint signals sent to them.
func countingAgent(t *testing.T, c *clock) (*Agent, func() int) {
	t.Helper()
	var mu sync.Mutex
	n := 0
	a, err := New(Config{Node: "i-1", Now: c.now, Signal: func(_ int, sig syscall.Signal) error {
		mu.Lock()
		defer mu.Unlock()
		if sig != 0 {
			n++
		}
		return nil
	}})
	if err != nil {
		t.Fatal(err)
	}
	return a, func() int { mu.Lock(); defer mu.Unlock(); return n }
}

// flakyGPUs is a GPU reader whose answer the test sets.
type flakyGPUs struct {
	mu   sync.Mutex
	gpus []report.GPU
	err  error
}

func (g *flakyGPUs) Read() ([]report.GPU, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.gpus, g.err
}

func (g *flakyGPUs) set(gpus []report.GPU, err error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.gpus, g.err = gpus, err
}

// clock is a settable clock for the drain state machine.
type clock struct{ t time.Time }

func (c *clock) now() time.Time { return c.t }

// TestDrainSafetyEdges covers what must never make a node "safe" early.
func TestDrainSafetyEdges(t *testing.T) {
	alive := func(int, syscall.Signal) error { return nil }
	newAgent := func(t *testing.T, c *clock, g GPUReader, marker string) *Agent {
		a, err := New(Config{Node: "i-1", LongRunningAfter: time.Hour, Now: c.now, Signal: alive, GPUs: g, MarkerFile: marker})
		if err != nil {
			t.Fatal(err)
		}
		return a
	}
	t0 := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	drain := func(since time.Time) *report.DrainRequest {
		return &report.DrainRequest{ID: "d", Since: since, Deadline: since.Add(20 * time.Minute), Signal: "SIGUSR1"}
	}
	t.Run("registering again keeps the job's age and checkpoints", func(t *testing.T) {
		c := &clock{t0}
		a := newAgent(t, c, nil, "")
		_ = a.Register("train", []int{0}, []int{os.Getpid()})
		c.t = t0.Add(2 * time.Hour)
		_ = a.Drain(drain(c.t))
		if err := a.Register("train", []int{0}, []int{os.Getpid(), os.Getppid()}); err != nil { // a launcher adds a PID
			t.Fatalf("a running job registering again on a draining node: %v", err)
		}
		a.Tick()
		if got := a.Report().Drain.State; got != report.Draining {
			t.Fatalf("state %q: re-registering made a 2-hour job new", got)
		}
	})
	t.Run("every job is waited for, long-running or not", func(t *testing.T) {
		c := &clock{t0}
		a := newAgent(t, c, nil, "")
		_ = a.Register("young", []int{0}, []int{os.Getpid()}) // a minute old, LongRunningAfter is an hour
		c.t = t0.Add(time.Minute)
		_ = a.Drain(drain(c.t))
		if got := a.Report(); got.Drain.State != report.Draining || fmt.Sprint(got.Drain.Waiting) != "[young]" {
			t.Fatalf("drain %+v: a young job's work would be lost", got.Drain)
		}
		c.t = c.t.Add(time.Second)
		_ = a.Checkpoint("young")
		if got := a.Report().Drain.State; got != report.SafeToTerminate {
			t.Fatalf("state %q after the young job checkpointed, want safe", got)
		}
	})
	t.Run("a checkpoint file written before the drain never counts", func(t *testing.T) {
		dir := t.TempDir()
		c := &clock{time.Now().Add(2 * time.Hour)}
		a := newAgent(t, c, nil, "")
		_ = a.RegisterWatched("train", []int{0}, []int{os.Getpid()}, filepath.Join(dir, "*.pt"))
		a.Tick() // nothing there yet
		f := filepath.Join(dir, "step-100.pt")
		_ = os.WriteFile(f, []byte("w"), 0o600)
		before := c.t.Add(-5 * time.Second) // written 5 s before the drain arrives
		_ = os.Chtimes(f, before, before)
		_ = a.Drain(drain(c.t))
		for range 3 {
			c.t = c.t.Add(10 * time.Second)
			a.Tick()
		}
		r := a.Report()
		if r.Drain.State != report.Draining || !r.Jobs[0].LastCheckpoint.Equal(before) {
			t.Fatalf("drain %q, checkpoint %v (file time %v): a file older than the drain counted as a checkpoint after it", r.Drain.State, r.Jobs[0].LastCheckpoint, before)
		}
	})
	t.Run("a checkpoint file counts no later than the agent first saw it", func(t *testing.T) {
		// The file system's clock is a minute ahead of the agent's: a file
		// written 5 s before the drain is dated 55 s after it.
		dir := t.TempDir()
		c := &clock{time.Now()}
		a := newAgent(t, c, nil, "")
		_ = a.RegisterWatched("train", []int{0}, []int{os.Getpid()}, filepath.Join(dir, "*.pt"))
		f := filepath.Join(dir, "step-200.pt")
		_ = os.WriteFile(f, []byte("w"), 0o600)
		stamp := c.t.Add(time.Minute)
		_ = os.Chtimes(f, stamp, stamp)
		seen := c.t
		a.Tick() // seen, dated in the future: not taken yet
		c.t = c.t.Add(5 * time.Second)
		_ = a.Drain(drain(c.t))
		for range 8 { // past the file's date
			c.t = c.t.Add(10 * time.Second)
			a.Tick()
		}
		r := a.Report()
		if r.Drain.State != report.Draining || !r.Jobs[0].LastCheckpoint.Equal(seen) {
			t.Fatalf("drain %q, checkpoint at %v: want draining, the checkpoint at %v when the agent first saw the file (dated %v)",
				r.Drain.State, r.Jobs[0].LastCheckpoint, seen, stamp)
		}
	})
	t.Run("a file written just before the drain on a clock ahead never counts", func(t *testing.T) {
		// Written 2 s before the drain reaches the agent, on a file system
		// 3 s ahead (dated 1 s after the drain), and first seen by the
		// scan as the drain arrives.
		dir := t.TempDir()
		c := &clock{time.Now()}
		a := newAgent(t, c, nil, "")
		_ = a.RegisterWatched("train", []int{0}, []int{os.Getpid()}, filepath.Join(dir, "*.pt"))
		a.Tick() // the scan before
		c.t = c.t.Add(8 * time.Second)
		f := filepath.Join(dir, "step-300.pt")
		_ = os.WriteFile(f, []byte("w"), 0o600)
		stamp := c.t.Add(3 * time.Second)
		_ = os.Chtimes(f, stamp, stamp)
		c.t = c.t.Add(2 * time.Second)
		_ = a.Drain(drain(c.t))
		c.t = c.t.Add(time.Second)
		a.Tick() // as the drain arrives
		for range 3 {
			c.t = c.t.Add(10 * time.Second)
			a.Tick()
		}
		if r := a.Report(); r.Drain.State != report.Draining {
			t.Fatalf("drain %q, checkpoint %v: a file written before the drain counted", r.Drain.State, r.Jobs[0].LastCheckpoint)
		}
		// The checkpoint the drain asked for, written after that scan.
		c.t = c.t.Add(10 * time.Second)
		g := filepath.Join(dir, "step-301.pt")
		_ = os.WriteFile(g, []byte("w"), 0o600)
		stamp = c.t.Add(3 * time.Second)
		_ = os.Chtimes(g, stamp, stamp)
		for range 3 {
			c.t = c.t.Add(10 * time.Second)
			a.Tick()
		}
		if r := a.Report(); r.Drain.State != report.SafeToTerminate {
			t.Fatalf("drain %q after a checkpoint file written once the drain had begun", r.Drain.State)
		}
	})
	t.Run("a confirmation not acted on is asked again", func(t *testing.T) {
		c := &clock{t0}
		a, signals := countingAgent(t, c)
		_ = a.Register("train", []int{0}, []int{os.Getpid()})
		_ = a.Drain(drain(t0))
		c.t = c.t.Add(time.Second)
		_ = a.Checkpoint("train")
		if got := a.Report().Drain.State; got != report.SafeToTerminate {
			t.Fatalf("state %q after the checkpoint", got)
		}
		c.t = c.t.Add(SafeFor - time.Second)
		a.Tick()
		if got := a.Report().Drain.State; got != report.SafeToTerminate {
			t.Fatalf("state %q within SafeFor", got)
		}
		c.t = c.t.Add(2 * time.Second) // the job has worked on since its checkpoint
		a.Tick()
		n := signals()
		if r := a.Report(); r.Drain.State != report.Draining || fmt.Sprint(r.Drain.Waiting) != "[train]" || n != 2 {
			t.Fatalf("drain %+v, %d signals, %v after it was found safe: want asked again", r.Drain, n, SafeFor+time.Second)
		}
		c.t = c.t.Add(time.Second)
		_ = a.Checkpoint("train")
		if got := a.Report().Drain.State; got != report.SafeToTerminate {
			t.Fatalf("state %q after the new checkpoint", got)
		}
	})
	t.Run("an interruption during a safe drain asks every job again", func(t *testing.T) {
		c := &clock{t0}
		a, signals := countingAgent(t, c)
		_ = a.Register("train", []int{0}, []int{os.Getpid()})
		_ = a.Drain(drain(t0))
		c.t = c.t.Add(time.Second)
		_ = a.Checkpoint("train") // safe on this checkpoint
		c.t = c.t.Add(4 * time.Minute)
		_ = a.Notice(c.t.Add(2 * time.Minute))
		n := signals()
		r := a.Report()
		if r.Drain.State != report.Draining || n != 2 {
			t.Fatalf("drain %+v, %d signals after the interruption notice: want the job asked again, from now", r.Drain, n)
		}
		_ = a.Drain(nil) // the controller cancels its drain: the cloud still takes the node
		if got := a.Report().Drain.State; got != report.Draining {
			t.Fatalf("state %q: the controller's cancel ended the drain the cloud's notice rules", got)
		}
	})
	t.Run("a safe notice drain ends once the node outlives it", func(t *testing.T) {
		c := &clock{t0}
		a := newAgent(t, c, nil, "")
		_ = a.Register("train", []int{0}, []int{os.Getpid()})
		_ = a.Notice(t0.Add(2 * time.Minute))
		c.t = c.t.Add(time.Second)
		_ = a.Checkpoint("train")
		if got := a.Report().Drain.State; got != report.SafeToTerminate {
			t.Fatalf("state %q", got)
		}
		c.t = t0.Add(SafeFor + time.Minute) // hibernated and resumed
		a.Tick()
		if got := a.Report().Drain.State; got != report.DrainFailed {
			t.Fatalf("state %q past the notice's deadline and SafeFor, want failed (the node stays)", got)
		}
		_ = a.Drain(drain(c.t))
		if r := a.Report(); r.Drain.ID != "d" {
			t.Fatalf("drain %+v: the controller's drain is ignored after a notice drain the node outlived", r.Drain)
		}
		a.Withdraw(report.Interruption)
		if r := a.Report(); r.Notice != nil {
			t.Fatalf("notice %+v after the metadata service withdrew it", r.Notice)
		}
		if err := a.Notice(c.t.Add(48 * time.Hour)); err == nil {
			t.Fatal("an interruption two days ahead: want it refused (reports would be refused)")
		}
		if r := a.Report(); r.Notice != nil || r.Validate(c.t, 5*time.Minute, 0) != nil {
			t.Fatalf("notice %+v, validation %v after a refused notice: want none reported, and a valid report", r.Notice, r.Validate(c.t, 5*time.Minute, 0))
		}
	})
	t.Run("a failed spot notice drain lets the controller's drains through", func(t *testing.T) {
		c := &clock{t0}
		a := newAgent(t, c, nil, "")
		_ = a.Register("train", []int{0}, []int{os.Getpid()})
		_ = a.Notice(t0.Add(2 * time.Minute))
		c.t = t0.Add(3 * time.Minute) // the instance survived (stopped and resumed)
		a.Tick()
		_ = a.Drain(drain(c.t))
		if r := a.Report(); r.Drain.State != report.Draining || r.Drain.ID != "d" {
			t.Fatalf("drain %+v: the controller's drain was ignored after the notice drain failed", r.Drain)
		}
	})
	t.Run("a draining node refuses new jobs, and takes them again after the drain", func(t *testing.T) {
		c := &clock{t0}
		a := newAgent(t, c, nil, "")
		_ = a.Drain(drain(t0))
		var refused *DrainingError
		if err := a.Register("late", []int{0}, []int{os.Getpid()}); !errors.As(err, &refused) || !strings.Contains(err.Error(), "takes no new jobs") {
			t.Fatalf("a new job on a draining node: err %v, want a DrainingError", err)
		}
		if r := a.Report(); len(r.Jobs) != 0 {
			t.Fatalf("jobs %+v after a refused registration", r.Jobs)
		}
		_ = a.Drain(nil) // cancelled by the controller
		if err := a.Register("late", []int{0}, []int{os.Getpid()}); err != nil {
			t.Fatalf("a job after the drain was cancelled: %v", err)
		}
	})
	t.Run("GPUs never read since the agent started keep the node", func(t *testing.T) {
		c := &clock{t0}
		g := &flakyGPUs{err: errors.New("NVML device count: GPU is lost (fell off the bus)")}
		a := newAgent(t, c, g, "")
		_ = a.Drain(drain(t0))
		r := a.Report()
		if r.Drain.State != report.Draining || r.Healthy || !strings.Contains(r.GPUError, "GPU is lost") {
			t.Fatalf("report %+v: a node whose GPUs could never be read was safe, or its error not reported", r)
		}
		g.set(nil, nil) // readable again, nothing running
		if r := a.Report(); r.Drain.State != report.SafeToTerminate || r.GPUError != "" {
			t.Fatalf("report %+v once the GPUs read empty, want safe", r)
		}
	})
	t.Run("an unknown process seen once keeps the node while the GPUs cannot be read", func(t *testing.T) {
		c := &clock{t0}
		g := &flakyGPUs{gpus: []report.GPU{{Index: 0, MemoryTotal: 1, Processes: []report.Process{{PID: 999999, GPU: 0}}}}}
		a := newAgent(t, c, g, "")
		_ = a.Report()
		g.set(nil, errors.New("NVML: timeout"))
		_ = a.Drain(drain(t0))
		if r := a.Report(); r.Drain.State != report.Draining {
			t.Fatalf("state %q: the process seen before the GPUs broke was forgotten", r.Drain.State)
		}
	})
	t.Run("the drain starts by the agent's clock", func(t *testing.T) {
		c := &clock{t0}
		a := newAgent(t, c, nil, "")
		_ = a.Register("train", []int{0}, []int{os.Getpid()})
		c.t = t0.Add(2 * time.Hour)
		_ = a.Checkpoint("train") // 3 minutes before the drain reaches the agent
		c.t = c.t.Add(3 * time.Minute)
		_ = a.Drain(drain(c.t.Add(-5 * time.Minute))) // the controller's clock is 5 minutes behind
		if got := a.Report().Drain.State; got != report.Draining {
			t.Fatalf("state %q: a checkpoint before the drain reached the agent counted", got)
		}
		if err := a.Drain(&report.DrainRequest{ID: "z", Signal: "SIGUSR1"}); err == nil {
			t.Fatal("a drain without times: want an error")
		}
	})
	t.Run("an unknown GPU process keeps the node", func(t *testing.T) {
		c := &clock{t0}
		a := newAgent(t, c, gpus{{Index: 0, MemoryTotal: 1, Processes: []report.Process{{PID: 999999, GPU: 0}}}}, "")
		_ = a.Drain(drain(t0))
		if got := a.Report().Drain.State; got != report.Draining {
			t.Fatalf("state %q with a process no job claims, want draining", got)
		}
	})
	t.Run("checkpoint files dated in the future are not trusted", func(t *testing.T) {
		dir := t.TempDir()
		c := &clock{time.Now()}
		a := newAgent(t, c, nil, "")
		_ = a.RegisterWatched("train", []int{0}, []int{os.Getpid()}, filepath.Join(dir, "*.pt"))
		f := filepath.Join(dir, "future.pt")
		_ = os.WriteFile(f, []byte("w"), 0o600)
		future := time.Now().Add(24 * time.Hour)
		_ = os.Chtimes(f, future, future)
		c.t = c.t.Add(2 * time.Hour)
		_ = a.Drain(drain(c.t))
		for range 3 {
			c.t = c.t.Add(10 * time.Second)
			a.Tick()
		}
		if r := a.Report(); r.Drain.State != report.Draining || !r.Jobs[0].LastCheckpoint.IsZero() {
			t.Fatalf("state %q, checkpoint %v after a file dated tomorrow: want draining, and no checkpoint taken", r.Drain.State, r.Jobs[0].LastCheckpoint)
		}
	})
	t.Run("no marker, no drain; a stale marker is cleared at start", func(t *testing.T) {
		dir := t.TempDir()
		stale := filepath.Join(dir, "draining")
		_ = os.WriteFile(stale, []byte("old\n"), 0o644)
		c := &clock{t0}
		a := newAgent(t, c, nil, stale)
		if _, err := os.Stat(stale); !os.IsNotExist(err) {
			t.Fatal("a stale marker survived the agent's start")
		}
		bad := newAgent(t, c, nil, filepath.Join(dir, "missing-dir", "draining"))
		if err := bad.Drain(drain(t0)); err == nil || bad.Report().Drain.State != report.NotDraining {
			t.Fatalf("a drain without its marker: err %v, state %q", err, bad.Report().Drain.State)
		}
		_ = a
	})
	t.Run("a spot notice drain outlives the controller's routine answers", func(t *testing.T) {
		c := &clock{t0}
		a := newAgent(t, c, nil, "")
		_ = a.Register("train", []int{0}, []int{os.Getpid()})
		c.t = t0.Add(2 * time.Hour)
		if err := a.Notice(c.t.Add(2 * time.Minute)); err != nil {
			t.Fatal(err)
		}
		_ = a.Drain(nil) // the controller knows of no drain
		if got := a.Report().Drain.State; got != report.Draining {
			t.Fatalf("state %q: a routine answer cancelled the spot notice's drain", got)
		}
	})
	t.Run("registrations the controller would refuse are refused here", func(t *testing.T) {
		a := newAgent(t, &clock{t0}, nil, "")
		if err := a.Register(strings.Repeat("x", 300), nil, []int{1}); err == nil {
			t.Fatal("a 300-character ID: want an error")
		}
		if err := a.Register("j", []int{64}, []int{1}); err == nil {
			t.Fatal("GPU 64: want an error")
		}
	})
}

// TestStateSurvivesRestart: an agent restarted mid-drain (an upgrade, a
// crash) knows its jobs from its state file at once, so the drain the
// controller hands back is not confirmed before they checkpoint again,
// even without GPU data to show their processes. A state file that is
// corrupt or another node's stops the agent with an error naming it.
func TestStateSurvivesRestart(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "agent-state.json")
	c := &clock{time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)}
	alive := func(int, syscall.Signal) error { return nil }
	start := func(state string) *Agent {
		t.Helper()
		a, err := New(Config{Node: "i-1", Now: c.now, Signal: alive, StateFile: state})
		if err != nil {
			t.Fatal(err)
		}
		return a
	}
	a := start(path)
	if err := a.Register("train", []int{0}, []int{os.Getpid()}); err != nil {
		t.Fatal(err)
	}
	c.t = c.t.Add(time.Hour)
	_ = a.Checkpoint("train")
	d := &report.DrainRequest{ID: "d", Since: c.t, Deadline: c.t.Add(20 * time.Minute), Signal: "SIGUSR1"}
	_ = a.Drain(d)
	c.t = c.t.Add(time.Minute)

	b := start(path) // restarted: the drain comes back with the next answer
	_ = b.Drain(d)
	r := b.Report()
	if len(r.Jobs) != 1 || r.Jobs[0].ID != "train" || !r.Jobs[0].Start.Equal(c.t.Add(-time.Hour-time.Minute)) || r.Drain.State != report.Draining {
		t.Fatalf("restarted agent: jobs %+v, drain %+v; want the job, still waited for", r.Jobs, r.Drain)
	}
	// Without the state file the same restart would confirm at once.
	forgetful := start("")
	_ = forgetful.Drain(d)
	if got := forgetful.Report().Drain.State; got != report.SafeToTerminate {
		t.Fatalf("an agent with no state file, restarted: drain %q (this test's contrast is gone)", got)
	}
	for name, tt := range map[string]struct{ data, want string }{
		"corrupt":        {`{"node": "i-1", "jobs": [`, "agent-state.json"},
		"another node's": {`{"node": "i-2", "jobs": []}`, `node "i-2"'s, not "i-1"`},
		"a job twice":    {`{"node": "i-1", "jobs": [{"id": "j", "gpus": [0], "start": "2026-11-30T12:00:00Z"}, {"id": "j", "gpus": [0], "start": "2026-11-30T12:00:00Z"}]}`, `jobs[1].id: job "j" listed twice`},
		"no start":       {`{"node": "i-1", "jobs": [{"id": "j", "gpus": [0]}]}`, "jobs[0].start: missing"},
		"unknown field":  {`{"node": "i-1", "jobz": []}`, "jobz"},
	} {
		bad := filepath.Join(t.TempDir(), "agent-state.json")
		_ = os.WriteFile(bad, []byte(tt.data), 0o600)
		if _, err := New(Config{Node: "i-1", StateFile: bad}); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: %v, want %q", name, err, tt.want)
		}
	}
	// Restarted mid-drain, with a checkpoint file written just before the
	// drain while it was down, on a file system whose clock is ahead: the
	// first scan after the restart counts nothing from before the drain.
	wdir := t.TempDir()
	wpath := filepath.Join(t.TempDir(), "agent-state.json")
	w := start(wpath)
	if err := w.RegisterWatched("watched", []int{0}, []int{os.Getpid()}, filepath.Join(wdir, "*.pt")); err != nil {
		t.Fatal(err)
	}
	f := filepath.Join(wdir, "step-9.pt")
	_ = os.WriteFile(f, []byte("w"), 0o600)
	stamp := c.t.Add(40 * time.Second) // written 6 s before the drain, 46 s ahead
	_ = os.Chtimes(f, stamp, stamp)
	c.t = c.t.Add(6 * time.Second)
	wd := &report.DrainRequest{ID: "wd", Since: c.t, Deadline: c.t.Add(20 * time.Minute), Signal: "SIGUSR1"}
	c.t = c.t.Add(4 * time.Second)
	back := start(wpath)
	_ = back.Drain(wd)
	for range 4 {
		c.t = c.t.Add(10 * time.Second)
		back.Tick()
	}
	if r := back.Report(); r.Drain.State != report.Draining {
		t.Errorf("restarted agent: drain %q, checkpoint %v: a file from before the drain counted", r.Drain.State, r.Jobs[0].LastCheckpoint)
	}
	// Jobs of another boot, or whose processes are gone, are not loaded.
	bootFile := filepath.Join(t.TempDir(), "agent-state.json")
	_ = os.WriteFile(bootFile, []byte(`{"node": "i-1", "boot": "another-boot", "jobs": [{"id": "j", "gpus": [0], "pids": [`+strconv.Itoa(os.Getpid())+`], "start": "2026-11-30T12:00:00Z"}]}`), 0o600)
	if r := start(bootFile).Report(); len(r.Jobs) != 0 {
		t.Errorf("jobs %+v from before a reboot", r.Jobs)
	}
	// A job whose process ran when it registered, and ended while the
	// agent was down: the restarted agent (syscall.Kill) looks for it.
	running := func(int, syscall.Signal) error { return nil }
	before, err := New(Config{Node: "i-1", Now: c.now, StateFile: path, Signal: running})
	if err != nil {
		t.Fatal(err)
	}
	if err := before.Register("gone", []int{0}, []int{999999}); err != nil {
		t.Fatal(err)
	}
	again, err := New(Config{Node: "i-1", Now: c.now, StateFile: path})
	if err != nil {
		t.Fatal(err)
	}
	if r := again.Report(); slices.ContainsFunc(r.Jobs, func(j report.Job) bool { return j.ID == "gone" }) || len(r.Jobs) != 1 {
		t.Errorf("jobs %+v: a job whose process ended while the agent was down is loaded", r.Jobs)
	}
	// A job that ended is forgotten across a restart too.
	_ = b.Unregister("train")
	if r := start(path).Report(); len(r.Jobs) != 0 {
		t.Fatalf("jobs %+v after the job ended and a restart", r.Jobs)
	}
}

// TestPatternAddedMidDrain: a running job that registers again during a
// drain, now with a checkpoint glob, after writing its checkpoint: what
// its first scan finds does not count (it may predate the drain), and the
// job is asked again; the file it then writes completes the drain.
func TestPatternAddedMidDrain(t *testing.T) {
	dir := t.TempDir()
	c := &clock{time.Now()}
	a, signals := countingAgent(t, c)
	_ = a.Register("train", []int{0}, []int{os.Getpid()})
	_ = a.Drain(&report.DrainRequest{ID: "d", Since: c.t, Deadline: c.t.Add(20 * time.Minute), Signal: "SIGUSR1"})
	c.t = c.t.Add(30 * time.Second)
	_ = os.WriteFile(filepath.Join(dir, "a.pt"), []byte("w"), 0o600)
	if err := a.RegisterWatched("train", []int{0}, []int{os.Getpid()}, filepath.Join(dir, "*.pt")); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		c.t = c.t.Add(10 * time.Second)
		a.Tick()
	}
	if r := a.Report(); r.Drain.State != report.Draining || signals() != 2 {
		t.Fatalf("drain %q, %d signals: want the file of the first scan not counted and the job asked again", r.Drain.State, signals())
	}
	c.t = c.t.Add(10 * time.Second)
	b := filepath.Join(dir, "b.pt")
	_ = os.WriteFile(b, []byte("w"), 0o600)
	_ = os.Chtimes(b, c.t, c.t)
	for range 2 {
		c.t = c.t.Add(10 * time.Second)
		a.Tick()
	}
	if got := a.Report().Drain.State; got != report.SafeToTerminate {
		t.Fatalf("state %q after the checkpoint asked for", got)
	}
}
