package config

import (
	neturl "net/url"
	"strings"
	"time"

	"github.com/hashicorp/hcl/v2"

	"github.com/fleetcast/autoscaler/fleet"
)

// haBody is the controller's `ha { ... }` block.
type haBody struct {
	Etcd      []string   `hcl:"etcd"`
	LeaseTTL  string     `hcl:"lease_ttl,optional"`
	Prefix    string     `hcl:"prefix,optional"`
	Advertise string     `hcl:"advertise"`
	APICA     string     `hcl:"api_ca,optional"`
	TLS       *haTLSBody `hcl:"tls,block"`

	EtcdAt      hcl.Range `hcl:"etcd,attr_value_range"`
	LeaseTTLAt  hcl.Range `hcl:"lease_ttl,attr_value_range"`
	PrefixAt    hcl.Range `hcl:"prefix,attr_value_range"`
	AdvertiseAt hcl.Range `hcl:"advertise,attr_value_range"`
	APICAAt     hcl.Range `hcl:"api_ca,attr_value_range"`
}

// haTLSBody is the ha block's `tls { ... }`: how to reach etcd.
type haTLSBody struct {
	CA   string `hcl:"ca,optional"`
	Cert string `hcl:"cert,optional"`
	Key  string `hcl:"key,optional"`

	CAAt   hcl.Range `hcl:"ca,attr_value_range"`
	CertAt hcl.Range `hcl:"cert,attr_value_range"`
	KeyAt  hcl.Range `hcl:"key,attr_value_range"`
}

// maxLeaseTTL bounds ha.lease_ttl: a leader lost is replaced within it.
const maxLeaseTTL = 10 * time.Minute

// Validate checks the ha block: etcd members' http(s) URLs, a lease of
// whole seconds from 1s to 10m, a prefix that is an absolute key path
// ending in "/", this replica's URL (https where the API serves TLS,
// http where it does not), and TLS files, the client's certificate and
// key in a pair. Every error points at the value it refuses.
func (h *haBody) Validate(d *decoder, apiTLS bool) *fleet.HASettings {
	out := &fleet.HASettings{LeaseTTL: fleet.DefaultLeaseTTL}
	if len(h.Etcd) == 0 {
		d.invalid(h.EtcdAt, "etcd must list the etcd members' client URLs, such as [\"https://10.0.0.5:2379\"].")
	}
	for _, e := range h.Etcd {
		if !httpURL(e) {
			d.invalid(h.EtcdAt, "etcd must list http or https URLs of etcd members, such as \"https://10.0.0.5:2379\", got %q.", e)
		}
	}
	out.Etcd = h.Etcd
	var ttl time.Duration
	if d.duration("lease_ttl", h.LeaseTTL, h.LeaseTTLAt, false, &ttl) == set {
		if d.check(h.LeaseTTLAt, ttl%time.Second == 0 && ttl <= maxLeaseTTL, "lease_ttl must be whole seconds, at most %s (a leader cut off is replaced within it), got %q.", fleet.FormatDuration(maxLeaseTTL), h.LeaseTTL) == set {
			out.LeaseTTL = ttl
		}
	}
	if d.check(h.PrefixAt, strings.HasPrefix(h.Prefix, "/") && strings.HasSuffix(h.Prefix, "/") && len(h.Prefix) > 1,
		"prefix must be a key path starting and ending with \"/\", such as \"/fleetcast/prod/\", got %q.", h.Prefix) == set {
		out.Prefix = h.Prefix
	}
	if d.check(h.AdvertiseAt, httpURL(h.Advertise), "advertise must be this replica's API URL as the other replicas reach it (https://HOST:PORT), got %q.", h.Advertise) == set {
		scheme := "http"
		if apiTLS {
			scheme = "https"
		}
		if d.check(h.AdvertiseAt, strings.HasPrefix(h.Advertise, scheme+"://"), "advertise must be an %s URL: the API serves %s here (tls_cert_file %s), got %q.",
			scheme, strings.ToUpper(scheme), map[bool]string{true: "set", false: "not set"}[apiTLS], h.Advertise) == set {
			out.Advertise = strings.TrimSuffix(h.Advertise, "/")
		}
	}
	if d.nonEmpty("api_ca", h.APICA, h.APICAAt) == set {
		out.APICAFile = h.APICA
	}
	if t := h.TLS; t != nil {
		out.TLSCAFile, out.TLSCertFile, out.TLSKeyFile = t.CA, t.Cert, t.Key
		d.nonEmpty("ca", t.CA, t.CAAt)
		cert, key := d.nonEmpty("cert", t.Cert, t.CertAt), d.nonEmpty("key", t.Key, t.KeyAt)
		switch {
		case cert == set && key == unset:
			d.invalid(t.CertAt, "cert needs key, the client certificate's private key.")
		case key == set && cert == unset:
			d.invalid(t.KeyAt, "key needs cert, the client certificate it is the key of.")
		}
	}
	return out
}

// httpURL reports whether s is an http or https URL with a host.
func httpURL(s string) bool {
	u, err := neturl.Parse(s)
	return err == nil && (u.Scheme == "http" || u.Scheme == "https") && u.Host != ""
}
