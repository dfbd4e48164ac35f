package config

import (
	"github.com/hashicorp/hcl/v2"
)

// The config file, as gohcl decodes it. Each block's struct holds its
// attributes' values and, in the fields tagged attr_value_range, where
// they are, so that every check names the value it refuses. An absent
// attribute keeps its zero value and the zero Range; its default is
// applied from Defaults.

// rootSchema is a config file's: its pools, and the blocks it may have
// once each (decoded one by one, so that a duplicate does not hide the
// first's errors).
var rootSchema = &hcl.BodySchema{Blocks: []hcl.BlockHeaderSchema{
	{Type: "pool", LabelNames: []string{"name"}},
	{Type: "plugin", LabelNames: []string{"name"}},
	{Type: "tier", LabelNames: []string{"name"}},
	{Type: "team", LabelNames: []string{"name"}},
	{Type: "forecast"}, {Type: "drain"}, {Type: "limits"}, {Type: "controller"},
	{Type: "demand"}, {Type: "synthetic"}, {Type: "simulate"}, {Type: "slurm"}, {Type: "usage"},
}}

type poolBody struct {
	// Name and where it and the block are, from the block's header.
	Name      string
	NameRange hcl.Range
	DefRange  hcl.Range

	Provider         string   `hcl:"provider"`
	Region           string   `hcl:"region,optional"`
	Zones            []string `hcl:"zones,optional"`
	InstanceType     string   `hcl:"instance_type"`
	GPUModel         string   `hcl:"gpu_model,optional"`
	GPUsPerNode      int      `hcl:"gpus_per_node"`
	Capacity         string   `hcl:"capacity,optional"`
	PricePerHour     float64  `hcl:"price_per_hour"`
	LeadTime         string   `hcl:"lead_time,optional"`
	ProvisionTimeout string   `hcl:"provision_timeout,optional"`
	Min              int      `hcl:"min,optional"`
	Max              int      `hcl:"max"`
	Priority         int      `hcl:"priority,optional"`
	// Rest holds the provider block and the slurm block.
	Rest hcl.Body `hcl:",remain"`
	// slurm is the pool's slurm block (nil: none), decoded by decodePool
	// for the checks across pools (checkSlurmNodes).
	slurm        *hcl.Block
	slurmNodesAt hcl.Range

	ProviderAt         hcl.Range `hcl:"provider,attr_value_range"`
	InstanceTypeAt     hcl.Range `hcl:"instance_type,attr_value_range"`
	GPUsPerNodeAt      hcl.Range `hcl:"gpus_per_node,attr_value_range"`
	CapacityAt         hcl.Range `hcl:"capacity,attr_value_range"`
	PricePerHourAt     hcl.Range `hcl:"price_per_hour,attr_value_range"`
	LeadTimeAt         hcl.Range `hcl:"lead_time,attr_value_range"`
	ProvisionTimeoutAt hcl.Range `hcl:"provision_timeout,attr_value_range"`
	MinAt              hcl.Range `hcl:"min,attr_value_range"`
	MaxAt              hcl.Range `hcl:"max,attr_value_range"`
}

type forecastBody struct {
	Step       string  `hcl:"step,optional"`
	Horizon    string  `hcl:"horizon,optional"`
	Quantile   float64 `hcl:"quantile,optional"`
	History    string  `hcl:"history,optional"`
	Hysteresis string  `hcl:"hysteresis,optional"`
	WaitValue  float64 `hcl:"wait_value_per_gpu_hour,optional"`

	WaitValueAt  hcl.Range `hcl:"wait_value_per_gpu_hour,attr_value_range"`
	StepAt       hcl.Range `hcl:"step,attr_value_range"`
	HorizonAt    hcl.Range `hcl:"horizon,attr_value_range"`
	QuantileAt   hcl.Range `hcl:"quantile,attr_value_range"`
	HistoryAt    hcl.Range `hcl:"history,attr_value_range"`
	HysteresisAt hcl.Range `hcl:"hysteresis,attr_value_range"`
}

type drainBody struct {
	CheckpointMaxAge string `hcl:"checkpoint_max_age,optional"`
	Timeout          string `hcl:"timeout,optional"`
	Signal           string `hcl:"signal,optional"`
	LongRunningAfter string `hcl:"long_running_after,optional"`

	CheckpointMaxAgeAt hcl.Range `hcl:"checkpoint_max_age,attr_value_range"`
	TimeoutAt          hcl.Range `hcl:"timeout,attr_value_range"`
	SignalAt           hcl.Range `hcl:"signal,attr_value_range"`
	LongRunningAfterAt hcl.Range `hcl:"long_running_after,attr_value_range"`
}

