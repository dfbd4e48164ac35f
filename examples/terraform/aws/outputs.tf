output "autoscaling_group_names" {
  description = "The Auto Scaling groups, keyed by the Fleetcast pool that drives each: the asg of the pool's aws block."
  value = merge(
    { for g in aws_autoscaling_group.reserved : "reserved-a100" => g.name },
    {
      "aws-ondemand-a100" = aws_autoscaling_group.on_demand.name
      "aws-spot-a100"     = aws_autoscaling_group.spot.name
    },
  )
}

output "launch_template_ids" {
  description = "The launch templates, keyed by pool."
  value       = { for pool, lt in aws_launch_template.a100 : pool => lt.id }
}

output "capacity_reservation_id" {
  description = "The capacity reservation the reserved group launches into; null when reserved_nodes is 0 (no reservation)."
  value       = one(aws_ec2_capacity_reservation.a100[*].id)
}

output "controller_instance_profile_name" {
  description = "The instance profile to run the Fleetcast controller with: its role's policy is iam-policy.json (a copy of providers/aws/iam-policy.json)."
  value       = aws_iam_instance_profile.controller.name
}

output "controller_role_arn" {
  description = "The controller's IAM role."
  value       = aws_iam_role.controller.arn
}

output "api_token_secret_arns" {
  description = "The Secrets Manager secrets of the controller's API tokens, keyed by scope: put each token there as `autoscaler api-token create` prints it."
  value       = { for scope, s in aws_secretsmanager_secret.api_token : scope => s.arn }
}
