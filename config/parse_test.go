package config_test

import (
	"bytes"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/hcl/v2"

	"github.com/fleetcast/autoscaler/config"
	"github.com/fleetcast/autoscaler/fleet"
	"github.com/fleetcast/autoscaler/providers/aws"
	"github.com/fleetcast/autoscaler/providers/gcp"
	"github.com/fleetcast/autoscaler/providers/plugin"
	"github.com/fleetcast/autoscaler/providers/registry"
	"github.com/fleetcast/autoscaler/providers/sim"
)

func TestParseFull(t *testing.T) {
	cfg, diags := registry.Load("test-fixtures/full.hcl")
	if diags.HasErrors() {
		t.Fatalf("unexpected errors:\n%s", formatAll(diags))
	}
	wantPools := []fleet.Pool{
		{
			Name: "h100-reserved", Provider: "aws", Region: "us-east-1",
			Zones: []string{"us-east-1a", "us-east-1b"}, InstanceType: "p5.48xlarge",
			GPUModel: "H100", GPUsPerNode: 8, Capacity: fleet.Reserved, PricePerHour: 55.04,
			LeadTime: 15 * time.Minute, ProvisionTimeout: time.Hour, Min: 4, Max: 4, Priority: 10,
			Settings: aws.Settings{ASG: "gpu-reserved", Endpoint: "http://localhost:4566"},
		},
		{
			Name: "a100-spot", Provider: "gcp", Region: "us-central1", InstanceType: "a2-highgpu-8g",
			GPUsPerNode: 8, Capacity: fleet.Spot, PricePerHour: 11.5,
			LeadTime: 10 * time.Minute, ProvisionTimeout: 30 * time.Minute, Min: 0, Max: 16,
			Settings: gcp.Settings{Project: "ml-prod", Zone: "us-central1-a", MIG: "a100-spot"},
		},
		{
			Name: "l4-plugin", Provider: "plugin", InstanceType: "g6.xlarge",
			GPUsPerNode: 1, Capacity: fleet.OnDemand, PricePerHour: 0.8,
			LeadTime: 36 * time.Hour, ProvisionTimeout: 108 * time.Hour, Max: 32,
			Settings: plugin.Settings{Plugin: "fleet-plugin", Target: map[string]any{"cluster": "eu-1", "queue": "gpu"}},
		},
		{
			Name: "sim-h100", Provider: "sim", InstanceType: "sim.8gpu",
			GPUsPerNode: 8, Capacity: fleet.OnDemand, PricePerHour: 40,
			LeadTime: 10 * time.Minute, ProvisionTimeout: 30 * time.Minute, Min: 1, Max: 10,
			Settings: sim.Settings{Capacity: 6, ErrorRate: 0.05, Initial: 2},
		},
	}
	withoutRanges(cfg.Pools)
	if !reflect.DeepEqual(cfg.Pools, wantPools) {
		t.Errorf("pools:\n got %+v\nwant %+v", cfg.Pools, wantPools)
	}
	want := config.Config{
		Pools:    wantPools,
		Forecast: fleet.ForecastSettings{Step: 5 * time.Minute, Horizon: 48 * time.Hour, Quantile: 0.95, WaitValuePerGPUHour: 250, History: 14 * 24 * time.Hour, Hysteresis: time.Hour},
		Drain:    fleet.DrainSettings{CheckpointMaxAge: 45 * time.Minute, Timeout: time.Hour, Signal: "SIGUSR2", LongRunningAfter: 6 * time.Hour},
		Limits: fleet.Limits{MaxGPUs: 512, MaxSpendPerHour: 2500.5, MaxScaleInPerCycle: 4, ScaleInShare: 0.25, ScaleInWindow: 30 * time.Minute, SilentShareHalt: 0.5,
			ScaleInDelayAfterLaunch: 15 * time.Minute},
		Controller: fleet.ControllerSettings{Interval: 30 * time.Second, Listen: ":9000", StateDir: "/var/lib/fleetcast", Fleet: "ml-prod",
			TLSCertFile: "/etc/fleetcast/tls/controller.crt", TLSKeyFile: "/etc/fleetcast/tls/controller.key",
			BootstrapTokenFile: "/etc/fleetcast/bootstrap-token", AWSIdentityCertificates: "/etc/fleetcast/aws-identity.pem"},
		AgentTimeout: 2 * time.Minute,
		Demand:       fleet.DemandSettings{PrometheusURL: "http://prometheus:9090", PrometheusQuery: "count(DCGM_FI_DEV_GPU_UTIL > 0)", PrometheusTimeout: 5 * time.Second},
		Synthetic:    fleet.SyntheticSettings{Seed: 42, BaseGPUs: 32, PeakGPUs: 256, PeakHour: 9, Noise: 0.1},
		Simulate: fleet.SimulateSettings{CheckpointInterval: 20 * time.Minute, SpotInterruptionsPerHour: 0.05, SpotNotice: 30 * time.Second,
			CheckpointDuration: 5 * time.Minute, UnresponsiveJobs: 0.1,
			Reservations: fleet.ReservationsAdvised, AdviceAfter: 7 * 24 * time.Hour, HeadroomGPUs: 64, HeadroomPlaceholders: fleet.PlaceholdersGPU},
		Usage: fleet.UsageSettings{JobRetention: 14 * 24 * time.Hour, HourRetention: 730 * 24 * time.Hour, MaxTeams: 50, MaxTiers: 5, ShareIdle: true,
			IdleThreshold: 10, IdleWindow: 15 * time.Minute},
		Plugins: []config.Plugin{{Name: "fleet-plugin", Path: "/usr/local/libexec/fleetcast/fleet-plugin",
			SHA256: "2c26b46b68ffc68ff99b453c1d30413413422d706483bfa0f98a5e886266e7ae", Args: []string{"--verbose", "--region=eu"},
			Env: []string{"FLEET_PLUGIN_LOG=debug"}, Config: map[string]any{"endpoint": "https://fleet.example.internal", "retries": 3.0}}},
	}
	for i := range cfg.Plugins {
		if cfg.Plugins[i].DefRange.Filename == "" || len(cfg.Plugins[i].ConfigAt) != 2 {
			t.Errorf("plugin %s: no ranges: %+v", cfg.Plugins[i].Name, cfg.Plugins[i])
		}
		cfg.Plugins[i].DefRange, cfg.Plugins[i].ConfigAt = hcl.Range{}, nil
	}
	if cfg.Origin == nil || cfg.Origin.Where("plugin", "fleet-plugin", "sha256").Start.Line == 0 {
		t.Errorf("no origin: %+v", cfg.Origin)
	}
	cfg.Origin = nil
	if !reflect.DeepEqual(*cfg, want) {
		t.Errorf("config:\n got %+v\nwant %+v", *cfg, want)
	}
}

func TestParseMinimal(t *testing.T) {
	cfg, diags := registry.Load("test-fixtures/minimal.hcl")
	if diags.HasErrors() {
		t.Fatalf("unexpected errors:\n%s", formatAll(diags))
	}
	want := config.Defaults()
	want.Pools = []fleet.Pool{{
		Name: "gpu", Provider: "sim", InstanceType: "sim.8gpu", GPUsPerNode: 8,
		Capacity: config.PoolDefaults.Capacity, PricePerHour: 32,
		LeadTime:         config.PoolDefaults.LeadTime,
		ProvisionTimeout: config.PoolDefaults.LeadTime * time.Duration(config.PoolDefaults.ProvisionTimeoutFactor),
		Min:              0, Max: 4,
		// The sim defaults: capacity = max, no errors, initial = min.
		Settings: sim.Settings{Capacity: 4, ErrorRate: 0, Initial: 0},
	}}
	withoutRanges(cfg.Pools)
	if cfg.Origin == nil || cfg.Origin.Where("pool", "gpu", "max").Start.Line == 0 {
		t.Errorf("no origin: %+v", cfg.Origin)
	}
	cfg.Origin = nil
	if !reflect.DeepEqual(*cfg, want) {
		t.Errorf("config:\n got %+v\nwant %+v", *cfg, want)
	}
}

