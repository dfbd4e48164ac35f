output "api_urls" {
  description = "Each replica's API URL: the fleet module's controller_url may be any of them, or an internal load balancer's in front; operators' -addr likewise."
  value       = [for ip in local.ips : "https://${ip}:${var.api_port}"]
}

output "private_ips" {
  description = "The replicas' addresses: the TLS certificate in the tls-cert secret must name them all (subject alternative names)."
  value       = local.ips
}

output "etcd_endpoints" {
  description = "The etcd the replicas keep their state in (empty with one replica: a state file)."
  value       = local.ha ? local.etcd_endpoints : []
}

output "instance_names" {
  description = "The controller's instances."
  value       = google_compute_instance.controller[*].name
}

output "secret_ids" {
  description = "The secrets to add a version to before the instances start (README.md), keyed by what each holds."
  value       = { for k, s in google_secret_manager_secret.controller : k => s.secret_id }
}
