variable "bucket_name" {
  description = "Name of the bucket that holds the memories (one memory per prefix)."
  type        = string
}

variable "location" {
  description = "Bucket location, such as EU or us-central1."
  type        = string
}

variable "prefix" {
  description = "The memory prefix the binding grants, such as teams/blue."
  type        = string
  default     = "memories"
}

variable "member" {
  description = "Who gets access, such as serviceAccount:agent@project.iam.gserviceaccount.com."
  type        = string
}

variable "noncurrent_version_days" {
  description = "Days a deleted or overwritten object version is kept: how far back `bucket-memory recover` reaches."
  type        = number
  default     = 30
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
