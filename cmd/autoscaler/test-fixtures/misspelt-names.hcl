# Names a user may misspell: a provider, a capacity, a plugin; and a
# provider close to no name this build knows.
pool "a100" {
  provider       = "aws2"
  instance_type  = "p4d.24xlarge"
  gpus_per_node  = 8
  capacity       = "on-demand"
  price_per_hour = 32.77
  max            = 4
}

pool "rack" {
  provider       = "plugin"
  plugin         = "rack"
  instance_type  = "dgx-a100"
  gpus_per_node  = 8
  price_per_hour = 10
  max            = 2
}

pool "elsewhere" {
  provider       = "azure"
  instance_type  = "Standard_ND96asr_v4"
  gpus_per_node  = 8
  price_per_hour = 27.2
  max            = 2
}

plugin "racks" {
  path   = "/usr/local/libexec/fleetcast/racks"
  sha256 = "0000000000000000000000000000000000000000000000000000000000000000"
}
