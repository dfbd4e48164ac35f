# The Fleetcast controller on AWS: three instances (or one), each running
# the controller as a systemd unit and, unless var.etcd_endpoints names an
# etcd of yours, a member of a three-member etcd the replicas keep their
# state in. One replica leads and acts; the others serve reads and take
# over within the lease (docs/ha.md). Apply the fleet module
# (examples/terraform/aws) first: its controller role is the one these
# instances run with.
#
# The secrets are made empty: Terraform never holds their values (they
# would be in its state). An operator puts the TLS certificate, its key
# and CA, and the root API token there (README.md); each instance waits
# for them at boot, then starts.

provider "aws" {
  region = var.region
}

data "aws_ssm_parameter" "al2023" {
  count = var.ami_id == null ? 1 : 0

  name = "/aws/service/ami-amazon-linux-latest/al2023-ami-kernel-default-x86_64"
}

locals {
  ami_id = coalesce(var.ami_id, one(data.aws_ssm_parameter.al2023[*].insecure_value))

  # Members on the instances: three replicas and no etcd given.
  run_etcd = var.replicas == 3 && length(var.etcd_endpoints) == 0
  # Replicas share their state in etcd (an ha block) with three, or with
  # an etcd given; one replica alone keeps it in a file.
  ha = var.replicas == 3 || length(var.etcd_endpoints) > 0

  ips             = aws_network_interface.controller[*].private_ip
  etcd_endpoints  = local.run_etcd ? [for ip in local.ips : "https://${ip}:2379"] : var.etcd_endpoints
  initial_cluster = join(",", [for i, ip in local.ips : "m${i}=https://${ip}:2380"])

  fleet_config = var.fleet_config != "" ? var.fleet_config : file("${path.module}/fleet.hcl")

  secrets = {
    tls_ca     = "${var.name}/controller/tls-ca"
    tls_cert   = "${var.name}/controller/tls-cert"
    tls_key    = "${var.name}/controller/tls-key"
    root_token = "${var.name}/controller/root-api-token"
  }
}

# Each replica's address, made before its instance, so that every
# instance's etcd knows the others' at boot and the certificate can name
# them all.
resource "aws_network_interface" "controller" {
  count = var.replicas

  subnet_id       = var.subnet_ids[count.index % length(var.subnet_ids)]
  security_groups = [aws_security_group.controller.id]
  description     = "${var.name} controller ${count.index}"
  tags            = { Name = "${var.name}-controller-${count.index}", "fleetcast/role" = "controller" }
}

resource "aws_security_group" "controller" {
  name        = "${var.name}-controller"
  description = "Fleetcast controller: its API from the fleet's nodes and the operators only; etcd between the controller's instances only."
  vpc_id      = var.vpc_id
  tags        = { Name = "${var.name}-controller", "fleetcast/role" = "controller" }
}

resource "aws_vpc_security_group_ingress_rule" "api" {
  for_each = toset(concat(var.fleet_cidrs, var.operator_cidrs))

  security_group_id = aws_security_group.controller.id
  description       = "Fleetcast API from the fleet's nodes or the operators"
  cidr_ipv4         = each.value
  ip_protocol       = "tcp"
  from_port         = var.api_port
  to_port           = var.api_port
}

# Followers forward to the leader; members talk to each other.
resource "aws_vpc_security_group_ingress_rule" "replicas" {
  for_each = { api = [var.api_port, var.api_port], etcd = [2379, 2380] }

  security_group_id            = aws_security_group.controller.id
  description                  = "Fleetcast ${each.key} between the controller's instances"
  referenced_security_group_id = aws_security_group.controller.id
  ip_protocol                  = "tcp"
  from_port                    = each.value[0]
  to_port                      = each.value[1]
}

# Out: the clouds' APIs, the release downloads, the nodes' identity checks.
resource "aws_vpc_security_group_egress_rule" "all" {
  security_group_id = aws_security_group.controller.id
  description       = "Cloud APIs and downloads"
  cidr_ipv4         = "0.0.0.0/0"
  ip_protocol       = "-1"
}

resource "aws_secretsmanager_secret" "controller" {
  for_each = local.secrets

  name        = each.value
  description = "Fleetcast controller ${replace(each.key, "_", " ")} (README.md: put its value there; instances wait for it)."
}

# The controller's role reads its own secrets and the bootstrap secret;
# the provider's policy (the fleet module's iam-policy.json) stays as is.
resource "aws_iam_role_policy" "controller_secrets" {
  name = "${var.name}-controller-secrets"
  role = var.controller_role_name
  policy = jsonencode({
    Version = "2012-10-17"
    Statement = [
      {
        Effect   = "Allow"
        Action   = "secretsmanager:GetSecretValue"
        Resource = [for s in aws_secretsmanager_secret.controller : s.arn]
      },
      {
        Effect   = "Allow"
        Action   = "ssm:GetParameter"
        Resource = "arn:aws:ssm:${var.region}:*:parameter/${trimprefix(var.bootstrap_token_parameter, "/")}"
      },
    ]
  })
}

resource "aws_instance" "controller" {
  count = var.replicas

  ami                  = local.ami_id
  instance_type        = var.instance_type
  iam_instance_profile = var.controller_instance_profile_name

  network_interface {
    network_interface_id = aws_network_interface.controller[count.index].id
    device_index         = 0
  }

  metadata_options {
    http_tokens   = "required"
    http_endpoint = "enabled"
  }

  root_block_device {
    volume_type = "gp3"
    volume_size = 30
    encrypted   = true
  }

  user_data = templatefile("${path.module}/controller-setup.sh.tftpl", {
    index               = count.index
    name                = var.name
    region              = var.region
    ip                  = local.ips[count.index]
    api_port            = var.api_port
    ha                  = local.ha
    run_etcd            = local.run_etcd
    etcd_list           = jsonencode(local.etcd_endpoints)
    initial_cluster     = local.initial_cluster
    release_url         = var.release_url
    release_sha256      = var.release_sha256
    etcd_url            = var.etcd_url
    etcd_sha256         = var.etcd_sha256
    fleet_config_b64    = base64encode(local.fleet_config)
    identity_pem_b64    = base64encode(var.aws_identity_certificate_pem)
    bootstrap_parameter = var.bootstrap_token_parameter
    secret_tls_ca       = local.secrets.tls_ca
    secret_tls_cert     = local.secrets.tls_cert
    secret_tls_key      = local.secrets.tls_key
    secret_root_token   = local.secrets.root_token
  })

  tags = { Name = "${var.name}-controller-${count.index}", "fleetcast/role" = "controller" }

  # An instance holds an etcd member's data and a replica: a new AMI or
  # set-up must never replace all three at once. Upgrade one instance at a
  # time (README.md, "Upgrading").
  lifecycle {
    ignore_changes = [ami, user_data]
    precondition {
      condition     = !local.run_etcd || (var.etcd_url != "" && can(regex("^[0-9a-f]{64}$", var.etcd_sha256)))
      error_message = "Three replicas on their own etcd need etcd_url and etcd_sha256 (or name your etcd in etcd_endpoints)."
    }
  }
}
