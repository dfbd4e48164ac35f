package spot

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fleetcast/autoscaler/agent/report"
)

// gceMetadata is a fake of Compute Engine's metadata server: the real
// path, and the Metadata-Flavor: Google header each way (a request
// without it is refused with 403, as the real server does). No maintained
// mock of it exists.
type gceMetadata struct {
	mu       sync.Mutex
	body     string
	noFlavor bool // answer without the header
}

func (m *gceMetadata) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if r.Header.Get("Metadata-Flavor") != "Google" {
		http.Error(w, "Missing Metadata-Flavor:Google header.", http.StatusForbidden)
		return
	}
	if r.URL.Path != "/computeMetadata/v1/"+GCEPreemptedPath {
		http.NotFound(w, r)
		return
	}
	if !m.noFlavor {
		w.Header().Set("Metadata-Flavor", "Google")
	}
	w.Write([]byte(m.body)) //nolint:errcheck // a test server
}

func (m *gceMetadata) set(body string, noFlavor bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.body, m.noFlavor = body, noFlavor
}

// TestGCE: a preempted VM's notice, its deadline 30 s after it was first
// seen and kept there, and nothing before or after; bad answers are errors.
func TestGCE(t *testing.T) {
	md := &gceMetadata{body: "FALSE"}
	srv := httptest.NewServer(md)
	defer srv.Close()
	clock := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	g := &GCE{Endpoint: srv.URL + "/computeMetadata/v1/", Now: func() time.Time { return clock }}
	ctx := context.Background()
	poll := func() []report.Notice {
		t.Helper()
		ns, err := g.Poll(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return ns
	}
	if ns := poll(); len(ns) != 0 {
		t.Fatalf("not preempted: notices %+v", ns)
	}
	md.set("TRUE", false)
	want := report.Notice{Kind: report.Interruption, Action: "stop", Time: clock.Add(GCENotice)}
	if ns := poll(); len(ns) != 1 || !same(ns[0], want) {
		t.Fatalf("preempted: notices %+v; want %+v", ns, want)
	}
	clock = clock.Add(5 * time.Second)
	if ns := poll(); len(ns) != 1 || !same(ns[0], want) {
		t.Fatalf("preempted, polled again: %+v; want the same deadline %v", ns, want.Time)
	}
	md.set("FALSE", false)
	if ns := poll(); len(ns) != 0 {
		t.Fatalf("no longer preempted: %+v", ns)
	}
	for _, tt := range []struct {
		body     string
		noFlavor bool
		want     string
	}{
		{"maybe", false, `"maybe": want TRUE or FALSE`},
		{"TRUE", true, "no Metadata-Flavor: Google header"},
	} {
		md.set(tt.body, tt.noFlavor)
		if ns, err := g.Poll(ctx); err == nil || len(ns) != 0 || !strings.Contains(err.Error(), tt.want) || !strings.Contains(err.Error(), GCEPreemptedPath) {
			t.Errorf("answer %q (no flavor %v): %+v, %v; want an error naming the path, with %q", tt.body, tt.noFlavor, ns, err, tt.want)
		}
	}
	// The request must carry the header: the fake refuses it otherwise,
	// as does the real server.
	req, _ := http.NewRequest(http.MethodGet, srv.URL+"/computeMetadata/v1/"+GCEPreemptedPath, nil)
	if resp, err := srv.Client().Do(req); err != nil || resp.StatusCode != http.StatusForbidden {
		t.Fatalf("a request without the header: %v %v; want 403", resp, err)
	}
}

// TestWatcherGCE: the watcher delivers a GCE preemption once, and says
// when it is withdrawn.
func TestWatcherGCE(t *testing.T) {
	md := &gceMetadata{body: "TRUE"}
	srv := httptest.NewServer(md)
	defer srv.Close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var mu sync.Mutex
	var got []report.Notice
	gone := make(chan report.NoticeKind, 1)
	w := &Watcher{Source: &GCE{Endpoint: srv.URL + "/computeMetadata/v1/"}, Interval: 10 * time.Millisecond,
		Gone: func(k report.NoticeKind) { gone <- k }}
	go w.Run(ctx, func(n report.Notice) { //nolint:errcheck // ends with ctx
		mu.Lock()
		got = append(got, n)
		mu.Unlock()
		md.set("FALSE", false)
	})
	select {
	case k := <-gone:
		if k != report.Interruption {
			t.Fatalf("withdrawn %v", k)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the preemption was never delivered and withdrawn")
	}
	mu.Lock()
	defer mu.Unlock()
	if len(got) != 1 || got[0].Kind != report.Interruption {
		t.Fatalf("delivered %+v; want one interruption", got)
	}
}