// TestParseSimulate: the simulate block's checkpoint_duration and
// unresponsive_jobs take their defaults when absent and accept their
// bounds.
func TestParseSimulate(t *testing.T) {
	tests := []struct {
		name     string
		body     string
		duration time.Duration
		share    float64
	}{
		{"defaults", "", 2 * time.Minute, 0.02},
		{"at once, none", "checkpoint_duration = \"0s\"\nunresponsive_jobs = 0\n", 0, 0},
		{"bare zero", "checkpoint_duration = \"0\"\n", 0, 0.02},
		{"slow, all", "checkpoint_duration = \"1d\"\nunresponsive_jobs = 1\n", 24 * time.Hour, 1},
		{"typical", "checkpoint_duration = \"5m\"\nunresponsive_jobs = 0.2\n", 5 * time.Minute, 0.2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg, diags := config.Parse("test.hcl", []byte(simPool("a", "")+"simulate {\n"+tt.body+"}\n"), registry.Blocks())
			if diags.HasErrors() {
				t.Fatalf("unexpected errors:\n%s", formatAll(diags))
			}
			if s := cfg.Simulate; s.CheckpointDuration != tt.duration || s.UnresponsiveJobs != tt.share {
				t.Errorf("checkpoint_duration %v, unresponsive_jobs %v; want %v, %v", s.CheckpointDuration, s.UnresponsiveJobs, tt.duration, tt.share)
			}
		})
	}
}

// TestParseAcceptance: an unknown attribute, a bad duration and min > max
// give exactly three errors, each pointing at the right place.
func TestParseAcceptance(t *testing.T) {
	const file = "test-fixtures/acceptance.hcl"
	cfg, diags := registry.Load(file)
	if cfg != nil {
		t.Errorf("got a config despite errors")
	}
	want := []struct {
		summary   string
		line, col int
	}{
		{"Unsupported argument", 6, 3}, // colour
		{"Invalid duration", 7, 20},    // lead_time's value
		{"Invalid value", 8, 20},       // min's value
	}
	if len(diags) != len(want) {
		t.Fatalf("got %d diagnostics, want %d:\n%s", len(diags), len(want), formatAll(diags))
	}
	for i, w := range want {
		d := diags[i]
		if d.Severity != hcl.DiagError || d.Summary != w.summary || d.Subject == nil ||
			d.Subject.Filename != file || d.Subject.Start.Line != w.line || d.Subject.Start.Column != w.col {
			t.Errorf("diagnostic %d: got %s, want %s at %s:%d:%d", i, config.FormatDiagnostic(d), w.summary, file, w.line, w.col)
		}
	}
	for _, frag := range []string{`"colour"`, `lead_time`, `"10 minutes"`, "min (5) is greater than max (2)"} {
		if !strings.Contains(formatAll(diags), frag) {
			t.Errorf("diagnostics do not mention %s:\n%s", frag, formatAll(diags))
		}
	}
}

// pool is a valid pool body to build error cases from.
const pool = `
  provider       = "sim"
  instance_type  = "sim.8gpu"
  gpus_per_node  = 8
  price_per_hour = 32
  max            = 4
`

// simPool returns a sim pool block with extra lines added to the body.
func simPool(name, extra string) string {
	return "pool \"" + name + "\" {" + pool + extra + "}\n"
}

// awsPool returns an aws pool block with the given extra body.
func awsPool(name, extra string) string {
	return "pool \"" + name + "\" {\n  provider = \"aws\"\n  instance_type = \"p5\"\n  gpus_per_node = 8\n  price_per_hour = 1\n  max = 2\n" + extra + "}\n"
}

// wantDiag is an error a config gives (wantErrors).
type wantDiag struct {
	summary string // exact
	detail  string // a substring, or exact
	at      string // the diagnostic starts at the first occurrence of at...
	nth     int    // ...or its nth (0-based)
}

