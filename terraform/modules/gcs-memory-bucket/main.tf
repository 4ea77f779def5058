# A bucket for bucket-memory: uniform access, no public access, versioned (for recovery), with old
# versions expiring, soft delete off unless asked for, and members granted object access under the
# prefixes only.

resource "google_storage_bucket" "memory" {
  #checkov:skip=CKV_GCP_62:Access logs need a separate log bucket; enable them in your organization baseline.
  project                     = var.project
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

  # Versioning already keeps deleted objects for noncurrent_version_days; soft delete would bill them twice.
  soft_delete_policy {
    retention_duration_seconds = var.soft_delete_days * 86400
  }

  dynamic "encryption" {
    for_each = var.kms_key_name == null ? [] : [var.kms_key_name]
    content {
      default_kms_key_name = encryption.value
    }
  }
}

locals {
  # "teams/blue" and "teams/blue/" are the prefix "teams/blue/"; "" is the whole bucket.
  prefixes     = distinct([for prefix in var.prefixes : trimsuffix(prefix, "/") == "" ? "" : "${trimsuffix(prefix, "/")}/"])
  whole_bucket = contains(local.prefixes, "")
  objects      = "projects/_/buckets/${google_storage_bucket.memory.name}/objects/"
  # Listing is checked against the bucket itself, so the condition admits the bucket resource too:
  # members can list object names, but read and write only under the prefixes.
  condition = join(" || ", concat(
    [for prefix in local.prefixes : "resource.name.startsWith(\"${local.objects}${prefix}\")"],
    ["resource.type == \"storage.googleapis.com/Bucket\""],
  ))
}

resource "google_storage_bucket_iam_member" "memory" {
  for_each = toset(var.members)
  bucket   = google_storage_bucket.memory.name
  role     = "roles/storage.objectUser"
  member   = each.value

  dynamic "condition" {
    for_each = local.whole_bucket ? [] : [local.condition]
    content {
      title       = "bucket-memory-prefixes"
      description = "Objects under ${join(", ", local.prefixes)} and listing the bucket"
      expression  = condition.value
    }
  }
}
