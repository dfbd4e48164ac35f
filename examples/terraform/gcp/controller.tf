# The Fleetcast controller's own service account, with one custom role.
#
# The role's permissions are controller-role.json, beside this file: a
# copy of providers/gcp/controller-role.json, kept here so that the module
# works wherever it is copied. The provider's tests check that file against
# every Compute Engine call the provider makes, and
# providers/gcp/role_test.go that this copy is the same, byte for byte, and
# that this role uses it, so the role can neither fall behind the code nor
# allow more than it calls. Resizing a
# group and deleting its instances need only compute.instanceGroupManagers.update:
# the group's own service agent creates and deletes the VMs.

locals {
  controller_role = jsondecode(file("${path.module}/controller-role.json"))
}

resource "google_project_iam_custom_role" "controller" {
  role_id     = "fleetcastController"
  title       = local.controller_role.title
  description = local.controller_role.description
  permissions = local.controller_role.permissions
}

resource "google_service_account" "controller" {
  account_id   = "fleetcast-controller"
  display_name = "Fleetcast controller"
}

resource "google_project_iam_member" "controller" {
  project = var.project
  role    = google_project_iam_custom_role.controller.id
  member  = "serviceAccount:${google_service_account.controller.email}"
}