func TestParseErrors(t *testing.T) {
	tests := []struct {
		name string
		src  string
		want []wantDiag
	}{
		{"usage retention too short", simPool("a", "") + "usage {\n  job_retention = \"10m\"\n}\n",
			[]wantDiag{{summary: "Invalid value", detail: `job_retention must be 1h to 3650d, got "10m".`, at: `"10m"`}}},
		{"usage retention not a duration", simPool("a", "") + "usage {\n  hour_retention = \"a year\"\n}\n",
			[]wantDiag{{summary: "Invalid duration", detail: `hour_retention must be`, at: `"a year"`}}},
		{"usage caps out of range", simPool("a", "") + "usage {\n  max_teams = 0\n  max_tiers = 5000\n}\n",
			[]wantDiag{{summary: "Invalid value", detail: `max_teams must be 1 to 10000, got 0.`, at: "0"}, {summary: "Invalid value", detail: `max_tiers must be 1 to 1000, got 5000.`, at: "5000"}}},
		{"usage idle out of range", simPool("a", "") + "usage {\n  idle_threshold = 101\n  idle_window = \"30s\"\n}\n",
			[]wantDiag{{summary: "Invalid value", detail: `idle_threshold must be 0 to 100, got 101.`, at: "101"}, {summary: "Invalid value", detail: `idle_window must be 1m to 24h, got "30s".`, at: `"30s"`}}},
		{"unknown block", simPool("a", "") + "autoscale {}\n",
			[]wantDiag{{summary: "Unsupported block type", detail: `"autoscale"`, at: "autoscale"}}},
		{"unknown nested block", simPool("a", "  kubernetes {}\n"),
			[]wantDiag{{summary: "Unsupported block type", detail: `"kubernetes"`, at: "kubernetes"}}},
		{"unknown attribute", simPool("a", "  colour = 1\n"),
			[]wantDiag{{summary: "Unsupported argument", detail: `"colour"`, at: "colour"}}},
		{"top-level attribute", "x = 1\n" + simPool("a", ""),
			[]wantDiag{{summary: "Unsupported argument", detail: `"x"`, at: "x"}}},
		{"wrong type string for int", simPool("a", `  min = "abc"`+"\n"),
			[]wantDiag{{summary: "Incorrect attribute value type", detail: `"min": a number is required`, at: `"abc"`}}},
		{"fraction for int", "pool \"a\" {\n provider = \"sim\"\n instance_type = \"x\"\n gpus_per_node = 1.5\n price_per_hour = 1\n max = 1\n}\n",
			[]wantDiag{{summary: "Incorrect attribute value type", detail: `"gpus_per_node": a whole number is required, got 1.5`, at: "1.5"}}},
		{"list for string", simPool("a", `  region = ["x"]`+"\n"),
			[]wantDiag{{summary: "Incorrect attribute value type", detail: `"region": string required, but have tuple`, at: `["x"]`}}},
		{"null", simPool("a", "  priority = null\n"),
			[]wantDiag{{summary: "Incorrect attribute value type", detail: "got null", at: "null"}}},
		{"variable", simPool("a", "  priority = var.x\n"),
			[]wantDiag{{summary: "Variables not allowed", at: "var.x"}}},
		{"bad duration", simPool("a", `  lead_time = "5 mins"`+"\n"),
			[]wantDiag{{summary: "Invalid duration", detail: `lead_time must be a duration such as`, at: `"5 mins"`}}},
		{"number for duration", "forecast {\n  step = 60\n}\n" + simPool("a", ""),
			[]wantDiag{{summary: "Invalid duration", detail: `step must be a duration`, at: "60"}}},
		{"zero duration", simPool("a", `  lead_time = "0s"`+"\n"),
			[]wantDiag{{summary: "Invalid value", detail: "lead_time must be longer than 0", at: `"0s"`}}},
		{"provision_timeout below lead_time", simPool("a", "  lead_time = \"20m\"\n  provision_timeout = \"10m\"\n"),
			[]wantDiag{{summary: "Invalid value", detail: "provision_timeout (10m0s) must not be shorter than lead_time (20m0s)", at: `"10m"`}}},
		{"min greater than max", simPool("a", "  min = 5\n"),
			[]wantDiag{{summary: "Invalid value", detail: "min (5) is greater than max (4)", at: "5\n"}}},
		{"negative min", simPool("a", "  min = -1\n"),
			[]wantDiag{{summary: "Invalid value", detail: "min must be 0 to 1000000, got -1", at: "-1"}}},
		{"zero gpus", "pool \"a\" {\n provider = \"sim\"\n instance_type = \"x\"\n gpus_per_node = 0\n price_per_hour = 1\n max = 1\n}\n",
			[]wantDiag{{summary: "Invalid value", detail: "gpus_per_node must be 1 to 1024, got 0", at: "0\n"}}},
		// A max whose GPUs overflow would make the fleet's size wrap to 0,
		// and turn the guard against absurd forecasts off.
		{"max that overflows", "pool \"a\" {\n provider = \"sim\"\n instance_type = \"x\"\n gpus_per_node = 8\n price_per_hour = 1\n max = 2305843009213693952\n}\n",
			[]wantDiag{{summary: "Invalid value", detail: "max must be 1 to 1000000, got 2305843009213693952", at: "2305843009213693952"}}},
		{"gpus per node absurd", "pool \"a\" {\n provider = \"sim\"\n instance_type = \"x\"\n gpus_per_node = 100000\n price_per_hour = 1\n max = 1\n}\n",
			[]wantDiag{{summary: "Invalid value", detail: "gpus_per_node must be 1 to 1024, got 100000", at: "100000"}}},
		{"negative price", "pool \"a\" {\n provider = \"sim\"\n instance_type = \"x\"\n gpus_per_node = 1\n price_per_hour = -2.5\n max = 1\n}\n",
			[]wantDiag{{summary: "Invalid value", detail: "price_per_hour must not be negative, got -2.5", at: "-2.5"}}},
		{"unknown capacity", simPool("a", `  capacity = "preemptible"`+"\n"),
			[]wantDiag{{summary: "Invalid value", detail: `Unknown capacity "preemptible"`, at: `"preemptible"`}}},
		{"unknown provider", "pool \"a\" {\n provider = \"azure\"\n instance_type = \"x\"\n gpus_per_node = 1\n price_per_hour = 1\n max = 1\n}\n",
			[]wantDiag{{summary: "Unknown provider", detail: `"azure"; the known providers are aws, gcp, plugin, sim`, at: `"azure"`}}},
		{"missing required attributes", "pool \"a\" {\n provider = \"sim\"\n}\n",
			[]wantDiag{
				// gohcl's order: by name.
				{summary: "Missing required argument", detail: `"gpus_per_node"`, at: "{"},
				{summary: "Missing required argument", detail: `"instance_type"`, at: "{"},
				{summary: "Missing required argument", detail: `"max"`, at: "{"},
				{summary: "Missing required argument", detail: `"price_per_hour"`, at: "{"},
			}},
		{"duplicate pool name", simPool("a", "") + simPool("b", "") + simPool("a", ""),
			[]wantDiag{{summary: "Duplicate pool name", detail: `"a" was already defined at test.hcl:1:1`, at: `"a"`, nth: 1}}},
		{"no pools", "forecast {}\n",
			[]wantDiag{{summary: "No pools", at: "forecast"}}},
		{"pool without name", "pool {" + pool + "}\n",
			[]wantDiag{{summary: "Missing name for pool", at: "{"}}},
		{"wrong provider block", simPool("a", "  aws {\n    asg = \"x\"\n  }\n"),
			[]wantDiag{{summary: "Wrong provider block", detail: `provider = "sim", so it cannot have an aws block; its settings go in a sim block`, at: "aws"}}},
		{"missing provider block", awsPool("a", ""),
			[]wantDiag{{summary: "Missing provider block", detail: `needs an aws block`, at: `"aws"`}}},
		{"duplicate provider block", awsPool("a", "  aws {\n    asg = \"x\"\n  }\n  aws {\n    asg = \"y\"\n  }\n"),
			[]wantDiag{{summary: "Duplicate aws block", at: "aws {", nth: 1}}},
		{"aws without asg", awsPool("a", "  aws {\n    endpoint = \"http://x\"\n  }\n"),
			[]wantDiag{{summary: "Missing ASG or launch template", at: "aws {"}}},
		{"aws with asg and asg_tag", awsPool("a", "  aws {\n    asg = \"x\"\n    asg_tag = \"k=v\"\n  }\n"),
			[]wantDiag{{summary: "Invalid value", detail: "only one of asg, asg_tag and launch_template", at: `"k=v"`}}},
		{"aws tag not KEY=VALUE", awsPool("a", "  aws {\n    asg_tag = \"pool\"\n  }\n"),
			[]wantDiag{{summary: "Invalid value", detail: `asg_tag must be KEY=VALUE`, at: `"pool"`}}},
		{"aws template settings on an ASG", awsPool("a", "  aws {\n    asg = \"x\"\n    subnet_id = \"subnet-1\"\n  }\n"),
			[]wantDiag{{summary: "Invalid value", detail: "subnet_id applies only with launch_template", at: `"subnet-1"`}}},
		{"aws bad reservation", awsPool("a", "  aws {\n    launch_template = \"gpu\"\n    capacity_reservation_id = \"r-1\"\n  }\n"),
			[]wantDiag{{summary: "Invalid value", detail: "must be a capacity reservation ID", at: `"r-1"`}}},
		{"aws capacity block without a reservation", awsPool("a", "  aws {\n    launch_template = \"gpu\"\n    capacity_block = true\n  }\n"),
			[]wantDiag{{summary: "Invalid value", detail: "capacity_block needs capacity_reservation_id", at: "true"}}},
		{"aws spot lookup on on-demand", awsPool("a", "  aws {\n    asg = \"x\"\n    spot_price_lookup = true\n  }\n"),
			[]wantDiag{{summary: "Invalid value", detail: `spot_price_lookup applies only to a pool with capacity = "spot"`, at: "true"}}},
		{"gcp missing attributes", "pool \"a\" {\n provider = \"gcp\"\n instance_type = \"x\"\n gpus_per_node = 1\n price_per_hour = 1\n max = 1\n gcp {\n  project = \"p\"\n }\n}\n",
			[]wantDiag{
				{summary: "Missing required argument", detail: `"mig"`, at: "{\n  project"},
				{summary: "Missing required argument", detail: `"zone"`, at: "{\n  project"},
			}},
		{"gcp zone and region", "pool \"a\" {\n provider = \"gcp\"\n instance_type = \"x\"\n gpus_per_node = 1\n price_per_hour = 1\n max = 1\n gcp {\n  project = \"p\"\n  mig = \"m\"\n  zone = \"us-central1-a\"\n  region = \"us-central1\"\n }\n}\n",
			[]wantDiag{{summary: "Invalid value", detail: "set zone (a zonal managed instance group) or region (a regional one), not both", at: `"us-central1"`}}},
		{"plugin pool without its plugin", "pool \"a\" {\n provider = \"plugin\"\n instance_type = \"x\"\n gpus_per_node = 1\n price_per_hour = 1\n max = 1\n target {\n  rack = \"r7\"\n }\n}\n",
			[]wantDiag{{summary: "Missing required argument", detail: `needs plugin = ...`, at: `"plugin"`}}},
		{"plugin pool naming no plugin block", "pool \"a\" {\n provider = \"plugin\"\n instance_type = \"x\"\n gpus_per_node = 1\n price_per_hour = 1\n max = 1\n plugin = \"racks\"\n}\n",
			[]wantDiag{{summary: "Unknown plugin", detail: `names plugin "racks", which the config has no plugin "racks" block for`, at: `"racks"`}}},
		{"plugin pool's target not literal", "pool \"a\" {\n provider = \"plugin\"\n instance_type = \"x\"\n gpus_per_node = 1\n price_per_hour = 1\n max = 1\n plugin = \"racks\"\n target {\n  rack = upper(\"r7\")\n }\n}\nplugin \"racks\" {\n path = \"/p\"\n sha256 = \"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\"\n}\n",
			[]wantDiag{{summary: "Invalid value", detail: "rack must be a literal value: strings, numbers, bools, lists and objects", at: "upper"}}},
		{"plugin pool without its plugin, its target wrong too", "pool \"a\" {\n provider = \"plugin\"\n instance_type = \"x\"\n gpus_per_node = 1\n price_per_hour = 1\n max = 1\n target {\n  rack = var.r\n }\n}\n",
			[]wantDiag{{summary: "Missing required argument", detail: `needs plugin = ...`, at: `"plugin"`},
				{summary: "Invalid value", detail: "rack must be a literal value", at: "var.r"}}},
		{"plugin config not literal", simPool("a", "") + "plugin \"racks\" {\n path = \"/p\"\n sha256 = \"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\"\n config {\n  ok = [-3, \"s\", true, { a = 1, \"b\" = [2] }, (4)]\n  big = 9007199254740993\n  nested = [[for x in [1] : x]]\n  tmpl = \"a${x}\"\n  not = !true\n }\n}\n",
			[]wantDiag{
				{summary: "Invalid value", detail: "big holds an integer beyond 2^53", at: "9007199254740993"},
				{summary: "Invalid value", detail: "nested must be a literal value", at: "[for"},
				{summary: "Invalid value", detail: "tmpl must be a literal value", at: "x}"},
				{summary: "Invalid value", detail: "not must be a literal value", at: "!true"},
			}},
		{"plugin path and env", simPool("a", "") + "plugin \"racks\" {\n path = \"bin/racks\"\n sha256 = \"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\"\n env = { \"A=B\" = \"1\", OK = \"2\" }\n}\n",
			[]wantDiag{
				{summary: "Invalid value", detail: `path must be the plugin executable's absolute path`, at: `"bin/racks"`},
				{summary: "Invalid value", detail: `"A=B" is not one`, at: `{ "A=B"`},
			}},
		{"plugin pool's plugin not a string", "pool \"a\" {\n provider = \"plugin\"\n instance_type = \"x\"\n gpus_per_node = 1\n price_per_hour = 1\n max = 1\n plugin = 5\n}\n",
			[]wantDiag{{summary: "Invalid value", detail: "plugin must be the name of a plugin block, a string", at: "5\n}"}}},
		{"target block on an AWS pool", "pool \"a\" {\n provider = \"aws\"\n instance_type = \"x\"\n gpus_per_node = 1\n price_per_hour = 1\n max = 1\n target {\n }\n aws {\n  asg = \"g\"\n }\n}\n",
			[]wantDiag{{summary: "Wrong provider block", detail: `cannot have a target block; its settings go in an aws block`, at: "target"}}},
		{"plugin attribute on an AWS pool", "pool \"a\" {\n provider = \"aws\"\n instance_type = \"x\"\n gpus_per_node = 1\n price_per_hour = 1\n max = 1\n plugin = \"racks\"\n aws {\n  asg = \"g\"\n }\n}\n",
			[]wantDiag{{summary: "Wrong provider attribute", detail: `cannot set plugin: that is for provider = "plugin" pools`, at: "plugin"}}},
		{"plugin block errors", simPool("a", "") + "plugin \"racks\" {\n path = \"\"\n sha256 = \"abc\"\n config {\n  x = 1\n }\n config {\n }\n}\nplugin \"racks\" {\n path = \"/p\"\n sha256 = \"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\"\n}\n",
			[]wantDiag{
				{summary: "Invalid value", detail: "path must not be empty", at: `""`},
				{summary: "Invalid value", detail: `sha256 must be the executable's SHA-256, 64 lowercase hex digits (sha256sum), got "abc"`, at: `"abc"`},
				{summary: "Duplicate config block", detail: "A plugin has one config block", at: "config {\n }"},
				{summary: "Duplicate plugin name", detail: `A plugin named "racks" was already defined`, at: "\"racks\" {\n path = \"/p\""},
			}},
		{"sim bad error rate and initial", simPool("a", "  sim {\n    capacity_error_rate = 1.5\n    initial = 9\n  }\n"),
			[]wantDiag{
				{summary: "Invalid value", detail: "capacity_error_rate must be between 0 and 1", at: "1.5"},
				{summary: "Invalid value", detail: "initial (9) is greater than the pool's max (4)", at: "9"},
			}},
		{"duplicate forecast block", simPool("a", "") + "forecast {}\nforecast {}\n",
			[]wantDiag{{summary: "Duplicate forecast block", detail: "already defined at test.hcl:8:1", at: "forecast", nth: 1}}},
		{"bad quantile", simPool("a", "") + "forecast {\n  quantile = 1\n}\n",
			[]wantDiag{{summary: "Invalid value", detail: "quantile must be between 0 and 1 (exclusive), got 1", at: "1\n}"}}},
		{"wait value not above 0", simPool("a", "") + "forecast {\n  wait_value_per_gpu_hour = 0\n}\n",
			[]wantDiag{{summary: "Invalid value", detail: "wait_value_per_gpu_hour must be above 0 (what a GPU-hour of waiting costs, in dollars), got 0", at: "0\n}"}}},
		{"wait value not a number", simPool("a", "") + "forecast {\n  wait_value_per_gpu_hour = \"lots\"\n}\n",
			[]wantDiag{{summary: "Incorrect attribute value type", at: "\"lots\"\n}"}}},
		{"horizon below step", simPool("a", "") + "forecast {\n  step = \"1h\"\n  horizon = \"30m\"\n}\n",
			[]wantDiag{{summary: "Invalid value", detail: "horizon (30m0s) must not be shorter than step (1h0m0s)", at: `"30m"`}}},
		{"history below horizon", simPool("a", "") + "forecast {\n  history = \"1h\"\n}\n",
			[]wantDiag{{summary: "Invalid value", detail: "history (1h0m0s) must not be shorter than horizon (2h0m0s)", at: `"1h"`}}},
		{"horizon below lead time", simPool("a", "  lead_time = \"3h\"\n"),
			[]wantDiag{{summary: "Invalid value", detail: `must reach past pool "a"'s lead_time (3h0m0s) plus the hysteresis (30m0s)`, at: `"3h"`}}},
		{"bad signal", simPool("a", "") + "drain {\n  signal = \"SIGKILL\"\n}\n",
			[]wantDiag{{summary: "Invalid value", detail: `Unknown signal "SIGKILL"; signal must be one of`, at: `"SIGKILL"`}}},
		{"limits", simPool("a", "  min = 2\n") + "limits {\n  max_gpus = 8\n  max_spend_per_hour = -1\n  max_scale_in_per_cycle = 0\n  silent_share_halt = 0\n}\n",
			[]wantDiag{
				{summary: "Invalid value", detail: "max_spend_per_hour must not be negative", at: "-1"},
				{summary: "Invalid value", detail: "max_scale_in_per_cycle must be 1 or more, got 0", at: "0\n  silent"},
				{summary: "Invalid value", detail: "silent_share_halt must be more than 0 and at most 1", at: "0\n}"},
			}},
		{"scale-in budget", simPool("a", "") + "limits {\n  scale_in_share = 1.5\n  scale_in_window = \"0s\"\n}\n",
			[]wantDiag{
				{summary: "Invalid value", detail: "scale_in_share must be more than 0 and at most 1, got 1.5", at: "1.5"},
				{summary: "Invalid value", detail: "scale_in_window must be longer than 0", at: `"0s"`},
			}},
		{"scale-in delays", simPool("a", "") + "limits {\n  scale_in_delay_after_launch = \"-1m\"\n  scale_in_unneeded_time = \"ten\"\n}\n",
			[]wantDiag{
				{summary: "Invalid value", detail: "scale_in_delay_after_launch must not be negative", at: `"-1m"`},
				{summary: "Invalid duration", detail: "scale_in_unneeded_time must be", at: `"ten"`},
			}},
		{"demand: bad URL", simPool("a", "") + "demand {\n  prometheus_url = \"prometheus:9090\"\n  prometheus_query = \"up\"\n}\n",
			[]wantDiag{{summary: "Invalid value", detail: "prometheus_url must be an http or https URL", at: `"prometheus:9090"`}}},
		{"demand: URL without query", simPool("a", "") + "demand {\n  prometheus_url = \"http://p:9090\"\n}\n",
			[]wantDiag{{summary: "Invalid value", detail: "prometheus_url needs prometheus_query", at: `"http://p:9090"`}}},
		{"demand: query without URL", simPool("a", "") + "demand {\n  prometheus_query = \"up\"\n}\n",
			[]wantDiag{{summary: "Invalid value", detail: "prometheus_query needs prometheus_url", at: `"up"`}}},
		{"demand: backfill without URL", simPool("a", "") + "demand {\n  backfill = true\n}\n",
			[]wantDiag{{summary: "Invalid value", detail: "backfill needs prometheus_url", at: `true`}}},
		{"demand: backfill not a bool", simPool("a", "") + "demand {\n  prometheus_url = \"http://p:9090\"\n  prometheus_query = \"up\"\n  backfill = \"soon\"\n}\n",
			[]wantDiag{{summary: "Incorrect attribute value type", at: `"soon"`}}},
		{"max_gpus below pool minimums", simPool("a", "  min = 2\n") + simPool("b", "  min = 1\n") + "limits {\n  max_gpus = 16\n}\n",
			[]wantDiag{{summary: "Invalid value", detail: "min nodes hold 24 GPUs together, more than max_gpus (16)", at: "16"}}},
		{"controller", simPool("a", "") + "controller {\n  listen = \"localhost\"\n  state_dir = \"\"\n  fleet = \"Prod_1\"\n}\n",
			[]wantDiag{
				{summary: "Invalid value", detail: "listen must be an address", at: `"localhost"`},
				{summary: "Invalid value", detail: "state_dir must not be empty", at: `""`},
				{summary: "Invalid value", detail: `fleet must be 1-63 lowercase letters, digits and dashes, starting and ending with a letter or digit (it is a tag value), got "Prod_1"`, at: `"Prod_1"`},
			}},
		{"controller: plain HTTP off loopback", simPool("a", "") + "controller {\n  listen = \"0.0.0.0:8790\"\n}\n",
			[]wantDiag{{summary: "Invalid value", detail: "the API would serve plain HTTP on 0.0.0.0:8790, which is not a loopback address", at: `"0.0.0.0:8790"`}}},
		{"controller: a certificate without its key", simPool("a", "") + "controller {\n  listen = \":8790\"\n  tls_cert_file = \"c.pem\"\n  bootstrap_token_file = \"\"\n}\n",
			[]wantDiag{
				{summary: "Invalid value", detail: "tls_cert_file needs tls_key_file", at: `"c.pem"`},
				{summary: "Invalid value", detail: "bootstrap_token_file must not be empty", at: `""`},
			}},
		{"controller: a GCP identity audience that is no URL", simPool("a", "") + "controller {\n  gcp_identity_audience = \"fleetcast\"\n}\n",
			[]wantDiag{{summary: "Invalid value", detail: `gcp_identity_audience must be the controller's URL as the agents reach it (https://HOST:PORT), got "fleetcast"`, at: `"fleetcast"`}}},
		{"synthetic", simPool("a", "") + "synthetic {\n  base_gpus = 10\n  peak_gpus = 5\n  peak_hour = 24\n  noise = -0.1\n}\n",
			[]wantDiag{
				{summary: "Invalid value", detail: "peak_gpus (5) must not be less than base_gpus (10)", at: "5\n"},
				{summary: "Invalid value", detail: "peak_hour must be an hour of the day from 0 to 23, got 24", at: "24"},
				{summary: "Invalid value", detail: "noise must not be negative", at: "-0.1"},
			}},
		{"simulate: negative checkpoint_duration", simPool("a", "") + "simulate {\n  checkpoint_duration = \"-5m\"\n}\n",
			[]wantDiag{{summary: "Invalid value", detail: `checkpoint_duration must not be negative (0 for at once), got "-5m"`, at: `"-5m"`}}},
		{"simulate: absurd checkpoint_duration", simPool("a", "") + "simulate {\n  checkpoint_duration = \"2d\"\n}\n",
			[]wantDiag{{summary: "Invalid value", detail: "checkpoint_duration must be at most 24h", at: `"2d"`}}},
		{"simulate: bad checkpoint_duration", simPool("a", "") + "simulate {\n  checkpoint_duration = 120\n}\n",
			[]wantDiag{{summary: "Invalid duration", detail: "checkpoint_duration must be a duration such as", at: "120"}}},
		{"simulate: unresponsive_jobs out of range", simPool("a", "") + "simulate {\n  unresponsive_jobs = 1.5\n}\n" + "simulate {}\n",
			[]wantDiag{
				{summary: "Invalid value", detail: "unresponsive_jobs must be a share of jobs from 0 to 1, got 1.5", at: "1.5"},
				{summary: "Duplicate simulate block", at: "simulate", nth: 1},
			}},
		{"simulate: unknown reservations", simPool("a", "") + "simulate {\n  reservations = \"grown\"\n}\n",
			[]wantDiag{{summary: "Invalid value", detail: `reservations must be "configured" (every policy holds the configured reservations) or "advised" (the predictive policy follows the baseline advice), got "grown"`, at: `"grown"`}}},
		{"simulate: unknown headroom_placeholders", simPool("a", "") + "simulate {\n  headroom_placeholders = \"half\"\n}\n",
			[]wantDiag{{summary: "Invalid value", detail: `headroom_placeholders must be "node" (each as wide as a node: the buffer is whole empty nodes) or "gpu"`, at: `"half"`}}},
		{"simulate: negative headroom_gpus", simPool("a", "") + "simulate {\n  headroom_gpus = -64\n}\n",
			[]wantDiag{{summary: "Invalid value", detail: "headroom_gpus", at: "-64"}}},
		{"simulate: bad advice_after", simPool("a", "") + "simulate {\n  advice_after = \"soon\"\n}\n",
			[]wantDiag{{summary: "Invalid duration", detail: "advice_after must be a duration such as", at: `"soon"`}}},
		{"simulate: negative unresponsive_jobs", simPool("a", "") + "simulate {\n  unresponsive_jobs = -0.02\n}\n",
			[]wantDiag{{summary: "Invalid value", detail: "unresponsive_jobs must be a share of jobs from 0 to 1, got -0.02", at: "-0.02"}}},
		// Found by review of the gohcl decoder: each is what the hand-written one said.
		{"infinite price", "pool \"a\" {\n provider = \"sim\"\n instance_type = \"x\"\n gpus_per_node = 1\n price_per_hour = 1/0\n max = 1\n}\n",
			[]wantDiag{{summary: "Number out of range", detail: "price_per_hour", at: "1/0"}}},
		{"infinite spend", simPool("a", "") + "limits {\n  max_spend_per_hour = -1/0\n}\n",
			[]wantDiag{{summary: "Number out of range", detail: "max_spend_per_hour", at: "-1/0"}}},
		{"price beyond float64, as a string", "pool \"a\" {\n provider = \"sim\"\n instance_type = \"x\"\n gpus_per_node = 1\n price_per_hour = \"1e309\"\n max = 1\n}\n",
			[]wantDiag{{summary: "Invalid value", detail: "price_per_hour is out of range.", at: `"1e309"`}}},
		{"fraction for int, as a string", "pool \"a\" {\n provider = \"sim\"\n instance_type = \"x\"\n gpus_per_node = \"1.5\"\n price_per_hour = 1\n max = 1\n}\n",
			[]wantDiag{{summary: "Incorrect attribute value type", detail: `"gpus_per_node": a whole number is required, got 1.5`, at: `"1.5"`}}},
		{"a provider block's type error hides none of its checks", simPool("a", "  sim {\n    capacity = \"x\"\n    initial = 99\n  }\n"),
			[]wantDiag{
				{summary: "Incorrect attribute value type", detail: `"capacity": a number is required`, at: `"x"`},
				{summary: "Invalid value", detail: "initial (99) is greater than the pool's max (4)", at: "99"},
			}},
		{"a provider block's unknown attribute hides none of its checks", awsPool("a", "  aws {\n    asg_tag = \"bad\"\n    asgg = \"x\"\n  }\n"),
			[]wantDiag{
				{summary: "Invalid value", detail: "asg_tag must be KEY=VALUE", at: `"bad"`},
				{summary: "Unsupported argument", detail: `"asgg"`, at: "asgg"},
			}},
		{"a provider block is checked when the provider is unknown", "pool \"a\" {\n provider = \"azure\"\n instance_type = \"x\"\n gpus_per_node = 1\n price_per_hour = 1\n max = 1\n aws {\n  asgg = \"x\"\n }\n}\n",
			[]wantDiag{
				{summary: "Unknown provider", at: `"azure"`},
				{summary: "Missing ASG or launch template", at: "aws {"},
				{summary: "Unsupported argument", detail: `Did you mean "asg"?`, at: "asgg"},
			}},
		{"an unsupported attribute is not evaluated", "x = var.y\n" + simPool("a", "  foo = null\n"),
			[]wantDiag{{summary: "Unsupported argument", detail: `"x"`, at: "x"}, {summary: "Unsupported argument", detail: `"foo"`, at: "foo"}}},
		{"a wrong provider block is not evaluated", simPool("a", "  aws {\n    asg = var.x\n  }\n"),
			[]wantDiag{{summary: "Wrong provider block", at: "aws"}}},
		{"a duplicate block is not evaluated", simPool("a", "") + "forecast {}\nforecast {\n  step = var.y\n}\n",
			[]wantDiag{{summary: "Duplicate forecast block", at: "forecast", nth: 1}}},
		{"a pool with a type error gets no cross-check", simPool("a", "  lead_time = \"3d\"\n  zones = \"x\"\n"),
			[]wantDiag{{summary: "Incorrect attribute value type", detail: `"zones"`, at: `"x"`}}},
		{"a forecast block with an error gets no cross-check", simPool("a", "  lead_time = \"3d\"\n") + "forecast {\n  quantile = 5\n}\n",
			[]wantDiag{{summary: "Invalid value", detail: "quantile must be between 0 and 1", at: "5\n}"}}},
		{"a misspelt pool block", "pools \"a\" {}\n" + simPool("a", ""),
			[]wantDiag{{summary: "Unsupported block type", detail: `Did you mean "pool"?`, at: "pools"}}},
		{"huge number", simPool("a", "  region = \"${1e99999999}\"\n"),
			[]wantDiag{{summary: "Number out of range", at: "1e99999999"}}},
		{"syntax error", "pool \"a\" {\n  min = \n}\n",
			[]wantDiag{{summary: "Invalid expression", at: "\n}"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) { wantErrors(t, tt.src, 0, tt.want, false) })
	}
}

// wantErrors parses src and checks that it gives the diagnostics want,
// in order: errors, each at the nth occurrence of its text in src from
// offset from (the start of a line) on, its detail holding want's (with
// exact, equal to it).
func wantErrors(t *testing.T, src string, from int, want []wantDiag, exact bool) {
	t.Helper()
	cfg, diags := config.Parse("test.hcl", []byte(src), registry.Blocks())
	if cfg != nil {
		t.Errorf("got a config despite errors")
	}
	if len(diags) != len(want) {
		t.Fatalf("got %d diagnostics, want %d:\n%s", len(diags), len(want), formatAll(diags))
	}
	for i, w := range want {
		d := diags[i]
		line, col := position(t, src[from:], w.at, w.nth)
		line += strings.Count(src[:from], "\n")
		detail := strings.Contains(d.Detail, w.detail)
		if exact {
			detail = d.Detail == w.detail
		}
		if d.Severity != hcl.DiagError || d.Summary != w.summary || !detail ||
			d.Subject == nil || d.Subject.Filename != "test.hcl" ||
			d.Subject.Start.Line != line || d.Subject.Start.Column != col {
			t.Errorf("diagnostic %d:\n got %s\nwant test.hcl:%d:%d: error: %s: ...%s...", i, config.FormatDiagnostic(d), line, col, w.summary, w.detail)
		}
	}
}

// position returns the 1-based line and column of the nth occurrence of sub in src.
func position(t *testing.T, src, sub string, nth int) (line, col int) {
	t.Helper()
	off := -1
	for i := 0; i <= nth; i++ {
		j := strings.Index(src[off+1:], sub)
		if j < 0 {
			t.Fatalf("%q occurs fewer than %d times in the source", sub, nth+1)
		}
		off += 1 + j
	}
	before := src[:off]
	line = strings.Count(before, "\n") + 1
	col = off - strings.LastIndex(before, "\n")
	return line, col
}

// TestParseManyErrors: errors from all over a file are reported in one pass,
// in source order.
func TestParseManyErrors(t *testing.T) {
	_, diags := registry.Load("test-fixtures/many-errors.hcl")
	var got []string
	for _, d := range diags {
		got = append(got, strconv.Itoa(d.Subject.Start.Line)+" "+d.Summary)
	}
	want := []string{
		"2 Unknown provider",
		"4 Incorrect attribute value type",
		"5 Invalid value",
		"9 Duplicate pool name",
		"10 Missing provider block",
		"18 Invalid value",
		"21 Duplicate forecast block",
		"24 Invalid value",
		"27 Unsupported block type",
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got\n%s\nwant\n%s\nfull:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"), formatAll(diags))
	}
}

func TestLoadMissingFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "nope.hcl")
	cfg, diags := registry.Load(path)
	if cfg != nil || len(diags) != 1 || !diags.HasErrors() || !strings.Contains(diags[0].Detail, path) {
		t.Fatalf("got %v, %s", cfg, formatAll(diags))
	}
	if got, want := config.FormatDiagnostic(diags[0]), "error: Cannot read config file: open "+path; !strings.HasPrefix(got, want) {
		t.Errorf("got %q, want prefix %q", got, want)
	}
}

