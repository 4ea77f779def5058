variable "bucket_name" {
  description = "Name of the bucket that holds the memories (one memory per prefix)."
  type        = string
}

variable "prefixes" {
  description = "Memory prefixes the access policy grants, such as [\"teams/blue\"]; [\"\"] grants the whole bucket."
  type        = list(string)
  default     = ["memories"]
}

variable "noncurrent_version_days" {
  description = "Days a deleted or overwritten object version is kept: how far back `bucket-memory recover` reaches."
  type        = number
  default     = 30
}

variable "kms_key_arn" {
  description = "KMS key for server-side encryption; null uses S3-managed keys (SSE-S3)."
  type        = string
  default     = null
}

variable "allow_recover" {
  description = "Also grant reading old object versions (s3:ListBucketVersions, s3:GetObjectVersion), for operators who run `recover`."
  type        = bool
  default     = false
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
