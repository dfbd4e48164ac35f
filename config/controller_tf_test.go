package config_test

import (
	"encoding/base64"
	"os"
	"os/exec"
	"reflect"
	"regexp"
	"strings"
	"testing"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"
	"github.com/zclconf/go-cty/cty"

	"github.com/fleetcast/autoscaler/config"
	"github.com/fleetcast/autoscaler/fleet"
	"github.com/fleetcast/autoscaler/providers/aws"
	"github.com/fleetcast/autoscaler/providers/gcp"
	"github.com/fleetcast/autoscaler/providers/registry"
)

// controllerModules are the Terraform modules that deploy the controller:
// their directory, the instance set-up template and the variables it takes
// beyond the ones every such module passes (the cloud's own).
var controllerModules = []struct {
	dir, setup string
	vars       map[string]cty.Value
}{
	{"../examples/terraform/aws/controller/", "controller-setup.sh.tftpl", map[string]cty.Value{
		"region":              cty.StringVal("us-east-1"),
		"identity_pem_b64":    cty.StringVal("LS0tLS1CRUdJTiBDRVJUSUZJQ0FURS0tLS0tCk1JSUIKLS0tLS1FTkQgQ0VSVElGSUNBVEUtLS0tLQo="),
		"bootstrap_parameter": cty.StringVal("/fleetcast/bootstrap-token"),
	}},
	{"../examples/terraform/gcp/controller/", "controller-setup.sh.tftpl", map[string]cty.Value{
		"project":  cty.StringVal("my-gpu-project"),
		"audience": cty.StringVal("https://fleetcast.internal:8790"),
	}},
}

