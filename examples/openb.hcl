# Alibaba's GPU-sharing cluster (cluster-trace-gpu-v2023, "openb"), as a
# fleet to replay its pod list on:
#
#   autoscaler simulate -config examples/openb.hcl \
#     -trace ../shared/traces/alibaba_openb_v2023/openb_pod_list_default.csv \
#     -policies reactive,headroom,predictive
#
# One on-demand pool per GPU model and GPUs per node in the trace's node
# list (openb_node_list_gpu_node.csv), each up to as many nodes as the
# list has, with a 10-minute lead time and no reservation. Prices are
# assumptions (docs/tiers.md): public on-demand list prices per GPU-hour,
# rounded (T4 $0.95, A10 $1.00, P100 $1.60, V100 16 GB $3.06, V100 32 GB
# $3.90); the trace's G2 and G3 are undisclosed models, priced as the A100
# class ($4.10 and $5.12). The simulator counts a share of a GPU as a whole
# GPU and places jobs on any model (the trace's GPU types are not read).
#
# The pods' QoS classes are their tiers: LS and Guaranteed critical,
# Burstable standard, BE best_effort.

pool "g2-x8" {
  provider       = "sim"
  region         = "r1"
  instance_type  = "G2x8"
  gpu_model      = "G2"
  gpus_per_node  = 8
  capacity       = "on_demand"
  price_per_hour = 32.80
  lead_time      = "10m"
  max            = 549
}

pool "t4-x2" {
  provider       = "sim"
  region         = "r1"
  instance_type  = "T4x2"
  gpu_model      = "T4"
  gpus_per_node  = 2
  capacity       = "on_demand"
  price_per_hour = 1.90
  lead_time      = "10m"
  max            = 387
}

pool "p100-x2" {
  provider       = "sim"
  region         = "r1"
  instance_type  = "P100x2"
  gpu_model      = "P100"
  gpus_per_node  = 2
  capacity       = "on_demand"
  price_per_hour = 3.20
  lead_time      = "10m"
  max            = 131
}

pool "g3-x8" {
  provider       = "sim"
  region         = "r1"
  instance_type  = "G3x8"
  gpu_model      = "G3"
  gpus_per_node  = 8
  capacity       = "on_demand"
  price_per_hour = 40.96
  lead_time      = "10m"
  max            = 39
}

pool "v100m16-x4" {
  provider       = "sim"
  region         = "r1"
  instance_type  = "V100M16x4"
  gpu_model      = "V100M16"
  gpus_per_node  = 4
  capacity       = "on_demand"
  price_per_hour = 12.24
  lead_time      = "10m"
  max            = 28
}

pool "v100m32-x8" {
  provider       = "sim"
  region         = "r1"
  instance_type  = "V100M32x8"
  gpu_model      = "V100M32"
  gpus_per_node  = 8
  capacity       = "on_demand"
  price_per_hour = 31.20
  lead_time      = "10m"
  max            = 21
}

pool "v100m16-x1" {
  provider       = "sim"
  region         = "r1"
  instance_type  = "V100M16x1"
  gpu_model      = "V100M16"
  gpus_per_node  = 1
  capacity       = "on_demand"
  price_per_hour = 3.06
  lead_time      = "10m"
  max            = 19
}

pool "t4-x4" {
  provider       = "sim"
  region         = "r1"
  instance_type  = "T4x4"
  gpu_model      = "T4"
  gpus_per_node  = 4
  capacity       = "on_demand"
  price_per_hour = 3.80
  lead_time      = "10m"
  max            = 17
}

pool "v100m32-x4" {
  provider       = "sim"
  region         = "r1"
  instance_type  = "V100M32x4"
  gpu_model      = "V100M32"
  gpus_per_node  = 4
  capacity       = "on_demand"
  price_per_hour = 15.60
  lead_time      = "10m"
  max            = 9
}

pool "v100m16-x8" {
  provider       = "sim"
  region         = "r1"
  instance_type  = "V100M16x8"
  gpu_model      = "V100M16"
  gpus_per_node  = 8
  capacity       = "on_demand"
  price_per_hour = 24.48
  lead_time      = "10m"
  max            = 8
}

pool "p100-x1" {
  provider       = "sim"
  region         = "r1"
  instance_type  = "P100x1"
  gpu_model      = "P100"
  gpus_per_node  = 1
  capacity       = "on_demand"
  price_per_hour = 1.60
  lead_time      = "10m"
  max            = 3
}

pool "a10-x1" {
  provider       = "sim"
  region         = "r1"
  instance_type  = "A10x1"
  gpu_model      = "A10"
  gpus_per_node  = 1
  capacity       = "on_demand"
  price_per_hour = 1.00
  lead_time      = "10m"
  max            = 2
}

# What a GPU-hour of each tier's waiting is worth: each tier is bought for
# at the forecast quantile its value sets against each pool's price, the
# lower tiers on what the higher ones leave (docs/tiers.md).
tier "critical" {
  rank                    = 1
  wait_value_per_gpu_hour = 500
}

tier "standard" {
  rank                    = 2
  wait_value_per_gpu_hour = 50
  default                 = true
}

# Nothing is bought for best-effort jobs: they run on what the others
# leave idle, and leave (a checkpoint, then the queue) when another
# tier's job needs the room or scale-in drains their node.
tier "best_effort" {
  rank                    = 3
  wait_value_per_gpu_hour = 0
}

forecast {
  step       = "10m"
  horizon    = "2h"
  history    = "14d"
  hysteresis = "30m"
}

limits {
  max_gpus               = 6212 # every node of the list
  max_scale_in_per_cycle = 10
}

simulate {
  checkpoint_interval = "30m"
}
