# The S3 module applied to a moto server, with an agent and an operator user holding the module's
# two policies, so that tests use the memory through exactly what Terraform applied.

terraform {
  required_version = ">= 1.5"
  required_providers {
    aws = {
      source = "hashicorp/aws"
    }
  }
}

variable "endpoint" {
  description = "The moto server's URL."
  type        = string
}

variable "kms_key_arn" {
  description = "Encrypt with this key (null for SSE-S3)."
  type        = string
  default     = null
}

provider "aws" {
  region                      = "us-east-1"
  access_key                  = "setup"
  secret_key                  = "setup"
  skip_credentials_validation = true
  skip_requesting_account_id  = true
  skip_metadata_api_check     = true
  s3_use_path_style           = true
  endpoints {
    s3  = var.endpoint
    iam = var.endpoint
    sts = var.endpoint
    kms = var.endpoint
  }
}

module "memory" {
  source        = "../modules/s3-memory-bucket"
  bucket_name   = "applied"
  prefixes      = ["teams/blue", "teams/green/"]
  kms_key_arn   = var.kms_key_arn
  force_destroy = true
  bucket_policy_documents = [jsonencode({
    Version = "2012-10-17"
    Statement = [{
      Sid       = "AuditorsList"
      Effect    = "Allow"
      Principal = { AWS = "arn:aws:iam::123456789012:root" }
      Action    = "s3:ListBucket"
      Resource  = "arn:aws:s3:::applied"
    }]
  })]
}

resource "aws_iam_user" "role" {
  for_each = toset(["agent", "operator"])
  name     = each.key
}

resource "aws_iam_user_policy" "role" {
  for_each = aws_iam_user.role
  name     = "memory"
  user     = each.value.name
  policy   = each.key == "agent" ? module.memory.access_policy_json : module.memory.operator_policy_json
}

resource "aws_iam_access_key" "role" {
  for_each = aws_iam_user.role
  user     = each.value.name
}

output "keys" {
  value     = { for name, key in aws_iam_access_key.role : name => { id = key.id, secret = key.secret } }
  sensitive = true
}

output "memory_urls" {
  value = module.memory.memory_urls
}

output "access_policy_json" {
  value = module.memory.access_policy_json
}

output "operator_policy_json" {
  value = module.memory.operator_policy_json
}
