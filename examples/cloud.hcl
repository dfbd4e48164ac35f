# A GPU fleet on AWS and GCP: the pools that the Terraform in
# examples/terraform/ creates.
#
#   terraform -chdir=examples/terraform/aws apply -var reserved_nodes=4
#   terraform -chdir=examples/terraform/gcp apply
#
# reserved_nodes = 4 buys a capacity reservation of 4 x p4d.24xlarge, billed
# every hour whether used or not (about $131 an hour; see
# examples/terraform/aws/README.md): without it, delete the reserved-a100 pool.
#   bin/autoscaler validate -config examples/cloud.hcl
#
# Four pools of 8 x A100 nodes: a capacity reservation that is paid for
# whether used or not, spot capacity that is cheap but often exhausted, and
# on-demand capacity on two clouds. Each pool names the Auto Scaling group or
# managed instance group behind it; each pool's min and max are the group's
# min_size and max_size in the Terraform (reserved-a100's with
# reserved_nodes = 4), and config/examples_test.go fails when the two
# disagree. Terraform creates the groups; this controller alone sets how many
# nodes they have.

pool "reserved-a100" {
  provider       = "aws"
  region         = "us-east-1"
  zones          = ["us-east-1a"] # a reservation holds capacity in one zone
  instance_type  = "p4d.24xlarge"
  gpu_model      = "A100"
  gpus_per_node  = 8
  capacity       = "reserved"
  price_per_hour = 19.22 # the reservation under a 1-year Savings Plan, about 59% of on-demand
  lead_time      = "8m"
  # The reservation: the Terraform's reserved_nodes, which is 0 (no
  # reservation and no group: delete this pool) unless set. 4 reserved
  # p4d.24xlarge cost about $131 an hour, used or not (see the Terraform's
  # README, "What it costs").
  min            = 4
  max            = 4
  aws {
    asg = "fleetcast-reserved-a100"
  }
}

pool "aws-spot-a100" {
  provider       = "aws"
  region         = "us-east-1"
  zones          = ["us-east-1a", "us-east-1b", "us-east-1c"] # the zones of var.subnet_ids
  instance_type  = "p4d.24xlarge"
  gpu_model      = "A100"
  gpus_per_node  = 8
  capacity       = "spot"
  price_per_hour = 12.50 # a typical spot price; it moves
  lead_time      = "8m"
  max            = 8
  aws {
    asg = "fleetcast-spot-a100"
  }
}

pool "gcp-ondemand-a100" {
  provider       = "gcp"
  region         = "us-central1"
  zones          = ["us-central1-a"]
  instance_type  = "a2-highgpu-8g"
  gpu_model      = "A100"
  gpus_per_node  = 8
  capacity       = "on_demand"
  price_per_hour = 29.39
  lead_time      = "12m"
  max            = 12 # MIGs have no maximum: this is the bound (mind the A100 quota)
  gcp {
    project = "my-gpu-project"
    zone    = "us-central1-a"
    mig     = "fleetcast-ondemand-a100"
  }
}

pool "aws-ondemand-a100" {
  provider       = "aws"
  region         = "us-east-1"
  zones          = ["us-east-1a", "us-east-1b", "us-east-1c"] # the zones of var.subnet_ids
  instance_type  = "p4d.24xlarge"
  gpu_model      = "A100"
  gpus_per_node  = 8
  capacity       = "on_demand"
  price_per_hour = 32.77
  lead_time      = "9m"
  max            = 16
  aws {
    asg = "fleetcast-ondemand-a100"
  }
}

forecast {
  step       = "10m"
  horizon    = "2h"
  # Each pool is bought to the forecast quantile that balances a waiting
  # GPU-hour (this, in dollars) against the pool's price; quantile = 0.9 would
  # set one for every pool instead.
  wait_value_per_gpu_hour = 500
  history    = "14d"
  hysteresis = "30m"
}

drain {
  checkpoint_max_age = "30m"
  timeout            = "20m"
  signal             = "SIGUSR1"
  long_running_after = "1h"
}

limits {
  max_gpus               = 256
  max_spend_per_hour     = 900
  max_scale_in_per_cycle = 4
}

controller {
  interval      = "1m"
  listen        = ":8790" # the agents' controller_url in the Terraform points here
  state_dir     = "/var/lib/fleetcast"
  agent_timeout = "3m"

  # HTTPS for the agents and the API (plain HTTP is refused off loopback):
  # the certificate is read again when it changes. The agents verify it
  # against the CA the Terraform gives them (controller_ca_pem).
  tls_cert_file = "/etc/fleetcast/tls/controller.crt"
  tls_key_file  = "/etc/fleetcast/tls/controller.key"

  # Node credentials: an AWS node presents the bootstrap secret (the SSM
  # parameter the Terraform's nodes read) with its instance identity
  # document, signed by AWS; a GCP node the identity token Compute Engine
  # signs for this URL (the GCP Terraform's controller_url), and no secret.
  # Each gets a credential of its own; see docs/credentials.md, "Node credentials".
  bootstrap_token_file      = "/etc/fleetcast/bootstrap-token"
  aws_identity_certificates = "/etc/fleetcast/aws-identity-us-east-1.pem"
  gcp_identity_audience     = "https://fleetcast.internal:8790"
}

# Optional: fleets that export DCGM metrics can let the demand history count
# GPUs in use from Prometheus too (the larger of it and the agents' count),
# and fill the history a new controller lacks from the query's past at start
# (backfill = false turns that off).
# demand {
#   prometheus_url   = "http://prometheus:9090"
#   prometheus_query = "count(DCGM_FI_DEV_GPU_UTIL > 0)"
# }
