# A rack of DGX servers that are a Slurm cluster's cloud nodes: Fleetcast
# powers them on and off through the example commands plugin (IPMI, in
# examples/plugins/commands/racks.sh) and has Slurm follow (docs/slurm.md:
# pools of Slurm nodes): a server it powers on is powered up in Slurm
# first, so that its slurmd registers as its node; one it drains is
# drained in Slurm, and its batch jobs that no agent knows are sent
# SIGUSR1 to checkpoint (signal_jobs); one it powers off is powered down
# in Slurm. A job Slurm places on a powered-down node is a request for
# that server. (Another pool of alike servers may name the same nodes:
# the two then fall back to each other when one has no capacity.)
#
#   bin/autoscaler validate -config examples/slurm/nodes.hcl
#
# In slurm.conf, the servers are cloud nodes whose resume and suspend
# programs hand their hostlists to the controller and act on nothing
# (scripts that run `autoscaler slurm resume|suspend`: docs/slurm.md;
# Fleetcast powers the servers), a power-up waits
# longer than the pool's provision_timeout (3 x lead_time: 30m), Slurm
# never powers a server down on its own, and powered-down nodes are
# listed:
#
#   NodeName=dgx-[01-16] State=CLOUD Gres=gpu:h100:8 CPUs=224 RealMemory=2000000
#   PartitionName=train Nodes=dgx-[01-16] Default=YES
#   ResumeProgram=/etc/slurm/fleetcast-resume
#   SuspendProgram=/etc/slurm/fleetcast-suspend
#   ResumeTimeout=2400
#   SuspendTime=604800
#   SuspendExcNodes=dgx-[01-16]
#   ReturnToService=2
#   PrivateData=cloud
#
# Each server's slurmd starts at boot as its node (slurmd -N dgx-07), and
# its agent too (autoscaler-agent): jobs register with it from their batch
# scripts (docs/slurm.md).

plugin "racks" {
  path   = "/usr/local/libexec/fleetcast/fleetcast-commands"
  sha256 = "0000000000000000000000000000000000000000000000000000000000000000" # sha256sum of the binary
  config {
    list_command      = ["/etc/fleetcast/racks.sh", "list"]
    launch_command    = ["/etc/fleetcast/racks.sh", "power-on"]
    terminate_command = ["/etc/fleetcast/racks.sh", "power-off"]
    timeout           = "2m"
  }
}

pool "dgx-h100" {
  provider       = "plugin"
  plugin         = "racks"
  instance_type  = "dgx-h100"
  gpu_model      = "H100"
  gpus_per_node  = 8
  price_per_hour = 14.00 # the servers' amortised cost and power
  lead_time      = "10m"
  max            = 16
  target {
    rack_dir = "/var/lib/fleetcast/racks" # FLEETCAST_TARGET_RACK_DIR
  }
  slurm {
    nodes = "dgx-[01-16]" # each server listed by this name
  }
}

slurm {
  conf        = "/etc/slurm/slurm.conf"
  signal_jobs = "USR1" # the jobs' batch scripts checkpoint on it

  partition "train" {
    pools = ["dgx-h100"]
  }
}

controller {
  fleet = "onprem"
}
