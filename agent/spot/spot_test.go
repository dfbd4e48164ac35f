package spot_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/ec2/imds"
	"github.com/hashicorp/go-hclog"

	"github.com/fleetcast/autoscaler/agent/report"
	"github.com/fleetcast/autoscaler/agent/spot"
	"github.com/fleetcast/autoscaler/internal/metadatamock"
)

// Times handed to the mock and expected back verbatim.
const (
	when   = "2030-01-02T03:04:05Z" // instance-action time (-t)
	notice = "2030-01-02T03:00:00Z" // rebalance noticeTime (-r)
)

func at(t *testing.T, s string) time.Time {
	t.Helper()
	v, err := time.Parse(time.RFC3339, s)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func sameNotices(a, b []report.Notice) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i].Kind != b[i].Kind || a[i].Action != b[i].Action || !a[i].Time.Equal(b[i].Time) {
			return false
		}
	}
	return true
}

// client is the SDK's IMDS client for endpoint, as an agent would make it.
func client(endpoint string, opts ...func(*imds.Options)) *imds.Client {
	return imds.New(imds.Options{Endpoint: endpoint}, opts...)
}

// noRetries makes a failing request fail at once: by default the SDK
// tries 3 times, 1 s apart, so a poll of an unreachable IMDS takes 4-6 s.
func noRetries(o *imds.Options) { o.Retryer = aws.NopRetryer{} }

// eventually waits up to d for cond, failing the test with what otherwise.
func eventually(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("after %v: %s", d, what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// logBuffer is a logger for Run whose output the test reads.
type logBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *logBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *logBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

func (b *logBuffer) count(s string) int { return strings.Count(b.String(), s) }

func (b *logBuffer) logger() hclog.Logger {
	return hclog.New(&hclog.LoggerOptions{Output: b, Level: hclog.Debug})
}

// collector gathers what Run delivers.
type collector struct {
	mu      sync.Mutex
	notices []report.Notice
}

func (c *collector) on(n report.Notice) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.notices = append(c.notices, n)
}

func (c *collector) got() []report.Notice {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]report.Notice(nil), c.notices...)
}

func (c *collector) count(k report.NoticeKind) int {
	n := 0
	for _, x := range c.got() {
		if x.Kind == k {
			n++
		}
	}
	return n
}

// run starts w.Run; stop cancels it and returns its error, failing the
// test if Run does not return promptly.
func run(t *testing.T, w *spot.Watcher, on func(report.Notice)) (stop func() error) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx, on) }()
	t.Cleanup(cancel)
	return func() error {
		cancel()
		select {
		case err := <-done:
			return err
		case <-time.After(5 * time.Second):
			t.Fatal("Run did not return within 5 s of its context's cancel")
			return nil
		}
	}
}

// transport sits between the SDK and the mock: it counts the metadata
// requests and, while down, fails them as an unreachable IMDS would,
// without a hand-written server.
type transport struct {
	down     atomic.Bool
	requests atomic.Int64 // GETs of /latest/meta-data/...
	failed   atomic.Int64 // requests failed while down
}

func (tr *transport) RoundTrip(r *http.Request) (*http.Response, error) {
	if tr.down.Load() {
		tr.failed.Add(1)
		return nil, &net.OpError{Op: "dial", Net: "tcp", Err: errors.New("connect: connection refused (IMDS down)")}
	}
	if r.Method == http.MethodGet && strings.HasPrefix(r.URL.Path, "/latest/meta-data/") {
		tr.requests.Add(1)
	}
	return http.DefaultTransport.RoundTrip(r)
}

func (tr *transport) use(o *imds.Options) { o.HTTPClient = &http.Client{Transport: tr} }

