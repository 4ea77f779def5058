output "bucket" {
  description = "The bucket's name."
  value       = aws_s3_bucket.memory.id
}

output "bucket_arn" {
  description = "The bucket's ARN."
  value       = aws_s3_bucket.memory.arn
}

output "memory_urls" {
  description = "The open_store URL of each granted prefix."
  value       = [for prefix in var.prefixes : "s3://${aws_s3_bucket.memory.id}/${trimsuffix(prefix, "/")}"]
}

output "access_policy_json" {
  description = "An IAM policy granting one principal exactly what bucket-memory needs under the prefixes."
  value       = local.access_policy
}
