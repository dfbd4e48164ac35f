output "api_urls" {
  description = "Each replica's API URL: the nodes' controller_url (the fleet module's) may be any of them, or a load balancer's in front; operators' -addr likewise."
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

output "instance_ids" {
  description = "The controller's instances."
  value       = aws_instance.controller[*].id
}

output "security_group_id" {
  description = "The controller's security group: the API from fleet_cidrs and operator_cidrs only."
  value       = aws_security_group.controller.id
}

output "secret_names" {
  description = "The secrets to fill before the instances start (README.md), keyed by what each holds."
  value       = { for k, s in aws_secretsmanager_secret.controller : k => s.name }
}