// TestPollNothingBeforeTheDelayThenTheInterruption: -d 3 makes the mock
// answer 404 for spot/instance-action for 3 s from its start (counted in
// whole seconds: more than 2 s of real time), then a terminate notice due
// 2 minutes from each request.
func TestPollNothingBeforeTheDelayThenTheInterruption(t *testing.T) {
	started := time.Now()
	endpoint := metadatamock.Start(t, "spot", "--imdsv2", "--mock-delay-sec", "3", "--rebalance-delay-sec", "3600")
	ready := time.Now() // the mock's delay runs from its start, before this
	w := &spot.Watcher{Client: client(endpoint)}
	ctx := context.Background()

	got, err := w.Poll(ctx)
	if err != nil {
		t.Fatalf("Poll before the delay: %v", err)
	}
	// The mock started after `started`; under 2 s since then it has
	// certainly not reached its 3 s.
	if elapsed := time.Since(started); elapsed < 2*time.Second {
		if got != nil {
			t.Fatalf("Poll %v after the mock's start, before its 3 s delay: %+v, want nil", elapsed, got)
		}
	} else {
		t.Logf("the mock took %v to start; not checking the first poll is empty", elapsed)
	}

	var before, after time.Time
	for got == nil {
		if time.Since(ready) > 8*time.Second { // on a busy machine the mock may take longer than that to start
			t.Fatal("no interruption 8 s after a mock with a 3 s delay answered")
		}
		time.Sleep(100 * time.Millisecond)
		before = time.Now()
		if got, err = w.Poll(ctx); err != nil {
			t.Fatalf("Poll: %v", err)
		}
		after = time.Now()
	}
	if since := before.Sub(started); since < 2*time.Second {
		t.Errorf("interruption %v after the mock's start, want after its 3 s delay", since)
	}
	if len(got) != 1 || got[0].Kind != report.Interruption || got[0].Action != "terminate" {
		t.Fatalf("Poll after the delay: %+v, want one terminate interruption", got)
	}
	// The mock's deadline is the request time + 2 min, in whole seconds.
	lo, hi := before.Add(2*time.Minute-time.Second), after.Add(2*time.Minute)
	if d := got[0].Time; d.Before(lo) || d.After(hi) {
		t.Errorf("deadline %v, want 2 min after the request: between %v and %v", d, lo, hi)
	}
}

// TestPollAnnounced runs the mock with each kind of announcement and checks
// that Poll returns exactly what it was told to serve.
func TestPollAnnounced(t *testing.T) {
	interruption := func(action string) report.Notice {
		return report.Notice{Kind: report.Interruption, Action: action, Time: at(t, when)}
	}
	rebalance := report.Notice{Kind: report.Rebalance, Time: at(t, notice)}
	for _, tc := range []struct {
		name string
		args []string
		want []report.Notice
	}{
		{"nothing yet", []string{"spot", "--imdsv2", "-d", "3600", "--rebalance-delay-sec", "3600"}, nil},
		{"nothing before the trigger times", []string{"spot", "--imdsv2", "--mock-trigger-time", "2099-01-01T00:00:00Z", "--rebalance-trigger-time", "2099-01-01T00:00:00Z"}, nil},
		{"terminate at -t", []string{"spot", "--imdsv2", "-t", when, "--rebalance-delay-sec", "3600"}, []report.Notice{interruption("terminate")}},
		{"stop", []string{"spot", "--imdsv2", "-a", "stop", "-t", when, "--rebalance-delay-sec", "3600"}, []report.Notice{interruption("stop")}},
		{"hibernate", []string{"spot", "--imdsv2", "-a", "hibernate", "-t", when, "--rebalance-delay-sec", "3600"}, []report.Notice{interruption("hibernate")}},
		{"rebalance at -r", []string{"spot", "--imdsv2", "-r", notice, "-d", "3600"}, []report.Notice{rebalance}},
		{"both", []string{"spot", "--imdsv2", "-t", when, "-r", notice}, []report.Notice{interruption("terminate"), rebalance}},
		{"both, IMDSv1 allowed too", []string{"spot", "-t", when, "-r", notice}, []report.Notice{interruption("terminate"), rebalance}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := &spot.Watcher{Client: client(metadatamock.Start(t, tc.args...))}
			got, err := w.Poll(context.Background())
			if err != nil {
				t.Fatalf("Poll: %v", err)
			}
			if !sameNotices(got, tc.want) || (tc.want == nil && got != nil) {
				t.Errorf("Poll: %+v\nwant %+v", got, tc.want)
			}
		})
	}
}

