# The Fleetcast controller's own role, for the EC2 instance it runs on.
#
# Its one policy is iam-policy.json, beside this file: a copy of
# providers/aws/iam-policy.json, kept here so that the module works
# wherever it is copied. The provider's tests check that file against every
# AWS call the provider makes, and providers/aws/policy_test.go that this
# copy is the same, byte for byte, and that this role uses it alone, so the
# role can neither fall behind the code nor allow more than it needs. It
# scales, protects and terminates only what carries the
# fleetcast/managed=true tag the groups above set.
#
# The nodes have a role of their own (var.instance_profile_name): the
# controller's is never on a GPU node.

resource "aws_iam_role" "controller" {
  name        = var.controller_role_name
  description = "The Fleetcast controller: sizes the Auto Scaling groups tagged fleetcast/managed=true and terminates their drained nodes."

  assume_role_policy = jsonencode({
    Version = "2012-10-17"
    Statement = [{
      Effect    = "Allow"
      Principal = { Service = "ec2.amazonaws.com" }
      Action    = "sts:AssumeRole"
    }]
  })
}

resource "aws_iam_role_policy" "controller" {
  name   = "fleetcast-controller"
  role   = aws_iam_role.controller.id
  policy = file("${path.module}/iam-policy.json")
}

resource "aws_iam_instance_profile" "controller" {
  name = var.controller_role_name
  role = aws_iam_role.controller.name
}