func TestWriteDiagnostics(t *testing.T) {
	diags := hcl.Diagnostics{
		{Severity: hcl.DiagError, Summary: "Bad", Detail: "two\nlines", Subject: &hcl.Range{Filename: "f.hcl", Start: hcl.Pos{Line: 3, Column: 7}}},
		{Severity: hcl.DiagWarning, Summary: "Odd"},
	}
	var buf bytes.Buffer
	if err := config.WriteDiagnostics(&buf, diags); err != nil {
		t.Fatal(err)
	}
	want := "f.hcl:3:7: error: Bad: two lines\nwarning: Odd\n"
	if buf.String() != want {
		t.Errorf("got %q, want %q", buf.String(), want)
	}
}

func FuzzParse(f *testing.F) {
	files, _ := filepath.Glob("test-fixtures/*.hcl")
	for _, file := range files {
		src, err := os.ReadFile(file)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(src)
	}
	f.Add([]byte(simPool("a", "  sim {\n    capacity = 3\n  }\n") + `forecast { step = "1d12h" }`))
	f.Fuzz(func(t *testing.T, src []byte) {
		cfg, diags := config.Parse("fuzz.hcl", src, registry.Blocks())
		for _, d := range diags {
			config.FormatDiagnostic(d)
		}
		if diags.HasErrors() {
			if cfg != nil {
				t.Fatal("config returned with errors")
			}
			return
		}
		if cfg == nil || len(cfg.Pools) == 0 {
			t.Fatalf("no errors but config %v", cfg)
		}
		for _, p := range cfg.Pools {
			if p.Min < 0 || p.Min > p.Max || p.GPUsPerNode < 1 || p.PricePerHour < 0 ||
				p.LeadTime <= 0 || p.ProvisionTimeout < p.LeadTime || !p.Capacity.Valid() {
				t.Fatalf("invalid pool accepted: %+v", p)
			}
			if p.Settings == nil || p.Settings.Provider() != p.Provider {
				t.Fatalf("pool %q of provider %s has settings %#v", p.Name, p.Provider, p.Settings)
			}
			if s, ok := p.Settings.(sim.Settings); ok && (s.Capacity < 0 || s.Initial < 0 || s.Initial > p.Max || s.ErrorRate < 0 || s.ErrorRate > 1) {
				t.Fatalf("sim pool %q: invalid settings accepted: %+v", p.Name, s)
			}
		}
		if q := cfg.Forecast.Quantile; q < 0 || q >= 1 {
			t.Fatalf("quantile %v accepted", q)
		}
		if v := cfg.Forecast.WaitValuePerGPUHour; !(v > 0) || math.IsInf(v, 0) {
			t.Fatalf("wait value %v accepted", v)
		}
	})
}