// TestRunDeliversEachNoticeOnce: the mock serves the same two notices on
// every poll; Run hands each to on once.
func TestRunDeliversEachNoticeOnce(t *testing.T) {
	tr := &transport{}
	endpoint := metadatamock.Start(t, "spot", "--imdsv2", "-t", when, "-r", notice)
	var log logBuffer
	var c collector
	w := &spot.Watcher{Client: client(endpoint, tr.use), Interval: 100 * time.Millisecond, Log: log.logger()}
	stop := run(t, w, c.on)

	eventually(t, 5*time.Second, "Run did not poll 10 times", func() bool { return tr.requests.Load() >= 2*10 })
	if err := stop(); !errors.Is(err, context.Canceled) {
		t.Errorf("Run returned %v, want context.Canceled", err)
	}
	want := []report.Notice{
		{Kind: report.Interruption, Action: "terminate", Time: at(t, when)},
		{Kind: report.Rebalance, Time: at(t, notice)},
	}
	if got := c.got(); !sameNotices(got, want) {
		t.Errorf("delivered over %d polls: %+v\nwant once each: %+v", tr.requests.Load()/2, got, want)
	}
	if n := log.count("[WARN]"); n != 0 {
		t.Errorf("%d warnings, want none:\n%s", n, log.String())
	}
}

// TestRunDeliversAChangedNotice: without -t the mock's deadline is each
// request's time + 2 min, to the second, so it moves once a second; Run
// delivers each new deadline once, not each poll.
func TestRunDeliversAChangedNotice(t *testing.T) {
	tr := &transport{}
	endpoint := metadatamock.Start(t, "spot", "--imdsv2", "-r", notice)
	var c collector
	w := &spot.Watcher{Client: client(endpoint, tr.use), Interval: 100 * time.Millisecond}
	stop := run(t, w, c.on)

	eventually(t, 6*time.Second, "no third deadline", func() bool { return c.count(report.Interruption) >= 3 })
	stop()
	polls := tr.requests.Load() / 2
	var deadlines []time.Time
	for _, n := range c.got() {
		switch n.Kind {
		case report.Interruption:
			if l := len(deadlines); l > 0 && !n.Time.After(deadlines[l-1]) {
				t.Errorf("deadline %v delivered after %v: want each new deadline once", n.Time, deadlines[l-1])
			}
			deadlines = append(deadlines, n.Time)
		case report.Rebalance:
			if !n.Time.Equal(at(t, notice)) {
				t.Errorf("rebalance %+v, want notice time %s", n, notice)
			}
		}
	}
	if n := c.count(report.Rebalance); n != 1 {
		t.Errorf("%d rebalance notices, want the unchanged one once", n)
	}
	if int64(len(deadlines)) >= polls {
		t.Errorf("%d interruptions over %d polls: want a new one only when the deadline moves", len(deadlines), polls)
	}
}

// fakeIMDS answers the two spot paths with given bodies. It is the one
// hand-written IMDS server in these tests: the mock cannot serve malformed
// JSON. It hands out a token and insists on it, as IMDSv2 does.
type fakeIMDS struct {
	mu     sync.Mutex
	bodies map[string]string // by path under /latest/meta-data/; missing: 404
	gets   atomic.Int64      // GETs of spot/instance-action
}

func (f *fakeIMDS) set(path, body string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.bodies[path] = body
}

