# A Slurm cluster's GPU partitions on AWS: Fleetcast reads the queue
# (squeue --json, sinfo --json; docs/slurm.md) and buys for the jobs that
# wait for capacity, each in the pools of its partition.
#
#   bin/autoscaler plan -config examples/slurm/fleet.hcl
#
# Partition train runs on H100 nodes: a reservation kept full, spot, then
# on-demand. Partition dev runs on 4 x L4 nodes, on demand. Each pool is
# an Auto Scaling group whose instances join the cluster as its cloud nodes
# do today (their launch template's user data starts slurmd); the
# controller's host needs the cluster's client commands, slurm.conf and
# MUNGE key (docs/slurm.md: wiring it into a cluster).

pool "h100-reserved" {
  provider       = "aws"
  region         = "us-east-1"
  zones          = ["us-east-1a"]
  instance_type  = "p5.48xlarge"
  gpu_model      = "H100" # what --gres=gpu:h100:N asks for, without regard to case
  gpus_per_node  = 8
  capacity       = "reserved"
  price_per_hour = 31.46
  lead_time      = "12m"
  min            = 2
  max            = 2 # the reservation
  aws {
    asg = "slurm-train-h100-reserved"
  }
}

pool "h100-spot" {
  provider       = "aws"
  region         = "us-east-1"
  zones          = ["us-east-1a", "us-east-1b"]
  instance_type  = "p5.48xlarge"
  gpu_model      = "H100"
  gpus_per_node  = 8
  capacity       = "spot"
  price_per_hour = 40.00 # replaced at start by the current spot price
  lead_time      = "12m"
  max            = 8
  aws {
    asg = "slurm-train-h100-spot"
  }
}

pool "h100-od" {
  provider       = "aws"
  region         = "us-east-1"
  zones          = ["us-east-1a", "us-east-1b", "us-east-1c"]
  instance_type  = "p5.48xlarge"
  gpu_model      = "H100"
  gpus_per_node  = 8
  capacity       = "on_demand"
  price_per_hour = 98.32
  lead_time      = "12m"
  max            = 16
  aws {
    asg = "slurm-train-h100-od"
  }
}

pool "l4-od" {
  provider       = "aws"
  region         = "us-east-1"
  zones          = ["us-east-1a", "us-east-1b"]
  instance_type  = "g6.12xlarge"
  gpu_model      = "L4"
  gpus_per_node  = 4
  capacity       = "on_demand"
  price_per_hour = 4.60
  lead_time      = "6m"
  max            = 20
  aws {
    asg = "slurm-dev-l4-od"
  }
}

slurm {
  conf = "/etc/slurm/slurm.conf" # given to squeue and sinfo as SLURM_CONF

  partition "train" {
    pools = ["h100-reserved", "h100-spot", "h100-od"]
  }
  partition "dev" {
    pools = ["l4-od"]
  }
}

forecast {
  step                    = "10m"
  horizon                 = "2h"
  wait_value_per_gpu_hour = 500
  history                 = "14d"
}

drain {
  checkpoint_max_age = "30m"
  timeout            = "20m"
}

limits {
  max_gpus           = 256
  max_spend_per_hour = 2500
}