func formatAll(diags hcl.Diagnostics) string {
	var buf bytes.Buffer
	config.WriteDiagnostics(&buf, diags)
	return buf.String()
}

// TestListenSecurity: plain HTTP is accepted on loopback, with TLS, or
// with insecure = true; anything else is refused at the listen attribute.
func TestListenSecurity(t *testing.T) {
	for _, tt := range []struct {
		controller string
		ok         bool
	}{
		{`listen = "127.0.0.1:8790"`, true},
		{`listen = "[::1]:8790"`, true},
		{`listen = "localhost:8790"`, true},
		{`listen = ":8790"`, false},
		{`listen = "10.0.0.5:8790"`, false},
		{"listen = \":8790\"\n  insecure = true", true},
		{"listen = \":8790\"\n  tls_cert_file = \"c\"\n  tls_key_file = \"k\"", true},
	} {
		_, diags := config.Parse("test.hcl", []byte(simPool("a", "")+"controller {\n  "+tt.controller+"\n}\n"), registry.Blocks())
		if diags.HasErrors() == tt.ok {
			t.Errorf("%s: %v, want ok %v", tt.controller, diags, tt.ok)
		}
	}
}

// TestParseRefusesNonText: a NUL byte or bytes that are not UTF-8 stop
// the parse at once, with one error naming the file, line, column and
// offset; UTF-8 text (comments, strings) is read as before.
func TestParseRefusesNonText(t *testing.T) {
	valid := simPool("a", "") + "# ünïcode ✓ and U+FFFD: \uFFFD\n"
	tests := []struct {
		name string
		src  string
		want string // the one diagnostic, formatted; "" for none
	}{
		{"utf-8 text", valid, ""},
		{"NUL", "pool \"a\" {\n  gpu\x00\n}\n", "x.hcl:2:6: error: Not a text file: byte 0x00 (NUL) at offset 16 (line 2, column 6): a config is UTF-8 text (HCL); is x.hcl a binary file?"},
		{"not utf-8", "# é\n\xff\xfe", "x.hcl:2:1: error: Not a text file: byte 0xff at offset 5 is not UTF-8 (line 2, column 1): a config is UTF-8 text (HCL); is x.hcl a binary file?"},
		{"cut character", "# ab\u00e9"[:5], "x.hcl:1:5: error: Not a text file: byte 0xc3 at offset 4 is not UTF-8 (line 1, column 5): a config is UTF-8 text (HCL); is x.hcl a binary file?"},
		{"column counts characters", "a = \"✓✓\x01\xc0\"", "x.hcl:1:9: error: Not a text file: byte 0xc0 at offset 12 is not UTF-8 (line 1, column 9): a config is UTF-8 text (HCL); is x.hcl a binary file?"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg, diags := config.Parse("x.hcl", []byte(tt.src), registry.Blocks())
			if tt.want == "" {
				if diags.HasErrors() || cfg == nil {
					t.Fatalf("refused: %s", formatAll(diags))
				}
				return
			}
			if cfg != nil || len(diags) != 1 || config.FormatDiagnostic(diags[0]) != tt.want {
				t.Fatalf("got %v,\n%s\nwant\n%s", cfg, formatAll(diags), tt.want)
			}
		})
	}
}