func (f *fakeIMDS) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path == "/latest/api/token" && r.Method == http.MethodPut {
		w.Header().Set("X-Aws-Ec2-Metadata-Token-Ttl-Seconds", r.Header.Get("X-Aws-Ec2-Metadata-Token-Ttl-Seconds"))
		fmt.Fprint(w, "token")
		return
	}
	if r.Header.Get("X-Aws-Ec2-Metadata-Token") != "token" {
		http.Error(w, "no token", http.StatusUnauthorized)
		return
	}
	path := strings.TrimPrefix(r.URL.Path, "/latest/meta-data/")
	if path == spot.InstanceActionPath {
		f.gets.Add(1)
	}
	f.mu.Lock()
	body, ok := f.bodies[path]
	f.mu.Unlock()
	if !ok {
		http.NotFound(w, r)
		return
	}
	fmt.Fprint(w, body)
}

func newFake(t *testing.T, bodies map[string]string) (*fakeIMDS, string) {
	f := &fakeIMDS{bodies: bodies}
	if f.bodies == nil {
		f.bodies = map[string]string{}
	}
	srv := httptest.NewServer(f)
	t.Cleanup(srv.Close)
	return f, srv.URL
}

func TestPollMalformed(t *testing.T) {
	const ia, rb = spot.InstanceActionPath, spot.RebalancePath
	valid := `{"action":"terminate","time":"` + when + `"}`
	wantValid := []report.Notice{{Kind: report.Interruption, Action: "terminate", Time: at(t, when)}}
	for _, tc := range []struct {
		name    string
		bodies  map[string]string
		want    []report.Notice
		wantErr []string // all in the error; none: no error
	}{
		{"bad time", map[string]string{ia: `{"action":"terminate","time":"x"}`}, nil,
			[]string{`spot/instance-action: time "x": want an RFC 3339 time`}},
		{"time without offset", map[string]string{ia: `{"action":"terminate","time":"2020-01-07T01:03:47"}`}, nil,
			[]string{`spot/instance-action: time "2020-01-07T01:03:47": want an RFC 3339 time`}},
		{"time missing", map[string]string{ia: `{"action":"terminate"}`}, nil,
			[]string{`spot/instance-action: time missing: want an RFC 3339 time`}},
		{"time a number", map[string]string{ia: `{"action":"terminate","time":1578358627}`}, nil,
			[]string{`spot/instance-action: time 1578358627: want an RFC 3339 time`}},
		{"unknown action", map[string]string{ia: `{"action":"reboot","time":"` + when + `"}`}, nil,
			[]string{`spot/instance-action: action "reboot": want "terminate", "stop" or "hibernate"`}},
		{"action in capitals", map[string]string{ia: `{"action":"Terminate","time":"` + when + `"}`}, nil,
			[]string{`spot/instance-action: action "Terminate": want`}},
		{"action null", map[string]string{ia: `{"action":null,"time":"` + when + `"}`}, nil,
			[]string{`spot/instance-action: action null: want "terminate"`}},
		{"action missing", map[string]string{ia: `{"time":"` + when + `"}`}, nil,
			[]string{`spot/instance-action: action missing: want "terminate"`}},
		{"html", map[string]string{ia: `<html><body>oops</body></html>`}, nil,
			[]string{`spot/instance-action: "<html><body>oops</body></html>": want a JSON object`}},
		{"empty", map[string]string{ia: ``}, nil, []string{`spot/instance-action: "": want a JSON object`}},
		{"null", map[string]string{ia: `null`}, nil, []string{`spot/instance-action: "null": want a JSON object`}},
		{"array", map[string]string{ia: `[` + valid + `]`}, nil, []string{`spot/instance-action: `, `want a JSON object`}},
		{"truncated", map[string]string{ia: `{"action":"terminate","ti`}, nil, []string{`spot/instance-action: `, `want a JSON object`}},
		{"two objects", map[string]string{ia: valid + valid}, nil,
			[]string{`spot/instance-action: `, `want a single JSON object, with nothing after it`}},
		{"bad notice time", map[string]string{rb: `{"noticeTime":"soon"}`}, nil,
			[]string{`events/recommendations/rebalance: noticeTime "soon": want an RFC 3339 time`}},
		{"notice time missing", map[string]string{rb: `{"time":"` + notice + `"}`}, nil,
			[]string{`events/recommendations/rebalance: noticeTime missing: want an RFC 3339 time`}},
		{"a bad rebalance does not hide the interruption", map[string]string{ia: valid, rb: `{"noticeTime":5}`}, wantValid,
			[]string{`events/recommendations/rebalance: noticeTime 5: want an RFC 3339 time`}},
		{"both bad", map[string]string{ia: `{}`, rb: `{}`}, nil,
			[]string{`spot/instance-action: action missing`, `events/recommendations/rebalance: noticeTime missing`}},
		// Not errors: fields AWS may add later, and any RFC 3339 time.
		{"unknown fields ignored", map[string]string{ia: `{"action":"terminate","time":"` + when + `","reason":"capacity"}`}, wantValid, nil},
		{"offset and fraction", map[string]string{ia: `{"action":"stop","time":"2030-01-02T05:04:05.5+02:00"}`},
			[]report.Notice{{Kind: report.Interruption, Action: "stop", Time: at(t, "2030-01-02T03:04:05.5Z")}}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, endpoint := newFake(t, tc.bodies)
			w := &spot.Watcher{Client: client(endpoint)}
			got, err := w.Poll(context.Background())
			if !sameNotices(got, tc.want) {
				t.Errorf("Poll: %+v, want %+v", got, tc.want)
			}
			if tc.wantErr == nil {
				if err != nil {
					t.Errorf("Poll: %v, want no error", err)
				}
				return
			}
			if err == nil {
				t.Fatalf("Poll: no error, want %q", tc.wantErr)
			}
			for _, s := range tc.wantErr {
				if !strings.Contains(err.Error(), s) {
					t.Errorf("Poll: %v\nwant the error to contain %q", err, s)
				}
			}
		})
	}
}

