# A bucket for bucket-memory: uniform access, no public access, versioned (for recovery), with old
# versions expiring, and one member granted object access under one prefix only.

resource "google_storage_bucket" "memory" {
  #checkov:skip=CKV_GCP_62:Access logs need a separate log bucket; enable them in your organization baseline.
  name                        = var.bucket_name
  location                    = var.location
  force_destroy               = var.force_destroy
  uniform_bucket_level_access = true
  public_access_prevention    = "enforced"
  labels                      = var.labels

  versioning {
    enabled = true
  }

  lifecycle_rule {
    condition {
      days_since_noncurrent_time = var.noncurrent_version_days
      with_state                 = "ARCHIVED"
    }
    action {
      type = "Delete"
    }
  }

  lifecycle_rule {
    condition {
      age = 1
    }
    action {
      type = "AbortIncompleteMultipartUpload"
    }
  }

  dynamic "encryption" {
    for_each = var.kms_key_name == null ? [] : [var.kms_key_name]
    content {
      default_kms_key_name = encryption.value
    }
  }
}

locals {
  prefix = trimsuffix(var.prefix, "/")
}

# Object access under the prefix. Listing is checked against the bucket itself, so the condition
# admits the bucket resource too: the member can list object names, but read and write only here.
resource "google_storage_bucket_iam_member" "memory" {
  bucket = google_storage_bucket.memory.name
  role   = "roles/storage.objectUser"
  member = var.member

  condition {
    title       = "bucket-memory-${replace(local.prefix, "/", "-")}"
    description = "Objects under ${local.prefix}/, and listing the bucket"
    expression  = "resource.name.startsWith(\"projects/_/buckets/${google_storage_bucket.memory.name}/objects/${local.prefix}/\") || resource.type == \"storage.googleapis.com/Bucket\""
  }
}
