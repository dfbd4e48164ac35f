# One Compute Engine pool: examples/cloud.hcl's.
pool "gcp-ondemand-a100" {
  provider       = "gcp"
  region         = "us-central1"
  zones          = ["us-central1-a"]
  instance_type  = "a2-highgpu-8g"
  gpu_model      = "A100"
  gpus_per_node  = 8
  price_per_hour = 29.39
  lead_time      = "12m"
  max            = 12
  gcp {
    project = "my-gpu-project"
    zone    = "us-central1-a"
    mig     = "fleetcast-ondemand-a100"
  }
}

controller {
  fleet = "test"
}