// TestRunKeepsGoingAfterMalformedAnswers: a streak of bad answers is one
// warning; Run delivers the notice once the answers are good, warns again
// for a new streak, and delivers a changed notice after it.
func TestRunKeepsGoingAfterMalformedAnswers(t *testing.T) {
	f, endpoint := newFake(t, map[string]string{spot.InstanceActionPath: `{"action":"terminate","time":"x"}`})
	var log logBuffer
	var c collector
	w := &spot.Watcher{Client: client(endpoint), Interval: 20 * time.Millisecond, Log: log.logger()}
	stop := run(t, w, c.on)
	polls := func(n int64) func() bool {
		base := f.gets.Load()
		return func() bool { return f.gets.Load() >= base+n }
	}

	eventually(t, 5*time.Second, "no polls", polls(5))
	if got := c.got(); len(got) != 0 {
		t.Fatalf("delivered %+v from malformed answers", got)
	}
	f.set(spot.InstanceActionPath, `{"action":"terminate","time":"`+when+`"}`)
	eventually(t, 5*time.Second, "no notice once the answer is good", func() bool { return len(c.got()) == 1 })
	eventually(t, 5*time.Second, "no polls", polls(3))
	f.set(spot.InstanceActionPath, `{"action":"reboot","time":"`+when+`"}`)
	eventually(t, 5*time.Second, "no polls", polls(5))
	f.set(spot.InstanceActionPath, `{"action":"stop","time":"`+when+`"}`)
	eventually(t, 5*time.Second, "no changed notice", func() bool { return len(c.got()) == 2 })
	if err := stop(); !errors.Is(err, context.Canceled) {
		t.Errorf("Run returned %v, want context.Canceled", err)
	}

	want := []report.Notice{
		{Kind: report.Interruption, Action: "terminate", Time: at(t, when)},
		{Kind: report.Interruption, Action: "stop", Time: at(t, when)},
	}
	if got := c.got(); !sameNotices(got, want) {
		t.Errorf("delivered %+v, want %+v", got, want)
	}
	out := log.String()
	if n := log.count("[WARN]"); n != 2 {
		t.Errorf("%d warnings, want one for each of the 2 streaks of bad answers:\n%s", n, out)
	}
	for _, s := range []string{`time \"x\": want an RFC 3339 time`, `action \"reboot\": want`, "answers again"} {
		if !strings.Contains(out, s) {
			t.Errorf("log lacks %s:\n%s", s, out)
		}
	}
}