// TestLoadTooLarge: a file over config.MaxFileSize is refused, with its size and
// the limit, whether Stat can size it or not; one at the limit is parsed.
func TestLoadTooLarge(t *testing.T) {
	dir := t.TempDir()
	write := func(name string, src []byte) string {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, src, 0o600); err != nil {
			t.Fatal(err)
		}
		return path
	}
	min := []byte(simPool("a", ""))
	atLimit := append(bytes.Repeat([]byte("#\n"), (config.MaxFileSize-len(min))/2), min...)
	atLimit = append(atLimit, bytes.Repeat([]byte("\n"), config.MaxFileSize-len(atLimit))...)
	if cfg, diags := registry.Load(write("at-limit.hcl", atLimit)); diags.HasErrors() || cfg == nil {
		t.Errorf("a config of exactly MaxFileSize bytes: %s", formatAll(diags))
	}
	big := write("big.hcl", append(atLimit, '\n'))
	want := big + ":1:1: error: Config file too large: " + big + " is 262145 bytes; a config file may have at most 262144 (256 KiB). A fleet config is a few kilobytes of HCL: is this the right file?"
	if cfg, diags := registry.Load(big); cfg != nil || len(diags) != 1 || config.FormatDiagnostic(diags[0]) != want {
		t.Errorf("got\n%s\nwant\n%s", formatAll(diags), want)
	}
	if _, diags := config.Parse("p.hcl", make([]byte, config.MaxFileSize+1), registry.Blocks()); len(diags) != 1 || diags[0].Summary != "Config file too large" {
		t.Errorf("Parse of MaxFileSize+1 bytes: %s", formatAll(diags))
	}
	// A pipe has no size to Stat: the read stops one byte past the limit.
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	go func() {
		for range 3 {
			if _, err := w.Write(atLimit); err != nil {
				break
			}
		}
		w.Close()
	}()
	defer r.Close()
	pipe := "/dev/fd/" + strconv.Itoa(int(r.Fd()))
	if _, err := os.Stat(pipe); err != nil {
		t.Skip("no /dev/fd:", err)
	}
	if _, diags := registry.Load(pipe); len(diags) != 1 || !strings.Contains(diags[0].Detail, " is more than 262144 bytes; a config file may have at most 262144 (256 KiB).") {
		t.Errorf("a pipe of 3 x MaxFileSize bytes: %s", formatAll(diags))
	}
}

