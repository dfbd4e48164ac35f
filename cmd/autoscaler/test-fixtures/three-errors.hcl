pool "burst" {
  provider       = "sim"
  instance_type  = "p4d.24xlarge"
  gpus_per_node  = 8
  price_per_hour = 32.77
  lead_time      = "9 minutes"
  min            = 5
  max            = 2
  colour         = "blue"
}
