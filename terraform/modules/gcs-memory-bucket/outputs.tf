output "bucket" {
  description = "The bucket's name."
  value       = google_storage_bucket.memory.name
}

output "memory_urls" {
  description = "The open_store URL of each granted prefix."
  value       = [for prefix in local.prefixes : trimsuffix("gs://${google_storage_bucket.memory.name}/${prefix}", "/")]
}

output "access_condition" {
  description = "The IAM condition of the members' roles/storage.objectViewer binding and of the operators' roles/storage.objectUser binding, null when a prefix grants the whole bucket."
  value       = local.whole_bucket ? null : local.condition
}

output "write_condition" {
  description = "The IAM condition of the members' roles/storage.objectUser binding: under the prefixes, but not under their erasures/."
  value       = local.write_condition
}
