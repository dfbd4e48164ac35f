pool "gpu" {
  provider       = "sim"
  instance_type  = "sim.8gpu"
  gpus_per_node  = 8
  price_per_hour = 32
  max            = 4
}
