# The fleet the controller sizes, without its controller block: this
# module writes that for each replica (controller-setup.sh.tftpl). This is
# examples/cloud.hcl's gcp pool, on the group the fleet module
# (examples/terraform/gcp) makes, and its forecast, drain and limits; give
# your own in var.fleet_config. A test checks that they agree.

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
