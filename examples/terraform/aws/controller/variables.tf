variable "region" {
  description = "AWS region of the controller's instances; the fleet's pools (fleet.hcl) may be in others."
  type        = string
  default     = "us-east-1"
}

variable "name" {
  description = "Prefix of every name this module makes (instances, security group, secrets), and the controller's fleet name (controller.fleet)."
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

variable "instance_type" {
  description = "The controller's instance type: 2 vCPUs and 8 GiB hold a controller and an etcd member for fleets of thousands of nodes."
  type        = string
  default     = "m7i.large"
}

variable "ami_id" {
  description = "AMI of the controller's instances; null takes the newest Amazon Linux 2023 (x86-64). It needs systemd, curl, runuser (util-linux) and the AWS CLI."
  type        = string
  default     = null
}

variable "vpc_id" {
  description = "The VPC of the controller's instances (and of the fleet's nodes, which report to them)."
  type        = string
}

variable "subnet_ids" {
  description = "Private subnets for the instances, one per zone: replica i goes in subnet_ids[i % length]. Three zones keep two etcd members when one fails."
  type        = list(string)
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

variable "controller_instance_profile_name" {
  description = "Instance profile of the controller's instances: the fleet module's output controller_instance_profile_name (its role scales the groups tagged fleetcast/managed=true)."
  type        = string
  default     = "fleetcast-controller"
}

variable "controller_role_name" {
  description = "The role in that profile: this module lets it read the controller's secrets (and nothing else)."
  type        = string
  default     = "fleetcast-controller"
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
  description = "The fleet's config without its controller block (pools, forecast, drain, limits): this module writes the controller block for each instance. Empty takes fleet.hcl beside this file: examples/cloud.hcl's AWS pools."
  type        = string
  default     = ""
}

variable "bootstrap_token_parameter" {
  description = "SSM Parameter Store name of the SecureString holding the fleet's bootstrap secret, the fleet module's var.bootstrap_token_parameter: the controller checks the nodes' against it."
  type        = string
  default     = "/fleetcast/bootstrap-token"
}

variable "aws_identity_certificate_pem" {
  description = "AWS's public certificate for the region's instance identity documents (PEM, from the EC2 user guide's 'Verify the instance identity document'): the controller checks the nodes' signed identities with it."
  type        = string
}