// TestParseRefusesDeepNesting: input nested deeper than config.MaxNesting, or with
// a line longer than config.MaxLineTokens (on which HCL's parser recurses, taking
// seconds and gigabytes), is refused with one error at the first token
// past the limit; brackets in strings and comments do not count, nor do
// newlines inside parentheses and brackets end a line.
func TestParseRefusesDeepNesting(t *testing.T) {
	tests := []struct {
		name string
		src  string
		want string // the first diagnostic's summary and position; "" for no error
	}{
		{"nested at the limit", simPool("a", "  zones = "+strings.Repeat("[", config.MaxNesting-1)+strings.Repeat("]", config.MaxNesting-1)+"\n"), "Incorrect attribute value type"},
		{"nested past the limit", "a = " + strings.Repeat("(", config.MaxNesting+10), "Nesting too deep x.hcl:1:37"},
		{"interpolations", "a = \"" + strings.Repeat("${\"", 20), "Nesting too deep x.hcl:1:53"},
		{"brackets in strings and comments", simPool("a", "  region = \""+strings.Repeat("((", 100)+"\" # "+strings.Repeat("[", 100)+"\n"), ""},
		{"a long line", "a = " + strings.Repeat("!", config.MaxLineTokens+10) + "x", "Line too long x.hcl:1:4099"},
		{"a long list over many lines", "a = [\n" + strings.Repeat("1,\n", config.MaxLineTokens), "Line too long x.hcl:2048:2"},
		{"many short lines", simPool("a", strings.Repeat("\n", 3*config.MaxLineTokens)), ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, diags := config.Parse("x.hcl", []byte(tt.src), registry.Blocks())
			got := ""
			if len(diags) > 0 {
				got = diags[0].Summary
				if tt.want != "" && strings.Contains(tt.want, "x.hcl") {
					got += fmt.Sprintf(" %s:%d:%d", diags[0].Subject.Filename, diags[0].Subject.Start.Line, diags[0].Subject.Start.Column)
				}
			}
			if got != tt.want || (strings.HasPrefix(tt.want, "Nesting") || strings.HasPrefix(tt.want, "Line")) && len(diags) != 1 {
				t.Errorf("got %q, want %q:\n%s", got, tt.want, formatAll(diags))
			}
		})
	}
}

