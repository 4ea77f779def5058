variable "project" {
  description = "The Google Cloud project that owns the bucket; null uses the provider's project."
  type        = string
  default     = null
}

variable "bucket_name" {
  description = "Name of the bucket that holds the memories (one memory per prefix)."
  type        = string

  validation {
    condition     = can(regex("^[a-z0-9][a-z0-9_.-]{1,61}[a-z0-9]$", var.bucket_name)) && !startswith(var.bucket_name, "goog")
    error_message = "bucket_name must be a valid GCS bucket name: 3 to 63 lowercase letters, digits, _ . and -, starting and ending with a letter or digit, not starting with goog."
  }
}

variable "location" {
  description = "Bucket location, such as EU or us-central1."
  type        = string
}

variable "prefixes" {
  description = "Memory prefixes the bindings grant, such as [\"teams/blue\"]; [\"\"] grants the whole bucket."
  type        = list(string)
  default     = ["memories"]

  validation {
    condition     = length(var.prefixes) > 0
    error_message = "prefixes must name at least one memory prefix ([\"\"] for the whole bucket)."
  }

  validation {
    condition = alltrue([
      for prefix in var.prefixes : can(regex("^([A-Za-z0-9_.=-]+(/[A-Za-z0-9_.=-]+)*)?/?$", prefix))
    ])
    error_message = "Each prefix is path segments of ASCII letters, digits and _ . = - joined by /, with no leading /, no empty segment, no wildcard and no quote (such as teams/blue)."
  }

  validation {
    condition = alltrue([
      for prefix in var.prefixes : alltrue([
        for segment in split("/", trimsuffix(prefix, "/")) : !contains([".", "..", "log", "checkpoints", "erasures"], segment)
      ])
    ])
    error_message = "A prefix may not have a . or .. segment, nor a log, checkpoints or erasures segment (the folders a memory keeps its objects in)."
  }

  validation {
    condition     = alltrue([for prefix in var.prefixes : length(trimsuffix(prefix, "/")) <= 943])
    error_message = "A prefix is at most 943 characters, for a memory's keys (81 more) to fit in the 1024 bytes of an object key."
  }
}

variable "members" {
  description = "Agents: who reads and writes objects under the prefixes, but never an erasure record, such as [\"serviceAccount:agent@project.iam.gserviceaccount.com\"]."
  type        = list(string)
  default     = []

  validation {
    condition     = alltrue([for member in var.members : can(regex("^(serviceAccount|user|group|principal|principalSet):.+", member))])
    error_message = "Each member is an IAM principal such as serviceAccount:NAME@PROJECT.iam.gserviceaccount.com; allUsers and allAuthenticatedUsers are refused."
  }
}

variable "operators" {
  description = "Who runs erase, recover, compact and verify: the members' access plus creating and deleting erasure records, such as [\"group:memory-operators@example.com\"]."
  type        = list(string)
  default     = []

  validation {
    condition     = alltrue([for member in var.operators : can(regex("^(serviceAccount|user|group|principal|principalSet):.+", member))])
    error_message = "Each operator is an IAM principal such as group:NAME@example.com; allUsers and allAuthenticatedUsers are refused."
  }
}

variable "noncurrent_version_days" {
  description = "Days a deleted or overwritten object version is kept: how far back `bucket-memory recover` reaches."
  type        = number
  default     = 30

  validation {
    condition     = var.noncurrent_version_days >= 1 && floor(var.noncurrent_version_days) == var.noncurrent_version_days
    error_message = "noncurrent_version_days must be a whole number of days, at least 1."
  }
}

variable "soft_delete_days" {
  description = "Days GCS soft delete keeps deleted objects, billed on top of noncurrent versions; 0 (the default) turns it off, since versioning already keeps them."
  type        = number
  default     = 0

  validation {
    condition     = var.soft_delete_days == 0 || (var.soft_delete_days >= 7 && var.soft_delete_days <= 90 && floor(var.soft_delete_days) == var.soft_delete_days)
    error_message = "soft_delete_days must be 0 (off) or a whole number of days from 7 to 90, as GCS allows."
  }
}

variable "kms_key_name" {
  description = "Cloud KMS key for default encryption; null uses Google-managed keys."
  type        = string
  default     = null
}

variable "force_destroy" {
  description = "Allow `terraform destroy` to delete a bucket that still holds memories."
  type        = bool
  default     = false
}

variable "labels" {
  description = "Labels for the bucket."
  type        = map(string)
  default     = {}
}
