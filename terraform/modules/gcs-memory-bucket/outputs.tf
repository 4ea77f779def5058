output "bucket" {
  description = "The bucket's name."
  value       = google_storage_bucket.memory.name
}

output "memory_url" {
  description = "The open_store URL of the granted prefix."
  value       = "gs://${google_storage_bucket.memory.name}/${local.prefix}"
}
