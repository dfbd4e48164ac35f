output "instance_group_manager" {
  description = "The managed instance group: the mig of the gcp pool in examples/cloud.hcl."
  value       = google_compute_instance_group_manager.a100.name
}

output "instance_group" {
  description = "Self link of the group's instances, for a load balancer or a scheduler that needs them."
  value       = google_compute_instance_group_manager.a100.instance_group
}

output "instance_template" {
  description = "Self link of the instance template the group launches from."
  value       = google_compute_instance_template.a100.self_link_unique
}

output "controller_service_account_email" {
  description = "The service account to run the Fleetcast controller as: its one role's permissions are controller-role.json (a copy of providers/gcp/controller-role.json)."
  value       = google_service_account.controller.email
}

output "api_token_secret_ids" {
  description = "The Secret Manager secrets of the controller's API tokens, keyed by scope: add each token as a version, as `autoscaler api-token create` prints it."
  value       = { for scope, s in google_secret_manager_secret.api_token : scope => s.id }
}
