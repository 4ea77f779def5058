# A bucket for bucket-memory: uniform access, no public access, versioned (for recovery), with old
# versions expiring, soft delete off unless asked for, and members (agents) and operators granted
# object access under the prefixes only, where only operators write erasure records.

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
  objects      = "projects/_/buckets/${var.bucket_name}/objects/"
  # Listing is checked against the bucket itself, so the condition admits the bucket resource too:
  # members can list object names, but read (and operators write) only under the prefixes.
  condition = join(" || ", concat(
    [for prefix in local.prefixes : "resource.name.startsWith(\"${local.objects}${prefix}\")"],
    ["resource.type == \"storage.googleapis.com/Bucket\""],
  ))
  # What agents may create and delete: objects under the prefixes but under none of their erasures/,
  # the operator's erasure records (readers take an erase change as an erasure only where one names
  # it). IAM conditions compare only the start and end of a name, so a memory nested under a prefix
  # that is not itself among the prefixes is not covered: its parent's agents can write its records.
  write_condition = join(" && ", concat(
    ["(${join(" || ", [for prefix in local.prefixes : "resource.name.startsWith(\"${local.objects}${prefix}\")"])})"],
    [for prefix in local.prefixes : "!resource.name.startsWith(\"${local.objects}${prefix}erasures/\")"],
  ))
}

# Agents read and list under the prefixes, erasure records included...
resource "google_storage_bucket_iam_member" "memory_read" {
  for_each = toset(var.members)
  bucket   = google_storage_bucket.memory.name
  role     = "roles/storage.objectViewer"
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

# ...and create and delete there, but never an erasure record.
resource "google_storage_bucket_iam_member" "memory" {
  for_each = toset(var.members)
  bucket   = google_storage_bucket.memory.name
  role     = "roles/storage.objectUser"
  member   = each.value

  condition {
    title       = "bucket-memory-prefixes-but-erasures"
    description = "Objects under ${join(", ", local.prefixes)}, but not under their erasures/"
    expression  = local.write_condition
  }
}

# Operators (erase, recover, compact, verify) create and delete everything under the prefixes, old
# versions and erasure records included.
resource "google_storage_bucket_iam_member" "operator" {
  for_each = toset(var.operators)
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