func TestPollUnreachable(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	endpoint := "http://" + l.Addr().String()
	l.Close() // nothing listens there now

	w := &spot.Watcher{Client: client(endpoint, noRetries)}
	got, err := w.Poll(context.Background())
	if err == nil {
		t.Fatalf("Poll of %s, where nothing listens: %+v and no error", endpoint, got)
	}
	if got != nil {
		t.Errorf("Poll of an unreachable IMDS: %+v, want no notices", got)
	}
	for _, s := range []string{spot.InstanceActionPath + ": ", spot.RebalancePath + ": ", "connection refused"} {
		if !strings.Contains(err.Error(), s) {
			t.Errorf("Poll: %v\nwant the error to contain %q", err, s)
		}
	}
}

func TestPollWithoutClient(t *testing.T) {
	if _, err := (&spot.Watcher{}).Poll(context.Background()); err == nil {
		t.Fatal("Poll without a Client: no error")
	}
}

// TestRunSurvivesAnOutage: Run against an IMDS that cannot be reached
// warns once, keeps polling, and delivers the notice when the mock can be
// reached again.
func TestRunSurvivesAnOutage(t *testing.T) {
	tr := &transport{}
	tr.down.Store(true)
	endpoint := metadatamock.Start(t, "spot", "--imdsv2", "-t", when, "--rebalance-delay-sec", "3600")
	var log logBuffer
	var c collector
	w := &spot.Watcher{Client: client(endpoint, tr.use, noRetries), Interval: 50 * time.Millisecond, Log: log.logger()}
	stop := run(t, w, c.on)

	eventually(t, 5*time.Second, "Run stopped polling while IMDS was down", func() bool { return tr.failed.Load() >= 10 })
	if got := c.got(); len(got) != 0 {
		t.Fatalf("delivered %+v while IMDS was down", got)
	}
	tr.down.Store(false)
	eventually(t, 5*time.Second, "no notice after IMDS came back", func() bool { return len(c.got()) > 0 })
	eventually(t, 5*time.Second, "Run stopped polling", func() bool { return tr.requests.Load() >= 6 })
	if err := stop(); !errors.Is(err, context.Canceled) {
		t.Errorf("Run returned %v, want context.Canceled", err)
	}

	want := []report.Notice{{Kind: report.Interruption, Action: "terminate", Time: at(t, when)}}
	if got := c.got(); !sameNotices(got, want) {
		t.Errorf("delivered %+v, want %+v", got, want)
	}
	out := log.String()
	if n := log.count("[WARN]"); n != 1 {
		t.Errorf("%d warnings over %d failed requests, want 1:\n%s", n, tr.failed.Load(), out)
	}
	for _, s := range []string{"connection refused (IMDS down)", "answers again"} {
		if !strings.Contains(out, s) {
			t.Errorf("log lacks %q:\n%s", s, out)
		}
	}
}

// TestRunStopsWhilePolling: cancelling the context ends Run even in the
// middle of a poll that the SDK would otherwise retry for seconds, and the
// poll cut short is not reported as a failure.
func TestRunStopsWhilePolling(t *testing.T) {
	tr := &transport{}
	tr.down.Store(true)
	var log logBuffer
	// Default retries, up to 1 s apart: the first poll takes seconds.
	w := &spot.Watcher{Client: client("http://127.0.0.1:1", tr.use), Log: log.logger()}
	stop := run(t, w, func(n report.Notice) { t.Errorf("delivered %+v", n) })
	eventually(t, 5*time.Second, "no request", func() bool { return tr.failed.Load() > 0 })
	began := time.Now()
	if err := stop(); !errors.Is(err, context.Canceled) {
		t.Errorf("Run returned %v, want context.Canceled", err)
	}
	if d := time.Since(began); d > time.Second {
		t.Errorf("Run took %v to return after cancel", d)
	}
	if out := log.String(); out != "" {
		t.Errorf("Run logged a poll cut short by its cancel:\n%s", out)
	}
}

