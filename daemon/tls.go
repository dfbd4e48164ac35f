package daemon

import (
	"crypto/sha256"
	"crypto/tls"
	"fmt"
	"os"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
)

// certFiles serves a certificate and key from files, read again when
// either changes (by their contents' hash, looked at no more than once a
// second, so a copy that keeps the old times counts too), so a renewed
// certificate needs no restart. A change that does not load (a key written
// before its certificate) keeps the last good pair and is logged. A key
// file everyone may read is refused.
type certFiles struct {
	cert, key string
	log       hclog.Logger

	mu      sync.Mutex
	current *tls.Certificate
	stamp   string
	checked time.Time
}

// newCertFiles loads the pair once; an error names the files.
func newCertFiles(cert, key string, log hclog.Logger) (*certFiles, error) {
	c := &certFiles{cert: cert, key: key, log: log}
	if err := c.load(); err != nil {
		return nil, err
	}
	return c, nil
}

func (c *certFiles) stampNow() string {
	h := sha256.New()
	for _, p := range []string{c.cert, c.key} {
		b, err := os.ReadFile(p)
		if err != nil {
			return "unreadable: " + err.Error()
		}
		h.Write(b)
		h.Write([]byte{0})
	}
	return string(h.Sum(nil))
}

func (c *certFiles) load() error {
	if fi, err := os.Stat(c.key); err == nil && fi.Mode().Perm()&0o004 != 0 {
		return fmt.Errorf("TLS key %s has mode %v: everyone may read it; chmod 600 (or 640, for a group) it", c.key, fi.Mode().Perm())
	}
	stamp := c.stampNow()
	pair, err := tls.LoadX509KeyPair(c.cert, c.key)
	if err != nil {
		return fmt.Errorf("TLS certificate %s and key %s: %w", c.cert, c.key, err)
	}
	c.current, c.stamp = &pair, stamp
	return nil
}

// get is tls.Config.GetCertificate.
func (c *certFiles) get(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if now := time.Now(); now.Sub(c.checked) >= time.Second {
		c.checked = now
		if stamp := c.stampNow(); stamp != c.stamp {
			old := c.stamp
			if err := c.load(); err != nil {
				c.stamp = stamp // not again until the files change again
				c.log.Error("reloading the TLS certificate; serving the last good one", "error", err)
			} else if old != "" {
				c.log.Info("TLS certificate reloaded", "cert", c.cert)
			}
		}
	}
	return c.current, nil
}

// config is the listener's TLS config.
func (c *certFiles) config() *tls.Config {
	return &tls.Config{MinVersion: tls.VersionTLS12, GetCertificate: c.get}
}