// TestParseCapsDiagnostics: a file with more errors than config.MaxDiagnostics
// returns the first ones by position and one that counts the rest.
func TestParseCapsDiagnostics(t *testing.T) {
	tests := []struct {
		name, src string
		errors    int
	}{
		// The parser's errors and the decoder's.
		{"syntax", strings.Repeat("x = = 1\n", 100), 100},
		{"values", func() string {
			var b strings.Builder
			for i := range 99 {
				b.WriteString(simPool(fmt.Sprint("p", i), "  bogus = 1\n"))
			}
			return b.String()
		}(), 99},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg, diags := config.Parse("x.hcl", []byte(tt.src), registry.Blocks())
			if cfg != nil || len(diags) != config.MaxDiagnostics+1 || config.ErrorCount(diags) != tt.errors {
				t.Fatalf("%d diagnostics standing for %d errors, want %d for %d:\n%s", len(diags), config.ErrorCount(diags), config.MaxDiagnostics+1, tt.errors, formatAll(diags))
			}
			for i, d := range diags[:config.MaxDiagnostics] {
				if i > 0 && d.Subject.Start.Byte < diags[i-1].Subject.Start.Byte {
					t.Errorf("diagnostic %d is before the one it follows", i)
				}
			}
			if got, want := config.FormatDiagnostic(diags[config.MaxDiagnostics]), fmt.Sprintf("... and %d more errors", tt.errors-config.MaxDiagnostics); got != want {
				t.Errorf("last line %q, want %q", got, want)
			}
		})
	}
	if _, diags := config.Parse("x.hcl", []byte(strings.Repeat("x = = 1\n", config.MaxDiagnostics)), registry.Blocks()); len(diags) != config.MaxDiagnostics || config.ErrorCount(diags) != config.MaxDiagnostics {
		t.Errorf("%d errors: %d diagnostics standing for %d", config.MaxDiagnostics, len(diags), config.ErrorCount(diags))
	}
}

func TestOmittedString(t *testing.T) {
	for _, tt := range []struct {
		o    config.Omitted
		want string
	}{
		{config.Omitted{Errors: 1}, "... and 1 more error"},
		{config.Omitted{Errors: 9512345}, "... and 9512345 more errors"},
		{config.Omitted{Warnings: 2}, "... and 2 more warnings"},
		{config.Omitted{Errors: 3, Warnings: 1}, "... and 3 more errors and 1 more warning"},
	} {
		if got := tt.o.String(); got != tt.want {
			t.Errorf("%+v: %q, want %q", tt.o, got, tt.want)
		}
	}
}

// withoutRanges zeroes the config positions the pools' settings hold (for
// diagnostics), so that settings compare by value.
func withoutRanges(pools []fleet.Pool) {
	for i := range pools {
		if pools[i].Settings == nil {
			continue
		}
		v := reflect.New(reflect.TypeOf(pools[i].Settings)).Elem()
		v.Set(reflect.ValueOf(pools[i].Settings))
		for j := range v.NumField() {
			if f := v.Field(j); f.Type() == reflect.TypeFor[hcl.Range]() || f.Type() == reflect.TypeFor[map[string]hcl.Range]() {
				f.Set(reflect.Zero(f.Type()))
			}
		}
		pools[i].Settings = v.Interface().(fleet.ProviderSettings)
	}
}
