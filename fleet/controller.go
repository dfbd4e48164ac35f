package fleet

import (
	"fmt"
	"net"
	"time"
)

// ControllerSettings are the `controller` block: the long-running loop.
type ControllerSettings struct {
	// Interval between control cycles.
	Interval time.Duration
	// Listen is the address of the HTTP API.
	Listen string
	// StateDir holds the controller's durable state.
	StateDir string
	// Fleet names the fleet: set as a tag (fleetcast/fleet) on every
	// instance the controller launches where the cloud keeps tags, so that
	// it reaps only its own fleet's orphans (instances of pools taken out
	// of the config), never another controller's (a staging fleet beside
	// prod). Lowercase letters, digits and dashes, at most 63.
	Fleet string
	// TLSCertFile and TLSKeyFile are the API's certificate (with its chain)
	// and key, PEM; both or neither. They are read again when they change,
	// so a renewed certificate needs no restart.
	TLSCertFile string
	TLSKeyFile  string
	// Insecure allows plain HTTP on an address other than loopback: agents'
	// credentials and the API token then cross the network in the clear.
	Insecure bool
	// BootstrapTokenFile holds the fleet's bootstrap secret (mode 0600, at
	// least 32 characters), which a node presents with the cloud's signed
	// identity of its instance to get its own credential; it can do nothing
	// else. Empty: nodes cannot bootstrap (an operator issues credentials).
	BootstrapTokenFile string
	// AWSIdentityCertificates is a PEM file of the certificates that sign
	// EC2 instance identity documents (AWS publishes one per region; the
	// RSA ones), the trust root of AWS nodes' bootstrap.
	AWSIdentityCertificates string
	// GCPIdentityAudience is the audience Compute Engine identity tokens
	// must be for, the controller's URL as the agents reach it: set, GCP
	// nodes bootstrap with the identity token the metadata server signs
	// for it, and need no bootstrap secret. Empty: they cannot bootstrap.
	GCPIdentityAudience string
	// HA, when set, runs the controller as one of several replicas on
	// etcd; nil: one replica, its state in StateDir.
	HA *HASettings
}

// TLS reports whether the API serves HTTPS.
func (c ControllerSettings) TLS() bool { return c.TLSCertFile != "" }

// Loopback reports whether a listen address (host:port) accepts only
// connections from this machine: 127.0.0.0/8, ::1 or localhost. An empty
// host (":8790") listens on every interface.
func Loopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// CheckListen says why the API may not serve on addr as configured: plain
// HTTP on an address other than loopback, without Insecure.
func (c ControllerSettings) CheckListen(addr string) error {
	if c.TLS() || c.Insecure || Loopback(addr) {
		return nil
	}
	return fmt.Errorf("the API would serve plain HTTP on %s, which is not a loopback address: agents' credentials and the API token would cross the network in the clear. Set controller.tls_cert_file and tls_key_file, or listen on 127.0.0.1, or set controller.insecure = true to accept it", addr)
}

// DemandSettings are the `demand` block: an optional Prometheus query for the GPUs
// in use, for fleets that already export DCGM metrics. The demand history
// (what the forecaster learns from) counts the larger of the agents' GPUs
// in use and the query's answer; the planner's view of each node, and so
// every drain, still comes from the agents alone.
type DemandSettings struct {
	// PrometheusURL is the Prometheus server's base URL, e.g.
	// "http://prometheus:9090"; empty for no query.
	PrometheusURL string
	// PrometheusQuery is a PromQL expression giving the GPUs in use: a
	// scalar, or an instant vector whose samples are summed.
	PrometheusQuery string
	// PrometheusTimeout bounds each query.
	PrometheusTimeout time.Duration
	// Backfill, with a query, has the controller fill the steps of its
	// demand history's window (forecast.history) that it has not recorded
	// from the query's past answers (a range query) when it starts; the
	// recorded steps win. Default true; false where the query counts only
	// part of the demand (the GPUs on nodes without agents, say).
	Backfill bool
}

// DefaultControllerSettings are the controller block's defaults
// (config.Defaults).
func DefaultControllerSettings() ControllerSettings {
	return ControllerSettings{
		Interval: time.Minute,
		Listen:   "127.0.0.1:8790",
		StateDir: "./fleetcast-state",
		Fleet:    "default",
	}
}

// DefaultDemandSettings are the demand block's defaults (config.Defaults).
func DefaultDemandSettings() DemandSettings {
	return DemandSettings{PrometheusTimeout: 10 * time.Second, Backfill: true}
}

