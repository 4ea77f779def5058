# A bucket for bucket-memory: versioned (for recovery), encrypted, private, TLS-only, with old
# versions expiring, and an IAM policy document granting exactly what the store needs per prefix.

resource "aws_s3_bucket" "memory" {
  #checkov:skip=CKV_AWS_18:Access logging needs a separate log bucket; enable it in your account baseline.
  #checkov:skip=CKV_AWS_144:Cross-region replication is a cost and residency decision left to the caller.
  #checkov:skip=CKV2_AWS_62:The store polls its log; it needs no event notifications.
  #checkov:skip=CKV_AWS_145:SSE-S3 by default; pass kms_key_arn for SSE-KMS.
  bucket        = var.bucket_name
  force_destroy = var.force_destroy
  tags          = var.tags
}

resource "aws_s3_bucket_versioning" "memory" {
  bucket = aws_s3_bucket.memory.id
  versioning_configuration {
    status = "Enabled"
  }
}

resource "aws_s3_bucket_server_side_encryption_configuration" "memory" {
  bucket = aws_s3_bucket.memory.id
  rule {
    apply_server_side_encryption_by_default {
      sse_algorithm     = var.kms_key_arn == null ? "AES256" : "aws:kms"
      kms_master_key_id = var.kms_key_arn
    }
    bucket_key_enabled = var.kms_key_arn != null
  }
}

resource "aws_s3_bucket_public_access_block" "memory" {
  bucket                  = aws_s3_bucket.memory.id
  block_public_acls       = true
  block_public_policy     = true
  ignore_public_acls      = true
  restrict_public_buckets = true
}

resource "aws_s3_bucket_ownership_controls" "memory" {
  bucket = aws_s3_bucket.memory.id
  rule {
    object_ownership = "BucketOwnerEnforced"
  }
}

resource "aws_s3_bucket_lifecycle_configuration" "memory" {
  bucket = aws_s3_bucket.memory.id
  rule {
    id     = "expire-noncurrent-versions"
    status = "Enabled"
    filter {}
    noncurrent_version_expiration {
      noncurrent_days = var.noncurrent_version_days
    }
    abort_incomplete_multipart_upload {
      days_after_initiation = 1
    }
  }
  depends_on = [aws_s3_bucket_versioning.memory]
}

data "aws_iam_policy_document" "tls_only" {
  statement {
    sid     = "DenyInsecureTransport"
    effect  = "Deny"
    actions = ["s3:*"]
    resources = [
      aws_s3_bucket.memory.arn,
      "${aws_s3_bucket.memory.arn}/*",
    ]
    principals {
      type        = "*"
      identifiers = ["*"]
    }
    condition {
      test     = "Bool"
      variable = "aws:SecureTransport"
      values   = ["false"]
    }
  }
}

resource "aws_s3_bucket_policy" "tls_only" {
  bucket     = aws_s3_bucket.memory.id
  policy     = data.aws_iam_policy_document.tls_only.json
  depends_on = [aws_s3_bucket_public_access_block.memory]
}

locals {
  # One template, rendered per prefix, so that tests can render and apply the very same policy.
  prefix_statements = flatten([
    for prefix in var.prefixes : jsondecode(templatefile("${path.module}/access-policy.json.tftpl", {
      bucket = aws_s3_bucket.memory.id
      prefix = trimsuffix(prefix, "/") == "" ? "" : "${trimsuffix(prefix, "/")}/"
    }))
  ])
  recover_statements = var.allow_recover ? [{
    Effect   = "Allow"
    Action   = ["s3:ListBucketVersions", "s3:GetObjectVersion"]
    Resource = [aws_s3_bucket.memory.arn, "${aws_s3_bucket.memory.arn}/*"]
  }] : []
  access_policy = jsonencode({
    Version   = "2012-10-17"
    Statement = concat(local.prefix_statements, local.recover_statements)
  })
}
