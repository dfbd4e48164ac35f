package config_test

import (
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/fleetcast/autoscaler/config"
	"github.com/fleetcast/autoscaler/fleet"
	"github.com/fleetcast/autoscaler/providers/registry"
)

// slurmPools are three sim pools for the slurm block's partitions to name.
var slurmPools = simPool("h100-reserved", "") + simPool("h100-spot", "") + simPool("a100-od", "")

// TestParseSlurm: the slurm block decodes into Config.Slurm, each setting
// it leaves out taking its default (fleet.DefaultSlurmSettings), and its
// partition blocks into the pools' Partitions, sorted; without a block,
// Slurm is nil and no pool has a partition.
func TestParseSlurm(t *testing.T) {
	def := fleet.DefaultSlurmSettings()
	tests := []struct {
		name       string
		src        string
		want       *fleet.SlurmSettings
		partitions map[string][]string // by pool; the others have none
	}{
		{"no block", slurmPools, nil, nil},
		{"empty block", slurmPools + "slurm {}\n", &def, nil},
		{"only a partition", slurmPools + "slurm {\n  partition \"debug\" {\n    pools = [\"a100-od\"]\n  }\n}\n",
			&def, map[string][]string{"a100-od": {"debug"}}},
		{"every setting, before the pools it names", `slurm {
  conf           = "/etc/slurm/slurm.conf"
  squeue         = "/usr/bin/squeue"
  sinfo          = "/usr/bin/sinfo"
  interval       = "45s"
  timeout        = "5s"
  max_output_mib = 4096
  tier           = "partition"

  partition "train" {
    pools = ["h100-reserved", "h100-spot", "a100-od"]
  }
  partition "debug" {
    pools = ["a100-od"]
  }
  partition "batch" {
    pools = ["a100-od", "h100-spot"]
  }
}
` + slurmPools,
			&fleet.SlurmSettings{Conf: "/etc/slurm/slurm.conf", Squeue: "/usr/bin/squeue", Sinfo: "/usr/bin/sinfo", Scontrol: "scontrol", Scancel: "scancel", Tier: "partition",
				Interval: 45 * time.Second, Timeout: 5 * time.Second, MaxOutputMiB: 4096},
			map[string][]string{"h100-reserved": {"train"}, "h100-spot": {"batch", "train"}, "a100-od": {"batch", "debug", "train"}}},
		{"the bounds", slurmPools + "slurm {\n  interval = \"1s\"\n  timeout = \"1ms\"\n  max_output_mib = 1\n}\n",
			&fleet.SlurmSettings{Squeue: def.Squeue, Sinfo: def.Sinfo, Scontrol: def.Scontrol, Scancel: def.Scancel, Tier: "qos", Interval: time.Second, Timeout: time.Millisecond, MaxOutputMiB: 1}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg, diags := config.Parse("test.hcl", []byte(tt.src), registry.Blocks())
			if diags.HasErrors() {
				t.Fatalf("unexpected errors:\n%s", formatAll(diags))
			}
			if !reflect.DeepEqual(cfg.Slurm, tt.want) {
				t.Errorf("slurm: got %+v, want %+v", cfg.Slurm, tt.want)
			}
			for _, p := range cfg.Pools {
				if want := tt.partitions[p.Name]; !reflect.DeepEqual(p.Partitions, want) {
					t.Errorf("pool %s: partitions %q, want %q", p.Name, p.Partitions, want)
				}
			}
		})
	}
	if d := config.Defaults(); d.Slurm != nil {
		t.Errorf("Defaults has a slurm block: %+v", d.Slurm)
	}
}