// TestControllerSetupRenders renders each controller module's instance
// set-up as Terraform's templatefile does, with every variable its
// main.tf passes, for three replicas on their own etcd and for one
// replica alone, and checks the script: bash parses it; its units run as
// users of their own, restart on failure and may not write the system or
// gain privileges; and the config it writes (the module's fleet.hcl and
// the controller block) is valid, with an ha block naming the three
// members and this replica's address exactly when there are three.
func TestControllerSetupRenders(t *testing.T) {
	for _, mod := range controllerModules {
		src, err := os.ReadFile(mod.dir + mod.setup)
		if err != nil {
			t.Fatal(err)
		}
		fleetHCL, err := os.ReadFile(mod.dir + "fleet.hcl")
		if err != nil {
			t.Fatal(err)
		}
		tf, err := os.ReadFile(mod.dir + "main.tf")
		if err != nil {
			t.Fatal(err)
		}
		tmpl, diags := hclsyntax.ParseTemplate(src, mod.setup, hcl.InitialPos)
		if diags.HasErrors() {
			t.Fatal(diags)
		}
		for _, tt := range []struct {
			name          string
			ha, runEtcd   bool
			etcdList      string
			wantMembers   int
			wantEtcdUnit  bool
			wantHABlock   bool
			wantAdvertise string
		}{
			{"three replicas", true, true, `["https://10.0.1.5:2379","https://10.0.2.5:2379","https://10.0.3.5:2379"]`, 3, true, true, "https://10.0.1.5:8790"},
			{"one replica", false, false, "[]", 0, false, false, ""},
		} {
			t.Run(mod.dir+" "+tt.name, func(t *testing.T) {
				vars := map[string]cty.Value{
					"index": cty.NumberIntVal(0), "name": cty.StringVal("fleetcast"), "ip": cty.StringVal("10.0.1.5"),
					"api_port": cty.NumberIntVal(8790), "ha": cty.BoolVal(tt.ha), "run_etcd": cty.BoolVal(tt.runEtcd),
					"etcd_list":       cty.StringVal(tt.etcdList),
					"initial_cluster": cty.StringVal("m0=https://10.0.1.5:2380,m1=https://10.0.2.5:2380,m2=https://10.0.3.5:2380"),
					"release_url":     cty.StringVal("https://artifacts.example.internal/autoscaler-linux-amd64"), "release_sha256": cty.StringVal(strings.Repeat("a", 64)),
					"etcd_url": cty.StringVal("https://artifacts.example.internal/etcd-v3.6.0-linux-amd64.tar.gz"), "etcd_sha256": cty.StringVal(strings.Repeat("b", 64)),
					"fleet_config_b64": cty.StringVal(b64(fleetHCL)),
					"secret_tls_ca":    cty.StringVal("fleetcast/controller/tls-ca"), "secret_tls_cert": cty.StringVal("fleetcast/controller/tls-cert"),
					"secret_tls_key": cty.StringVal("fleetcast/controller/tls-key"), "secret_root_token": cty.StringVal("fleetcast/controller/root-api-token"),
				}
				for k, v := range mod.vars {
					vars[k] = v
				}
				for name := range vars {
					if !regexp.MustCompile(`\n\s+` + name + `\s+=`).Match(tf) {
						t.Errorf("main.tf does not pass %s to %s", name, mod.setup)
					}
				}
				out, diags := tmpl.Value(&hcl.EvalContext{Variables: vars})
				if diags.HasErrors() {
					t.Fatal(diags)
				}
				script := out.AsString()
				cmd := exec.Command("bash", "-n")
				cmd.Stdin = strings.NewReader(script)
				if msg, err := cmd.CombinedOutput(); err != nil {
					t.Fatalf("the rendered set-up does not parse as bash: %v\n%s", err, msg)
				}

				units := heredocs(script, "UNIT")
				if want := 1 + boolInt(tt.wantEtcdUnit); len(units) != want {
					t.Fatalf("the set-up writes %d systemd units; want %d", len(units), want)
				}
				for _, u := range units {
					for _, line := range []string{"NoNewPrivileges=yes", "ProtectSystem=strict", "Restart=on-failure"} {
						if !strings.Contains(u, "\n"+line+"\n") {
							t.Errorf("a unit lacks %s:\n%s", line, u)
						}
					}
					if user := regexp.MustCompile(`\nUser=(\S+)\n`).FindStringSubmatch(u); user == nil || user[1] == "root" {
						t.Errorf("a unit runs as %v; want a user of its own:\n%s", user, u)
					}
				}

				hclDocs := heredocs(script, "HCL")
				if len(hclDocs) != 1 {
					t.Fatalf("the set-up writes %d controller blocks; want 1", len(hclDocs))
				}
				full := string(fleetHCL) + hclDocs[0]
				cfg, diags := config.Parse("fleet.hcl", []byte(full), registry.Blocks())
				if diags.HasErrors() {
					t.Fatalf("the config the set-up writes is not valid:\n%s\n%s", formatAll(diags), full)
				}
				switch ha := cfg.Controller.HA; {
				case tt.wantHABlock && ha == nil:
					t.Fatalf("no ha block; want one")
				case !tt.wantHABlock && ha != nil:
					t.Fatalf("an ha block %+v; want none (one replica keeps its state in a file)", ha)
				case ha != nil:
					if len(ha.Etcd) != tt.wantMembers || ha.Advertise != tt.wantAdvertise {
						t.Errorf("ha: etcd %v, advertise %q; want %d members and %s", ha.Etcd, ha.Advertise, tt.wantMembers, tt.wantAdvertise)
					}
				}
				if cfg.Controller.TLSCertFile == "" {
					t.Errorf("the controller block names no TLS certificate: %+v", cfg.Controller)
				}
				// The controller runs as fleetcast: every file its block
				// names is written readable by that user (its own, or its
				// group's and not everyone's), and the set-up checks the
				// config as that user before putting it in place, so a file
				// it could not read stops the set-up at once.
				for _, path := range regexp.MustCompile(`"(/etc/fleetcast/[^"]+)"`).FindAllStringSubmatch(hclDocs[0], -1) {
					put := regexp.MustCompile(`(?m)^put ` + regexp.QuoteMeta(path[1]) + ` (0[0-7]{3}) (root|fleetcast):(\S+) `).FindStringSubmatch(script)
					switch {
					case put == nil:
						t.Errorf("%s, named in the controller block, is not written by put FILE MODE OWNER", path[1])
					case put[1][3] != '0':
						t.Errorf("%s is written mode %s: readable by everyone", path[1], put[1])
					case !(put[2] == "fleetcast" && put[1][1] >= '4') && !(put[3] == "fleetcast" && put[1][2] >= '4'):
						t.Errorf("%s is written mode %s, %s:%s: the fleetcast user cannot read it", path[1], put[1], put[2], put[3])
					}
				}
				validate := strings.Index(script, `runuser -u fleetcast -- /usr/local/bin/autoscaler validate -config "$config" -files`)
				placed := strings.Index(script, `mv -f "$config" /etc/fleetcast/fleet.hcl`)
				if validate < 0 || placed < validate {
					t.Error("the set-up does not check the config as the controller's user (runuser -u fleetcast -- autoscaler validate -files) before it puts it in place")
				}
			})
		}
	}
}

