# The fleet the controller sizes, without its controller block: this
# module writes that for each replica (controller-setup.sh.tftpl). These are
# examples/cloud.hcl's AWS pools, on the groups the fleet module
# (examples/terraform/aws) makes, and its forecast, drain and limits; give
# your own in var.fleet_config. A test checks that they agree.

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
