# Philly, for comparing policies fairly (`simulate`): the pools and prices of
# ../shared/bench/fair-philly.hcl (8-GPU nodes, on demand at $55.04 per
# node-hour with a 10-minute lead time, and a reservation of 120 nodes at
# $33.00 per node-hour that every policy holds for the whole run), with the
# policy blocks of examples/local.hcl. A test checks both.
#
#   bin/autoscaler simulate -config examples/philly-fair.hcl -trace ../shared/traces/philly_rfold/philly_trace.csv

pool "reserved" {
  provider       = "sim"
  region         = "r1"
  instance_type  = "p5.48xlarge"
  gpus_per_node  = 8
  capacity       = "reserved"
  price_per_hour = 33.00
  lead_time      = "10m"
  min            = 120
  max            = 120
}

pool "ondemand" {
  provider       = "sim"
  region         = "r1"
  instance_type  = "p5.48xlarge"
  gpus_per_node  = 8
  capacity       = "on_demand"
  price_per_hour = 55.04
  lead_time      = "10m"
  max            = 1000
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
  max_spend_per_hour     = 30000 # room for a 512-GPU buffer on these $55/node-h pools (the frontier's largest)
  max_scale_in_per_cycle = 4
}

controller {
  interval      = "1m"
  listen        = "127.0.0.1:8790"
  state_dir     = "./fleetcast-state"
  agent_timeout = "3m"
}

simulate {
  checkpoint_interval = "30m"
}
