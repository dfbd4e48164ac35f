# Where the controller's API tokens are kept: one Secret Manager secret per
# scope, and who may read each.
#
# Terraform makes the secrets but never their values (they would be in its
# state): an operator adds each token as a version, as `autoscaler
# api-token create` prints it (see docs/credentials.md, "API tokens and scopes"). The
# scheduler's service account may read the demand token only, monitoring's
# the read token only; nobody here may read the operator token: operators
# reach it with their own access, and the controller's root token stays in
# its state directory. A token out of its scope gets 403 from the
# controller, so a leaked demand token can push demand and do nothing else.

locals {
  api_token_scopes = ["operator", "demand", "read"]
}

resource "google_secret_manager_secret" "api_token" {
  for_each = toset(local.api_token_scopes)

  secret_id = "${var.api_token_secret_prefix}${each.key}"
  labels = {
    fleetcast-scope = each.key
  }

  replication {
    auto {}
  }
}

resource "google_secret_manager_secret_iam_member" "scheduler_api_token" {
  count = var.scheduler_service_account == "" ? 0 : 1

  secret_id = google_secret_manager_secret.api_token["demand"].id
  role      = "roles/secretmanager.secretAccessor"
  member    = "serviceAccount:${var.scheduler_service_account}"
}

resource "google_secret_manager_secret_iam_member" "monitoring_api_token" {
  count = var.monitoring_service_account == "" ? 0 : 1

  secret_id = google_secret_manager_secret.api_token["read"].id
  role      = "roles/secretmanager.secretAccessor"
  member    = "serviceAccount:${var.monitoring_service_account}"
}
