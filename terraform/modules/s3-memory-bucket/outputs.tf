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
  value       = [for prefix in local.prefixes : trimsuffix("s3://${aws_s3_bucket.memory.id}/${prefix}", "/")]
}

output "access_policy_json" {
  description = "An IAM policy for agents: read, write and list exactly what bucket-memory needs under the prefixes."
  value       = data.aws_iam_policy_document.access.json
}

output "operator_policy_json" {
  description = "An IAM policy for operators who run recover, compact, verify and erase: the agents' grants plus reading and deleting old versions, under the prefixes only."
  value       = data.aws_iam_policy_document.operator.json
}
