variable "bucket_name" {
  description = "Name of the bucket that holds the memories (one memory per prefix)."
  type        = string

  validation {
    condition     = can(regex("^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$", var.bucket_name)) && !strcontains(var.bucket_name, "..")
    error_message = "bucket_name must be a valid S3 bucket name: 3 to 63 lowercase letters, digits, dots and hyphens, starting and ending with a letter or digit."
  }
}

variable "prefixes" {
  description = "Memory prefixes the policies grant, such as [\"teams/blue\"]; [\"\"] grants the whole bucket."
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

variable "tenant_tag" {
  description = "A session tag's key, such as \"tenant\": the policies then grant each session the memory <prefix>/<its tag's value> alone (the policy variable aws:PrincipalTag/NAME), one role serving every tenant through AssumeRole or TagSession tags; null grants the prefixes themselves."
  type        = string
  default     = null

  validation {
    condition     = var.tenant_tag == null || (can(regex("^[A-Za-z0-9_.:=+@-]{1,128}$", var.tenant_tag)) && !startswith(lower(coalesce(var.tenant_tag, "-")), "aws:"))
    error_message = "tenant_tag is 1 to 128 ASCII letters, digits and _ . : = + @ -, not starting with aws: (such as tenant)."
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

variable "kms_key_arn" {
  description = "KMS key for server-side encryption (SSE-KMS), also granted to both policies; null uses S3-managed keys (SSE-S3)."
  type        = string
  default     = null

  validation {
    condition     = var.kms_key_arn == null || can(regex("^arn:aws[a-z-]*:kms:[a-z0-9-]+:[0-9]{12}:key/[A-Za-z0-9-]+$", var.kms_key_arn))
    error_message = "kms_key_arn must be a KMS key ARN (arn:aws:kms:REGION:ACCOUNT:key/ID); an alias ARN cannot be granted in IAM."
  }
}

variable "bucket_policy_documents" {
  description = "Further IAM policy documents (JSON) whose statements join the bucket policy, beside the TLS-only statement."
  type        = list(string)
  default     = []

  validation {
    condition     = alltrue([for document in var.bucket_policy_documents : can(jsondecode(document).Statement)])
    error_message = "Each bucket_policy_documents entry must be a JSON policy document with a Statement list."
  }
}

variable "force_destroy" {
  description = "Allow `terraform destroy` to delete a bucket that still holds memories."
  type        = bool
  default     = false
}

variable "tags" {
  description = "Tags for the bucket."
  type        = map(string)
  default     = {}
}