// SlurmSettings are the `slurm` block: how the controller reads a Slurm
// cluster's queue and nodes, through its client commands, as a user of
// the cluster would. The pools each partition's jobs are bought in are
// the pools' Partitions (the block's partition blocks).
type SlurmSettings struct {
	// Conf is the cluster's slurm.conf, given to the commands as
	// SLURM_CONF; "" for the commands' own default.
	Conf string
	// Squeue and Sinfo are the client commands, names found on the PATH
	// or paths (default "squeue" and "sinfo").
	Squeue, Sinfo string
	// Scontrol is the command that changes the nodes of pools that are
	// Slurm nodes (fleet.Pool.SlurmNodes), a name found on the PATH or a
	// path (default "scontrol").
	Scontrol string
	// SignalJobs is the signal (a name, "USR1") a draining Slurm node's
	// batch jobs that no agent knows are sent through Scancel (scancel
	// --signal=SIG --batch), once each, asking them to checkpoint and
	// end; "" sends none (the default: a job that does not handle the
	// signal would die of it).
	SignalJobs string
	Scancel    string
	// Tier is where a Slurm job's tier comes from, for what is bought for
	// it and the report of who used what: "qos" (its quality of service,
	// the default) or "partition". Its team is its account.
	Tier string
	// Interval is the time between reads, which run in the background:
	// a cycle plans with the latest.
	Interval time.Duration
	// Timeout bounds each command of a read; MaxOutputMiB what one may
	// print, in MiB.
	Timeout      time.Duration
	MaxOutputMiB int
}

// DefaultSlurmSettings are the slurm block's defaults (config.Defaults).
func DefaultSlurmSettings() SlurmSettings {
	return SlurmSettings{Squeue: "squeue", Sinfo: "sinfo", Scontrol: "scontrol", Scancel: "scancel", Tier: "qos", Interval: 30 * time.Second, Timeout: 10 * time.Second, MaxOutputMiB: 256}
}

// UsageSettings are how the controller keeps who used what (the usage
// block): how long it keeps each job's record and each hour's figures
// per team and tier, and how many distinct teams and tiers it tells apart.
type UsageSettings struct {
	// JobRetention is how long a job's record is kept after it ends;
	// HourRetention how long each hour's figures per team and tier.
	JobRetention  time.Duration
	HourRetention time.Duration
	// MaxTeams and MaxTiers bound the teams and tiers told apart: past
	// them, new ones are reported as "other", so no client can grow the
	// controller's memory or its metrics without bound.
	MaxTeams int
	MaxTiers int
	// ShareIdle shares each pool's idle cost among the teams that used
	// the pool, in proportion to their use, in reports and metrics that
	// do not ask otherwise; false charges it to "idle".
	ShareIdle bool
	// IdleThreshold is the activity, in percent, under which every GPU a
	// job holds must stay, for at least IdleWindow, for that time to be
	// allocated-idle (Job.AllocatedIdle); 0 counts none so.
	IdleThreshold int
	IdleWindow    time.Duration
}

// DefaultUsageSettings are the usage block's defaults.
func DefaultUsageSettings() UsageSettings {
	return UsageSettings{JobRetention: 30 * 24 * time.Hour, HourRetention: 365 * 24 * time.Hour, MaxTeams: 100, MaxTiers: 20,
		IdleThreshold: 5, IdleWindow: 10 * time.Minute}
}

// HASettings run the controller highly available on etcd
// (`controller { ha { ... } }`): replicas elect a leader, which alone
// acts, and keep the state in etcd (designs/ha-etcd.md).
type HASettings struct {
	// Etcd are the etcd members' client URLs.
	Etcd []string
	// LeaseTTL is the leader's lease: a leader cut off from etcd for this
	// long stops acting, and another is elected. Whole seconds.
	LeaseTTL time.Duration
	// Prefix is where the fleet's keys live in etcd: "/fleetcast/FLEET/"
	// by default.
	Prefix string
	// Advertise is this replica's API URL as the other replicas reach
	// it: followers forward writes to the leader's.
	Advertise string
	// TLSCAFile verifies the etcd members' certificates (the system's
	// roots when empty); TLSCertFile and TLSKeyFile are this replica's
	// client certificate and key, both or neither.
	TLSCAFile, TLSCertFile, TLSKeyFile string
	// APICAFile verifies the leader's API certificate when a follower
	// forwards to it (the system's roots when empty).
	APICAFile string
}

// DefaultLeaseTTL is the leader's lease when ha.lease_ttl is not set.
const DefaultLeaseTTL = 10 * time.Second

// HAPrefix is the fleet's prefix in etcd: ha.prefix, or
// "/fleetcast/FLEET/" ("default" for an unnamed fleet).
func (c ControllerSettings) HAPrefix() string {
	if c.HA != nil && c.HA.Prefix != "" {
		return c.HA.Prefix
	}
	name := c.Fleet
	if name == "" {
		name = "default"
	}
	return "/fleetcast/" + name + "/"
}