type limitsBody struct {
	MaxGPUs                 int     `hcl:"max_gpus,optional"`
	MaxSpendPerHour         float64 `hcl:"max_spend_per_hour,optional"`
	MaxScaleInPerCycle      int     `hcl:"max_scale_in_per_cycle,optional"`
	ScaleInShare            float64 `hcl:"scale_in_share,optional"`
	ScaleInWindow           string  `hcl:"scale_in_window,optional"`
	SilentShareHalt         float64 `hcl:"silent_share_halt,optional"`
	ScaleInDelayAfterLaunch string  `hcl:"scale_in_delay_after_launch,optional"`
	ScaleInUnneededTime     string  `hcl:"scale_in_unneeded_time,optional"`

	MaxGPUsAt                 hcl.Range `hcl:"max_gpus,attr_value_range"`
	MaxSpendPerHourAt         hcl.Range `hcl:"max_spend_per_hour,attr_value_range"`
	MaxScaleInPerCycleAt      hcl.Range `hcl:"max_scale_in_per_cycle,attr_value_range"`
	ScaleInShareAt            hcl.Range `hcl:"scale_in_share,attr_value_range"`
	ScaleInWindowAt           hcl.Range `hcl:"scale_in_window,attr_value_range"`
	SilentShareHaltAt         hcl.Range `hcl:"silent_share_halt,attr_value_range"`
	ScaleInDelayAfterLaunchAt hcl.Range `hcl:"scale_in_delay_after_launch,attr_value_range"`
	ScaleInUnneededTimeAt     hcl.Range `hcl:"scale_in_unneeded_time,attr_value_range"`
}

type controllerBody struct {
	Interval                string  `hcl:"interval,optional"`
	Listen                  string  `hcl:"listen,optional"`
	StateDir                string  `hcl:"state_dir,optional"`
	AgentTimeout            string  `hcl:"agent_timeout,optional"`
	Fleet                   string  `hcl:"fleet,optional"`
	TLSCertFile             string  `hcl:"tls_cert_file,optional"`
	TLSKeyFile              string  `hcl:"tls_key_file,optional"`
	Insecure                bool    `hcl:"insecure,optional"`
	BootstrapTokenFile      string  `hcl:"bootstrap_token_file,optional"`
	AWSIdentityCertificates string  `hcl:"aws_identity_certificates,optional"`
	GCPIdentityAudience     string  `hcl:"gcp_identity_audience,optional"`
	HA                      *haBody `hcl:"ha,block"`

	IntervalAt                hcl.Range `hcl:"interval,attr_value_range"`
	ListenAt                  hcl.Range `hcl:"listen,attr_value_range"`
	StateDirAt                hcl.Range `hcl:"state_dir,attr_value_range"`
	AgentTimeoutAt            hcl.Range `hcl:"agent_timeout,attr_value_range"`
	FleetAt                   hcl.Range `hcl:"fleet,attr_value_range"`
	TLSCertFileAt             hcl.Range `hcl:"tls_cert_file,attr_value_range"`
	TLSKeyFileAt              hcl.Range `hcl:"tls_key_file,attr_value_range"`
	InsecureAt                hcl.Range `hcl:"insecure,attr_value_range"`
	BootstrapTokenFileAt      hcl.Range `hcl:"bootstrap_token_file,attr_value_range"`
	AWSIdentityCertificatesAt hcl.Range `hcl:"aws_identity_certificates,attr_value_range"`
	GCPIdentityAudienceAt     hcl.Range `hcl:"gcp_identity_audience,attr_value_range"`
}

type usageBody struct {
	JobRetention  string `hcl:"job_retention,optional"`
	HourRetention string `hcl:"hour_retention,optional"`
	MaxTeams      int    `hcl:"max_teams,optional"`
	MaxTiers      int    `hcl:"max_tiers,optional"`
	ShareIdle     bool   `hcl:"share_idle,optional"`
	IdleThreshold int    `hcl:"idle_threshold,optional"`
	IdleWindow    string `hcl:"idle_window,optional"`

	JobRetentionAt  hcl.Range `hcl:"job_retention,attr_value_range"`
	IdleThresholdAt hcl.Range `hcl:"idle_threshold,attr_value_range"`
	IdleWindowAt    hcl.Range `hcl:"idle_window,attr_value_range"`
	HourRetentionAt hcl.Range `hcl:"hour_retention,attr_value_range"`
	MaxTeamsAt      hcl.Range `hcl:"max_teams,attr_value_range"`
	MaxTiersAt      hcl.Range `hcl:"max_tiers,attr_value_range"`
	ShareIdleAt     hcl.Range `hcl:"share_idle,attr_value_range"`
}

type demandBody struct {
	PrometheusURL     string `hcl:"prometheus_url,optional"`
	PrometheusQuery   string `hcl:"prometheus_query,optional"`
	PrometheusTimeout string `hcl:"prometheus_timeout,optional"`
	Backfill          bool   `hcl:"backfill,optional"`

	PrometheusURLAt     hcl.Range `hcl:"prometheus_url,attr_value_range"`
	PrometheusQueryAt   hcl.Range `hcl:"prometheus_query,attr_value_range"`
	PrometheusTimeoutAt hcl.Range `hcl:"prometheus_timeout,attr_value_range"`
	BackfillAt          hcl.Range `hcl:"backfill,attr_value_range"`
}