// TestSlurmInputFile: slurm.conf is a file validate -files checks, at
// its attribute; a slurm block without conf names none.
func TestSlurmInputFile(t *testing.T) {
	src := slurmPools + "slurm {\n  conf = \"/etc/slurm/slurm.conf\"\n}\n"
	cfg, diags := config.Parse("test.hcl", []byte(src), registry.Blocks())
	if diags.HasErrors() {
		t.Fatal(formatAll(diags))
	}
	files := cfg.InputFiles()
	if len(files) != 1 || files[0].Field != "slurm.conf" || files[0].Path != "/etc/slurm/slurm.conf" ||
		files[0].At.String() != "test.hcl:23,10-33" || files[0].Why == "" {
		t.Errorf("input files: %+v", files)
	}
	cfg, diags = config.Parse("test.hcl", []byte(slurmPools+"slurm {}\n"), registry.Blocks())
	if diags.HasErrors() || len(cfg.InputFiles()) != 0 {
		t.Errorf("a slurm block naming no file: %v, %+v", diags, cfg.InputFiles())
	}
}

// TestParseSlurmErrors: each thing wrong with a slurm block is an error
// at the value it refuses (a pool's name in a partition's list, a
// partition's name), saying what was expected.
func TestParseSlurmErrors(t *testing.T) {
	// Each detail is exact; each place is from the first slurm block on.
	slurm := func(body string) string { return slurmPools + "slurm {\n" + body + "}\n" }
	tests := []struct {
		name string
		src  string
		want []wantDiag
	}{
		{"unknown pool", slurm("  partition \"train\" {\n    pools = [\"h100-reserved\", \"h100-spt\"]\n  }\n"),
			[]wantDiag{{"Unknown pool", `Partition "train" names pool "h100-spt", which the config has no pool "h100-spt" block for; pools names the pools whose nodes serve the partition. Did you mean "h100-spot"?`, `"h100-spt"`, 0}}},
		{"unknown pool, nothing close", slurm("  partition \"train\" {\n    pools = [\"tpu\"]\n  }\n"),
			[]wantDiag{{"Unknown pool", `Partition "train" names pool "tpu", which the config has no pool "tpu" block for; pools names the pools whose nodes serve the partition.`, `"tpu"`, 0}}},
		{"partition declared twice", slurm("  partition \"train\" {\n    pools = [\"h100-spot\"]\n  }\n  partition \"train\" {\n    pools = [\"a100-od\"]\n  }\n"),
			[]wantDiag{{"Duplicate partition block", `A partition "train" block was already defined at test.hcl:23:3; one block lists all of a partition's pools.`, `"train"`, 1}}},
		{"no pools", slurm("  partition \"train\" {\n    pools = []\n  }\n"),
			[]wantDiag{{"Invalid value", `pools must name at least one pool, whose nodes serve partition "train", got [].`, "[]", 0}}},
		{"pools left out", slurm("  partition \"train\" {\n  }\n"),
			[]wantDiag{{"Missing required argument", `The argument "pools" is required, but no definition was found.`, "{\n  }", 0}}},
		{"a pool twice", slurm("  partition \"train\" {\n    pools = [\"h100-spot\", \"a100-od\", \"h100-spot\"]\n  }\n"),
			[]wantDiag{{"Invalid value", `pools names pool "h100-spot" twice (first at test.hcl:24:14); name each pool once.`, `"h100-spot"`, 1}}},
		{"pools not a list", slurm("  partition \"train\" {\n    pools = \"h100-spot\"\n  }\n"),
			[]wantDiag{{"Incorrect attribute value type", `Inappropriate value for attribute "pools": list of string required, but have string.`, `"h100-spot"`, 0}}},
		{"empty partition name", slurm("  partition \"\" {\n    pools = [\"h100-spot\"]\n  }\n"),
			[]wantDiag{{"Invalid partition name", `A partition is named as in Slurm: not empty, with no commas or whitespace, got "".`, `""`, 0}}},
		{"partition name with a comma", slurm("  partition \"train,debug\" {\n    pools = [\"h100-spot\"]\n  }\n"),
			[]wantDiag{{"Invalid partition name", `A partition is named as in Slurm: not empty, with no commas or whitespace, got "train,debug".`, `"train,debug"`, 0}}},
		{"partition name with a space", slurm("  partition \"gpu train\" {\n    pools = [\"h100-tspot\"]\n  }\n"),
			[]wantDiag{
				{"Invalid partition name", `A partition is named as in Slurm: not empty, with no commas or whitespace, got "gpu train".`, `"gpu train"`, 0},
				{"Unknown pool", `Partition "gpu train" names pool "h100-tspot", which the config has no pool "h100-tspot" block for; pools names the pools whose nodes serve the partition. Did you mean "h100-spot"?`, `"h100-tspot"`, 0},
			}},
		{"partition without a name", slurm("  partition {\n    pools = [\"h100-spot\"]\n  }\n"),
			[]wantDiag{{"Missing name for partition", `All partition blocks must have 1 labels (name).`, "{\n    pools", 0}}},
		{"empty commands", slurm("  squeue = \"\"\n  sinfo = \"\"\n"),
			[]wantDiag{
				{"Invalid value", `squeue must be the squeue command, a name found on the PATH or a path; leave it out for "squeue".`, `""`, 0},
				{"Invalid value", `sinfo must be the sinfo command, a name found on the PATH or a path; leave it out for "sinfo".`, `""`, 1},
			}},
		{"an unknown tier", slurm("  tier = \"account\"\n"),
			[]wantDiag{{"Invalid value", `tier must be where a job's tier comes from, "qos" or "partition", got "account"; leave it out for "qos".`, `"account"`, 0}}},
		{"empty conf", slurm("  conf = \"\"\n"),
			[]wantDiag{{"Invalid value", `conf must be the path of the cluster's slurm.conf, given to the commands as SLURM_CONF; leave it out for the commands' own.`, `""`, 0}}},
		{"interval below 1s", slurm("  interval = \"500ms\"\n"),
			[]wantDiag{{"Invalid value", `interval must be 1s to 5m, got "500ms".`, `"500ms"`, 0}}},
		{"interval 0", slurm("  interval = \"0s\"\n"),
			[]wantDiag{{"Invalid value", `interval must be 1s to 5m, got "0s".`, `"0s"`, 0}}},
		{"interval not a duration", slurm("  interval = \"often\"\n"),
			[]wantDiag{{"Invalid duration", `interval must be ` + fleet.DurationForm + `; got "often".`, `"often"`, 0}}},
		{"interval above 5m", slurm("  interval = \"10m\"\n"),
			[]wantDiag{{"Invalid value", `interval must be 1s to 5m, got "10m".`, `"10m"`, 0}}},
		{"timeout above 1m", slurm("  timeout = \"90s\"\n"),
			[]wantDiag{{"Invalid value", `timeout must be longer than 0 and at most 1m, got "90s".`, `"90s"`, 0}}},
		{"timeout 0", slurm("  timeout = \"0s\"\n"),
			[]wantDiag{{"Invalid value", `timeout must be longer than 0, got "0s".`, `"0s"`, 0}}},
		{"timeout negative", slurm("  timeout = \"-10s\"\n"),
			[]wantDiag{{"Invalid value", `timeout must be longer than 0, got "-10s".`, `"-10s"`, 0}}},
		{"max_output_mib 0", slurm("  max_output_mib = 0\n"),
			[]wantDiag{{"Invalid value", `max_output_mib must be 1 to 4096, got 0.`, "0\n}", 0}}},
		{"max_output_mib above 4096", slurm("  max_output_mib = 4097\n"),
			[]wantDiag{{"Invalid value", `max_output_mib must be 1 to 4096, got 4097.`, "4097", 0}}},
		{"a misspelt attribute", slurm("  intervl = \"1m\"\n"),
			[]wantDiag{{"Unsupported argument", `An argument named "intervl" is not expected here. Did you mean "interval"?`, "intervl", 0}}},
		{"an unknown block", slurm("  partitions \"train\" {\n    pools = [\"h100-spot\"]\n  }\n"),
			[]wantDiag{{"Unsupported block type", `Blocks of type "partitions" are not expected here. Did you mean "partition"?`, "partitions", 0}}},
		{"slurm declared twice", slurm("  interval = \"1m\"\n") + "slurm {\n  interval = var.x\n}\n",
			[]wantDiag{{"Duplicate slurm block", `A slurm block was already defined at test.hcl:22:1; there can be only one.`, "slurm", 1}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) { wantErrors(t, tt.src, strings.Index(tt.src, "slurm {"), tt.want, true) })
	}
}

