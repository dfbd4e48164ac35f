package config_test

import (
	"reflect"
	"testing"
	"time"

	"github.com/fleetcast/autoscaler/config"
	"github.com/fleetcast/autoscaler/fleet"
	"github.com/fleetcast/autoscaler/providers/registry"
)

// ha is a controller block holding an ha block with the given body.
func ha(body string) string {
	return "controller {\n  fleet = \"prod\"\n  ha {\n" + body + "  }\n}\n"
}

// haTLS is ha's block for an API served over TLS.
func haTLS(body string) string {
	return "controller {\n  fleet = \"prod\"\n  listen = \"0.0.0.0:8790\"\n  tls_cert_file = \"api.pem\"\n  tls_key_file = \"api-key.pem\"\n  ha {\n" + body + "  }\n}\n"
}

// TestParseHA: the ha block comes out in the controller's settings, its
// lease defaulted and its prefix the fleet's.
func TestParseHA(t *testing.T) {
	for _, tt := range []struct {
		name, src string
		want      fleet.HASettings
		prefix    string
	}{
		{"defaults", ha("    etcd = [\"https://10.0.0.5:2379\", \"https://10.0.0.6:2379\"]\n    advertise = \"http://127.0.0.1:8790/\"\n"),
			fleet.HASettings{Etcd: []string{"https://10.0.0.5:2379", "https://10.0.0.6:2379"}, LeaseTTL: 10 * time.Second, Advertise: "http://127.0.0.1:8790"},
			"/fleetcast/prod/"},
		{"all", haTLS("    etcd = [\"https://e:2379\"]\n    lease_ttl = \"15s\"\n    prefix = \"/fc/a/\"\n    advertise = \"https://c1:8790\"\n    api_ca = \"api-ca.pem\"\n    tls {\n      ca = \"ca.pem\"\n      cert = \"c.pem\"\n      key = \"k.pem\"\n    }\n"),
			fleet.HASettings{Etcd: []string{"https://e:2379"}, LeaseTTL: 15 * time.Second, Prefix: "/fc/a/", Advertise: "https://c1:8790",
				TLSCAFile: "ca.pem", TLSCertFile: "c.pem", TLSKeyFile: "k.pem", APICAFile: "api-ca.pem"},
			"/fc/a/"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			cfg, diags := config.Parse("test.hcl", []byte(simPool("a", "")+tt.src), registry.Blocks())
			if diags.HasErrors() {
				t.Fatal(formatAll(diags))
			}
			if got := cfg.Controller.HA; got == nil || !reflect.DeepEqual(*got, tt.want) {
				t.Errorf("ha %+v, want %+v", got, tt.want)
			}
			if got := cfg.Controller.HAPrefix(); got != tt.prefix {
				t.Errorf("prefix %q, want %q", got, tt.prefix)
			}
		})
	}
	if cfg, _ := config.Parse("test.hcl", []byte(simPool("a", "")), registry.Blocks()); cfg.Controller.HA != nil {
		t.Errorf("no ha block, ha %+v", cfg.Controller.HA)
	}
}

// TestParseHAErrors: each wrong ha block is refused where it is wrong.
func TestParseHAErrors(t *testing.T) {
	const ok = "    etcd = [\"https://e:2379\"]\n    advertise = \"http://c1:8790\"\n"
	tests := []struct {
		name string
		src  string
		want []wantDiag
	}{
		{"no members", ha("    etcd = []\n    advertise = \"http://c1:8790\"\n"),
			[]wantDiag{{summary: "Invalid value", detail: "etcd must list the etcd members' client URLs", at: "[]"}}},
		{"not a URL", ha("    etcd = [\"e:2379\"]\n    advertise = \"http://c1:8790\"\n"),
			[]wantDiag{{summary: "Invalid value", detail: `etcd must list http or https URLs of etcd members, such as "https://10.0.0.5:2379", got "e:2379".`, at: `["e:2379"]`}}},
		{"no advertise", ha("    etcd = [\"https://e:2379\"]\n"),
			[]wantDiag{{summary: "Missing required argument", detail: `The argument "advertise" is required`, at: "{\n    etcd"}}},
		{"fractional lease", ha(ok + "    lease_ttl = \"1500ms\"\n"),
			[]wantDiag{{summary: "Invalid value", detail: `lease_ttl must be whole seconds, at most 10m`, at: `"1500ms"`}}},
		{"long lease", ha(ok + "    lease_ttl = \"1h\"\n"),
			[]wantDiag{{summary: "Invalid value", detail: `lease_ttl must be whole seconds, at most 10m`, at: `"1h"`}}},
		{"relative prefix", ha(ok + "    prefix = \"fc/\"\n"),
			[]wantDiag{{summary: "Invalid value", detail: `prefix must be a key path starting and ending with "/"`, at: `"fc/"`}}},
		{"https without TLS", ha("    etcd = [\"https://e:2379\"]\n    advertise = \"https://c1:8790\"\n"),
			[]wantDiag{{summary: "Invalid value", detail: `advertise must be an http URL: the API serves HTTP here (tls_cert_file not set), got "https://c1:8790".`, at: `"https://c1:8790"`}}},
		{"cert without key", ha(ok + "    tls {\n      cert = \"c.pem\"\n    }\n"),
			[]wantDiag{{summary: "Invalid value", detail: "cert needs key", at: `"c.pem"`}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) { wantErrors(t, simPool("p", "")+tt.src, 0, tt.want, false) })
	}
}

// TestHAFilesListed: the ha block's files are among those `validate
// -files` checks, each at its attribute.
func TestHAFilesListed(t *testing.T) {
	src := simPool("a", "") + haTLS("    etcd = [\"https://e:2379\"]\n    advertise = \"https://c1:8790\"\n    api_ca = \"api-ca.pem\"\n    tls {\n      ca = \"ca.pem\"\n      cert = \"c.pem\"\n      key = \"k.pem\"\n    }\n")
	cfg, diags := config.Parse("test.hcl", []byte(src), registry.Blocks())
	if diags.HasErrors() {
		t.Fatal(formatAll(diags))
	}
	got := map[string]string{}
	for _, f := range cfg.InputFiles() {
		if f.At.Filename == "" {
			t.Errorf("%s: no place in the file", f.Field)
		}
		got[f.Field] = f.Path
	}
	for field, path := range map[string]string{"controller.ha.api_ca": "api-ca.pem", "controller.ha.tls.ca": "ca.pem", "controller.ha.tls.cert": "c.pem", "controller.ha.tls.key": "k.pem"} {
		if got[field] != path {
			t.Errorf("%s: %q, want %q", field, got[field], path)
		}
	}
}
