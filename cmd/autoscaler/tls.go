package main

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net/http"
	"os"
)

// tlsTransport is an HTTP transport for the controller's API: TLS 1.2 or
// later, verifying against the PEM certificates in caFile (the system's
// roots when ""). It also returns caFile's bytes, nil when "".
func tlsTransport(caFile string) (*http.Transport, []byte, error) {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.TLSClientConfig = &tls.Config{MinVersion: tls.VersionTLS12}
	if caFile == "" {
		return tr, nil, nil
	}
	data, err := os.ReadFile(caFile)
	if err != nil {
		return nil, nil, err
	}
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(data) {
		return nil, nil, fmt.Errorf("%s holds no PEM certificate", caFile)
	}
	tr.TLSClientConfig.RootCAs = roots
	return tr, data, nil
}
