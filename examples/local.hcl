# A GPU fleet on the built-in simulated cloud: no cloud account needed.
#
#   bin/autoscaler plan -config examples/local.hcl
#
# Four pools of 8 x A100 nodes, priced like their AWS and GCP namesakes: a
# reservation that is paid for whether used or not, spot capacity that is
# often exhausted, and on-demand capacity on two "clouds". The simulated
# cloud starts from a generated fleet and 14 days of synthetic demand with a
# daily cycle (see the `synthetic` block and docs/controller.md).

pool "reserved-a100" {
  provider       = "sim"
  region         = "us-east-1"
  zones          = ["us-east-1a"]
  instance_type  = "p4d.24xlarge"
  gpu_model      = "A100"
  gpus_per_node  = 8
  capacity       = "reserved"
  price_per_hour = 19.22 # 1-year reservation, about 59% of on-demand
  lead_time      = "8m"
  min            = 4
  max            = 4 # the reservation: 4 nodes
  sim {
    initial = 3 # one reserved node is being replaced
  }
}

pool "aws-spot-a100" {
  provider       = "sim"
  region         = "us-east-1"
  zones          = ["us-east-1a", "us-east-1b"]
  instance_type  = "p4d.24xlarge"
  gpu_model      = "A100"
  gpus_per_node  = 8
  capacity       = "spot"
  price_per_hour = 12.50
  lead_time      = "8m"
  max            = 100
  sim {
    capacity = 2 # spot capacity in the region is exhausted at 2 nodes
    initial  = 2
  }
}

pool "gcp-ondemand-a100" {
  provider       = "sim"
  region         = "us-central1"
  zones          = ["us-central1-a", "us-central1-c"]
  instance_type  = "a2-highgpu-8g"
  gpu_model      = "A100"
  gpus_per_node  = 8
  capacity       = "on_demand"
  price_per_hour = 29.39
  lead_time      = "12m"
  max            = 200
  sim {
    initial = 2
  }
}

pool "aws-ondemand-a100" {
  provider       = "sim"
  region         = "us-east-1"
  zones          = ["us-east-1a", "us-east-1b", "us-east-1c"]
  instance_type  = "p4d.24xlarge"
  gpu_model      = "A100"
  gpus_per_node  = 8
  capacity       = "on_demand"
  price_per_hour = 32.77
  lead_time      = "9m"
  max            = 250
  sim {
    initial             = 4
    capacity_error_rate = 0.05
  }
}

forecast {
  step       = "10m"
  horizon    = "2h"
  # What a GPU-hour of waiting costs: each burst pool is bought to the forecast
  # quantile that balances it against the pool's price (docs/planner.md: provisioning
  # by expected cost); quantile = 0.97 would set one for every pool instead.
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
  max_gpus               = 4000 # room for the shared traces' peaks (Philly: 2,796 GPUs)
  max_spend_per_hour     = 30000 # nor bind on examples/philly-fair.hcl's $55/node-h pools with a 512-GPU buffer
  max_scale_in_per_cycle = 4
}

controller {
  interval      = "1m"
  listen        = "127.0.0.1:8790"
  state_dir     = "./fleetcast-state"
  agent_timeout = "3m"
}

synthetic {
  seed      = 7
  base_gpus = 40
  peak_gpus = 160
  peak_hour = 15
  noise     = 0.08
}
