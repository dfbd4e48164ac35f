# A GPU fleet on AWS only: the three Auto Scaling groups that
# examples/terraform/aws creates, plus an H100 capacity block run directly
# from a launch template, fleetcast-h100, which you make with the block
# (the Terraform does not).
#
#   terraform -chdir=examples/terraform/aws apply -var reserved_nodes=4
#   bin/autoscaler plan -config examples/aws.hcl
#
# reserved_nodes = 4 buys a capacity reservation of 4 x p4d.24xlarge, billed
# every hour whether used or not (about $131 an hour at the price below; see
# examples/terraform/aws/README.md): without it, delete the reserved-a100 pool.
#   bin/autoscaler run -config examples/aws.hcl -dry-run
#
# Credentials and region come the standard AWS way (environment, shared
# config, instance role); the controller's role needs the permissions in
# providers/aws/iam-policy.json (the Terraform's controller_instance_profile_name
# has them). To try it on a local moto_server instead of AWS, run
# scripts/try-moto.sh.

pool "reserved-a100" {
  provider       = "aws"
  region         = "us-east-1"
  zones          = ["us-east-1a"]
  instance_type  = "p4d.24xlarge"
  gpus_per_node  = 8
  capacity       = "reserved"
  price_per_hour = 19.22 # under a 1-year Savings Plan
  lead_time      = "8m"
  min            = 4
  max            = 4 # the reservation the group's launch template targets: the Terraform's reserved_nodes (0, none, unless set)
  aws {
    asg = "fleetcast-reserved-a100"
  }
}

pool "h100-capacity-block" {
  provider       = "aws"
  region         = "us-east-1"
  zones          = ["us-east-1a"]
  instance_type  = "p5.48xlarge"
  gpus_per_node  = 8 # checked against DescribeInstanceTypes; gpu_model is filled in from it
  capacity       = "reserved"
  price_per_hour = 31.46 # the block's price per instance-hour
  lead_time      = "12m"
  max            = 2
  aws {
    launch_template         = "fleetcast-h100"
    capacity_reservation_id = "cr-0a1b2c3d4e5f60718"
    capacity_block          = true
  }
}

pool "aws-spot-a100" {
  provider       = "aws"
  region         = "us-east-1"
  zones          = ["us-east-1a", "us-east-1b", "us-east-1c"]
  instance_type  = "p4d.24xlarge"
  gpus_per_node  = 8
  capacity       = "spot"
  price_per_hour = 12.50 # replaced at start by the current spot price (spot_price_lookup)
  lead_time      = "8m"
  max            = 8
  aws {
    asg               = "fleetcast-spot-a100"
    spot_price_lookup = true
  }
}

pool "aws-ondemand-a100" {
  provider       = "aws"
  region         = "us-east-1"
  zones          = ["us-east-1a", "us-east-1b", "us-east-1c"]
  instance_type  = "p4d.24xlarge"
  gpus_per_node  = 8
  capacity       = "on_demand"
  price_per_hour = 32.77
  lead_time      = "9m"
  max            = 16
  aws {
    asg_tag = "fleetcast/pool=aws-ondemand-a100" # found by the tag Terraform sets
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

limits {
  max_gpus           = 256
  max_spend_per_hour = 900
}

controller {
  interval      = "1m"
  listen        = ":8790"
  state_dir     = "/var/lib/fleetcast"
  agent_timeout = "3m"

  # HTTPS for the agents and the API (plain HTTP is refused off loopback):
  # the certificate is read again when it changes. The agents verify it
  # against the CA the Terraform gives them (controller_ca_pem).
  tls_cert_file = "/etc/fleetcast/tls/controller.crt"
  tls_key_file  = "/etc/fleetcast/tls/controller.key"

  # Node credentials: a node presents the bootstrap secret (the SSM
  # parameter the Terraform's nodes read) with its instance identity
  # document, signed by AWS, and gets a credential of its own; see
  # docs/credentials.md, "Node credentials".
  bootstrap_token_file      = "/etc/fleetcast/bootstrap-token"
  aws_identity_certificates = "/etc/fleetcast/aws-identity-us-east-1.pem"
}
