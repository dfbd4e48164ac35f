variable "project" {
  description = "GCP project of the fleet: the project of the gcp pool in examples/cloud.hcl."
  type        = string
}

variable "region" {
  description = "Region of the instance template and the subnetwork."
  type        = string
  default     = "us-central1"
}

variable "zone" {
  description = "Zone of the managed instance group: the zone of the gcp pool in examples/cloud.hcl. It must offer a2-highgpu-8g."
  type        = string
  default     = "us-central1-a"
}

variable "subnetwork" {
  description = "Self link or name of the subnetwork of the GPU nodes, in var.region. The nodes get no external address: the subnetwork needs Cloud NAT or Private Google Access and a route to the controller."
  type        = string
}

variable "service_account_email" {
  description = "Service account of the GPU nodes: the metadata server signs each VM's identity token as it. It needs no role (roles/logging.logWriter and roles/monitoring.metricWriter for the nodes' logs and metrics); see README.md."
  type        = string
}

variable "source_image" {
  description = "Boot image of the GPU nodes: it needs the NVIDIA driver with nvidia-persistenced, curl and systemd. The default is the image family of a Deep Learning VM with the driver preinstalled; pin an image in production so that new nodes do not change image when the family moves on."
  type        = string
  default     = "projects/deeplearning-platform-release/global/images/family/common-cu129-ubuntu-2404-nvidia-580"
}

variable "boot_disk_size_gb" {
  description = "Boot disk size of the GPU nodes, in GB."
  type        = number
  default     = 200
}

variable "agent_url" {
  description = "HTTPS URL of the linux/amd64 agent binary the nodes run (make release's autoscaler-agent-linux-amd64), fetched without credentials: an internal mirror, or a Cloud Storage signed URL."
  type        = string
}

variable "agent_sha256" {
  description = "SHA-256 of the binary at var.agent_url, in hex. Nodes refuse a binary that does not match."
  type        = string

  validation {
    condition     = can(regex("^[0-9a-f]{64}$", var.agent_sha256))
    error_message = "agent_sha256 must be 64 lowercase hex digits."
  }
}

variable "controller_url" {
  description = "URL at which the agents reach the Fleetcast controller's API (its controller.listen address), e.g. https://fleetcast.internal:8790. It is also the audience of the VMs' identity tokens: set the controller's controller.gcp_identity_audience to it."
  type        = string

  validation {
    condition     = can(regex("^https?://", var.controller_url))
    error_message = "controller_url must be an http:// or https:// URL."
  }
}

variable "controller_ca_pem" {
  description = "PEM of the CA that signed the controller's certificate (its tls_cert_file), which the agents verify it against; empty: the system's roots."
  type        = string
  default     = ""
}

variable "initial_size" {
  description = "Size the group is created at. Fleetcast owns the size afterwards; there is no maximum here: the gcp pool's max in examples/cloud.hcl (and the project's A100 quota) bounds it."
  type        = number
  default     = 0
}

variable "api_token_secret_prefix" {
  description = "Prefix of the Secret Manager secrets that hold the controller's API tokens, one per scope (operator, demand, read)."
  type        = string
  default     = "fleetcast-api-token-"
}

variable "scheduler_service_account" {
  description = "Email of the service account of the scheduler that pushes demand (a Slurm controller's VM, say); it may read the demand token's secret only. Empty: none is granted."
  type        = string
  default     = ""
}

variable "monitoring_service_account" {
  description = "Email of the service account of the monitoring that reads the controller's plans and fleet; it may read the read token's secret only. Empty: none is granted."
  type        = string
  default     = ""
}
