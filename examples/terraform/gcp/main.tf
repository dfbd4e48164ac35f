# GPU fleet on GCP for Fleetcast: a zonal managed instance group of
# a2-highgpu-8g nodes (8 x A100 each), the gcp pool in examples/cloud.hcl.
#
# Terraform creates the group; Fleetcast sizes it. Terraform owns what the
# group is (template, zone, labels); the controller owns how many nodes it
# has and which ones go.
#
# There is deliberately no google_compute_autoscaler: Fleetcast is this
# group's autoscaler. A second one would fight it over the target size, and
# it would scale on the utilisation it sees now rather than forecast demand,
# deleting nodes without draining their jobs first.

provider "google" {
  project = var.project
  region  = var.region
}

resource "google_compute_instance_template" "a100" {
  name_prefix  = "fleetcast-ondemand-a100-"
  description  = "Fleetcast pool gcp-ondemand-a100: a2-highgpu-8g, 8 x A100"
  machine_type = "a2-highgpu-8g"

  # No guest_accelerator block: A2 machine types come with their GPUs (8 x
  # A100 40GB for a2-highgpu-8g).

  labels = {
    fleetcast-managed = "true"
    fleetcast-pool    = "gcp-ondemand-a100"
  }

  metadata = {
    fleetcast-pool = "gcp-ondemand-a100"
    startup-script = templatefile("${path.module}/startup.sh.tftpl", {
      pool           = "gcp-ondemand-a100"
      project        = var.project
      agent_url      = var.agent_url
      agent_sha256   = var.agent_sha256
      controller_url = var.controller_url
      audience       = var.controller_url
      controller_ca  = var.controller_ca_pem
    })
  }

  disk {
    source_image = var.source_image
    boot         = true
    auto_delete  = true
    disk_type    = "pd-ssd"
    disk_size_gb = var.boot_disk_size_gb
  }

  network_interface {
    subnetwork = var.subnetwork
  }

  # The nodes call no Google API: an attached service account lets the
  # metadata server sign the VM's identity token (the agent's proof of which
  # VM it is), which needs no scope; logs and metrics only.
  service_account {
    email  = var.service_account_email
    scopes = ["logging-write", "monitoring-write"]
  }

  # GPU VMs cannot live-migrate: host maintenance stops them.
  scheduling {
    on_host_maintenance = "TERMINATE"
    automatic_restart   = true
    provisioning_model  = "STANDARD"
  }


  # Templates cannot change in place: a change makes a new one, and the group
  # moves to it before the old one is deleted.
  lifecycle {
    create_before_destroy = true
  }
}

resource "google_compute_instance_group_manager" "a100" {
  name               = "fleetcast-ondemand-a100"
  description        = "Fleetcast pool gcp-ondemand-a100, sized by the Fleetcast controller"
  zone               = var.zone
  base_instance_name = "fleetcast-ondemand-a100"
  target_size        = var.initial_size

  version {
    instance_template = google_compute_instance_template.a100.self_link_unique
  }

  # A new template reaches the nodes created after it. A proactive update
  # would replace running nodes without draining their jobs.
  update_policy {
    type           = "OPPORTUNISTIC"
    minimal_action = "REPLACE"
  }

  lifecycle {
    # Terraform sets the target size once, when it creates the group; from
    # then on Fleetcast owns it, resizing ahead of forecast demand and
    # deleting the nodes it drained. Without ignore_changes every
    # `terraform apply` would reset the group to var.initial_size, and the
    # controller and Terraform would undo each other.
    ignore_changes = [target_size]
  }
}
