# A simulated pool and an AWS one: run cannot drive both.
pool "sim-a100" {
  provider       = "sim"
  instance_type  = "sim.8gpu"
  gpus_per_node  = 8
  price_per_hour = 32
  max            = 4
}

pool "aws-a100" {
  provider       = "aws"
  region         = "us-east-1"
  instance_type  = "p4d.24xlarge"
  gpus_per_node  = 8
  price_per_hour = 32.77
  max            = 4
  aws {
    asg = "fleetcast-ondemand-a100"
  }
}
