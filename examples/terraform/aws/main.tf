# GPU fleet on AWS for Fleetcast: Auto Scaling groups of p4d.24xlarge
# nodes (8 x A100 each), one per AWS pool in examples/cloud.hcl: on-demand
# and spot, both empty until the controller launches, and, only when
# var.reserved_nodes is above 0, a capacity reservation and the reserved
# group that fills it. As it comes, it reserves and launches nothing.
#
# Terraform creates the groups; Fleetcast sizes them. Terraform owns what a
# group is (launch template, subnets, bounds, tags); the controller owns how
# many nodes it has and which ones go. See the lifecycle blocks below.

provider "aws" {
  region = var.region
}

# The newest AWS Deep Learning Base OSS Nvidia Driver GPU AMI, unless
# var.gpu_ami_id pins one.
data "aws_ssm_parameter" "dlami" {
  count = var.gpu_ami_id == null ? 1 : 0

  name = "/aws/service/deeplearning/ami/x86_64/base-oss-nvidia-driver-gpu-ubuntu-22.04/latest/ami-id"
}

locals {
  ami_id = coalesce(var.gpu_ami_id, one(data.aws_ssm_parameter.dlami[*].insecure_value))

  # One launch template per pool: a node's user data names the pool its agent
  # joins. The keys are the pool names in examples/cloud.hcl. The reserved
  # pool exists only with a reservation (var.reserved_nodes above 0).
  pools = {
    for name, pool in {
      "reserved-a100"     = { reserved = true }
      "aws-ondemand-a100" = { reserved = false }
      "aws-spot-a100"     = { reserved = false }
    } : name => pool if var.reserved_nodes > 0 || !pool.reserved
  }
}

# The capacity the reserved pool launches into, made only when
# var.reserved_nodes is above 0 (the default is 0). A reservation is billed
# at the on-demand rate for every hour it exists, whether or not instances
# run in it (4 x p4d.24xlarge: about $131 an hour, $95,700 a month; see
# README.md), which is why the reserved pool's min and max are both its
# size; cover it with a Savings Plan for the price in cloud.hcl, and cancel
# it (reserved_nodes = 0) when the fleet no longer needs it. "targeted"
# keeps the on-demand group from consuming it.
resource "aws_ec2_capacity_reservation" "a100" {
  count = var.reserved_nodes > 0 ? 1 : 0

  instance_type           = "p4d.24xlarge"
  instance_platform       = "Linux/UNIX"
  availability_zone       = var.availability_zone
  instance_count          = var.reserved_nodes
  instance_match_criteria = "targeted"
  end_date_type           = "unlimited"

  tags = {
    Name             = "fleetcast-reserved-a100"
    "fleetcast/pool" = "reserved-a100"
  }
}

resource "aws_launch_template" "a100" {
  for_each = local.pools

  name                   = "fleetcast-${each.key}"
  description            = "Fleetcast pool ${each.key}: p4d.24xlarge, 8 x A100"
  image_id               = local.ami_id
  instance_type          = "p4d.24xlarge"
  vpc_security_group_ids = var.security_group_ids
  update_default_version = true

  user_data = base64encode(templatefile("${path.module}/user_data.sh.tftpl", {
    pool                      = each.key
    region                    = var.region
    agent_url                 = var.agent_url
    agent_sha256              = var.agent_sha256
    controller_url            = var.controller_url
    controller_ca_pem         = trimspace(var.controller_ca_pem)
    bootstrap_token_parameter = var.bootstrap_token_parameter
    setup_script              = file("${path.module}/node-setup.sh")
  }))

  iam_instance_profile {
    name = var.instance_profile_name
  }

  # IMDSv2 only. A hop limit of 1 keeps containers on the node (the jobs)
  # away from the instance profile's credentials.
  metadata_options {
    http_endpoint               = "enabled"
    http_tokens                 = "required"
    http_put_response_hop_limit = 1
  }

  dynamic "capacity_reservation_specification" {
    for_each = each.value.reserved ? aws_ec2_capacity_reservation.a100[*].id : []

    content {
      capacity_reservation_target {
        capacity_reservation_id = capacity_reservation_specification.value
      }
    }
  }
}