type syntheticBody struct {
	Seed     int64   `hcl:"seed,optional"`
	BaseGPUs int     `hcl:"base_gpus,optional"`
	PeakGPUs int     `hcl:"peak_gpus,optional"`
	PeakHour int     `hcl:"peak_hour,optional"`
	Noise    float64 `hcl:"noise,optional"`

	SeedAt     hcl.Range `hcl:"seed,attr_value_range"`
	BaseGPUsAt hcl.Range `hcl:"base_gpus,attr_value_range"`
	PeakGPUsAt hcl.Range `hcl:"peak_gpus,attr_value_range"`
	PeakHourAt hcl.Range `hcl:"peak_hour,attr_value_range"`
	NoiseAt    hcl.Range `hcl:"noise,attr_value_range"`
}

type simulateBody struct {
	CheckpointInterval       string  `hcl:"checkpoint_interval,optional"`
	SpotInterruptionsPerHour float64 `hcl:"spot_interruptions_per_hour,optional"`
	SpotNotice               string  `hcl:"spot_notice,optional"`
	CheckpointDuration       string  `hcl:"checkpoint_duration,optional"`
	UnresponsiveJobs         float64 `hcl:"unresponsive_jobs,optional"`
	Reservations             string  `hcl:"reservations,optional"`
	AdviceAfter              string  `hcl:"advice_after,optional"`
	HeadroomGPUs             int     `hcl:"headroom_gpus,optional"`
	HeadroomPlaceholders     string  `hcl:"headroom_placeholders,optional"`

	CheckpointIntervalAt       hcl.Range `hcl:"checkpoint_interval,attr_value_range"`
	SpotInterruptionsPerHourAt hcl.Range `hcl:"spot_interruptions_per_hour,attr_value_range"`
	SpotNoticeAt               hcl.Range `hcl:"spot_notice,attr_value_range"`
	CheckpointDurationAt       hcl.Range `hcl:"checkpoint_duration,attr_value_range"`
	UnresponsiveJobsAt         hcl.Range `hcl:"unresponsive_jobs,attr_value_range"`
	ReservationsAt             hcl.Range `hcl:"reservations,attr_value_range"`
	AdviceAfterAt              hcl.Range `hcl:"advice_after,attr_value_range"`
	HeadroomGPUsAt             hcl.Range `hcl:"headroom_gpus,attr_value_range"`
	HeadroomPlaceholdersAt     hcl.Range `hcl:"headroom_placeholders,attr_value_range"`
}

type slurmBody struct {
	Conf         string `hcl:"conf,optional"`
	Squeue       string `hcl:"squeue,optional"`
	Sinfo        string `hcl:"sinfo,optional"`
	Scontrol     string `hcl:"scontrol,optional"`
	Scancel      string `hcl:"scancel,optional"`
	SignalJobs   string `hcl:"signal_jobs,optional"`
	Tier         string `hcl:"tier,optional"`
	Interval     string `hcl:"interval,optional"`
	Timeout      string `hcl:"timeout,optional"`
	MaxOutputMiB int    `hcl:"max_output_mib,optional"`
	// Rest holds the partition blocks.
	Rest hcl.Body `hcl:",remain"`

	ConfAt         hcl.Range `hcl:"conf,attr_value_range"`
	SqueueAt       hcl.Range `hcl:"squeue,attr_value_range"`
	SinfoAt        hcl.Range `hcl:"sinfo,attr_value_range"`
	ScontrolAt     hcl.Range `hcl:"scontrol,attr_value_range"`
	ScancelAt      hcl.Range `hcl:"scancel,attr_value_range"`
	SignalJobsAt   hcl.Range `hcl:"signal_jobs,attr_value_range"`
	TierAt         hcl.Range `hcl:"tier,attr_value_range"`
	IntervalAt     hcl.Range `hcl:"interval,attr_value_range"`
	TimeoutAt      hcl.Range `hcl:"timeout,attr_value_range"`
	MaxOutputMiBAt hcl.Range `hcl:"max_output_mib,attr_value_range"`
}

// partitionSchema is a slurm block's blocks: partition "NAME", each
// decoded into a partitionBody.
var partitionSchema = hcl.BlockHeaderSchema{Type: "partition", LabelNames: []string{"name"}}

// poolSlurmSchema is a pool's slurm block, decoded into a poolSlurmBody.
var poolSlurmSchema = hcl.BlockHeaderSchema{Type: "slurm"}

// poolMIGSchema is a pool's MIG layout's block.
var poolMIGSchema = hcl.BlockHeaderSchema{Type: "mig"}

type migBody struct {
	Layout []string `hcl:"layout"`

	LayoutAt hcl.Range `hcl:"layout,attr_value_range"`
}

type poolSlurmBody struct {
	Nodes string `hcl:"nodes"`

	NodesAt hcl.Range `hcl:"nodes,attr_value_range"`
}

type partitionBody struct {
	Pools []string `hcl:"pools"`

	PoolsAt hcl.Range `hcl:"pools,attr_value_range"`
}
