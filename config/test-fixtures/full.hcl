# Every block and attribute.
pool "h100-reserved" {
  provider          = "aws"
  region            = "us-east-1"
  zones             = ["us-east-1a", "us-east-1b"]
  instance_type     = "p5.48xlarge"
  gpu_model         = "H100"
  gpus_per_node     = 8
  capacity          = "reserved"
  price_per_hour    = 55.04
  lead_time         = "15m"
  provision_timeout = "1h"
  min               = 4
  max               = 4
  priority          = 10

  aws {
    asg      = "gpu-reserved"
    endpoint = "http://localhost:4566"
  }
}

pool "a100-spot" {
  provider       = "gcp"
  region         = "us-central1"
  instance_type  = "a2-highgpu-8g"
  gpus_per_node  = 8
  capacity       = "spot"
  price_per_hour = 11.5
  min            = 0
  max            = 16

  gcp {
    project = "ml-prod"
    zone    = "us-central1-a"
    mig     = "a100-spot"
  }
}

pool "l4-plugin" {
  provider       = "plugin"
  instance_type  = "g6.xlarge"
  gpus_per_node  = 1
  price_per_hour = 0.8
  lead_time      = "1d12h"
  max            = 32

  plugin         = "fleet-plugin"
  target {
    cluster = "eu-1"
    queue   = "gpu"
  }
}

plugin "fleet-plugin" {
  path   = "/usr/local/libexec/fleetcast/fleet-plugin"
  sha256 = "2c26b46b68ffc68ff99b453c1d30413413422d706483bfa0f98a5e886266e7ae"
  args   = ["--verbose", "--region=eu"]
  env    = { FLEET_PLUGIN_LOG = "debug" }
  config {
    endpoint = "https://fleet.example.internal"
    retries  = 3
  }
}

pool "sim-h100" {
  provider       = "sim"
  instance_type  = "sim.8gpu"
  gpus_per_node  = 8
  price_per_hour = 40
  min            = 1
  max            = 10

  sim {
    capacity            = 6
    capacity_error_rate = 0.05
    initial             = 2
  }
}

forecast {
  step                    = "5m"
  horizon                 = "2d"
  quantile                = 0.95
  wait_value_per_gpu_hour = 250 # quantile, when set, overrides the choice by cost
  history                 = "2w"
  hysteresis              = "1h"
}

drain {
  checkpoint_max_age = "45m"
  timeout            = "1h"
  signal             = "SIGUSR2"
  long_running_after = "6h"
}

limits {
  max_gpus               = 512
  max_spend_per_hour     = 2500.5
  max_scale_in_per_cycle = 4
  scale_in_share         = 0.25
  scale_in_window        = "30m"
  silent_share_halt      = 0.5

  scale_in_delay_after_launch = "15m"
  scale_in_unneeded_time      = "0s" # off
}

controller {
  interval      = "30s"
  listen        = ":9000"
  state_dir     = "/var/lib/fleetcast"
  agent_timeout = "2m"
  fleet         = "ml-prod"
  tls_cert_file = "/etc/fleetcast/tls/controller.crt"
  tls_key_file  = "/etc/fleetcast/tls/controller.key"

  bootstrap_token_file      = "/etc/fleetcast/bootstrap-token"
  aws_identity_certificates = "/etc/fleetcast/aws-identity.pem"
}

demand {
  prometheus_url     = "http://prometheus:9090"
  prometheus_query   = "count(DCGM_FI_DEV_GPU_UTIL > 0)"
  prometheus_timeout = "5s"
  backfill           = false
}

synthetic {
  seed      = 42
  base_gpus = 32
  peak_gpus = 256
  peak_hour = 9
  noise     = 0.1
}

simulate {
  checkpoint_interval         = "20m"
  spot_interruptions_per_hour = 0.05
  spot_notice                 = "30s"
  checkpoint_duration         = "5m"
  unresponsive_jobs           = 0.1
  reservations                = "advised"
  advice_after                = "7d"
  headroom_gpus               = 64
  headroom_placeholders       = "gpu"
}

usage {
  job_retention  = "14d"
  hour_retention = "730d"
  max_teams      = 50
  max_tiers      = 5
  share_idle     = true
  idle_threshold = 10
  idle_window    = "15m"
}
