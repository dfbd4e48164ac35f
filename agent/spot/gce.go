package spot

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/fleetcast/autoscaler/agent/report"
)

// GCE's metadata server, and what it says of preemption.
const (
	// GCEMetadataEndpoint is the metadata server's base URL on a Compute
	// Engine VM.
	GCEMetadataEndpoint = "http://metadata.google.internal/computeMetadata/v1/"
	// GCEPreemptedPath holds "TRUE" once Compute Engine has begun to
	// preempt the VM (a spot or preemptible VM), "FALSE" before.
	GCEPreemptedPath = "instance/preempted"
	// GCENotice is the warning Compute Engine gives before it stops a
	// preempted VM: about 30 seconds.
	GCENotice = 30 * time.Second
)

// GCE reads a Compute Engine VM's preemption notice from its metadata
// server (GCEPreemptedPath, with the Metadata-Flavor: Google header each
// way), as a Source for a Watcher. The notice's deadline is GCENotice
// after the poll that first saw it, and stays that until the VM is no
// longer preempted, so that Run delivers it once. A GCE is safe for
// concurrent use.
type GCE struct {
	// Endpoint is the metadata server's base URL; GCEMetadataEndpoint
	// when empty.
	Endpoint string
	// Client makes the requests; when nil, one with a 2-second timeout
	// that uses no proxy.
	Client *http.Client
	// Now is the clock; time.Now when nil.
	Now func() time.Time

	mu   sync.Mutex
	seen time.Time // when the preemption was first seen; zero if none
}

// defaultGCEClient reaches the metadata server directly, never through a
// proxy (HTTP_PROXY is for the outside world), as Google's own metadata
// client does.
var defaultGCEClient = &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{Proxy: nil}}

// GCEGet reads path (with its query) from the metadata server at endpoint
// (GCEMetadataEndpoint when empty), at most limit bytes, with client (one
// with a 2-second timeout and no proxy when nil): the Metadata-Flavor:
// Google header is sent, and an answer without it (not the metadata
// server), or not 200, is an error naming the path.
func GCEGet(ctx context.Context, client *http.Client, endpoint, path string, limit int64) ([]byte, error) {
	if endpoint == "" {
		endpoint = GCEMetadataEndpoint
	}
	if client == nil {
		client = defaultGCEClient
	}
	name, _, _ := strings.Cut(path, "?")
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimSuffix(endpoint, "/")+"/"+path, nil)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	req.Header.Set("Metadata-Flavor", "Google")
	resp, err := client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, limit))
	switch {
	case err != nil:
		return nil, fmt.Errorf("%s: reading the answer: %w", name, err)
	case resp.StatusCode != http.StatusOK:
		return nil, fmt.Errorf("%s: status %d: %s", name, resp.StatusCode, excerpt(body))
	case resp.Header.Get("Metadata-Flavor") != "Google":
		return nil, fmt.Errorf("%s: the answer has no Metadata-Flavor: Google header: not the metadata server", name)
	}
	return body, nil
}

// Poll reads GCEPreemptedPath once: an interruption notice while the VM is
// preempted, nothing before. An answer that is neither TRUE nor FALSE, or
// one not from a metadata server (no Metadata-Flavor: Google header), is
// an error naming the path, never a notice.
func (g *GCE) Poll(ctx context.Context) ([]report.Notice, error) {
	body, err := GCEGet(ctx, g.Client, g.Endpoint, GCEPreemptedPath, 256)
	if err != nil {
		return nil, err
	}
	now := time.Now
	if g.Now != nil {
		now = g.Now
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	switch strings.TrimSpace(string(body)) {
	case "FALSE":
		g.seen = time.Time{}
		return nil, nil
	case "TRUE":
		if g.seen.IsZero() {
			g.seen = now()
		}
		return []report.Notice{{Kind: report.Interruption, Action: "stop", Time: g.seen.Add(GCENotice)}}, nil
	}
	return nil, fmt.Errorf("%s: %s: want TRUE or FALSE", GCEPreemptedPath, excerpt(body))
}
