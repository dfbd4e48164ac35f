variable "project" {
  description = "GCP project of the controller's instances and secrets."
  type        = string
}

variable "region" {
  description = "Region of the controller's instances and their subnetwork."
  type        = string
  default     = "us-central1"
}

variable "zones" {
  description = "Zones of the instances: replica i goes in zones[i % length]. Three zones keep two etcd members when one fails."
  type        = list(string)
  default     = ["us-central1-a", "us-central1-b", "us-central1-c"]
}

variable "name" {
  description = "Prefix of every name this module makes (instances, addresses, firewall rules, secrets), and the controller's fleet name (controller.fleet)."
  type        = string
  default     = "fleetcast"
}

variable "replicas" {
  description = "Controller instances: 3, each with an etcd member and a replica of the controller (one leads, the others take over within the lease), or 1, a single controller keeping its state in a file."
  type        = number
  default     = 3
  validation {
    condition     = contains([1, 3], var.replicas)
    error_message = "replicas is 1 (one controller, its state in a file) or 3 (three replicas on a three-member etcd)."
  }
}

variable "etcd_endpoints" {
  description = "Client URLs of an etcd you run already (https://HOST:2379, its members' certificates signed by the CA in the TLS secret); empty, the default, runs a member on each of the three instances."
  type        = list(string)
  default     = []
}

variable "machine_type" {
  description = "The controller's machine type: 2 vCPUs and 8 GB hold a controller and an etcd member for fleets of thousands of nodes."
  type        = string
  default     = "e2-standard-2"
}

variable "source_image" {
  description = "Boot image of the controller's instances: it needs systemd, curl 7.76 or later, runuser (util-linux) and python3."
  type        = string
  default     = "projects/debian-cloud/global/images/family/debian-12"
}

variable "network" {
  description = "Self link or name of the VPC network of the instances (and of the fleet's nodes, which report to them): the firewall rules are its."
  type        = string
}

variable "subnetwork" {
  description = "Self link or name of the subnetwork of the instances, in var.region. They get no external address: it needs Cloud NAT or Private Google Access (for the release download and Google's APIs)."
  type        = string
}

variable "fleet_cidrs" {
  description = "Address ranges of the fleet's nodes: their agents report to the API (and schedulers push demand from them)."
  type        = list(string)
  validation {
    condition     = length(var.fleet_cidrs) > 0
    error_message = "fleet_cidrs names at least one range: the nodes' agents report to the API (and an empty source list would open a GCP firewall rule to everyone)."
  }
}

variable "operator_cidrs" {
  description = "Address ranges of the operators and their tools (autoscaler plan, report, api-token; the web page; Prometheus). Nothing else reaches the API."
  type        = list(string)
  default     = []
}

variable "api_port" {
  description = "The controller's API port (TLS): the nodes' controller_url and the operators' -addr."
  type        = number
  default     = 8790
}

variable "controller_service_account_email" {
  description = "Service account of the controller's instances: the fleet module's output controller_service_account_email (its role resizes the groups)."
  type        = string
}

variable "gcp_identity_audience" {
  description = "The audience of the nodes' identity tokens: the fleet module's controller_url, which the controller checks each token's audience against (controller.gcp_identity_audience)."
  type        = string
}

variable "release_url" {
  description = "Where the instances download the controller's binary (make release's autoscaler-linux-amd64): a URL they can reach without credentials, such as an internal artifact store."
  type        = string
}

variable "release_sha256" {
  description = "SHA-256 of the binary at release_url, in hex (make release's SHA256SUMS): an instance refuses a binary that does not match."
  type        = string
  validation {
    condition     = can(regex("^[0-9a-f]{64}$", var.release_sha256))
    error_message = "release_sha256 is a SHA-256 in lower-case hex (64 characters)."
  }
}

variable "etcd_url" {
  description = "Where the instances download etcd's release tarball (etcd-vX.Y.Z-linux-amd64.tar.gz), when they run the members (etcd_endpoints empty)."
  type        = string
  default     = ""
}

variable "etcd_sha256" {
  description = "SHA-256 of the tarball at etcd_url, in hex."
  type        = string
  default     = ""
}

variable "fleet_config" {
  description = "The fleet's config without its controller block (pools, forecast, drain, limits): this module writes the controller block for each instance. Empty takes fleet.hcl beside this file: examples/cloud.hcl's gcp pool."
  type        = string
  default     = ""
}
