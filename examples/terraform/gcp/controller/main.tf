# The Fleetcast controller on GCP: three instances (or one), each running
# the controller as a systemd unit and, unless var.etcd_endpoints names an
# etcd of yours, a member of a three-member etcd the replicas keep their
# state in. One replica leads and acts; the others serve reads and take
# over within the lease (docs/ha.md). Apply the fleet module
# (examples/terraform/gcp) first: its controller service account is the
# one these instances run as.
#
# The secrets are made empty: Terraform never holds their values (they
# would be in its state). An operator adds the TLS certificate, its key and
# CA, and the root API token as versions (README.md); each instance waits
# for them at boot, then starts.

provider "google" {
  project = var.project
  region  = var.region
}

locals {
  # Members on the instances: three replicas and no etcd given.
  run_etcd = var.replicas == 3 && length(var.etcd_endpoints) == 0
  # Replicas share their state in etcd (an ha block) with three, or with
  # an etcd given; one replica alone keeps it in a file.
  ha = var.replicas == 3 || length(var.etcd_endpoints) > 0

  ips             = google_compute_address.controller[*].address
  etcd_endpoints  = local.run_etcd ? [for ip in local.ips : "https://${ip}:2379"] : var.etcd_endpoints
  initial_cluster = join(",", [for i, ip in local.ips : "m${i}=https://${ip}:2380"])

  fleet_config = var.fleet_config != "" ? var.fleet_config : file("${path.module}/fleet.hcl")

  secrets = {
    tls_ca     = "${var.name}-controller-tls-ca"
    tls_cert   = "${var.name}-controller-tls-cert"
    tls_key    = "${var.name}-controller-tls-key"
    root_token = "${var.name}-controller-root-api-token"
  }
  tag = "${var.name}-controller"
}

# Each replica's address, reserved before its instance, so that every
# instance's etcd knows the others' at boot and the certificate can name
# them all.
resource "google_compute_address" "controller" {
  count = var.replicas

  name         = "${var.name}-controller-${count.index}"
  address_type = "INTERNAL"
  subnetwork   = var.subnetwork
  region       = var.region
}

# The network's own rules may allow more (the default network's
# default-allow-internal allows every port from inside it): this denies the
# controller's ports to everyone first (priority 1000), and the two rules
# below allow them from the fleet's nodes, the operators and the other
# replicas (900, which comes first).
resource "google_compute_firewall" "deny" {
  name        = "${var.name}-controller-deny"
  network     = var.network
  description = "Fleetcast API and etcd: nobody but the rules of priority 900"
  direction   = "INGRESS"
  priority    = 1000
  deny {
    protocol = "tcp"
    ports    = [tostring(var.api_port), "2379-2380"]
  }
  source_ranges = ["0.0.0.0/0"]
  target_tags   = [local.tag]
}

resource "google_compute_firewall" "api" {
  name        = "${var.name}-controller-api"
  network     = var.network
  description = "Fleetcast API from the fleet's nodes and the operators only"
  direction   = "INGRESS"
  priority    = 900
  allow {
    protocol = "tcp"
    ports    = [tostring(var.api_port)]
  }
  source_ranges = concat(var.fleet_cidrs, var.operator_cidrs)
  target_tags   = [local.tag]
}

# Followers forward to the leader; members talk to each other.
resource "google_compute_firewall" "replicas" {
  name        = "${var.name}-controller-replicas"
  network     = var.network
  description = "Fleetcast API and etcd between the controller's instances"
  direction   = "INGRESS"
  priority    = 900
  allow {
    protocol = "tcp"
    ports    = [tostring(var.api_port), "2379-2380"]
  }
  source_tags = [local.tag]
  target_tags = [local.tag]
}

resource "google_secret_manager_secret" "controller" {
  for_each = local.secrets

  secret_id = each.value
  labels = {
    fleetcast-controller = replace(each.key, "_", "-")
  }

  replication {
    auto {}
  }
}

# The controller's service account reads its own secrets, and nothing
# else here.
resource "google_secret_manager_secret_iam_member" "controller" {
  for_each = google_secret_manager_secret.controller

  secret_id = each.value.id
  role      = "roles/secretmanager.secretAccessor"
  member    = "serviceAccount:${var.controller_service_account_email}"
}

resource "google_compute_instance" "controller" {
  count = var.replicas

  name         = "${var.name}-controller-${count.index}"
  machine_type = var.machine_type
  zone         = var.zones[count.index % length(var.zones)]
  tags         = [local.tag]
  labels       = { fleetcast-role = "controller" }

  boot_disk {
    initialize_params {
      image = var.source_image
      size  = 30
      type  = "pd-balanced"
    }
  }

  # No external address: the API is reached inside the network only.
  network_interface {
    subnetwork = var.subnetwork
    network_ip = local.ips[count.index]
  }

  service_account {
    email  = var.controller_service_account_email
    scopes = ["cloud-platform"]
  }

  shielded_instance_config {
    enable_secure_boot = true
  }

  metadata = {
    enable-oslogin = "TRUE"
    startup-script = templatefile("${path.module}/controller-setup.sh.tftpl", {
      index             = count.index
      name              = var.name
      project           = var.project
      ip                = local.ips[count.index]
      api_port          = var.api_port
      ha                = local.ha
      run_etcd          = local.run_etcd
      etcd_list         = jsonencode(local.etcd_endpoints)
      initial_cluster   = local.initial_cluster
      release_url       = var.release_url
      release_sha256    = var.release_sha256
      etcd_url          = var.etcd_url
      etcd_sha256       = var.etcd_sha256
      fleet_config_b64  = base64encode(local.fleet_config)
      audience          = var.gcp_identity_audience
      secret_tls_ca     = local.secrets.tls_ca
      secret_tls_cert   = local.secrets.tls_cert
      secret_tls_key    = local.secrets.tls_key
      secret_root_token = local.secrets.root_token
    })
  }

  # An instance holds an etcd member's data and a replica: a new image
  # must never replace all three at once. The startup script, changed,
  # runs at each instance's next boot: upgrade one at a time (README.md,
  # "Upgrading").
  lifecycle {
    ignore_changes = [boot_disk[0].initialize_params[0].image]
    precondition {
      condition     = !local.run_etcd || (var.etcd_url != "" && can(regex("^[0-9a-f]{64}$", var.etcd_sha256)))
      error_message = "Three replicas on their own etcd need etcd_url and etcd_sha256 (or name your etcd in etcd_endpoints)."
    }
  }
}