// racks is a plugin block and a pool of its servers, with extra in the
// pool's body: the pools whose instances are Slurm nodes by name.
func racks(name, extra string) string { return racksOf(name, 8, extra) }

// racksOf is racks with servers of gpus GPUs.
func racksOf(name string, gpus int, extra string) string {
	return "pool \"" + name + "\" {\n  provider = \"plugin\"\n  plugin = \"racks\"\n  instance_type = \"dgx\"\n  gpus_per_node = " + strconv.Itoa(gpus) + "\n  price_per_hour = 1\n  max = 4\n" + extra + "}\n"
}

const racksPlugin = "plugin \"racks\" {\n  path = \"/bin/racks\"\n  sha256 = \"0000000000000000000000000000000000000000000000000000000000000000\"\n}\n"

// TestParsePoolSlurmNodes: a pool's slurm block's nodes, a Slurm
// hostlist, are the pool's SlurmNodes, expanded in order; pools without
// one have none; pools of alike instances may share names. The slurm
// block's scontrol, scancel and signal_jobs.
func TestParsePoolSlurmNodes(t *testing.T) {
	src := racksPlugin + racks("dgx", "  slurm {\n    nodes = \"dgx-[1-3],dgx-b[08-09]\"\n  }\n") + racks("other", "") +
		racks("spot", "  slurm {\n    nodes = \"dgx-[1-4]\"\n  }\n") +
		"slurm {\n  scontrol = \"/usr/bin/scontrol\"\n  scancel = \"/usr/bin/scancel\"\n  signal_jobs = \"sigusr1\"\n}\n"
	cfg, diags := config.Parse("test.hcl", []byte(src), registry.Blocks())
	if diags.HasErrors() {
		t.Fatal(formatAll(diags))
	}
	if want := []string{"dgx-1", "dgx-2", "dgx-3", "dgx-b08", "dgx-b09"}; !reflect.DeepEqual(cfg.Pools[0].SlurmNodes, want) || cfg.Pools[1].SlurmNodes != nil {
		t.Errorf("slurm nodes: %q and %q, want %q and none", cfg.Pools[0].SlurmNodes, cfg.Pools[1].SlurmNodes, want)
	}
	if cfg.Slurm.Scontrol != "/usr/bin/scontrol" || fleet.DefaultSlurmSettings().Scontrol != "scontrol" {
		t.Errorf("scontrol: %q (default %q)", cfg.Slurm.Scontrol, fleet.DefaultSlurmSettings().Scontrol)
	}
	if want := []string{"dgx-1", "dgx-2", "dgx-3", "dgx-4"}; !reflect.DeepEqual(cfg.Pools[2].SlurmNodes, want) {
		t.Errorf("spot's slurm nodes: %q, want %q", cfg.Pools[2].SlurmNodes, want)
	}
	if def := fleet.DefaultSlurmSettings(); cfg.Slurm.Scancel != "/usr/bin/scancel" || cfg.Slurm.SignalJobs != "USR1" || def.Scancel != "scancel" || def.SignalJobs != "" {
		t.Errorf("scancel %q, signal_jobs %q (defaults %q, %q)", cfg.Slurm.Scancel, cfg.Slurm.SignalJobs, def.Scancel, def.SignalJobs)
	}
}

