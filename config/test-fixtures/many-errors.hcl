pool "a" {
  provider       = "azure"
  instance_type  = "x"
  gpus_per_node  = 1.5
  price_per_hour = -1
  max            = 1
}

pool "a" {
  provider       = "aws"
  instance_type  = "x"
  gpus_per_node  = 1
  price_per_hour = 1
  max            = 1
}

forecast {
  quantile = 1.5
}

forecast {}

drain {
  signal = "SIGKILL"
}

autoscale {}
