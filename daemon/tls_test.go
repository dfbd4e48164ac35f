package daemon

import (
	"crypto/tls"
	"crypto/x509"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/fleetcast/autoscaler/internal/testpki"
	"github.com/hashicorp/go-hclog"
)

// TestCertFilesReload: a renewed certificate is served without a
// restart; a pair that does not load keeps the last good one.
func TestCertFilesReload(t *testing.T) {
	dir := t.TempDir()
	first := testpki.New(t, dir)
	c, err := newCertFiles(first.CertFile, first.KeyFile, hclog.NewNullLogger())
	if err != nil {
		t.Fatal(err)
	}
	serial := func() string {
		t.Helper()
		got, err := c.get(nil)
		if err != nil {
			t.Fatal(err)
		}
		leaf, _ := x509.ParseCertificate(got.Certificate[0])
		return string(leaf.AuthorityKeyId)
	}
	before := serial()
	// A new CA and certificate written over the files.
	second := testpki.New(t, t.TempDir())
	for from, to := range map[string]string{second.CertFile: first.CertFile, second.KeyFile: first.KeyFile} {
		b, _ := os.ReadFile(from)
		if err := os.WriteFile(to, b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	c.checked = time.Time{}
	if after := serial(); after == before {
		t.Fatal("the renewed certificate was not loaded")
	}
	renewed := serial()
	// A key that does not match: the last good pair stays.
	other := testpki.New(t, t.TempDir())
	b, _ := os.ReadFile(other.KeyFile)
	os.WriteFile(first.KeyFile, b, 0o600)
	c.checked = time.Time{}
	if got := serial(); got != renewed {
		t.Fatal("a broken pair replaced the good one")
	}
	if _, err := newCertFiles(first.CertFile, filepath.Join(dir, "missing.key"), hclog.NewNullLogger()); err == nil || !strings.Contains(err.Error(), "missing.key") {
		t.Fatalf("a missing key: %v", err)
	}
	os.Chmod(second.KeyFile, 0o644)
	if _, err := newCertFiles(second.CertFile, second.KeyFile, hclog.NewNullLogger()); err == nil || !strings.Contains(err.Error(), "everyone may read it") {
		t.Fatalf("a key everyone may read: %v", err)
	}
	os.Chmod(second.KeyFile, 0o600)

	// Served: a client trusting the second CA connects.
	c, _ = newCertFiles(second.CertFile, second.KeyFile, hclog.NewNullLogger())
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") })}
	go srv.Serve(tls.NewListener(ln, c.config()))
	defer srv.Close()
	client := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: second.Pool}}}
	resp, err := client.Get("https://" + ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
}
