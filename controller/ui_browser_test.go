package controller

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/fleetcast/autoscaler/apiauth"
)

// chromium is Debian's headless browser, as the browser test runs it (as
// root it needs --no-sandbox), with a fresh profile in dir.
func chromium(t *testing.T, bin, dir string, args ...string) (stdout, stderr string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	base := []string{"--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking", "--no-first-run",
		"--disable-extensions", "--hide-scrollbars", "--enable-logging=stderr", "--user-data-dir=" + dir}
	cmd := exec.CommandContext(ctx, bin, append(base, args...)...)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	if err := cmd.Run(); err != nil {
		t.Fatalf("chromium %s: %v\n%s", strings.Join(args, " "), err, errOut.String())
	}
	return out.String(), errOut.String()
}

// TestUIBrowser: Debian's chromium loads the page from a test
// controller, off loopback with a session from the login form, runs its
// script under its Content-Security-Policy (which refreshes its content
// in place), and shows the JSON API's figures; screenshots of it, at a
// desktop's size and a phone's, are saved as artefacts (under
// $FLEETCAST_ARTEFACTS when set). Without chromium on PATH it is skipped,
// unless FLEETCAST_REQUIRE_CHROMIUM=1 (CI).
func TestUIBrowser(t *testing.T) {
	bin, err := exec.LookPath("chromium")
	if err != nil {
		if os.Getenv("FLEETCAST_REQUIRE_CHROMIUM") == "1" {
			t.Fatal("FLEETCAST_REQUIRE_CHROMIUM=1, but there is no chromium on PATH (apt-get install chromium)")
		}
		t.Skip("no chromium on PATH: the browser test needs Debian's chromium (apt-get install chromium); CI sets FLEETCAST_REQUIRE_CHROMIUM=1")
	}
	r := newUIFleet(t, false)
	// The session a browser gets from the login form (TestUILoginForm
	// posts it as a browser does). Chromium takes no cookie on its
	// command line, so the server's front adds it to the browser's
	// requests of /ui, as its cookie jar would: the page it loads is the
	// one a logged-in browser gets off loopback.
	cookie := r.login(t, r.secrets[apiauth.Read])
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if req.URL.Path == "/ui" && req.Header.Get("Authorization") == "" {
			req.AddCookie(cookie)
		}
		r.h.ServeHTTP(w, req)
	}))
	defer srv.Close()
	api := func(path string) []byte {
		req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, srv.URL+path, nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Authorization", "Bearer "+r.secrets[apiauth.Read])
		resp, err := srv.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, err := io.ReadAll(resp.Body)
		if err != nil || resp.StatusCode != http.StatusOK {
			t.Fatalf("GET %s: %d %v %s", path, resp.StatusCode, err, body)
		}
		return body
	}

	// The DOM once the script has refreshed the content (virtual time
	// runs its 30-second timer at once).
	dom, logged := chromium(t, bin, t.TempDir(), "--virtual-time-budget=35000", "--dump-dom", srv.URL+"/ui")
	if strings.Contains(logged, "Content Security Policy") || strings.Contains(logged, "Content-Security-Policy") {
		t.Errorf("chromium refused part of the page under its CSP:\n%s", logged)
	}
	if !strings.Contains(dom, `data-refresh="on"`) {
		t.Errorf("the page's script did not run in chromium (blocked by its CSP?); its log:\n%s", logged)
	}
	if !strings.Contains(dom, `id="content" data-refreshed="`) {
		t.Errorf("the page's content was not refreshed in place; its log:\n%s", logged)
	}
	if !strings.Contains(dom, `action="/ui/logout"`) || strings.Contains(dom, `name="token"`) {
		t.Fatalf("chromium did not get the page with the session:\n%.2000s", dom)
	}
	uiCheckFigures(t, dom, api, uiMustShow...)

	dir := os.Getenv("FLEETCAST_ARTEFACTS")
	if dir == "" {
		dir = t.TempDir()
	} else if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, shot := range []struct{ name, size string }{{"ui-desktop.png", "1280,1800"}, {"ui-phone.png", "390,844"}} {
		path, err := filepath.Abs(filepath.Join(dir, shot.name))
		if err != nil {
			t.Fatal(err)
		}
		chromium(t, bin, t.TempDir(), "--screenshot="+path, "--window-size="+shot.size, srv.URL+"/ui")
		png, err := os.ReadFile(path)
		if err != nil || len(png) < 10<<10 || !bytes.HasPrefix(png, []byte("\x89PNG\r\n\x1a\n")) {
			t.Fatalf("screenshot %s: %d bytes, %v; want a PNG", path, len(png), err)
		}
		t.Logf("screenshot at %s: %s (%d KB)", shot.size, path, len(png)>>10)
	}
}