# Every group below follows the same rules:
#
#   - lifecycle { ignore_changes = [desired_capacity] }: Terraform sets the
#     desired capacity once, when it creates the group; from then on
#     Fleetcast owns it, raising it ahead of forecast demand and lowering it
#     as it terminates the nodes it drained. Without ignore_changes every
#     `terraform apply` would reset the group to the size written here,
#     launching nodes nobody asked for or terminating nodes in the middle of
#     jobs, and the controller and Terraform would undo each other.
#
#   - protect_from_scale_in = true: every new node is protected from the
#     group's own scale-in (a person lowering the desired capacity, an
#     AZ rebalance), so the group never picks a node with work on it. Only
#     Fleetcast chooses which node goes: it terminates that exact instance,
#     which protection does not hold back. (Fleetcast also protects any
#     node that reports and is not protected yet.)
#
#   - No instance_refresh and no scaling policies: a refresh would replace
#     nodes without draining them, and a policy would be a second autoscaler.
#     A new launch template version reaches the nodes launched after it.
#
#   - The fleetcast/* tags are propagated at launch, so every node says which
#     pool it belongs to.

resource "aws_autoscaling_group" "reserved" {
  count = var.reserved_nodes > 0 ? 1 : 0

  name                      = "fleetcast-reserved-a100"
  min_size                  = var.reserved_nodes
  max_size                  = var.reserved_nodes
  desired_capacity          = var.reserved_nodes
  vpc_zone_identifier       = [var.subnet_ids[var.availability_zone]]
  protect_from_scale_in     = true # only Fleetcast chooses which node goes
  wait_for_capacity_timeout = "0"  # Fleetcast watches the nodes come up

  launch_template {
    id      = aws_launch_template.a100["reserved-a100"].id
    version = aws_launch_template.a100["reserved-a100"].latest_version
  }

  tag {
    key                 = "Name"
    value               = "fleetcast-reserved-a100"
    propagate_at_launch = true
  }

  tag {
    key                 = "fleetcast/managed"
    value               = "true"
    propagate_at_launch = true
  }

  tag {
    key                 = "fleetcast/pool"
    value               = "reserved-a100"
    propagate_at_launch = true
  }

  lifecycle {
    # Fleetcast owns the desired capacity; see above.
    ignore_changes = [desired_capacity]

    precondition {
      condition     = contains(keys(var.subnet_ids), var.availability_zone)
      error_message = "subnet_ids must have a subnet in availability_zone, where the capacity reservation is."
    }
  }
}

resource "aws_autoscaling_group" "on_demand" {
  name                  = "fleetcast-ondemand-a100"
  min_size              = var.on_demand_min_size
  max_size              = var.on_demand_max_size
  desired_capacity      = var.on_demand_min_size
  vpc_zone_identifier   = values(var.subnet_ids)
  protect_from_scale_in = true # only Fleetcast chooses which node goes

  # The group never terminates a node to even out its zones.
  suspended_processes = ["AZRebalance"]

  launch_template {
    id      = aws_launch_template.a100["aws-ondemand-a100"].id
    version = aws_launch_template.a100["aws-ondemand-a100"].latest_version
  }

  tag {
    key                 = "Name"
    value               = "fleetcast-ondemand-a100"
    propagate_at_launch = true
  }

  tag {
    key                 = "fleetcast/managed"
    value               = "true"
    propagate_at_launch = true
  }

  tag {
    key                 = "fleetcast/pool"
    value               = "aws-ondemand-a100"
    propagate_at_launch = true
  }

  lifecycle {
    # Fleetcast owns the desired capacity; see above.
    ignore_changes = [desired_capacity]
  }
}

resource "aws_autoscaling_group" "spot" {
  name                  = "fleetcast-spot-a100"
  min_size              = var.spot_min_size
  max_size              = var.spot_max_size
  desired_capacity      = var.spot_min_size
  vpc_zone_identifier   = values(var.subnet_ids)
  protect_from_scale_in = true # only Fleetcast chooses which node goes

  # The group never terminates a node to even out its zones.
  suspended_processes = ["AZRebalance"]

  # All spot, from the zones with the most spare p4d capacity: the least
  # likely to be interrupted.
  mixed_instances_policy {
    instances_distribution {
      on_demand_base_capacity                  = 0
      on_demand_percentage_above_base_capacity = 0
      spot_allocation_strategy                 = "capacity-optimized"
    }

    launch_template {
      launch_template_specification {
        launch_template_id = aws_launch_template.a100["aws-spot-a100"].id
        version            = aws_launch_template.a100["aws-spot-a100"].latest_version
      }
    }
  }

  tag {
    key                 = "Name"
    value               = "fleetcast-spot-a100"
    propagate_at_launch = true
  }

  tag {
    key                 = "fleetcast/managed"
    value               = "true"
    propagate_at_launch = true
  }

  tag {
    key                 = "fleetcast/pool"
    value               = "aws-spot-a100"
    propagate_at_launch = true
  }

  lifecycle {
    # Fleetcast owns the desired capacity; see above.
    ignore_changes = [desired_capacity]
  }
}
