variable "region" {
  description = "AWS region of the fleet. It must match the region of the aws pools in examples/cloud.hcl."
  type        = string
  default     = "us-east-1"
}

variable "availability_zone" {
  description = "Availability zone of the capacity reservation and of the reserved group: a reservation holds capacity in one zone."
  type        = string
  default     = "us-east-1a"
}

variable "subnet_ids" {
  description = "Private subnets for the GPU nodes, keyed by availability zone, e.g. { \"us-east-1a\" = \"subnet-0abc...\" }. The reserved group uses the subnet in var.availability_zone; the on-demand and spot groups use them all."
  type        = map(string)
}

variable "security_group_ids" {
  description = "Security groups of the GPU nodes. They must allow outbound HTTPS (the agent download, SSM) and the controller's port."
  type        = list(string)
}

variable "instance_profile_name" {
  description = "Instance profile of the GPU nodes. Its role needs ssm:GetParameter on var.bootstrap_token_parameter (and kms:Decrypt on its key); see README.md."
  type        = string
}

variable "controller_role_name" {
  description = "Name of the controller's IAM role and instance profile (controller.tf). IAM names are per account: give each fleet's controller its own."
  type        = string
  default     = "fleetcast-controller"
}

variable "gpu_ami_id" {
  description = "AMI of the GPU nodes: it needs the NVIDIA driver with nvidia-persistenced, the AWS CLI and systemd. When null, the newest AWS Deep Learning Base OSS Nvidia Driver GPU AMI (Ubuntu 22.04) is used; pin an id in production so that new nodes do not change AMI on the next apply."
  type        = string
  default     = null
}

variable "agent_url" {
  description = "HTTPS URL of the linux/amd64 agent binary the nodes run (make release's autoscaler-agent-linux-amd64), e.g. a release artifact in S3 or on an internal mirror."
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
  description = "URL at which the agents reach the Fleetcast controller's API over HTTPS (its controller.listen address, a name its certificate is for), e.g. https://fleetcast.internal:8790."
  type        = string

  validation {
    condition     = can(regex("^https://[A-Za-z0-9.-]+(:[0-9]+)?/?$", var.controller_url))
    error_message = "controller_url must be an https:// URL of a host and port, such as https://fleetcast.internal:8790: the agents' credentials must not cross the network in the clear."
  }
}

variable "controller_ca_pem" {
  description = "PEM certificate(s) of the CA that signs the controller's TLS certificate (controller.tls_cert_file); the agents verify the controller against it."
  type        = string

  validation {
    condition     = can(regex("-----BEGIN CERTIFICATE-----", var.controller_ca_pem))
    error_message = "controller_ca_pem must hold a PEM certificate."
  }
}

variable "bootstrap_token_parameter" {
  description = "SSM Parameter Store name of the SecureString holding the fleet's bootstrap secret (the controller's controller.bootstrap_token_file holds the same): nodes present it with their signed identity document to get their own credentials."
  type        = string
  default     = "/fleetcast/bootstrap-token"
}

# The sizes below are the pools' min and max in examples/cloud.hcl (with
# reserved_nodes = 4, which the reserved-a100 pool needs; the default
# reserves nothing); config/examples_test.go fails when they disagree.

variable "reserved_nodes" {
  description = "Nodes in the capacity reservation, and the reserved group's min and max size. A reservation is paid for every hour at the on-demand rate whether or not nodes run in it (p4d.24xlarge: $32.77 an hour each, about $23,900 a month); 0, the default, makes no reservation and no reserved group. examples/cloud.hcl's reserved-a100 pool is reserved_nodes = 4."
  type        = number
  default     = 0

  validation {
    condition     = var.reserved_nodes >= 0 && floor(var.reserved_nodes) == var.reserved_nodes
    error_message = "reserved_nodes must be a whole number, 0 or more."
  }
}

variable "spot_min_size" {
  description = "Minimum size of the spot group."
  type        = number
  default     = 0
}

variable "spot_max_size" {
  description = "Maximum size of the spot group."
  type        = number
  default     = 8
}

variable "on_demand_min_size" {
  description = "Minimum size of the on-demand group."
  type        = number
  default     = 0
}

variable "on_demand_max_size" {
  description = "Maximum size of the on-demand group."
  type        = number
  default     = 16
}

variable "api_token_secret_prefix" {
  description = "Prefix of the Secrets Manager secrets that hold the controller's API tokens, one per scope (operator, demand, read)."
  type        = string
  default     = "fleetcast/api-token/"
}

variable "scheduler_role_name" {
  description = "IAM role of the scheduler that pushes demand (a Slurm controller's instance role, say); it may read the demand token's secret only. Empty: none is granted."
  type        = string
  default     = ""
}

variable "monitoring_role_name" {
  description = "IAM role of the monitoring that reads the controller's plans and fleet; it may read the read token's secret only. Empty: none is granted."
  type        = string
  default     = ""
}
