# A bucket for bucket-memory: versioned (for recovery), encrypted, private, TLS-only, with old
# versions and stale delete markers expiring, and two IAM policy documents limited to the prefixes:
# one for agents, one for operators (recover, compact, verify, erase).

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
    # A delete marker whose older versions have all expired hides nothing and only slows listings.
    expiration {
      expired_object_delete_marker = true
    }
    abort_incomplete_multipart_upload {
      days_after_initiation = 1
    }
  }
  depends_on = [aws_s3_bucket_versioning.memory]
}

data "aws_iam_policy_document" "bucket" {
  source_policy_documents = var.bucket_policy_documents
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

resource "aws_s3_bucket_policy" "memory" {
  bucket     = aws_s3_bucket.memory.id
  policy     = data.aws_iam_policy_document.bucket.json
  depends_on = [aws_s3_bucket_public_access_block.memory]
}

locals {
  # "teams/blue" and "teams/blue/" are the prefix "teams/blue/"; "" is the whole bucket.
  prefixes = distinct([for prefix in var.prefixes : trimsuffix(prefix, "/") == "" ? "" : "${trimsuffix(prefix, "/")}/"])
  # What the policies grant: the prefixes, or the memory of the session's tenant under each.
  granted = var.tenant_tag == null ? local.prefixes : [for prefix in local.prefixes : "${prefix}$${aws:PrincipalTag/${var.tenant_tag}}/"]
  # Tag values that name no memory of the tenant's own: none, several segments, relative ones, or a
  # folder a memory at the prefix keeps (`bucket-memory policy`'s HOSTILE_TENANTS).
  hostile_tenants = ["", "*/*", ".", "..", "log", "checkpoints", "erasures", "pending", "doctor"]
}

# What agents and operators both hold: objects under the prefixes, listing under them, the key.
data "aws_iam_policy_document" "objects" {
  statement {
    sid       = "MemoryObjects"
    actions   = ["s3:GetObject", "s3:PutObject", "s3:DeleteObject"]
    resources = [for prefix in local.granted : "${aws_s3_bucket.memory.arn}/${prefix}*"]
  }
  statement {
    sid       = "ListMemories"
    actions   = ["s3:ListBucket"]
    resources = [aws_s3_bucket.memory.arn]
    condition {
      test     = "StringLike"
      variable = "s3:prefix"
      values   = [for prefix in local.granted : "${prefix}*"]
    }
  }
  dynamic "statement" {
    for_each = var.kms_key_arn == null ? [] : [var.kms_key_arn]
    content {
      sid       = "MemoryEncryptionKey"
      actions   = ["kms:Decrypt", "kms:GenerateDataKey"]
      resources = [statement.value]
      condition {
        test     = "StringEquals"
        variable = "kms:ViaService"
        values   = ["s3.${split(":", statement.value)[3]}.amazonaws.com"] # the key's region, the bucket's too
      }
    }
  }
}

# Agents never create or delete an erasure record: `bucket-memory erase` writes one before its
# erasure commit, and readers take an `erase` change as an erasure only where one names it. The
# records of each memory and of every memory nested under it (IAM's * spans /); no other key a
# memory writes has an erasures segment. An explicit Deny outweighs every Allow.
data "aws_iam_policy_document" "access" {
  source_policy_documents = [data.aws_iam_policy_document.objects.json, data.aws_iam_policy_document.tenant_guard.json]
  statement {
    sid       = "OnlyOperatorsWriteErasureRecords"
    effect    = "Deny"
    actions   = ["s3:PutObject", "s3:DeleteObject"]
    resources = flatten([for prefix in local.granted : ["${aws_s3_bucket.memory.arn}/${prefix}erasures/*", "${aws_s3_bucket.memory.arn}/${prefix}*/erasures/*"]])
  }
}

# With a tenant tag, a session whose tag is missing or names no one segment of its own is refused:
# in the agents' and the operators' documents alike (no statement without a tag).
data "aws_iam_policy_document" "tenant_guard" {
  dynamic "statement" {
    for_each = var.tenant_tag == null ? [] : ["TenantTagIsSet"]
    content {
      sid       = statement.value
      effect    = "Deny"
      actions   = ["s3:*"]
      resources = [aws_s3_bucket.memory.arn, "${aws_s3_bucket.memory.arn}/*"]
      condition {
        test     = "Null"
        variable = "aws:PrincipalTag/${var.tenant_tag}"
        values   = ["true"]
      }
    }
  }
  dynamic "statement" {
    for_each = var.tenant_tag == null ? [] : ["TenantTagIsOneSegment"]
    content {
      sid       = statement.value
      effect    = "Deny"
      actions   = ["s3:*"]
      resources = [aws_s3_bucket.memory.arn, "${aws_s3_bucket.memory.arn}/*"]
      condition {
        test     = "StringLike"
        variable = "aws:PrincipalTag/${var.tenant_tag}"
        values   = local.hostile_tenants
      }
    }
  }
}

# Operators hold the objects grants without the agents' Deny: erase creates erasure records, and
# deletes one whose commit lost its seq.
data "aws_iam_policy_document" "operator" {
  source_policy_documents = [data.aws_iam_policy_document.objects.json, data.aws_iam_policy_document.tenant_guard.json]
  statement {
    sid       = "MemoryVersioningStatus"
    actions   = ["s3:GetBucketVersioning"]
    resources = [aws_s3_bucket.memory.arn]
  }
  statement {
    sid       = "ListMemoryVersions"
    actions   = ["s3:ListBucketVersions"]
    resources = [aws_s3_bucket.memory.arn]
    condition {
      test     = "StringLike"
      variable = "s3:prefix"
      values   = [for prefix in local.granted : "${prefix}*"]
    }
  }
  statement {
    sid       = "ReadMemoryVersions"
    actions   = ["s3:GetObjectVersion"]
    resources = [for prefix in local.granted : "${aws_s3_bucket.memory.arn}/${prefix}*"]
  }
  statement {
    sid       = "EraseMemoryVersions"
    actions   = ["s3:DeleteObjectVersion"] # `bucket-memory erase` removes old versions that hold an erased text
    resources = [for prefix in local.granted : "${aws_s3_bucket.memory.arn}/${prefix}*"]
  }
}
