# Where the controller's API tokens are kept: one Secrets Manager secret
# per scope, and who may read each.
#
# Terraform makes the secrets but never their values (they would be in its
# state): an operator puts each token there as `autoscaler api-token create`
# prints it (see docs/credentials.md, "API tokens and scopes"). The scheduler's role may read the
# demand token only, monitoring's the read token only; no role here may read
# the operator token: operators reach it with their own access, and the
# controller's root token stays in its state directory. A token out of its
# scope gets 403 from the controller, so a leaked demand token can push
# demand and do nothing else.

locals {
  api_token_scopes = ["operator", "demand", "read"]
}

resource "aws_secretsmanager_secret" "api_token" {
  for_each = toset(local.api_token_scopes)

  name        = "${var.api_token_secret_prefix}${each.key}"
  description = "Fleetcast API token of scope ${each.key} (autoscaler api-token create -scope ${each.key})."
}

resource "aws_iam_role_policy" "scheduler_api_token" {
  count = var.scheduler_role_name == "" ? 0 : 1

  name = "fleetcast-demand-token"
  role = var.scheduler_role_name
  policy = jsonencode({
    Version = "2012-10-17"
    Statement = [{
      Effect   = "Allow"
      Action   = "secretsmanager:GetSecretValue"
      Resource = aws_secretsmanager_secret.api_token["demand"].arn
    }]
  })
}

resource "aws_iam_role_policy" "monitoring_api_token" {
  count = var.monitoring_role_name == "" ? 0 : 1

  name = "fleetcast-read-token"
  role = var.monitoring_role_name
  policy = jsonencode({
    Version = "2012-10-17"
    Statement = [{
      Effect   = "Allow"
      Action   = "secretsmanager:GetSecretValue"
      Resource = aws_secretsmanager_secret.api_token["read"].arn
    }]
  })
}