// TestRunDeliversWhatAPartlyFailedPollRead: a malformed rebalance answer
// does not hold back the interruption read in the same poll.
func TestRunDeliversWhatAPartlyFailedPollRead(t *testing.T) {
	_, endpoint := newFake(t, map[string]string{
		spot.InstanceActionPath: `{"action":"terminate","time":"` + when + `"}`,
		spot.RebalancePath:      `{"noticeTime":"soon"}`,
	})
	var log logBuffer
	var c collector
	w := &spot.Watcher{Client: client(endpoint), Interval: 20 * time.Millisecond, Log: log.logger()}
	stop := run(t, w, c.on)
	eventually(t, 5*time.Second, "no notice", func() bool { return len(c.got()) > 0 })
	stop()
	want := []report.Notice{{Kind: report.Interruption, Action: "terminate", Time: at(t, when)}}
	if got := c.got(); !sameNotices(got, want) {
		t.Errorf("delivered %+v, want %+v", got, want)
	}
	if n := log.count("[WARN]"); n != 1 {
		t.Errorf("%d warnings, want 1 for the bad rebalance answer:\n%s", n, log.String())
	}
}

// TestRunPollsAtOnceThenEveryInterval: the first poll does not wait for
// the interval, and a zero Interval means DefaultInterval (5 s), not a
// busy loop.
func TestRunPollsAtOnceThenEveryInterval(t *testing.T) {
	tr := &transport{}
	endpoint := metadatamock.Start(t, "spot", "--imdsv2", "-t", when, "--rebalance-delay-sec", "3600")
	var c collector
	w := &spot.Watcher{Client: client(endpoint, tr.use)}
	stop := run(t, w, c.on)
	eventually(t, 2*time.Second, "the first poll waited", func() bool { return len(c.got()) == 1 })
	time.Sleep(300 * time.Millisecond)
	stop()
	if n := tr.requests.Load(); n != 2 {
		t.Errorf("%d requests in the first 300 ms with Interval 0, want the 2 of one poll", n)
	}
}

// TestRunSaysWhenANoticeIsWithdrawn: a notice the service stops announcing
// (the instance resumed) is reported gone once, and a new one after it is
// delivered again. (The mock never withdraws one, so this runs on the
// hand-written server.)
func TestRunSaysWhenANoticeIsWithdrawn(t *testing.T) {
	f, endpoint := newFake(t, map[string]string{spot.InstanceActionPath: `{"action":"stop","time":"` + when + `"}`})
	var c collector
	var mu sync.Mutex
	var gone []report.NoticeKind
	w := &spot.Watcher{Client: client(endpoint, noRetries), Interval: 20 * time.Millisecond,
		Gone: func(k report.NoticeKind) { mu.Lock(); gone = append(gone, k); mu.Unlock() }}
	goneNow := func() []report.NoticeKind { mu.Lock(); defer mu.Unlock(); return slices.Clone(gone) }
	stop := run(t, w, c.on)
	eventually(t, 5*time.Second, "no notice", func() bool { return c.count(report.Interruption) == 1 })
	f.mu.Lock()
	delete(f.bodies, spot.InstanceActionPath)
	f.mu.Unlock()
	eventually(t, 5*time.Second, "the withdrawn notice not reported gone", func() bool { return len(goneNow()) == 1 })
	time.Sleep(100 * time.Millisecond)
	if g := goneNow(); len(g) != 1 || g[0] != report.Interruption {
		t.Fatalf("gone %v, want the interruption once", g)
	}
	f.set(spot.InstanceActionPath, `{"action":"stop","time":"`+when+`"}`)
	eventually(t, 5*time.Second, "the notice announced again not delivered", func() bool { return c.count(report.Interruption) == 2 })
	_ = stop()
}