// TestControllerFleetAgrees: the pools a controller module's fleet.hcl
// names are examples/cloud.hcl's, setting for setting, so they drive the
// groups its fleet module makes (TestExamplesTerraformAgrees checks
// those against cloud.hcl).
func TestControllerFleetAgrees(t *testing.T) {
	cloud, diags := registry.Load(cloudExample)
	if diags.HasErrors() {
		t.Fatalf("%s:\n%s", cloudExample, formatAll(diags))
	}
	for _, mod := range controllerModules {
		src, err := os.ReadFile(mod.dir + "fleet.hcl")
		if err != nil {
			t.Fatal(err)
		}
		cfg, diags := config.Parse(mod.dir+"fleet.hcl", src, registry.Blocks())
		if diags.HasErrors() {
			t.Fatalf("%s:\n%s", mod.dir+"fleet.hcl", formatAll(diags))
		}
		if len(cfg.Pools) == 0 {
			t.Fatalf("%sfleet.hcl has no pool", mod.dir)
		}
		for _, p := range cfg.Pools {
			found := false
			for _, c := range cloud.Pools {
				if c.Name == p.Name {
					found = true
					// The same pool, read from two files: the same but
					// for where its provider block is.
					if group(c) != group(p) {
						t.Errorf("%sfleet.hcl: pool %q drives %q; %s's, %q", mod.dir, p.Name, group(p), cloudExample, group(c))
					}
					c.Settings, p.Settings = nil, nil
					if !reflect.DeepEqual(c, p) {
						t.Errorf("%sfleet.hcl: pool %q differs from %s's:\n%+v\n%+v", mod.dir, p.Name, cloudExample, p, c)
					}
				}
			}
			if !found {
				t.Errorf("%sfleet.hcl: pool %q is not in %s", mod.dir, p.Name, cloudExample)
			}
		}
	}
}

// heredocs are the bodies of the script's here-documents ending at word.
func heredocs(script, word string) []string {
	var docs []string
	for _, part := range strings.Split(script, "<<'"+word+"'\n")[1:] {
		if body, _, ok := strings.Cut(part, "\n"+word+"\n"); ok {
			docs = append(docs, body+"\n")
		}
	}
	return docs
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

// b64 is Terraform's base64encode.
func b64(b []byte) string { return base64.StdEncoding.EncodeToString(b) }

// group is the group a cloud pool drives: its Auto Scaling group or its
// managed instance group.
func group(p fleet.Pool) string {
	if p.Provider == "gcp" {
		return gcp.SettingsOf(p).MIG
	}
	return aws.SettingsOf(p).ASG
}

// TestControllerSetupHelpersAgree: the controller modules' set-ups, each a
// copy in its own module so that the module can be copied out alone, share
// their helpers (retrying, waiting, checked downloads, whole writes) word
// for word, so that a fix to one reaches the other.
func TestControllerSetupHelpersAgree(t *testing.T) {
	helpers := []string{"log", "retry", "wait_for", "install_checked", "put"}
	var first map[string]string
	for _, mod := range controllerModules {
		src, err := os.ReadFile(mod.dir + mod.setup)
		if err != nil {
			t.Fatal(err)
		}
		got := map[string]string{}
		for _, name := range helpers {
			start := strings.Index(string(src), "\n"+name+"() {")
			if start < 0 {
				t.Fatalf("%s%s has no %s()", mod.dir, mod.setup, name)
			}
			body := string(src[start+1:])
			if line, _, _ := strings.Cut(body, "\n"); strings.HasSuffix(line, "}") {
				body = line // a one-line function
			} else if end := strings.Index(body, "\n}\n"); end >= 0 {
				body = body[:end]
			}
			got[name] = body
		}
		if first == nil {
			first = got
			continue
		}
		for _, name := range helpers {
			if got[name] != first[name] {
				t.Errorf("%s%s's %s() differs from %s%s's: keep the copies the same", mod.dir, mod.setup, name, controllerModules[0].dir, controllerModules[0].setup)
			}
		}
	}
}