// TestParsePoolSlurmErrors: each thing wrong with a pool's Slurm nodes is
// an error at what is wrong, saying what was expected.
func TestParsePoolSlurmErrors(t *testing.T) {
	nodes := func(list string) string { return "  slurm {\n    nodes = \"" + list + "\"\n  }\n" }
	block := "slurm {}\n"
	tests := []struct {
		name string
		src  string
		want []wantDiag
	}{
		{"not a hostlist", racks("dgx", nodes("dgx-[1-")) + block,
			[]wantDiag{{"Invalid value", `nodes must be a Slurm hostlist of the pool's node names, as slurm.conf declares them ("gpu-[01-32]"): `, `"dgx-[1-"`, 0}}},
		{"empty", racks("dgx", nodes("")) + block,
			[]wantDiag{{"Invalid value", `nodes must be a Slurm hostlist of the pool's node names, as slurm.conf declares them ("gpu-[01-32]"): hostlist "": an empty name.`, `""`, 0}}},
		{"a name twice", racks("dgx", nodes("dgx-[1-4],dgx-2")) + block,
			[]wantDiag{{"Invalid value", `nodes names node "dgx-2" twice; name each node once.`, `"dgx-[1-4],dgx-2"`, 0}}},
		{"fewer than max", racks("dgx", nodes("dgx-[1-3]")) + block,
			[]wantDiag{{"Invalid value", `nodes names 3 nodes, fewer than the pool's max (4): each node the pool may have is one of its Slurm nodes.`, `"dgx-[1-3]"`, 0}}},
		{"nodes left out", racks("dgx", "  slurm {\n  }\n") + block,
			[]wantDiag{{"Missing required argument", `The argument "nodes" is required, but no definition was found.`, "{\n  }", 0}}},
		{"no slurm block", racks("dgx", nodes("dgx-[1-4]")),
			[]wantDiag{{"Missing slurm block", `Pool "dgx" is a set of Slurm nodes, so the config needs a slurm block, which says how to reach the cluster: slurm { conf = "/etc/slurm/slurm.conf" }.`, "slurm {\n    nodes", 0}}},
		{"instances named by the cloud", simPool("sim", nodes("s-[1-4]")) + block,
			[]wantDiag{{"Unnamed instances", `Pool "sim" has provider = "sim", whose instances have IDs of their own; a pool's Slurm nodes are its instances by name, as a plugin's servers are (provider = "plugin", each server listed by its node's name).`, "slurm {\n    nodes", 0}}},
		{"a node in two pools of unlike instances", racks("a", nodes("dgx-[1-4]")) + racksOf("b", 4, nodes("dgx-[4-7]")) + block,
			[]wantDiag{{"Invalid value", `, with 8 GPUs per node of model "", not 4 of "": pools share a Slurm node only where their instances are alike, so that either serves it.`, `"dgx-[4-7]"`, 0}}},
		{"a pool with two", racks("dgx", nodes("dgx-[1-4]")+nodes("dgx-[5-8]")) + block,
			[]wantDiag{{"Duplicate slurm block", `A slurm block was already defined at test.hcl:`, "slurm {\n    nodes", 1}}},
		{"empty scontrol", racks("dgx", "") + "slurm {\n  scontrol = \"\"\n}\n",
			[]wantDiag{{"Invalid value", `scontrol must be the scontrol command, a name found on the PATH or a path; leave it out for "scontrol".`, `""`, 0}}},
		{"empty scancel", racks("dgx", "") + "slurm {\n  scancel = \"\"\n}\n",
			[]wantDiag{{"Invalid value", `scancel must be the scancel command, a name found on the PATH or a path; leave it out for "scancel".`, `""`, 0}}},
		{"a signal no job can catch", racks("dgx", "") + "slurm {\n  signal_jobs = \"KILL\"\n}\n",
			[]wantDiag{{"Invalid value", `signal_jobs must be the signal a draining node's jobs are asked to checkpoint by, one of USR1, USR2, TERM, INT, HUP, QUIT, CONT, URG, ALRM, XCPU, WINCH ("SIG" before it is fine), got "KILL"; leave it out to send none.`, `"KILL"`, 0}}},
		{"an empty signal", racks("dgx", "") + "slurm {\n  signal_jobs = \"\"\n}\n",
			[]wantDiag{{"Invalid value", `signal_jobs must be the signal a draining node's jobs are asked to checkpoint by, one of USR1`, `""`, 0}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) { wantErrors(t, racksPlugin+tt.src, 0, tt.want, false) })
	}
}
